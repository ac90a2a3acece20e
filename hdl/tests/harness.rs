//! The block harness proving itself on two tiny modules of its own (`hdl/tests/rtl/`):
//! port discovery on every storage class, ticks and reset, cached rebuilds, parameter sweeps,
//! several models in one process, the stream agents catching drops and duplicates, and
//! `run_test` writing waves of a failing test.

use std::panic::{catch_unwind, AssertUnwindSafe};

use ws_hdl::dut::{run_test, BlockSpec, Direction, Dut, Pattern, StreamSink, StreamSource};
use ws_hdl::vbuild;

fn counter(width: u32, step: u32) -> BlockSpec {
    BlockSpec::new("ws_test_counter")
        .file("hdl/tests/rtl/ws_test_counter.v")
        .param("WIDTH", width)
        .param("STEP", step)
}

fn pipe(bug: u32) -> BlockSpec {
    BlockSpec::new("ws_test_pipe").file("hdl/tests/rtl/ws_test_pipe.v").param("WIDTH", 16).param("BUG", bug)
}

#[test]
fn ports_ticks_reset_and_wide_values() {
    let mut dut = Dut::build(counter(12, 3)).unwrap();
    let names: Vec<&str> = dut.ports().iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["clk", "rst", "en", "count", "wide_in", "wide_out", "q_in", "q_out"]);
    let count = dut.port("count");
    assert_eq!(count.width(), 12);
    assert_eq!(count.direction(), Direction::Output);
    let en = dut.port("en");

    dut.reset(3);
    assert_eq!(dut.get(count), 0);
    dut.set(en, 1);
    dut.ticks(10);
    assert_eq!(dut.get(count), 30);
    dut.set(en, 0);
    dut.ticks(5);
    assert_eq!(dut.get(count), 30);
    dut.set(en, 1);
    dut.ticks(1365); // 12-bit wrap: (30 + 3*1365) mod 4096
    assert_eq!(dut.get(count), (30 + 3 * 1365) % 4096);
    assert_eq!(dut.cycle(), 3 + 10 + 5 + 1365);

    // 96-bit combinational path, settled by eval() without a clock edge.
    let wide_in = dut.port("wide_in");
    let wide_out = dut.port("wide_out");
    assert_eq!(wide_in.words(), 3);
    dut.set_words(wide_in, &[0x1234_5678, 0x9abc_def0, 0x0f0f_0f0f]);
    dut.eval();
    assert_eq!(dut.get_words(wide_out), vec![!0x1234_5678u32, !0x9abc_def0u32, !0x0f0f_0f0fu32]);
    assert_eq!(dut.get(wide_out), !0x9abc_def0_1234_5678u64);

    let q_in = dut.port("q_in");
    let q_out = dut.port("q_out");
    dut.set(q_in, u64::MAX - 1);
    dut.eval();
    assert_eq!(dut.get(q_out), u64::MAX);
}

#[test]
#[should_panic(expected = "has no port `nope`; its ports are: clk, rst, en")]
fn unknown_port_lists_the_real_ones() {
    let dut = Dut::build(counter(8, 1)).unwrap();
    dut.port("nope");
}

#[test]
fn second_build_is_a_cache_hit() {
    let spec = counter(9, 2).model_spec();
    vbuild::build(&spec, &mut vbuild::no_progress).unwrap();
    let mut events = Vec::new();
    let again = vbuild::build(&spec, &mut |e| events.push(format!("{e:?}"))).unwrap();
    assert!(again.cache_hit);
    assert!(again.lib.is_file());
    assert!(events.iter().any(|e| e.starts_with("CacheHit")), "{events:?}");
    assert!(again.elapsed.as_secs_f64() < 2.0, "{:?}", again.elapsed);
}

#[test]
fn parameter_sweep_and_models_side_by_side() {
    // Different parameters are different libraries, all loaded in this process at once.
    let mut duts: Vec<Dut> =
        [(4, 1), (8, 5), (33, 7)].iter().map(|&(w, s)| Dut::build(counter(w, s)).unwrap()).collect();
    for d in &mut duts {
        d.reset(1);
        let en = d.port("en");
        d.set(en, 1);
    }
    for _ in 0..100 {
        for d in &mut duts {
            d.tick();
        }
    }
    let counts: Vec<u64> = duts.iter().map(|d| d.get(d.port("count"))).collect();
    assert_eq!(counts, [100 % 16, 500 % 256, 700]);
    // Two instances of the same model are independent.
    let mut a = Dut::build(counter(8, 1)).unwrap();
    let mut b = Dut::build(counter(8, 1)).unwrap();
    a.reset(1);
    b.reset(1);
    let (ea, eb) = (a.port("en"), b.port("en"));
    a.set(ea, 1);
    b.set(eb, 0);
    a.ticks(7);
    b.ticks(7);
    assert_eq!((a.get(a.port("count")), b.get(b.port("count"))), (7, 0));
}

/// Streams `n` beats through a ws_test_pipe under random backpressure, checking every beat.
fn stream_through(dut: &mut Dut, n: u64) {
    let seed = dut.seed();
    let mut src = StreamSource::new(dut, "s", seed);
    let mut sink = StreamSink::new(dut, "m", seed);
    for i in 0..n {
        src.push_beat(&[(i * 7919) & 0xffff, (i % 5 == 4) as u64]);
    }
    dut.reset(2);
    let mut cycles = 0u64;
    while sink.received() < n {
        src.drive(dut);
        sink.drive(dut);
        dut.eval();
        if let Some(beat) = src.sample(dut) {
            sink.expect_beat(&beat);
        }
        sink.sample(dut);
        dut.tick();
        cycles += 1;
        assert!(cycles < 100 * n + 1000, "stream stalled");
    }
    sink.finish();
    assert_eq!(src.sent(), n);
}

#[test]
fn stream_agents_pass_a_correct_pipeline() {
    run_test("harness_pipe_ok", &pipe(0), 11, |dut| stream_through(dut, 5000));
}

#[test]
fn stream_agents_full_rate_is_one_beat_per_cycle() {
    let mut dut = Dut::build(pipe(0)).unwrap();
    let mut src = StreamSource::new(&dut, "s", 1).pattern(Pattern::Always);
    let mut sink = StreamSink::new(&dut, "m", 1).pattern(Pattern::Always);
    for i in 0..100 {
        src.push_beat(&[i, 0]);
    }
    dut.reset(1);
    for _ in 0..102 {
        src.drive(&mut dut);
        sink.drive(&mut dut);
        dut.eval();
        if let Some(b) = src.sample(&dut) {
            sink.expect_beat(&b);
        }
        sink.sample(&dut);
        dut.tick();
    }
    sink.finish();
    assert_eq!(sink.received(), 100);
}

fn failure_of(name: &str, bug: u32) -> String {
    let err =
        catch_unwind(AssertUnwindSafe(|| run_test(name, &pipe(bug), 3, |dut| stream_through(dut, 3000))))
            .expect_err("the buggy pipeline must fail");
    err.downcast_ref::<String>().cloned().unwrap_or_default()
}

#[test]
fn stream_agents_catch_a_drop_and_run_test_writes_waves() {
    let msg = failure_of("harness_pipe_drop", 1);
    assert!(msg.contains("valid dropped"), "{msg}");
    assert!(msg.contains("seed 3"), "{msg}");
    assert!(msg.contains("waves of the failing run"), "{msg}");
    let fst = ws_hdl::paths::waves_dir().join("harness_pipe_drop.fst");
    let meta = std::fs::metadata(&fst).expect("run_test wrote the FST file");
    assert!(meta.len() > 100, "FST file is too small");
}

#[test]
fn stream_agents_catch_a_duplicate() {
    let msg = failure_of("harness_pipe_dup", 2);
    assert!(msg.contains("not expected") || msg.contains("expected"), "{msg}");
}

#[test]
fn waves_need_a_traced_build_and_say_so() {
    use ws_hdl::dut::DutError;
    if ws_hdl::dut::waves_requested() {
        return; // WS_WAVES=1 builds every model traced: nothing to refuse.
    }
    let fst = ws_hdl::paths::waves_dir().join("harness_no_waves.fst");
    let mut plain = Dut::build(counter(8, 1)).unwrap();
    let err = plain.trace_to(&fst).expect_err("a model built without FST support");
    assert!(matches!(err, DutError::NoWaves(_)), "{err}");
    assert!(err.to_string().contains("WS_WAVES=1"), "{err}");
    let mut traced = Dut::build(counter(8, 1).with_waves(true)).unwrap();
    traced.trace_to(&fst).expect("the traced build dumps waves");
    assert_eq!(traced.trace_path(), Some(fst.as_path()));
}
