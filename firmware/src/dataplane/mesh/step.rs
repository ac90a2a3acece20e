//! `MeshStep` (docs/mesh-array.md "Firmware driver"): one training step on wafer 0 with the
//! host's weights, the gradients back to the host.
//!
//! - samples: RX2 (channel 4) → op 5 into wafer 0 (no wafer has CTRL.samples);
//! - weights: RX0 (channel 2) → op 4 RING_TO_MESH, in whole chunks, forward then backward;
//! - gradients: the array's egress → the mover's capture sink, whose ring is TX0 (channel 2
//!   back to the host): the sink starts at TX0's ready position and may write up to what the
//!   host has acknowledged plus the ring, and the firmware hands what it wrote to the link.
//!
//! While an operation runs, every poll also moves the capture ring on, so a backward pass
//! whose gradients outgrow the ring never waits on the firmware.

use ws_common::ctrl::cmd::{MeshStep, MeshStepDone};
use ws_common::ctrl::Status;

use super::{Counts, Expect, Kind, MeshPlane, Programs, Setup, RX_SAMPLES};
use crate::dataplane::{MemoryXPlane, RX_WEIGHTS, TX_WEIGHTS};
use crate::hal::link::{LinkEngine, Window};
use crate::hal::mesh::MeshHw;
use crate::hal::mx::{Op, Ring};

/// Capture positions are 31 bits (WOUT_HEAD).
const POS_MASK: u32 = 0x7fff_ffff;

/// Where the capture sink stands against TX0.
pub(super) struct Capture {
    ring: Window,
    /// TX0's ready position (32-bit stream position).
    pub(super) ready: u32,
    /// The sink's head at the last look (31 bits).
    head: u32,
}

impl Capture {
    /// Hands what the sink wrote since the last look to the link and lets it write up to
    /// what the host acknowledged plus the ring.
    pub(super) fn service(&mut self, plane: &mut MemoryXPlane, eng: &mut LinkEngine) {
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
    /// Runs one step (see `ws_common::ctrl::cmd::MeshStep`). A step refused before it starts
    /// still consumes the words the host sent for it, so the streams stay in step.
    pub(in crate::dataplane) fn mesh_step(
        &mut self,
        q: &MeshStep,
        eng: &mut LinkEngine,
    ) -> Result<MeshStepDone, Status> {
        self.memoryx_mode()?;
        self.mesh.as_ref().ok_or(Status::NotPresent)?;
        let clean = self.known_state(eng);
        let mut plane = self.mesh.take().ok_or(Status::NotPresent)?;
        let r = self.mesh_step_on(&mut plane, q, clean, eng);
        self.mesh = Some(plane);
        r
    }

    /// Runs the step on wafer 0 of `m` if the board reached its known state (`clean`).
    fn mesh_step_on(
        &mut self,
        m: &mut MeshPlane,
        q: &MeshStep,
        clean: Result<(), Status>,
        eng: &mut LinkEngine,
    ) -> Result<MeshStepDone, Status> {
        let s = m.setup.ok_or(Status::BadStep)?;
        m.programs.forget_loaded();
        let hw = m.wafers.first().ok_or(Status::NotPresent)?;
        let n = usize::from(q.samples);
        let refused = if n == 0 || n as u32 > s.plan.capacity { Err(Status::BadArgument) } else { clean };
        if let Err(st) = refused {
            let sample_words = n as u32 * (s.dims[0] as u32 + 1);
            self.drain(eng, RX_SAMPLES, sample_words);
            self.drain(eng, RX_WEIGHTS, s.plan.weight_words);
            return Err(st);
        }
        let r = self.run_step(hw, q, &s, &mut m.programs, eng);
        self.mx.set_capture(None);
        hw.set_ctrl(false, false, false);
        r
    }

    fn run_step(
        &mut self,
        hw: &MeshHw,
        q: &MeshStep,
        s: &Setup,
        progs: &mut Programs,
        eng: &mut LinkEngine,
    ) -> Result<MeshStepDone, Status> {
        let ring = Self::rings(eng)[3];
        let ready = eng.tx_ready(TX_WEIGHTS);
        let mut cap = Capture { ring, ready, head: ready & POS_MASK };
        let limit = eng.tx_acked(TX_WEIGHTS).wrapping_add(ring.len);
        if !self.mx.set_capture(Some((Ring { base: ring.base, len: ring.len, off: 0 }, ready, limit))) {
            return Err(Status::DeviceFault);
        }
        hw.set_ctrl(true, false, false);
        let len = self.place(hw, s, usize::from(q.samples), Some(&mut cap), eng, progs, Kind::Step)?;
        hw.set_step(q.step, s.segs.as_slice());
        let hws = core::slice::from_ref(hw);
        let start = Counts::all(hws, s);
        hw.start(len);

        // The weights: every layer forward, then L−1 … 1 for the backward pass.
        let layers = s.layers();
        for l in (0..layers).chain((1..layers).rev()) {
            let grad = (l as u32, u32::from(q.step), s.chunk_words(l));
            self.feed(eng, Some(&mut cap), RX_WEIGHTS, Op::RingToMesh, s.layer_words(l), grad)?;
        }

        // Every PE done, every gradient word handed to the link.
        let want = 4 * s.plan.grad_words;
        self.wait_pes(hws, s, eng, Some((&mut cap, ready, want)))?;
        let expect = Expect { weights: s.plan.weight_words, grads: s.plan.grad_words };
        self.step_done(hws, s, q.step, &start, expect)
    }
}
