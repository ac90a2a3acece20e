//! Block testbenches of the skeleton SoC's own RTL, each block alone under the harness:
//!
//! - `ws_fifo` against a queue model, across depths and widths, under random backpressure on
//!   both sides, with its `level` and `s_ready` invariants checked every cycle;
//! - `ws_sysinfo` against the register map (`ws_common::regmap`): ID word, parameters, the
//!   scratch word and the soft-reset key;
//! - `ws_hostlink` end to end: bytes from the host stream into RXDATA, TXDATA into the host
//!   stream under backpressure, the status, counters, overflow flag and interrupt.

use std::collections::VecDeque;

use rand::RngExt;
use ws_common::regmap::{hostlink, sysinfo};
use ws_hdl::dut::{run_test, BlockSpec, Dut, Pattern, RegPort, StreamSink, StreamSource};

fn fifo(depth: u32, width: u32) -> BlockSpec {
    BlockSpec::new("ws_fifo").file("hdl/rtl/ws_fifo.v").param("DEPTH", depth).param("WIDTH", width)
}

/// Streams `n` random words through the FIFO; the model is a plain queue.
fn fifo_stream(dut: &mut Dut, depth: u64, width: u32, n: u64, src_pat: Pattern, sink_pat: Pattern) {
    let seed = dut.seed();
    let mut rng = dut.rng(1);
    let mut src = StreamSource::new(dut, "s", seed).pattern(src_pat);
    let mut sink = StreamSink::new(dut, "m", seed ^ 0x55).pattern(sink_pat);
    let mask = if width >= 64 { u64::MAX } else { (1u64 << width) - 1 };
    for _ in 0..n {
        src.push_beat(&[rng.random::<u64>() & mask]);
    }
    let (level, s_ready) = (dut.port("level"), dut.port("s_ready"));
    dut.reset(2);
    let mut held = VecDeque::new();
    let mut cycles = 0u64;
    while sink.received() < n {
        src.drive(dut);
        sink.drive(dut);
        dut.eval();
        let lvl = dut.get(level);
        assert!(lvl <= depth, "level {lvl} above depth {depth}");
        assert_eq!(dut.get_bool(s_ready), lvl < depth, "s_ready must be low exactly when full (level {lvl})");
        if let Some(beat) = src.sample(dut) {
            held.push_back(beat.clone());
            sink.expect_beat(&beat);
        }
        if sink.sample(dut).is_some() {
            held.pop_front();
        }
        dut.tick();
        cycles += 1;
        assert!(cycles < 200 * n + 1000, "FIFO stalled with {} words held", held.len());
    }
    sink.finish();
}

#[test]
fn fifo_in_order_under_backpressure_across_parameters() {
    for (depth, width) in [(2u32, 1u32), (4, 8), (16, 8), (64, 32), (8, 64)] {
        run_test(&format!("ws_fifo_d{depth}_w{width}"), &fifo(depth, width), 7, |dut| {
            fifo_stream(dut, u64::from(depth), width, 4000, Pattern::Mixed, Pattern::Mixed)
        });
    }
}

#[test]
fn fifo_fills_to_depth_and_sustains_full_rate() {
    // A stalled sink: the FIFO takes exactly DEPTH words, then refuses.
    let mut dut = Dut::build(fifo(16, 8)).unwrap();
    let (s_valid, s_data, s_ready, m_ready) =
        (dut.port("s_valid"), dut.port("s_data"), dut.port("s_ready"), dut.port("m_ready"));
    dut.reset(2);
    dut.set(m_ready, 0);
    dut.set(s_valid, 1);
    let mut accepted = 0;
    for i in 0..40 {
        dut.set(s_data, i);
        dut.eval();
        if dut.get_bool(s_ready) {
            accepted += 1;
        }
        dut.tick();
    }
    assert_eq!(accepted, 16);
    // With both sides always ready it moves one word per cycle.
    run_test("ws_fifo_full_rate", &fifo(4, 8), 3, |dut| {
        fifo_stream(dut, 4, 8, 1000, Pattern::Always, Pattern::Always);
        assert!(dut.cycle() < 1000 + 10, "{} cycles for 1000 words", dut.cycle());
    });
}

fn sysinfo_spec(hash: u32, clk: u32, rom: u32, ram: u32, slots: u32) -> BlockSpec {
    BlockSpec::new("ws_sysinfo")
        .files(["hdl/rtl/ws_sysinfo.v", "hdl/rtl/gen/ws_sysinfo_csr.v"])
        .param("BUILD_HASH", format!("32'h{hash:08x}"))
        .param("CLK_HZ", format!("32'd{clk}"))
        .param("ROM_BYTES", format!("32'd{rom}"))
        .param("RAM_BYTES", format!("32'd{ram}"))
        .param("SLOT_MASK", format!("32'h{slots:08x}"))
}

#[test]
fn sysinfo_reports_its_parameters_and_the_map_id() {
    for (hash, clk, rom, ram, slots) in [
        (0xdead_beef, 50_000_000, 8192, 262_144, 0x1f),
        (0x0123_4567, 100_000_000, 4096, 1 << 20, 0x0101_0111),
    ] {
        let mut dut = Dut::build(sysinfo_spec(hash, clk, rom, ram, slots)).unwrap();
        let reg = RegPort::new(&mut dut);
        dut.reset(2);
        assert_eq!(reg.read(&mut dut, 0), sysinfo::ID_WORD);
        assert_eq!(reg.read(&mut dut, sysinfo::BUILD_HASH), hash);
        assert_eq!(reg.read(&mut dut, sysinfo::CLK_HZ), clk);
        assert_eq!(reg.read(&mut dut, sysinfo::ROM_BYTES), rom);
        assert_eq!(reg.read(&mut dut, sysinfo::RAM_BYTES), ram);
        assert_eq!(reg.read(&mut dut, sysinfo::SLOTS), slots);
        // Read-only registers ignore writes.
        reg.write(&mut dut, sysinfo::CLK_HZ, 1);
        assert_eq!(reg.read(&mut dut, sysinfo::CLK_HZ), clk);
        // Scratch keeps what is written, byte enables respected.
        reg.write(&mut dut, sysinfo::SCRATCH, 0x1122_3344);
        reg.write_be(&mut dut, sysinfo::SCRATCH, 0xaabb_ccdd, 0b0101);
        assert_eq!(reg.read(&mut dut, sysinfo::SCRATCH), 0x11bb_33dd);
        // An unmapped offset reads zero.
        assert_eq!(reg.read(&mut dut, 0xffc), 0);
    }
}

#[test]
fn sysinfo_soft_reset_needs_the_whole_key() {
    let mut dut = Dut::build(sysinfo_spec(0, 50_000_000, 8192, 262_144, 0x1f)).unwrap();
    let reg = RegPort::new(&mut dut);
    let soft_reset = dut.port("soft_reset");
    dut.reset(2);
    let pulses = |dut: &mut Dut, value: u32, be: u8| {
        reg.start_write(dut, sysinfo::RESET, value, be);
        let mut n = 0;
        for _ in 0..4 {
            dut.tick();
            reg.release(dut);
            dut.eval();
            n += dut.get(soft_reset);
        }
        n
    };
    assert_eq!(pulses(&mut dut, 0x5253_5420, 0xf), 0, "wrong key");
    assert_eq!(pulses(&mut dut, 0x5253_5421, 0x7), 0, "partial write of the key");
    assert_eq!(pulses(&mut dut, 0x5253_5421, 0xf), 1, "the key gives exactly one pulse");
}

fn hostlink_spec(depth: u32) -> BlockSpec {
    BlockSpec::new("ws_hostlink")
        .files(["hdl/rtl/ws_hostlink.v", "hdl/rtl/ws_fifo.v", "hdl/rtl/gen/ws_hostlink_csr.v"])
        .param("RX_DEPTH", depth)
        .param("TX_DEPTH", depth)
}

/// Parks both link streams, so register accesses (which tick the clock themselves) cannot
/// complete a handshake the stream agents do not see.
fn park_link(dut: &mut Dut) {
    let (v, r) = (dut.port("s_link_valid"), dut.port("m_link_ready"));
    dut.set(v, 0);
    dut.set(r, 0);
}

#[test]
fn hostlink_moves_bytes_both_ways_under_backpressure() {
    run_test("ws_hostlink_streams", &hostlink_spec(16), 5, |dut| {
        let seed = dut.seed();
        let mut rng = dut.rng(2);
        let reg = RegPort::new(dut);
        let mut src = StreamSource::new(dut, "s_link", seed);
        let mut sink = StreamSink::new(dut, "m_link", seed ^ 1);
        let irq = dut.port("irq");
        park_link(dut);
        dut.reset(2);
        assert_eq!(reg.read(dut, 0), hostlink::ID_WORD);
        assert_eq!(reg.read(dut, hostlink::FIFO_DEPTH), 16);
        reg.write(dut, hostlink::IRQ_EN, 1);

        let n = 600u64;
        let from_host: Vec<u8> = (0..n).map(|_| rng.random()).collect();
        for &b in &from_host {
            src.push_beat(&[u64::from(b)]);
        }
        // The "firmware": pop every received byte, send back its complement.
        let mut got = Vec::new();
        let mut rounds = 0;
        while sink.received() < n {
            // Stream phase: both link sides move under random valid/ready.
            for _ in 0..rng.random_range(1..20) {
                src.drive(dut);
                sink.drive(dut);
                dut.eval();
                src.sample(dut);
                sink.sample(dut);
                dut.tick();
            }
            // Register phase.
            park_link(dut);
            dut.eval();
            let status = reg.read(dut, hostlink::STATUS);
            let rx_level = status & 0xffff;
            assert_eq!(dut.get_bool(irq), rx_level > 0, "irq follows rx_level with IRQ_EN set");
            let tx_full = status & (1 << 16) != 0;
            if !tx_full {
                let rx = reg.read(dut, hostlink::RXDATA);
                if rx & (1 << 31) != 0 {
                    let b = (rx & 0xff) as u8;
                    got.push(b);
                    sink.expect_beat(&[u64::from(!b)]);
                    reg.write(dut, hostlink::TXDATA, u32::from(!b));
                }
            }
            rounds += 1;
            assert!(rounds < 100_000, "link stalled after {} bytes", got.len());
        }
        sink.finish();
        assert_eq!(got, from_host, "bytes from the host arrive in order, none lost");
        park_link(dut);
        assert_eq!(u64::from(reg.read(dut, hostlink::RX_BYTES)), n);
        assert_eq!(u64::from(reg.read(dut, hostlink::TX_BYTES)), n);
        assert_eq!(reg.read(dut, hostlink::ERRORS), 0);
        assert_eq!(reg.read(dut, hostlink::RXDATA) >> 31, 0, "empty FIFO reads not-valid");
    });
}

#[test]
fn hostlink_counts_a_transmit_overflow() {
    let mut dut = Dut::build(hostlink_spec(16)).unwrap();
    let reg = RegPort::new(&mut dut);
    let m_ready = dut.port("m_link_ready");
    dut.reset(2);
    dut.set(m_ready, 0);
    for i in 0..20 {
        reg.write(&mut dut, hostlink::TXDATA, i);
    }
    let status = reg.read(&mut dut, hostlink::STATUS);
    assert_ne!(status & (1 << 16), 0, "tx_full after 20 writes into 16 bytes");
    assert_eq!(reg.read(&mut dut, hostlink::ERRORS) & 1, 1, "overflow flagged");
    reg.write(&mut dut, hostlink::ERRORS, 1);
    assert_eq!(reg.read(&mut dut, hostlink::ERRORS) & 1, 0, "write 1 clears");
}
