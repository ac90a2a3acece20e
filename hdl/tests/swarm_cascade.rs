//! Cascades of `ws_swarm_node`: the upstream port of each node plugged into a downstream port
//! of its parent (generated tops, `ws_hdl::swarm::tb::tree_spec`), bit-exact against the
//! golden model of the same tree (`ws_common::golden::swarm::Tree`):
//!
//! - 4 × 4 = 16 leaves in fp32 with the 1/16 scale at the root, under random backpressure on
//!   all 16 leaf ports and the root, with random skew;
//! - 4 × 4 in bf16: leaves send two bf16 per flit, the inner nodes round their fp32 sums to
//!   bf16 (`Bf16Out`), the root widens again and sends two fp32 flits per flit;
//! - 2 × 4 = 8 leaves with a whole subtree and one leaf masked;
//! - the downlink broadcast through every level at the same time.

use rand::RngExt;
use ws_common::golden::swarm::{Dtype, NodeConfig};
use ws_hdl::dut::{run_test, Dut, Pattern};
use ws_hdl::swarm::tb::{self, push_gradients, push_weights, TreeTb};
use ws_hdl::swarm::TreeShape;

fn inv(n: u32) -> u32 {
    (1.0f32 / n as f32).to_bits()
}

/// Runs `flits` gradient flits per leaf and 3 000 weight flits through the tree of `shape`
/// with the node configurations `nodes` (breadth first), under Mixed backpressure and up to
/// 300 cycles of skew per leaf.
fn tree_run(dut: &mut Dut, shape: &TreeShape, nodes: &[NodeConfig], flits: u64) {
    let seed = dut.seed();
    let mut rng = dut.rng(0xca5);
    let mut t = TreeTb::new(dut, shape, seed, Pattern::Mixed, Pattern::Mixed);
    for s in t.leaf_start.iter_mut() {
        *s = rng.random_range(0..300);
    }
    dut.reset(4);
    for (id, cfg) in nodes.iter().enumerate() {
        TreeTb::configure(dut, id, cfg, 0);
    }
    let pushed = push_gradients(&mut t, nodes, &mut rng, flits, 48);
    push_weights(&mut t, nodes, &mut rng, 3000);
    let start = dut.cycle();
    t.run(dut, 600 * flits + 50_000);
    eprintln!(
        "{}: {} flits per leaf, {} reduced flits at the root in {} cycles",
        shape.top_name(),
        flits,
        pushed.reduced,
        dut.cycle() - start
    );
    assert_eq!(TreeTb::read(dut, 0, "cnt_reduced", 0), pushed.reduced);
    for id in 0..nodes.len() {
        assert_eq!(TreeTb::read(dut, id, "cnt_errors", 0), 0, "node {id}");
    }
}

#[test]
fn cascade_4x4_fp32_scaled_is_bit_exact() {
    let shape = TreeShape::cascade(&[4, 4]);
    let spec = tb::tree_spec(&shape).unwrap();
    run_test("swarm_cascade_4x4_fp32", &spec, 44, |dut| {
        let mut nodes = vec![NodeConfig::new(4).scale(inv(16))];
        nodes.extend((0..4).map(|_| NodeConfig::new(4)));
        tree_run(dut, &shape, &nodes, 12_000);
    });
}

#[test]
fn cascade_4x4_bf16_is_bit_exact() {
    let shape = TreeShape::cascade(&[4, 4]);
    let spec = tb::tree_spec(&shape).unwrap();
    run_test("swarm_cascade_4x4_bf16", &spec, 45, |dut| {
        let mut nodes = vec![NodeConfig::new(4).dtype(Dtype::Bf16).scale(inv(16))];
        nodes.extend((0..4).map(|_| NodeConfig::new(4).dtype(Dtype::Bf16Out)));
        tree_run(dut, &shape, &nodes, 6_000);
    });
}

#[test]
fn cascade_2x4_with_masks_is_bit_exact() {
    let shape = TreeShape::cascade(&[2, 4]);
    let spec = tb::tree_spec(&shape).unwrap();
    run_test("swarm_cascade_2x4", &spec, 24, |dut| {
        // All eight leaves.
        let nodes = [NodeConfig::new(2).scale(inv(8)), NodeConfig::new(4), NodeConfig::new(4)];
        tree_run(dut, &shape, &nodes, 8_000);
        // Leaf 5 (node 2, port 1) masked: seven leaves.
        let nodes = [NodeConfig::new(2).scale(inv(7)), NodeConfig::new(4), NodeConfig::new(4).mask(0b1101)];
        tree_run(dut, &shape, &nodes, 4_000);
        // The whole left subtree masked at the root; bf16 leaves and fp32 inner links.
        let nodes = [
            NodeConfig::new(2).mask(0b10),
            NodeConfig::new(4).dtype(Dtype::Bf16),
            NodeConfig::new(4).dtype(Dtype::Bf16),
        ];
        tree_run(dut, &shape, &nodes, 3_000);
    });
}
