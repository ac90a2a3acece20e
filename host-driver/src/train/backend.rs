//! Where a training run's steps happen: the board ([`Board`]: MemoryX, SwarmX and the wafer
//! meshes, only the samples crossing the link) or the host's golden models ([`GoldenBoard`]:
//! the golden mesh of every wafer, SwarmX's fixed-order reduction and MemoryX's optimizer),
//! behind one trait so that `wsctl train` and `wsctl train --golden` run the same loop and
//! their results can be compared word for word.

use ws_common::ctrl::cmd::{
    MeshPlan, MeshStepDone, SwarmConfig, SwarmStatus, TraceState, MAX_RUN_STEPS, TRACE_ALL,
};
use ws_common::golden::swarm::{node_lane, NodeConfig};

use super::config::{Limits, Resolved};
use super::TrainError;
use crate::mesh::{golden_grads, BoardMesh, STALL};
use crate::optim::{Array, Golden, MxDevice};
use crate::Result;

/// What a training or evaluation step gave back: the wafers' metrics summed in wafer order,
/// as binary32 bits (the board's `MeshStepDone`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StepOut {
    /// Sum of the samples' losses.
    pub loss: u32,
    /// Correct predictions (binary32 bits of the count).
    pub correct: u32,
    /// Mesh cycles of the busiest wafer (0 on the golden model).
    pub mesh_cycles: u32,
    /// FMAs over every PE of every wafer (0 on the golden model).
    pub fmas: u32,
}

impl StepOut {
    fn of(d: &MeshStepDone) -> StepOut {
        StepOut { loss: d.loss, correct: d.correct, mesh_cycles: d.cycles, fmas: d.fmas }
    }

    /// The loss sum as a number.
    pub fn loss_sum(&self) -> f64 {
        f64::from(f32::from_bits(self.loss))
    }

    /// The correct count as a number.
    pub fn correct_count(&self) -> f64 {
        f64::from(f32::from_bits(self.correct))
    }
}

/// A place to train: the board or the golden models.
pub trait Backend {
    /// For messages: "board `sim`", "the golden models (host)".
    fn describe(&self) -> String;
    /// Sets the mesh up for the run's MLP and batch per PE and puts SwarmX in the run's
    /// known state (every port, fp32, no scale, no injected faults); returns what the board
    /// can hold, for [`Resolved::check`].
    fn setup(&mut self, r: &Resolved) -> Result<Limits>;
    /// Its MemoryX: where the layers are created, written and read.
    fn mx(&mut self) -> &mut dyn MxDevice;
    /// Training step `t` on `wafers` wafers (wafer w takes samples w·C …, C = PEs × B).
    fn train(&mut self, t: u32, wafers: u8, x: &[u32], labels: &[u32]) -> Result<StepOut>;
    /// Training steps `t`, `t` + 1, … one per batch (`(x, labels)`, all of one size), each
    /// exactly [`Backend::train`]'s; the board runs them in one request (`MeshTrainRun`).
    fn train_run(&mut self, t: u32, wafers: u8, batches: &[(Vec<u32>, Vec<u32>)]) -> Result<Vec<StepOut>> {
        let mut out = Vec::with_capacity(batches.len());
        for (i, (x, y)) in batches.iter().enumerate() {
            out.push(self.train(t + i as u32, wafers, x, y)?);
        }
        Ok(out)
    }
    /// The forward pass only, on `wafers` wafers; nothing is updated.
    fn eval(&mut self, wafers: u8, x: &[u32], labels: &[u32]) -> Result<StepOut>;
    /// The board's cycle counter (`None`: no simulated clock, as on the golden model).
    fn cycles(&mut self) -> Option<u64>;
    /// Releases the run's MemoryX layers.
    fn release(&mut self) -> Result<()>;
    /// The pipeline's debug switch ([`super::Options::read_back`]); the golden models have no
    /// pipeline, and their numbers are the same either way.
    fn set_read_back(&mut self, _on: bool) {}
    /// Starts the board's pipeline trace (docs/trace.md); the golden models have none.
    fn trace_start(&mut self) -> Result<()> {
        Err(TrainError::Config(format!("{} record no hardware trace: drop --trace", self.describe())).into())
    }
    /// Stops it: the unit's counts and channel 6's bytes of the whole trace.
    fn trace_stop(&mut self) -> Result<(TraceState, Vec<u8>)> {
        Err(TrainError::Config(format!("{} record no hardware trace", self.describe())).into())
    }
}

/// SwarmX's fixed order over the wafers: wafer w sits on downstream port PORTS − 1 − w
/// (hdl/rtl/ws_mx_wafers.v), and the node sums only the ports a job feeds.
fn wafer_mask(ports: usize, wafers: usize) -> u16 {
    (0..wafers).fold(0u16, |m, w| m | 1 << (ports - 1 - w))
}

/// The board: its wafer meshes, SwarmX and MemoryX over link protocol v2.
#[derive(Debug)]
pub struct Board {
    mesh: BoardMesh,
    name: String,
}

impl Board {
    /// A board whose link is open (`crate::mesh::open_board`).
    pub fn new(mesh: BoardMesh, name: &str) -> Board {
        Board { mesh, name: name.into() }
    }

    /// The board's mesh and MemoryX.
    pub fn mesh(&mut self) -> &mut BoardMesh {
        &mut self.mesh
    }
}

impl Backend for Board {
    fn describe(&self) -> String {
        format!("board `{}`", self.name)
    }

    fn setup(&mut self, r: &Resolved) -> Result<Limits> {
        let plan = self.mesh.setup(&r.dims, r.given.batch_per_pe, 1)?;
        let status = self.mesh.link().request(&SwarmStatus, STALL, 1)?;
        let all = ((1u32 << status.ports) - 1) as u16;
        let q = SwarmConfig { mask: all, dtype: 0, scale: false, timeout: 100_000, dead: 0 };
        self.mesh.link().request(&q, STALL, 1)?;
        let info = *self.mesh.mx().info();
        Ok(Limits {
            wafers: plan.wafers,
            pes: usize::from(plan.rows) * usize::from(plan.cols),
            max_b: usize::from(plan.max_b),
            sram_words: plan.sram_words,
            prog_depth: Limits::SIM.prog_depth,
            store_bytes: u64::from(info.free_bytes),
            layers: usize::from(info.max_layers),
        })
    }

    fn mx(&mut self) -> &mut dyn MxDevice {
        self.mesh.mx()
    }

    fn train(&mut self, t: u32, wafers: u8, x: &[u32], labels: &[u32]) -> Result<StepOut> {
        Ok(StepOut::of(&self.mesh.train_on(t, wafers, x, labels)?))
    }

    fn train_run(&mut self, t: u32, wafers: u8, batches: &[(Vec<u32>, Vec<u32>)]) -> Result<Vec<StepOut>> {
        let mut out = Vec::with_capacity(batches.len());
        for (i, group) in batches.chunks(MAX_RUN_STEPS).enumerate() {
            let b: Vec<(&[u32], &[u32])> = group.iter().map(|(x, y)| (x.as_slice(), y.as_slice())).collect();
            let run = self.mesh.train_run(t + (i * MAX_RUN_STEPS) as u32, wafers, &b)?;
            out.extend(run.steps().iter().map(StepOut::of));
        }
        Ok(out)
    }

    fn eval(&mut self, wafers: u8, x: &[u32], labels: &[u32]) -> Result<StepOut> {
        Ok(StepOut::of(&self.mesh.eval_on(wafers, x, labels)?))
    }

    fn cycles(&mut self) -> Option<u64> {
        self.mesh.board_cycles()
    }

    fn release(&mut self) -> Result<()> {
        self.mesh.mx().release().map(drop)
    }

    fn set_read_back(&mut self, on: bool) {
        self.mesh.set_read_back(on);
    }

    fn trace_start(&mut self) -> Result<()> {
        self.mesh.link().trace_start(TRACE_ALL, STALL).map(drop)
    }

    fn trace_stop(&mut self) -> Result<(TraceState, Vec<u8>)> {
        self.mesh.link().trace_stop(STALL)
    }
}

/// The golden models: each wafer's step on the golden mesh, SwarmX's reduction of the
/// wafers' gradients on the simulated board's node, and MemoryX's optimizer.
#[derive(Debug)]
pub struct GoldenBoard {
    mx: Golden,
    ports: usize,
    plan: Option<MeshPlan>,
    dims: Vec<usize>,
}

impl Default for GoldenBoard {
    fn default() -> Self {
        GoldenBoard { mx: Golden::new(), ports: crate::optim::SIM_SWARM_PORTS, plan: None, dims: Vec::new() }
    }
}

impl GoldenBoard {
    /// The golden models of the simulated board.
    pub fn new() -> Self {
        Self::default()
    }

    fn plan(&self) -> Result<MeshPlan> {
        self.plan.ok_or_else(|| TrainError::Config("the golden board was not set up".into()).into())
    }

    /// Every wafer's metrics and gradients, wafer order.
    fn wafers(&mut self, wafers: u8, x: &[u32], labels: &[u32]) -> Result<Vec<(StepOut, Vec<u32>)>> {
        let plan = self.plan()?;
        let (cap, d0) = (plan.capacity as usize, self.dims[0]);
        let layers = self.dims.len() - 1;
        let mut params = Vec::new();
        for l in 0..layers {
            let words = ((self.dims[l] + 1) * self.dims[l + 1]) as u32;
            params.extend(self.mx.read_array(l as u16, Array::W, words)?);
        }
        let mut out = Vec::new();
        for (w, lab) in labels.chunks(cap).enumerate().take(usize::from(wafers)) {
            let xs = &x[w * cap * d0..(w * cap + lab.len()) * d0];
            let (m, g) = golden_grads(&plan, &self.dims, &params, xs, lab)?;
            out.push((
                StepOut { loss: m.loss, correct: (m.correct as f32).to_bits(), ..Default::default() },
                g,
            ));
        }
        Ok(out)
    }
}

/// The wafers' metrics summed in wafer order, as the firmware sums them.
fn sum_metrics<'a>(each: impl Iterator<Item = &'a StepOut>) -> StepOut {
    let add = |a: u32, b: u32| (f32::from_bits(a) + f32::from_bits(b)).to_bits();
    each.enumerate().fold(StepOut::default(), |acc, (w, m)| {
        if w == 0 {
            *m
        } else {
            StepOut { loss: add(acc.loss, m.loss), correct: add(acc.correct, m.correct), ..acc }
        }
    })
}

impl Backend for GoldenBoard {
    fn describe(&self) -> String {
        "the golden models (host)".into()
    }

    fn setup(&mut self, r: &Resolved) -> Result<Limits> {
        let lim = Limits::SIM;
        let side = 2u8;
        let b = r.given.batch_per_pe;
        self.plan = Some(MeshPlan {
            rows: side,
            cols: side,
            b: b as u16,
            max_b: lim.max_b as u16,
            capacity: (lim.pes * b) as u32,
            wafers: lim.wafers,
            ..Default::default()
        });
        self.dims = r.dims.clone();
        Ok(lim)
    }

    fn mx(&mut self) -> &mut dyn MxDevice {
        &mut self.mx
    }

    fn train(&mut self, t: u32, wafers: u8, x: &[u32], labels: &[u32]) -> Result<StepOut> {
        let each = self.wafers(wafers, x, labels)?;
        let node = NodeConfig::new(self.ports).mask(wafer_mask(self.ports, each.len()));
        let layers = self.dims.len() - 1;
        let mut reduced: Vec<Vec<u32>> = Vec::with_capacity(layers);
        let mut at = 0;
        let mut v = vec![0u32; self.ports];
        for l in 0..layers {
            let words = (self.dims[l] + 1) * self.dims[l + 1];
            let sum = (at..at + words)
                .map(|i| {
                    for (w, (_, g)) in each.iter().enumerate() {
                        v[self.ports - 1 - w] = g[i];
                    }
                    node_lane(&node, &v).map_err(|e| TrainError::Config(format!("golden SwarmX: {e:?}")))
                })
                .collect::<std::result::Result<Vec<u32>, TrainError>>()?;
            reduced.push(sum);
            at += words;
        }
        let refs: Vec<(u16, &[u32])> =
            reduced.iter().enumerate().map(|(l, g)| (l as u16, g.as_slice())).collect();
        self.mx.step(t, &refs)?;
        Ok(sum_metrics(each.iter().map(|(m, _)| m)))
    }

    fn eval(&mut self, wafers: u8, x: &[u32], labels: &[u32]) -> Result<StepOut> {
        let each = self.wafers(wafers, x, labels)?;
        Ok(sum_metrics(each.iter().map(|(m, _)| m)))
    }

    fn cycles(&mut self) -> Option<u64> {
        None
    }

    fn release(&mut self) -> Result<()> {
        self.mx = Golden::new();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wafers_sit_on_the_last_ports() {
        assert_eq!(wafer_mask(4, 1), 0b1000);
        assert_eq!(wafer_mask(4, 2), 0b1100);
        assert_eq!(wafer_mask(4, 4), 0b1111);
    }

    #[test]
    fn metrics_add_in_wafer_order() {
        let m = |l: f32, c: f32| StepOut { loss: l.to_bits(), correct: c.to_bits(), ..Default::default() };
        let s = sum_metrics([m(1.5, 3.0), m(2.25, 4.0)].iter());
        assert_eq!((f32::from_bits(s.loss), f32::from_bits(s.correct)), (3.75, 7.0));
    }
}
