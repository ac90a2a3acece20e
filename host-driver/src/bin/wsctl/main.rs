//! `wsctl`: the weightstream command line. One module per subcommand; each parses its
//! arguments, calls `host_driver`, and prints. Everything worth testing lives in the library.

mod check_pipeline;
mod completions;
mod ctx;
mod debug;
mod devices;
mod flash;
mod info;
mod jtag_opts;
mod link;
mod log_echo;
mod logs;
mod mesh;
mod mx;
mod optim;
mod peek;
mod ping;
mod poke;
mod reset;
mod sim;
mod stats;
mod swarm;
mod trace;
mod train;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Drive a weightstream board: the simulated one by default.
#[derive(Debug, Parser)]
#[command(
    name = "wsctl",
    version,
    about = "Drive a weightstream board: the Verilator simulation (default) or an FPGA board",
    after_help = "Start with `wsctl sim start`, then `wsctl info` and `wsctl logs`. docs/host.md has the details."
)]
pub struct Cli {
    #[command(flatten)]
    global: ctx::Global,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Start, stop or inspect the background simulator (ws-sim).
    #[command(subcommand)]
    Sim(sim::SimCmd),
    /// Check that the firmware answers, and how fast.
    Ping(ping::Args),
    /// The board's identity: firmware, clock, memory windows and register blocks.
    Info(info::Args),
    /// The firmware's defmt log, decoded against its ELF, with source locations.
    Logs(logs::Args),
    /// Read memory (hex dump).
    Peek(peek::Args),
    /// Write memory (inside the firmware's poke window).
    Poke(poke::Args),
    /// Reset the board (the firmware reboots).
    Reset(reset::Args),
    /// The firmware's counters.
    Stats(stats::Args),
    /// Ask the firmware to log `log-echo value=VALUE tag=TAG`.
    LogEcho(log_echo::Args),
    /// Load an ELF into RAM and start it: over JTAG (default) or the boot ROM's link loader.
    Flash(flash::Args),
    /// Halt the core over JTAG.
    Halt(debug::Args),
    /// Resume a halted core over JTAG.
    Resume(debug::Args),
    /// The core's registers over JTAG: GPRs, pc, dcsr, mstatus, mcause, mepc.
    Regs(debug::Args),
    /// The board over link protocol v2: HELLO and the negotiated state, pings.
    #[command(subcommand)]
    Link(link::LinkCmd),
    /// MemoryX as a hardware optimizer: load a safetensors model, run K steps from a
    /// gradients file, write weights and optimizer state back to safetensors.
    Optim(optim::Args),
    /// The board's SwarmX node: ports, their state and counters; configuration; events.
    #[command(subcommand)]
    Swarm(swarm::SwarmCmd),
    /// MemoryX's weight store: what each layer uses (status), and releasing layers (clear).
    #[command(subcommand)]
    Mx(mx::MxCmd),
    /// The board's wafer mesh: whole MLP training steps checked against the golden model, and
    /// training runs with MemoryX and SwarmX in the loop.
    #[command(subcommand)]
    Mesh(mesh::MeshCmd),
    /// Train an MLP on a data set (the digits by default) on the board's wafers, MemoryX
    /// and SwarmX, with held-out evaluation, curves and checkpoints; --golden runs the
    /// same training on the host's golden models.
    Train(Box<train::Args>),
    /// A pipeline trace capture (link channel 6, .wstrace) as a Perfetto timeline, with each
    /// hop's use; --check validates it.
    Trace(trace::Args),
    /// The pipeline check of a trace capture: updates hidden under the wafers' compute, the
    /// iteration-boundary bubble and its stages against the bound, step time against an ideal,
    /// each hop's and wafer's use; fails when the bubble is above the bound.
    CheckPipeline(check_pipeline::Args),
    /// List the link devices attached to this machine (USB FTDI/FT60x/vendor bulk, XDMA,
    /// serial) and whether this user may open them.
    Devices(devices::Args),
    /// Print a shell completion script.
    Completions(completions::Args),
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let ctx = ctx::Ctx::new(cli.global);
    match cli.command {
        Cmd::Sim(c) => sim::run(&ctx, c),
        Cmd::Ping(a) => ping::run(&ctx, a),
        Cmd::Info(a) => info::run(&ctx, a),
        Cmd::Logs(a) => logs::run(&ctx, a),
        Cmd::Peek(a) => peek::run(&ctx, a),
        Cmd::Poke(a) => poke::run(&ctx, a),
        Cmd::Reset(a) => reset::run(&ctx, a),
        Cmd::Stats(a) => stats::run(&ctx, a),
        Cmd::LogEcho(a) => log_echo::run(&ctx, a),
        Cmd::Flash(a) => flash::run(&ctx, a),
        Cmd::Halt(a) => debug::halt(&ctx, a),
        Cmd::Resume(a) => debug::resume(&ctx, a),
        Cmd::Regs(a) => debug::regs(&ctx, a),
        Cmd::Link(c) => link::run(&ctx, c),
        Cmd::Optim(a) => optim::run(&ctx, a),
        Cmd::Swarm(c) => swarm::run(&ctx, c),
        Cmd::Mx(c) => mx::run(&ctx, c),
        Cmd::Mesh(c) => mesh::run(&ctx, c),
        Cmd::Train(a) => train::run(&ctx, *a),
        Cmd::Trace(a) => trace::run(a),
        Cmd::CheckPipeline(a) => check_pipeline::run(a),
        Cmd::Devices(a) => devices::run(a),
        Cmd::Completions(a) => completions::run(a),
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            // Driver messages quote their OS error; don't print it twice.
            let mut last = e.to_string();
            for cause in e.chain().skip(1) {
                let text = cause.to_string();
                if !last.contains(&text) {
                    eprintln!("  {text}");
                }
                last = text;
            }
            ExitCode::FAILURE
        }
    }
}
