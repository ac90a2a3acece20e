//! The wafer mesh behind the bulk channels (`MeshSetup`, `MeshStep`; docs/mesh-array.md
//! "Firmware driver"). The firmware configures and sequences; every sample, weight and
//! gradient word moves between the link's rings and the array through the data mover:
//!
//! - samples: RX2 (channel 4) → op 5 RING_TO_SAMPLES, each PE's block at its SX_TARGET;
//! - weights: RX0 (channel 2) → op 4 RING_TO_MESH, in whole chunks, forward then backward;
//! - gradients: the array's egress → the mover's capture sink, whose ring is TX0 (channel 2
//!   back to the host): the sink starts at TX0's ready position and may write up to what the
//!   host has acknowledged plus the ring, and the firmware hands what it wrote to the link.
//!
//! While an operation runs, every poll also moves the capture ring on, so a backward pass
//! whose gradients outgrow the ring never waits on the firmware.

use ws_common::ctrl::cmd::{MeshPlan, MeshSetup, MeshStep, MeshStepDone, MeshTrain, MESH_MAX_DIMS};
use ws_common::ctrl::Status;
use ws_common::golden::mesh::{Layer, Mesh as Geometry, StreamLayout};
use ws_common::mesh::{
    check_step, routes, snake_router, step_program, Segment, StepMap, StepSegments, GSEG, METRICS_ID,
    METRICS_WORDS,
};

use super::{fault, MemoryXPlane, RX_WEIGHTS, TX_WEIGHTS};
use crate::hal::link::{LinkEngine, Window};
use crate::hal::mesh::{group, MeshHw};
use crate::hal::mx::{Op, Ring};
use crate::mx::Layer as MxLayer;

/// RX slot of the samples (channel 4).
const RX_SAMPLES: usize = 2;
/// Capture positions are 31 bits (WOUT_HEAD).
const POS_MASK: u32 = 0x7fff_ffff;
/// Words per staged piece of a train step's weights: whole store beats, one op 4 chunk.
const STAGE_PIECE: u32 = 1024;

/// The mesh's counters at one moment.
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
}

/// The mesh and the shape it was set up for.
#[derive(Debug)]
pub(super) struct MeshPlane {
    pub(super) hw: MeshHw,
    setup: Option<Setup>,
}

/// A checked setup.
#[derive(Debug, Clone, Copy)]
struct Setup {
    dims: [usize; MESH_MAX_DIMS],
    ndims: usize,
    b: usize,
    stream: StreamLayout,
    map: StepMap,
    segs: StepSegments,
    plan: MeshPlan,
}

impl Setup {
    fn dims(&self) -> &[usize] {
        &self.dims[..self.ndims]
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
}

/// Where the capture sink stands against TX0.
struct Capture {
    ring: Window,
    /// TX0's ready position (32-bit stream position).
    ready: u32,
    /// The sink's head at the last look (31 bits).
    head: u32,
}

impl Capture {
    /// Hands what the sink wrote since the last look to the link and lets it write up to
    /// what the host acknowledged plus the ring.
    fn service(&mut self, plane: &mut MemoryXPlane, eng: &mut LinkEngine) {
        let head = plane.mx.capture_head();
        let moved = head.wrapping_sub(self.head) & POS_MASK;
        if moved != 0 {
            self.head = head;
            self.ready = self.ready.wrapping_add(moved);
            eng.set_tx_ready(TX_WEIGHTS, self.ready);
        }
        plane.mx.set_capture_limit(eng.tx_acked(TX_WEIGHTS).wrapping_add(self.ring.len));
    }
}

impl MemoryXPlane {
    /// Adds the wafer mesh (`MeshHw::probe`'s answer: `None` on a SoC without one).
    pub fn with_mesh(mut self, hw: Option<MeshHw>) -> Self {
        #[cfg(feature = "defmt")]
        if let Some(m) = &hw {
            let p = m.params();
            defmt::info!("mesh: {=u8}x{=u8} PEs, {=u32} SRAM words each", p.rows, p.cols, p.sram_words);
        }
        self.mesh = hw.map(|hw| MeshPlane { hw, setup: None });
        self
    }

    /// Checks the shape, writes the route tables, and keeps the setup for the steps.
    pub(super) fn mesh_setup(&mut self, q: &MeshSetup, eng: &LinkEngine) -> Result<MeshPlan, Status> {
        let piece = Self::piece_words(Self::rings(eng)[RX_WEIGHTS].len);
        let m = self.mesh.as_mut().ok_or(Status::NotPresent)?;
        let p = m.hw.params();
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
        let mut s = Setup { dims, ndims, b, stream, map, segs, plan: MeshPlan::default() };
        let layers = ndims - 1;
        // A chunk must fit one piece of the weight ring: op 4 is fed whole chunks.
        if (0..layers).any(|l| s.chunk_words(l) > piece) {
            return Err(Status::BadArgument);
        }
        let fwd: u32 = (0..layers).map(|l| s.layer_words(l)).sum();
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
        };
        m.hw.take_refused();
        for e in routes(usize::from(p.rows), usize::from(p.cols)) {
            m.hw.route(&e);
        }
        if m.hw.take_refused().is_some() {
            return Err(Status::DeviceFault);
        }
        m.setup = Some(s);
        #[cfg(feature = "defmt")]
        defmt::info!(
            "mesh: set up {=usize} layers, B {=usize}, {=u32} SRAM words per PE",
            layers,
            b,
            map.words
        );
        Ok(s.plan)
    }

    /// Runs one step (see `ws_common::ctrl::cmd::MeshStep`). A step refused before it starts
    /// still consumes the words the host sent for it, so the streams stay in step.
    pub(super) fn mesh_step(&mut self, q: &MeshStep, eng: &mut LinkEngine) -> Result<MeshStepDone, Status> {
        self.memoryx_mode()?;
        self.mesh.as_ref().ok_or(Status::NotPresent)?;
        let clean = self.known_state(eng);
        let plane = self.mesh.take().ok_or(Status::NotPresent)?;
        let r = self.mesh_step_on(&plane, q, clean, eng);
        self.mesh = Some(plane);
        r
    }

    /// Runs the step on `m` if the board reached its known state (`clean`).
    fn mesh_step_on(
        &mut self,
        m: &MeshPlane,
        q: &MeshStep,
        clean: Result<(), Status>,
        eng: &mut LinkEngine,
    ) -> Result<MeshStepDone, Status> {
        let s = m.setup.ok_or(Status::BadStep)?;
        let n = usize::from(q.samples);
        let refused = if n == 0 || n as u32 > s.plan.capacity { Err(Status::BadArgument) } else { clean };
        if let Err(st) = refused {
            let sample_words = n as u32 * (s.dims[0] as u32 + 1);
            self.drain(eng, RX_SAMPLES, sample_words);
            self.drain(eng, RX_WEIGHTS, s.plan.weight_words);
            return Err(st);
        }
        let r = self.run_step(&m.hw, q, &s, eng);
        self.mx.set_capture(None);
        m.hw.set_ctrl(false, false);
        r
    }

    fn run_step(
        &mut self,
        hw: &MeshHw,
        q: &MeshStep,
        s: &Setup,
        eng: &mut LinkEngine,
    ) -> Result<MeshStepDone, Status> {
        let ring = Self::rings(eng)[3];
        let ready = eng.tx_ready(TX_WEIGHTS);
        let mut cap = Capture { ring, ready, head: ready & POS_MASK };
        let limit = eng.tx_acked(TX_WEIGHTS).wrapping_add(ring.len);
        if !self.mx.set_capture(Some((Ring { base: ring.base, len: ring.len, off: 0 }, ready, limit))) {
            return Err(Status::DeviceFault);
        }
        hw.set_ctrl(true, false);
        let len = self.place(hw, s, usize::from(q.samples), Some(&mut cap), eng)?;
        hw.set_step(q.step, s.segs.as_slice());
        let start = Counts::read(hw, s);
        hw.start(len);

        // The weights: every layer forward, then L−1 … 1 for the backward pass.
        let layers = s.ndims - 1;
        for l in (0..layers).chain((1..layers).rev()) {
            let grad = (l as u32, u32::from(q.step), s.chunk_words(l));
            self.feed(eng, Some(&mut cap), RX_WEIGHTS, Op::RingToMesh, s.layer_words(l), grad)?;
        }

        // Every PE done, every gradient word handed to the link.
        let want = 4 * s.plan.grad_words;
        self.wait_pes(hw, s, eng, Some((&mut cap, ready, want)))?;
        self.step_done(hw, s, q.step, &start)
    }

    /// One training step with MemoryX in the loop (see `ws_common::ctrl::cmd::MeshTrain`).
    /// Refused before anything moves (the samples the host sent are consumed): no SwarmX, its
    /// last port masked, a MemoryX layer missing or of the wrong size or not at step t − 1,
    /// more layers than constant slots, backward weights that do not fit the staging ring.
    pub(super) fn mesh_train(&mut self, q: &MeshTrain, eng: &mut LinkEngine) -> Result<MeshStepDone, Status> {
        self.memoryx_mode()?;
        self.mesh.as_ref().ok_or(Status::NotPresent)?;
        let clean = self.known_state(eng);
        let plane = self.mesh.take().ok_or(Status::NotPresent)?;
        let r = self.mesh_train_on(&plane, q, clean, eng);
        self.mesh = Some(plane);
        r
    }

    /// Runs the step on `m` if the board reached its known state (`clean`).
    fn mesh_train_on(
        &mut self,
        m: &MeshPlane,
        q: &MeshTrain,
        clean: Result<(), Status>,
        eng: &mut LinkEngine,
    ) -> Result<MeshStepDone, Status> {
        let s = m.setup.ok_or(Status::BadStep)?;
        let n = usize::from(q.samples);
        let checked = clean.and_then(|()| self.check_train(&m.hw, &s, q, eng));
        let (layers, port) = match checked {
            Ok(x) => x,
            Err(st) => {
                self.drain(eng, RX_SAMPLES, n as u32 * (s.dims[0] as u32 + 1));
                return Err(st);
            }
        };
        let r = self.run_train(&m.hw, q, &s, &layers, port, eng);
        m.hw.set_ctrl(false, false);
        self.set_fed(u16::MAX);
        r
    }

    /// The MemoryX layers of a train step, and the SwarmX port of the mesh.
    fn check_train(
        &self,
        hw: &MeshHw,
        s: &Setup,
        q: &MeshTrain,
        eng: &LinkEngine,
    ) -> Result<([Option<MxLayer>; GSEG], u16), Status> {
        let n = usize::from(q.samples);
        if n == 0 || n as u32 > s.plan.capacity {
            return Err(Status::BadArgument);
        }
        if hw.busy() {
            return Err(Status::DeviceFault);
        }
        let sw = self.swarm.as_ref().ok_or(Status::NotPresent)?;
        let port = 1u16 << sw.hw.params().ports.saturating_sub(1);
        if sw.policy.active() & port == 0 {
            return Err(Status::BadArgument);
        }
        let nl = s.ndims - 1;
        if nl as u32 > self.slots {
            return Err(Status::BadArgument);
        }
        let mut layers = [None; GSEG];
        for (l, slot) in layers.iter_mut().enumerate().take(nl) {
            let ml = *self.table.check_step(l as u16, q.t)?;
            if ml.len != s.layer_words(l) {
                return Err(Status::BadArgument);
            }
            *slot = Some(ml);
        }
        // The backward passes' weights are staged whole, beside one forward piece.
        let ring_words = Self::rings(eng)[3].len / 4;
        let back: u32 = (1..nl).map(|l| s.layer_words(l)).sum();
        if back + STAGE_PIECE > ring_words {
            return Err(Status::BadArgument);
        }
        Ok((layers, port))
    }

    fn run_train(
        &mut self,
        hw: &MeshHw,
        q: &MeshTrain,
        s: &Setup,
        layers: &[Option<MxLayer>; GSEG],
        port: u16,
        eng: &mut LinkEngine,
    ) -> Result<MeshStepDone, Status> {
        let nl = s.ndims - 1;
        let layer = |l: usize| layers[l].ok_or(Status::DeviceFault);
        let step = q.t as u16;
        // SwarmX takes only the mesh's port; MemoryX's weight-out goes to the sink (dropped).
        self.set_fed(port);
        self.mx.set_route(0, 0);
        self.mx.set_wout_swarm(false);
        self.mx.set_capture(None);
        hw.set_ctrl(false, true);

        // The staging ring: TX0's ring, all of it free once the host has everything it was
        // sent (the link sends only up to TX0's ready position, which staging never moves).
        let ring = Self::rings(eng)[3];
        let mut idle = false;
        for _ in 0..self.budget.max(1) {
            if eng.tx_ready(TX_WEIGHTS) == eng.tx_acked(TX_WEIGHTS) {
                idle = true;
                break;
            }
        }
        if !idle {
            return Err(Status::Timeout);
        }
        let at = eng.tx_ready(TX_WEIGHTS) & (ring.len - 1);
        let stage =
            |words: u32| Ring { base: ring.base, len: ring.len, off: (at + 4 * words) & (ring.len - 1) };

        // Before anything is updated: the backward passes' weights (layers L−1 … 1) into the
        // staging ring, since MemoryX updates a layer while the mesh still walks back through it.
        let mut back = [0u32; GSEG];
        let mut staged = 0u32;
        for l in (1..nl).rev() {
            back[l] = staged;
            let words = s.layer_words(l);
            self.copy_to_ring(layer(l)?.info.bases[0], words, |done| stage(staged + done))?;
            staged += words;
        }

        let len = self.place(hw, s, usize::from(q.samples), None, eng)?;
        // The egress table in MemoryX's chunks, so each chunk is one of the streamer's.
        let mut segs = [Segment::metrics(METRICS_ID, METRICS_WORDS); GSEG];
        for (k, l) in (0..nl).rev().enumerate() {
            segs[k + 1] = Segment {
                layer: l as u16,
                chunk_words: layer(l)?.info.chunk,
                words: s.layer_words(l),
                metrics: false,
            };
        }
        hw.set_step(step, &segs[..nl + 1]);
        // Every layer's step t, so its gradients are taken as they come.
        let errs = self.mx.err_count();
        for l in 0..nl {
            let ml = layer(l)?;
            let slot = l as u32 % self.slots;
            self.mx.write_slot(slot as usize, &ml.consts(q.t));
            self.mx.set_step(l, q.t, slot);
        }
        let start = Counts::read(hw, s);
        hw.start(len);

        // Forward: each layer from the store, a piece at a time through the staging ring.
        let fwd = stage(staged);
        for l in 0..nl {
            let (base, words) = (layer(l)?.info.bases[0], s.layer_words(l));
            let mut done = 0;
            while done < words {
                let piece = (words - done).min(STAGE_PIECE);
                self.mx
                    .mover(Op::StoreToRing, fwd, base + 4 * done, piece, (0, 0, 0, 0), self.budget)
                    .map_err(fault)?;
                let hdr = (l as u32, u32::from(step), STAGE_PIECE, done / STAGE_PIECE);
                self.mx.mover(Op::RingToMesh, fwd, 0, piece, hdr, self.budget).map_err(fault)?;
                done += piece;
            }
        }
        // Backward: the staged copies.
        for l in (1..nl).rev() {
            let words = s.layer_words(l);
            let mut done = 0;
            while done < words {
                let piece = (words - done).min(STAGE_PIECE);
                let hdr = (l as u32, u32::from(step), STAGE_PIECE, done / STAGE_PIECE);
                self.mx
                    .mover(Op::RingToMesh, stage(back[l] + done), 0, piece, hdr, self.budget)
                    .map_err(fault)?;
                done += piece;
            }
        }

        self.wait_pes(hw, s, eng, None)?;
        for l in 0..nl {
            self.mx.wait_done(l, layer(l)?.chunks(), errs, self.budget).map_err(fault)?;
        }
        for l in 0..nl {
            self.table.stepped(l as u16, q.t);
        }
        self.steps = self.steps.wrapping_add(1);
        self.step_done(hw, s, step, &start)
    }

    /// Copies `words` store words from `addr` into the ring `at(done)` names for each piece.
    fn copy_to_ring(&mut self, addr: u32, words: u32, at: impl Fn(u32) -> Ring) -> Result<(), Status> {
        let mut done = 0;
        while done < words {
            let piece = (words - done).min(STAGE_PIECE);
            self.mx
                .mover(Op::StoreToRing, at(done), addr + 4 * done, piece, (0, 0, 0, 0), self.budget)
                .map_err(fault)?;
            done += piece;
        }
        Ok(())
    }

    /// Places each PE's samples and labels (as the host sends them: every PE's inputs, then
    /// every PE's labels) and loads each PE's program; returns the program length.
    fn place(
        &mut self,
        hw: &MeshHw,
        s: &Setup,
        n: usize,
        mut cap: Option<&mut Capture>,
        eng: &mut LinkEngine,
    ) -> Result<usize, Status> {
        let (rows, cols) = (usize::from(s.plan.rows), usize::from(s.plan.cols));
        let geo = Geometry::new(rows, cols, s.b);
        let pes = rows * cols;
        let d0 = s.dims[0] as u32;
        for (at, per) in [(s.map.x, d0), (s.map.labels, 1)] {
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
        let mut len = 0;
        for pos in 0..pes {
            let range = geo.samples_at(pos, n);
            let prog = step_program(s.dims(), &s.map, range.len().max(1), range.len(), pos == 0);
            len = prog.as_slice().len();
            hw.load_program(snake_router(cols, pos) as u8, prog.as_slice());
        }
        if hw.take_refused().is_some() {
            return Err(Status::DeviceFault);
        }
        Ok(len)
    }

    /// Waits until every PE is done and the array is empty, and (with a capture) until
    /// `want` gradient bytes are handed to the link since TX0's ready position `ready`.
    fn wait_pes(
        &mut self,
        hw: &MeshHw,
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
            let (done, err) = hw.done();
            if err != 0 || hw.faulted() {
                #[cfg(feature = "defmt")]
                defmt::warn!("mesh: PEs {=u16:#x} refused (codes {=u32:#x})", err, hw.err_codes());
                return Err(Status::DeviceFault);
            }
            if done == all && !hw.busy() && captured {
                return Ok(());
            }
        }
        Err(Status::Timeout)
    }

    /// The answer of a finished step: the metrics and the counters since `start`.
    fn step_done(&self, hw: &MeshHw, s: &Setup, step: u16, start: &Counts) -> Result<MeshStepDone, Status> {
        let mut metrics = [0u32; 2];
        if hw.take_metrics(step, &mut metrics) != 2 {
            return Err(Status::DeviceFault);
        }
        let now = Counts::read(hw, s);
        // The words in and out must be exactly the step's: a count that differs means a
        // stream carried words of another step (or lost some), and the numbers are not used.
        let grad_words = now.grad.wrapping_sub(start.grad);
        let weight_words = now.feed.wrapping_sub(start.feed);
        if grad_words != s.plan.grad_words || weight_words != s.plan.weight_words {
            #[cfg(feature = "defmt")]
            defmt::warn!(
                "mesh: step {=u16} took {=u32} weight words (want {=u32}) and gave {=u32} gradient words (want {=u32})",
                step,
                weight_words,
                s.plan.weight_words,
                grad_words,
                s.plan.grad_words
            );
            return Err(Status::DeviceFault);
        }
        Ok(MeshStepDone {
            step,
            loss: metrics[0],
            correct: metrics[1],
            cycles: now.cycles.wrapping_sub(start.cycles),
            fmas: now.fmas.wrapping_sub(start.fmas),
            grad_words,
        })
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
