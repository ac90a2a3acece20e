//! `wsctl train`: training an MLP on a board, from a data set to its curves.
//!
//! The host-side pieces that need no board:
//!
//! - [`data`]: the data set (the built-in digits, or a user's safetensors file), checked,
//!   and its stratified train/test split.
//! - [`rng`]: the run's SplitMix64 generator, whose one-word state a checkpoint stores.
//! - [`curves`]: the loss and accuracy per step and per epoch, as CSV tables and a plot.

pub mod curves;
pub mod data;
pub mod rng;
