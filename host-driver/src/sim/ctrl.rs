//! The simulator's control port: one bare word per line out, one JSON object per line back
//! (docs/sim.md, "Control port").

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

use crate::error::{Result, SimError};

/// How long a control request waits for its answer.
pub const CTRL_TIMEOUT: Duration = Duration::from_secs(5);

/// A client of `ws-sim`'s control port.
#[derive(Debug)]
pub struct SimCtrl {
    addr: SocketAddr,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl SimCtrl {
    /// Connects to the control port at `addr`.
    pub fn connect(addr: SocketAddr) -> Result<Self> {
        Self::connect_timeout(addr, CTRL_TIMEOUT)
    }

    /// Connects with `timeout` for the connection and every answer.
    pub fn connect_timeout(addr: SocketAddr, timeout: Duration) -> Result<Self> {
        let err = |source| SimError::Ctrl { addr, command: "connect".into(), source };
        let writer = TcpStream::connect_timeout(&addr, timeout).map_err(err)?;
        writer.set_read_timeout(Some(timeout)).map_err(err)?;
        writer.set_nodelay(true).map_err(err)?;
        let reader = BufReader::new(writer.try_clone().map_err(err)?);
        Ok(Self { addr, reader, writer })
    }

    /// The address connected to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sends `command` and returns its answer, which must be a JSON object with `"ok": true`.
    pub fn request(&mut self, command: &str) -> Result<Value> {
        let err = |source| SimError::Ctrl { addr: self.addr, command: command.into(), source };
        self.writer.write_all(format!("{command}\n").as_bytes()).map_err(err)?;
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).map_err(err)?;
        if n == 0 {
            return Err(err(std::io::Error::new(
                ErrorKind::UnexpectedEof,
                "the simulator closed the connection",
            ))
            .into());
        }
        parse_reply(command, line.trim_end())
    }

    /// The simulator's statistics.
    pub fn stats(&mut self) -> Result<SimStats> {
        self.request("stats").map(|v| SimStats::from_json(&v))
    }

    /// Holds the SoC in reset for 16 cycles (RAM kept); returns the cycle.
    pub fn reset(&mut self) -> Result<u64> {
        self.request("reset").map(|v| num(&v, "cycle"))
    }

    /// Stops the clock; returns the cycle.
    pub fn pause(&mut self) -> Result<u64> {
        self.request("pause").map(|v| num(&v, "cycle"))
    }

    /// Restarts the clock; returns the cycle.
    pub fn resume(&mut self) -> Result<u64> {
        self.request("resume").map(|v| num(&v, "cycle"))
    }

    /// Asks the simulator to exit; returns the cycle it stopped at.
    pub fn quit(&mut self) -> Result<u64> {
        self.request("quit").map(|v| num(&v, "cycle"))
    }
}

/// Checks one answer line: a JSON object with `"ok": true`.
pub fn parse_reply(command: &str, line: &str) -> Result<Value> {
    let bad = || SimError::CtrlReply { command: command.into(), reply: line.into() };
    let v: Value = serde_json::from_str(line).map_err(|_| bad())?;
    match v.get("ok").and_then(Value::as_bool) {
        Some(true) => Ok(v),
        Some(false) => {
            let reason = v.get("error").and_then(Value::as_str).unwrap_or("no reason given").to_string();
            Err(SimError::CtrlRefused { command: command.into(), reason }.into())
        }
        None => Err(bad().into()),
    }
}

/// A number field, whether the simulator wrote it as an integer or a float; 0 if absent.
fn num(v: &Value, key: &str) -> u64 {
    match v.get(key) {
        Some(Value::Number(n)) => n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0) as u64)).unwrap_or(0),
        Some(Value::Bool(b)) => u64::from(*b),
        Some(Value::String(s)) => crate::parse::parse_u64(s).unwrap_or(0),
        _ => 0,
    }
}

fn float(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

fn flag(v: &Value, key: &str) -> bool {
    match v.get(key) {
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        _ => false,
    }
}

fn text(v: &Value, key: &str) -> Option<String> {
    match v.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => Some(other.to_string()),
    }
}

/// The answer to `stats`. Fields the simulator does not send read as zero / empty, so a
/// simulator a little older or newer than this host still reports what it has; the whole
/// answer is kept in `raw`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SimStats {
    /// Cycles simulated since start.
    pub cycle: u64,
    /// Simulated cycles per wall second over the last second.
    pub sim_hz: f64,
    /// The board clock the simulation models.
    pub clock_hz: u64,
    /// Wall seconds since start.
    pub uptime_s: f64,
    /// The clock is stopped (`pause`).
    pub paused: bool,
    /// The core sleeps and no host byte waits: the simulator throttles itself.
    pub idle: bool,
    /// Host-link bytes from the host.
    pub link_rx_bytes: u64,
    /// Host-link bytes to the host.
    pub link_tx_bytes: u64,
    /// Board-to-host bytes dropped while no client was connected.
    pub link_discarded: u64,
    /// UART log bytes produced.
    pub log_bytes: u64,
    /// UART framing errors seen by the log sink.
    pub uart_framing_errors: u64,
    /// The UART divisor the firmware programmed.
    pub uart_div: u64,
    /// A host-link client is connected.
    pub link_client: bool,
    /// Log clients connected.
    pub log_clients: u64,
    /// The core sleeps in WFI.
    pub core_sleep: bool,
    /// The GPIO outputs (the LEDs; `0xa5` is the firmware's stopped state).
    pub gpio_out: u64,
    /// SoC resets since start.
    pub resets: u64,
    /// The simulator's pid.
    pub pid: u64,
    /// Board file in use.
    pub board: Option<String>,
    /// Firmware ELF loaded.
    pub elf: Option<String>,
    /// The Verilated model in use.
    pub model: Option<String>,
    /// Verilator threads.
    pub threads: u64,
    /// FST file being written, if any.
    pub trace: Option<String>,
    /// The whole answer.
    pub raw: Value,
}

impl SimStats {
    /// Reads the fields of a `stats` answer, leniently.
    pub fn from_json(v: &Value) -> Self {
        Self {
            cycle: num(v, "cycle"),
            sim_hz: float(v, "sim_hz"),
            clock_hz: num(v, "clock_hz"),
            uptime_s: float(v, "uptime_s"),
            paused: flag(v, "paused"),
            idle: flag(v, "idle"),
            link_rx_bytes: num(v, "link_rx_bytes"),
            link_tx_bytes: num(v, "link_tx_bytes"),
            link_discarded: num(v, "link_discarded"),
            log_bytes: num(v, "log_bytes"),
            uart_framing_errors: num(v, "uart_framing_errors"),
            uart_div: num(v, "uart_div"),
            link_client: flag(v, "link_client"),
            log_clients: num(v, "log_clients"),
            core_sleep: flag(v, "core_sleep"),
            gpio_out: num(v, "gpio_out"),
            resets: num(v, "resets"),
            pid: num(v, "pid"),
            board: text(v, "board"),
            elf: text(v, "elf"),
            model: text(v, "model"),
            threads: num(v, "threads"),
            trace: text(v, "trace"),
            raw: v.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn replies_are_checked() {
        assert!(parse_reply("stats", r#"{"ok":true,"cycle":5}"#).is_ok());
        let e = parse_reply("frob", r#"{"ok":false,"error":"unknown request `frob`; one of: stats, quit"}"#)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "the simulator refused `frob`: unknown request `frob`; one of: stats, quit");
        let e = parse_reply("stats", "hello").unwrap_err().to_string();
        assert!(e.contains("answered `stats` with `hello`"), "{e}");
        assert!(parse_reply("stats", r#"{"cycle":1}"#).is_err(), "`ok` is required");
    }

    #[test]
    fn stats_are_read_leniently() {
        let v: Value = serde_json::from_str(
            r#"{"ok":true,"cycle":123456,"sim_hz":1.4e6,"clock_hz":50000000,"idle":true,
                "link_rx_bytes":12,"core_sleep":1,"gpio_out":165,"trace":null,"model":"m1",
                "threads":2.0,"future_field":[1,2]}"#,
        )
        .unwrap();
        let s = SimStats::from_json(&v);
        assert_eq!(
            (s.cycle, s.clock_hz, s.link_rx_bytes, s.gpio_out, s.threads),
            (123456, 50_000_000, 12, 0xa5, 2)
        );
        assert_eq!(s.sim_hz, 1.4e6);
        assert!(s.idle && s.core_sleep && !s.paused);
        assert_eq!((s.trace, s.model.as_deref(), s.log_bytes), (None, Some("m1"), 0));
        assert_eq!(s.raw["future_field"][1], 2);
    }

    #[test]
    fn talks_json_lines() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut w = s;
            let mut line = String::new();
            while r.read_line(&mut line).unwrap() > 0 {
                let reply = match line.trim() {
                    "stats" => r#"{"ok":true,"cycle":42,"sim_hz":1000000}"#,
                    "quit" => r#"{"ok":true,"cycle":43}"#,
                    _ => r#"{"ok":false,"error":"no"}"#,
                };
                w.write_all(format!("{reply}\n").as_bytes()).unwrap();
                line.clear();
            }
        });
        let mut c = SimCtrl::connect(addr).unwrap();
        assert_eq!(c.stats().unwrap().cycle, 42);
        assert!(c.pause().is_err());
        assert_eq!(c.quit().unwrap(), 43);
        drop(c);
        server.join().unwrap();
    }
}
