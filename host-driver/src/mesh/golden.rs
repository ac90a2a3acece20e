//! The golden model of a mesh step, laid out as the board sends it (docs/mesh-array.md
//! "Accumulation order").

use ws_common::ctrl::cmd::MeshPlan;
use ws_common::golden::mesh::step::{run, Metrics};
use ws_common::golden::mesh::{Config, Mesh, Model, Reduce, Sram, StreamLayout};

use crate::error::{Error, MeshError};
use crate::Result;

/// The golden model of one step on the plan's mesh (`golden::mesh::step::run`, the order the
/// array reduces in): the metrics, and the gradient words in the order the board sends them.
pub fn golden_step(
    plan: &MeshPlan,
    dims: &[usize],
    rows_per_chunk: usize,
    step: u16,
    params: &[u32],
    x: &[u32],
    labels: &[u32],
) -> Result<(Metrics, Vec<u32>)> {
    let cfg = config(plan, dims, rows_per_chunk);
    let out = run(&cfg, params, x, labels).map_err(bad)?;
    let flits = out.gradient_flits(&cfg, step).map_err(bad)?;
    Ok((out.metrics, flits.iter().map(|f| f.payload).collect()))
}

/// The golden model of one step's gradients, flat like the parameters (layer 0 first), and
/// its metrics: what a train step feeds MemoryX, before SwarmX.
pub fn golden_grads(
    plan: &MeshPlan,
    dims: &[usize],
    params: &[u32],
    x: &[u32],
    labels: &[u32],
) -> Result<(Metrics, Vec<u32>)> {
    let out = run(&config(plan, dims, 1), params, x, labels).map_err(bad)?;
    Ok((out.metrics, out.grads))
}

/// The golden model's configuration of the plan's mesh, reducing in the array's order.
fn config<'a>(plan: &MeshPlan, dims: &'a [usize], rows_per_chunk: usize) -> Config<'a> {
    Config {
        mesh: Mesh::new(usize::from(plan.rows), usize::from(plan.cols), usize::from(plan.b)),
        model: Model::new(dims),
        // The golden budget is not the PE's (docs/mesh-pe.md); the board checked its own.
        sram: Sram { words: 1 << 24, program_words: 0 },
        stream: StreamLayout::new(rows_per_chunk),
        order: Reduce::Snake,
    }
}

/// A golden-model refusal, as the host's error.
fn bad(e: ws_common::golden::mesh::MeshError) -> Error {
    MeshError::Usage(format!("golden model: {e}")).into()
}
