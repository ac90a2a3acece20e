//! MemoryX's optimizer lanes: the RTL file lists and block specs of `ws_optim_*`, and the
//! stimulus the lane testbenches and the bench share.
//!
//! The lane (`hdl/rtl/ws_optim_lane.v`) and its wrapper `ws_optim_lanes` are built from FPnew's
//! FMA (through [`crate::vbuild::fpnew`]) and two units of our own, `ws_optim_div` and
//! `ws_optim_sqrt`. What they compute is `ws_common::golden::optim`; how, and why, is
//! `docs/memoryx.md`.

use rand::{Rng, RngExt};

use crate::dut::BlockSpec;
use crate::swarm::{tb, with_fpnew};
use crate::vbuild::BuildError;

/// Repo-relative lint waivers of the optimizer RTL.
pub const OPTIM_VLT: &str = "hdl/lint/optim.vlt";

/// Our RTL files of a lane, in compile order.
pub const LANE_FILES: &[&str] = &[
    "hdl/rtl/ws_fifo.v",
    "hdl/rtl/ws_clock_gate.v",
    "hdl/rtl/ws_optim_div.v",
    "hdl/rtl/ws_optim_sqrt.v",
    "hdl/rtl/ws_optim_fma.v",
    "hdl/rtl/ws_optim_max.v",
    "hdl/rtl/ws_optim_delay.v",
    "hdl/rtl/ws_optim_lane.v",
    "hdl/rtl/ws_optim_lanes.v",
];

/// The divider alone, `steps` quotient bits per pipeline stage.
pub fn div_spec(steps: u32) -> BlockSpec {
    BlockSpec::new("ws_optim_div")
        .file("hdl/rtl/ws_optim_div.v")
        .param("STEPS_PER_STAGE", steps)
        .vlt(OPTIM_VLT)
}

/// The square root alone, `steps` root bits per pipeline stage.
pub fn sqrt_spec(steps: u32) -> BlockSpec {
    BlockSpec::new("ws_optim_sqrt")
        .file("hdl/rtl/ws_optim_sqrt.v")
        .param("STEPS_PER_STAGE", steps)
        .vlt(OPTIM_VLT)
}

/// Latency in cycles of `ws_optim_div` / `ws_optim_sqrt` with `steps` bits per stage.
pub const fn divsqrt_latency(steps: u32) -> u32 {
    2 + 25u32.div_ceil(steps)
}

/// `ws_optim_lanes` with `lanes` lanes (1, 2 or 4) and FPnew, each lane's datapath on its
/// clock gate (the default, as the SoC simulates it).
pub fn lanes_spec(lanes: u32) -> Result<BlockSpec, BuildError> {
    lanes_spec_with(lanes, true)
}

/// As [`lanes_spec`]; `clock_gate` false builds the free-running datapath that synthesis
/// builds (`CLOCK_GATE` = 0), so the tests prove both behave the same.
pub fn lanes_spec_with(lanes: u32, clock_gate: bool) -> Result<BlockSpec, BuildError> {
    let spec = BlockSpec::new("ws_optim_lanes")
        .files(LANE_FILES.iter().copied())
        .param("LANES", lanes)
        .param("CLOCK_GATE", u32::from(clock_gate));
    let mut spec = with_fpnew(spec)?;
    spec.vlt_files.push(OPTIM_VLT.into());
    Ok(spec)
}

/// Adds a Verilator configuration file to a [`BlockSpec`].
trait Vlt {
    fn vlt(self, path: &str) -> Self;
}

impl Vlt for BlockSpec {
    fn vlt(mut self, path: &str) -> Self {
        self.vlt_files.push(path.into());
        self
    }
}

/// Edge operands of the divider and square root: SwarmX's list (zeros, infinities, NaNs,
/// subnormal and normal range ends, ties) plus exact squares and extreme powers of two.
pub fn edge_operands() -> Vec<u32> {
    let mut v = tb::EDGE_OPERANDS.to_vec();
    v.extend([
        0x3f80_0000,
        0x4080_0000,
        0x4110_0000,
        0x4c80_0000, // 1, 4, 9, 2^26
        0x0000_0004,
        0x0000_0010,
        0x0020_0000,
        0x0040_0000, // subnormal squares
        0x7f7f_ffff,
        0x0080_0000,
        0x3f7f_ffff,
        0x3fff_ffff,
        0x0000_0002,
        0x0000_0003,
    ]);
    v
}

/// One random operand for the div/sqrt units: SwarmX's mix (1 in 4 edge values, 1 in 8
/// extreme exponents, subnormals included), plus exact squares 1 in 16.
pub fn operand(rng: &mut impl Rng) -> u32 {
    if rng.random_range(0..16u32) == 0 {
        let r = rng.random_range(1..4096u32) as f32 * 2f32.powi(rng.random_range(-70..60));
        (r * r).to_bits()
    } else {
        tb::operand(rng)
    }
}

use ws_common::golden::optim::{self as golden, Consts, Hyper, Kind, Param};

use crate::dut::{Dut, Pattern, StreamSink, StreamSource};

/// Writes the per-step constants to the `cfg_*` ports of a lane or of `ws_optim_lanes`.
pub fn set_consts(dut: &mut Dut, c: &Consts) {
    let ports: [(&str, u32); 11] = [
        ("cfg_flags", c.flags),
        ("cfg_gscale", c.gscale),
        ("cfg_wd", c.wd),
        ("cfg_decay", c.decay),
        ("cfg_k1", c.k1),
        ("cfg_k2", c.k2),
        ("cfg_beta2", c.beta2),
        ("cfg_c2", c.c2),
        ("cfg_ibc2s", c.ibc2s),
        ("cfg_eps", c.eps),
        ("cfg_neg_rate", c.neg_rate),
    ];
    for (name, value) in ports {
        let p = dut.port(name);
        dut.set(p, u64::from(value));
    }
}

/// What [`run_chunk`] measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChunkRun {
    /// Cycles from the first cycle `s_valid` was offered to the last result taken.
    pub cycles: u64,
    /// Cycles from the first input accepted to the first result on `m_*` (valid high).
    pub first_out_latency: u64,
    /// Beats (of `lanes` parameters each) through the lanes.
    pub beats: u64,
}

/// Streams `params` (weight state and gradient) through `ws_optim_lanes` with `lanes` lanes
/// under the constants `c` (already set with [`set_consts`]), `lanes` parameters per beat
/// (the last beat padded with zeros), with the valid pattern `src` and the ready pattern
/// `sink`, and checks every result bit for bit against `ws_common::golden::optim::update`.
/// Returns when every result has been taken and the lanes are idle again.
///
/// # Panics
/// On a wrong, missing, duplicated or spurious result, or a handshake violation.
pub fn run_chunk(
    dut: &mut Dut,
    lanes: usize,
    c: &Consts,
    params: &[(Param, u32)],
    src: Pattern,
    sink: Pattern,
    seed: u64,
) -> ChunkRun {
    let beats: Vec<Vec<(Param, u32)>> = params
        .chunks(lanes)
        .map(|ch| {
            let mut v = ch.to_vec();
            v.resize(lanes, (Param::default(), 0));
            v
        })
        .collect();
    let want: Vec<Vec<Param>> =
        beats.iter().map(|b| b.iter().map(|&(p, g)| golden::update(c, p, g)).collect()).collect();
    let mut source = StreamSource::with_fields(dut, "s", &[], seed).pattern(src);
    let mut sinker = StreamSink::with_fields(dut, "m", &[], seed ^ 0x55).pattern(sink);
    for _ in &beats {
        source.push_beat(&[]);
        sinker.expect_beat(&[]);
    }
    let names_in = ["s_w", "s_m", "s_v", "s_vmax", "s_g"];
    let ins: Vec<_> = names_in.iter().map(|n| dut.port(n)).collect();
    let outs: Vec<_> = ["m_w", "m_m", "m_v", "m_vmax"].iter().map(|n| dut.port(n)).collect();
    let (s_ready, m_valid, busy) = (dut.port("s_ready"), dut.port("m_valid"), dut.port("busy"));
    let (mut next_in, mut next_out) = (0usize, 0usize);
    let (start, mut first_in, mut first_out) = (dut.cycle(), None, None);
    let mut words = vec![0u32; lanes];
    let limit = start + 200 * beats.len() as u64 + 10_000;
    while next_out < beats.len() {
        if let Some(b) = beats.get(next_in) {
            for (k, p) in ins.iter().enumerate() {
                for (l, &(st, g)) in b.iter().enumerate() {
                    words[l] = [st.w, st.m, st.v, st.vmax, g][k];
                }
                dut.set_words(*p, &words);
            }
        }
        source.drive(dut);
        sinker.drive(dut);
        dut.eval();
        let _ = s_ready;
        if first_in.is_some() && first_out.is_none() && dut.get_bool(m_valid) {
            first_out = Some(dut.cycle());
        }
        if source.sample(dut).is_some() {
            first_in.get_or_insert(dut.cycle());
            next_in += 1;
        }
        if sinker.sample(dut).is_some() {
            let got: Vec<Vec<u32>> = outs.iter().map(|p| dut.get_words(*p)).collect();
            for (l, w) in want[next_out].iter().enumerate() {
                let g = Param { w: got[0][l], m: got[1][l], v: got[2][l], vmax: got[3][l] };
                if g != *w {
                    let (p, grad) = beats[next_out][l];
                    panic!(
                        "beat {next_out} lane {l}: update({p:x?}, g={grad:#010x}) with {c:x?}\n  got  {g:x?}\n  want {w:x?}"
                    );
                }
            }
            next_out += 1;
        }
        dut.tick();
        assert!(
            dut.cycle() < limit,
            "results stopped coming: {next_out} of {} after {} cycles",
            beats.len(),
            dut.cycle() - start
        );
    }
    sinker.finish();
    let end = dut.cycle();
    while dut.get_bool(busy) {
        dut.tick();
    }
    ChunkRun {
        cycles: end - start,
        first_out_latency: first_out.unwrap_or(0) - first_in.unwrap_or(0),
        beats: beats.len() as u64,
    }
}

/// Random hyperparameters of `kind`: every flag combination the kind allows, decays and
/// betas over their useful ranges, learning rates from 1e-30 to 1e30 (1 in 8 extreme).
pub fn random_hyper(rng: &mut impl Rng, kind: Kind) -> Hyper {
    let base = match kind {
        Kind::Sgd => Hyper::SGD,
        Kind::Adam => Hyper::ADAM,
        Kind::AdamW => Hyper::ADAMW,
    };
    fn b(rng: &mut impl Rng) -> bool {
        rng.random_bool(0.5)
    }
    Hyper {
        weight_decay: if b(rng) { 0.0 } else { 10f64.powf(rng.random_range(-6.0..0.0)) },
        maximize: rng.random_range(0..4u32) == 0,
        momentum: if b(rng) { 0.0 } else { rng.random_range(0.0..0.999) },
        dampening: if b(rng) { 0.0 } else { rng.random_range(0.0..0.5) },
        nesterov: b(rng),
        beta1: rng.random_range(0.5..0.999),
        beta2: rng.random_range(0.9..0.99999),
        eps: 10f64.powf(rng.random_range(-12.0..-4.0)),
        amsgrad: b(rng),
        ..base
    }
}

/// A random learning rate: 1e-5..1 mostly, 1 in 8 from 1e-30..1e30.
pub fn random_lr(rng: &mut impl Rng) -> f64 {
    if rng.random_range(0..8u32) == 0 {
        10f64.powf(rng.random_range(-30.0..30.0))
    } else {
        10f64.powf(rng.random_range(-5.0..0.0))
    }
}

/// A random parameter and gradient: mostly realistic magnitudes (|w| ≤ ~10, v ≥ 0), 1 in 8
/// fields from SwarmX's edge/extreme operand mix (±0, ±inf, NaN, subnormals, huge).
pub fn random_param(rng: &mut impl Rng) -> (Param, u32) {
    fn real(rng: &mut impl Rng, pos: bool) -> u32 {
        if rng.random_range(0..8u32) == 0 {
            let x = tb::operand(rng);
            if pos {
                x & 0x7fff_ffff
            } else {
                x
            }
        } else {
            let mag = 10f32.powf(rng.random_range(-8.0..1.0));
            let s = if !pos && rng.random_bool(0.5) { -mag } else { mag };
            s.to_bits()
        }
    }
    let w = real(rng, false);
    let m = real(rng, false);
    let v = real(rng, true);
    let vmax = real(rng, true);
    let g = real(rng, false);
    (Param { w, m, v, vmax }, g)
}
