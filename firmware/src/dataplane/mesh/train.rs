//! `MeshTrain`, `MeshTrainRun` and `MeshEval` (docs/mesh-array.md "On SwarmX", "Several
//! wafers", "Weights from the store", "Runs of steps"): jobs whose weights come from
//! MemoryX's store, down SwarmX's broadcast to wafers 0 … W−1, each wafer on its SwarmX port
//! with its own part of the samples.
//!
//! ```text
//!  MemoryX store ──STREAM──► streamer weight-out ──► SwarmX broadcast ──port of w──► wafer w
//!  MemoryX lanes ◄── streamer gradient input ◄── SwarmX reduce (the wafers' ports) ◄── wafers
//! ```
//!
//! `MeshTrain` has MemoryX apply step t as the reduced gradients arrive (`feed.rs` orders
//! the weight streams); `MeshTrainRun` runs consecutive steps of the same kind in one
//! request, the samples of the next steps arriving on channel 4 while a step runs;
//! `MeshEval` streams the forward pass only and updates nothing.

use ws_common::ctrl::cmd::{MeshEval, MeshRunDone, MeshStepDone, MeshTrain, MeshTrainRun};
use ws_common::ctrl::Status;
use ws_common::mesh::{Segment, GSEG, METRICS_ID, METRICS_WORDS};

use super::chain::Chain;
use super::consts::StepSlots;
use super::{Counts, Expect, Kind, MeshPlane, Programs, Setup, MAX_WAFERS, RX_SAMPLES};
use crate::dataplane::{fault, MemoryXPlane};
use crate::hal::link::LinkEngine;
use crate::hal::mesh::MeshHw;
use crate::mx::Layer as MxLayer;

/// A store-fed job's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Job {
    /// Optimizer step t (`MeshTrain`, `MeshTrainRun`).
    Train(u32),
    /// The forward pass only (`MeshEval`).
    Eval,
}

/// The MemoryX layers of a job, checked.
pub(super) type Layers = heapless::Vec<MxLayer, GSEG>;

/// One step's place in a run.
#[derive(Debug, Clone, Copy)]
struct Turn {
    /// The run's first step: it sets up the routes, the programs and the egress table.
    first: bool,
    /// A step follows.
    more: bool,
    /// The step runs on the second sample buffer (its program after the first's).
    parity: bool,
    /// It places the next step's samples while it runs.
    prefetch: bool,
}

/// What a step of a run leaves the next.
#[derive(Debug, Clone, Copy, Default)]
struct Carry {
    /// The next step's samples are placed (and consumed from channel 4).
    placed: bool,
    /// The program length.
    len: usize,
}

impl MemoryXPlane {
    /// One training step with MemoryX in the loop (see `ws_common::ctrl::cmd::MeshTrain`).
    /// Refused before anything moves (the samples the host sent are consumed): no SwarmX, a
    /// wafer's port masked, more wafers than the board has, a MemoryX layer missing or of the
    /// wrong size or not at step t − 1, more layers than constant slots, a data mover without
    /// WOUT_CTRL.reads.
    pub(in crate::dataplane) fn mesh_train(
        &mut self,
        q: &MeshTrain,
        eng: &mut LinkEngine,
    ) -> Result<MeshStepDone, Status> {
        let run =
            self.store_fed(Job::Train(q.t), 1, usize::from(q.samples), usize::from(q.wafers), false, eng)?;
        run.steps().first().copied().ok_or(Status::DeviceFault)
    }

    /// Steps t … t + S − 1 (see `ws_common::ctrl::cmd::MeshTrainRun`), each exactly a
    /// `MeshTrain`, refused as one is (for the first step; the layers then stand at each next
    /// step's t − 1). A step that fails ends the run; the samples of the steps after it are
    /// consumed, so the streams stay in step.
    pub(in crate::dataplane) fn mesh_train_run(
        &mut self,
        q: &MeshTrainRun,
        eng: &mut LinkEngine,
    ) -> Result<MeshRunDone, Status> {
        self.store_fed(
            Job::Train(q.t),
            u32::from(q.steps),
            usize::from(q.samples),
            usize::from(q.wafers),
            q.read_back,
            eng,
        )
    }

    /// Held-out evaluation (see `ws_common::ctrl::cmd::MeshEval`): the forward pass with
    /// MemoryX's weights, nothing updated. Refused as `MeshTrain` is, but a layer at any step.
    pub(in crate::dataplane) fn mesh_eval(
        &mut self,
        q: &MeshEval,
        eng: &mut LinkEngine,
    ) -> Result<MeshStepDone, Status> {
        let run = self.store_fed(Job::Eval, 1, usize::from(q.samples), usize::from(q.wafers), false, eng)?;
        run.steps().first().copied().ok_or(Status::DeviceFault)
    }

    /// Runs `steps` steps of `job` on `n` samples each over `w` wafers; `read_back` is the
    /// pipeline's debug switch (`MeshTrainRun::read_back`).
    fn store_fed(
        &mut self,
        job: Job,
        steps: u32,
        n: usize,
        w: usize,
        read_back: bool,
        eng: &mut LinkEngine,
    ) -> Result<MeshRunDone, Status> {
        self.memoryx_mode()?;
        self.mesh.as_ref().ok_or(Status::NotPresent)?;
        let clean = self.known_state(eng);
        let mut plane = self.mesh.take().ok_or(Status::NotPresent)?;
        let r = self.store_fed_on(&mut plane, job, steps, n, w, read_back, clean, eng);
        self.mesh = Some(plane);
        r
    }

    /// Runs the job on `m` if the board reached its known state (`clean`).
    #[allow(clippy::too_many_arguments)]
    fn store_fed_on(
        &mut self,
        m: &mut MeshPlane,
        job: Job,
        steps: u32,
        n: usize,
        w: usize,
        read_back: bool,
        clean: Result<(), Status>,
        eng: &mut LinkEngine,
    ) -> Result<MeshRunDone, Status> {
        let s = m.setup.ok_or(Status::BadStep)?;
        m.programs.forget_loaded();
        let step_words = (n as u32).saturating_mul(s.dims[0] as u32 + 1);
        let checked = clean.and_then(|()| self.check_job(m, &s, job, steps, n, w));
        let (layers, ports) = match checked {
            Ok(x) => x,
            Err(st) => {
                self.drain(eng, RX_SAMPLES, step_words.saturating_mul(steps));
                return Err(st);
            }
        };
        let hws = &m.wafers[..w];
        let mut slots = StepSlots::new(&layers, self.slots).ok_or(Status::BadArgument)?;
        let first = self.trace.as_ref().map(|u| u.cycle());
        let mut run = MeshRunDone::default();
        // A training run whose wafers chain from step to step on two sample buffers
        // (`chain.rs`); the first layer forwarded when the forward buffer holds it.
        if let (Job::Train(t), true) =
            (job, steps > 1 && s.double.is_some() && slots.double() && hws.iter().all(MeshHw::can_chain))
        {
            let forward = !read_back && self.mx.forward_depth() >= s.layer_words(0);
            let c = Chain { t, steps, n, forward };
            let r = self.run_chained(hws, &mut m.programs, &mut slots, &s, &layers, ports, c, &mut run, eng);
            for hw in m.wafers.iter() {
                hw.set_ctrl(false, false, false);
            }
            self.set_fed(u16::MAX);
            if let Err(e) = r {
                self.drain(eng, RX_SAMPLES, step_words.saturating_mul(steps.saturating_sub(e.consumed)));
                return Err(e.status);
            }
            if let (Some(a), Some(u)) = (first, self.trace.as_ref()) {
                run.cycles = u.cycle().wrapping_sub(a);
            }
            return Ok(run);
        }
        let mut failed = None;
        // A training run with two sample buffers places each step's samples while the step
        // before it runs (docs/mesh-pe.md "Samples while running").
        let double = matches!(job, Job::Train(_)) && steps > 1 && s.double.is_some();
        let mut carry = Carry::default();
        for i in 0..steps {
            let job = match job {
                Job::Train(t) => Job::Train(t + i),
                other => other,
            };
            let more = i + 1 < steps;
            let turn = Turn { first: i == 0, more, parity: double && i % 2 == 1, prefetch: double && more };
            let r = self.run_job(
                hws,
                &mut m.programs,
                &mut slots,
                turn,
                &mut carry,
                job,
                n,
                &s,
                &layers,
                ports,
                eng,
            );
            match r {
                Ok(d) if run.push(d) => {}
                Ok(_) => failed = Some((i, Status::DeviceFault)),
                Err(st) => failed = Some((i, st)),
            }
            if failed.is_some() {
                break;
            }
        }
        for hw in m.wafers.iter() {
            hw.set_ctrl(false, false, false);
        }
        self.mx.set_wout_reads(false);
        self.set_fed(u16::MAX);
        if let Some((i, st)) = failed {
            // The next step's samples are consumed already when they were placed.
            let left = steps - i - 1 - u32::from(carry.placed);
            self.drain(eng, RX_SAMPLES, step_words.saturating_mul(left));
            return Err(st);
        }
        if let (Some(a), Some(u)) = (first, self.trace.as_ref()) {
            run.cycles = u.cycle().wrapping_sub(a);
        }
        Ok(run)
    }

    /// The wafers `hws` take SwarmX's ports `ports` (weights from its broadcast, gradients up
    /// its reduction); MemoryX's mover routes and capture are off. Nothing in a run changes
    /// these until it ends.
    pub(super) fn swarm_feeds(&mut self, hws: &[MeshHw], ports: u16) {
        self.set_fed(ports);
        self.mx.set_route(0, 0);
        self.mx.set_wout_swarm(false);
        self.mx.set_capture(None);
        for hw in hws {
            hw.set_ctrl(false, true, false);
        }
    }

    /// The MemoryX layers of a job of `steps` steps, and the SwarmX ports of its wafers.
    #[allow(clippy::too_many_arguments)]
    fn check_job(
        &self,
        m: &MeshPlane,
        s: &Setup,
        job: Job,
        steps: u32,
        n: usize,
        w: usize,
    ) -> Result<(Layers, u16), Status> {
        if w == 0 || w > m.wafers.len() || w > MAX_WAFERS {
            return Err(Status::BadArgument);
        }
        if let Job::Train(t) = job {
            // Every step of the run names its optimizer step.
            t.checked_add(steps).ok_or(Status::BadArgument)?;
        }
        if n == 0 || n as u32 > s.plan.capacity.saturating_mul(w as u32) {
            return Err(Status::BadArgument);
        }
        let sw = self.swarm.as_ref().ok_or(Status::NotPresent)?;
        let mut ports = 0u16;
        for hw in &m.wafers[..w] {
            if hw.busy() {
                return Err(Status::DeviceFault);
            }
            let port = hw.params().port;
            if port >= sw.hw.params().ports {
                return Err(Status::NotPresent);
            }
            ports |= 1 << port;
        }
        if job != Job::Eval && sw.policy.active() & ports != ports {
            return Err(Status::BadArgument);
        }
        let nl = s.layers();
        if nl as u32 > self.slots {
            return Err(Status::BadArgument);
        }
        let mut layers = Layers::new();
        for l in 0..nl {
            let ml = match job {
                Job::Train(t) => *self.table.check_step(l as u16, t)?,
                Job::Eval => *self.table.layer(l as u16)?,
            };
            if ml.len != s.layer_words(l) {
                return Err(Status::BadArgument);
            }
            layers.push(ml).map_err(|_| Status::BadArgument)?;
        }
        // The weights stream from the store down the broadcast (WOUT_CTRL.reads).
        if !self.mx.has_reads() {
            return Err(Status::NotPresent);
        }
        Ok((layers, ports))
    }

    /// Runs one step of a run; `carry` is what the step before it left (see [`Carry`]).
    #[allow(clippy::too_many_arguments)]
    fn run_job(
        &mut self,
        hws: &[MeshHw],
        progs: &mut Programs,
        slots: &mut StepSlots,
        turn: Turn,
        carry: &mut Carry,
        job: Job,
        n: usize,
        s: &Setup,
        layers: &Layers,
        ports: u16,
        eng: &mut LinkEngine,
    ) -> Result<MeshStepDone, Status> {
        let nl = s.layers();
        let layer = |l: usize| layers.get(l).copied().ok_or(Status::DeviceFault);
        let t = match job {
            Job::Train(t) => t,
            Job::Eval => 0,
        };
        let step = t as u16;
        if turn.first {
            self.swarm_feeds(hws, ports);
        }

        // Each wafer's samples (the host sends wafer 0's, then wafer 1's, …), unless the step
        // before placed them; the programs at the run's first step: this turn's, and with two
        // sample buffers the other turn's beside it (the program store takes writes only
        // while the PEs are idle, and every later step of the run uses one of the two).
        let kind = if job == Job::Eval { Kind::Eval } else { Kind::Step };
        let map = s.map_of(turn.parity);
        for (w, hw) in hws.iter().enumerate() {
            if !carry.placed {
                hw.set_ctrl(false, true, true);
                self.place_samples(hw, s, s.wafer_samples(n, w), None, eng, &map)?;
                hw.set_ctrl(false, true, false);
            }
            if turn.first {
                carry.len = Self::load_programs(hw, s, s.wafer_samples(n, w), progs, kind, turn.parity)?;
                if turn.prefetch {
                    Self::load_programs(hw, s, s.wafer_samples(n, w), progs, kind, !turn.parity)?;
                }
            }
        }
        carry.placed = false;
        let len = carry.len;
        let (segs, nseg) = egress_table(s, layers, job != Job::Eval)?;
        for hw in hws {
            if turn.first {
                hw.set_step(step, &segs[..nseg]);
            } else {
                // The table is the run's; the step restarts it.
                hw.set_step_number(step);
            }
        }
        // Every layer's step t, so its gradients are taken as they come.
        let errs = self.mx.err_count();
        if job != Job::Eval {
            slots.write(&mut self.mx, layers, t);
            slots.name(&mut self.mx, t);
        }
        let start = Counts::all(hws, s);
        let base = if turn.parity { len } else { 0 };
        for hw in hws {
            hw.start_at(base, len);
        }

        self.feed_streamed(job, layers, errs)?;

        // While the wafers compute: the next step's samples, into the other buffer.
        if turn.prefetch {
            let next = s.map_of(!turn.parity);
            for (w, hw) in hws.iter().enumerate() {
                hw.set_ctrl(false, true, true);
                let r = self.place_samples(hw, s, s.wafer_samples(n, w), None, eng, &next);
                hw.set_ctrl(false, true, false);
                r?;
            }
            carry.placed = true;
        }

        // While the wafers finish: the next step's constants, into the idle slots.
        if job != Job::Eval && turn.more {
            slots.prefetch(&mut self.mx, layers, t);
        }
        self.wait_pes(hws, s, eng, None)?;
        let expect = match job {
            Job::Eval => Expect { weights: s.forward_words(), grads: 0 },
            Job::Train(_) => {
                for l in 0..nl {
                    self.mx.wait_done(l, layer(l)?.chunks(), errs, self.budget).map_err(fault)?;
                }
                for l in 0..nl {
                    self.table.stepped(l as u16, t);
                }
                self.steps = self.steps.wrapping_add(1);
                Expect { weights: s.plan.weight_words, grads: s.plan.grad_words }
            }
        };
        self.step_done(hws, s, step, &start, expect)
    }
}

/// A store-fed job's egress table and its length: the metrics, then (for training) every
/// layer from the last down, in MemoryX's chunks so each chunk is one of the streamer's.
pub(super) fn egress_table(
    s: &Setup,
    layers: &Layers,
    training: bool,
) -> Result<([Segment; GSEG], usize), Status> {
    let mut segs = [Segment::metrics(METRICS_ID, METRICS_WORDS); GSEG];
    if !training {
        return Ok((segs, 1));
    }
    let nl = s.layers();
    for (k, l) in (0..nl).rev().enumerate() {
        let chunk_words = layers.get(l).ok_or(Status::DeviceFault)?.info.chunk;
        let seg = segs.get_mut(k + 1).ok_or(Status::DeviceFault)?;
        *seg = Segment { layer: l as u16, chunk_words, words: s.layer_words(l), metrics: false };
    }
    Ok((segs, nl + 1))
}
