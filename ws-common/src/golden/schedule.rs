//! Per-step learning-rate schedules: what the firmware runs to get the `lr` of each step
//! before [`step_consts`](super::optim::step_consts), and what the host replays to check it.
//!
//! The forms are PyTorch's closed forms (`torch.optim.lr_scheduler`, the `_get_closed_form_lr`
//! of `StepLR` and `CosineAnnealingLR`) with epoch = t − 1, times a linear warm-up factor:
//!
//! ```text
//! warm(t)      = min(1, t / warmup)                        (warmup = 0: 1)
//! Constant:    lr(t) = lr · warm(t)
//! Step:        lr(t) = lr · gamma^⌊(t − 1) / step_size⌋ · warm(t)
//! Cosine:      lr(t) = (eta_min + (lr − eta_min) · (1 + cos(π · (t − 1) / t_max)) / 2) · warm(t)
//! ```
//!
//! Everything is binary64 (PyTorch's Python floats) with `libm`'s `pow` and `cos`, so the
//! firmware (no_std, RV32) and the host compute the same bits. Past `t_max` the cosine form
//! keeps going (it rises again), as PyTorch's closed form does.
//!
//! [`Schedule::encode`] / [`Schedule::decode`] are the fixed little-endian wire form
//! ([`SCHEDULE_LEN`] bytes) that a control command carries.

/// Why a schedule or hyperparameter record was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// unknown schedule kind code {0}: send 0 (constant), 1 (step) or 2 (cosine)
    #[error("unknown schedule kind code {0}: send 0 (constant), 1 (step) or 2 (cosine)")]
    UnknownSchedule(u32),
    /// unknown optimizer code {0}: send 0 (SGD), 1 (Adam) or 2 (AdamW)
    #[error("unknown optimizer code {0}: send 0 (SGD), 1 (Adam) or 2 (AdamW)")]
    UnknownOptimizer(u32),
    /// unknown flag bits {0:#x}: only maximize (1), nesterov (2) and amsgrad (4) are defined
    #[error("unknown flag bits {0:#x}: only maximize (1), nesterov (2) and amsgrad (4) are defined")]
    UnknownFlags(u32),
    /// `{0}` is not a finite number: send a finite value
    #[error("`{0}` is not a finite number: send a finite value")]
    NotFinite(&'static str),
    /// `{0}` is zero: it must be at least 1
    #[error("`{0}` is zero: it must be at least 1")]
    Zero(&'static str),
    /// `{0}` is set for a schedule that has no such parameter: send 0
    #[error("`{0}` is set for a schedule that has no such parameter: send 0")]
    Unused(&'static str),
}

/// The kind of a [`Schedule`], with its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ScheduleKind {
    /// The base rate every step (wire code 0).
    Constant,
    /// `StepLR`: multiply by `gamma` every `step_size` steps (wire code 1).
    Step {
        /// Steps between decays (≥ 1).
        step_size: u32,
        /// The decay factor.
        gamma: f64,
    },
    /// `CosineAnnealingLR`: half a cosine from `lr` down to `eta_min` over `t_max` steps
    /// (wire code 2).
    Cosine {
        /// Steps of the half period (≥ 1).
        t_max: u32,
        /// The rate at the bottom.
        eta_min: f64,
    },
}

/// A learning-rate schedule: base rate, form and linear warm-up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    /// The base learning rate.
    pub lr: f64,
    /// The form and its parameters.
    pub kind: ScheduleKind,
    /// Linear warm-up over this many steps (0: none).
    pub warmup: u32,
}

/// Bytes of [`Schedule::encode`]: lr f64, kind u32, warmup u32, step_size/t_max u32,
/// gamma/eta_min f64 (little-endian, unused fields 0).
pub const SCHEDULE_LEN: usize = 28;

impl Schedule {
    /// A constant rate without warm-up.
    pub const fn constant(lr: f64) -> Self {
        Schedule { lr, kind: ScheduleKind::Constant, warmup: 0 }
    }

    /// The learning rate of step `t` (1 for the first step; `t = 0` is taken as 1), by the
    /// formulas of the module documentation. A `step_size` or `t_max` of 0 (which
    /// [`Schedule::decode`] refuses) is taken as 1.
    pub fn lr_at(&self, t: u32) -> f64 {
        let t = t.max(1);
        let epoch = t - 1;
        let base = match self.kind {
            ScheduleKind::Constant => self.lr,
            ScheduleKind::Step { step_size, gamma } => {
                self.lr * libm::pow(gamma, f64::from(epoch / step_size.max(1)))
            }
            ScheduleKind::Cosine { t_max, eta_min } => {
                let c = libm::cos(core::f64::consts::PI * f64::from(epoch) / f64::from(t_max.max(1)));
                eta_min + (self.lr - eta_min) * (1.0 + c) / 2.0
            }
        };
        if self.warmup != 0 && t < self.warmup {
            base * (f64::from(t) / f64::from(self.warmup))
        } else {
            base
        }
    }

    /// The wire form (layout at [`SCHEDULE_LEN`]).
    pub fn encode(&self, out: &mut [u8; SCHEDULE_LEN]) {
        let (code, n, x) = match self.kind {
            ScheduleKind::Constant => (0u32, 0u32, 0.0f64),
            ScheduleKind::Step { step_size, gamma } => (1, step_size, gamma),
            ScheduleKind::Cosine { t_max, eta_min } => (2, t_max, eta_min),
        };
        out[0..8].copy_from_slice(&self.lr.to_le_bytes());
        out[8..12].copy_from_slice(&code.to_le_bytes());
        out[12..16].copy_from_slice(&self.warmup.to_le_bytes());
        out[16..20].copy_from_slice(&n.to_le_bytes());
        out[20..28].copy_from_slice(&x.to_le_bytes());
    }

    /// Reads the wire form; refuses unknown kinds, non-finite numbers, a zero `step_size` or
    /// `t_max`, and parameters set for a constant schedule.
    pub fn decode(b: &[u8; SCHEDULE_LEN]) -> Result<Self, DecodeError> {
        let lr = finite(f64_at(b, 0), "lr")?;
        let code = u32_at(b, 8);
        let warmup = u32_at(b, 12);
        let n = u32_at(b, 16);
        let x = f64_at(b, 20);
        let kind = match code {
            0 => {
                if n != 0 {
                    return Err(DecodeError::Unused("step_size/t_max"));
                }
                if x.to_bits() != 0 {
                    return Err(DecodeError::Unused("gamma/eta_min"));
                }
                ScheduleKind::Constant
            }
            1 => ScheduleKind::Step { step_size: nonzero(n, "step_size")?, gamma: finite(x, "gamma")? },
            2 => ScheduleKind::Cosine { t_max: nonzero(n, "t_max")?, eta_min: finite(x, "eta_min")? },
            c => return Err(DecodeError::UnknownSchedule(c)),
        };
        Ok(Schedule { lr, kind, warmup })
    }
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(crate) fn f64_at(b: &[u8], at: usize) -> f64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    f64::from_le_bytes(a)
}

pub(crate) fn finite(x: f64, field: &'static str) -> Result<f64, DecodeError> {
    if x.is_finite() {
        Ok(x)
    } else {
        Err(DecodeError::NotFinite(field))
    }
}

fn nonzero(n: u32, field: &'static str) -> Result<u32, DecodeError> {
    if n == 0 {
        Err(DecodeError::Zero(field))
    } else {
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_and_warmup_by_hand() {
        let s = Schedule::constant(0.1);
        assert_eq!(s.lr_at(1), 0.1);
        assert_eq!(s.lr_at(1000), 0.1);
        let w = Schedule { warmup: 4, ..s };
        assert_eq!(w.lr_at(1), 0.1 * 0.25);
        assert_eq!(w.lr_at(2), 0.1 * 0.5);
        assert_eq!(w.lr_at(3), 0.1 * 0.75);
        assert_eq!(w.lr_at(4), 0.1);
        assert_eq!(w.lr_at(9), 0.1);
        assert_eq!(w.lr_at(0), w.lr_at(1));
    }

    #[test]
    fn step_by_hand() {
        let s = Schedule { lr: 1.0, kind: ScheduleKind::Step { step_size: 3, gamma: 0.5 }, warmup: 0 };
        let want = [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.125];
        for (i, w) in want.iter().enumerate() {
            assert_eq!(s.lr_at(i as u32 + 1), *w, "t = {}", i + 1);
        }
        // Warm-up multiplies the decayed rate.
        let s = Schedule { warmup: 5, ..s };
        assert_eq!(s.lr_at(4), 0.5 * 0.8);
    }

    #[test]
    fn cosine_by_hand() {
        let s = Schedule { lr: 1.0, kind: ScheduleKind::Cosine { t_max: 4, eta_min: 0.2 }, warmup: 0 };
        // epoch 0: lr; epoch 2 (half of t_max): the midpoint; epoch 4: eta_min.
        assert_eq!(s.lr_at(1), 1.0);
        assert!((s.lr_at(3) - 0.6).abs() < 1e-15);
        assert!((s.lr_at(5) - 0.2).abs() < 1e-15);
        // epoch 1: 0.2 + 0.8·(1 + cos(π/4))/2.
        let want = 0.2 + 0.8 * (1.0 + core::f64::consts::FRAC_1_SQRT_2) / 2.0;
        assert!((s.lr_at(2) - want).abs() < 1e-15);
        // Past t_max it rises again (periodic closed form).
        assert!((s.lr_at(7) - 0.6).abs() < 1e-15);
        assert!(s.lr_at(5) < s.lr_at(6));
    }

    #[test]
    fn round_trip() {
        let all = [
            Schedule::constant(1e-3),
            Schedule { lr: 0.5, kind: ScheduleKind::Step { step_size: 7, gamma: 0.3 }, warmup: 2 },
            Schedule { lr: -2.0, kind: ScheduleKind::Cosine { t_max: 100, eta_min: 1e-6 }, warmup: 10 },
        ];
        for s in all {
            let mut b = [0u8; SCHEDULE_LEN];
            s.encode(&mut b);
            assert_eq!(Schedule::decode(&b), Ok(s));
        }
        let mut b = [0u8; SCHEDULE_LEN];
        all[1].encode(&mut b);
        assert_eq!(&b[8..12], &[1, 0, 0, 0]);
        assert_eq!(&b[16..20], &[7, 0, 0, 0]);
    }

    #[test]
    fn refuses_bad_input() {
        let mut b = [0u8; SCHEDULE_LEN];
        let s = Schedule { lr: 0.5, kind: ScheduleKind::Step { step_size: 7, gamma: 0.3 }, warmup: 2 };
        s.encode(&mut b);
        let mut k = b;
        k[8] = 3;
        assert_eq!(Schedule::decode(&k), Err(DecodeError::UnknownSchedule(3)));
        let mut n = b;
        n[0..8].copy_from_slice(&f64::NAN.to_le_bytes());
        assert_eq!(Schedule::decode(&n), Err(DecodeError::NotFinite("lr")));
        let mut g = b;
        g[20..28].copy_from_slice(&f64::INFINITY.to_le_bytes());
        assert_eq!(Schedule::decode(&g), Err(DecodeError::NotFinite("gamma")));
        let mut z = b;
        z[16..20].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(Schedule::decode(&z), Err(DecodeError::Zero("step_size")));
        let mut c = [0u8; SCHEDULE_LEN];
        Schedule::constant(1.0).encode(&mut c);
        c[16] = 1;
        assert_eq!(Schedule::decode(&c), Err(DecodeError::Unused("step_size/t_max")));
    }
}
