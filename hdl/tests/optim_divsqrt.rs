//! MemoryX's divider and square root (`ws_optim_div`, `ws_optim_sqrt`) alone, bit for bit
//! against Rust's correctly rounded `f32` `/` and `sqrt` (NaNs canonical, as FPnew's): every
//! pair of edge operands (±0, ±inf, NaNs, subnormal and normal range ends, exact squares),
//! then 10^6 random operands per unit at the lanes' pipelining, one per cycle, with bubbles;
//! smaller sweeps at other pipelining. The mesh PE's small iterative divider (`ws_mesh_div`,
//! the loss stage's) against the same operands.

use rand::RngExt;
use ws_common::golden::{fp, optim};
use ws_hdl::dut::{run_test, Dut};
use ws_hdl::optim::{div_spec, divsqrt_latency, edge_operands, operand, sqrt_spec};

/// Streams `ops` through a unit with `latency`, one per cycle except a bubble every 13th
/// cycle, and checks every result against `golden`.
fn check(dut: &mut Dut, ops: &[(u32, u32)], unary: bool, latency: u64, golden: &dyn Fn(u32, u32) -> u32) {
    let valid = dut.port("in_valid");
    let a = dut.port("in_a");
    let b = if unary { None } else { Some(dut.port("in_b")) };
    let (out_valid, out) = (dut.port("out_valid"), dut.port("out_data"));
    dut.reset(2);
    let (mut sent, mut checked, mut cycle) = (0usize, 0usize, 0u64);
    let mut sent_at = std::collections::VecDeque::new();
    while checked < ops.len() {
        let send = sent < ops.len() && cycle % 13 != 5;
        dut.set(valid, send as u64);
        if send {
            dut.set(a, u64::from(ops[sent].0));
            if let Some(b) = b {
                dut.set(b, u64::from(ops[sent].1));
            }
        }
        dut.eval();
        if dut.get_bool(out_valid) {
            let (x, y) = ops[checked];
            let (got, want) = (dut.get(out) as u32, golden(x, y));
            assert_eq!(got, want, "op({x:#010x}, {y:#010x}) = {got:#010x}, want {want:#010x}");
            let t0: u64 = sent_at.pop_front().unwrap();
            assert_eq!(cycle - t0, latency, "latency");
            checked += 1;
        }
        if send {
            sent_at.push_back(cycle);
            sent += 1;
        }
        dut.tick();
        cycle += 1;
        assert!(cycle < 2 * ops.len() as u64 + 100, "results stopped coming");
    }
}

fn div_ops(seed: u64, random: usize) -> Vec<(u32, u32)> {
    let e = edge_operands();
    let mut v: Vec<(u32, u32)> = e.iter().flat_map(|&x| e.iter().map(move |&y| (x, y))).collect();
    let mut rng = ws_hdl::dut::rng(seed, 0xd1);
    for _ in 0..random {
        let x = operand(&mut rng);
        // Half the divisors are near the dividend (quotients near 1, ties of exact
        // quotients) or a power of two away from it (exact, subnormal and overflowing
        // quotients).
        let y = match rng.random_range(0..4u32) {
            0 => x ^ (rng.random::<u32>() & 0x8000_00ff),
            1 => (x & 0x807f_ffff) | ((rng.random_range(0..255u32)) << 23),
            _ => operand(&mut rng),
        };
        v.push((x, y));
    }
    v
}

fn sqrt_ops(seed: u64, random: usize) -> Vec<(u32, u32)> {
    let mut v: Vec<(u32, u32)> = edge_operands().into_iter().map(|x| (x, 0)).collect();
    // Every subnormal bit position and its all-ones neighbour.
    v.extend((0..23).flat_map(|k| [((1u32 << k), 0), (((2u32 << k) - 1), 0)]));
    let mut rng = ws_hdl::dut::rng(seed, 0x5a);
    for _ in 0..random {
        // Mostly positive: negative inputs only test the NaN path.
        let x = operand(&mut rng);
        v.push((if rng.random_range(0..8u32) == 0 { x } else { x & 0x7fff_ffff }, 0));
    }
    v
}

fn std_div(a: u32, b: u32) -> u32 {
    fp::canonicalize((f32::from_bits(a) / f32::from_bits(b)).to_bits())
}

fn std_sqrt(a: u32, _: u32) -> u32 {
    fp::canonicalize(f32::from_bits(a).sqrt().to_bits())
}

#[test]
fn div_is_correctly_rounded() {
    run_test("optim_div_s2", &div_spec(2), 21, |dut| {
        let ops = div_ops(dut.seed(), 1_000_000);
        check(dut, &ops, false, divsqrt_latency(2).into(), &std_div);
    });
}

#[test]
fn sqrt_is_correctly_rounded() {
    run_test("optim_sqrt_s2", &sqrt_spec(2), 22, |dut| {
        let ops = sqrt_ops(dut.seed(), 1_000_000);
        check(dut, &ops, true, divsqrt_latency(2).into(), &std_sqrt);
        // The golden model's own bit-level sqrt is the same function.
        for &(x, _) in ops.iter().take(100_000) {
            assert_eq!(optim::sqrt(x), std_sqrt(x, 0), "{x:#x}");
        }
    });
}

#[test]
fn other_pipelinings() {
    for steps in [1u32, 5, 25] {
        run_test(&format!("optim_div_s{steps}"), &div_spec(steps), 23, |dut| {
            check(dut, &div_ops(dut.seed(), 20_000), false, divsqrt_latency(steps).into(), &std_div);
        });
        run_test(&format!("optim_sqrt_s{steps}"), &sqrt_spec(steps), 24, |dut| {
            check(dut, &sqrt_ops(dut.seed(), 20_000), true, divsqrt_latency(steps).into(), &std_sqrt);
        });
    }
}

/// `ws_mesh_div`: one division at a time, start to done, every result and its latency.
#[test]
fn mesh_div_is_correctly_rounded() {
    run_test("mesh_div", &ws_hdl::mesh_pe::div_spec(), 25, |dut| {
        let ops = div_ops(dut.seed(), 100_000);
        let (start, a, b) = (dut.port("start"), dut.port("a"), dut.port("b"));
        let (done, busy, q) = (dut.port("done"), dut.port("busy"), dut.port("q"));
        dut.reset(2);
        let mut rng = ws_hdl::dut::rng(dut.seed(), 0xd2);
        for &(x, y) in &ops {
            // A few idle cycles between divisions, sometimes none.
            for _ in 0..rng.random_range(0..3u32) {
                dut.tick();
            }
            dut.set(start, 1);
            dut.set(a, u64::from(x));
            dut.set(b, u64::from(y));
            dut.tick();
            dut.set(start, 0);
            // Operands change while it works: it must have taken them at the start.
            dut.set(a, u64::from(rng.random::<u32>()));
            dut.set(b, u64::from(rng.random::<u32>()));
            let mut cycles = 1u64;
            dut.eval();
            while !dut.get_bool(done) {
                assert!(dut.get_bool(busy), "idle without done for {x:#010x} / {y:#010x}");
                dut.tick();
                cycles += 1;
                assert!(cycles <= ws_hdl::mesh_pe::DIV_CYCLES, "{x:#010x} / {y:#010x} takes too long");
            }
            let (got, want) = (dut.get(q) as u32, optim::div(x, y));
            assert_eq!(got, want, "{x:#010x} / {y:#010x} = {got:#010x}, want {want:#010x}");
            assert_eq!(want, std_div(x, y), "the golden div is IEEE division");
            let special = fp::is_nan(x)
                || fp::is_nan(y)
                || x << 1 == 0
                || y << 1 == 0
                || (x << 1) == 0xff00_0000
                || (y << 1) == 0xff00_0000;
            let expect = if special { 1 } else { ws_hdl::mesh_pe::DIV_CYCLES };
            assert_eq!(cycles, expect, "latency of {x:#010x} / {y:#010x}");
            dut.tick();
        }
    });
}
