//! MemoryX's weight store and streamer on the host: the RTL file list and block spec of
//! `ws_mx_sim_top` (the streamer `ws_mx_streamer` with the simulation store
//! `ws_mx_mem_model` behind its AXI4 port), the local register map of `ws_mx_layers`, and
//! a cycle-level testbench ([`Mx`]) with the reference model the tests and figures share.
//!
//! [`Mx`] drives every stream of the block at once, one [`Mx::step`] per clock: gradient
//! beats from a queue with a random `valid` pattern, random `ready` on the weight-out and
//! trace streams, random or duty-cycle stalls of the store, and register accesses and the
//! store's backdoor in the same cycle loop, so no handshake goes unseen. Weight-out beats
//! are checked against expected chunks (a chunk is atomic on the wire, chunks may arrive in
//! any order), and the sink checks the handshake rule (valid held, data stable) on
//! `m_wout` and `m_trace`.
//!
//! What the block computes is `ws_common::golden::optim::update` per parameter; how it is
//! laid out and scheduled is `docs/memoryx-store.md`.

use std::collections::{HashMap, VecDeque};

use rand::rngs::StdRng;
use rand::RngExt;
use ws_common::flit::{Header, Kind as FlitKind};
use ws_common::golden::fp::f32_to_bf16;
use ws_common::golden::optim::{self as golden, Consts, Hyper, Kind, Param};

use crate::dut::{BlockSpec, Dut, Pattern, Port};
use crate::optim::{LANE_FILES, OPTIM_VLT};
use crate::swarm::with_fpnew;
use crate::vbuild::BuildError;

pub mod scenario;

/// Repo-relative lint waivers of the MemoryX store and streamer RTL.
pub const MX_VLT: &str = "hdl/lint/mx.vlt";

/// Our RTL of the streamer and the simulation store, after the lanes' files.
pub const MX_FILES: &[&str] = &[
    "hdl/rtl/ws_mx_burst.v",
    "hdl/rtl/ws_mx_layers.v",
    "hdl/rtl/ws_mx_wout.v",
    "hdl/rtl/ws_mx_streamer.v",
    "hdl/rtl/ws_mx_mem_model.v",
    "hdl/rtl/ws_mx_sim_top.v",
];

/// Parameters of `ws_mx_sim_top` (see its header and `ws_mx_streamer`'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MxParams {
    /// `LANES`: optimizer lanes, 1, 2 or 4.
    pub lanes: u32,
    /// `DATA_WIDTH`: store beat in bits (the store moves `data_width / 8` bytes per cycle).
    pub data_width: u32,
    /// `MEM_BYTES`: size of the store.
    pub mem_bytes: u32,
    /// `MEM_LATENCY`: AR handshake to first R beat, cycles.
    pub mem_latency: u32,
    /// `MEM_TURNAROUND`: idle store cycles on a read/write switch.
    pub mem_turnaround: u32,
    /// `MEM_BATCH`: bursts the store serves in one direction while the other waits.
    pub mem_batch: u32,
    /// `MAX_BURST`: longest AXI burst, beats.
    pub max_burst: u32,
    /// `FIRST_BURST`: longest first burst of a chunk's array, beats.
    pub first_burst: u32,
}

impl MxParams {
    /// The defaults the tests build for `lanes` lanes: a store of 8 words per lane per cycle
    /// (enough for Adam with amsgrad at one parameter per cycle per lane), 2 MiB, 24 cycles
    /// of read latency.
    pub const fn new(lanes: u32) -> Self {
        MxParams {
            lanes,
            data_width: 256 * lanes,
            mem_bytes: 1 << 21,
            mem_latency: 24,
            mem_turnaround: 2,
            mem_batch: 4,
            max_burst: 16,
            first_burst: 2,
        }
    }

    /// Bytes per store beat (= bytes per cycle).
    pub const fn beat_bytes(&self) -> u32 {
        self.data_width / 8
    }

    /// 32-bit words per store beat: chunk lengths and bases are multiples of it.
    pub const fn beat_words(&self) -> u32 {
        self.data_width / 32
    }
}

/// The block spec of `ws_mx_sim_top` with parameters `p`, FPnew and the lanes included.
pub fn sim_spec(p: &MxParams) -> Result<BlockSpec, BuildError> {
    let spec = BlockSpec::new("ws_mx_sim_top")
        .files(LANE_FILES.iter().copied())
        .files(MX_FILES.iter().copied())
        .param("LANES", p.lanes)
        .param("DATA_WIDTH", p.data_width)
        .param("MEM_BYTES", p.mem_bytes)
        .param("MEM_LATENCY", p.mem_latency)
        .param("MEM_TURNAROUND", p.mem_turnaround)
        .param("MEM_BATCH", p.mem_batch)
        .param("MAX_BURST", p.max_burst)
        .param("FIRST_BURST", p.first_burst);
    let mut spec = with_fpnew(spec)?;
    spec.vlt_files.push(OPTIM_VLT.into());
    spec.vlt_files.push(MX_VLT.into());
    Ok(spec)
}

/// Our RTL of MemoryX as the SoC carries it (`ws_mx_block`): the streamer's files, the data
/// mover with its generated CSR, the store interconnect and the SwarmX node (after the lanes'
/// files, which bring `ws_fifo`).
pub const BLOCK_FILES: &[&str] = &[
    "hdl/rtl/ws_mx_burst.v",
    "hdl/rtl/ws_mx_layers.v",
    "hdl/rtl/ws_mx_wout.v",
    "hdl/rtl/ws_mx_streamer.v",
    "hdl/rtl/ws_mx_mem_model.v",
    "hdl/rtl/gen/ws_mxdma_csr.v",
    "hdl/rtl/ws_mx_axi_arb.v",
    "hdl/rtl/ws_mx_dma.v",
    "hdl/rtl/ws_swarm_fp32.v",
    "hdl/rtl/ws_swarm_addtree.v",
    "hdl/rtl/ws_swarm_node.v",
    "hdl/rtl/gen/ws_swarm_csr.v",
    "hdl/rtl/ws_swarm_block.v",
    "hdl/rtl/gen/ws_mesh_csr.v",
    "hdl/rtl/ws_mesh_pe_sram.v",
    "hdl/rtl/ws_mesh_div.v",
    "hdl/rtl/ws_mesh_loss.v",
    "hdl/rtl/ws_mesh_pe.v",
    "hdl/rtl/ws_mesh_router_buf.v",
    "hdl/rtl/ws_mesh_router.v",
    "hdl/rtl/ws_mesh_fabric.v",
    "hdl/rtl/ws_mesh_edge_in.v",
    "hdl/rtl/ws_mesh_edge_out.v",
    "hdl/rtl/ws_mesh_phases.v",
    "hdl/rtl/ws_mesh.v",
    "hdl/rtl/ws_mesh_block.v",
    "hdl/rtl/ws_mx_wafers.v",
    "hdl/rtl/gen/ws_trace_csr.v",
    "hdl/rtl/ws_trace.v",
    "hdl/rtl/ws_mx_block.v",
];

/// The block spec of `ws_mx_block` (one lane, 256-bit store) with a `store_bytes` store, a
/// `dma_bytes` link DMA RAM on its ext port and a SwarmX node of `swarm_ports` downstream
/// ports (0: none), without a wafer mesh ([`block_spec_with_mesh`]).
pub fn block_spec(store_bytes: u32, dma_bytes: u32, swarm_ports: u32) -> Result<BlockSpec, BuildError> {
    block_spec_with_mesh(store_bytes, dma_bytes, swarm_ports, 0)
}

/// [`block_spec`] with a `mesh_side` × `mesh_side` wafer mesh (0: none) of the array tests'
/// PEs (2048-word SRAM, MAX_B 4, PROG_DEPTH 16).
pub fn block_spec_with_mesh(
    store_bytes: u32,
    dma_bytes: u32,
    swarm_ports: u32,
    mesh_side: u32,
) -> Result<BlockSpec, BuildError> {
    let spec = BlockSpec::new("ws_mx_block")
        .files(LANE_FILES.iter().copied())
        .files(BLOCK_FILES.iter().copied())
        .include_dir(crate::paths::RTL_INCLUDE_DIR)
        .param("STORE_BYTES", store_bytes)
        .param("DMA_BYTES", dma_bytes)
        .param("SWARM_PORTS", swarm_ports)
        .param("MESH_P", mesh_side);
    let mut spec = with_fpnew(spec)?;
    spec.vlt_files.push(OPTIM_VLT.into());
    spec.vlt_files.push(MX_VLT.into());
    spec.vlt_files.push(crate::swarm::SWARM_VLT.into());
    spec.vlt_files.push(crate::mesh_pe::MESH_PE_VLT.into());
    spec.vlt_files.push(crate::mesh::LINT_FILE.into());
    spec.vlt_files.push(crate::mesh_top::ARRAY_VLT.into());
    Ok(spec)
}

/// The register map of `ws_mx_layers` (its header is the reference; byte offsets).
pub mod reg {
    /// ID word.
    pub const ID: u32 = 0x000;
    /// `0x4d58_0101`: 'MX', version 1.1 (STREAM_AFTER).
    pub const ID_WORD: u32 = 0x4d58_0101;
    /// LANES, BEAT_WORDS, MAX_LAYERS, NUM_SLOTS, a byte each.
    pub const CONFIG: u32 = 0x004;
    /// Bytes of the store.
    pub const STORE_BYTES: u32 = 0x008;
    /// Bit 0: TRACE_EN.
    pub const CTRL: u32 = 0x00c;
    /// Bit 0 CMD_BUSY, 1 ACTIVE, 2 STREAMING, \[15:8\] chunks in flight, \[23:16\] DESC_DEPTH.
    pub const STATUS: u32 = 0x010;
    /// Command: \[3:0\] op, \[15:4\] layer.
    pub const CMD: u32 = 0x014;
    /// \[7:0\] last error code, \[19:8\] its layer; a write clears it.
    pub const ERR: u32 = 0x018;
    /// \[15:0\] chunk, \[31:16\] step of the last gradient error.
    pub const ERR_INFO: u32 = 0x01c;
    /// Errors since reset.
    pub const ERR_COUNT: u32 = 0x020;
    /// Cycle counter, low word (reading it latches the high word).
    pub const TS_LO: u32 = 0x024;
    /// Cycle counter, high word as latched.
    pub const TS_HI: u32 = 0x028;
    /// Counter `i` at `COUNTERS + 4 i` (see [`super::cnt`]).
    pub const COUNTERS: u32 = 0x040;

    /// ENABLE a layer (validates it first).
    pub const OP_ENABLE: u32 = 1;
    /// DISABLE a layer (completes when its chunks have left).
    pub const OP_DISABLE: u32 = 2;
    /// STREAM a layer's weights out.
    pub const OP_STREAM: u32 = 3;
    /// STREAM_AFTER: STREAM once the layer's DONE reaches CMD\[31:16\], with step STEP + 1.
    pub const OP_STREAM_AFTER: u32 = 4;

    /// Base of constant slot `s`; words in `ws_common::golden::optim::Consts` order, flags first.
    pub const fn slot(s: u32) -> u32 {
        0x100 + 0x40 * s
    }

    /// Base of layer `l`'s entry.
    pub const fn layer(l: u32) -> u32 {
        0x400 + 0x40 * l
    }

    /// Layer entry: base of w, bytes.
    pub const W_BASE: u32 = 0x00;
    /// Layer entry: base of m.
    pub const M_BASE: u32 = 0x04;
    /// Layer entry: base of v.
    pub const V_BASE: u32 = 0x08;
    /// Layer entry: base of vmax.
    pub const X_BASE: u32 = 0x0c;
    /// Layer entry: parameters.
    pub const LEN: u32 = 0x10;
    /// Layer entry: parameters per chunk.
    pub const CHUNK: u32 = 0x14;
    /// Layer entry: \[3:0\] optimizer, \[5:4\] dtype.
    pub const MODE: u32 = 0x18;
    /// Layer entry: \[15:0\] step, \[19:16\] constant slot.
    pub const STEP: u32 = 0x1c;
    /// Layer entry: \[0\] enabled, \[1\] busy, \[2\] command pending, \[15:8\] last refusal.
    pub const L_STATUS: u32 = 0x20;
    /// Layer entry: update chunks retired since STEP was written.
    pub const DONE: u32 = 0x24;
}

/// Counter indices (register `reg::COUNTERS + 4 i`).
pub mod cnt {
    /// Update chunks retired.
    pub const CHUNKS_UPDATED: u32 = 0;
    /// Parameters of retired update chunks.
    pub const PARAMS_UPDATED: u32 = 1;
    /// Stream chunks retired.
    pub const CHUNKS_STREAMED: u32 = 2;
    /// Parameters of retired stream chunks.
    pub const PARAMS_STREAMED: u32 = 3;
    /// Cycles the feeder waited for the store.
    pub const STALL_MEM: u32 = 4;
    /// Cycles the feeder waited for gradients.
    pub const STALL_GRAD: u32 = 5;
    /// Cycles the feeder waited for the lanes / weight-out path.
    pub const STALL_OUT: u32 = 6;
    /// Gradient chunks refused and dropped.
    pub const DROPPED_CHUNKS: u32 = 7;
    /// Gradient flits dropped.
    pub const DROPPED_FLITS: u32 = 8;
    /// Gradient beats with framing errors.
    pub const FRAMING_ERRORS: u32 = 9;
    /// AXI error responses.
    pub const BUS_ERRORS: u32 = 10;
    /// Beats fed to the lanes.
    pub const LANE_BEATS: u32 = 11;
}

/// Error codes of `ERR` and of a layer's STATUS (docs/memoryx-store.md "Error codes").
pub mod err {
    /// A command names a layer past the table.
    pub const BAD_LAYER: u8 = 0x01;
    /// Unknown optimizer code.
    pub const BAD_OPT: u8 = 0x02;
    /// Unknown dtype.
    pub const BAD_DTYPE: u8 = 0x03;
    /// Length 0.
    pub const LEN_ZERO: u8 = 0x04;
    /// An array larger than the store, or more than 2^16 chunks.
    pub const LEN_TOO_LARGE: u8 = 0x05;
    /// Chunk length 0 or not a multiple of the beat's words.
    pub const BAD_CHUNK: u8 = 0x06;
    /// Constant slot past the slots.
    pub const BAD_SLOT: u8 = 0x07;
    /// A base not on a store beat.
    pub const MISALIGNED: u8 = 0x08;
    /// An array running past the store.
    pub const PAST_STORE: u8 = 0x09;
    /// Two arrays of the layer overlap.
    pub const SELF_OVERLAP: u8 = 0x0a;
    /// An array overlaps one of an enabled layer.
    pub const OVERLAP: u8 = 0x0b;
    /// A write to the entry of an enabled layer.
    pub const LAYER_ENABLED: u8 = 0x0c;
    /// STREAM of a disabled layer.
    pub const NOT_ENABLED: u8 = 0x0d;
    /// A command while one is pending.
    pub const CMD_BUSY: u8 = 0x0e;
    /// Unknown command.
    pub const BAD_CMD: u8 = 0x0f;
    /// Gradient for a layer past the table.
    pub const GRAD_NO_LAYER: u8 = 0x10;
    /// Gradient for a disabled layer.
    pub const GRAD_DISABLED: u8 = 0x11;
    /// Gradient chunk past the layer's end.
    pub const GRAD_CHUNK: u8 = 0x12;
    /// Gradient step is not the layer's STEP.
    pub const GRAD_STEP: u8 = 0x13;
    /// Not a gradient flit.
    pub const GRAD_KIND: u8 = 0x14;
    /// A chunk's first flit does not have index 0.
    pub const GRAD_INDEX: u8 = 0x15;
    /// Framing error inside a chunk.
    pub const GRAD_FRAMING: u8 = 0x16;
    /// The layer's slot flags do not fit its optimizer.
    pub const GRAD_CONSTS: u8 = 0x17;
    /// AXI error response.
    pub const BUS: u8 = 0x20;
}

/// Optimizer codes of a layer's MODE register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opt {
    /// SGD without momentum: w.
    Sgd = 0,
    /// SGD with momentum (Nesterov or not): w, m.
    SgdMomentum = 1,
    /// Adam: w, m, v.
    Adam = 2,
    /// AdamW: w, m, v.
    AdamW = 3,
    /// Adam with amsgrad: w, m, v, vmax.
    AdamAmsgrad = 4,
    /// AdamW with amsgrad: w, m, v, vmax.
    AdamWAmsgrad = 5,
}

impl Opt {
    /// The code for the optimizer `h` describes.
    pub fn of(h: &Hyper) -> Opt {
        match (h.kind, h.amsgrad) {
            (Kind::Sgd, _) if h.momentum != 0.0 => Opt::SgdMomentum,
            (Kind::Sgd, _) => Opt::Sgd,
            (Kind::Adam, false) => Opt::Adam,
            (Kind::Adam, true) => Opt::AdamAmsgrad,
            (Kind::AdamW, false) => Opt::AdamW,
            (Kind::AdamW, true) => Opt::AdamWAmsgrad,
        }
    }

    /// Arrays the optimizer keeps, bit 0 w, 1 m, 2 v, 3 vmax.
    pub const fn arrays(self) -> u32 {
        match self {
            Opt::Sgd => 0b0001,
            Opt::SgdMomentum => 0b0011,
            Opt::Adam | Opt::AdamW => 0b0111,
            Opt::AdamAmsgrad | Opt::AdamWAmsgrad => 0b1111,
        }
    }
}

/// A layer table entry as firmware writes it (raw codes, so tests can write bad ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerDesc {
    /// Byte bases of w, m, v, vmax.
    pub bases: [u32; 4],
    /// Parameters.
    pub len: u32,
    /// Parameters per chunk.
    pub chunk: u32,
    /// Optimizer code ([`Opt`]).
    pub opt: u32,
    /// 0 fp32, 1 bf16 weight flits.
    pub dtype: u32,
}

impl LayerDesc {
    /// Chunks of the layer.
    pub fn chunks(&self) -> u32 {
        self.len.div_ceil(self.chunk)
    }

    /// Parameters of chunk `c`.
    pub fn chunk_len(&self, c: u32) -> u32 {
        (self.len - c * self.chunk).min(self.chunk)
    }

    /// Arrays the layer's optimizer keeps (0 for a bad code).
    pub fn arrays(&self) -> u32 {
        match self.opt {
            0 => 0b0001,
            1 => 0b0011,
            2 | 3 => 0b0111,
            4 | 5 => 0b1111,
            _ => 0,
        }
    }
}

/// One weight-out or gradient beat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beat {
    /// LANES payload words.
    pub data: Vec<u32>,
    /// Flits present.
    pub keep: u32,
    /// Closes the chunk.
    pub last: bool,
    /// Header of flit 0.
    pub user: u64,
}

/// One trace record (docs/memoryx-store.md "Trace records").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceRec {
    /// `m_trace_user`: {n\[63:48\], chunk\[47:32\], step\[31:16\], layer\[15:4\], type\[3:0\]}.
    pub user: u64,
    /// t_in, t_done, t_wout_first, t_wout_last, t_commit.
    pub t: [u32; 5],
}

impl TraceRec {
    /// 1 update chunk, 2 stream chunk.
    pub fn kind(&self) -> u32 {
        (self.user & 0xf) as u32
    }
    /// Layer.
    pub fn layer(&self) -> u16 {
        ((self.user >> 4) & 0xfff) as u16
    }
    /// Step (the gradients' step for an update chunk).
    pub fn step(&self) -> u16 {
        (self.user >> 16) as u16
    }
    /// Chunk.
    pub fn chunk(&self) -> u16 {
        (self.user >> 32) as u16
    }
    /// Parameters.
    pub fn n(&self) -> u32 {
        (self.user >> 48) as u32
    }
    /// Gradient in (update) / descriptor allocated (stream).
    pub fn t_in(&self) -> u32 {
        self.t[0]
    }
    /// Last result out of the lanes (update) / last word read (stream).
    pub fn t_done(&self) -> u32 {
        self.t[1]
    }
    /// First weight flit out.
    pub fn t_wfirst(&self) -> u32 {
        self.t[2]
    }
    /// Last weight flit out.
    pub fn t_wlast(&self) -> u32 {
        self.t[3]
    }
    /// Last write acknowledged (update).
    pub fn t_commit(&self) -> u32 {
        self.t[4]
    }
}

/// A seeded valid/ready pattern, as the harness's stream agents draw them.
#[derive(Debug)]
pub struct Flow {
    pattern: Pattern,
    rng: StdRng,
    on: bool,
    current: Pattern,
    left: u32,
}

impl Flow {
    /// A generator of `pattern` from `rng`.
    pub fn new(pattern: Pattern, rng: StdRng) -> Self {
        Flow { pattern, rng, on: true, current: Pattern::Always, left: 0 }
    }

    /// Changes the pattern.
    pub fn set(&mut self, pattern: Pattern) {
        self.pattern = pattern;
        self.left = 0;
    }

    /// This cycle's value.
    pub fn draw(&mut self) -> bool {
        let p = match self.pattern {
            Pattern::Mixed => {
                if self.left == 0 {
                    self.left = self.rng.random_range(32..512);
                    self.current = match self.rng.random_range(0..6) {
                        0 => Pattern::Always,
                        1 => Pattern::Random(0.5),
                        2 => Pattern::Random(0.1),
                        3 => Pattern::Random(0.9),
                        4 => Pattern::Bursty { on: 8.0, off: 8.0 },
                        _ => Pattern::Bursty { on: 3.0, off: 40.0 },
                    };
                }
                self.left -= 1;
                self.current
            }
            p => p,
        };
        match p {
            Pattern::Always | Pattern::Mixed => true,
            Pattern::Random(prob) => self.rng.random_bool(prob.clamp(0.0, 1.0)),
            Pattern::Bursty { on, off } => {
                let mean = if self.on { on } else { off };
                if self.rng.random_bool((1.0 / mean.max(1.0)).clamp(0.0, 1.0)) {
                    self.on = !self.on;
                }
                self.on
            }
        }
    }
}

/// How the store stalls.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stall {
    /// Never.
    Never,
    /// Stalled on a random pattern (on = stalled), e.g. `Pattern::Random(0.2)`.
    Random(Pattern),
    /// Stalled `stalled` cycles of every `period`: the store's bandwidth cut to
    /// `(period - stalled) / period`.
    Duty {
        /// Pattern length, cycles.
        period: u32,
        /// Stalled cycles per period.
        stalled: u32,
    },
}

#[derive(Clone, Copy)]
struct Ports {
    reg_req: Port,
    reg_we: Port,
    reg_addr: Port,
    reg_wdata: Port,
    reg_be: Port,
    reg_rdata: Port,
    g_valid: Port,
    g_ready: Port,
    g_data: Port,
    g_keep: Port,
    g_last: Port,
    g_user: Port,
    w_valid: Port,
    w_ready: Port,
    w_data: Port,
    w_keep: Port,
    w_last: Port,
    w_user: Port,
    w_read: Port,
    t_valid: Port,
    t_ready: Port,
    t_data: Port,
    t_user: Port,
    stall: Port,
    bd_en: Port,
    bd_we: Port,
    bd_addr: Port,
    bd_wdata: Port,
    bd_rdata: Port,
    mem_err: Port,
}

/// The MemoryX testbench: one [`Mx::step`] per clock drives every port.
pub struct Mx<'a> {
    /// The model.
    pub dut: &'a mut Dut,
    /// Its parameters.
    pub p: MxParams,
    ports: Ports,
    grad: VecDeque<Beat>,
    grad_holding: bool,
    grad_flow: Flow,
    wout_flow: Flow,
    trace_flow: Flow,
    stall: Stall,
    stall_flow: Flow,
    wout_stalled: Option<Beat>,
    trace_stalled: Option<TraceRec>,
    expect: HashMap<(u16, u16, u16), VecDeque<Vec<Beat>>>,
    current: Option<(Vec<Beat>, usize)>,
    /// `m_wout_read` of the chunk in progress (a STREAM chunk's, else an update's).
    current_read: bool,
    junk: StdRng,
    /// Trace records received, in order.
    pub trace: Vec<TraceRec>,
    /// Weight-out chunks received and checked.
    pub chunks_out: u64,
    /// Of those, the chunks `m_wout_read` marked as a STREAM's (constant over each chunk).
    pub chunks_read: u64,
    /// Weight-out beats received.
    pub beats_out: u64,
    /// Gradient beats accepted.
    pub beats_in: u64,
}

impl std::fmt::Debug for Mx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mx")
            .field("dut", &self.dut)
            .field("p", &self.p)
            .field("grad_pending", &self.grad.len())
            .field("expected_chunks", &self.expected_chunks())
            .field("chunks_out", &self.chunks_out)
            .field("trace_records", &self.trace.len())
            .finish()
    }
}

impl<'a> Mx<'a> {
    /// A testbench on `dut` (a `ws_mx_sim_top` built with `p`); resets it. Every pattern
    /// starts as `Always` and the store never stalls.
    pub fn new(dut: &'a mut Dut, p: MxParams) -> Self {
        let ports = Ports {
            reg_req: dut.port("reg_req"),
            reg_we: dut.port("reg_we"),
            reg_addr: dut.port("reg_addr"),
            reg_wdata: dut.port("reg_wdata"),
            reg_be: dut.port("reg_be"),
            reg_rdata: dut.port("reg_rdata"),
            g_valid: dut.port("s_grad_valid"),
            g_ready: dut.port("s_grad_ready"),
            g_data: dut.port("s_grad_data"),
            g_keep: dut.port("s_grad_keep"),
            g_last: dut.port("s_grad_last"),
            g_user: dut.port("s_grad_user"),
            w_valid: dut.port("m_wout_valid"),
            w_ready: dut.port("m_wout_ready"),
            w_data: dut.port("m_wout_data"),
            w_keep: dut.port("m_wout_keep"),
            w_last: dut.port("m_wout_last"),
            w_user: dut.port("m_wout_user"),
            w_read: dut.port("m_wout_read"),
            t_valid: dut.port("m_trace_valid"),
            t_ready: dut.port("m_trace_ready"),
            t_data: dut.port("m_trace_data"),
            t_user: dut.port("m_trace_user"),
            stall: dut.port("mem_stall"),
            bd_en: dut.port("bd_en"),
            bd_we: dut.port("bd_we"),
            bd_addr: dut.port("bd_addr"),
            bd_wdata: dut.port("bd_wdata"),
            bd_rdata: dut.port("bd_rdata"),
            mem_err: dut.port("mem_err_protocol"),
        };
        let seed = dut.seed();
        let mx = Mx {
            p,
            ports,
            grad: VecDeque::new(),
            grad_holding: false,
            grad_flow: Flow::new(Pattern::Always, crate::dut::rng(seed, 0x6701)),
            wout_flow: Flow::new(Pattern::Always, crate::dut::rng(seed, 0x6702)),
            trace_flow: Flow::new(Pattern::Always, crate::dut::rng(seed, 0x6703)),
            stall: Stall::Never,
            stall_flow: Flow::new(Pattern::Always, crate::dut::rng(seed, 0x6704)),
            wout_stalled: None,
            trace_stalled: None,
            expect: HashMap::new(),
            current: None,
            current_read: false,
            junk: crate::dut::rng(seed, 0x6705),
            trace: Vec::new(),
            chunks_out: 0,
            chunks_read: 0,
            beats_out: 0,
            beats_in: 0,
            dut,
        };
        for p in [ports.reg_req, ports.reg_we, ports.g_valid, ports.bd_en, ports.bd_we] {
            mx.dut.set(p, 0);
        }
        mx.dut.reset(8);
        mx
    }

    /// Sets the patterns of the gradient source's valid, the weight-out and trace sinks'
    /// ready, and the store's stalls.
    pub fn patterns(&mut self, grad: Pattern, wout: Pattern, trace: Pattern, stall: Stall) {
        self.grad_flow.set(grad);
        self.wout_flow.set(wout);
        self.trace_flow.set(trace);
        self.stall = stall;
        if let Stall::Random(p) = stall {
            self.stall_flow.set(p);
        }
    }

    /// The DUT's cycle counter (the timestamps' clock) as the test sees it.
    pub fn cycle(&self) -> u64 {
        self.dut.cycle()
    }

    /// One clock: drive every input, sample every handshake, tick.
    ///
    /// # Panics
    /// On a weight-out beat nobody expected or that differs from the expected one, on a
    /// handshake-rule violation, or when the store model flags an AXI protocol error.
    pub fn step(&mut self) {
        let pt = self.ports;
        // Gradient source.
        if !self.grad_holding && !self.grad.is_empty() && self.grad_flow.draw() {
            self.grad_holding = true;
        }
        let d = &mut *self.dut;
        d.set(pt.g_valid, self.grad_holding as u64);
        if let (true, Some(b)) = (self.grad_holding, self.grad.front()) {
            d.set_words(pt.g_data, &b.data);
            d.set(pt.g_keep, u64::from(b.keep));
            d.set(pt.g_last, b.last as u64);
            d.set(pt.g_user, b.user);
        }
        let w_ready = self.wout_flow.draw();
        let t_ready = self.trace_flow.draw();
        d.set(pt.w_ready, w_ready as u64);
        d.set(pt.t_ready, t_ready as u64);
        let stall = match self.stall {
            Stall::Never => false,
            Stall::Random(_) => self.stall_flow.draw(),
            Stall::Duty { period, stalled } => (d.cycle() % u64::from(period)) < u64::from(stalled),
        };
        d.set(pt.stall, stall as u64);
        d.eval();

        if self.grad_holding && d.get_bool(pt.g_ready) {
            self.grad.pop_front();
            self.grad_holding = false;
            self.beats_in += 1;
        }
        let cycle = d.cycle();
        // Weight-out sink.
        let w_valid = d.get_bool(pt.w_valid);
        let w_beat = w_valid.then(|| read_beat(d, pt.w_data, pt.w_keep, pt.w_last, pt.w_user));
        // Trace sink.
        let t_valid = d.get_bool(pt.t_valid);
        let t_rec = t_valid.then(|| read_trace(d, &pt));
        assert!(!d.get_bool(pt.mem_err), "the store model saw an AXI protocol error by cycle {cycle}");

        if let Some(prev) = self.wout_stalled.take() {
            assert!(w_valid, "m_wout: valid dropped at cycle {cycle} before {prev:x?} was taken");
            assert_eq!(w_beat.as_ref(), Some(&prev), "m_wout: beat changed at cycle {cycle} while stalled");
        }
        let w_read = d.get_bool(pt.w_read);
        if let Some(beat) = w_beat {
            if w_ready {
                self.take_wout(beat, w_read, cycle);
            } else {
                self.wout_stalled = Some(beat);
            }
        }
        if let Some(prev) = self.trace_stalled.take() {
            assert!(t_valid, "m_trace: valid dropped at cycle {cycle} before {prev:x?} was taken");
            assert_eq!(t_rec, Some(prev), "m_trace: record changed at cycle {cycle} while stalled");
        }
        if let Some(rec) = t_rec {
            if t_ready {
                self.trace.push(rec);
            } else {
                self.trace_stalled = Some(rec);
            }
        }
        self.dut.tick();
    }

    fn take_wout(&mut self, beat: Beat, read: bool, cycle: u64) {
        self.beats_out += 1;
        if self.current.is_some() {
            assert_eq!(read, self.current_read, "m_wout_read changed inside a chunk at cycle {cycle}");
        }
        if self.current.is_none() {
            self.current_read = read;
            let h = Header::unpack(beat.user)
                .unwrap_or_else(|e| panic!("m_wout: bad header {:#018x} at cycle {cycle}: {e:?}", beat.user));
            assert_eq!(h.kind, FlitKind::Weight, "m_wout: flit of kind {:?} at cycle {cycle}", h.kind);
            let key = (h.layer, h.step, h.chunk);
            let chunk = self.expect.get_mut(&key).and_then(VecDeque::pop_front).unwrap_or_else(|| {
                panic!(
                    "m_wout: chunk (layer {}, step {}, chunk {}) at cycle {cycle} was not expected",
                    key.0, key.1, key.2
                )
            });
            self.current = Some((chunk, 0));
        }
        let (chunk, pos) = self.current.as_mut().expect("a chunk in progress");
        let want = &chunk[*pos];
        assert!(
            *want == beat,
            "m_wout: beat {pos} of a chunk at cycle {cycle}:\n  got  {beat:x?}\n  want {want:x?}"
        );
        *pos += 1;
        if *pos == chunk.len() {
            self.current = None;
            self.chunks_out += 1;
            self.chunks_read += u64::from(read);
        }
    }

    /// Steps until `done(self)` is true.
    ///
    /// # Panics
    /// After `limit` cycles, naming `what`.
    pub fn run_until(&mut self, what: &str, limit: u64, mut done: impl FnMut(&mut Self) -> bool) {
        let start = self.dut.cycle();
        while !done(self) {
            self.step();
            assert!(
                self.dut.cycle() - start < limit,
                "{what}: not done after {limit} cycles ({} gradient beats queued, {} chunks expected on m_wout)",
                self.grad.len(),
                self.expected_chunks()
            );
        }
    }

    /// Weight-out chunks still expected.
    pub fn expected_chunks(&self) -> usize {
        self.expect.values().map(VecDeque::len).sum::<usize>() + self.current.is_some() as usize
    }

    /// Gradient beats queued and not yet accepted.
    pub fn grad_pending(&self) -> usize {
        self.grad.len()
    }

    // ---- registers ----

    /// Writes a register (one cycle).
    pub fn write(&mut self, addr: u32, value: u32) {
        let pt = &self.ports;
        self.dut.set(pt.reg_req, 1);
        self.dut.set(pt.reg_we, 1);
        self.dut.set(pt.reg_addr, u64::from(addr));
        self.dut.set(pt.reg_wdata, u64::from(value));
        self.dut.set(pt.reg_be, 0xf);
        self.step();
        self.dut.set(self.ports.reg_req, 0);
        self.dut.set(self.ports.reg_we, 0);
    }

    /// Reads a register (one cycle).
    pub fn read(&mut self, addr: u32) -> u32 {
        let pt = &self.ports;
        self.dut.set(pt.reg_req, 1);
        self.dut.set(pt.reg_we, 0);
        self.dut.set(pt.reg_addr, u64::from(addr));
        self.step();
        self.dut.set(self.ports.reg_req, 0);
        self.dut.eval();
        self.dut.get(self.ports.reg_rdata) as u32
    }

    /// A counter ([`cnt`]).
    pub fn counter(&mut self, i: u32) -> u32 {
        self.read(reg::COUNTERS + 4 * i)
    }

    /// Writes constant slot `s`.
    pub fn write_slot(&mut self, s: u32, c: &Consts) {
        let words = [c.flags, c.gscale, c.wd, c.decay, c.k1, c.k2, c.beta2, c.c2, c.ibc2s, c.eps, c.neg_rate];
        for (i, w) in words.iter().enumerate() {
            self.write(reg::slot(s) + 4 * i as u32, *w);
        }
    }

    /// Writes layer `l`'s entry (not STEP).
    pub fn write_layer(&mut self, l: u32, d: &LayerDesc) {
        let b = reg::layer(l);
        for (i, base) in d.bases.iter().enumerate() {
            self.write(b + 4 * i as u32, *base);
        }
        self.write(b + reg::LEN, d.len);
        self.write(b + reg::CHUNK, d.chunk);
        self.write(b + reg::MODE, d.opt | (d.dtype << 4));
    }

    /// Sets layer `l`'s STEP word.
    pub fn set_step(&mut self, l: u32, step: u16, slot: u32) {
        self.write(reg::layer(l) + reg::STEP, u32::from(step) | (slot << 16));
    }

    /// Issues a command and waits until it is no longer pending; returns layer `l`'s refusal
    /// code from its STATUS (0: accepted).
    pub fn command(&mut self, op: u32, l: u32) -> u8 {
        self.write(reg::CMD, op | (l << 4));
        self.wait_cmd();
        if l < 16 {
            (self.read(reg::layer(l) + reg::L_STATUS) >> 8) as u8
        } else {
            0
        }
    }

    /// Waits until no command is pending.
    pub fn wait_cmd(&mut self) {
        let start = self.dut.cycle();
        while self.read(reg::STATUS) & 1 != 0 {
            assert!(self.dut.cycle() - start < 2_000_000, "a MemoryX command never completed");
        }
    }

    /// The last error code in ERR, and clears it.
    pub fn take_err(&mut self) -> u8 {
        let e = self.read(reg::ERR) as u8;
        self.write(reg::ERR, 0);
        e
    }

    // ---- the store's backdoor ----

    /// Writes the whole store (words from address 0).
    pub fn load_store(&mut self, words: &[u32]) {
        let bw = self.p.beat_words() as usize;
        for (i, beat) in words.chunks(bw).enumerate() {
            self.dut.set(self.ports.bd_en, 1);
            self.dut.set(self.ports.bd_we, 1);
            self.dut.set(self.ports.bd_addr, i as u64);
            self.dut.set_words(self.ports.bd_wdata, beat);
            self.step();
        }
        self.dut.set(self.ports.bd_en, 0);
        self.dut.set(self.ports.bd_we, 0);
    }

    /// Reads `n` words from word address `word` (beat-aligned reads underneath).
    pub fn read_store(&mut self, word: usize, n: usize) -> Vec<u32> {
        let bw = self.p.beat_words() as usize;
        let (first, last) = (word / bw, (word + n).div_ceil(bw));
        let mut out = Vec::with_capacity((last - first) * bw);
        self.dut.set(self.ports.bd_we, 0);
        for i in first..last {
            self.dut.set(self.ports.bd_en, 1);
            self.dut.set(self.ports.bd_addr, i as u64);
            self.step();
            self.dut.eval();
            out.extend(self.dut.get_words(self.ports.bd_rdata));
        }
        self.dut.set(self.ports.bd_en, 0);
        let skip = word - first * bw;
        out[skip..skip + n].to_vec()
    }

    // ---- streams ----

    /// Queues chunk `chunk` of layer `layer`'s gradients for `step`: LANES flits per beat,
    /// junk in the flits past the end.
    pub fn push_gradients(&mut self, layer: u16, step: u16, chunk: u16, g: &[u32]) {
        let beats = gradient_beats(self.p.lanes as usize, layer, step, chunk, g, &mut self.junk);
        self.grad.extend(beats);
    }

    /// Queues raw gradient beats (for malformed input).
    pub fn push_beats(&mut self, beats: impl IntoIterator<Item = Beat>) {
        self.grad.extend(beats);
    }

    /// Expects chunk `chunk` of `layer` with weights `w` (fp32 bits) at `step` on m_wout.
    pub fn expect_weights(&mut self, layer: u16, step: u16, chunk: u16, w: &[u32], bf16: bool) {
        let beats = weight_beats(self.p.lanes as usize, layer, step, chunk, w, bf16);
        self.expect.entry((layer, step, chunk)).or_default().push_back(beats);
    }
}

fn read_beat(d: &Dut, data: Port, keep: Port, last: Port, user: Port) -> Beat {
    Beat { data: d.get_words(data), keep: d.get(keep) as u32, last: d.get_bool(last), user: d.get(user) }
}

fn read_trace(d: &Dut, pt: &Ports) -> TraceRec {
    let w = d.get_words(pt.t_data);
    TraceRec { user: d.get(pt.t_user), t: [w[0], w[1], w[2], w[3], w[4]] }
}

/// The gradient beats of one chunk: `lanes` flits per beat, the header of flit 0 with the
/// beat's first index, junk in the flits past the chunk's end.
pub fn gradient_beats(
    lanes: usize,
    layer: u16,
    step: u16,
    chunk: u16,
    g: &[u32],
    junk: &mut StdRng,
) -> Vec<Beat> {
    let n = g.chunks(lanes).count();
    g.chunks(lanes)
        .enumerate()
        .map(|(b, ws)| {
            let mut data = ws.to_vec();
            while data.len() < lanes {
                data.push(junk.random::<u32>());
            }
            let h = Header::new(FlitKind::Gradient, layer, step, chunk, (b * lanes) as u16);
            Beat { data, keep: (1u32 << ws.len()) - 1, last: b + 1 == n, user: h.pack() }
        })
        .collect()
}

/// The weight-out beats of one chunk of weights `w`: fp32 one weight per flit, or bf16 two
/// per flit (element 2i low), `lanes` flits per beat, zeros past the end.
pub fn weight_beats(lanes: usize, layer: u16, step: u16, chunk: u16, w: &[u32], bf16: bool) -> Vec<Beat> {
    let flits: Vec<u32> = if bf16 {
        w.chunks(2)
            .map(|p| {
                u32::from(f32_to_bf16(p[0])) | (p.get(1).map_or(0, |&x| u32::from(f32_to_bf16(x))) << 16)
            })
            .collect()
    } else {
        w.to_vec()
    };
    let n = flits.chunks(lanes).count();
    flits
        .chunks(lanes)
        .enumerate()
        .map(|(b, fs)| {
            let mut data = fs.to_vec();
            data.resize(lanes, 0);
            let h = Header::new(FlitKind::Weight, layer, step, chunk, (b * lanes) as u16);
            Beat { data, keep: (1u32 << fs.len()) - 1, last: b + 1 == n, user: h.pack() }
        })
        .collect()
}

/// The reference store: a mirror of the memory the block must leave behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Store {
    /// Words from address 0.
    pub words: Vec<u32>,
}

impl Store {
    /// A store of `bytes` filled with random words.
    pub fn random(bytes: u32, rng: &mut StdRng) -> Self {
        Store { words: (0..bytes / 4).map(|_| rng.random::<u32>()).collect() }
    }

    /// Parameter `i` of layer `d` (arrays the optimizer does not keep read as 0, as the
    /// streamer feeds the lanes).
    pub fn param(&self, d: &LayerDesc, i: u32) -> Param {
        let a = d.arrays();
        let get = |k: usize| if a & (1 << k) != 0 { self.words[(d.bases[k] / 4 + i) as usize] } else { 0 };
        Param { w: get(0), m: get(1), v: get(2), vmax: get(3) }
    }

    /// The weights of chunk `c` of layer `d`.
    pub fn weights(&self, d: &LayerDesc, c: u32) -> Vec<u32> {
        let off = c * d.chunk;
        (off..off + d.chunk_len(c)).map(|i| self.words[(d.bases[0] / 4 + i) as usize]).collect()
    }

    /// Applies one chunk's gradients `g` under constants `c` as the streamer does (the
    /// arrays the optimizer keeps are written back, the rest untouched); returns the new
    /// weights of the chunk.
    pub fn update_chunk(&mut self, d: &LayerDesc, chunk: u32, c: &Consts, g: &[u32]) -> Vec<u32> {
        let a = d.arrays();
        let off = chunk * d.chunk;
        let mut out = Vec::with_capacity(g.len());
        for (k, &gi) in g.iter().enumerate() {
            let i = off + k as u32;
            let p = golden::update(c, self.param(d, i), gi);
            for (bit, x) in [p.w, p.m, p.v, p.vmax].into_iter().enumerate() {
                if a & (1 << bit) != 0 {
                    self.words[(d.bases[bit] / 4 + i) as usize] = x;
                }
            }
            out.push(p.w);
        }
        out
    }
}

/// The [`Opt`] code of `h` as a layer MODE value.
pub fn opt_code(h: &Hyper) -> u32 {
    Opt::of(h) as u32
}

#[cfg(test)]
mod tests {
    use super::reg;
    use ws_common::regmap::mx as map;

    /// `ws_mx_layers` is hand-written; its map in hdl/regmap/mx.toml (what firmware and docs
    /// use) must say the same offsets as its header, which these constants transcribe.
    #[test]
    fn the_hand_written_register_block_agrees_with_the_regmap() {
        assert_eq!(reg::ID_WORD, map::ID_WORD);
        for (ours, theirs) in [
            (reg::CONFIG, map::CONFIG),
            (reg::STORE_BYTES, map::STORE_BYTES),
            (reg::CTRL, map::CTRL),
            (reg::STATUS, map::STATUS),
            (reg::CMD, map::CMD),
            (reg::ERR, map::ERR),
            (reg::ERR_INFO, map::ERR_INFO),
            (reg::ERR_COUNT, map::ERR_COUNT),
            (reg::TS_LO, map::TS_LO),
            (reg::TS_HI, map::TS_HI),
            (reg::COUNTERS, map::CNT0),
            (reg::COUNTERS + 4 * super::cnt::LANE_BEATS, map::CNT11),
            (reg::slot(0), map::S_FLAGS0),
            (reg::slot(7) + 0x28, map::S_NEG_RATE7),
            (reg::slot(3) + 0x10, map::S_K1_3),
            (reg::slot(5) + 0x18, map::S_BETA2_5),
            (reg::layer(0) + reg::W_BASE, map::L_W_BASE0),
            (reg::layer(15) + reg::X_BASE, map::L_VMAX_BASE15),
            (reg::layer(9) + reg::LEN, map::L_LEN9),
            (reg::layer(4) + reg::CHUNK, map::L_CHUNK4),
            (reg::layer(2) + reg::MODE, map::L_MODE2),
            (reg::layer(11) + reg::STEP, map::L_STEP11),
            (reg::layer(6) + reg::L_STATUS, map::L_STATUS6),
            (reg::layer(13) + reg::DONE, map::L_DONE13),
        ] {
            assert_eq!(ours, theirs);
        }
    }
}
