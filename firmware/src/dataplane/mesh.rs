//! The wafer meshes behind the bulk channels (`MeshSetup`, `MeshStep`, `MeshTrain`,
//! `MeshEval`; docs/mesh-array.md "Firmware driver", "Several wafers"). The firmware
//! configures and sequences; every sample, weight and gradient word moves between the link's
//! rings, the store and the arrays through the data mover and SwarmX:
//!
//! - samples: RX2 (channel 4) → op 5 RING_TO_SAMPLES, each PE's block at its SX_TARGET, on
//!   the wafer whose CTRL.samples is set;
//! - weights: RX0 (channel 2) → op 4 RING_TO_MESH for `MeshStep` (wafer 0, `step.rs`), or the
//!   store → op 2 into a staging ring → op 4 down SwarmX's broadcast to every wafer for
//!   `MeshTrain` and `MeshEval` (`train.rs`);
//! - gradients: wafer 0's egress → the mover's capture sink over TX0 for `MeshStep`, or every
//!   wafer's egress up its SwarmX port, summed by the node into MemoryX's optimizer.
//!
//! This file holds what every job shares: the setup, placing samples and programs, waiting
//! for the PEs, and the answer.

use heapless::Vec;
use ws_common::ctrl::cmd::{MeshPlan, MeshSetup, MeshStepDone, MESH_MAX_DIMS};
use ws_common::ctrl::Status;
use ws_common::golden::mesh::{Layer, Mesh as Geometry, StreamLayout};
use ws_common::mesh::{check_step, eval_program, routes, snake_router, step_program, StepMap, StepSegments};

use super::{fault, MemoryXPlane};
use crate::hal::link::LinkEngine;
use crate::hal::mesh::{group, MeshHw};
use crate::hal::mx::{Op, Ring};

mod chain;
mod consts;
mod feed;
mod programs;
mod step;
mod train;

use programs::{Key, Kind, Programs};
use step::Capture;

/// RX slot of the samples (channel 4).
const RX_SAMPLES: usize = 2;
/// The most wafers a SoC carries (slots 25..28, SwarmX's four ports).
pub const MAX_WAFERS: usize = 4;

/// One wafer's counters at one moment.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    fmas: u32,
    cycles: u32,
    grad: u32,
    /// Weight words the array took (op 4, or SwarmX's port with CTRL.swarm).
    feed: u32,
}

impl Counts {
    fn read(hw: &MeshHw, s: &Setup) -> Self {
        let pes = u32::from(s.plan.rows) * u32::from(s.plan.cols);
        let fmas = (0..pes).fold(0u32, |a, r| a.wrapping_add(hw.counter(group::FMAS, r)));
        let (feed, _, grad) = hw.words();
        Counts { fmas, cycles: hw.counter(group::CYCLES, 0), grad, feed }
    }

    /// Every wafer's counters, in wafer order.
    fn all(hws: &[MeshHw], s: &Setup) -> [Counts; MAX_WAFERS] {
        let mut c = [Counts::default(); MAX_WAFERS];
        for (c, hw) in c.iter_mut().zip(hws) {
            *c = Counts::read(hw, s);
        }
        c
    }
}

/// The meshes and the shape they were set up for.
#[derive(Debug)]
pub(super) struct MeshPlane {
    /// The wafers, in wafer order (wafer 0 in slot 25).
    pub(super) wafers: Vec<MeshHw, MAX_WAFERS>,
    setup: Option<Setup>,
    programs: Programs,
}

/// A checked setup.
#[derive(Debug, Clone, Copy)]
struct Setup {
    dims: [usize; MESH_MAX_DIMS],
    ndims: usize,
    b: usize,
    stream: StreamLayout,
    map: StepMap,
    /// `map` with a second sample buffer, when it and two programs fit a PE: the steps of a
    /// training run then take turns on the buffers, and each step's samples are placed while
    /// the step before it runs (docs/mesh-pe.md "Samples while running").
    double: Option<StepMap>,
    segs: StepSegments,
    plan: MeshPlan,
}

impl Setup {
    fn dims(&self) -> &[usize] {
        &self.dims[..self.ndims]
    }

    fn layers(&self) -> usize {
        self.ndims - 1
    }

    fn layer(&self, l: usize) -> Layer {
        Layer::new(self.dims[l], self.dims[l + 1])
    }

    fn layer_words(&self, l: usize) -> u32 {
        self.layer(l).words().unwrap_or(0) as u32
    }

    /// Words per chunk of layer `l`'s weight stream.
    fn chunk_words(&self, l: usize) -> u32 {
        (self.stream.rows_per_chunk.saturating_mul(self.layer(l).row_words()) as u32).min(self.layer_words(l))
    }

    /// Weight words of a forward pass (layers 0 … L−1).
    fn forward_words(&self) -> u32 {
        (0..self.layers()).map(|l| self.layer_words(l)).sum()
    }

    /// The map of a step on sample buffer `parity` (the second only with [`Setup::double`]).
    fn map_of(&self, parity: bool) -> StepMap {
        match (self.double, parity) {
            (Some(d), true) => d.flipped(),
            _ => self.map,
        }
    }

    /// Samples wafer `w` takes of `n`: wafer w holds samples w·C … (w + 1)·C − 1.
    fn wafer_samples(&self, n: usize, w: usize) -> usize {
        let cap = self.plan.capacity as usize;
        n.saturating_sub(w * cap).min(cap)
    }
}

/// The PEs of `hw` done since the last start; a PE that refused its program, or an array
/// flag (gradient overrun, router overflow), is a fault, said in the log.
fn healthy(hw: &MeshHw) -> Result<u16, Status> {
    let (done, err) = hw.done();
    if err != 0 || hw.faulted() {
        #[cfg(feature = "defmt")]
        defmt::warn!(
            "mesh: wafer {=u8}: PEs {=u16:#x} refused (codes {=u32:#x})",
            hw.params().wafer,
            err,
            hw.err_codes()
        );
        return Err(Status::DeviceFault);
    }
    Ok(done)
}

/// Adds wafer `w`'s metrics (loss sum, correct count, binary32) into a step's answer: wafer
/// 0's as they are, then each next wafer's added in wafer order.
fn add_metrics(out: &mut MeshStepDone, w: usize, metrics: [u32; 2]) {
    if w == 0 {
        (out.loss, out.correct) = (metrics[0], metrics[1]);
    } else {
        let add = |a: u32, b: u32| (f32::from_bits(a) + f32::from_bits(b)).to_bits();
        out.loss = add(out.loss, metrics[0]);
        out.correct = add(out.correct, metrics[1]);
    }
}

/// What a job expects of every wafer it ran on: weight words in, gradient words out.
#[derive(Debug, Clone, Copy)]
struct Expect {
    weights: u32,
    grads: u32,
}

impl MemoryXPlane {
    /// Adds the wafer meshes (`MeshHw::probe`'s answers for slots 25.., in slot order; none
    /// on a SoC without a mesh).
    pub fn with_mesh(mut self, hws: impl IntoIterator<Item = MeshHw>) -> Self {
        let mut wafers = Vec::new();
        for hw in hws {
            if wafers.push(hw).is_err() {
                break;
            }
        }
        #[cfg(feature = "defmt")]
        if let Some(m) = wafers.first() {
            let p = m.params();
            defmt::info!(
                "mesh: {=usize} wafers of {=u8}x{=u8} PEs, {=u32} SRAM words each",
                wafers.len(),
                p.rows,
                p.cols,
                p.sram_words
            );
        }
        self.mesh =
            (!wafers.is_empty()).then_some(MeshPlane { wafers, setup: None, programs: Programs::default() });
        self
    }

    /// Checks the shape, writes every wafer's route tables, and keeps the setup for the steps.
    pub(super) fn mesh_setup(&mut self, q: &MeshSetup, eng: &LinkEngine) -> Result<MeshPlan, Status> {
        let piece = Self::piece_words(Self::rings(eng)[super::RX_WEIGHTS].len);
        let m = self.mesh.as_mut().ok_or(Status::NotPresent)?;
        let p = m.wafers.first().ok_or(Status::NotPresent)?.params();
        let mut dims = [0usize; MESH_MAX_DIMS];
        for (d, &w) in dims.iter_mut().zip(q.dims()) {
            *d = usize::from(w);
        }
        let ndims = q.dims().len();
        let (b, rpc) = (usize::from(q.b), usize::from(q.rows_per_chunk));
        let map =
            check_step(&dims[..ndims], b, rpc, usize::from(p.max_b), p.sram_words, usize::from(p.prog_depth))
                .map_err(|_e| {
                    #[cfg(feature = "defmt")]
                    defmt::warn!("mesh: setup refused: {}", defmt::Display2Format(&_e));
                    Status::BadArgument
                })?;
        let stream = StreamLayout::new(rpc);
        let segs = StepSegments::new(&dims[..ndims], stream);
        let len = step_program(&dims[..ndims], &map, b, b, false).as_slice().len();
        let double = Some(StepMap::double(&dims[..ndims], b))
            .filter(|d| d.words as usize <= p.sram_words as usize && 2 * len <= usize::from(p.prog_depth));
        let mut s = Setup { dims, ndims, b, stream, map, double, segs, plan: MeshPlan::default() };
        let layers = s.layers();
        // A chunk must fit one piece of the weight ring: op 4 is fed whole chunks.
        if (0..layers).any(|l| s.chunk_words(l) > piece) {
            return Err(Status::BadArgument);
        }
        let fwd = s.forward_words();
        let bwd: u32 = (1..layers).map(|l| s.layer_words(l)).sum();
        s.plan = MeshPlan {
            rows: p.rows,
            cols: p.cols,
            b: q.b,
            max_b: u16::from(p.max_b),
            prog_len: step_program(s.dims(), &map, b, b, false).as_slice().len() as u16,
            sram_used: map.words,
            sram_words: p.sram_words,
            weight_words: fwd + bwd,
            grad_words: fwd,
            capacity: (p.pes() * b) as u32,
            wafers: m.wafers.len() as u8,
        };
        for hw in &m.wafers {
            hw.take_refused();
            for e in routes(usize::from(p.rows), usize::from(p.cols)) {
                hw.route(&e);
            }
            if hw.take_refused().is_some() {
                return Err(Status::DeviceFault);
            }
        }
        m.setup = Some(s);
        m.programs.clear();
        #[cfg(feature = "defmt")]
        defmt::info!(
            "mesh: set up {=usize} layers, B {=usize}, {=u32} SRAM words per PE",
            layers,
            b,
            map.words
        );
        Ok(s.plan)
    }

    /// Places each PE's samples and labels (as the host sends them: every PE's inputs, then
    /// every PE's labels) on the wafer whose CTRL.samples is set, and loads each PE's `kind`
    /// program (kept in `progs` for the next steps); returns the program length.
    #[allow(clippy::too_many_arguments)]
    #[allow(clippy::too_many_arguments)]
    fn place(
        &mut self,
        hw: &MeshHw,
        s: &Setup,
        n: usize,
        cap: Option<&mut Capture>,
        eng: &mut LinkEngine,
        progs: &mut Programs,
        kind: Kind,
    ) -> Result<usize, Status> {
        self.place_samples(hw, s, n, cap, eng, &s.map)?;
        Self::load_programs(hw, s, n, progs, kind, false)
    }

    /// Places each PE's samples and labels (as the host sends them) at `map`'s buffer on the
    /// wafer whose CTRL.samples is set; the PEs may be running (their sample ports take words
    /// at any time).
    fn place_samples(
        &mut self,
        hw: &MeshHw,
        s: &Setup,
        n: usize,
        mut cap: Option<&mut Capture>,
        eng: &mut LinkEngine,
        map: &StepMap,
    ) -> Result<(), Status> {
        let (rows, cols) = (usize::from(s.plan.rows), usize::from(s.plan.cols));
        let geo = Geometry::new(rows, cols, s.b);
        let pes = rows * cols;
        let d0 = s.dims[0] as u32;
        let total = n as u32 * (d0 + 1);
        if cap.is_none() && total <= Self::piece_words(Self::rings(eng)[RX_SAMPLES].len) {
            self.place_whole(hw, s, map, &geo, n, eng)?;
        } else {
            for (at, per) in [(map.x, d0), (map.labels, 1)] {
                for pos in 0..pes {
                    let range = geo.samples_at(pos, n);
                    if range.is_empty() {
                        continue;
                    }
                    hw.sample_target(snake_router(cols, pos) as u8, at);
                    let words = range.len() as u32 * per;
                    self.feed(eng, cap.as_deref_mut(), RX_SAMPLES, Op::RingToSamples, words, (0, 0, 1))?;
                }
            }
        }
        Ok(())
    }

    /// Loads each PE's `kind` program over sample buffer `parity` (kept in `progs` for the
    /// next steps; the second buffer's program after the first's in the program store, so
    /// the PEs must be idle), for a wafer holding `n` samples; returns the program length.
    fn load_programs(
        hw: &MeshHw,
        s: &Setup,
        n: usize,
        progs: &mut Programs,
        kind: Kind,
        parity: bool,
    ) -> Result<usize, Status> {
        let (rows, cols) = (usize::from(s.plan.rows), usize::from(s.plan.cols));
        let geo = Geometry::new(rows, cols, s.b);
        let map = s.map_of(parity);
        let mut len = 0;
        for pos in 0..rows * cols {
            let samples = geo.samples_at(pos, n).len();
            let key = Key { kind, slots: samples.max(1), samples, head: pos == 0, parity };
            let held = progs.holds(usize::from(hw.params().wafer), pos, key);
            let prog = progs.get(key, || match kind {
                Kind::Step => step_program(s.dims(), &map, key.slots, samples, key.head),
                Kind::Eval => eval_program(s.dims(), &map, key.slots, samples, key.head),
            });
            len = prog.as_slice().len();
            let base = if parity { len as u16 } else { 0 };
            if !held {
                hw.load_program_at(snake_router(cols, pos) as u8, base, prog.as_slice());
                if pos == 0 {
                    hw.set_tags(base, prog.tags());
                }
            }
        }
        if hw.take_refused().is_some() {
            return Err(Status::DeviceFault);
        }
        Ok(len)
    }

    /// [`Self::place`]'s samples when all `n` of them fit half of channel 4's ring: one wait
    /// until every word has arrived, then one op 5 per PE and region back to back on that
    /// ring, and one release (the core's sequencing, not the words, is what a placement
    /// costs: about 600 cycles an operation through [`Self::feed`]).
    fn place_whole(
        &mut self,
        hw: &MeshHw,
        s: &Setup,
        map: &StepMap,
        geo: &Geometry,
        n: usize,
        eng: &mut LinkEngine,
    ) -> Result<(), Status> {
        let ring = Self::rings(eng)[RX_SAMPLES];
        let (pes, cols) = (usize::from(s.plan.rows) * usize::from(s.plan.cols), usize::from(s.plan.cols));
        let d0 = s.dims[0] as u32;
        let total = n as u32 * (d0 + 1);
        let rel = eng.rx_released(RX_SAMPLES);
        if !(0..self.budget.max(1)).any(|_| eng.rx_committed(RX_SAMPLES).wrapping_sub(rel) >= 4 * total) {
            return Err(Status::Timeout);
        }
        let mut at_byte = rel;
        let mut first = true;
        for (at, per) in [(map.x, d0), (map.labels, 1)] {
            for pos in 0..pes {
                let words = geo.samples_at(pos, n).len() as u32 * per;
                if words == 0 {
                    continue;
                }
                hw.sample_target(snake_router(cols, pos) as u8, at);
                let off = at_byte & (ring.len - 1);
                if first {
                    let r = Ring { base: ring.base, len: ring.len, off };
                    self.mx.start_mover(Op::RingToSamples, r, 0, words, (0, 0, 1, 0));
                    first = false;
                } else {
                    self.mx.restart_mover(Op::RingToSamples, off, words);
                }
                match (0..self.budget.max(1)).find_map(|_| self.mx.mover_done()) {
                    Some(Ok(())) => {}
                    Some(Err(e)) => return Err(fault(e)),
                    None => return Err(Status::Timeout),
                }
                at_byte = at_byte.wrapping_add(4 * words);
            }
        }
        Self::release(eng, RX_SAMPLES, 4 * total);
        Ok(())
    }

    /// Waits until every PE of every wafer in `hws` is done and the arrays are empty, and
    /// (with a capture) until `want` gradient bytes are handed to the link since TX0's ready
    /// position `ready`.
    fn wait_pes(
        &mut self,
        hws: &[MeshHw],
        s: &Setup,
        eng: &mut LinkEngine,
        mut cap: Option<(&mut Capture, u32, u32)>,
    ) -> Result<(), Status> {
        let pes = usize::from(s.plan.rows) * usize::from(s.plan.cols);
        let all = ((1u32 << pes) - 1) as u16;
        for _ in 0..self.budget.max(1) {
            let captured = match cap.as_mut() {
                Some((c, ready, want)) => {
                    c.service(self, eng);
                    c.ready.wrapping_sub(*ready) >= *want
                }
                None => true,
            };
            let mut finished = captured;
            for hw in hws {
                let done = healthy(hw)?;
                finished &= done == all && !hw.busy();
            }
            if finished {
                return Ok(());
            }
        }
        Err(Status::Timeout)
    }

    /// The answer of a finished job on the wafers `hws`: the metrics summed in wafer order
    /// (binary32, from wafer 0 up) and the counters since `start`, each wafer's word counts
    /// checked against `want`.
    fn step_done(
        &self,
        hws: &[MeshHw],
        s: &Setup,
        step: u16,
        start: &[Counts; MAX_WAFERS],
        want: Expect,
    ) -> Result<MeshStepDone, Status> {
        let mut out = MeshStepDone { step, ..Default::default() };
        for (w, hw) in hws.iter().enumerate() {
            let mut metrics = [0u32; 2];
            if hw.take_metrics(step, &mut metrics) != 2 {
                return Err(Status::DeviceFault);
            }
            let now = Counts::read(hw, s);
            let from = start[w];
            // The words in and out must be exactly the job's: a count that differs means a
            // stream carried words of another step (or lost some), and the numbers are not
            // used.
            let grad_words = now.grad.wrapping_sub(from.grad);
            let weight_words = now.feed.wrapping_sub(from.feed);
            if grad_words != want.grads || weight_words != want.weights {
                #[cfg(feature = "defmt")]
                defmt::warn!(
                    "mesh: wafer {=usize} step {=u16} took {=u32} weight words (want {=u32}) and gave {=u32} gradient words (want {=u32})",
                    w,
                    step,
                    weight_words,
                    want.weights,
                    grad_words,
                    want.grads
                );
                return Err(Status::DeviceFault);
            }
            add_metrics(&mut out, w, metrics);
            out.cycles = out.cycles.max(now.cycles.wrapping_sub(from.cycles));
            out.fmas = out.fmas.wrapping_add(now.fmas.wrapping_sub(from.fmas));
            out.grad_words = grad_words;
        }
        Ok(out)
    }

    /// Moves `words` words of RX slot `slot` with data-mover op `op`, in pieces of at most
    /// half the ring (whole chunks of `grad.2` words for op 4), as the host's words arrive,
    /// servicing the capture ring at every poll.
    fn feed(
        &mut self,
        eng: &mut LinkEngine,
        mut cap: Option<&mut Capture>,
        slot: usize,
        op: Op,
        words: u32,
        grad: (u32, u32, u32),
    ) -> Result<(), Status> {
        let ring = Self::rings(eng)[slot];
        let max = Self::piece_words(ring.len);
        let unit = grad.2.clamp(1, max);
        let piece_max = (max / unit) * unit;
        let mut done = 0u32;
        while done < words {
            let piece = (words - done).min(piece_max);
            let rel = eng.rx_released(slot);
            let mut arrived = false;
            for _ in 0..self.budget.max(1) {
                if eng.rx_committed(slot).wrapping_sub(rel) >= 4 * piece {
                    arrived = true;
                    break;
                }
                if let Some(c) = cap.as_deref_mut() {
                    c.service(self, eng);
                }
            }
            if !arrived {
                return Err(Status::Timeout);
            }
            let r = Ring { base: ring.base, len: ring.len, off: rel & (ring.len - 1) };
            self.mx.start_mover(op, r, 0, piece, (grad.0, grad.1, grad.2, done / unit));
            let mut result = None;
            for _ in 0..self.budget.max(1) {
                if let Some(c) = cap.as_deref_mut() {
                    c.service(self, eng);
                }
                if let Some(x) = self.mx.mover_done() {
                    result = Some(x);
                    break;
                }
            }
            match result {
                Some(Ok(())) => {}
                Some(Err(e)) => return Err(fault(e)),
                None => return Err(Status::Timeout),
            }
            Self::release(eng, slot, 4 * piece);
            done += piece;
        }
        Ok(())
    }
}
