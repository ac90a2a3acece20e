//! Scenario helpers for driving `ws_mx_sim_top` through [`Mx`]: lay layers out in the store,
//! fill them, program the layer table, run one measured step and read rates from the trace
//! records. The block tests (`hdl/tests/mx_streamer.rs`) and the bench rows
//! ([`crate::bench::optim::streamer_figures`]) share them, so the bench measures exactly what
//! the tests check.

use rand::rngs::StdRng;
use rand::RngExt;
use ws_common::golden::optim::{step_consts, Hyper};

use super::{opt_code, reg, LayerDesc, Mx, MxParams, Opt, Store, TraceRec};
use crate::optim::random_param;

/// A layer of a scenario: its table entry, hyperparameters and the two constant slots it
/// alternates between (firmware's double buffering).
#[derive(Debug, Clone)]
pub struct LayerRun {
    /// Layer-table index.
    pub index: u32,
    /// Its table entry.
    pub desc: LayerDesc,
    /// Its optimizer.
    pub hyper: Hyper,
    /// The constant slots of even and odd steps.
    pub slots: [u32; 2],
}

/// Lays out `specs` (length, chunk, hyperparameters, bf16) one after the other with random
/// beat-aligned gaps, each array of a layer in its own region.
///
/// # Panics
/// When the layout does not fit the store.
pub fn layout(p: &MxParams, specs: &[(u32, u32, Hyper, bool)], rng: &mut StdRng) -> Vec<LayerRun> {
    let bb = p.beat_bytes();
    let mut at = bb * rng.random_range(1..64u32);
    let mut out = Vec::new();
    for (i, &(len, chunk, hyper, bf16)) in specs.iter().enumerate() {
        let opt = opt_code(&hyper);
        let span = len.div_ceil(p.beat_words()) * bb;
        let mut bases = [0u32; 4];
        for (k, b) in bases.iter_mut().enumerate() {
            if Opt::of(&hyper).arrays() & (1 << k) != 0 {
                *b = at;
                at += span + bb * rng.random_range(0..8u32);
            }
        }
        let desc = LayerDesc { bases, len, chunk, opt, dtype: bf16 as u32 };
        // Two slots per layer (8 slots: layers 4 apart share theirs, never at the same time).
        let s = (2 * i as u32) % 8;
        out.push(LayerRun { index: i as u32, desc, hyper, slots: [s, s + 1] });
    }
    assert!(at <= p.mem_bytes, "layout does not fit the store");
    out
}

/// Fills every layer's arrays in `store` with random parameters (the operand mix of the lane
/// tests, 1 in 8 an edge value: NaN, inf, subnormals).
pub fn init_layers(store: &mut Store, layers: &[LayerRun], rng: &mut StdRng) {
    for l in layers {
        for i in 0..l.desc.len {
            let (p, _) = random_param(rng);
            for (k, x) in [p.w, p.m, p.v, p.vmax].into_iter().enumerate() {
                if l.desc.arrays() & (1 << k) != 0 {
                    store.words[(l.desc.bases[k] / 4 + i) as usize] = x;
                }
            }
        }
    }
}

/// Resets the block, loads the store, writes and enables every layer, turns tracing on.
///
/// # Panics
/// When the block's ID or CONFIG do not match `mx.p`, or a layer is refused.
pub fn setup(mx: &mut Mx<'_>, store: &Store, layers: &[LayerRun]) {
    assert_eq!(mx.read(reg::ID), reg::ID_WORD);
    let config = mx.read(reg::CONFIG);
    assert_eq!(config & 0xff, mx.p.lanes);
    assert_eq!((config >> 8) & 0xff, mx.p.beat_words());
    mx.load_store(&store.words);
    for l in layers {
        mx.write_layer(l.index, &l.desc);
        mx.set_step(l.index, 1, l.slots[1]);
        let refused = mx.command(reg::OP_ENABLE, l.index);
        assert_eq!(refused, 0, "layer {} refused: {refused:#x}", l.index);
    }
    mx.write(reg::CTRL, 1);
}

/// Reads every array of layer `l` through the backdoor and compares it with the model.
///
/// # Panics
/// On the first word that differs, naming the layer, the array and the index.
pub fn check_layer(mx: &mut Mx<'_>, store: &Store, l: &LayerRun, when: &str) {
    for k in 0..4 {
        if l.desc.arrays() & (1 << k) == 0 {
            continue;
        }
        let base = (l.desc.bases[k] / 4) as usize;
        let got = mx.read_store(base, l.desc.len as usize);
        let want = &store.words[base..base + l.desc.len as usize];
        if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
            panic!(
                "layer {} array {} param {i} {when}: store holds {:#010x}, model {:#010x}",
                l.index,
                ["w", "m", "v", "vmax"][k],
                got[i],
                want[i]
            );
        }
    }
}

/// The whole store against the model: gaps, padding and other layers untouched.
///
/// # Panics
/// On the first word that differs.
pub fn check_store(mx: &mut Mx<'_>, store: &Store) {
    let got = mx.read_store(0, store.words.len());
    if let Some(i) = (0..got.len()).find(|&i| got[i] != store.words[i]) {
        panic!("store word {i} (byte {:#x}): {:#010x}, model {:#010x}", 4 * i, got[i], store.words[i]);
    }
}

/// Runs one step of `l` (all chunks, in order, random gradients) at step `t` with a 10⁻³
/// learning rate, every weight-out flit checked against the model, and returns the step's
/// trace records.
///
/// # Panics
/// When a flit differs from the model or the step does not finish in 2·10⁶ cycles.
pub fn measured_step(
    mx: &mut Mx<'_>,
    store: &mut Store,
    l: &LayerRun,
    t: u16,
    rng: &mut StdRng,
) -> Vec<TraceRec> {
    let c = step_consts(&l.hyper, u32::from(t), 1e-3, 1, 1);
    let slot = l.slots[usize::from(t) % 2];
    mx.write_slot(slot, &c);
    mx.set_step(l.index, t, slot);
    let before = mx.trace.len();
    for chunk in 0..l.desc.chunks() {
        let g: Vec<u32> = (0..l.desc.chunk_len(chunk)).map(|_| random_param(rng).1).collect();
        let w = store.update_chunk(&l.desc, chunk, &c, &g);
        mx.push_gradients(l.index as u16, t, chunk as u16, &g);
        mx.expect_weights(l.index as u16, t + 1, chunk as u16, &w, l.desc.dtype == 1);
    }
    let want = before + l.desc.chunks() as usize;
    mx.run_until("a measured step", 2_000_000, |mx| mx.trace.len() >= want);
    assert_eq!(mx.expected_chunks(), 0);
    mx.trace[before..].to_vec()
}

/// Steady-state rate of one update run, from the trace records of its chunks (in order).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Parameters per cycle between the first and the last chunk's last weight out.
    pub params_per_cycle: f64,
    /// Cycles per parameter per lane at that rate.
    pub cpp_lane: f64,
}

/// The steady-state [`Rate`] of a run of at least two chunks: parameters after the first
/// chunk over the cycles between the first and the last chunk's last weight out, so the
/// pipeline's fill does not count.
pub fn rate(recs: &[TraceRec], lanes: u32) -> Rate {
    let (first, last) = (recs[0], recs[recs.len() - 1]);
    let params: u32 = recs[1..].iter().map(TraceRec::n).sum();
    let cycles = f64::from(last.t_wlast() - first.t_wlast());
    let ppc = f64::from(params) / cycles;
    Rate { params_per_cycle: ppc, cpp_lane: f64::from(lanes) / ppc }
}

/// Parameters per cycle through the store over a whole step: from the first gradient in
/// (before any of the step's traffic) to the last write acknowledged (after all of it), so
/// the figure can only understate the rate.
pub fn store_rate(recs: &[TraceRec]) -> f64 {
    let (first, last) = (recs[0], recs[recs.len() - 1]);
    let params: u32 = recs.iter().map(TraceRec::n).sum();
    f64::from(params) / f64::from(last.t_commit() - first.t_in())
}
