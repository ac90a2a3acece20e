//! Bench (in progress).
