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

use ws_common::ctrl::cmd::{MeshPlan, MeshSetup, MeshStep, MeshStepDone, MESH_MAX_DIMS};
use ws_common::ctrl::Status;
use ws_common::golden::mesh::{Layer, Mesh as Geometry, StreamLayout};
use ws_common::mesh::{check_step, routes, snake_router, step_program, StepMap, StepSegments};

use super::{MemoryXPlane, RX_WEIGHTS, TX_WEIGHTS};
use crate::hal::link::{LinkEngine, Window};
use crate::hal::mesh::{group, MeshHw};
use crate::hal::mx::{Op, Ring};

/// RX slot of the samples (channel 4).
const RX_SAMPLES: usize = 2;
/// Capture positions are 31 bits (WOUT_HEAD).
const POS_MASK: u32 = 0x7fff_ffff;

/// The mesh and the shape it was set up for.
#[derive(Debug)]
pub(super) struct MeshPlane {
    hw: MeshHw,
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
        let plane = self.mesh.take().ok_or(Status::NotPresent)?;
        let r = self.mesh_step_on(&plane, q, eng);
        self.mesh = Some(plane);
        r
    }

    fn mesh_step_on(
        &mut self,
        m: &MeshPlane,
        q: &MeshStep,
        eng: &mut LinkEngine,
    ) -> Result<MeshStepDone, Status> {
        let s = m.setup.ok_or(Status::BadStep)?;
        let n = usize::from(q.samples);
        let busy = m.hw.busy();
        if n == 0 || n as u32 > s.plan.capacity || busy {
            let sample_words = n as u32 * (s.dims[0] as u32 + 1);
            self.drain(eng, RX_SAMPLES, sample_words);
            self.drain(eng, RX_WEIGHTS, s.plan.weight_words);
            return Err(if busy { Status::DeviceFault } else { Status::BadArgument });
        }
        let r = self.run_step(&m.hw, q, &s, eng);
        self.mx.set_capture(None);
        m.hw.set_grad_capture(false);
        r
    }

    fn run_step(
        &mut self,
        hw: &MeshHw,
        q: &MeshStep,
        s: &Setup,
        eng: &mut LinkEngine,
    ) -> Result<MeshStepDone, Status> {
        let n = usize::from(q.samples);
        let (rows, cols) = (usize::from(s.plan.rows), usize::from(s.plan.cols));
        let geo = Geometry::new(rows, cols, s.b);
        let pes = rows * cols;
        let ring = Self::rings(eng)[3];
        let ready = eng.tx_ready(TX_WEIGHTS);
        let mut cap = Capture { ring, ready, head: ready & POS_MASK };
        let limit = eng.tx_acked(TX_WEIGHTS).wrapping_add(ring.len);
        if !self.mx.set_capture(Some((Ring { base: ring.base, len: ring.len, off: 0 }, ready, limit))) {
            return Err(Status::DeviceFault);
        }
        hw.set_grad_capture(true);

        // Each PE's samples, then each PE's labels, in the order the host sends them.
        let d0 = s.dims[0] as u32;
        for (at, per) in [(s.map.x, d0), (s.map.labels, 1)] {
            for pos in 0..pes {
                let range = geo.samples_at(pos, n);
                if range.is_empty() {
                    continue;
                }
                hw.sample_target(snake_router(cols, pos) as u8, at);
                self.feed(eng, &mut cap, RX_SAMPLES, Op::RingToSamples, range.len() as u32 * per, (0, 0, 1))?;
            }
        }

        // Programs, the egress table, the counters' starting points.
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
        hw.set_step(q.step, s.segs.as_slice());
        let fmas =
            |hw: &MeshHw| (0..pes as u32).fold(0u32, |a, r| a.wrapping_add(hw.counter(group::FMAS, r)));
        let (fma0, cyc0, grad0) = (fmas(hw), hw.counter(group::CYCLES, 0), hw.words().2);
        hw.start(len);

        // The weights: every layer forward, then L−1 … 1 for the backward pass.
        let layers = s.ndims - 1;
        for l in (0..layers).chain((1..layers).rev()) {
            let grad = (l as u32, u32::from(q.step), s.chunk_words(l));
            self.feed(eng, &mut cap, RX_WEIGHTS, Op::RingToMesh, s.layer_words(l), grad)?;
        }

        // Every PE done, every gradient word handed to the link.
        let all = ((1u32 << pes) - 1) as u16;
        let want = 4 * s.plan.grad_words;
        let mut finished = false;
        for _ in 0..self.budget.max(1) {
            cap.service(self, eng);
            let (done, err) = hw.done();
            if err != 0 || hw.faulted() {
                #[cfg(feature = "defmt")]
                defmt::warn!("mesh: PEs {=u16:#x} refused (codes {=u32:#x})", err, hw.err_codes());
                return Err(Status::DeviceFault);
            }
            let captured = cap.ready.wrapping_sub(ready);
            if done == all && !hw.busy() && captured >= want {
                finished = true;
                break;
            }
        }
        if !finished {
            return Err(Status::Timeout);
        }
        let mut metrics = [0u32; 2];
        if hw.take_metrics(q.step, &mut metrics) != 2 {
            return Err(Status::DeviceFault);
        }
        let grad_words = hw.words().2.wrapping_sub(grad0);
        if grad_words != s.plan.grad_words {
            return Err(Status::DeviceFault);
        }
        Ok(MeshStepDone {
            step: q.step,
            loss: metrics[0],
            correct: metrics[1],
            cycles: hw.counter(group::CYCLES, 0).wrapping_sub(cyc0),
            fmas: fmas(hw).wrapping_sub(fma0),
            grad_words,
        })
    }

    /// Moves `words` words of RX slot `slot` with data-mover op `op`, in pieces of at most
    /// half the ring (whole chunks of `grad.2` words for op 4), as the host's words arrive,
    /// servicing the capture ring at every poll.
    fn feed(
        &mut self,
        eng: &mut LinkEngine,
        cap: &mut Capture,
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
                cap.service(self, eng);
            }
            if !arrived {
                return Err(Status::Timeout);
            }
            let r = Ring { base: ring.base, len: ring.len, off: rel & (ring.len - 1) };
            self.mx.start_mover(op, r, 0, piece, (grad.0, grad.1, grad.2, done / unit));
            let mut result = None;
            for _ in 0..self.budget.max(1) {
                cap.service(self, eng);
                if let Some(x) = self.mx.mover_done() {
                    result = Some(x);
                    break;
                }
            }
            match result {
                Some(Ok(())) => {}
                Some(Err(e)) => return Err(super::fault(e)),
                None => return Err(Status::Timeout),
            }
            Self::release(eng, slot, 4 * piece);
            done += piece;
        }
        Ok(())
    }
}
