//! Placeholder until `cargo xtask regen` runs.
