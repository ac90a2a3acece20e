//! FPnew as SwarmX uses it (`ws_swarm_fp32`, add and multiply), bit for bit against
//! `ws_common::golden::fp`: every pair of edge-case operands (zeros of both signs,
//! infinities, NaNs with payloads and signs, subnormal and normal range ends, ties), then
//! random operands biased toward extreme exponents, one operation per cycle through the
//! pipeline. This is the proof that the golden model's NaN canonicalisation and zero rules are
//! FPnew's, on which every SwarmX reduction test builds.

use rand::RngExt;
use ws_common::golden::fp;
use ws_hdl::dut::{run_test, Dut};
use ws_hdl::swarm::{fp32_spec, tb};

const LATENCY: u64 = 3;

/// Streams `pairs` through the cell, one per cycle, and checks each result LATENCY cycles
/// later.
fn check_pairs(dut: &mut Dut, pairs: &[(u32, u32)], golden: fn(u32, u32) -> u32, what: &str) {
    let (valid, a, b) = (dut.port("in_valid"), dut.port("in_a"), dut.port("in_b"));
    let (out_valid, out) = (dut.port("out_valid"), dut.port("out_data"));
    dut.reset(2);
    let mut sent = 0usize;
    let mut checked = 0usize;
    let mut cycle = 0u64;
    // A bubble every 7th cycle: FPnew's valid-gated registers must keep results in order.
    while checked < pairs.len() {
        let send = sent < pairs.len() && cycle % 7 != 3;
        dut.set(valid, send as u64);
        if send {
            dut.set(a, u64::from(pairs[sent].0));
            dut.set(b, u64::from(pairs[sent].1));
        }
        dut.eval();
        if dut.get_bool(out_valid) {
            let (x, y) = pairs[checked];
            let got = dut.get(out) as u32;
            let want = golden(x, y);
            assert_eq!(got, want, "{what}({x:#010x}, {y:#010x}) = {got:#010x}, golden {want:#010x}");
            checked += 1;
        }
        if send {
            sent += 1;
        }
        dut.tick();
        cycle += 1;
        assert!(cycle < 2 * pairs.len() as u64 + 100, "results stopped coming");
    }
}

fn pairs(seed: u64, random: usize) -> Vec<(u32, u32)> {
    let mut v = Vec::new();
    for &x in tb::EDGE_OPERANDS {
        for &y in tb::EDGE_OPERANDS {
            v.push((x, y));
        }
    }
    let mut rng = ws_hdl::dut::rng(seed, 0xf9);
    for _ in 0..random {
        let x = tb::operand(&mut rng);
        // Half the pairs share an exponent neighbourhood with the first operand, so that
        // cancellation, carries and ties happen often.
        let y = if rng.random_bool(0.5) {
            (x ^ (rng.random::<u32>() & 0x807f_ffff)).wrapping_add(rng.random_range(0..3u32) << 23)
        } else {
            tb::operand(&mut rng)
        };
        v.push((x, y));
    }
    v
}

#[test]
fn fpnew_add_is_the_golden_add() {
    let spec = fp32_spec(0, LATENCY as u32).unwrap();
    run_test("swarm_fp_add", &spec, 11, |dut| {
        let ps = pairs(dut.seed(), 60_000);
        check_pairs(dut, &ps, fp::add, "add");
        // The zero rules SwarmX's masking relies on, named.
        assert_eq!(fp::add(fp::NEG_ZERO, fp::NEG_ZERO), fp::NEG_ZERO);
        assert_eq!(fp::add(fp::POS_ZERO, fp::NEG_ZERO), fp::POS_ZERO);
    });
}

#[test]
fn fpnew_mul_is_the_golden_mul() {
    let spec = fp32_spec(1, LATENCY as u32).unwrap();
    run_test("swarm_fp_mul", &spec, 12, |dut| {
        let ps = pairs(dut.seed(), 30_000);
        check_pairs(dut, &ps, fp::mul, "mul");
    });
}
