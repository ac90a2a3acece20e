//! A cycle-level model of a SwarmX tree, for trees far larger than the simulator can run.
//!
//! The model follows the RTL's micro-architecture register by register, but moves tokens
//! instead of values:
//!
//! - every FIFO is a `ws_fifo`: `s_ready` is "level < depth", a word pushed in cycle t is at
//!   the head in cycle t + 2 (the registered read), one word in and one out per cycle;
//! - each node has a skid FIFO per port and direction, the aligner that fires when every
//!   active port has a head and the output FIFO has credit, a fixed pipeline of
//!   [`NodeParams::pipe_latency`] cycles, and the output FIFO of the RTL's depth
//!   (`1 << clog2(latency + 4)`);
//! - all readies depend on registered state only, so each cycle first computes every
//!   handshake from the current state, then updates every register, as the hardware does.
//!
//! It is calibrated against the Verilated RTL cascade at 4, 8 and 16 leaves by
//! [`crate::bench::swarm`], which reports the difference in cycles, and then predicts 64, 128
//! and 192 leaves.

use std::collections::VecDeque;

use super::{NodeParams, TreeShape};

/// A `ws_fifo` of tokens.
#[derive(Debug, Clone)]
struct Fifo {
    depth: usize,
    mem: VecDeque<Token>,
    out: Option<Token>,
    level: usize,
}

/// What travels: the flit's sequence number and the cycle its last contributor was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Token {
    seq: u64,
    born: u64,
}

impl Fifo {
    fn new(depth: usize) -> Self {
        Fifo { depth, mem: VecDeque::new(), out: None, level: 0 }
    }

    fn ready(&self) -> bool {
        self.level < self.depth
    }

    fn head(&self) -> Option<Token> {
        self.out
    }

    /// The clock edge: `push` (taken only if ready was high), `pop` of the head.
    fn edge(&mut self, push: Option<Token>, pop: bool) {
        let had_mem = !self.mem.is_empty();
        let popped = pop && self.out.is_some();
        let fill = had_mem && (self.out.is_none() || popped);
        if popped {
            self.out = None;
        }
        if fill {
            self.out = self.mem.pop_front();
        }
        if let Some(t) = push {
            self.mem.push_back(t);
        }
        self.level = self.level + push.is_some() as usize - popped as usize;
    }
}

#[derive(Debug, Clone)]
struct Node {
    params: NodeParams,
    up_fifos: Vec<Fifo>,
    dn_fifos: Vec<Fifo>,
    /// Entries in the pipeline: the cycle they reach the output FIFO, and the token.
    pipe: VecDeque<(u64, Token)>,
    out: Fifo,
    out_depth: usize,
}

impl Node {
    fn new(params: NodeParams) -> Self {
        let n = params.ports as usize;
        let lat = params.pipe_latency() as usize;
        let out_depth = (lat + 4).next_power_of_two();
        let skid = params.skid_depth as usize;
        Node {
            params,
            up_fifos: (0..n).map(|_| Fifo::new(skid)).collect(),
            dn_fifos: (0..n).map(|_| Fifo::new(skid)).collect(),
            pipe: VecDeque::new(),
            out: Fifo::new(out_depth),
            out_depth,
        }
    }

    fn can_fire(&self) -> bool {
        self.up_fifos.iter().all(|f| f.head().is_some()) && self.out.level + self.pipe.len() < self.out_depth
    }

    fn dn_ready(&self) -> bool {
        self.dn_fifos.iter().all(Fifo::ready)
    }
}

/// What one run of the model measured. Cycles count from the first cycle of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Timing {
    /// Flits per leaf (uplink) or from the root (downlink).
    pub flits: u64,
    /// Cycle of the first flit's handshake at the far end (root `m_up` or every leaf).
    pub first_out: u64,
    /// Cycle of the last flit's handshake at the far end.
    pub last_out: u64,
    /// Cycles from the handshake of a flit's last contributor (uplink: the last leaf; downlink:
    /// the root) to the far end's handshake of its first result flit: the first flit's value.
    pub latency_first: u64,
    /// The largest such latency over all flits.
    pub latency_max: u64,
}

impl Timing {
    /// Flits per cycle from the first to the last handshake at the far end.
    pub fn flits_per_cycle(&self) -> f64 {
        if self.flits <= 1 {
            return 1.0;
        }
        (self.flits - 1) as f64 / (self.last_out - self.first_out).max(1) as f64
    }
}

/// A tree of nodes as the model runs it.
#[derive(Debug, Clone)]
pub struct TreeModel {
    shape: TreeShape,
    nodes: Vec<Node>,
    /// Breadth-first id of the first node of each level.
    level_first: Vec<usize>,
}

impl TreeModel {
    /// A fresh (reset) tree of `shape`.
    pub fn new(shape: &TreeShape) -> Self {
        let mut nodes = Vec::new();
        let mut level_first = Vec::new();
        let mut width = 1usize;
        for p in &shape.levels {
            level_first.push(nodes.len());
            for _ in 0..width {
                nodes.push(Node::new(*p));
            }
            width *= p.ports as usize;
        }
        TreeModel { shape: shape.clone(), nodes, level_first }
    }

    /// The id of child `c` of node `id` at `level`, if `level` is not the last.
    fn child(&self, level: usize, id: usize, c: usize) -> Option<usize> {
        if level + 1 == self.shape.levels.len() {
            return None;
        }
        let j = id - self.level_first[level];
        Some(self.level_first[level + 1] + j * self.shape.levels[level].ports as usize + c)
    }

    fn level_of(&self, id: usize) -> usize {
        self.level_first.iter().rposition(|&f| f <= id).unwrap_or(0)
    }

    /// The uplink: every leaf offers `flits` gradient flits from cycle 0, always valid; the
    /// root's `m_up` is always ready.
    // Several per-node arrays are read and written by node id and port in one pass.
    #[allow(clippy::needless_range_loop)]
    pub fn reduce(shape: &TreeShape, flits: u64) -> Timing {
        let mut m = TreeModel::new(shape);
        let leaves = shape.leaves();
        let last_level = shape.levels.len() - 1;
        let leaf_fan = shape.levels[last_level].ports as usize;
        let mut sent = vec![0u64; leaves];
        let mut t = Timing { flits, ..Default::default() };
        let mut got = 0u64;
        let mut cycle = 0u64;
        while got < flits {
            // ---- handshakes, from registered state only
            let n = m.nodes.len();
            let fires: Vec<bool> = m.nodes.iter().map(Node::can_fire).collect();
            // Whether each node's output FIFO head is taken this cycle.
            let mut out_pop = vec![false; n];
            let mut up_push: Vec<Vec<Option<Token>>> =
                m.nodes.iter().map(|nd| vec![None; nd.params.ports as usize]).collect();
            for id in 0..n {
                let level = m.level_of(id);
                if id == 0 {
                    if let Some(tok) = m.nodes[0].out.head() {
                        out_pop[0] = true;
                        if got == 0 {
                            t.first_out = cycle;
                            t.latency_first = cycle - tok.born;
                        }
                        t.latency_max = t.latency_max.max(cycle - tok.born);
                        t.last_out = cycle;
                        got += 1;
                    }
                }
                for c in 0..m.nodes[id].params.ports as usize {
                    match m.child(level, id, c) {
                        Some(ch) => {
                            if let Some(tok) = m.nodes[ch].out.head() {
                                if m.nodes[id].up_fifos[c].ready() {
                                    out_pop[ch] = true;
                                    up_push[id][c] = Some(tok);
                                }
                            }
                        }
                        None => {
                            let leaf = (id - m.level_first[last_level]) * leaf_fan + c;
                            if sent[leaf] < flits && m.nodes[id].up_fifos[c].ready() {
                                up_push[id][c] = Some(Token { seq: sent[leaf], born: cycle });
                                sent[leaf] += 1;
                            }
                        }
                    }
                }
            }
            // ---- the edge
            for id in 0..n {
                let fire = fires[id];
                let node = &mut m.nodes[id];
                let mut fired: Option<Token> = None;
                if fire {
                    let seq = node.up_fifos[0].head().map(|h| h.seq).unwrap_or(0);
                    let born =
                        node.up_fifos.iter().filter_map(|f| f.head()).map(|h| h.born).max().unwrap_or(0);
                    fired = Some(Token { seq, born });
                }
                for (c, f) in node.up_fifos.iter_mut().enumerate() {
                    f.edge(up_push[id][c], fire);
                }
                let arrive = if node.pipe.front().is_some_and(|(at, _)| *at == cycle) {
                    node.pipe.pop_front().map(|(_, tok)| tok)
                } else {
                    None
                };
                node.out.edge(arrive, out_pop[id]);
                if let Some(tok) = fired {
                    node.pipe.push_back((cycle + u64::from(node.params.pipe_latency()), tok));
                }
            }
            cycle += 1;
            assert!(cycle < 100 * flits + 10_000, "model deadlocked");
        }
        // `born` of a leaf token is the cycle its own leaf sent it and each aligner keeps the
        // newest of its inputs, so at the root it is the last leaf's handshake.
        t
    }

    /// The downlink: the root's `s_up` offers `flits` weight flits from cycle 0, always
    /// valid; every leaf is always ready. Times are those of the last leaf to get each flit.
    #[allow(clippy::needless_range_loop)]
    pub fn broadcast(shape: &TreeShape, flits: u64) -> Timing {
        let mut m = TreeModel::new(shape);
        let leaves = shape.leaves();
        let last_level = shape.levels.len() - 1;
        let leaf_fan = shape.levels[last_level].ports as usize;
        let mut sent = 0u64;
        let mut sent_at = vec![0u64; flits as usize];
        let mut delivered = vec![0u64; leaves];
        let mut done_at = vec![0u64; flits as usize];
        let mut t = Timing { flits, ..Default::default() };
        let mut cycle = 0u64;
        while delivered.iter().any(|d| *d < flits) {
            let n = m.nodes.len();
            let ready: Vec<bool> = m.nodes.iter().map(Node::dn_ready).collect();
            let mut push: Vec<Option<Token>> = vec![None; n];
            let mut pops: Vec<Vec<bool>> =
                m.nodes.iter().map(|nd| vec![false; nd.params.ports as usize]).collect();
            if sent < flits && ready[0] {
                push[0] = Some(Token { seq: sent, born: cycle });
                sent_at[sent as usize] = cycle;
                sent += 1;
            }
            for id in 0..n {
                let level = m.level_of(id);
                for c in 0..m.nodes[id].params.ports as usize {
                    let Some(tok) = m.nodes[id].dn_fifos[c].head() else { continue };
                    match m.child(level, id, c) {
                        Some(ch) => {
                            if ready[ch] {
                                pops[id][c] = true;
                                push[ch] = Some(tok);
                            }
                        }
                        None => {
                            pops[id][c] = true;
                            let leaf = (id - m.level_first[last_level]) * leaf_fan + c;
                            delivered[leaf] += 1;
                            let s = tok.seq as usize;
                            done_at[s] = done_at[s].max(cycle);
                        }
                    }
                }
            }
            for (id, node) in m.nodes.iter_mut().enumerate() {
                for (c, f) in node.dn_fifos.iter_mut().enumerate() {
                    f.edge(push[id], pops[id][c]);
                }
            }
            cycle += 1;
            assert!(cycle < 100 * flits + 10_000, "model deadlocked");
        }
        t.first_out = done_at[0];
        t.last_out = done_at[flits as usize - 1];
        t.latency_first = done_at[0] - sent_at[0];
        t.latency_max = done_at.iter().zip(&sent_at).map(|(d, s)| d - s).max().unwrap_or(0);
        t
    }
}

/// Per-wafer traffic of one training step: SwarmX against a ring all-reduce.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct StepTraffic {
    /// Wafers.
    pub wafers: usize,
    /// Bytes of gradients (and of weights) per step, `S`.
    pub model_bytes: f64,
    /// SwarmX: bytes each wafer sends per step (its gradients, once; half in bf16).
    pub swarm_sent: f64,
    /// SwarmX: bytes each wafer receives per step (the weights, streamed for the forward and
    /// again for the backward pass).
    pub swarm_received: f64,
    /// Ring all-reduce: bytes each endpoint sends, and receives, per step, 2(N−1)/N·S.
    pub ring_per_direction: f64,
}

impl StepTraffic {
    /// The figures for `wafers` wafers and `model_bytes` of fp32 gradients (`bf16`: the
    /// gradients go up as bf16).
    pub fn new(wafers: usize, model_bytes: f64, bf16: bool) -> Self {
        let n = wafers as f64;
        StepTraffic {
            wafers,
            model_bytes,
            swarm_sent: if bf16 { model_bytes / 2.0 } else { model_bytes },
            swarm_received: 2.0 * model_bytes,
            ring_per_direction: 2.0 * (n - 1.0) / n * model_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_has_the_two_cycle_latency_of_ws_fifo() {
        let mut f = Fifo::new(4);
        f.edge(Some(Token { seq: 1, born: 0 }), false); // pushed in cycle 0
        assert_eq!(f.head(), None); // cycle 1
        f.edge(None, false);
        assert_eq!(f.head().map(|t| t.seq), Some(1)); // cycle 2
        for s in 2..5 {
            f.edge(Some(Token { seq: s, born: 0 }), false);
        }
        assert_eq!(f.level, 4);
        assert!(!f.ready());
    }

    #[test]
    fn one_node_runs_at_full_rate_with_the_pipeline_latency() {
        let p = NodeParams::new(4);
        let t = TreeModel::reduce(&TreeShape::node(p), 1000);
        // Leaf handshake in cycle 0, head in 2, fire in 2, push at the edge of 2 + L, head of
        // the output FIFO and handshake in 4 + L.
        assert_eq!(t.latency_first, u64::from(p.pipe_latency()) + 4);
        assert_eq!(t.last_out - t.first_out, 999);
        let d = TreeModel::broadcast(&TreeShape::node(p), 1000);
        assert_eq!(d.latency_first, 2);
        assert_eq!(d.last_out - d.first_out, 999);
    }

    #[test]
    fn cascades_add_a_node_latency_per_level() {
        let one = TreeModel::reduce(&TreeShape::cascade(&[4]), 100);
        let two = TreeModel::reduce(&TreeShape::cascade(&[4, 4]), 100);
        let inner = NodeParams::new(4).no_scale();
        assert_eq!(two.latency_first, one.latency_first + u64::from(inner.pipe_latency()) + 4);
        let t192 = TreeModel::reduce(&TreeShape::cascade(&[3, 4, 4, 4]), 200);
        assert_eq!(t192.last_out - t192.first_out, 199);
    }

    #[test]
    fn traffic_against_the_ring() {
        let t = StepTraffic::new(192, 1e9, false);
        assert!((t.ring_per_direction - 2.0 * 191.0 / 192.0 * 1e9).abs() < 1.0);
        assert_eq!(t.swarm_sent, 1e9);
    }
}
