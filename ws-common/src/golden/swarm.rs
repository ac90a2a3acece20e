//! SwarmX's reduction, bit for bit: what one `ws_swarm_node` emits for one aligned set of
//! gradient flits, and what a cascade (tree) of nodes emits for one flit per leaf.
//!
//! # The fixed reduction order
//!
//! A node with `P` downstream ports (the RTL parameter `N_PORTS`, 2..=16) sums `P` binary32
//! values `v0..v(P-1)`, one per port in port order, with a balanced pairwise tree whose shape
//! depends only on `P`, never on timing or on the port mask:
//!
//! - level 0 holds the `P` values;
//! - each level adds neighbours, `next[i] = cur[2i] + cur[2i+1]`, and when the level has an
//!   odd count its **last** value passes through unchanged to become the last value of the
//!   next level;
//! - this repeats until one value is left, after ⌈log₂ P⌉ levels.
//!
//! So `P = 4` is `(v0+v1)+(v2+v3)`, `P = 3` is `(v0+v1)+v2`, `P = 5` is
//! `((v0+v1)+(v2+v3))+v4`, `P = 6` is `((v0+v1)+(v2+v3))+(v4+v5)` and `P = 7` is
//! `((v0+v1)+(v2+v3))+((v4+v5)+v6)`. Each `+` is [`fp::add`] (RNE, canonical NaN).
//!
//! A port that the mask switches off contributes −0.0, the identity of IEEE addition for every
//! non-NaN value (`+0 + −0 = +0`, `−0 + −0 = −0`), so the sum is that of the active ports in the
//! same tree. With `P >= 2` every value meets at least one adder, so every NaN that reaches the
//! output is the canonical quiet NaN.
//!
//! # Wire formats and scale
//!
//! [`Dtype`] selects what the downstream ports carry and what goes up:
//! - [`Dtype::Fp32`]: one fp32 per flit in, one fp32 per flit out.
//! - [`Dtype::Bf16`]: two bf16 per flit in (element `2i` in bits 15:0); each lane is widened
//!   exactly to fp32 and summed in fp32 by its own tree; two fp32 flits go up per flit in,
//!   the even lane first, with header index `2i` and `2i + 1` (`last` on the second only).
//! - [`Dtype::Bf16Out`]: two bf16 per flit in as above, and the two fp32 sums are rounded to
//!   bf16 ([`fp::f32_to_bf16`]) and packed into one flit out: for inner nodes of a bf16 tree.
//!
//! The optional scale multiplies each fp32 sum once, `sum × scale` ([`fp::mul`]), after the
//! tree and before any bf16 rounding. Firmware sets it to 1/(active ports) or to the gradient
//! scale 1/(workers·batch) at the root; inner nodes run without it. Without a scale the
//! hardware multiplies by 1.0, which changes no non-NaN value and no canonical NaN.
//!
//! # Cascades
//!
//! A [`Tree`] is a uniform tree given by the fan-out of each level from the root down, for
//! example `[4, 4]` for 16 leaves. Its nodes are numbered breadth first (root 0, then the
//! nodes of level 1 left to right, ...), and leaf `i` sits on port `i % f` of the `i / f`-th
//! node of the last level (`f` its fan-out). Each node reduces what its children emitted, so
//! the cascade's result is the nested fixed-order tree, with any bf16 rounding of inner nodes
//! in between.

use super::fp;
use crate::flit::{Flit, Header, Kind};

/// Most downstream ports a node has (the RTL's limit).
pub const MAX_PORTS: usize = 16;

/// Most flits one leaf flit can turn into at the root of a [`Tree`] (each [`Dtype::Bf16`]
/// level doubles them).
pub const MAX_FLITS: usize = 8;

/// Uplink wire format of a node (the `cfg_dtype` input of the RTL).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Dtype {
    /// fp32 in, fp32 out.
    Fp32 = 0,
    /// 2 × bf16 in, fp32 out (two flits per flit in).
    Bf16 = 1,
    /// 2 × bf16 in, 2 × bf16 out (RNE from the fp32 sums).
    Bf16Out = 2,
}

impl Dtype {
    /// The format with code `v` (3 is reserved).
    pub const fn from_code(v: u8) -> Option<Dtype> {
        Some(match v {
            0 => Dtype::Fp32,
            1 => Dtype::Bf16,
            2 => Dtype::Bf16Out,
            _ => return None,
        })
    }

    /// Flits sent up for each aligned set of flits.
    pub const fn flits_out(self) -> usize {
        match self {
            Dtype::Bf16 => 2,
            _ => 1,
        }
    }
}

/// The configuration of one node, as firmware sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeConfig {
    /// Downstream ports (the RTL parameter `N_PORTS`), 2..=16. Fixes the tree shape.
    pub ports: usize,
    /// Active ports, bit `p` for port `p`.
    pub mask: u16,
    /// Wire format.
    pub dtype: Dtype,
    /// The scale as binary32 bits, or `None` for none.
    pub scale: Option<u32>,
}

impl NodeConfig {
    /// All `ports` active, fp32, no scale.
    pub const fn new(ports: usize) -> Self {
        let mask = if ports >= 16 { 0xffff } else { ((1u32 << ports) - 1) as u16 };
        NodeConfig { ports, mask, dtype: Dtype::Fp32, scale: None }
    }

    /// With this port mask.
    pub const fn mask(self, mask: u16) -> Self {
        NodeConfig { mask, ..self }
    }

    /// With this wire format.
    pub const fn dtype(self, dtype: Dtype) -> Self {
        NodeConfig { dtype, ..self }
    }

    /// With this scale (binary32 bits).
    pub const fn scale(self, scale: u32) -> Self {
        NodeConfig { scale: Some(scale), ..self }
    }

    /// Active ports.
    pub const fn active(&self) -> u32 {
        (self.mask as u32 & ((1u32 << self.ports) - 1)).count_ones()
    }

    fn is_active(&self, port: usize) -> bool {
        self.mask >> port & 1 == 1
    }
}

/// Why a reduction cannot be evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwarmError {
    /// A node has fewer than 2 or more than [`MAX_PORTS`] ports.
    BadPorts(usize),
    /// Fewer (or more) values than ports, or leaves than the tree has.
    WrongInputCount {
        /// Values expected.
        expected: usize,
        /// Values given.
        got: usize,
    },
    /// A node's configuration does not match the tree (ports ≠ fan-out, or too few configs).
    BadTree,
    /// A node has no active port.
    NoActivePort {
        /// The node (breadth-first id).
        node: usize,
    },
    /// The active children of a node emit different numbers of flits (their formats differ).
    Ragged {
        /// The node (breadth-first id).
        node: usize,
    },
    /// More than [`MAX_FLITS`] flits would leave the root.
    TooManyFlits,
}

/// Sums `v` in place in the fixed order (module docs) and returns the sum. A single value is
/// returned as it is; an empty slice sums to −0.0.
pub fn tree_sum(v: &mut [u32]) -> u32 {
    let mut n = v.len();
    if n == 0 {
        return fp::NEG_ZERO;
    }
    while n > 1 {
        let pairs = n / 2;
        for i in 0..pairs {
            v[i] = fp::add(v[2 * i], v[2 * i + 1]);
        }
        if n % 2 == 1 {
            v[pairs] = v[n - 1];
        }
        n = pairs + n % 2;
    }
    v[0]
}

/// One lane of a node: the active values of `values` (one per port) summed in the node's
/// fixed order, masked ports as −0.0, then scaled.
pub fn node_lane(cfg: &NodeConfig, values: &[u32]) -> Result<u32, SwarmError> {
    check_ports(cfg.ports)?;
    if values.len() != cfg.ports {
        return Err(SwarmError::WrongInputCount { expected: cfg.ports, got: values.len() });
    }
    let mut buf = [fp::NEG_ZERO; MAX_PORTS];
    for (p, v) in values.iter().enumerate() {
        if cfg.is_active(p) {
            buf[p] = *v;
        }
    }
    let sum = tree_sum(&mut buf[..cfg.ports]);
    Ok(match cfg.scale {
        Some(s) => fp::mul(sum, s),
        None => sum,
    })
}

fn check_ports(ports: usize) -> Result<(), SwarmError> {
    if (2..=MAX_PORTS).contains(&ports) {
        Ok(())
    } else {
        Err(SwarmError::BadPorts(ports))
    }
}

/// A short sequence of flits: what one aligned set of flits turns into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flits {
    len: usize,
    buf: [Flit; MAX_FLITS],
}

const NO_FLIT: Flit = Flit { header: Header::new(Kind::Weight, 0, 0, 0, 0), payload: 0, last: false };

impl Flits {
    const fn new() -> Self {
        Flits { len: 0, buf: [NO_FLIT; MAX_FLITS] }
    }

    fn push(&mut self, f: Flit) -> Result<(), SwarmError> {
        if self.len == MAX_FLITS {
            return Err(SwarmError::TooManyFlits);
        }
        self.buf[self.len] = f;
        self.len += 1;
        Ok(())
    }

    /// The flits, in the order they leave.
    pub fn as_slice(&self) -> &[Flit] {
        &self.buf[..self.len]
    }
}

/// The header and `last` of the `lane`-th flit a node sends up for an aligned set with header
/// `h` and `last`.
pub const fn out_header(dtype: Dtype, h: Header, last: bool, lane: usize) -> (Header, bool) {
    match dtype {
        Dtype::Bf16 => (h.with_index(h.index.wrapping_mul(2).wrapping_add(lane as u16)), last && lane == 1),
        _ => (h, last),
    }
}

/// What a node sends up for one aligned set of gradient flits: `payloads` holds one payload
/// per port (masked ports' entries are ignored), `header` and `last` those all active ports
/// agreed on.
pub fn node_flit(
    cfg: &NodeConfig,
    header: Header,
    last: bool,
    payloads: &[u32],
) -> Result<Flits, SwarmError> {
    check_ports(cfg.ports)?;
    if payloads.len() != cfg.ports {
        return Err(SwarmError::WrongInputCount { expected: cfg.ports, got: payloads.len() });
    }
    let mut out = Flits::new();
    let mut emit = |lane: usize, payload: u32| {
        let (h, l) = out_header(cfg.dtype, header, last, lane);
        out.push(Flit { header: h, payload, last: l })
    };
    match cfg.dtype {
        Dtype::Fp32 => emit(0, node_lane(cfg, payloads)?)?,
        Dtype::Bf16 | Dtype::Bf16Out => {
            let mut lo = [0u32; MAX_PORTS];
            let mut hi = [0u32; MAX_PORTS];
            for (p, w) in payloads.iter().enumerate() {
                let (l, h) = crate::flit::unpack_bf16(*w);
                lo[p] = fp::bf16_to_f32(l);
                hi[p] = fp::bf16_to_f32(h);
            }
            let s0 = node_lane(cfg, &lo[..cfg.ports])?;
            let s1 = node_lane(cfg, &hi[..cfg.ports])?;
            if cfg.dtype == Dtype::Bf16 {
                emit(0, s0)?;
                emit(1, s1)?;
            } else {
                emit(0, crate::flit::pack_bf16(fp::f32_to_bf16(s0), fp::f32_to_bf16(s1)))?;
            }
        }
    }
    Ok(out)
}

/// A uniform cascade of nodes (module docs, "Cascades").
#[derive(Debug, Clone, Copy)]
pub struct Tree<'a> {
    /// Fan-out of each level, root first.
    pub fanout: &'a [usize],
    /// The configuration of every node, breadth first; `nodes[id].ports` must equal the
    /// fan-out of its level.
    pub nodes: &'a [NodeConfig],
}

impl Tree<'_> {
    /// Leaves (wafers) of the tree.
    pub fn leaves(&self) -> usize {
        self.fanout.iter().product()
    }

    /// Nodes of the tree.
    pub fn node_count(&self) -> usize {
        let mut total = 0;
        let mut width = 1;
        for f in self.fanout {
            total += width;
            width *= f;
        }
        total
    }

    /// The breadth-first id of the `j`-th node (left to right) of `level` (0 is the root).
    pub fn node_id(&self, level: usize, j: usize) -> usize {
        let mut base = 0;
        let mut width = 1;
        for f in &self.fanout[..level] {
            base += width;
            width *= f;
        }
        base + j
    }

    /// What leaves the root for one flit per leaf: `leaves[i]` is the payload of leaf `i`,
    /// all with header `header` and `last`.
    pub fn reduce(&self, header: Header, last: bool, leaves: &[u32]) -> Result<Flits, SwarmError> {
        if self.fanout.is_empty() || self.nodes.len() != self.node_count() {
            return Err(SwarmError::BadTree);
        }
        for (level, f) in self.fanout.iter().enumerate() {
            let width: usize = self.fanout[..level].iter().product();
            for j in 0..width {
                if self.nodes[self.node_id(level, j)].ports != *f {
                    return Err(SwarmError::BadTree);
                }
            }
        }
        if leaves.len() != self.leaves() {
            return Err(SwarmError::WrongInputCount { expected: self.leaves(), got: leaves.len() });
        }
        self.eval(0, 0, header, last, leaves)
    }

    fn eval(
        &self,
        level: usize,
        j: usize,
        header: Header,
        last: bool,
        leaves: &[u32],
    ) -> Result<Flits, SwarmError> {
        let id = self.node_id(level, j);
        let cfg = &self.nodes[id];
        let f = self.fanout[level];
        let mut children = [Flits::new(); MAX_PORTS];
        for (k, child) in children.iter_mut().enumerate().take(f) {
            let i = j * f + k;
            if level + 1 == self.fanout.len() {
                child.push(Flit { header, payload: leaves[i], last })?;
            } else if cfg.is_active(k) {
                *child = self.eval(level + 1, i, header, last, leaves)?;
            }
        }
        let first = (0..f).find(|k| cfg.is_active(*k)).ok_or(SwarmError::NoActivePort { node: id })?;
        let len = children[first].len;
        if (0..f).any(|k| cfg.is_active(k) && children[k].len != len) {
            return Err(SwarmError::Ragged { node: id });
        }
        let mut out = Flits::new();
        for pos in 0..len {
            let mut payloads = [0u32; MAX_PORTS];
            for k in 0..f {
                payloads[k] = children[k].buf[pos].payload;
            }
            let lead = children[first].buf[pos];
            for fl in node_flit(cfg, lead.header, lead.last, &payloads[..f])?.as_slice() {
                out.push(*fl)?;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(x: f32) -> u32 {
        x.to_bits()
    }

    /// The order is observable: 2^24 + 1 + 1 depends on which pair is added first.
    #[test]
    fn order_is_pairwise_with_the_odd_one_passing_through() {
        let big = f(16_777_216.0); // 2^24: +1 is a tie that rounds to even (back to 2^24)
        let one = f(1.0);
        // P = 3: (v0 + v1) + v2.
        assert_eq!(tree_sum(&mut [big, one, one]), f(16_777_216.0));
        assert_eq!(tree_sum(&mut [one, one, big]), f(16_777_218.0));
        // P = 4: (v0 + v1) + (v2 + v3).
        assert_eq!(tree_sum(&mut [big, one, one, one]), f(16_777_218.0));
        // P = 5: ((v0+v1)+(v2+v3)) + v4: the odd value joins last.
        assert_eq!(tree_sum(&mut [one, one, one, one, big]), f(16_777_220.0));
        assert_eq!(tree_sum(&mut [big, one, one, one, one]), f(16_777_220.0), "(2^24 + 2) + 1 ties to even");
        // A sequential left fold would give 2^24 for the last case.
        let seq = [big, one, one, one, one].iter().fold(fp::NEG_ZERO, |a, b| fp::add(a, *b));
        assert_eq!(seq, big);
        assert_eq!(tree_sum(&mut [one]), one);
        assert_eq!(tree_sum(&mut []), fp::NEG_ZERO);
    }

    #[test]
    fn masked_ports_are_negative_zero() {
        let cfg = NodeConfig::new(4).mask(0b0101);
        assert_eq!(node_lane(&cfg, &[f(1.0), 0x7fc0_0001, f(2.0), 0x7f80_0000]).unwrap(), f(3.0));
        // All-negative-zero inputs stay -0; a +0 among them makes +0.
        let all = NodeConfig::new(3);
        assert_eq!(node_lane(&all, &[fp::NEG_ZERO; 3]).unwrap(), fp::NEG_ZERO);
        assert_eq!(node_lane(&all, &[fp::NEG_ZERO, fp::POS_ZERO, fp::NEG_ZERO]).unwrap(), fp::POS_ZERO);
        // One active port: its value, canonicalised if NaN (it still meets an adder).
        let one = NodeConfig::new(2).mask(0b10);
        assert_eq!(node_lane(&one, &[f(5.0), 0xffc0_0042]).unwrap(), fp::CANONICAL_NAN);
        assert_eq!(node_lane(&one, &[f(5.0), fp::POS_ZERO]).unwrap(), fp::POS_ZERO);
    }

    #[test]
    fn scale_and_formats() {
        let cfg = NodeConfig::new(4).scale(f(0.25));
        assert_eq!(node_lane(&cfg, &[f(1.0), f(2.0), f(3.0), f(6.0)]).unwrap(), f(3.0));
        let h = Header::new(Kind::Gradient, 1, 2, 3, 7);
        let p = |a: f32, b: f32| crate::flit::pack_bf16(fp::f32_to_bf16(f(a)), fp::f32_to_bf16(f(b)));
        let bf = NodeConfig::new(2).dtype(Dtype::Bf16);
        let out = node_flit(&bf, h, true, &[p(1.0, -2.0), p(0.5, 4.0)]).unwrap();
        let out = out.as_slice();
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].payload, out[0].header.index, out[0].last), (f(1.5), 14, false));
        assert_eq!((out[1].payload, out[1].header.index, out[1].last), (f(2.0), 15, true));
        let bo = NodeConfig::new(2).dtype(Dtype::Bf16Out);
        let out = node_flit(&bo, h, true, &[p(1.0, -2.0), p(0.5, 4.0)]).unwrap();
        assert_eq!(out.as_slice(), &[Flit { header: h, payload: p(1.5, 2.0), last: true }]);
        assert_eq!(node_lane(&NodeConfig::new(1), &[1]), Err(SwarmError::BadPorts(1)));
        assert!(node_lane(&NodeConfig::new(3), &[1, 2]).is_err());
    }

    #[test]
    fn cascade_nests_the_node_trees() {
        // 2 x 3 = 6 leaves, fp32: (l0+l1)+l2 and (l3+l4)+l5, then their sum.
        let nodes = [NodeConfig::new(2), NodeConfig::new(3), NodeConfig::new(3)];
        let tree = Tree { fanout: &[2, 3], nodes: &nodes };
        assert_eq!((tree.leaves(), tree.node_count(), tree.node_id(1, 1)), (6, 3, 2));
        let big = f(16_777_216.0);
        let one = f(1.0);
        let leaves = [one, one, big, big, one, one];
        let h = Header::new(Kind::Gradient, 0, 0, 0, 0);
        let out = tree.reduce(h, false, &leaves).unwrap();
        let left = fp::add(fp::add(one, one), big);
        let right = fp::add(fp::add(big, one), one);
        assert_eq!(out.as_slice()[0].payload, fp::add(left, right));
        // A flat 6-port node sums in another order and may differ; the tree is what counts.
        // bf16 leaves, inner nodes Bf16Out, root Bf16: two fp32 flits.
        let nodes = [
            NodeConfig::new(2).dtype(Dtype::Bf16),
            NodeConfig::new(3).dtype(Dtype::Bf16Out),
            NodeConfig::new(3).dtype(Dtype::Bf16Out),
        ];
        let tree = Tree { fanout: &[2, 3], nodes: &nodes };
        let b = crate::flit::pack_bf16(0x3f80, 0x4000); // (1.0, 2.0)
        let out = tree.reduce(h, true, &[b; 6]).unwrap();
        let out = out.as_slice();
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].payload, out[1].payload), (f(6.0), f(12.0)));
        assert_eq!((out[0].last, out[1].last), (false, true));
        // Masking a whole subtree at the root.
        let nodes = [NodeConfig::new(2).mask(0b01), NodeConfig::new(3), NodeConfig::new(3)];
        let tree = Tree { fanout: &[2, 3], nodes: &nodes };
        let out = tree.reduce(h, false, &[one, one, one, 0x7f80_0001, 0, 0]).unwrap();
        assert_eq!(out.as_slice()[0].payload, f(3.0));
        // Mismatched configurations are reported, not guessed.
        let bad = [NodeConfig::new(2), NodeConfig::new(3)];
        assert_eq!(Tree { fanout: &[2, 3], nodes: &bad }.reduce(h, false, &leaves), Err(SwarmError::BadTree));
        let ragged = [NodeConfig::new(2), NodeConfig::new(3).dtype(Dtype::Bf16), NodeConfig::new(3)];
        assert_eq!(
            Tree { fanout: &[2, 3], nodes: &ragged }.reduce(h, false, &leaves),
            Err(SwarmError::Ragged { node: 0 })
        );
    }
}
