//! MemoryX's weight store and streamer (`ws_mx_sim_top`: `ws_mx_streamer` around the
//! optimizer lanes, with the simulation store `ws_mx_mem_model` behind its AXI4 port),
//! against the golden model `ws_common::golden::optim`, bit for bit.
//!
//! - `updates_lanes1`, `updates_lanes2`, `updates_lanes4`: layers of SGD, SGD with Nesterov
//!   momentum, Adam (bf16 weight flits) and AdamW with amsgrad, chunk sizes that do not divide
//!   the lengths, several steps with random gradients, forward streams of every layer before
//!   each step's gradients; random valid/ready on every stream and random store stalls. Every
//!   weight-out flit and, after each step, every w, m, v, vmax is checked; at the end the
//!   whole store (gaps and padding included) must match the model, and the trace records'
//!   timestamps are ordered.
//! - `bad_input_lanes1`: every refusal of the layer table (overlap, past the store, length
//!   zero and too large, bad chunk, unknown optimizer and dtype, misaligned, bad slot,
//!   writes to an enabled layer) and every dropped gradient (no such layer, disabled layer,
//!   chunk past the end, wrong step, wrong kind, index not 0, framing), each with its error
//!   code, while other layers keep updating; the store must be unchanged outside them.
//! - `figures_lanes1`, `figures_lanes2`, `figures_lanes4`: the bench rows, printed (run with
//!   `-- --nocapture`): cycles per parameter per lane at steady state (asserted ≤ 1.05: a
//!   cycle count), the achieved parameter rate against the store's bandwidth bound, and the
//!   latency from a chunk's gradient to its first weight out; plus the latency-hiding overlap
//!   (a chunk's first weight leaves before the next chunk's update is done, and before its
//!   own is).

use rand::rngs::StdRng;
use rand::RngExt;
use ws_common::golden::optim::{step_consts, Hyper, Kind};
use ws_hdl::bench::optim::streamer_figures_on;
use ws_hdl::dut::{run_test, Dut, Pattern};
use ws_hdl::mx::scenario::{check_layer, check_store, init_layers, layout, setup, LayerRun};
use ws_hdl::mx::{cnt, err, reg, sim_spec, LayerDesc, Mx, MxParams, Stall, Store, TraceRec};
use ws_hdl::optim::{random_hyper, random_param};

/// A learning rate for step `t` of a layer: moderate, so the weights stay finite over the
/// steps (the lanes' tests cover extreme rates).
fn lr(rng: &mut StdRng) -> f64 {
    10f64.powf(rng.random_range(-4.0..-1.0))
}

/// One training step `t` of every layer: constants into the layer's other slot, STEP, a
/// forward STREAM of each layer (checked against the store before the update), then every
/// chunk's gradients (layers last to first, chunks in random order when `shuffle`), every
/// updated chunk expected on m_wout with step t + 1. Waits until everything retired and
/// checks each layer's DONE count and arrays.
fn train_step(
    mx: &mut Mx<'_>,
    store: &mut Store,
    layers: &[LayerRun],
    t: u16,
    rng: &mut StdRng,
    shuffle: bool,
) {
    let mut consts = Vec::new();
    for l in layers {
        let c = step_consts(&l.hyper, u32::from(t), lr(rng), rng.random_range(1..8), rng.random_range(1..32));
        let slot = l.slots[usize::from(t) % 2];
        mx.write_slot(slot, &c);
        mx.set_step(l.index, t, slot);
        consts.push(c);
    }
    for l in layers {
        for c in 0..l.desc.chunks() {
            let w = store.weights(&l.desc, c);
            mx.expect_weights(l.index as u16, t, c as u16, &w, l.desc.dtype == 1);
        }
        let refused = mx.command(reg::OP_STREAM, l.index);
        assert_eq!(refused, 0);
    }
    for (l, c) in layers.iter().zip(&consts).rev() {
        let mut order: Vec<u32> = (0..l.desc.chunks()).collect();
        if shuffle {
            for i in (1..order.len()).rev() {
                order.swap(i, rng.random_range(0..=i));
            }
        }
        for chunk in order {
            let g: Vec<u32> = (0..l.desc.chunk_len(chunk)).map(|_| random_param(rng).1).collect();
            let w = store.update_chunk(&l.desc, chunk, c, &g);
            mx.push_gradients(l.index as u16, t, chunk as u16, &g);
            mx.expect_weights(l.index as u16, t.wrapping_add(1), chunk as u16, &w, l.desc.dtype == 1);
        }
    }
    let limit = 400_000 + 200 * (mx.grad_pending() as u64);
    mx.run_until("training step", limit, |mx| mx.grad_pending() == 0 && mx.expected_chunks() == 0);
    let mut polls = 0;
    while mx.read(reg::STATUS) & 2 != 0 {
        polls += 1;
        assert!(polls < 100_000, "chunks never retired");
    }
    for l in layers {
        let done = mx.read(reg::layer(l.index) + reg::DONE);
        assert_eq!(done, l.desc.chunks(), "layer {} DONE after step {t}", l.index);
        check_layer(mx, store, l, &format!("after step {t}"));
    }
}

/// Timestamp order of every record: gradient in ≤ update done ≤ last weight out, first
/// weight out ≤ last, update done ≤ commit; and, where a chunk has more beats than the
/// weight-out buffer can hide, the latency-hiding overlaps: its first weight leaves before
/// its own update is done and before the next chunk's update is done.
fn check_trace(trace: &[TraceRec], lanes: u32, bf16_layers: &[u16]) {
    for r in trace {
        assert!(r.t_in() <= r.t_done() && r.t_done() <= r.t_wlast(), "{r:x?}");
        assert!(r.t_wfirst() <= r.t_wlast(), "{r:x?}");
        if r.kind() == 1 {
            assert!(r.t_done() <= r.t_commit(), "{r:x?}");
        }
    }
    let beats = |r: &TraceRec| {
        let per = if bf16_layers.contains(&r.layer()) { 2 * lanes } else { lanes };
        r.n().div_ceil(per)
    };
    for pair in trace.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.kind() == 1 && b.kind() == 1 && beats(b) > 12 {
            assert!(a.t_wfirst() < b.t_done(), "no overlap between chunks: {a:x?} then {b:x?}");
        }
        if a.kind() == 1 && beats(a) > 12 {
            assert!(a.t_wfirst() < a.t_done(), "weights of a chunk left only after its update: {a:x?}");
        }
    }
}

/// The four layers of the update scenarios.
fn scenario_layers(p: &MxParams, rng: &mut StdRng) -> Vec<LayerRun> {
    let scale = p.lanes;
    let k = p.beat_words();
    let sgd = Hyper { momentum: 0.0, ..random_hyper(rng, Kind::Sgd) };
    let nesterov = Hyper { momentum: 0.9, dampening: 0.0, nesterov: true, ..random_hyper(rng, Kind::Sgd) };
    let adam = Hyper { amsgrad: false, ..random_hyper(rng, Kind::Adam) };
    let adamw = Hyper { amsgrad: true, ..random_hyper(rng, Kind::AdamW) };
    let specs = [
        (777 * scale, 3 * k, sgd, false),
        (1000 * scale, 4 * k, nesterov, false),
        (1203 * scale, 5 * k, adam, true),
        (555 * scale, 2 * k, adamw, false),
    ];
    layout(p, &specs, rng)
}

fn updates(lanes: u32, seed: u64) {
    let p = MxParams::new(lanes);
    let spec = sim_spec(&p).expect("FPnew sources (run `cargo xtask setup`)");
    run_test(&format!("mx_updates_lanes{lanes}"), &spec, seed, |dut: &mut Dut| {
        let mut rng = dut.rng(1);
        let mut mx = Mx::new(dut, p);
        let layers = scenario_layers(&p, &mut rng);
        let mut store = Store::random(p.mem_bytes, &mut rng);
        init_layers(&mut store, &layers, &mut rng);
        setup(&mut mx, &store, &layers);
        let steps = 3u16;
        for t in 1..=steps {
            let stall =
                if t == 2 { Stall::Random(Pattern::Mixed) } else { Stall::Random(Pattern::Random(0.25)) };
            mx.patterns(Pattern::Mixed, Pattern::Mixed, Pattern::Mixed, stall);
            train_step(&mut mx, &mut store, &layers, t, &mut rng, t != 1);
        }
        check_store(&mut mx, &store);
        let chunks: u32 = layers.iter().map(|l| l.desc.chunks()).sum();
        let params: u32 = layers.iter().map(|l| l.desc.len).sum();
        assert_eq!(mx.counter(cnt::CHUNKS_UPDATED), chunks * u32::from(steps));
        assert_eq!(mx.counter(cnt::PARAMS_UPDATED), params * u32::from(steps));
        assert_eq!(mx.counter(cnt::CHUNKS_STREAMED), chunks * u32::from(steps));
        assert_eq!(mx.counter(cnt::PARAMS_STREAMED), params * u32::from(steps));
        // m_wout_read marks exactly the STREAM chunks, and is constant over each chunk.
        assert_eq!(mx.chunks_read, u64::from(chunks * u32::from(steps)), "chunks marked as reads");
        assert_eq!(mx.chunks_out, 2 * mx.chunks_read, "chunks out: every update's and every read's");
        for c in [cnt::DROPPED_CHUNKS, cnt::DROPPED_FLITS, cnt::FRAMING_ERRORS, cnt::BUS_ERRORS] {
            assert_eq!(mx.counter(c), 0, "counter {c}");
        }
        assert_eq!(mx.read(reg::ERR_COUNT), 0);
        assert_eq!(mx.trace.len() as u32, 2 * chunks * u32::from(steps));
        let bf16: Vec<u16> = layers.iter().filter(|l| l.desc.dtype == 1).map(|l| l.index as u16).collect();
        check_trace(&mx.trace, lanes, &bf16);
        eprintln!(
            "mx_updates_lanes{lanes}: {} chunks out, {} gradient beats, {} cycles",
            mx.chunks_out,
            mx.beats_in,
            mx.cycle()
        );
    });
}

#[test]
fn updates_lanes1() {
    updates(1, 51);
}

#[test]
fn updates_lanes2() {
    updates(2, 52);
}

#[test]
fn updates_lanes4() {
    updates(4, 54);
}

/// Writes `desc` into layer `l`, tries to enable it and returns the refusal code; checks
/// that a refused layer stays disabled and that ERR names the code and the layer.
fn try_enable(mx: &mut Mx<'_>, l: u32, desc: &LayerDesc) -> u8 {
    mx.write_layer(l, desc);
    let code = mx.command(reg::OP_ENABLE, l);
    let status = mx.read(reg::layer(l) + reg::L_STATUS);
    if code != 0 {
        assert_eq!(status & 1, 0, "refused layer {l} is enabled");
        let e = mx.read(reg::ERR);
        assert_eq!((e & 0xff) as u8, code, "ERR after refusing layer {l}");
        assert_eq!((e >> 8) & 0xfff, l, "ERR layer");
        mx.write(reg::ERR, 0);
    } else {
        assert_eq!(status & 1, 1);
    }
    code
}

/// Sends one gradient chunk that must be dropped with `code`, then checks ERR, the drop
/// counters and that nothing came out.
fn expect_drop(mx: &mut Mx<'_>, beats: Vec<ws_hdl::mx::Beat>, code: u8, drops: &mut (u32, u32)) {
    let flits: u32 = beats.iter().map(|b| b.keep.count_ones()).sum();
    mx.push_beats(beats);
    mx.run_until("a dropped chunk", 100_000, |mx| mx.grad_pending() == 0);
    for _ in 0..50 {
        mx.step();
    }
    assert_eq!(mx.take_err(), code, "error code of a dropped chunk");
    drops.0 += 1;
    drops.1 += flits;
    assert_eq!(mx.counter(cnt::DROPPED_CHUNKS), drops.0);
    assert_eq!(mx.counter(cnt::DROPPED_FLITS), drops.1);
    assert_eq!(mx.expected_chunks(), 0);
}

/// Sends chunk `c` of layer `l` (good), expects its update, and waits for it.
fn good_chunk(
    mx: &mut Mx<'_>,
    store: &mut Store,
    l: &LayerRun,
    c: u32,
    consts: &ws_common::golden::optim::Consts,
    rng: &mut StdRng,
) {
    let g: Vec<u32> = (0..l.desc.chunk_len(c)).map(|_| random_param(rng).1).collect();
    let w = store.update_chunk(&l.desc, c, consts, &g);
    mx.push_gradients(l.index as u16, 1, c as u16, &g);
    mx.expect_weights(l.index as u16, 2, c as u16, &w, l.desc.dtype == 1);
    mx.run_until("a good chunk", 200_000, |mx| mx.grad_pending() == 0 && mx.expected_chunks() == 0);
}

#[test]
fn bad_input_lanes1() {
    let p = MxParams::new(1);
    let spec = sim_spec(&p).expect("FPnew sources (run `cargo xtask setup`)");
    run_test("mx_bad_input_lanes1", &spec, 61, |dut: &mut Dut| {
        let mut rng = dut.rng(2);
        let mut mx = Mx::new(dut, p);
        let k = p.beat_words();
        let bb = p.beat_bytes();
        let adam = Hyper { amsgrad: false, ..random_hyper(&mut rng, Kind::Adam) };
        let sgd = Hyper { momentum: 0.5, nesterov: false, ..random_hyper(&mut rng, Kind::Sgd) };
        let layers = layout(&p, &[(900, 6 * k, adam, false), (500, 4 * k, sgd, true)], &mut rng);
        let mut store = Store::random(p.mem_bytes, &mut rng);
        init_layers(&mut store, &layers, &mut rng);
        setup(&mut mx, &store, &layers);
        mx.patterns(Pattern::Mixed, Pattern::Mixed, Pattern::Mixed, Stall::Random(Pattern::Random(0.2)));
        let consts: Vec<_> = layers.iter().map(|l| step_consts(&l.hyper, 1, 1e-2, 2, 8)).collect();
        for (l, c) in layers.iter().zip(&consts) {
            mx.write_slot(l.slots[1], c);
        }
        let (a, b) = (&layers[0], &layers[1]);
        let table_before: Vec<u32> = (0..2)
            .flat_map(|l| [0, 1, 2, 3, 4, 5, 6, 7, 9].map(move |f| (l, f)))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|(l, f)| mx.read(reg::layer(l) + 4 * f))
            .collect();

        // ---- the layer table refuses bad entries; layer 2 stays disabled ----
        let free = (p.mem_bytes / 2) & !(bb - 1); // well past the two layers
        let good = LayerDesc {
            bases: [free, free + 0x4000, free + 0x8000, 0],
            len: 1000,
            chunk: 4 * k,
            opt: 2,
            dtype: 0,
        };
        let cases: Vec<(LayerDesc, u8, &str)> = vec![
            (
                LayerDesc { bases: [a.desc.bases[2] + bb, free + 0x4000, free + 0x8000, 0], ..good },
                err::OVERLAP,
                "w inside another layer's v",
            ),
            (
                LayerDesc { bases: [free, free + 0x4000, b.desc.bases[0] - bb, 0], ..good },
                err::OVERLAP,
                "v running into another layer's w",
            ),
            (
                LayerDesc { bases: [free, free + 0x400, free + 0x8000, 0], ..good },
                err::SELF_OVERLAP,
                "w and m overlap",
            ),
            (
                LayerDesc { bases: [p.mem_bytes - 2 * bb, free + 0x4000, free + 0x8000, 0], ..good },
                err::PAST_STORE,
                "w past the store",
            ),
            (LayerDesc { len: 0, ..good }, err::LEN_ZERO, "length 0"),
            (LayerDesc { len: p.mem_bytes / 4 + 1, ..good }, err::LEN_TOO_LARGE, "longer than the store"),
            (
                LayerDesc { len: 65536 * k + 1, chunk: k, bases: [0, 0, 0, 0], opt: 0, dtype: 0 },
                err::LEN_TOO_LARGE,
                "more than 2^16 chunks",
            ),
            (LayerDesc { chunk: 0, ..good }, err::BAD_CHUNK, "chunk 0"),
            (LayerDesc { chunk: k + 1, ..good }, err::BAD_CHUNK, "chunk not a multiple of the beat"),
            (LayerDesc { opt: 6, ..good }, err::BAD_OPT, "optimizer 6"),
            (LayerDesc { opt: 15, ..good }, err::BAD_OPT, "optimizer 15"),
            (LayerDesc { dtype: 2, ..good }, err::BAD_DTYPE, "dtype 2"),
            (
                LayerDesc { bases: [free + 4, free + 0x4000, free + 0x8000, 0], ..good },
                err::MISALIGNED,
                "w not on a beat",
            ),
        ];
        for (desc, code, what) in &cases {
            assert_eq!(try_enable(&mut mx, 2, desc), *code, "{what}");
        }
        // Commands and writes that are refused.
        assert_eq!(try_enable(&mut mx, 2, &LayerDesc { ..good }), 0, "a good entry is accepted");
        assert_eq!(mx.command(reg::OP_DISABLE, 2), 0);
        mx.write(reg::layer(2) + reg::STEP, 9 << 16);
        assert_eq!(mx.take_err(), err::BAD_SLOT, "slot 9 of 8");
        assert_eq!(mx.read(reg::layer(2) + reg::STEP) >> 16, 0, "a refused STEP write changes nothing");
        mx.write(reg::layer(0) + reg::LEN, 5);
        assert_eq!(mx.take_err(), err::LAYER_ENABLED, "a write to an enabled layer");
        mx.write(reg::CMD, reg::OP_STREAM | (2 << 4));
        mx.wait_cmd();
        assert_eq!(mx.take_err(), err::NOT_ENABLED);
        mx.write(reg::CMD, reg::OP_ENABLE | (20 << 4));
        mx.wait_cmd();
        assert_eq!(mx.take_err(), err::BAD_LAYER);
        mx.write(reg::CMD, 7);
        mx.wait_cmd();
        assert_eq!(mx.take_err(), err::BAD_CMD);
        let table_after: Vec<u32> = (0..2)
            .flat_map(|l| [0, 1, 2, 3, 4, 5, 6, 7, 9].map(move |f| (l, f)))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|(l, f)| mx.read(reg::layer(l) + 4 * f))
            .collect();
        assert_eq!(table_before, table_after, "the enabled layers' entries changed");

        // ---- gradients that are dropped, each between good chunks ----
        let mut junk = dut_rng(&mut rng);
        let mut drops = (0u32, 0u32);
        let grads = |n: u32, rng: &mut StdRng| -> Vec<u32> { (0..n).map(|_| random_param(rng).1).collect() };
        let beats = |layer: u16, step: u16, chunk: u16, n: u32, rng: &mut StdRng, junk: &mut StdRng| {
            ws_hdl::mx::gradient_beats(1, layer, step, chunk, &grads(n, rng), junk)
        };
        good_chunk(&mut mx, &mut store, a, 0, &consts[0], &mut rng);
        expect_drop(&mut mx, beats(20, 1, 0, 30, &mut rng, &mut junk), err::GRAD_NO_LAYER, &mut drops);
        expect_drop(&mut mx, beats(2, 1, 0, 30, &mut rng, &mut junk), err::GRAD_DISABLED, &mut drops);
        expect_drop(&mut mx, beats(7, 1, 0, 5, &mut rng, &mut junk), err::GRAD_DISABLED, &mut drops);
        good_chunk(&mut mx, &mut store, b, 1, &consts[1], &mut rng);
        expect_drop(
            &mut mx,
            beats(0, 1, a.desc.chunks() as u16, 20, &mut rng, &mut junk),
            err::GRAD_CHUNK,
            &mut drops,
        );
        expect_drop(&mut mx, beats(0, 2, 1, 48, &mut rng, &mut junk), err::GRAD_STEP, &mut drops);
        let mut wrong_kind = beats(0, 1, 1, 48, &mut rng, &mut junk);
        for bt in &mut wrong_kind {
            bt.user = (bt.user & !0xf) | ws_common::flit::Kind::Weight as u64;
        }
        expect_drop(&mut mx, wrong_kind, err::GRAD_KIND, &mut drops);
        let mut mid = beats(0, 1, 1, 48, &mut rng, &mut junk);
        mid.drain(..3);
        expect_drop(&mut mx, mid, err::GRAD_INDEX, &mut drops);
        good_chunk(&mut mx, &mut store, a, 1, &consts[0], &mut rng);
        // A disabled layer drops its gradients; enabled again (validated again), it updates.
        assert_eq!(mx.command(reg::OP_DISABLE, 1), 0);
        expect_drop(&mut mx, beats(1, 1, 2, 32, &mut rng, &mut junk), err::GRAD_DISABLED, &mut drops);
        assert_eq!(mx.command(reg::OP_ENABLE, 1), 0);
        good_chunk(&mut mx, &mut store, b, 2, &consts[1], &mut rng);

        // ---- framing errors: counted, and no write leaves the chunk ----
        // A wrong index inside a chunk: the data is used as sent.
        let c = 2;
        let g = grads(a.desc.chunk_len(c), &mut rng);
        let mut bts = ws_hdl::mx::gradient_beats(1, 0, 1, c as u16, &g, &mut junk);
        bts[5].user ^= 1 << 50;
        let w = store.update_chunk(&a.desc, c, &consts[0], &g);
        mx.expect_weights(0, 2, c as u16, &w, false);
        mx.push_beats(bts);
        mx.run_until("a chunk with a bad index", 200_000, |mx| {
            mx.grad_pending() == 0 && mx.expected_chunks() == 0
        });
        assert_eq!(mx.take_err(), err::GRAD_FRAMING);
        // An early `last`: the rest of the chunk is not written; its weight flits are the
        // lanes' results for a zero gradient, so the stream downstream stays framed.
        let c = 3;
        let n = a.desc.chunk_len(c) as usize;
        let g = grads(n as u32, &mut rng);
        let mut bts = ws_hdl::mx::gradient_beats(1, 0, 1, c as u16, &g[..20], &mut junk);
        bts.last_mut().unwrap().last = true;
        let mut w = store.update_chunk(&a.desc, c, &consts[0], &g[..20]);
        let mut tail = store.clone();
        let zeros = vec![0u32; n];
        let all = tail.update_chunk(&a.desc, c, &consts[0], &zeros);
        w.extend_from_slice(&all[20..]);
        mx.expect_weights(0, 2, c as u16, &w, false);
        mx.push_beats(bts);
        mx.run_until("a chunk cut short", 200_000, |mx| mx.grad_pending() == 0 && mx.expected_chunks() == 0);
        assert_eq!(mx.take_err(), err::GRAD_FRAMING);
        // No `last` where the chunk ends: the extra beats are dropped up to the next `last`.
        let c = 4;
        let g = grads(a.desc.chunk_len(c), &mut rng);
        let mut bts = ws_hdl::mx::gradient_beats(1, 0, 1, c as u16, &g, &mut junk);
        bts.last_mut().unwrap().last = false;
        let extra = ws_hdl::mx::gradient_beats(1, 0, 1, c as u16, &grads(3, &mut rng), &mut junk);
        let w = store.update_chunk(&a.desc, c, &consts[0], &g);
        mx.expect_weights(0, 2, c as u16, &w, false);
        mx.push_beats(bts);
        mx.push_beats(extra);
        mx.run_until("a chunk without last", 200_000, |mx| {
            mx.grad_pending() == 0 && mx.expected_chunks() == 0
        });
        assert_eq!(mx.take_err(), err::GRAD_FRAMING);
        drops.1 += 3;
        assert_eq!(mx.counter(cnt::DROPPED_FLITS), drops.1);
        assert!(mx.counter(cnt::FRAMING_ERRORS) >= 3);
        good_chunk(&mut mx, &mut store, a, 5, &consts[0], &mut rng);

        let mut polls = 0;
        while mx.read(reg::STATUS) & 2 != 0 {
            polls += 1;
            assert!(polls < 100_000);
        }
        // Every bit of the store: the two layers as the model says, everything else as loaded.
        check_store(&mut mx, &store);
        assert_eq!(mx.counter(cnt::BUS_ERRORS), 0);
    });
}

fn dut_rng(rng: &mut StdRng) -> StdRng {
    ws_hdl::dut::rng(rng.random::<u64>(), 7)
}

fn figures(lanes: u32, seed: u64) {
    let p = MxParams::new(lanes);
    let spec = sim_spec(&p).expect("FPnew sources (run `cargo xtask setup`)");
    run_test(&format!("mx_figures_lanes{lanes}"), &spec, seed, |dut: &mut Dut| {
        let f = streamer_figures_on(dut, p);
        println!(
            "MemoryX streamer figures, LANES = {lanes}: store {} B/cycle, read latency {} cycles, bursts <= {} beats",
            f.bus_bytes_per_cycle, f.mem_latency, p.max_burst
        );
        for r in &f.full {
            println!(
                "  {:14} full bandwidth: {:.4} cycles/param/lane ({:.3} params/cycle; store {} B/param)",
                r.optimizer, r.cycles_per_param_per_lane, r.params_per_cycle, r.store_bytes_per_param
            );
            if !r.store_bound {
                assert!(r.cycles_per_param_per_lane <= 1.05, "{r:?}");
            }
        }
        for r in &f.store {
            println!(
                "  {:14} store at {:.1} B/cycle: {:.4} params/cycle = {:.3} of the bound ({} B/param moved); {:.3} of the issue's ({} B/param)",
                r.optimizer, r.bytes_per_cycle, r.params_per_cycle, r.fraction, r.store_bytes_per_param,
                r.issue_fraction, r.issue_bytes_per_param
            );
            // A fraction of a bound cannot exceed 1; the goal itself (≥ 0.9) is a bench row.
            assert!(r.fraction > 0.0 && r.fraction <= 1.0, "{r:?}");
        }
        for c in &f.latency {
            println!(
                "  one chunk of {:5} params: gradient in -> first weight out {} cycles, -> update done {}, -> last weight out {}, -> committed {}",
                c.params, c.first_weight_out, c.update_done, c.last_weight_out, c.committed
            );
        }
        // The first weight leaves after the lanes' pipeline and the store's latency, and does
        // not wait for the rest of the chunk.
        let first: Vec<u32> = f.latency.iter().map(|c| c.first_weight_out).collect();
        assert!(first.iter().all(|&l| l == first[0]), "first-weight latency grows with the chunk: {first:?}");
        println!(
            "  stall counters: memory {}, gradient {}, output {}",
            f.stalls[0], f.stalls[1], f.stalls[2]
        );
    });
}

#[test]
fn figures_lanes1() {
    figures(1, 71);
}

#[test]
fn figures_lanes2() {
    figures(2, 72);
}

#[test]
fn figures_lanes4() {
    figures(4, 74);
}

/// STREAM_AFTER (docs/memoryx-store.md "Layer commands"): queued before a layer's gradients,
/// it stays busy and sends nothing until the layer's DONE reaches its count, then reads the
/// layer back from the store: every chunk's updated weights come out twice, first as the
/// update's flits and then as the read's, both with step t + 1, bit-exact with the golden
/// update; a STEP write of the layer meanwhile is refused as CMD_BUSY.
#[test]
fn stream_after_reads_the_updated_layer_back() {
    let p = MxParams::new(1);
    let spec = sim_spec(&p).expect("FPnew sources (run `cargo xtask setup`)");
    run_test("mx_stream_after", &spec, 57, |dut: &mut Dut| {
        let mut rng = dut.rng(1);
        let mut mx = Mx::new(dut, p);
        let layers = scenario_layers(&p, &mut rng);
        let mut store = Store::random(p.mem_bytes, &mut rng);
        init_layers(&mut store, &layers, &mut rng);
        setup(&mut mx, &store, &layers);
        mx.patterns(Pattern::Mixed, Pattern::Mixed, Pattern::Mixed, Stall::Random(Pattern::Random(0.25)));
        let l = &layers[1];
        let t = 1u16;
        let c = step_consts(&l.hyper, u32::from(t), lr(&mut rng), 2, 8);
        mx.write_slot(l.slots[1], &c);
        mx.set_step(l.index, t, l.slots[1]);
        let chunks = l.desc.chunks();
        let read0 = mx.counter(cnt::CHUNKS_STREAMED);
        mx.write(reg::CMD, reg::OP_STREAM_AFTER | (l.index << 4) | (chunks << 16));
        for _ in 0..500 {
            mx.step();
        }
        assert_eq!(mx.read(reg::STATUS) & 1, 1, "STREAM_AFTER waits, busy");
        assert_eq!(mx.chunks_out, 0, "nothing out before the update");
        mx.write(reg::layer(l.index) + reg::STEP, u32::from(t + 1));
        assert_eq!(mx.take_err(), 0x0e, "a STEP write of the waiting layer is refused as CMD_BUSY");
        let mut updated = Vec::new();
        for chunk in 0..chunks {
            let g: Vec<u32> = (0..l.desc.chunk_len(chunk)).map(|_| random_param(&mut rng).1).collect();
            let w = store.update_chunk(&l.desc, chunk, &c, &g);
            mx.push_gradients(l.index as u16, t, chunk as u16, &g);
            mx.expect_weights(l.index as u16, t + 1, chunk as u16, &w, l.desc.dtype == 1);
            updated.push(w);
        }
        // The read-back follows every update flit, with the same weights and step.
        for (chunk, w) in updated.iter().enumerate() {
            mx.expect_weights(l.index as u16, t + 1, chunk as u16, w, l.desc.dtype == 1);
        }
        mx.run_until("update and read-back", 1_000_000, |mx| {
            mx.grad_pending() == 0 && mx.expected_chunks() == 0
        });
        mx.wait_cmd();
        assert_eq!(mx.counter(cnt::CHUNKS_STREAMED) - read0, chunks, "the read-back's chunks retired");
        assert_eq!(mx.chunks_read, u64::from(chunks), "marked as reads");
        assert_eq!(mx.read(reg::layer(l.index) + reg::DONE), chunks);
        check_layer(&mut mx, &store, l, "after the update");
    });
}
