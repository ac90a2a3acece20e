//! `wsctl train`: training an MLP on a board, from a data set to its curves.
//!
//! - [`config`]: the run's configuration (flags or TOML), resolved against the data set and
//!   checked against the board's limits before anything streams.
//! - [`data`]: the data set (the built-in digits, or a user's safetensors file), checked,
//!   and its stratified train/test split.
//! - [`backend`]: where the steps run: the board, or the host's golden models.
//! - [`run`]: the loop: per-epoch shuffles, a step per batch, held-out evaluation,
//!   checkpoints, resuming.
//! - [`checkpoint`]: the safetensors checkpoint, with PyTorch's names.
//! - [`rng`]: the run's SplitMix64 generator, whose one-word state a checkpoint stores.
//! - [`report`]: the progress line and the summary table.
//! - [`curves`]: the loss and accuracy per step and per epoch, as CSV tables and a plot.

pub mod backend;
pub mod checkpoint;
pub mod config;
pub mod curves;
pub mod data;
pub mod report;
pub mod rng;
pub mod run;

#[cfg(test)]
mod tests;

pub use backend::{Backend, Board, GoldenBoard, StepOut};
pub use checkpoint::Checkpoint;
pub use config::{Limits, Resolved, TrainConfig};
pub use run::{train, Event, Options, Summary, STEPS_PER_REQUEST};

/// A training run refused or went wrong on the host's side.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The configuration cannot run; the message says what to change.
    #[error("training configuration: {0}")]
    Config(String),
    /// The data set is unusable.
    #[error(transparent)]
    Data(#[from] data::DataError),
    /// A checkpoint is unusable or of another run.
    #[error("checkpoint: {0}")]
    Checkpoint(String),
}
