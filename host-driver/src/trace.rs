//! The hardware pipeline trace on the host: link channel 6's records
//! ([`ws_common::trace`]), turned into a timeline, a check and a summary.
//!
//! The board's trace unit writes one 32-byte record per chunk per hop (a span: first flit to
//! last flit of a chunk at a stream hop, or the streamer's update or read of a chunk). The host
//! keeps the channel's bytes as they come (a `.wstrace` capture is exactly those bytes) and:
//!
//! - [`log`]: [`TraceLog`] decodes the bytes in pieces, orders the records by `seq` and finds
//!   what was lost ([`Trace`]); the capture file helpers [`read_capture`] and
//!   [`write_capture`].
//! - [`links`]: follows a chunk hop to hop, from the data mover through SwarmX's broadcast to
//!   the wafers, and from the wafers through SwarmX's reduce and MemoryX's update to its new
//!   weights.
//! - [`perfetto`]: the Trace Event Format JSON that ui.perfetto.dev opens: a process per
//!   block, a thread per hop, one slice per record, flow arrows along each chunk's path and
//!   counters of the chunks in flight in each block.
//! - [`mod@check`]: the validator behind `wsctl trace --check`: lost records, overlapping spans
//!   on one stream, chunks that entered a block and never left it, unpaired flows.
//! - [`summary`]: busy cycles and utilisation per hop and per wafer, and when each (layer,
//!   step) ran.
//! - [`pipeline`]: `wsctl check-pipeline`: the updates hidden under the wafers' compute, the
//!   iteration-boundary bubble and its stages against a bound, the step against an ideal, each
//!   hop's and wafer's use over the training steps, and a verdict.

pub mod check;
pub mod links;
pub mod log;
pub mod perfetto;
pub mod pipeline;
pub mod summary;

#[cfg(test)]
mod tests;

use std::io;
use std::path::PathBuf;

pub use check::{check, check_board, check_capture, check_perfetto, Problem, Report, Severity};
pub use links::{kind_name, source_name, ChunkKey, Hop, Links};
pub use log::{capture_beside, read_capture, to_bytes, write_capture, DecodeError, Lost, Trace, TraceLog};
pub use perfetto::{json_text, to_perfetto, write_json};
pub use pipeline::{check_pipeline, PipelineDepths, PipelineError, PipelineOptions, PipelineReport, Verdict};
pub use summary::{summarize, summary_table, Phase, SourceUse, Summary, WaferUse};

/// The board clock assumed when none is given: the simulated board's (boards/sim/board.toml,
/// CV32E40P and the data plane at 50 MHz).
pub const DEFAULT_CLOCK_HZ: u64 = 50_000_000;

/// The fastest clock a trace can be timed with: the timeline has nanosecond resolution, and a
/// cycle shorter than a nanosecond would make a one-cycle span vanish.
pub const MAX_CLOCK_HZ: u64 = 1_000_000_000;

/// A trace capture could not be read, written, timed or passed its check.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// could not read trace capture {path} ({source}): check the path; a capture is the raw bytes of link channel 6 (`.wstrace`)
    #[error(
        "could not read trace capture {} ({source}): check the path; a capture is the raw bytes of link channel 6 (`.wstrace`)",
        path.display()
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// could not write {path} ({source}): check that its folder exists and is writable
    #[error("could not write {} ({source}): check that its folder exists and is writable", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// a board clock of {hz} Hz cannot time a trace: pass the board's `clock_hz` (1 Hz to 1 GHz; the simulated board runs at 50 MHz)
    #[error(
        "a board clock of {hz} Hz cannot time a trace: pass the board's `clock_hz` (1 Hz to 1 GHz; the simulated board runs at 50 MHz)"
    )]
    Clock {
        /// The clock given.
        hz: u64,
    },
    /// the timeline {path} would overwrite its own capture: give the JSON another name (`run.json`; the capture goes beside it as `run.wstrace`)
    #[error(
        "the timeline {} would overwrite its own capture: give the JSON another name (`run.json`; the capture goes beside it as `run.wstrace`)",
        path.display()
    )]
    SamePath {
        /// The path given.
        path: PathBuf,
    },
    /// The pipeline check failed or could not judge the capture.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// the trace check found {errors} error(s), the first: {first}
    #[error("the trace check found {errors} error(s), the first: {first}")]
    CheckFailed {
        /// How many errors.
        errors: usize,
        /// The first error's message.
        first: String,
    },
}

/// The board clock that turns trace cycles into time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    hz: u64,
}

impl Clock {
    /// A clock of `hz`, refused outside 1 Hz ..= [`MAX_CLOCK_HZ`].
    pub fn new(hz: u64) -> Result<Self, TraceError> {
        if hz == 0 || hz > MAX_CLOCK_HZ {
            return Err(TraceError::Clock { hz });
        }
        Ok(Self { hz })
    }

    /// The clock in Hz.
    pub fn hz(self) -> u64 {
        self.hz
    }

    /// `cycles` in nanoseconds, rounded to the nearest. Monotonic in `cycles`, so spans that
    /// do not overlap in cycles do not overlap in time either.
    pub fn ns(self, cycles: u64) -> u64 {
        let hz = u128::from(self.hz);
        // Saturates only past 2^64 ns (585 years), which a 48-bit counter reaches below 16 kHz.
        u64::try_from((u128::from(cycles) * 1_000_000_000 + hz / 2) / hz).unwrap_or(u64::MAX)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self { hz: DEFAULT_CLOCK_HZ }
    }
}
