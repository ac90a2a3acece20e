//! `link-stream PHY_ADDR STATE_DIR TOTAL_BYTES`: the host process of the `link_resume`
//! scenario. It streams TOTAL_BYTES of a position-addressed pseudo-random stream on the
//! weights channel to the board's echo window and appends the echo to `STATE_DIR/echo.bin`,
//! keeping the receiving stream's checkpoint in `STATE_DIR/checkpoint` (written after the
//! bytes, before they are acknowledged). Started again after being killed, it resumes: the
//! receiving stream from its checkpoint, the sending stream from what the board says it
//! committed. It prints `connected …`, `echoed N` lines and `done` on stdout.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use host_driver::link::{Config, Link, RxCheckpoint};
use host_driver::transport::SimTransport;
use ws_common::link::Channel;

/// The stream's bytes at `[from, from + len)`; `from` and `len` multiples of 4.
fn stream(from: usize, len: usize) -> Vec<u8> {
    host_driver::link::echo::stream_bytes(SEED, from, len)
}

/// The stream `link_resume` checks the echo against.
const SEED: u64 = 7;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, addr, dir, total] = &args[..] else {
        eprintln!("usage: link-stream PHY_ADDR STATE_DIR TOTAL_BYTES");
        std::process::exit(2);
    };
    let total: usize = total.parse().expect("TOTAL_BYTES");
    let dir = Path::new(dir);
    let echo_path = dir.join("echo.bin");
    let cp_path = dir.join("checkpoint");
    let checkpoint = fs::read_to_string(&cp_path).ok().map(|t| {
        let mut w = t.split_whitespace().map(|v| v.parse::<u32>().expect("checkpoint"));
        RxCheckpoint { channel: Channel::Weights, expected: w.next().unwrap(), committed: w.next().unwrap() }
    });
    // The echo file holds exactly the committed bytes (it may hold more if the process died
    // between writing them and the checkpoint: those come again, so cut them).
    let kept = checkpoint.map_or(0, |c| c.committed as u64);
    OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(&echo_path)
        .and_then(|f| f.set_len(kept))
        .expect("cutting the echo file to the checkpoint");
    let mut echo = OpenOptions::new().append(true).open(&echo_path).expect("echo file");

    let t = SimTransport::connect(addr.parse().expect("PHY_ADDR")).expect("PHY port");
    let cfg = Config { max_payload: 4096, ..Config::default() };
    let cps: Vec<RxCheckpoint> = checkpoint.into_iter().collect();
    let mut link = Link::resume(Box::new(t), cfg, &cps, Duration::from_secs(20)).expect("HELLO");
    let mut sent = if cps.is_empty() {
        0
    } else {
        link.endpoint().peer_state(Channel::Weights).expect("board state").rx_committed as usize
    };
    let mut got = kept as usize;
    println!("connected resumed={} send_from={sent} receive_from={got}", !cps.is_empty());
    let mut buf = vec![0u8; 256 << 10];
    let mut next_report = got + (256 << 10);
    let start = Instant::now();
    while got < total {
        if sent < total {
            let chunk = stream(sent, (total - sent).min(64 << 10));
            sent += link.endpoint().write(Channel::Weights, &chunk).expect("bulk write");
        }
        link.pump(Duration::from_millis(1)).expect("link pump");
        loop {
            let n = link.endpoint().read(Channel::Weights, &mut buf).expect("bulk read");
            if n == 0 {
                break;
            }
            echo.write_all(&buf[..n]).expect("echo file");
            got += n;
        }
        if let Some(cp) = link.endpoint().checkpoint(Channel::Weights) {
            let tmp = dir.join("checkpoint.tmp");
            fs::write(&tmp, format!("{} {}\n", cp.expected, cp.committed)).expect("checkpoint");
            fs::rename(&tmp, &cp_path).expect("checkpoint");
        }
        if got >= next_report {
            println!("echoed {got}");
            next_report = got + (256 << 10);
        }
        assert!(start.elapsed() < Duration::from_secs(300), "link-stream: stuck at {got} of {total}");
    }
    println!("echoed {got}");
    println!("done");
}
