//! Host endpoint against a responder endpoint standing for the board's engine, over an
//! in-memory wire with the shared fault injector in both directions.

use super::*;
use sha2::{Digest, Sha256};
use ws_common::link::fault::{parse_rules, Dir, Injector, Kind};
use ws_common::link::hello::HelloError;
use ws_common::link::{Channel, CHANNELS};

/// xorshift64*, for stream contents and chunk sizes.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A stream's contents: `len` bytes from a seed.
fn stream(len: usize, seed: u64) -> Vec<u8> {
    let mut r = Rng(seed | 1);
    (0..len).map(|_| r.next() as u8).collect()
}

/// One side's application: what it writes on its sending channels and reads on its
/// receiving ones.
struct App {
    out: [Vec<u8>; CHANNELS],
    sent: [usize; CHANNELS],
    got: [Vec<u8>; CHANNELS],
    /// Largest read per step (a slow reader reads little).
    read_chunk: usize,
}

impl App {
    fn new(role: Role, len: usize, seed: u64, read_chunk: usize) -> App {
        let out = std::array::from_fn(|c| {
            let ch = Channel::ALL[c];
            if role.sends(ch) {
                stream(len, seed * 31 + c as u64)
            } else {
                Vec::new()
            }
        });
        App { out, sent: [0; CHANNELS], got: Default::default(), read_chunk }
    }

    fn step(&mut self, ep: &mut Endpoint, rng: &mut Rng) {
        let mut buf = vec![0u8; self.read_chunk];
        for ch in Channel::ALL {
            let c = ch.index();
            if self.sent[c] < self.out[c].len() {
                let n = (4 * (1 + rng.below(8192)) as usize).min(self.out[c].len() - self.sent[c]);
                self.sent[c] += ep.write(ch, &self.out[c][self.sent[c]..self.sent[c] + n]).unwrap();
            }
            if ep.readable(ch) > 0 {
                let n = ep.read(ch, &mut buf).unwrap();
                self.got[c].extend_from_slice(&buf[..n]);
            }
        }
    }
}

/// Two endpoints on a wire; `faults` applies to both directions.
struct Rig {
    host: Endpoint,
    board: Endpoint,
    to_board: Injector,
    to_host: Injector,
    now: u64,
    rng: Rng,
}

impl Rig {
    fn new(cfg: Config, faults: &str, seed: u64) -> Rig {
        let rules = parse_rules(faults).unwrap();
        Rig {
            host: Endpoint::new(Role::Initiator, cfg),
            board: Endpoint::new(Role::Responder, cfg),
            to_board: Injector::new(Dir::ToBoard, &rules, seed),
            to_host: Injector::new(Dir::ToHost, &rules, seed + 1),
            now: 0,
            rng: Rng(seed * 2 + 1),
        }
    }

    /// One step of 100 ticks: both sides send what is due, through the injectors, cut into
    /// random reads.
    fn step(&mut self) {
        self.now += 100;
        let (mut wire, mut after) = (Vec::new(), Vec::new());
        self.host.output(self.now, &mut wire, 256 << 10);
        self.to_board.push(&wire, self.now, &mut after);
        self.to_board.poll(self.now, &mut after);
        feed(&mut self.board, &after, self.now, &mut self.rng);
        wire.clear();
        after.clear();
        self.board.output(self.now, &mut wire, 256 << 10);
        self.to_host.push(&wire, self.now, &mut after);
        self.to_host.poll(self.now, &mut after);
        feed(&mut self.host, &after, self.now, &mut self.rng);
    }
}

fn feed(ep: &mut Endpoint, bytes: &[u8], now: u64, rng: &mut Rng) {
    let mut rest = bytes;
    while !rest.is_empty() {
        let n = (1 + rng.below(20_000) as usize).min(rest.len());
        ep.input(&rest[..n], now);
        rest = &rest[n..];
    }
}

fn sha(b: &[u8]) -> [u8; 32] {
    Sha256::digest(b).into()
}

/// Runs both apps until every stream arrived; returns the steps taken.
fn run(rig: &mut Rig, host: &mut App, board: &mut App, max_steps: u64) -> u64 {
    let mut rng = Rng(77);
    for step in 0..max_steps {
        rig.step();
        host.step(&mut rig.host, &mut rng);
        board.step(&mut rig.board, &mut rng);
        let done = |a: &App, b: &App| (0..CHANNELS).all(|c| b.got[c].len() == a.out[c].len());
        if done(host, board) && done(board, host) {
            return step;
        }
    }
    panic!(
        "streams did not finish in {max_steps} steps: host {:?} board {:?}",
        host.got.iter().map(Vec::len).collect::<Vec<_>>(),
        board.got.iter().map(Vec::len).collect::<Vec<_>>()
    );
}

fn check_identical(a: &App, b: &App) {
    for c in 0..CHANNELS {
        assert_eq!(sha(&b.got[c]), sha(&a.out[c]), "channel {c}: SHA-256 of what arrived differs");
    }
}

#[test]
fn every_bulk_stream_in_both_directions_arrives_intact() {
    let mut rig = Rig::new(Config::default(), "", 1);
    let mut host = App::new(Role::Initiator, 3 << 20, 1, 1 << 20);
    let mut board = App::new(Role::Responder, 3 << 20, 2, 1 << 20);
    run(&mut rig, &mut host, &mut board, 200_000);
    check_identical(&host, &board);
    check_identical(&board, &host);
    assert!(matches!(rig.host.state(), LinkState::Up { max_payload: 16384, window: 32, resumed: false }));
    for ch in [Channel::Weights, Channel::Gradients, Channel::Data] {
        let s = rig.host.sender(ch).unwrap().stats();
        assert_eq!((s.retransmits, s.timeouts), (0, 0), "{ch:?}: a clean link retransmits nothing");
    }
}

#[test]
fn faults_are_all_repaired_and_all_accounted_for() {
    for seed in 0..3 {
        let cfg = Config { max_payload: 4096, ..Config::default() };
        let mut rig = Rig::new(cfg, "both:flip:rate=0.01 both:drop:rate=0.01 both:dup:rate=0.001", seed);
        let mut host = App::new(Role::Initiator, 2 << 20, seed, 1 << 20);
        let mut board = App::new(Role::Responder, 2 << 20, seed + 9, 1 << 20);
        run(&mut rig, &mut host, &mut board, 400_000);
        check_identical(&host, &board);
        check_identical(&board, &host);

        for (inj, ep, peer) in [(&rig.to_board, &rig.board, &rig.host), (&rig.to_host, &rig.host, &rig.board)]
        {
            let s = inj.stats();
            assert!(s.total(Kind::Flip) > 10 && s.total(Kind::Drop) > 10, "seed {seed}: {}", s.summary());
            // Every payload hit is exactly one pcrc error on its channel.
            assert_eq!(ep.stats().payload_errors, s.payload_hits, "seed {seed}: {}", s.summary());
            // Header hits: at least as many hcrc errors (false candidates add a few).
            let h = ep.stats().header_errors;
            assert!(h >= s.header_hits && h <= s.header_hits + 8, "seed {seed}: {h} vs {}", s.header_hits);
            // Every lost DATA frame (dropped or damaged) was sent again.
            let lost: u64 = s.total_data(Kind::Drop)
                + s.payload_hits.iter().sum::<u64>()
                + s.header_hits.min(s.total_data(Kind::Flip));
            let retx: u64 =
                Channel::ALL.iter().filter_map(|&c| peer.sender(c)).map(|x| x.stats().retransmits).sum();
            assert!(
                retx >= s.total_data(Kind::Drop),
                "seed {seed}: {retx} retransmits for {lost} lost frames"
            );
            // Every duplicated DATA frame was seen as a duplicate.
            let dups: u64 =
                Channel::ALL.iter().filter_map(|&c| ep.receiver(c)).map(|r| r.stats().duplicates).sum();
            assert!(
                dups >= s.total_data(Kind::Dup),
                "seed {seed}: {dups} duplicates for {}",
                s.total_data(Kind::Dup)
            );
        }
    }
}

#[test]
fn a_slow_reader_stalls_the_sender_on_credit_without_overflow() {
    let cfg = Config { rx_buffer: 64 << 10, tx_buffer: 256 << 10, ..Config::default() };
    let mut rig = Rig::new(cfg, "", 3);
    let mut host = App::new(Role::Initiator, 1 << 20, 3, 1 << 20);
    // The board reads 4 KiB per step: far slower than the link.
    let mut board = App::new(Role::Responder, 0, 4, 4096);
    let mut stalled = false;
    let mut rng = Rng(5);
    for _ in 0..100_000 {
        rig.step();
        host.step(&mut rig.host, &mut rng);
        board.step(&mut rig.board, &mut rng);
        let r = rig.board.receiver(Channel::Weights).unwrap();
        assert!(rig.board.readable(Channel::Weights) <= 64 << 10, "the receive buffer overflowed");
        assert_eq!(r.stats().credit_violations, 0);
        let s = rig.host.sender(Channel::Weights).unwrap();
        stalled |= s.stats().credit_stalls > 0 && host.sent[Channel::Weights.index()] < (1 << 20);
        if board.got[Channel::Weights.index()].len() == 1 << 20 {
            break;
        }
    }
    assert!(stalled, "the host never blocked on credit");
    assert_eq!(sha(&board.got[Channel::Weights.index()]), sha(&host.out[Channel::Weights.index()]));
}

#[test]
fn a_restarted_host_resumes_where_the_board_committed() {
    let mut rig = Rig::new(Config::default(), "", 4);
    let src = stream(4 << 20, 42);
    let mut rng = Rng(1);
    let mut sent = 0usize;
    let mut board_got = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    // First host process: sends about half, then dies with frames in flight.
    while board_got.len() < 2 << 20 {
        rig.step();
        if sent < src.len() {
            let n = (4 * (1 + rng.below(4096)) as usize).min(src.len() - sent);
            sent += rig.host.write(Channel::Weights, &src[sent..sent + n]).unwrap();
        }
        let n = rig.board.read(Channel::Weights, &mut buf).unwrap();
        board_got.extend_from_slice(&buf[..n]);
    }
    assert!(!rig.host.flushed(Channel::Weights), "kill it with data unacknowledged");
    // A new process knows nothing but the source; it asks to resume.
    rig.host = Endpoint::new(Role::Initiator, Config { resume: true, ..Config::default() });
    while !rig.host.is_up() {
        rig.step();
    }
    assert!(matches!(rig.host.state(), LinkState::Up { resumed: true, .. }));
    let from = rig.host.peer_state(Channel::Weights).unwrap().rx_committed as usize;
    assert!(from >= board_got.len() && from <= sent, "resume point {from}");
    assert_eq!(rig.host.tx_position(Channel::Weights), Some(from as u32));
    let mut sent = from;
    while board_got.len() < src.len() {
        rig.step();
        if sent < src.len() {
            let n = (64 << 10).min(src.len() - sent);
            sent += rig.host.write(Channel::Weights, &src[sent..sent + n]).unwrap();
        }
        let n = rig.board.read(Channel::Weights, &mut buf).unwrap();
        board_got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(board_got.len(), src.len(), "nothing duplicated");
    assert_eq!(sha(&board_got), sha(&src), "nothing lost");
}

#[test]
fn a_board_of_another_major_version_is_refused_naming_both() {
    let mut host = Endpoint::new(Role::Initiator, Config::default());
    let mut wire = Vec::new();
    host.output(0, &mut wire, 1 << 20);
    // The board answers HELLO | ERROR with its own version, 3.1.
    let mut hello = ws_common::link::hello::Hello::new(4096, 16).encode();
    hello[0] = 3;
    hello[1] = 1;
    let h = ws_common::link::Header {
        length: hello.len() as u32,
        ..ws_common::link::Header::new(
            Channel::Link,
            ws_common::link::flags::HELLO | ws_common::link::flags::ERROR,
        )
    };
    let mut frame = vec![0u8; ws_common::link::frame_len(hello.len())];
    ws_common::link::encode_frame(&h, &hello, &mut frame).unwrap();
    host.input(&frame, 1);
    let LinkState::Refused(e) = host.state().clone() else { panic!("{:?}", host.state()) };
    assert_eq!(e, HelloError::VersionMismatch { peer: (3, 1), ours: (2, 1) });
    let msg = e.to_string();
    assert!(msg.contains("3.1") && msg.contains("2.1"), "{msg}");
}

#[test]
fn writes_that_are_not_words_or_on_the_wrong_channel_are_refused() {
    let mut host = Endpoint::new(Role::Initiator, Config::default());
    assert_eq!(host.write(Channel::Weights, &[1, 2, 3]), Err(StreamError::NotWords(3)));
    assert_eq!(host.write(Channel::Trace, &[0; 4]), Err(StreamError::WrongDirection(Channel::Trace)));
    assert_eq!(host.read(Channel::Data, &mut [0; 4]), Err(StreamError::WrongDirection(Channel::Data)));
    assert_eq!(host.write(Channel::Weights, &[0; 8]), Ok(0), "nothing is taken before HELLO");
}
