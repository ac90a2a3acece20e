//! `ws_phy_ft245` (boards/ecp5-ft2232h/rtl/) with its two `ws_async_fifo`s, against the
//! behavioural FT232H of `phy/ft245.rs`, with two unrelated clocks:
//!
//! - random words both ways at once (256 KiB each way, with the system clock at about 1.6x
//!   CLKOUT and again at about 0.7x), a USB host that stalls and floods in phases,
//!   RXF# / TXE# gaps at packet boundaries and `Pattern::Mixed` backpressure on both engine
//!   streams: every byte arrives once, in order, and the model finds no protocol violation in
//!   any cycle;
//! - the ceiling: a host that is never the bottleneck and an engine that never stalls, one
//!   direction at a time and both at once (where neither direction may starve).
//!
//! How the clocks run: the harness ticks one clock per model, so `ft_clk` is the harness
//! clock (`Dut::tick`, one per CLKOUT cycle, which is also what `Dut::cycle` and the model's
//! messages count) and the system clock `clk` is toggled with `Dut::set` + `Dut::eval`
//! between CLKOUT edges, as many times as fall into each CLKOUT period on a time line with
//! incommensurate periods and ±4 % jitter, so the phase between the clocks sweeps through
//! every value. All logic is rising-edge and zero-delay, so only the order of the two
//! clocks' rising edges matters, and the time line gives a realistic one. FST waves
//! (`WS_WAVES=1`, or a failure) are dumped at CLKOUT edges only: the system-domain signals
//! show their value at each CLKOUT edge, not every system edge.
//!
//! Throughput is printed, not asserted (docs/block-harness.md; STYLE.md "Benchmarks, not
//! timed tests"): bytes per CLKOUT cycle, where the sync-245 bus's ceiling is 1 (60 MB/s).

mod phy {
    pub mod common;
    pub mod ft245;
}

use phy::common::{le_words, random_bytes};
use phy::ft245::{Ft232h, Host, Stats, HOST_FAST, HOST_RANDOM};
use rand::rngs::StdRng;
use rand::RngExt;
use ws_hdl::dut::{run_test, BlockSpec, Dut, Pattern, Port, StreamSink, StreamSource};

/// CLKOUT period on the test's time line (16.67 ns).
const FT_PERIOD: u64 = 1000;

fn spec() -> BlockSpec {
    // Small FIFOs so that engine-side stalls reach the FT bus quickly.
    BlockSpec::new("ws_phy_ft245")
        .file("hdl/rtl/ws_async_fifo.v")
        .file("boards/ecp5-ft2232h/rtl/ws_phy_ft245.v")
        .param("RX_DEPTH", 32)
        .param("TX_DEPTH", 32)
        .param("BURST_BYTES", 512)
}

/// One run of the adapter.
struct Run {
    /// Bytes the host sends to the FPGA.
    to_fpga: usize,
    /// Bytes the FPGA sends to the host.
    to_host: usize,
    /// System clock period on the time line (FT_PERIOD / ratio).
    sys_period: u64,
    host: Host,
    engine: Pattern,
}

/// The system clock: rising edges on a time line, each period jittered.
struct SysClock {
    clk: Port,
    next: u64,
    period: u64,
    rng: StdRng,
}

impl SysClock {
    fn jittered(&mut self) -> u64 {
        let j = self.period / 25;
        self.period - j + self.rng.random_range(0..=2 * j)
    }
}

struct Outcome {
    stats: Stats,
    cycles: u64,
}

/// Runs `run` on a fresh DUT: reset, both streams to completion, then the checks.
fn exercise(dut: &mut Dut, run: &Run) -> Outcome {
    let seed = dut.seed();
    let mut rng = dut.rng(1);
    let to_fpga = random_bytes(&mut rng, run.to_fpga);
    let to_host = random_bytes(&mut rng, run.to_host);
    dut.set_clock("ft_clk");

    let mut src = StreamSource::new(dut, "s", seed).pattern(run.engine);
    let mut sink = StreamSink::new(dut, "m", seed).pattern(run.engine);
    for w in le_words(&to_host) {
        src.push(u64::from(w));
    }
    for w in le_words(&to_fpga) {
        sink.expect(u64::from(w));
    }
    let rst = dut.port("rst");
    let mut sys = SysClock { clk: dut.port("clk"), next: 0, period: run.sys_period, rng: dut.rng(2) };
    dut.set(sys.clk, 0);
    let mut chip = Ft232h::new(dut, run.host, &to_fpga, &to_host, seed);

    let mut t_ft = FT_PERIOD / 2;
    let limit = 60 * (run.to_fpga + run.to_host) as u64 + 200_000;
    let mut reset_left = 8u32;
    dut.set(rst, 1);
    let start = dut.cycle();
    loop {
        // The system clock's rising edges that fall before the next CLKOUT edge.
        while sys.next < t_ft {
            if reset_left == 0 {
                src.drive(dut);
                sink.drive(dut);
                dut.eval();
                src.sample(dut);
                sink.sample(dut);
            }
            dut.set(sys.clk, 1);
            dut.eval();
            dut.set(sys.clk, 0);
            dut.eval();
            sys.next += sys.jittered();
        }
        chip.cycle(dut);
        t_ft += FT_PERIOD;
        if reset_left > 0 {
            reset_left -= 1;
            if reset_left == 0 {
                dut.set(rst, 0);
            }
            continue;
        }
        if chip.done() && src.pending() == 0 && sink.outstanding() == 0 {
            break;
        }
        assert!(
            dut.cycle() - start < limit,
            "stalled after {} ft_clk cycles: {}; {} words still to send from the engine, {} words still expected by it",
            dut.cycle() - start,
            chip.status(),
            src.pending(),
            sink.outstanding()
        );
    }
    sink.finish();
    Outcome { stats: chip.stats, cycles: dut.cycle() - start }
}

fn report(name: &str, run: &Run, o: &Outcome) {
    let s = &o.stats;
    let w = s.window.cycles().max(1) as f64;
    let (rx, tx) = (s.rx_bytes as f64 / w, s.tx_bytes as f64 / w);
    eprintln!(
        "{name}: sys/ft clock {:.2}, {} B to the FPGA + {} B to the host in {} ft_clk cycles: \
         {rx:.3} + {tx:.3} = {:.3} B per CLKOUT cycle ({:.1} MB/s at 60 MHz); \
         RXF# toggled {}x, TXE# {}x, {} writes held over a TXE# rise, {} reads into an RXF# rise, \
         {} bus direction changes, longest one-way run {} B",
        FT_PERIOD as f64 / run.sys_period as f64,
        s.rx_bytes,
        s.tx_bytes,
        o.cycles,
        rx + tx,
        (rx + tx) * 60.0,
        s.rxf_edges,
        s.txe_edges,
        s.held_writes,
        s.empty_reads,
        s.turnarounds,
        s.max_run,
    );
}

/// Both directions at once under random stalls on every side, at two clock ratios.
#[test]
fn random_traffic_both_ways_two_clock_ratios() {
    let runs = [
        (
            "ft245_random_sys1.6",
            11,
            Run {
                to_fpga: 256 * 1024,
                to_host: 256 * 1024,
                sys_period: 617,
                host: HOST_RANDOM,
                engine: Pattern::Mixed,
            },
        ),
        (
            "ft245_random_sys0.7",
            12,
            Run {
                to_fpga: 256 * 1024,
                to_host: 256 * 1024,
                sys_period: 1433,
                host: HOST_RANDOM,
                engine: Pattern::Mixed,
            },
        ),
    ];
    for (name, seed, run) in &runs {
        run_test(name, &spec(), *seed, |dut| {
            let o = exercise(dut, run);
            report(name, run, &o);
            let s = &o.stats;
            assert_eq!(s.rx_bytes as usize, run.to_fpga);
            assert_eq!(s.tx_bytes as usize, run.to_host);
            // The run reached the corners it is meant to (not a speed figure).
            assert!(s.held_writes > 0, "no write was ever in flight when TXE# rose");
            assert!(s.empty_reads > 0, "no read was ever in flight when RXF# rose");
            let often = (run.to_fpga.min(run.to_host) / 256) as u64;
            assert!(s.rxf_edges > often && s.txe_edges > often, "the flags hardly toggled");
        });
    }
}

/// The bus's ceiling: one direction alone, then both at once, with nothing else in the way.
#[test]
fn ceiling_with_a_fast_host() {
    let cases = [
        ("ft245_fast_to_fpga", 64 * 1024, 0),
        ("ft245_fast_to_host", 0, 64 * 1024),
        ("ft245_fast_both", 64 * 1024, 64 * 1024),
    ];
    for (i, (name, to_fpga, to_host)) in cases.into_iter().enumerate() {
        let run = Run { to_fpga, to_host, sys_period: 617, host: HOST_FAST, engine: Pattern::Always };
        run_test(name, &spec(), 20 + i as u64, |dut| {
            let o = exercise(dut, &run);
            report(name, &run, &o);
            if to_fpga > 0 && to_host > 0 {
                // Neither direction starves while the other has work: they take turns of
                // BURST_BYTES (512).
                assert!(o.stats.max_run <= 512, "a direction kept the bus for {} bytes", o.stats.max_run);
            }
        });
    }
}
