//! Chained training runs (docs/mesh-array.md "Chained steps", "Forwarding"): the wafers start
//! each next step themselves (their CHAIN register), and MemoryX forwards the first layer's
//! updated weights from its update output, through the forward buffer, into that step's
//! forward pass. The core sequences and never sits between the last gradient of a step and
//! the first multiply of the next:
//!
//! ```text
//!  step t on the wafers:   FWD L0 … FWD Ln … loss … DX … GRAD Ln … GRAD L0 ─chain─► step t+1: FWD L0 …
//!  MemoryX:                                   update Ln … update L0 ─► forward buffer ─► broadcast ─┘
//!  core, while step t runs: STREAM L1.. (forward and backward) · step t+1's samples and constants
//!                           · each layer above L0 retired → its STEP names t+1 · arm the chain
//!                           (read back: STREAM_AFTER L0 before the chain, in place of forwarding)
//!  core, after the chain:   L0 retired → its STEP names t+1 · step t's answer (metrics, marks)
//! ```
//!
//! Every layer above the first is STREAMed from the store as in a single step (`feed.rs`),
//! once the first layer's update of the step before has retired, so in the weight-out
//! stream it follows the forwarded words it must follow. With the debug switch
//! (`MeshTrainRun::read_back`) MemoryX reads the first layer back from the store instead
//! (STREAM_AFTER, queued while the step runs, starts the cycle the update's last chunk
//! retires): the numbers are the same, the boundary is longer by the update's tail and the
//! store read.

use ws_common::ctrl::cmd::{MeshRunDone, MeshStepDone};
use ws_common::ctrl::Status;

use super::consts::StepSlots;
use super::train::{egress_table, Layers};
use super::{Counts, Kind, Programs, Setup, MAX_WAFERS};
use crate::dataplane::{fault, MemoryXPlane};
use crate::hal::link::LinkEngine;
use crate::hal::mesh::MeshHw;

/// A chained run's shape.
#[derive(Debug, Clone, Copy)]
pub(super) struct Chain {
    /// The first step's optimizer step.
    pub(super) t: u32,
    /// Steps (at least 2).
    pub(super) steps: u32,
    /// Samples per step.
    pub(super) n: usize,
    /// The first layer's updates go through the forward buffer (else it is read back).
    pub(super) forward: bool,
}

/// How far a failed chained run got.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stopped {
    /// Steps whose samples were taken from channel 4.
    pub(super) consumed: u32,
    pub(super) status: Status,
}

/// One wafer's marks at a step boundary: its cycle counter and FMA issues.
#[derive(Debug, Clone, Copy, Default)]
struct Mark {
    cycle: u32,
    fmas: u32,
    grad: u32,
}

impl MemoryXPlane {
    /// Runs `c.steps` chained steps on the wafers `hws` (see the module's picture). The
    /// caller has checked the job; `ports` are the wafers' SwarmX ports.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_chained(
        &mut self,
        hws: &[MeshHw],
        progs: &mut Programs,
        slots: &mut StepSlots,
        s: &Setup,
        layers: &Layers,
        ports: u16,
        c: Chain,
        run: &mut MeshRunDone,
        eng: &mut LinkEngine,
    ) -> Result<(), Stopped> {
        let mut consumed = 0;
        let r = self.chained_steps(hws, progs, slots, s, layers, ports, c, run, &mut consumed, eng);
        // Whatever happened: no wafer chains on, and no forwarded word outlives the run.
        for hw in hws {
            hw.unchain();
        }
        self.mx.set_forward(None);
        let left = self.mx.end_streams();
        let r = match r {
            Ok(()) if left != 0 => {
                #[cfg(feature = "defmt")]
                defmt::warn!("mx: {=u32} forwarded words were left in the forward buffer", left);
                Err(Status::DeviceFault)
            }
            other => other,
        };
        r.map_err(|status| Stopped { consumed, status })
    }

    #[allow(clippy::too_many_arguments)]
    fn chained_steps(
        &mut self,
        hws: &[MeshHw],
        progs: &mut Programs,
        slots: &mut StepSlots,
        s: &Setup,
        layers: &Layers,
        ports: u16,
        c: Chain,
        run: &mut MeshRunDone,
        consumed: &mut u32,
        eng: &mut LinkEngine,
    ) -> Result<(), Status> {
        let nl = s.layers();
        let chunks = |l: usize| layers.get(l).map(|x| x.chunks()).ok_or(Status::DeviceFault);

        // The run's set-up: SwarmX takes the wafers' ports, step 0's samples go into the first
        // buffer and both programs into the PEs.
        self.swarm_feeds(hws, ports);
        let mut len = 0;
        for (w, hw) in hws.iter().enumerate() {
            hw.set_ctrl(false, true, true);
            let placed = self.place_samples(hw, s, s.wafer_samples(c.n, w), None, eng, &s.map_of(false));
            hw.set_ctrl(false, true, false);
            placed?;
            len = Self::load_programs(hw, s, s.wafer_samples(c.n, w), progs, Kind::Step, false)?;
            Self::load_programs(hw, s, s.wafer_samples(c.n, w), progs, Kind::Step, true)?;
        }
        *consumed = 1;
        // The egress table; each chain advances its step.
        let (segs, nseg) = egress_table(s, layers, true)?;
        for hw in hws {
            hw.set_step(c.t as u16, &segs[..nseg]);
        }
        let errs = self.mx.err_count();
        slots.write(&mut self.mx, layers, c.t);
        slots.name(&mut self.mx, c.t);
        let start = Counts::all(hws, s);
        let mut prev = [Mark::default(); MAX_WAFERS];
        for (w, hw) in hws.iter().enumerate() {
            prev[w] = Mark { cycle: start[w].cycles, fmas: hw.fmas_total(), grad: start[w].grad };
        }
        let chains0: [u16; MAX_WAFERS] =
            core::array::from_fn(|w| hws.get(w).map_or(0, |h| h.chain_marks().chains));
        for hw in hws {
            hw.start_at(0, len);
        }
        self.mx.set_wout_reads(true);

        for i in 0..c.steps {
            let t = c.t + i;
            let parity = i % 2 == 1;
            let last = i + 1 == c.steps;
            // Step t's first-layer update feeds step t + 1 (never past the run's end). The
            // update of step t − 1 has retired, so no word of it is on its way.
            if c.forward {
                self.mx.set_forward(if last { None } else { Some(0) });
            }
            // Step t's weights from the store: every layer but the first after step 0, which
            // is forwarded or was read back already.
            let from = if i > 0 { 1 } else { 0 };
            for l in from..nl {
                self.mx.stream(l, self.budget).map_err(fault)?;
            }
            if nl > 1 {
                self.mx.stream(nl - 1, self.budget).map_err(fault)?;
                for l in (1..nl - 1).rev() {
                    self.mx.wait_done(l + 1, chunks(l + 1)?, errs, self.budget).map_err(fault)?;
                    self.mx.stream(l, self.budget).map_err(fault)?;
                }
            }
            if !last {
                // While step t computes: step t + 1's samples into the other buffer, its
                // constants into the idle slots, and each layer above the first named at
                // t + 1 once step t's update of it has retired; then the chain is armed.
                let next = s.map_of(!parity);
                for (w, hw) in hws.iter().enumerate() {
                    hw.set_ctrl(false, true, true);
                    let placed = self.place_samples(hw, s, s.wafer_samples(c.n, w), None, eng, &next);
                    hw.set_ctrl(false, true, false);
                    placed?;
                }
                *consumed += 1;
                slots.prefetch(&mut self.mx, layers, t);
                for l in 1..nl {
                    self.mx.wait_done(l, chunks(l)?, errs, self.budget).map_err(fault)?;
                    slots.name_layer(&mut self.mx, l, t + 1);
                }
                if !c.forward {
                    // The debug switch: MemoryX reads the next step's first layer back from
                    // the store as soon as this step's update of it has retired.
                    self.mx.stream_after(0, chunks(0)?, self.budget).map_err(fault)?;
                }
                let base = if parity { 0 } else { len };
                for hw in hws {
                    hw.chain(base, len);
                }
                self.wait_chained(hws, &chains0, i + 1)?;
                // The first layer's update retires just after the chain; its STEP then
                // names t + 1, long before step t + 1's first-layer gradients come.
                self.mx.wait_done(0, chunks(0)?, errs, self.budget).map_err(fault)?;
                if !c.forward {
                    // The read-back holds the layer until it has every chunk's descriptor.
                    self.mx.wait_idle(self.budget).map_err(fault)?;
                }
                slots.name_layer(&mut self.mx, 0, t + 1);
            } else {
                self.wait_pes(hws, s, eng, None)?;
                for l in 0..nl {
                    self.mx.wait_done(l, chunks(l)?, errs, self.budget).map_err(fault)?;
                }
            }
            for l in 0..nl {
                self.table.stepped(l as u16, t);
            }
            self.steps = self.steps.wrapping_add(1);
            let d = self.chained_done(hws, s, t as u16, &mut prev, last)?;
            if !run.push(d) {
                return Err(Status::DeviceFault);
            }
        }
        // Every wafer took exactly the run's weight words: a count that differs means a
        // stream carried words of another step or lost some.
        let end = Counts::all(hws, s);
        for (w, (e, b)) in end.iter().zip(&start).take(hws.len()).enumerate() {
            let fed = e.feed.wrapping_sub(b.feed);
            if fed != c.steps.wrapping_mul(s.plan.weight_words) {
                #[cfg(feature = "defmt")]
                defmt::warn!(
                    "mesh: wafer {=usize} took {=u32} weight words in {=u32} chained steps (want {=u32} each)",
                    w,
                    fed,
                    c.steps,
                    s.plan.weight_words
                );
                return Err(Status::DeviceFault);
            }
        }
        Ok(())
    }

    /// Waits until every wafer has chained `n` times since the run began (`chains0`); a PE
    /// that refused, or a streamer error, ends the wait.
    fn wait_chained(&self, hws: &[MeshHw], chains0: &[u16; MAX_WAFERS], n: u32) -> Result<(), Status> {
        for _ in 0..self.budget.max(1) {
            let mut all = true;
            for (w, hw) in hws.iter().enumerate() {
                super::healthy(hw)?;
                all &= u32::from(hw.chain_marks().chains.wrapping_sub(chains0[w])) >= n;
            }
            if all {
                return Ok(());
            }
        }
        Err(Status::Timeout)
    }

    /// Step `step`'s answer in a chained run: its metrics, and its counters between the
    /// marks the wafers latched at the chains (`prev`, moved on), or read once the last
    /// step has ended.
    fn chained_done(
        &self,
        hws: &[MeshHw],
        s: &Setup,
        step: u16,
        prev: &mut [Mark; MAX_WAFERS],
        last: bool,
    ) -> Result<MeshStepDone, Status> {
        let mut out = MeshStepDone { step, ..Default::default() };
        for (w, hw) in hws.iter().enumerate() {
            let mut metrics = [0u32; 2];
            if hw.take_metrics(step, &mut metrics) != 2 {
                return Err(Status::DeviceFault);
            }
            let now = if last {
                let c = Counts::read(hw, s);
                Mark { cycle: c.cycles, fmas: hw.fmas_total(), grad: c.grad }
            } else {
                let m = hw.chain_marks();
                Mark { cycle: m.cycle, fmas: m.fmas, grad: m.grad }
            };
            let from = core::mem::replace(&mut prev[w], now);
            let grad_words = now.grad.wrapping_sub(from.grad);
            if grad_words != s.plan.grad_words {
                #[cfg(feature = "defmt")]
                defmt::warn!(
                    "mesh: wafer {=usize} step {=u16} gave {=u32} gradient words (want {=u32})",
                    w,
                    step,
                    grad_words,
                    s.plan.grad_words
                );
                return Err(Status::DeviceFault);
            }
            super::add_metrics(&mut out, w, metrics);
            out.cycles = out.cycles.max(now.cycle.wrapping_sub(from.cycle));
            out.fmas = out.fmas.wrapping_add(now.fmas.wrapping_sub(from.fmas));
            out.grad_words = grad_words;
        }
        Ok(out)
    }
}
