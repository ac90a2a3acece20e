//! `ws_phy_xdma_axis` (boards/nitefury-xdma/rtl/) against the behavioural XDMA channel of
//! `phy/xdma.rs`, at two parameter sets:
//!
//! - 64-bit streams, packets of at most 64 beats, tlast after 8 + 1 idle cycles, no holdoff;
//! - 128-bit streams, no packet limit, tlast in the first idle cycle, 4 cycles of holdoff.
//!
//! Each streams 256 KiB of random words each way at once: host writes of random sizes (a few
//! bytes to 16 KiB) cut into descriptors (page-aligned, unaligned, and now and then with a
//! length that is not a whole number of words, whose partial word the adapter must drop and
//! count), random tvalid gaps on H2C, random tready stalls and read postings on C2H, and
//! `Pattern::Mixed` backpressure on both engine streams. Every word arrives once and in
//! order, the model finds no AXI4-Stream / PG195 / tlast-policy violation in any cycle, and
//! the adapter's counters agree with what was sent. A full-rate run of each prints words per
//! cycle against the ideal of one per cycle per direction (printed, not asserted).

mod phy {
    pub mod common;
    pub mod xdma;
}

use phy::common::{le_words, random_bytes, Window};
use phy::xdma::{C2h, H2c, Params, Reads};
use rand::rngs::StdRng;
use rand::RngExt;
use ws_hdl::dut::{run_test, BlockSpec, Dut, Pattern, StreamSink, StreamSource};

const P64: Params = Params { data_width: 64, max_burst_beats: 64, idle_flush: 8, last_holdoff: 0 };
const P128: Params = Params { data_width: 128, max_burst_beats: 0, idle_flush: 0, last_holdoff: 4 };

fn spec(p: &Params) -> BlockSpec {
    BlockSpec::new("ws_phy_xdma_axis")
        .file("boards/nitefury-xdma/rtl/ws_phy_xdma_axis.v")
        .param("DATA_WIDTH", p.data_width)
        .param("MAX_BURST_BEATS", p.max_burst_beats)
        .param("IDLE_FLUSH", p.idle_flush)
        .param("LAST_HOLDOFF", p.last_holdoff)
}

/// Descriptor lengths for a write of `len` bytes from a buffer that starts `offset` bytes
/// into a 4 KiB page: the driver maps the user pages one descriptor each.
fn pages(len: usize, offset: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut left = len;
    let mut room = 4096 - offset;
    while left > 0 {
        let n = left.min(room);
        out.push(n);
        left -= n;
        room = 4096;
    }
    out
}

/// Queues host writes of about `total` bytes; returns the words the adapter must deliver.
fn queue_writes(h2c: &mut H2c, rng: &mut StdRng, total: usize, full_rate: bool) -> Vec<u32> {
    let mut words = Vec::new();
    let mut sent = 0;
    while sent < total {
        let len = if full_rate {
            64 * 1024
        } else {
            match rng.random_range(0..10) {
                0..5 => rng.random_range(1..=64) * 4,
                5..8 => rng.random_range(64..=1024) * 4,
                _ => rng.random_range(1024..=4096) * 4,
            }
        };
        let (len, offset) = match rng.random_range(0..20) {
            // A length that is not a whole number of words.
            _ if full_rate => (len, 0),
            0 => (len + rng.random_range(1..4), 0),
            // A buffer that does not start on a page, 4-byte aligned or not.
            1..4 => (len, rng.random_range(1..1024) * 4),
            4 => (len, rng.random_range(1..4096)),
            // What host-driver does: page-aligned buffers, whole words.
            _ => (len, 0),
        };
        let bytes = random_bytes(rng, len);
        words.extend(h2c.write(&bytes, &pages(len, offset)));
        sent += len;
    }
    words
}

struct Outcome {
    cycles: u64,
    h2c_window: Window,
    c2h_window: Window,
}

/// Streams about `bytes` each way through a fresh DUT and checks everything.
fn exercise(dut: &mut Dut, p: Params, bytes: usize, full_rate: bool) -> Outcome {
    let seed = dut.seed();
    let mut rng = dut.rng(1);
    let engine = if full_rate { Pattern::Always } else { Pattern::Mixed };

    let mut h2c = H2c::new(dut, p, seed, full_rate);
    let from_host = queue_writes(&mut h2c, &mut rng, bytes, full_rate);
    let to_host = le_words(&random_bytes(&mut rng, bytes));
    let reads = Reads { size: 64 * 1024, random: !full_rate };
    let mut c2h = C2h::new(dut, p, reads, &to_host, seed);
    let mut src = StreamSource::new(dut, "s", seed).pattern(engine);
    let mut sink = StreamSink::new(dut, "m", seed).pattern(engine);
    for &w in &to_host {
        src.push(u64::from(w));
    }
    for &w in &from_host {
        sink.expect(u64::from(w));
    }

    dut.reset(4);
    let start = dut.cycle();
    let limit = 40 * (bytes as u64 / 4) + 100_000;
    while h2c.pending() > 0 || sink.outstanding() > 0 || c2h.outstanding() > 0 {
        h2c.drive(dut);
        c2h.drive(dut);
        src.drive(dut);
        sink.drive(dut);
        dut.eval();
        h2c.sample(dut);
        src.sample(dut);
        sink.sample(dut);
        c2h.sample(dut);
        dut.tick();
        assert!(
            dut.cycle() - start < limit,
            "stalled: {} H2C beats not taken, {} words not delivered to the engine, {} words not sent to the host",
            h2c.pending(),
            sink.outstanding(),
            c2h.outstanding()
        );
    }
    sink.finish();

    // The counters agree with the traffic.
    let stat = |n: &str| dut.get(dut.port(n));
    assert_eq!(stat("stat_h2c_packets"), h2c.writes, "H2C packets");
    assert_eq!(stat("stat_h2c_bad_keep"), h2c.bad_granules, "H2C partial words dropped");
    assert_eq!(stat("stat_c2h_packets"), c2h.packets, "C2H packets");
    assert_eq!(c2h.received, to_host.len() as u64);

    if !full_rate {
        // The run reached the cases it is meant to (not a speed figure).
        assert!(h2c.bad_granules > 0, "no host write had a partial word");
        assert!(c2h.idle_packets > 0, "no packet ended on an idle engine stream");
        if p.max_burst_beats > 0 {
            assert!(c2h.packets > c2h.idle_packets, "no packet reached MAX_BURST_BEATS");
        }
    }

    let o = Outcome { cycles: dut.cycle() - start, h2c_window: h2c.window, c2h_window: c2h.window };
    let h2c_rate = h2c.words as f64 / o.h2c_window.cycles().max(1) as f64;
    let c2h_rate = c2h.received as f64 / o.c2h_window.cycles().max(1) as f64;
    eprintln!(
        "xdma {}-bit (MAX_BURST_BEATS {}, IDLE_FLUSH {}, LAST_HOLDOFF {}){}: {} cycles; \
         H2C {} writes, {} beats, {} words ({} partial words dropped): {h2c_rate:.3} words/cycle (ideal 1); \
         C2H {} beats, {} words in {} packets ({} ended by an idle, {} by the limit), {} reads of at most {} B \
         averaging {:.0} B: {c2h_rate:.3} words/cycle (ideal 1)",
        p.data_width,
        p.max_burst_beats,
        p.idle_flush,
        p.last_holdoff,
        if full_rate { ", full rate" } else { ", random stalls" },
        o.cycles,
        h2c.writes,
        h2c.beats_taken,
        h2c.words,
        h2c.bad_granules,
        c2h.beats,
        c2h.received,
        c2h.packets,
        c2h.idle_packets,
        c2h.packets - c2h.idle_packets,
        c2h.reads_done,
        reads.size,
        c2h.read_bytes as f64 / c2h.reads_done.max(1) as f64,
    );
    o
}

#[test]
fn random_traffic_both_ways_64_bit() {
    run_test("xdma64_random", &spec(&P64), 64, |dut| {
        exercise(dut, P64, 256 * 1024, false);
    });
}

#[test]
fn random_traffic_both_ways_128_bit() {
    run_test("xdma128_random", &spec(&P128), 128, |dut| {
        exercise(dut, P128, 256 * 1024, false);
    });
}

#[test]
fn full_rate_both_widths() {
    for (name, p) in [("xdma64_full", P64), ("xdma128_full", P128)] {
        run_test(name, &spec(&p), 7, |dut| {
            exercise(dut, p, 128 * 1024, true);
        });
    }
}
