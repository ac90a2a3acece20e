//! How the wafer mesh is configured (docs/mesh-array.md): the PE instruction words, the SRAM map
//! and program of a whole MLP step, the gradient egress table, and the route tables of the
//! reference dataflow. Allocation-free, so the firmware computes all of it from the shape the
//! host names; the testbenches use the same functions, so what the firmware writes is what
//! the block tests proved.
//!
//! The numbers themselves are [`crate::golden::mesh`]'s business; this module only says
//! where they go.

use crate::golden::mesh::{Layer, StreamLayout};

/// Layers a step can have: the egress table holds [`GSEG`] segments, one of them the metrics.
pub const MAX_STEP_LAYERS: usize = GSEG - 1;
/// Instructions in the longest step program ([`step_program`]): L FWD, LOSS, the metrics GRAD,
/// then per layer from the last DX (above layer 0), GRAD, MASK (above layer 0).
pub const MAX_STEP_PROGRAM: usize = 4 * MAX_STEP_LAYERS;
/// Segments the array's egress table holds (`GSEG` of `ws_mesh`).
pub const GSEG: usize = 8;
/// The layer id of the metrics segment in its headers (the largest 12-bit id, never a layer).
pub const METRICS_ID: u16 = 0xfff;
/// Words of the metrics segment: the loss sum and the correct count.
pub const METRICS_WORDS: u32 = 2;

/// `cfg_pe` of the array's own registers.
pub const TOP_REGS: u8 = 0xfe;
/// `cfg_pe` that writes every PE.
pub const ALL_PES: u8 = 0xff;
/// PE address of CTRL: `(program length << 16) | 1` starts the program.
pub const CFG_CTRL: u16 = 0x0000;
/// PE address of instruction 0's first word (three words per instruction).
pub const CFG_PROG: u16 = 0x1000;
/// PE address of SRAM word 0.
pub const CFG_SRAM: u16 = 0x8000;
/// Top register: the step of the gradient headers; a write restarts the segment table and
/// starts a new step for the timestamps.
pub const REG_STEP: u16 = 0x0000;
/// Top register: segments in the gradient header table.
pub const REG_NSEG: u16 = 0x0001;
/// Top register CHAIN (docs/mesh-array.md "Chained steps"): [`start_word`] arms the array to
/// start every PE at that program itself once the running step ends; a word with bit 0 clear
/// disarms.
pub const REG_CHAIN: u16 = 0x0002;
/// Top register: segment n word w (0 layer id and metrics flag, 1 words per chunk, 2 words of
/// the layer) at `REG_SEG + 4n + w`.
pub const REG_SEG: u16 = 0x0100;
/// Top register: the layer tag of program instruction n at `REG_TAG + n` (n < 16), bits
/// 11:0, which the wafer's phase records carry (docs/trace.md "FMA phases"). Reset:
/// [`TAG_NONE`].
pub const REG_TAG: u16 = 0x0200;
/// The start of a program of `len` instructions from instruction `base` on: a PE's CTRL word
/// (bit 0 start, bits 15:8 base, bits 31:16 length), and the array's CHAIN word (bit 0 arm).
pub const fn start_word(base: u8, len: u16) -> u32 {
    ((len as u32) << 16) | ((base as u32) << 8) | 1
}

/// The instructions a wafer keeps layer tags for.
pub const TAG_SLOTS: usize = 16;
/// The tag of an instruction that belongs to no layer (the metrics reduction), and of one
/// nobody tagged.
pub const TAG_NONE: u16 = 0xfff;

/// Router port north (`ws_mesh_router` numbering).
pub const PORT_N: usize = 0;
/// Router port east.
pub const PORT_E: usize = 1;
/// Router port south.
pub const PORT_S: usize = 2;
/// Router port west.
pub const PORT_W: usize = 3;
/// The router's local port (its PE).
pub const PORT_L: usize = 4;
/// Ports per router.
pub const PORTS: usize = 5;
/// Color of the weight rows.
pub const COLOR_WEIGHTS: usize = 0;
/// Color of the snake reduction.
pub const COLOR_SNAKE: usize = 1;
/// Color of the PEs' results (DUMP), gathered to the metrics egress.
pub const COLOR_RESULTS: usize = 2;
/// Colors of the array's routers.
pub const COLORS: usize = 3;

/// One PE instruction (three 32-bit words, docs/mesh-pe.md "Instructions").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Instr {
    /// M rows of K+1 weight words (bias first) from `s_*`; y of B samples at `dst` (B×M,
    /// sample-major) from x at `src` (B×K).
    Fwd {
        /// ReLU on the outputs.
        relu: bool,
        /// Samples.
        b: u32,
        /// Inputs.
        k: u32,
        /// Outputs.
        m: u32,
        /// Word address of x.
        src: u32,
        /// Word address of y.
        dst: u32,
    },
    /// Sends SRAM words `src .. src + count` on `m_*`.
    Dump {
        /// First word.
        src: u32,
        /// Words.
        count: u32,
    },
    /// The same M rows again (bias words ignored); dx of B samples at `dst` (B×K) from dz at
    /// `src` (B×M): `acc = −0`, `acc = fma(w_ik, dz_si, acc)` over the rows.
    Dx {
        /// Samples.
        b: u32,
        /// Inputs (the width of dx).
        k: u32,
        /// Outputs (rows; the width of dz).
        m: u32,
        /// Word address of dz.
        src: u32,
        /// Word address of dx.
        dst: u32,
    },
    /// The ReLU backward in place: `y[a] = relu_grad(y[a], d[a])` for `a < count`.
    Mask {
        /// Word address of d (the gradient at the ReLU's output).
        src: u32,
        /// Word address of y (the stored outputs, overwritten with dz).
        dst: u32,
        /// Words.
        count: u32,
    },
    /// The PE's part of the Snake reduction of a K→M layer's gradient: M rows of K+1 running
    /// sums in on `s1_*` (none at the head, which starts from −0), each word j of row i
    /// updated by `fma(dz_si, x̃_sj, acc)` for the B slots in order, out on `m1_*`. B = 0
    /// passes the words through.
    Grad {
        /// The head of the snake (snake position 0).
        head: bool,
        /// Samples (0..=MAX_B).
        b: u32,
        /// Inputs (0 for a one-word row: the loss reduction).
        k: u32,
        /// Outputs (rows).
        m: u32,
        /// Word address of x (B×K).
        x: u32,
        /// Word address of dz (B×M).
        dz: u32,
    },
    /// The loss stage (softmax cross-entropy, `golden::mesh::loss::softmax_xent`) of B
    /// samples of C classes, in place: logits at `src` (B×C) become dz, labels (unsigned
    /// integers) at `lab` (B words), each sample's loss and correct flag (1.0 or +0) at
    /// `dst + 2s` and `dst + 2s + 1`.
    Loss {
        /// Samples.
        b: u32,
        /// Classes.
        c: u32,
        /// Word address of the logits (overwritten with dz).
        src: u32,
        /// Word address of the labels.
        lab: u32,
        /// Word address of the (loss, flag) pairs.
        dst: u32,
    },
    /// Three raw words (for testing the checks).
    Raw([u32; 3]),
}

impl Instr {
    /// The three words of the instruction.
    pub fn words(&self) -> [u32; 3] {
        match *self {
            Instr::Fwd { relu, b, k, m, src, dst } => {
                [1 | (u32::from(relu) << 4) | (b << 8), k | (m << 16), src | (dst << 16)]
            }
            Instr::Dump { src, count } => [2, count, src],
            Instr::Dx { b, k, m, src, dst } => [3 | (b << 8), k | (m << 16), src | (dst << 16)],
            Instr::Mask { src, dst, count } => [4, count, src | (dst << 16)],
            Instr::Grad { head, b, k, m, x, dz } => {
                [5 | (u32::from(head) << 4) | (b << 8), k | (m << 16), x | (dz << 16)]
            }
            Instr::Loss { b, c, src, lab, dst } => [6 | (b << 8), c | (lab << 16), src | (dst << 16)],
            Instr::Raw(w) => w,
        }
    }
}

/// Word addresses of one PE's SRAM for B slots of the MLP d_0 … d_L: x (B·d_0), the output of
/// every layer (B·d_(l+1)), a dx scratch (B·max d_1 … d_(L−1)), the labels (B), the (loss,
/// flag) pairs (2B).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepMap {
    /// x.
    pub x: u32,
    /// The output of layer l (the logits for the last, then dz in place); `layers` used.
    pub out: [u32; MAX_STEP_LAYERS],
    /// dx of the layer being walked back.
    pub scratch: u32,
    /// The labels.
    pub labels: u32,
    /// The (loss, flag) pairs.
    pub pairs: u32,
    /// Words used.
    pub words: u32,
    /// The other x buffer ([`StepMap::double`]): where the next step's samples go while this
    /// step runs; `x` itself in a single-buffered map.
    pub x_alt: u32,
    /// The other labels buffer; `labels` itself in a single-buffered map.
    pub labels_alt: u32,
}

impl StepMap {
    /// The map of B slots of the MLP `dims` (2 ..= [`MAX_STEP_LAYERS`] + 1 widths; the caller
    /// checks, see [`check_step`]). Sums saturate, so an absurd shape gives a map too large
    /// for any SRAM rather than a wrapped one.
    pub fn new(dims: &[usize], b: usize) -> Self {
        let mul = |a: usize, d: usize| u32::try_from(a.saturating_mul(d)).unwrap_or(u32::MAX);
        let mut at = mul(b, dims.first().copied().unwrap_or(0));
        let mut out = [0u32; MAX_STEP_LAYERS];
        for (o, d) in out.iter_mut().zip(dims.iter().skip(1)) {
            *o = at;
            at = at.saturating_add(mul(b, *d));
        }
        let hidden = dims.get(1..dims.len().saturating_sub(1)).unwrap_or(&[]);
        let scratch = at;
        at = at.saturating_add(mul(b, hidden.iter().copied().max().unwrap_or(0)));
        let labels = at;
        let pairs = labels.saturating_add(mul(b, 1));
        let words = pairs.saturating_add(mul(b, 2));
        StepMap { x: 0, out, scratch, labels, pairs, words, x_alt: 0, labels_alt: labels }
    }

    /// [`StepMap::new`] with a second x and labels buffer after the rest, so the next step's
    /// samples can be written while a step runs on this one (docs/mesh-pe.md "Samples while
    /// running"); [`StepMap::flipped`] is the map of the next step.
    pub fn double(dims: &[usize], b: usize) -> Self {
        let mut m = Self::new(dims, b);
        let x = u32::try_from(b.saturating_mul(dims.first().copied().unwrap_or(0))).unwrap_or(u32::MAX);
        m.x_alt = m.words;
        m.labels_alt = m.x_alt.saturating_add(x);
        m.words = m.labels_alt.saturating_add(u32::try_from(b).unwrap_or(u32::MAX));
        m
    }

    /// The same map with the two sample buffers swapped: the next step's.
    pub fn flipped(&self) -> Self {
        StepMap { x: self.x_alt, x_alt: self.x, labels: self.labels_alt, labels_alt: self.labels, ..*self }
    }

    /// The map has two sample buffers.
    pub fn doubled(&self) -> bool {
        self.x != self.x_alt
    }
}

/// A fixed-capacity program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Program {
    instrs: [Instr; MAX_STEP_PROGRAM],
    tags: [u16; MAX_STEP_PROGRAM],
    len: usize,
}

impl Program {
    fn push(&mut self, i: Instr, tag: u16) {
        if let (Some(slot), Some(t)) = (self.instrs.get_mut(self.len), self.tags.get_mut(self.len)) {
            *slot = i;
            *t = tag;
            self.len += 1;
        }
    }

    /// The instructions.
    pub fn as_slice(&self) -> &[Instr] {
        &self.instrs[..self.len]
    }

    /// Each instruction's layer tag ([`REG_TAG`]): the layer it computes, [`TAG_NONE`] for
    /// the metrics reduction. The wafer's phase records carry it, so a trace names layers
    /// without knowing the program.
    pub fn tags(&self) -> &[u16] {
        &self.tags[..self.len]
    }
}

/// One PE's program for a step: FWD every layer (ReLU but the last), LOSS, the metrics
/// reduction (GRAD with K = 0, M = 2 over the pairs), then from the last layer down: above
/// layer 0 DX (the layer's weights in, dx into the scratch), GRAD (the layer's dW/db along the
/// snake), and above layer 0 MASK (dz of the layer below in place of its output). `slots` ≥ 1 runs the per-sample instructions (an empty PE runs one
/// junk slot, which must still take every weight word), `samples` is what the reductions add.
pub fn step_program(dims: &[usize], map: &StepMap, slots: usize, samples: usize, head: bool) -> Program {
    let mut prog = Program {
        instrs: [Instr::Raw([0; 3]); MAX_STEP_PROGRAM],
        tags: [TAG_NONE; MAX_STEP_PROGRAM],
        len: 0,
    };
    let layers = dims.len().saturating_sub(1).min(MAX_STEP_LAYERS);
    if layers == 0 {
        return prog;
    }
    let (b, n) = (slots as u32, samples as u32);
    let dim = |l: usize| dims[l] as u32;
    for l in 0..layers {
        let src = if l == 0 { map.x } else { map.out[l - 1] };
        prog.push(
            Instr::Fwd { relu: l + 1 < layers, b, k: dim(l), m: dim(l + 1), src, dst: map.out[l] },
            l as u16,
        );
    }
    let c = dim(layers);
    prog.push(
        Instr::Loss { b, c, src: map.out[layers - 1], lab: map.labels, dst: map.pairs },
        layers as u16 - 1,
    );
    prog.push(Instr::Grad { head, b: n, k: 0, m: METRICS_WORDS, x: 0, dz: map.pairs }, TAG_NONE);
    // Each layer takes its weights (DX) before it sends its gradients (GRAD), so a weight
    // store that updates a layer as its gradients arrive has already streamed that layer's
    // old weights (docs/mesh-array.md "Weights from the store"); MASK overwrites the layer's
    // input activations, which GRAD reads, so it comes last.
    for l in (0..layers).rev() {
        let (k, m) = (dim(l), dim(l + 1));
        let x = if l == 0 { map.x } else { map.out[l - 1] };
        if l > 0 {
            prog.push(Instr::Dx { b, k, m, src: map.out[l], dst: map.scratch }, l as u16);
        }
        prog.push(Instr::Grad { head, b: n, k, m, x, dz: map.out[l] }, l as u16);
        if l > 0 {
            prog.push(Instr::Mask { src: map.scratch, dst: map.out[l - 1], count: b * k }, l as u16 - 1);
        }
    }
    prog
}

/// One PE's program for held-out evaluation: the first L + 2 instructions of
/// [`step_program`] (FWD every layer, LOSS, the metrics reduction), so the loss sum and the
/// correct count are the bits a training step on the same weights and samples reports. The
/// weight ingress carries layers 0 … L−1 once; nothing leaves on the gradient egress.
pub fn eval_program(dims: &[usize], map: &StepMap, slots: usize, samples: usize, head: bool) -> Program {
    let mut prog = step_program(dims, map, slots, samples, head);
    let layers = dims.len().saturating_sub(1).min(MAX_STEP_LAYERS);
    prog.len = prog.len.min(layers + 2);
    prog
}

/// One layer of the gradient egress stream, in egress order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// The layer id in the headers.
    pub layer: u16,
    /// Words per full chunk (rows per chunk × (K + 1)).
    pub chunk_words: u32,
    /// Words of the layer (M × (K + 1)).
    pub words: u32,
    /// The words leave on the metrics egress `m_m_*` instead of the gradient egress.
    pub metrics: bool,
}

impl Segment {
    /// Layer `id` of shape `layer` cut by `stream`.
    pub fn new(id: usize, layer: Layer, stream: StreamLayout) -> Self {
        let words = layer.words().unwrap_or(0);
        let chunk_words = stream.rows_per_chunk.saturating_mul(layer.row_words()).min(words);
        Segment { layer: id as u16, chunk_words: chunk_words as u32, words: words as u32, metrics: false }
    }

    /// A metrics segment of `words` words in one chunk, with layer id `id` in its headers:
    /// the step's loss sum and correct count (`Instr::Grad` with K = 0, M = 2).
    pub fn metrics(id: u16, words: u32) -> Self {
        Segment { layer: id, chunk_words: words, words, metrics: true }
    }

    /// The three words of its table entry (`REG_SEG + 4n + 0..3`).
    pub fn words(&self) -> [u32; 3] {
        [u32::from(self.layer) | (u32::from(self.metrics) << 16), self.chunk_words, self.words]
    }
}

/// The egress table of a whole step of the MLP `dims`: the metrics, then every layer's
/// gradient, last layer first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepSegments {
    segs: [Segment; GSEG],
    len: usize,
}

impl StepSegments {
    /// The table for `dims` (at most [`MAX_STEP_LAYERS`] layers are taken) cut by `stream`.
    pub fn new(dims: &[usize], stream: StreamLayout) -> Self {
        let blank = Segment::metrics(METRICS_ID, METRICS_WORDS);
        let mut t = StepSegments { segs: [blank; GSEG], len: 1 };
        let layers = dims.len().saturating_sub(1).min(MAX_STEP_LAYERS);
        for l in (0..layers).rev() {
            t.segs[t.len] = Segment::new(l, Layer::new(dims[l], dims[l + 1]), stream);
            t.len += 1;
        }
        t
    }

    /// The segments, in egress order.
    pub fn as_slice(&self) -> &[Segment] {
        &self.segs[..self.len]
    }
}

/// Why a step shape does not fit the array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// Fewer than one or more than [`MAX_STEP_LAYERS`] layers.
    #[error("{0} layers: a step has 1 to 7 (the egress table holds 8 segments, one is the metrics)")]
    Layers(usize),
    /// A width of 0 or past the instruction fields (16 bits), or a batch per PE of 0 or past
    /// the PE's slots.
    #[error("width {0} out of range: each layer width must be 1 to 65535")]
    Width(usize),
    /// Batch per PE of 0 or past MAX_B.
    #[error("batch per PE {b}: the PEs hold 1 to {max} samples each")]
    Batch {
        /// Asked.
        b: usize,
        /// The PEs' MAX_B.
        max: usize,
    },
    /// The step's SRAM map does not fit a PE's SRAM.
    #[error("the step needs {need} SRAM words per PE and a PE has {have}: use a smaller batch per PE or narrower layers")]
    Sram {
        /// Words of the map.
        need: u32,
        /// Words of a PE.
        have: u32,
    },
    /// The program does not fit the PE's program memory.
    #[error("the step program has {need} instructions and a PE holds {have}: use fewer layers")]
    Program {
        /// Instructions.
        need: usize,
        /// PROG_DEPTH.
        have: usize,
    },
    /// Rows per chunk of 0.
    #[error("rows per chunk must be at least 1")]
    Chunk,
}

/// Checks a step shape against the array's build parameters: 1..=[`MAX_STEP_LAYERS`] layers,
/// widths that fit the 16-bit instruction fields, B within the PEs' slots, the SRAM map within
/// a PE's SRAM (which also keeps every address within the 16-bit fields), and the program
/// within PROG_DEPTH. Returns the map.
pub fn check_step(
    dims: &[usize],
    b: usize,
    rows_per_chunk: usize,
    max_b: usize,
    sram_words: u32,
    prog_depth: usize,
) -> Result<StepMap, StepError> {
    let layers = dims.len().saturating_sub(1);
    if !(1..=MAX_STEP_LAYERS).contains(&layers) {
        return Err(StepError::Layers(layers));
    }
    if let Some(&d) = dims.iter().find(|&&d| !(1..=0xffff).contains(&d)) {
        return Err(StepError::Width(d));
    }
    if b == 0 || b > max_b {
        return Err(StepError::Batch { b, max: max_b });
    }
    if rows_per_chunk == 0 {
        return Err(StepError::Chunk);
    }
    let map = StepMap::new(dims, b);
    if map.words > sram_words || map.words > 0x1_0000 {
        return Err(StepError::Sram { need: map.words, have: sram_words });
    }
    let need = step_program(dims, &map, b, b, false).as_slice().len();
    if need > prog_depth {
        return Err(StepError::Program { need, have: prog_depth });
    }
    Ok(map)
}

/// The router of snake position `pos` on a `rows` × `cols` array (docs/mesh.md "PEs and the
/// snake"): row-major, every odd row walked east to west.
pub const fn snake_router(cols: usize, pos: usize) -> usize {
    let (y, i) = (pos / cols, pos % cols);
    let x = if y % 2 == 0 { i } else { cols - 1 - i };
    y * cols + x
}

/// The snake position of router `r` (the inverse of [`snake_router`]).
pub const fn snake_pos(cols: usize, r: usize) -> usize {
    let (y, x) = (r / cols, r % cols);
    y * cols + if y % 2 == 0 { x } else { cols - 1 - x }
}

/// The router across link port `port` of router `r`, if it is inside the array.
const fn neighbour(rows: usize, cols: usize, r: usize, port: usize) -> Option<usize> {
    let (y, x) = (r / cols, r % cols);
    match port {
        PORT_N if y > 0 => Some(r - cols),
        PORT_E if x + 1 < cols => Some(r + 1),
        PORT_S if y + 1 < rows => Some(r + cols),
        PORT_W if x > 0 => Some(r - 1),
        _ => None,
    }
}

const fn opposite(port: usize) -> usize {
    (port + 2) % 4
}

const fn bit(port: usize) -> u8 {
    1 << port
}

/// One route-table entry of the reference dataflow, as the ROUTE register takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Router index.
    pub router: usize,
    /// Input port.
    pub in_port: usize,
    /// Color.
    pub color: usize,
    /// Output ports that get a copy (bit p = port p); 0 drops.
    pub mask: u8,
    /// 0: a round-robin input; n > 0: n whole packets per turn of an ordered merge.
    pub quota: u32,
}

impl Route {
    /// The ROUTE register word: mask in bits 7..0, quota 15..8, color 17..16, input port
    /// 20..18, router 31..24.
    pub const fn word(&self) -> u32 {
        self.mask as u32
            | (self.quota << 8)
            | ((self.color as u32) << 16)
            | ((self.in_port as u32) << 18)
            | ((self.router as u32) << 24)
    }
}

/// The port of router `r` the snake leaves it by: toward the next snake router, or south out
/// of the array at the last one (the gradient egress).
fn snake_out(rows: usize, cols: usize, r: usize) -> usize {
    let pos = snake_pos(cols, r);
    if pos + 1 >= rows * cols {
        return PORT_S;
    }
    let next = snake_router(cols, pos + 1);
    let mut port = 0;
    while port < 4 {
        if let Some(n) = neighbour(rows, cols, r, port) {
            if n == next {
                return port;
            }
        }
        port += 1;
    }
    PORT_S
}

/// The route entry (router `r`, input `in_port`, `color`) of the reference dataflow on a
/// `rows` × `cols` array (docs/mesh-array.md "Routes"):
///
/// - color 0, the weights: a broadcast from the west edge of router 0 along row 0, then down
///   every column; every router keeps a copy for its PE;
/// - color 1, the snake: each PE's local output to the next snake PE's local input, the last
///   one's out of its south edge (the gradient egress);
/// - color 2, the results: a gather along each row eastward, then down the east column to
///   the east edge of the last router (the metrics egress), every merge ordered with the
///   quota of the sources behind each input, so each round leaves in router-index order.
pub fn route(rows: usize, cols: usize, r: usize, in_port: usize, color: usize) -> Route {
    let (y, x) = (r / cols, r % cols);
    let mut e = Route { router: r, in_port, color, mask: 0, quota: 0 };
    match color {
        COLOR_WEIGHTS => {
            let input = if y == 0 { PORT_W } else { PORT_N };
            if in_port == input {
                e.mask = bit(PORT_L);
                if y == 0 && x + 1 < cols {
                    e.mask |= bit(PORT_E);
                }
                if y + 1 < rows {
                    e.mask |= bit(PORT_S);
                }
            }
        }
        COLOR_SNAKE => {
            if in_port == PORT_L {
                e.mask = bit(snake_out(rows, cols, r));
            } else if let Some(m) = neighbour(rows, cols, r, in_port) {
                if snake_out(rows, cols, m) == opposite(in_port) {
                    e.mask = bit(PORT_L);
                }
            }
        }
        COLOR_RESULTS => {
            let last_col = x + 1 == cols;
            let out = if !last_col {
                PORT_E
            } else if y + 1 < rows {
                PORT_S
            } else {
                PORT_E
            };
            // The sources behind each input: 1 for the PE, x for the row to the west, y·Q for
            // the rows above (only the last column takes the north input).
            let behind = match in_port {
                PORT_L => Some(1),
                PORT_W if x > 0 => Some(x),
                PORT_N if last_col && y > 0 => Some(y * cols),
                _ => None,
            };
            if let Some(n) = behind {
                e.mask = bit(out);
                let inputs = 1 + usize::from(x > 0) + usize::from(last_col && y > 0);
                if inputs >= 2 {
                    e.quota = n as u32;
                }
            }
        }
        _ => {}
    }
    e
}

/// Every entry of the reference dataflow's route tables, router by router, input by input,
/// color by color (what the ROUTE register must be written with, empty entries included so
/// that a table left from an earlier configuration is cleared).
pub fn routes(rows: usize, cols: usize) -> impl Iterator<Item = Route> {
    (0..rows * cols)
        .flat_map(move |r| (0..PORTS).flat_map(move |p| (0..COLORS).map(move |c| route(rows, cols, r, p, c))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_snake_walks_every_router_once_between_neighbours() {
        for (rows, cols) in [(1, 1), (1, 4), (3, 1), (2, 2), (3, 5), (8, 8)] {
            let mut seen = [false; 64];
            for pos in 0..rows * cols {
                let r = snake_router(cols, pos);
                assert_eq!(snake_pos(cols, r), pos);
                assert!(!core::mem::replace(&mut seen[r], true));
                let out = snake_out(rows, cols, r);
                if pos + 1 < rows * cols {
                    assert_eq!(neighbour(rows, cols, r, out), Some(snake_router(cols, pos + 1)));
                }
            }
        }
    }

    #[test]
    fn a_double_map_adds_a_second_sample_buffer_past_the_rest() {
        let dims = [64, 32, 10];
        let (one, two) = (StepMap::new(&dims, 4), StepMap::double(&dims, 4));
        assert!(!one.doubled() && two.doubled());
        assert_eq!((two.x, two.labels, two.out, two.pairs), (one.x, one.labels, one.out, one.pairs));
        assert_eq!((two.x_alt, two.labels_alt, two.words), (one.words, one.words + 256, one.words + 260));
        let f = two.flipped();
        assert_eq!((f.x, f.labels, f.x_alt, f.labels_alt), (two.x_alt, two.labels_alt, two.x, two.labels));
        assert_eq!(f.flipped(), two);
        // The other buffer overlaps nothing a step uses.
        assert!(one.words <= two.x_alt);
    }

    #[test]
    fn step_program_tags_name_each_instruction_s_layer() {
        let dims = [64, 32, 16, 10];
        let prog = step_program(&dims, &StepMap::new(&dims, 4), 4, 4, true);
        let mut ops = [(0u32, 0u16); 12];
        assert_eq!(prog.as_slice().len(), ops.len());
        for (o, (i, t)) in ops.iter_mut().zip(prog.as_slice().iter().zip(prog.tags())) {
            *o = (i.words()[0] & 0xf, *t);
        }
        #[rustfmt::skip]
        assert_eq!(ops, [
            (1, 0), (1, 1), (1, 2), (6, 2), (5, TAG_NONE),
            (3, 2), (5, 2), (4, 1), (3, 1), (5, 1), (4, 0), (5, 0),
        ]);
        let eval = eval_program(&dims, &StepMap::new(&dims, 4), 4, 4, true);
        assert_eq!(eval.tags(), &prog.tags()[..5]);
    }

    #[test]
    fn a_step_map_and_program_fit_the_shape() {
        let dims = [64, 128, 64, 10];
        let map = StepMap::new(&dims, 4);
        assert_eq!((map.out[0], map.out[1], map.out[2]), (256, 768, 1024));
        assert_eq!((map.scratch, map.labels, map.pairs, map.words), (1064, 1576, 1580, 1588));
        let p = step_program(&dims, &map, 4, 3, true);
        assert_eq!(p.as_slice().len(), 3 + 2 + 3 + 2 * 2);
        let e = eval_program(&dims, &map, 4, 3, true);
        assert_eq!(e.as_slice(), &p.as_slice()[..5], "the forward, the loss and the metrics");
        assert!(matches!(e.as_slice()[4], Instr::Grad { k: 0, m: METRICS_WORDS, .. }));
        assert_eq!(check_step(&dims, 4, 2, 8, 4096, 16), Ok(map));
        assert_eq!(check_step(&dims, 4, 2, 8, 1024, 16), Err(StepError::Sram { need: 1588, have: 1024 }));
        assert_eq!(check_step(&dims, 9, 2, 8, 4096, 16), Err(StepError::Batch { b: 9, max: 8 }));
        assert_eq!(check_step(&dims[..1], 4, 2, 8, 4096, 16), Err(StepError::Layers(0)));
        assert_eq!(check_step(&[4, 0, 2], 1, 2, 8, 4096, 16), Err(StepError::Width(0)));
        assert_eq!(check_step(&dims, 4, 2, 8, 4096, 8), Err(StepError::Program { need: 12, have: 8 }));
        let segs = StepSegments::new(&dims, StreamLayout { rows_per_chunk: 2 });
        let ids: [u16; 4] = core::array::from_fn(|i| segs.as_slice()[i].layer);
        assert_eq!(ids, [METRICS_ID, 2, 1, 0]);
        assert_eq!(segs.as_slice()[1].words, 10 * 65);
        assert_eq!(segs.as_slice()[1].chunk_words, 2 * 65);
    }
}
