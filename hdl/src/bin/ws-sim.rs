//! `ws-sim`: the simulated weightstream board on loopback TCP ports (docs/sim.md). All of it
//! is [`ws_hdl::sim::serve`]; this binary parses the options and reports errors.

use std::error::Error;
use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use ws_hdl::sim::SimOptions;

fn main() -> ExitCode {
    let opts = SimOptions::parse();
    match ws_hdl::sim::serve(&opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let mut msg = format!("ws-sim: error: {e}");
            // Several messages already include their cause's text; print only what is new.
            let mut cause = e.source();
            while let Some(c) = cause {
                let text = c.to_string();
                if !msg.contains(&text) {
                    msg.push_str(&format!("\n  caused by: {text}"));
                }
                cause = c.source();
            }
            let _ = writeln!(std::io::stderr(), "{msg}");
            ExitCode::FAILURE
        }
    }
}
