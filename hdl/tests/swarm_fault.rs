//! SwarmX faults: nothing is ever summed silently.
//!
//! - A port that stalls for ever in the middle of a chunk: the timeout flags it, the chunk is
//!   aborted with an error flit whose payload names the port, the firmware (played by the
//!   test, reacting to `err_pulse`) masks the port and sets the scale to 1/3, and the node
//!   continues with the three live ports, bit-exact.
//! - A whole chunk with a wrong chunk id on one port: a mismatch blamed on that port, that one
//!   chunk aborted, the stream resynchronised at the next chunk. Likewise one corrupted header
//!   mid-chunk, a port (the reference port) that lost the end of a chunk with its `last`, and
//!   a port that lost one flit: one abort each, never a sum.
//! - A non-gradient flit on the uplink.
//! - Masking a port while traffic flows: each chunk is reduced with one mask, the old or the
//!   new, switching at a chunk boundary.
//! - In a 2 × 4 cascade, a leaf that stalls: its node reports, the root forwards the error
//!   flit with its own port id shifted into the path, the firmware masks the leaf, and the
//!   tree continues with seven leaves.

// Leaf and chunk numbers are ids in the scenarios (port 2 is the dead one, chunk 5 the one
// that breaks) as well as indices, so the loops count them.
#![allow(clippy::needless_range_loop)]

use rand::RngExt;
use ws_common::flit::{ErrorCode, ErrorPayload, Header, Kind};
use ws_common::golden::swarm::{NodeConfig, Tree};
use ws_hdl::dut::{run_test, Dut, Pattern};
use ws_hdl::swarm::tb::{self, beat, operand_set, TreeTb};
use ws_hdl::swarm::{NodeParams, TreeShape};

fn inv(n: u32) -> u32 {
    (1.0f32 / n as f32).to_bits()
}

/// A stream of `chunks` chunks of `len` flits per leaf: `payloads[chunk][index][leaf]`.
fn gradients(rng: &mut impl rand::Rng, leaves: usize, chunks: usize, len: usize) -> Vec<Vec<Vec<u32>>> {
    (0..chunks).map(|_| (0..len).map(|_| operand_set(rng, leaves)).collect()).collect()
}

fn hdr(chunk: usize, index: usize) -> Header {
    Header::new(Kind::Gradient, 9, 77, 1000 + chunk as u16, index as u16)
}

/// Expects chunk `c` at the root as the golden tree reduces it with `nodes`.
fn expect_chunk(
    t: &mut TreeTb,
    fanout: &[usize],
    nodes: &[NodeConfig],
    g: &[Vec<u32>],
    c: usize,
    from: usize,
) {
    let tree = Tree { fanout, nodes };
    for (i, set) in g.iter().enumerate().skip(from) {
        let out = tree.reduce(hdr(c, i), i + 1 == g.len(), set).unwrap();
        for f in out.as_slice() {
            t.up_sink.expect_beat(&beat(f));
        }
    }
}

fn error_beat(code: ErrorCode, path: &[u8], chunk: usize, index: usize) -> [u64; 3] {
    let mut e = ErrorPayload::detected(code, path[path.len() - 1]);
    for p in path[..path.len() - 1].iter().rev() {
        e = e.forwarded(*p);
    }
    [u64::from(e.pack()), 1, hdr(chunk, index).with_kind(Kind::Error).pack()]
}

fn node4() -> TreeShape {
    TreeShape::node(NodeParams::new(4))
}

/// Steps until idle, playing the firmware: on an error pulse of node `node` blaming
/// `port`, run `react` once.
fn run_with_firmware(
    t: &mut TreeTb,
    dut: &mut Dut,
    limit: u64,
    node: usize,
    mut react: impl FnMut(&mut Dut, u64, u64),
) {
    let start = dut.cycle();
    let pulse = TreeTb::csr(dut, node, "err_pulse");
    let code = TreeTb::csr(dut, node, "err_code");
    let port = TreeTb::csr(dut, node, "err_port");
    while t.busy() {
        if dut.get_bool(pulse) {
            let (c, p) = (dut.get(code), dut.get(port));
            react(dut, c, p);
        }
        t.step(dut);
        assert!(dut.cycle() - start < limit, "stuck: {} uplink flits outstanding", t.up_sink.outstanding());
    }
    t.up_sink.finish();
}

#[test]
fn a_port_that_stalls_for_ever_is_flagged_masked_and_the_rest_continue() {
    let shape = node4();
    let spec = tb::tree_spec(&shape).unwrap();
    run_test("swarm_fault_stall", &spec, 61, |dut| {
        let mut rng = dut.rng(1);
        // Random valid on every source (no stalls of hundreds of cycles, so only the dead port
        // times out), Mixed ready at the root.
        let mut t = TreeTb::new(dut, &shape, 61, Pattern::Random(0.6), Pattern::Mixed);
        dut.reset(4);
        let all = NodeConfig::new(4);
        TreeTb::configure(dut, 0, &all, 1000);
        let (chunks, len, dead, stop) = (14usize, 32usize, 2usize, 10usize);
        let g = gradients(&mut rng, 4, chunks, len);
        for (c, chunk) in g.iter().enumerate() {
            for (i, set) in chunk.iter().enumerate() {
                for leaf in 0..4 {
                    // Leaf 2 sends chunks 0..4 and the first 10 flits of chunk 5, then nothing.
                    if leaf == dead && (c > 5 || (c == 5 && i >= stop)) {
                        continue;
                    }
                    t.leaf_src[leaf].push_beat(&[
                        u64::from(set[leaf]),
                        (i + 1 == len) as u64,
                        hdr(c, i).pack(),
                    ]);
                }
            }
        }
        for c in 0..5 {
            expect_chunk(&mut t, &[4], &[all], &g[c], c, 0);
        }
        // Chunk 5 up to the stall, then the error flit naming port 2, at index 10.
        let g5: Vec<Vec<u32>> = g[5][..stop].to_vec();
        let tree = Tree { fanout: &[4], nodes: &[all] };
        for (i, set) in g5.iter().enumerate() {
            t.up_sink.expect_beat(&beat(&tree.reduce(hdr(5, i), false, set).unwrap().as_slice()[0]));
        }
        t.up_sink.expect_beat(&error_beat(ErrorCode::Timeout, &[dead as u8], 5, stop));
        // The firmware masks port 2 and scales by 1/3; chunks 6.. are sums of three ports.
        let three = all.mask(0b1011).scale(inv(3));
        for c in 6..chunks {
            expect_chunk(&mut t, &[4], &[three], &g[c], c, 0);
        }
        let mut reacted = 0;
        let mut timeouts_seen = 0;
        run_with_firmware(&mut t, dut, 400_000, 0, |dut, code, port| {
            assert_eq!((code, port), (ErrorCode::Timeout as u64, dead as u64));
            timeouts_seen += 1;
            let ports = dut.get(TreeTb::csr(dut, 0, "err_timeout_ports"));
            assert_eq!(ports, 1 << dead, "the ports without a flit");
            TreeTb::configure(dut, 0, &three, 1000);
            reacted += 1;
        });
        assert_eq!((reacted, timeouts_seen), (1, 1));
        assert_eq!(TreeTb::read(dut, 0, "cnt_errors", 0), 1);
        assert_eq!(TreeTb::read(dut, 0, "stat_up_mask", 0), 0b1011);
        // Ports 0, 1 and 3 discarded the rest of chunk 5.
        assert_eq!(TreeTb::read(dut, 0, "cnt_dropped", 0), 3 * (len - stop) as u64);
        assert!(TreeTb::read(dut, 0, "cnt_up_wait", dead) >= 1000);
        let last = ErrorPayload::unpack(TreeTb::read(dut, 0, "err_last_payload", 0) as u32).unwrap();
        assert_eq!(last, ErrorPayload::detected(ErrorCode::Timeout, dead as u8));
    });
}

#[test]
fn a_wrong_chunk_id_on_one_port_aborts_that_chunk_only() {
    let shape = node4();
    let spec = tb::tree_spec(&shape).unwrap();
    run_test("swarm_fault_chunk_id", &spec, 62, |dut| {
        let mut rng = dut.rng(2);
        let mut t = TreeTb::new(dut, &shape, 62, Pattern::Mixed, Pattern::Mixed);
        dut.reset(4);
        let all = NodeConfig::new(4);
        TreeTb::configure(dut, 0, &all, 0);
        let (chunks, len) = (12usize, 16usize);
        let g = gradients(&mut rng, 4, chunks, len);
        for (c, chunk) in g.iter().enumerate() {
            for (i, set) in chunk.iter().enumerate() {
                for leaf in 0..4 {
                    let mut h = hdr(c, i);
                    // Chunk 3: port 1 labels the whole chunk with a wrong chunk id.
                    if c == 3 && leaf == 1 {
                        h.chunk = h.chunk.wrapping_add(100);
                    }
                    // Chunk 6, flit 5 of port 3 carries a corrupted step.
                    if c == 6 && i == 5 && leaf == 3 {
                        h.step ^= 0x40;
                    }
                    // Chunk 8: port 0 (the reference) loses its last two flits, `last` with them.
                    if c == 8 && i >= 14 && leaf == 0 {
                        continue;
                    }
                    // Chunk 10: port 2 loses flit 3.
                    if c == 10 && i == 3 && leaf == 2 {
                        continue;
                    }
                    t.leaf_src[leaf].push_beat(&[u64::from(set[leaf]), (i + 1 == len) as u64, h.pack()]);
                }
            }
        }
        let tree = Tree { fanout: &[4], nodes: &[all] };
        let upto = |t: &mut TreeTb, c: usize, n: usize| {
            for (i, set) in g[c][..n].iter().enumerate() {
                t.up_sink.expect_beat(&beat(&tree.reduce(hdr(c, i), false, set).unwrap().as_slice()[0]));
            }
        };
        for c in 0..chunks {
            match c {
                // One abort, blamed on port 1; every port drops the chunk it is in.
                3 => t.up_sink.expect_beat(&error_beat(ErrorCode::Mismatch, &[1], 3, 0)),
                // The corrupted flit: one abort at index 5; all ports drop through `last`.
                6 => {
                    upto(&mut t, 6, 5);
                    t.up_sink.expect_beat(&error_beat(ErrorCode::Mismatch, &[3], 6, 5));
                }
                // Port 0 is at chunk 9 while the others are at chunk 8 index 14: port 0 is the
                // odd one out, the abort names chunk 8 index 14, and port 0 keeps its chunk 9.
                8 => {
                    upto(&mut t, 8, 14);
                    t.up_sink.expect_beat(&error_beat(ErrorCode::Mismatch, &[0], 8, 14));
                }
                10 => {
                    upto(&mut t, 10, 3);
                    t.up_sink.expect_beat(&error_beat(ErrorCode::Mismatch, &[2], 10, 3));
                }
                _ => expect_chunk(&mut t, &[4], &[all], &g[c], c, 0),
            }
        }
        t.run(dut, 200_000);
        assert_eq!(TreeTb::read(dut, 0, "cnt_errors", 0), 4, "one abort per fault, then aligned");
    });
}

#[test]
fn a_non_gradient_on_the_uplink_is_a_kind_error() {
    let shape = node4();
    let spec = tb::tree_spec(&shape).unwrap();
    run_test("swarm_fault_kind", &spec, 63, |dut| {
        let mut t = TreeTb::new(dut, &shape, 63, Pattern::Mixed, Pattern::Mixed);
        dut.reset(4);
        let all = NodeConfig::new(4);
        TreeTb::configure(dut, 0, &all, 0);
        for leaf in 0..4 {
            let k = if leaf == 2 { Kind::Control } else { Kind::Gradient };
            t.leaf_src[leaf].push_beat(&[1, 1, hdr(0, 0).with_kind(k).pack()]);
        }
        t.up_sink.expect_beat(&error_beat(ErrorCode::Kind, &[2], 0, 0));
        let mut rng = dut.rng(3);
        let g = gradients(&mut rng, 4, 1, 8);
        for (i, set) in g[0].iter().enumerate() {
            for leaf in 0..4 {
                t.leaf_src[leaf].push_beat(&[u64::from(set[leaf]), (i == 7) as u64, hdr(1, i).pack()]);
            }
        }
        expect_chunk(&mut t, &[4], &[all], &g[0], 1, 0);
        t.run(dut, 50_000);
    });
}

/// The mask changes while chunks flow: each chunk must be the golden sum under one of the two
/// configurations, every flit of a chunk under the same one, and the switch happens once.
#[test]
fn masking_a_port_mid_run_switches_at_a_chunk_boundary() {
    let shape = node4();
    let spec = tb::tree_spec(&shape).unwrap();
    run_test("swarm_fault_mask_mid_run", &spec, 64, |dut| {
        let mut rng = dut.rng(4);
        let mut t = TreeTb::new(dut, &shape, 64, Pattern::Mixed, Pattern::Mixed);
        t.up_sink = ws_hdl::dut::StreamSink::new(dut, "m_up", 64).pattern(Pattern::Mixed).unchecked();
        dut.reset(4);
        let old = NodeConfig::new(4);
        let new = old.mask(0b0111).scale(inv(3));
        TreeTb::configure(dut, 0, &old, 0);
        let (chunks, len) = (40usize, 24usize);
        let g = gradients(&mut rng, 4, chunks, len);
        for (c, chunk) in g.iter().enumerate() {
            for (i, set) in chunk.iter().enumerate() {
                for leaf in 0..4 {
                    t.leaf_src[leaf].push_beat(&[
                        u64::from(set[leaf]),
                        (i + 1 == len) as u64,
                        hdr(c, i).pack(),
                    ]);
                }
            }
        }
        // Switch when a random number of flits has come out, mid-chunk or not.
        let switch_after = rng.random_range(100..700usize);
        let mut switched = false;
        let mut got = Vec::new();
        let limit = dut.cycle() + 1_000_000;
        while got.len() < chunks * len {
            if !switched && got.len() >= switch_after {
                TreeTb::configure(dut, 0, &new, 0);
                switched = true;
            }
            if let Some(b) = t.step(dut) {
                got.push(b);
            }
            assert!(dut.cycle() < limit, "stuck after {} flits", got.len());
        }
        let golden = |cfg: &NodeConfig, c: usize, i: usize| {
            let tree = Tree { fanout: &[4], nodes: std::slice::from_ref(cfg) };
            beat(&tree.reduce(hdr(c, i), i + 1 == len, &g[c][i]).unwrap().as_slice()[0]).to_vec()
        };
        let mut switched_at = None;
        for c in 0..chunks {
            let flits = &got[c * len..(c + 1) * len];
            let under = |cfg: &NodeConfig| (0..len).all(|i| flits[i] == golden(cfg, c, i));
            let (is_old, is_new) = (under(&old), under(&new));
            assert!(is_old || is_new, "chunk {c} is neither the old nor the new configuration's sum");
            if is_new && !is_old && switched_at.is_none() {
                switched_at = Some(c);
            }
            if let Some(s) = switched_at {
                assert!(is_new, "chunk {c} went back to the old mask after chunk {s}");
            }
        }
        let s = switched_at.expect("the new mask never took effect");
        assert!(s > 0 && s < chunks, "switch at chunk {s}");
        assert_eq!(TreeTb::read(dut, 0, "stat_up_mask", 0), 0b0111);
        // Port 3 kept sending after the switch; its flits were discarded, not summed.
        assert_eq!(TreeTb::read(dut, 0, "cnt_dropped", 0), ((chunks - s) * len) as u64);
    });
}

#[test]
fn a_cascade_forwards_a_leaf_timeout_with_the_path() {
    let shape = TreeShape::cascade(&[2, 4]);
    let spec = tb::tree_spec(&shape).unwrap();
    run_test("swarm_fault_cascade", &spec, 65, |dut| {
        let mut rng = dut.rng(5);
        let mut t = TreeTb::new(dut, &shape, 65, Pattern::Random(0.6), Pattern::Mixed);
        dut.reset(4);
        let mut nodes = [NodeConfig::new(2).scale(inv(8)), NodeConfig::new(4), NodeConfig::new(4)];
        // Inner nodes time out first, the root much later: the report nearest the fault wins.
        TreeTb::configure(dut, 0, &nodes[0], 20_000);
        TreeTb::configure(dut, 1, &nodes[1], 800);
        TreeTb::configure(dut, 2, &nodes[2], 800);
        let (chunks, len, dead, stop) = (8usize, 24usize, 5usize, 7usize);
        let g = gradients(&mut rng, 8, chunks, len);
        for (c, chunk) in g.iter().enumerate() {
            for (i, set) in chunk.iter().enumerate() {
                for leaf in 0..8 {
                    if leaf == dead && (c > 2 || (c == 2 && i >= stop)) {
                        continue;
                    }
                    t.leaf_src[leaf].push_beat(&[
                        u64::from(set[leaf]),
                        (i + 1 == len) as u64,
                        hdr(c, i).pack(),
                    ]);
                }
            }
        }
        for c in 0..2 {
            expect_chunk(&mut t, &[2, 4], &nodes, &g[c], c, 0);
        }
        let tree = Tree { fanout: &[2, 4], nodes: &nodes };
        for (i, set) in g[2][..stop].iter().enumerate() {
            t.up_sink.expect_beat(&beat(&tree.reduce(hdr(2, i), false, set).unwrap().as_slice()[0]));
        }
        // Node 2 (root port 1) blames its port 1 (leaf 5); the root adds its port 1.
        t.up_sink.expect_beat(&error_beat(ErrorCode::Timeout, &[1, 1], 2, stop));
        let masked = [NodeConfig::new(2).scale(inv(7)), NodeConfig::new(4), NodeConfig::new(4).mask(0b1101)];
        for c in 3..chunks {
            expect_chunk(&mut t, &[2, 4], &masked, &g[c], c, 0);
        }
        let mut reacted = 0;
        run_with_firmware(&mut t, dut, 600_000, 2, |dut, code, port| {
            assert_eq!((code, port), (ErrorCode::Timeout as u64, 1));
            TreeTb::configure(dut, 2, &masked[2], 800);
            TreeTb::configure(dut, 0, &masked[0], 20_000);
            reacted += 1;
        });
        nodes = masked;
        assert_eq!(reacted, 1);
        assert_eq!(TreeTb::read(dut, 2, "cnt_errors", 0), 1);
        assert_eq!(TreeTb::read(dut, 0, "cnt_errors", 0), 1, "the root forwarded once");
        assert_eq!(TreeTb::read(dut, 0, "err_forward_ports", 0), 0, "a pulse, long gone");
        let fwd = ErrorPayload::unpack(TreeTb::read(dut, 0, "err_last_payload", 0) as u32).unwrap();
        assert_eq!((fwd.hops, fwd.path[0], fwd.origin_port()), (2, 1, Some(1)));
        assert_eq!(TreeTb::read(dut, 2, "stat_up_mask", 0), u64::from(nodes[2].mask));
    });
}
