//! `ws_swarm_node` alone, against the golden model (`ws_common::golden::swarm`):
//!
//! - N = 2, 3, 4, 8 and 16 downstream ports, in the fp32, bf16 (two fp32 flits out per flit
//!   in) and bf16-out wire formats, with and without the 1/N scale;
//! - random backpressure on every port (`Pattern::Mixed` on all sources and sinks) and random
//!   skew between ports (each leaf starts after its own random delay);
//! - random edge-case operands (zeros of both signs, infinities, NaNs, subnormals, huge and
//!   tiny exponents, cancellations) in every flit;
//! - the downlink broadcast running at the same time, each flit checked on every port;
//! - the CSR-facing port list of the RTL against `ws_hdl::swarm::tb::CSR_PORTS`.
//!
//! Every reduced flit is compared bit for bit, header and `last` included. The flit counts
//! are chosen so that the suite stays within a couple of minutes on two cores once the
//! models are cached; `reduced_flits_at_scale` runs the 10^5 reduced flits per
//! configuration for N = 4 and 16, fp32 and bf16.

use rand::RngExt;
use ws_common::golden::fp;
use ws_common::golden::swarm::{Dtype, NodeConfig};
use ws_hdl::dut::{run_test, Direction, Dut, Pattern};
use ws_hdl::swarm::tb::{self, push_gradients, push_weights, TreeTb, CSR_PORTS};
use ws_hdl::swarm::{NodeParams, TreeShape};

/// `1/n` as binary32 bits.
fn inv(n: u32) -> u32 {
    (1.0f32 / n as f32).to_bits()
}

/// One reduction run of a single node: `flits` gradient flits per port in chunks of up to 40,
/// 2 000 weight flits down, everything under Mixed backpressure with up to 300 cycles of skew.
fn node_run(dut: &mut Dut, shape: &TreeShape, cfg: NodeConfig, flits: u64) -> u64 {
    let seed = dut.seed();
    let mut rng = dut.rng(0x51);
    let mut t = TreeTb::new(dut, shape, seed, Pattern::Mixed, Pattern::Mixed);
    for s in t.leaf_start.iter_mut() {
        *s = rng.random_range(0..300);
    }
    dut.reset(4);
    TreeTb::configure(dut, 0, &cfg, 0);
    let nodes = [cfg];
    let pushed = push_gradients(&mut t, &nodes, &mut rng, flits, 40);
    push_weights(&mut t, &nodes, &mut rng, 2000);
    let (c0, w0) = (dut.cycle(), std::time::Instant::now());
    t.run(dut, 400 * flits + 20_000);
    eprintln!(
        "N={} {:?} mask {:#x}: {flits} flits per port, {} reduced, {} cycles, {:.1} s",
        shape.leaves(),
        cfg.dtype,
        cfg.mask,
        pushed.reduced,
        dut.cycle() - c0,
        w0.elapsed().as_secs_f64()
    );
    // The counters agree with what went through.
    assert_eq!(TreeTb::read(dut, 0, "cnt_reduced", 0), pushed.reduced);
    assert_eq!(TreeTb::read(dut, 0, "cnt_errors", 0), 0);
    assert_eq!(TreeTb::read(dut, 0, "cnt_bcast", 0), 2000);
    for p in 0..shape.leaves() {
        assert_eq!(TreeTb::read(dut, 0, "cnt_up_flits", p), flits, "port {p}");
        let dn = if cfg.mask >> p & 1 == 1 { 2000 } else { 0 };
        assert_eq!(TreeTb::read(dut, 0, "cnt_dn_flits", p), dn, "port {p}");
    }
    pushed.reduced
}

fn shape(n: u32) -> TreeShape {
    TreeShape::node(NodeParams::new(n))
}

/// The sweep of port counts and formats, at a size the whole suite can afford.
#[test]
fn reduces_bit_exact_across_ports_and_formats() {
    for n in [2u32, 3, 4, 8, 16] {
        let s = shape(n);
        let spec = tb::tree_spec(&s).unwrap();
        let flits = if n >= 8 { 3_000 } else { 6_000 };
        run_test(&format!("swarm_node_n{n}"), &spec, 100 + u64::from(n), |dut| {
            let all = NodeConfig::new(n as usize);
            node_run(dut, &s, all, flits);
            node_run(dut, &s, all.dtype(Dtype::Bf16).scale(inv(n)), flits);
            node_run(dut, &s, all.dtype(Dtype::Bf16Out), flits / 2);
            // A mask that leaves ports out (port 0 always on, others at random).
            let mut rng = dut.rng(7);
            let mask = 1 | (rng.random::<u16>() & ((1u32 << n) - 1) as u16);
            node_run(dut, &s, all.mask(mask).scale(inv(mask.count_ones())), flits / 2);
        });
    }
}

/// The figure: at least 10^5 reduced flits per configuration, here N = 4 and N = 16
/// in fp32 and bf16 (bf16 sends two fp32 flits up per flit in, so 50 000 flits in make
/// 10^5 out).
#[test]
fn reduced_flits_at_scale() {
    for n in [4u32, 16] {
        let s = shape(n);
        let spec = tb::tree_spec(&s).unwrap();
        run_test(&format!("swarm_node_scale_n{n}"), &spec, 200 + u64::from(n), |dut| {
            let all = NodeConfig::new(n as usize);
            assert!(node_run(dut, &s, all.scale(inv(n)), 100_000) >= 100_000);
            assert!(node_run(dut, &s, all.dtype(Dtype::Bf16), 50_000) >= 100_000);
        });
    }
}

/// Every flit in a burst at full rate on every port: one reduced flit per cycle, the
/// pipeline never stalls, and the latency is the documented constant.
#[test]
fn full_rate_and_fixed_latency() {
    let p = NodeParams::new(4);
    let s = TreeShape::node(p);
    let spec = tb::tree_spec(&s).unwrap();
    run_test("swarm_node_full_rate", &spec, 5, |dut| {
        let mut rng = dut.rng(1);
        let mut t = TreeTb::new(dut, &s, 5, Pattern::Always, Pattern::Always);
        dut.reset(4);
        TreeTb::configure(dut, 0, &NodeConfig::new(4), 0);
        let nodes = [NodeConfig::new(4)];
        let pushed = push_gradients(&mut t, &nodes, &mut rng, 2000, 500);
        push_weights(&mut t, &nodes, &mut rng, 2000);
        let start = dut.cycle();
        t.run(dut, 10_000);
        let cycles = dut.cycle() - start;
        // 2000 flits and the pipeline's fill: no bubble anywhere.
        let fill = u64::from(p.pipe_latency()) + 6;
        assert!(cycles <= 2000 + fill, "{cycles} cycles for 2000 flits (fill {fill})");
        assert_eq!(pushed.reduced, 2000);
        // From the first port's flit at the head of its FIFO to the m_up handshake.
        let lat = TreeTb::read(dut, 0, "stat_lat_max", 0);
        assert_eq!(lat, u64::from(p.pipe_latency()) + 2, "latency");
    });
}

/// The CSR-facing ports the generated tops and the bench rely on are exactly the node's.
#[test]
fn csr_port_list_matches_the_rtl() {
    for n in [3u32] {
        let spec = ws_hdl::swarm::node_spec(&NodeParams::new(n)).unwrap();
        let dut = Dut::build(&spec).unwrap();
        // Verilator lists ports grouped by storage class, so compare by name.
        for c in CSR_PORTS {
            let p = dut.port(c.name);
            assert_eq!(p.width(), c.width.bits(n), "{}", c.name);
            let dir = if c.input { Direction::Input } else { Direction::Output };
            assert_eq!(p.direction(), dir, "{}", c.name);
        }
        // Nothing else: clk, rst, four stream groups of five signals, the CSR ports.
        assert_eq!(dut.ports().len(), 2 + 4 * 5 + CSR_PORTS.len());
    }
}

/// Sums that only hold with the fixed order and RNE, on a known input.
#[test]
fn fixed_order_is_observable() {
    let s = shape(5);
    let spec = tb::tree_spec(&s).unwrap();
    run_test("swarm_node_order", &spec, 9, |dut| {
        let mut t = TreeTb::new(dut, &s, 9, Pattern::Mixed, Pattern::Mixed);
        dut.reset(4);
        TreeTb::configure(dut, 0, &NodeConfig::new(5), 0);
        let one = 1.0f32.to_bits();
        let big = 16_777_216.0f32.to_bits();
        // ((big + 1) + (1 + 1)) + 1 = (2^24 + 2) + 1, a tie that rounds to 2^24 + 4.
        let h = ws_common::flit::Header::new(ws_common::flit::Kind::Gradient, 1, 2, 3, 0);
        for (i, v) in [big, one, one, one, one].iter().enumerate() {
            t.leaf_src[i].push_beat(&[u64::from(*v), 1, h.pack()]);
        }
        t.up_sink.expect_beat(&[u64::from(16_777_220.0f32.to_bits()), 1, h.pack()]);
        // -0 + -0 + ... = -0; one +0 makes +0.
        let h1 = h.with_index(0).pack() ^ (1 << 32);
        for i in 0..5 {
            t.leaf_src[i].push_beat(&[u64::from(fp::NEG_ZERO), 1, h1]);
        }
        t.up_sink.expect_beat(&[u64::from(fp::NEG_ZERO), 1, h1]);
        let h2 = h1 ^ (3 << 32);
        for i in 0..5 {
            let v = if i == 4 { fp::POS_ZERO } else { fp::NEG_ZERO };
            t.leaf_src[i].push_beat(&[u64::from(v), 1, h2]);
        }
        t.up_sink.expect_beat(&[u64::from(fp::POS_ZERO), 1, h2]);
        t.run(dut, 10_000);
    });
}
