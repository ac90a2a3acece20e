//! defmt logs: decoding the firmware's rzcobs log frames against its ELF.
//!
//! The firmware logs with defmt 1 (rzcobs encoding, `{=u64:us}` timestamps) into its UART;
//! the simulator serves that byte stream on its log port, history first (docs/sim.md). Frames
//! end with a `0x00` byte. [`DefmtLog`] holds the ELF's `.defmt` table and the DWARF source
//! locations of every log statement; [`LogDecoder`] splits a byte stream into frames and turns
//! each into a [`LogLine`]; [`LogStream`] reads the simulator's log port.
//!
//! Nothing here panics on bytes from outside: a frame that does not decode becomes a
//! [`LogRecord::Malformed`] and decoding goes on with the next frame.

use std::fmt;
use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpStream};
use std::ops::ControlFlow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use defmt_decoder::{Locations, Table};

use crate::error::{LogError, Result};

/// One decoded log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// `TRACE`, `DEBUG`, `INFO`, `WARN` or `ERROR`; `None` for `println!`.
    pub level: Option<String>,
    /// The timestamp as the firmware formats it (`0.001234` seconds for `{=u64:us}`).
    pub timestamp: Option<String>,
    /// The timestamp in microseconds, when it has the `seconds.micros` form.
    pub timestamp_us: Option<u64>,
    /// The formatted message.
    pub message: String,
    /// Source file of the log statement, shortened to the crate (`src/main.rs`).
    pub file: Option<String>,
    /// Source line.
    pub line: Option<u32>,
    /// Module path (`ws_firmware::board`).
    pub module: Option<String>,
}

/// A frame that did not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    /// Bytes dropped (the frame without its `0x00` terminator).
    pub bytes: usize,
    /// True for the first frame of a stream that started in the middle of a frame.
    pub partial_start: bool,
}

/// What the decoder produced for one frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogRecord {
    /// A decoded line.
    Line(LogLine),
    /// A frame that did not decode; decoding continued after it.
    Malformed(Malformed),
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.partial_start {
            write!(f, "(skipped {} bytes of a frame cut by the start of the stream)", self.bytes)
        } else {
            write!(
                f,
                "(dropped a malformed defmt frame of {} bytes: the ELF may not match the running firmware)",
                self.bytes
            )
        }
    }
}

/// The `.defmt` table and source locations of a firmware ELF.
pub struct DefmtLog {
    table: Table,
    locations: Option<Locations>,
    path: PathBuf,
}

impl fmt::Debug for DefmtLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DefmtLog")
            .field("path", &self.path)
            .field("locations", &self.locations.as_ref().map(|l| l.len()))
            .finish_non_exhaustive()
    }
}

impl DefmtLog {
    /// Reads the firmware ELF at `path`.
    pub fn from_elf(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let elf = std::fs::read(path).map_err(|source| LogError::ReadElf { path: path.into(), source })?;
        Self::from_bytes(&elf, path)
    }

    /// Parses an ELF image; `path` is used in messages.
    pub fn from_bytes(elf: &[u8], path: &Path) -> Result<Self> {
        let table = match Table::parse(elf) {
            Ok(Some(t)) => t,
            Ok(None) => return Err(LogError::NoDefmt { path: path.into() }.into()),
            Err(e) => return Err(LogError::Table { path: path.into(), reason: format!("{e:#}") }.into()),
        };
        // Without DWARF line info lines still decode, just without file:line.
        let locations = table.get_locations(elf).ok().filter(|l| !l.is_empty());
        Ok(Self { table, locations, path: path.into() })
    }

    /// The ELF the table came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True when the ELF carried source locations.
    pub fn has_locations(&self) -> bool {
        self.locations.is_some()
    }

    /// Decodes one rzcobs frame (without its `0x00` terminator).
    pub fn decode_frame(&self, frame: &[u8]) -> Option<LogLine> {
        if frame.is_empty() || frame.contains(&0) {
            return None;
        }
        // The stream decoder holds one frame here; it is cheap, and owning no decoder keeps
        // `DefmtLog` free of self-borrows. defmt-decoder formats with a few `unwrap`s on
        // table-driven paths; a frame must never take the host down, so guard it.
        catch_unwind(AssertUnwindSafe(|| {
            let mut d = self.table.new_stream_decoder();
            d.received(frame);
            d.received(&[0]);
            let f = d.decode().ok()?;
            let timestamp = f.display_timestamp().map(|t| t.to_string());
            let loc = self.locations.as_ref().and_then(|l| l.get(&f.index()));
            Some(LogLine {
                level: f.level().map(|l| l.as_str().to_uppercase()),
                timestamp_us: timestamp.as_deref().and_then(parse_seconds_us),
                timestamp,
                message: f.display_message().to_string(),
                file: loc.map(|l| short_path(&l.file)),
                line: loc.and_then(|l| u32::try_from(l.line).ok()),
                module: loc.map(|l| l.module.clone()),
            })
        }))
        .ok()
        .flatten()
    }
}

/// `seconds.fraction` (the `:us` / `:ms` display hints) in microseconds.
fn parse_seconds_us(t: &str) -> Option<u64> {
    let (s, frac) = t.trim().split_once('.').unwrap_or((t.trim(), ""));
    if frac.len() > 6 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs: u64 = s.parse().ok()?;
    let mut us: u64 = if frac.is_empty() { 0 } else { frac.parse().ok()? };
    for _ in frac.len()..6 {
        us *= 10;
    }
    secs.checked_mul(1_000_000)?.checked_add(us)
}

/// Shortens a DWARF source path for people: from its crate's `src/` on
/// (`/work/main/firmware/src/main.rs` → `src/main.rs`); dependency sources keep their crate
/// folder (`heapless-0.9.1/src/vec.rs`).
fn short_path(path: &Path) -> String {
    let parts: Vec<Component<'_>> = path.components().collect();
    if let Some(i) = parts.iter().rposition(|c| c.as_os_str() == "src") {
        let registry = parts.iter().any(|c| c.as_os_str() == "registry" || c.as_os_str() == "git");
        let from = if registry && i > 0 { i - 1 } else { i };
        let short: PathBuf = parts[from..].iter().collect();
        return short.display().to_string();
    }
    path.display().to_string()
}

/// Splits a byte stream into rzcobs frames and decodes them.
#[derive(Debug)]
pub struct LogDecoder {
    log: DefmtLog,
    buf: Vec<u8>,
    /// False until the first `0x00` when the stream may have started inside a frame.
    synced: bool,
    /// True until the first frame ends.
    first: bool,
    malformed: u64,
}

/// The longest frame kept while waiting for its terminator; a longer run without a `0x00`
/// is garbage and is dropped as malformed.
const MAX_LOG_FRAME: usize = 64 * 1024;

impl LogDecoder {
    /// A decoder for a stream that starts at a frame boundary (the simulator's log port sends
    /// its history from boot). If the first frame still does not decode, it is reported as
    /// cut by the start of the stream.
    pub fn new(log: DefmtLog) -> Self {
        Self { log, buf: Vec::new(), synced: true, first: true, malformed: 0 }
    }

    /// A decoder for a stream joined at an unknown point: bytes up to the first `0x00` are
    /// skipped unseen.
    pub fn mid_stream(log: DefmtLog) -> Self {
        Self { log, buf: Vec::new(), synced: false, first: true, malformed: 0 }
    }

    /// The table in use.
    pub fn log(&self) -> &DefmtLog {
        &self.log
    }

    /// Frames that did not decode so far (the cut first frame excluded).
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// Feeds bytes and returns a record for every frame they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<LogRecord> {
        let mut out = Vec::new();
        for &b in bytes {
            if !self.synced {
                self.synced = b == 0;
                self.first = false;
                continue;
            }
            if b != 0 {
                self.buf.push(b);
                if self.buf.len() > MAX_LOG_FRAME {
                    self.malformed += 1;
                    out.push(LogRecord::Malformed(Malformed { bytes: self.buf.len(), partial_start: false }));
                    self.buf.clear();
                    // Resynchronise on the next terminator.
                    self.synced = false;
                }
                continue;
            }
            if self.buf.is_empty() {
                // defmt starts its stream with a separator; runs of zeros are no frames.
                continue;
            }
            let first = std::mem::replace(&mut self.first, false);
            match self.log.decode_frame(&self.buf) {
                Some(line) => out.push(LogRecord::Line(line)),
                None => {
                    if !first {
                        self.malformed += 1;
                    }
                    out.push(LogRecord::Malformed(Malformed { bytes: self.buf.len(), partial_start: first }));
                }
            }
            self.buf.clear();
        }
        out
    }
}

/// The simulator's log port: the UART byte stream, history from boot, then live.
#[derive(Debug)]
pub struct LogStream {
    sock: TcpStream,
    addr: SocketAddr,
    decoder: LogDecoder,
    eof: bool,
}

/// How long [`LogStream::read_available`] waits in all, however chatty the firmware is.
pub const READ_AVAILABLE_LIMIT: Duration = Duration::from_secs(30);

impl LogStream {
    /// Connects to the log port at `addr` and decodes against `log`.
    pub fn connect(addr: SocketAddr, log: DefmtLog) -> Result<Self> {
        let sock = TcpStream::connect_timeout(&addr, crate::transport::CONNECT_TIMEOUT)
            .map_err(|source| LogError::Connect { addr, source })?;
        Ok(Self { sock, addr, decoder: LogDecoder::new(log), eof: false })
    }

    /// The decoder (for its malformed-frame count).
    pub fn decoder(&self) -> &LogDecoder {
        &self.decoder
    }

    /// True once the simulator closed the stream.
    pub fn at_end(&self) -> bool {
        self.eof
    }

    /// Waits up to `timeout` for bytes and returns the records they complete. Returns an empty
    /// list on a timeout or at the end of the stream (see [`LogStream::at_end`]).
    pub fn read_records(&mut self, timeout: Duration) -> Result<Vec<LogRecord>> {
        if self.eof {
            return Ok(Vec::new());
        }
        let io = |source| LogError::Io { addr: self.addr, source };
        self.sock.set_read_timeout(Some(timeout.max(Duration::from_millis(1)))).map_err(io)?;
        let mut buf = [0u8; 8192];
        loop {
            return match self.sock.read(&mut buf) {
                Ok(0) => {
                    self.eof = true;
                    Ok(Vec::new())
                }
                Ok(n) => Ok(self.decoder.push(&buf[..n])),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Ok(Vec::new()),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                    self.eof = true;
                    Ok(Vec::new())
                }
                Err(source) => Err(LogError::Io { addr: self.addr, source }.into()),
            };
        }
    }

    /// Every record available now: reads until the stream has been quiet for `quiet` (or
    /// has ended, or [`READ_AVAILABLE_LIMIT`] passed).
    pub fn records_available(&mut self, quiet: Duration) -> Result<Vec<LogRecord>> {
        let start = Instant::now();
        let mut out = Vec::new();
        let mut last = Instant::now();
        while !self.eof && last.elapsed() < quiet && start.elapsed() < READ_AVAILABLE_LIMIT {
            let got = self.read_records(quiet.saturating_sub(last.elapsed()))?;
            if !got.is_empty() {
                last = Instant::now();
            }
            out.extend(got);
        }
        Ok(out)
    }

    /// Every line available now (malformed frames are counted in
    /// [`LogDecoder::malformed`] and left out).
    pub fn read_available(&mut self, quiet: Duration) -> Result<Vec<LogLine>> {
        Ok(self
            .records_available(quiet)?
            .into_iter()
            .filter_map(|r| match r {
                LogRecord::Line(l) => Some(l),
                LogRecord::Malformed(_) => None,
            })
            .collect())
    }

    /// Calls `on` for every record as it arrives, until `on` breaks or the stream ends.
    pub fn follow(&mut self, mut on: impl FnMut(&LogRecord) -> ControlFlow<()>) -> Result<()> {
        while !self.eof {
            for r in self.read_records(Duration::from_millis(200))? {
                if on(&r).is_break() {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

/// Formats a line for people:
/// `0.001234 INFO  weightstream firmware 0.1.0 booted: clk=50000000 Hz (src/main.rs:35)`.
pub fn format(line: &LogLine) -> String {
    let mut s = String::new();
    if let Some(t) = &line.timestamp {
        s.push_str(t);
        s.push(' ');
    }
    if let Some(l) = &line.level {
        s.push_str(&format!("{l:<5} "));
    }
    s.push_str(&line.message);
    match (&line.file, line.line) {
        (Some(f), Some(n)) => s.push_str(&format!(" ({f}:{n})")),
        (Some(f), None) => s.push_str(&format!(" ({f})")),
        _ => {}
    }
    s
}

/// Formats a record: a line as [`format()`], a malformed frame as a note in parentheses.
pub fn format_record(r: &LogRecord) -> String {
    match r {
        LogRecord::Line(l) => format(l),
        LogRecord::Malformed(m) => m.to_string(),
    }
}

#[cfg(test)]
mod tests;
