//! `ws_mx_block`: MemoryX as the SoC carries it, driven through its two register ports with a
//! model of the link engine's DMA RAM on the ext port (docs/memoryx-soc.md). The RAM model
//! takes a request only when its `ready` says so (random patterns) and answers reads on the
//! next cycle, as `ws_link_dma_ram` does (docs/link-engine.md "DMA RAM").
//!
//! What is checked: every word the data mover moves (ring ↔ store, both directions, across
//! ring wraps and partial beats, with the neighbours of a partial beat untouched); that a
//! refused operation moves nothing and says why; and a whole optimizer step, weights and
//! state loaded through the ring, gradients fed from a ring, updated weights captured into a
//! ring and the state read back, bit-exact with `ws_common::golden::optim`; the same step
//! with three wafers' gradients reduced by the block's SwarmX node on the way in and the
//! weights broadcast by it on the way out, bit-exact with `golden::swarm` then
//! `golden::optim`; a wafer that stops answering: its chunks are aborted and touch
//! nothing, and once its port is masked the re-fed chunks reduce over the others; capture
//! from a stream position (WOUT_START) into a ring already part way round, stalling exactly
//! at WOUT_LIMIT; the mesh block's writes that address nothing, flagged and dropped; and the
//! forward buffer (WOUT_CTRL.fwd): a forwarded layer's updates wait in it, not in the sink, a
//! STREAM waits behind them, and the end of a job empties it.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use ws_common::golden::optim::{self as golden, Consts, Hyper, Param};
use ws_common::golden::swarm::{node_lane, NodeConfig};
use ws_common::regmap::{mesh, mxdma, swarm};
use ws_hdl::dut::{Dut, Pattern, Port};
use ws_hdl::mx::{self, reg, Flow, LayerDesc, Opt};

const STORE_BYTES: u32 = 1 << 20;
const DMA_BYTES: u32 = 65536;
const BEAT_WORDS: u32 = 8;
/// The SwarmX node's downstream ports, as in `ws_soc`.
const SWARM_PORTS: usize = 4;

const OP_TO_STORE: u32 = 1;
const OP_TO_RING: u32 = 2;
const OP_TO_GRAD: u32 = 3;

#[derive(Clone, Copy)]
struct Ports {
    mx_req: Port,
    dma_req: Port,
    swarm_req: Port,
    mesh_req: Port,
    we: Port,
    addr: Port,
    wdata: Port,
    be: Port,
    mx_rdata: Port,
    dma_rdata: Port,
    swarm_rdata: Port,
    mesh_rdata: Port,
    swarm_irq: Port,
    ext_valid: Port,
    ext_ready: Port,
    ext_we: Port,
    ext_addr: Port,
    ext_wdata: Port,
    ext_rvalid: Port,
    ext_rdata: Port,
    mem_err: Port,
}

/// The testbench: the block, and the link DMA RAM behind its ext port.
struct Tb {
    dut: Dut,
    p: Ports,
    ram: Vec<u32>,
    pending: Option<u32>,
    ready: Flow,
    /// Ext requests taken.
    taken: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Slot {
    Mx,
    Dma,
    Swarm,
    Mesh,
}

impl Tb {
    fn new(seed: u64, ready: Pattern) -> Tb {
        Tb::build(seed, ready, 0)
    }

    /// The block with a `mesh_side` × `mesh_side` wafer mesh (0: none).
    fn build(seed: u64, ready: Pattern, mesh_side: u32) -> Tb {
        Tb::build_with(seed, ready, mesh_side, 0)
    }

    /// The block with a mesh and a forward buffer of `fwd_words` words (0: none).
    fn build_with(seed: u64, ready: Pattern, mesh_side: u32, fwd_words: u32) -> Tb {
        let spec = mx::block_spec_with_mesh(STORE_BYTES, DMA_BYTES, SWARM_PORTS as u32, mesh_side)
            .expect("spec")
            .param("FWD_WORDS", fwd_words);
        let mut dut = Dut::build(spec).expect("build ws_mx_block");
        dut.set_seed(seed);
        let p = Ports {
            mx_req: dut.port("mx_reg_req"),
            dma_req: dut.port("dma_reg_req"),
            swarm_req: dut.port("swarm_reg_req"),
            mesh_req: dut.port("mesh_reg_req"),
            we: dut.port("reg_we"),
            addr: dut.port("reg_addr"),
            wdata: dut.port("reg_wdata"),
            be: dut.port("reg_be"),
            mx_rdata: dut.port("mx_reg_rdata"),
            dma_rdata: dut.port("dma_reg_rdata"),
            swarm_rdata: dut.port("swarm_reg_rdata"),
            mesh_rdata: dut.port("mesh_reg_rdata"),
            swarm_irq: dut.port("swarm_irq"),
            ext_valid: dut.port("ext_valid"),
            ext_ready: dut.port("ext_ready"),
            ext_we: dut.port("ext_we"),
            ext_addr: dut.port("ext_addr"),
            ext_wdata: dut.port("ext_wdata"),
            ext_rvalid: dut.port("ext_rvalid"),
            ext_rdata: dut.port("ext_rdata"),
            mem_err: dut.port("mem_err_protocol"),
        };
        for q in [p.mx_req, p.dma_req, p.swarm_req, p.mesh_req, p.we, p.ext_ready, p.ext_rvalid] {
            dut.set(q, 0);
        }
        dut.set(p.be, 0xf);
        dut.reset(8);
        let ready = Flow::new(ready, ws_hdl::dut::rng(seed, 0x7e11));
        Tb { dut, p, ram: vec![0; (DMA_BYTES / 4) as usize], pending: None, ready, taken: 0 }
    }

    /// One clock of the block and the RAM model.
    fn step(&mut self) {
        let p = self.p;
        self.dut.set(p.ext_rvalid, self.pending.is_some() as u64);
        self.dut.set(p.ext_rdata, u64::from(self.pending.unwrap_or(0)));
        let ready = self.ready.draw();
        self.dut.set(p.ext_ready, ready as u64);
        self.dut.eval();
        let mut next = None;
        if ready && self.dut.get_bool(p.ext_valid) {
            let a = self.dut.get(p.ext_addr) as usize;
            if self.dut.get_bool(p.ext_we) {
                self.ram[a] = self.dut.get(p.ext_wdata) as u32;
            } else {
                next = Some(self.ram[a]);
            }
            self.taken += 1;
        }
        self.dut.tick();
        self.pending = next;
        assert!(!self.dut.get_bool(p.mem_err), "the store model flagged an AXI protocol error");
    }

    fn req(&self, s: Slot) -> Port {
        match s {
            Slot::Mx => self.p.mx_req,
            Slot::Dma => self.p.dma_req,
            Slot::Swarm => self.p.swarm_req,
            Slot::Mesh => self.p.mesh_req,
        }
    }

    fn write(&mut self, s: Slot, addr: u32, value: u32) {
        let r = self.req(s);
        self.dut.set(r, 1);
        self.dut.set(self.p.we, 1);
        self.dut.set(self.p.addr, u64::from(addr));
        self.dut.set(self.p.wdata, u64::from(value));
        self.step();
        self.dut.set(r, 0);
        self.dut.set(self.p.we, 0);
    }

    fn read(&mut self, s: Slot, addr: u32) -> u32 {
        let r = self.req(s);
        self.dut.set(r, 1);
        self.dut.set(self.p.we, 0);
        self.dut.set(self.p.addr, u64::from(addr));
        self.step();
        self.dut.set(r, 0);
        self.dut.eval();
        let port = match s {
            Slot::Mx => self.p.mx_rdata,
            Slot::Dma => self.p.dma_rdata,
            Slot::Swarm => self.p.swarm_rdata,
            Slot::Mesh => self.p.mesh_rdata,
        };
        self.dut.get(port) as u32
    }

    /// Programs and starts one operation; returns STATUS.err once it is over (0: done).
    #[allow(clippy::too_many_arguments)]
    fn op(
        &mut self,
        op: u32,
        ring: (u32, u32, u32),
        store: u32,
        words: u32,
        grad: (u32, u32, u32, u32),
    ) -> u32 {
        self.write(Slot::Dma, mxdma::RING_BASE, ring.0);
        self.write(Slot::Dma, mxdma::RING_LEN, ring.1);
        self.write(Slot::Dma, mxdma::RING_OFF, ring.2);
        self.write(Slot::Dma, mxdma::STORE_ADDR, store);
        self.write(Slot::Dma, mxdma::WORDS, words);
        self.write(Slot::Dma, mxdma::GRAD_HDR, grad.0 | (grad.1 << 16));
        self.write(Slot::Dma, mxdma::GRAD_CHUNK, grad.2 | (grad.3 << 16));
        self.write(Slot::Dma, mxdma::CMD, op);
        self.wait_idle(200_000)
    }

    fn wait_idle(&mut self, limit: u64) -> u32 {
        let start = self.dut.cycle();
        loop {
            let st = self.read(Slot::Dma, mxdma::STATUS);
            if mxdma::status::BUSY.get(st) == 0 {
                return mxdma::status::ERR.get(st);
            }
            assert!(self.dut.cycle() - start < limit, "the data mover is still busy after {limit} cycles");
        }
    }

    fn ring_put(&mut self, base: u32, len: u32, off: u32, words: &[u32]) {
        for (i, w) in words.iter().enumerate() {
            let at = base + ((off + 4 * i as u32) & (len - 1));
            self.ram[(at / 4) as usize] = *w;
        }
    }

    fn ring_get(&self, base: u32, len: u32, off: u32, n: usize) -> Vec<u32> {
        (0..n).map(|i| self.ram[((base + ((off + 4 * i as u32) & (len - 1))) / 4) as usize]).collect()
    }

    /// Store words through the data mover: into a scratch ring at the top of the RAM.
    fn store_put(&mut self, addr: u32, words: &[u32]) {
        let (base, len) = (DMA_BYTES / 2, DMA_BYTES / 2);
        for (k, part) in words.chunks((len / 4) as usize).enumerate() {
            self.ring_put(base, len, 0, part);
            let a = addr + k as u32 * len;
            assert_eq!(self.op(OP_TO_STORE, (base, len, 0), a, part.len() as u32, (0, 0, 0, 0)), 0);
        }
    }

    fn store_get(&mut self, addr: u32, n: usize) -> Vec<u32> {
        let (base, len) = (DMA_BYTES / 2, DMA_BYTES / 2);
        let mut out = Vec::new();
        let mut k = 0u32;
        while out.len() < n {
            let part = (n - out.len()).min((len / 4) as usize);
            assert_eq!(self.op(OP_TO_RING, (base, len, 0), addr + k * len, part as u32, (0, 0, 0, 0)), 0);
            out.extend(self.ring_get(base, len, 0, part));
            k += 1;
        }
        out
    }
}

fn random_words(rng: &mut StdRng, n: usize) -> Vec<u32> {
    (0..n).map(|_| rng.random()).collect()
}

#[test]
fn words_go_between_rings_and_the_store_unchanged() {
    let mut tb = Tb::new(0x3a11, Pattern::Mixed);
    let mut rng = StdRng::seed_from_u64(0x3a12);
    assert_eq!(tb.read(Slot::Dma, 0), ws_common::regmap::mxdma::ID_WORD, "mxdma ID word (0x4d44_0101)");
    let params = tb.read(Slot::Dma, mxdma::PARAMS);
    assert_eq!(mxdma::params::BEAT_WORDS.get(params), BEAT_WORDS);
    assert_eq!(mxdma::params::STORE_LOG2.get(params), 20);
    assert_eq!(mxdma::params::DMA_LOG2.get(params), 16);

    // A known background in the store, so partial beats show what they must not touch.
    let background = random_words(&mut rng, 4096);
    tb.store_put(0x4_0000, &background);
    let mut expect = background.clone();
    let mut ops = 1u32;
    for round in 0..24 {
        let len = 1u32 << rng.random_range(4..=14); // 16 B .. 16 KiB rings
        let base = rng.random_range(0..DMA_BYTES / 2 / len) * len;
        let off = rng.random_range(0..len / 4) * 4;
        let words = rng.random_range(1..=len / 4);
        let beat = rng.random_range(0..(4096 - words) / BEAT_WORDS);
        let data = random_words(&mut rng, words as usize);
        tb.ring_put(base, len, off, &data);
        let addr = 0x4_0000 + beat * BEAT_WORDS * 4;
        let err = tb.op(OP_TO_STORE, (base, len, off), addr, words, (0, 0, 0, 0));
        assert_eq!(err, 0, "round {round}: ring {base:#x}+{len:#x} off {off:#x}, {words} words to {addr:#x}");
        assert_eq!(tb.read(Slot::Dma, mxdma::DONE_WORDS), words);
        let at = (beat * BEAT_WORDS) as usize;
        expect[at..at + words as usize].copy_from_slice(&data);
        ops += 1;

        // Back into another ring (clobbered first), from the same address.
        let len2 = 1u32 << rng.random_range(4..=14);
        let len2 = len2.max((words * 4).next_power_of_two());
        let base2 = rng.random_range(0..DMA_BYTES / 2 / len2) * len2;
        let off2 = rng.random_range(0..len2 / 4) * 4;
        tb.ring_put(base2, len2, 0, &vec![0xdead_beef; (len2 / 4) as usize]);
        let err = tb.op(OP_TO_RING, (base2, len2, off2), addr, words, (0, 0, 0, 0));
        assert_eq!(err, 0, "round {round}: back");
        assert_eq!(tb.ring_get(base2, len2, off2, words as usize), data, "round {round}: words read back");
        if words * 4 < len2 {
            // The word after the run in the ring was not written.
            let after = tb.ring_get(base2, len2, off2 + 4 * words, 1)[0];
            assert_eq!(after, 0xdead_beef, "round {round}: STORE_TO_RING wrote past its last word");
        }
        ops += 1;
    }
    assert_eq!(tb.store_get(0x4_0000, 4096), expect, "the store after every partial write");
    ops += 1;
    assert_eq!(tb.read(Slot::Dma, mxdma::OPS), ops);
    assert_eq!(tb.read(Slot::Dma, mxdma::REFUSED), 0);
}

#[test]
fn a_refused_operation_says_why_and_moves_nothing() {
    let mut tb = Tb::new(0x3a21, Pattern::Random(0.7));
    let mut rng = StdRng::seed_from_u64(0x3a22);
    let store = random_words(&mut rng, 512);
    tb.store_put(0, &store);
    let ram_before = tb.ram.clone();
    let ok_ring = (0x1000, 0x1000, 0);
    // name, op, ring, store addr, words, grad params, expected err
    type Case = (&'static str, u32, (u32, u32, u32), u32, u32, u32, u32);
    let cases: &[Case] = &[
        ("unknown op", 7, ok_ring, 0, 8, 0, 2),
        ("op 0", 0, ok_ring, 0, 8, 0, 2),
        ("zero words", OP_TO_STORE, ok_ring, 0, 0, 0, 5),
        ("ring not a power of two", OP_TO_STORE, (0x1000, 0x0c00, 0), 0, 8, 0, 3),
        ("ring shorter than a word", OP_TO_STORE, (0x1000, 2, 0), 0, 1, 0, 3),
        ("ring not aligned to its length", OP_TO_STORE, (0x1800, 0x1000, 0), 0, 8, 0, 3),
        ("ring past the DMA RAM", OP_TO_RING, (DMA_BYTES, 0x1000, 0), 0, 8, 0, 3),
        ("ring offset not a word", OP_TO_STORE, (0x1000, 0x1000, 2), 0, 8, 0, 3),
        ("ring offset past the ring", OP_TO_RING, (0x1000, 0x1000, 0x1000), 0, 8, 0, 3),
        ("more words than the ring", OP_TO_STORE, (0x1000, 0x100, 0), 0, 65, 0, 6),
        ("store address not on a beat", OP_TO_STORE, ok_ring, 4, 8, 0, 4),
        ("store range past the end", OP_TO_RING, ok_ring, STORE_BYTES - 32, 9, 0, 4),
        ("store address past the end", OP_TO_STORE, ok_ring, STORE_BYTES, 8, 0, 4),
        ("store range wraps 2^32", OP_TO_STORE, ok_ring, 0xffff_ffe0, 16, 0, 4),
        ("gradient chunk of 0", OP_TO_GRAD, ok_ring, 0, 8, 0, 7),
    ];
    for (i, (name, op, ring, addr, words, params, code)) in cases.iter().enumerate() {
        let err = tb.op(*op, *ring, *addr, *words, (0, 1, *params, 0));
        assert_eq!(err, *code, "{name}");
        assert_eq!(tb.read(Slot::Dma, mxdma::REFUSED), i as u32 + 1, "{name}: counted");
        let st = tb.read(Slot::Dma, mxdma::STATUS);
        assert_eq!(mxdma::status::OP.get(st), *op & 0xf, "{name}: STATUS.op");
    }
    // A CMD while an operation runs is refused with BUSY and does not disturb it.
    let data = random_words(&mut rng, 1024);
    tb.ring_put(0x2000, 0x1000, 0, &data);
    let regs = [
        (mxdma::RING_BASE, 0x2000),
        (mxdma::RING_LEN, 0x1000),
        (mxdma::RING_OFF, 0),
        (mxdma::STORE_ADDR, 0x8000),
        (mxdma::WORDS, 1024),
        (mxdma::CMD, OP_TO_STORE),
    ];
    for (a, v) in regs {
        tb.write(Slot::Dma, a, v);
    }
    tb.write(Slot::Dma, mxdma::CMD, OP_TO_RING);
    let st = tb.read(Slot::Dma, mxdma::STATUS);
    assert_eq!(mxdma::status::ERR.get(st), 1, "BUSY");
    assert_eq!(tb.wait_idle(100_000), 1, "the BUSY refusal stays the last word until the next CMD");
    assert_eq!(tb.store_get(0x8000, 1024), data, "the running operation completed intact");
    // Nothing else moved: the store's first 512 words and the RAM outside the rings used.
    assert_eq!(tb.store_get(0, 512), store, "store after the refusals");
    let half = (DMA_BYTES / 8) as usize; // below the scratch ring at DMA_BYTES / 2
    assert_eq!(tb.ram[..0x2000 / 4], ram_before[..0x2000 / 4], "RAM below the BUSY case's ring");
    assert_eq!(tb.ram[0x3000 / 4..half], ram_before[0x3000 / 4..half], "RAM above it");
}

/// Golden consts of step `t` of `h`.
fn consts(h: &Hyper, t: u32) -> Consts {
    golden::step_consts(h, t, 1e-2, 1, 4)
}

fn write_slot(tb: &mut Tb, s: u32, c: &Consts) {
    let words = [c.flags, c.gscale, c.wd, c.decay, c.k1, c.k2, c.beta2, c.c2, c.ibc2s, c.eps, c.neg_rate];
    for (i, w) in words.iter().enumerate() {
        tb.write(Slot::Mx, reg::slot(s) + 4 * i as u32, *w);
    }
}

/// Interleaves the wafers' gradients as a fanned-out feed reads them (GRAD_ROUTE): word
/// `i·K + k` is wafer `k`'s gradient `i`.
fn interleave(per_wafer: &[Vec<u32>]) -> Vec<u32> {
    let n = per_wafer[0].len();
    (0..n).flat_map(|i| per_wafer.iter().map(move |g| g[i])).collect()
}

/// The golden reduction of the node: wafer `k`'s gradients on port `k`, `mask` active.
fn reduced(per_wafer: &[Vec<u32>], mask: u16) -> Vec<u32> {
    let cfg = NodeConfig::new(SWARM_PORTS).mask(mask);
    (0..per_wafer[0].len())
        .map(|i| {
            let mut v = [0u32; SWARM_PORTS];
            for (k, g) in per_wafer.iter().enumerate() {
                v[k] = g[i];
            }
            node_lane(&cfg, &v).expect("node config")
        })
        .collect()
}

/// `steps` optimizer steps of one layer through the block: w, m, v loaded through a ring,
/// gradients fed from a ring, weight-out captured into a ring, the state read back at the
/// end. `wafers` = 0 feeds the gradients straight into the streamer; K > 0 feeds K wafers'
/// gradients through the SwarmX node (ports 0..K-1) and sends the weights down its broadcast.
fn run_steps(h: Hyper, seed: u64, ready: Pattern, wafers: usize) {
    let mut tb = Tb::new(seed, ready);
    let mut rng = StdRng::seed_from_u64(seed ^ 0x55);
    let len = 300u32; // not a multiple of the chunk
    let chunk = 64u32;
    let d = LayerDesc {
        bases: [0x1_0000, 0x2_0000, 0x3_0000, 0x4_0000],
        len,
        chunk,
        opt: Opt::of(&h) as u32,
        dtype: 0,
    };
    let small = |rng: &mut StdRng| (rng.random_range(-1.0f32..1.0)).to_bits();
    let mut state: Vec<Param> = (0..len)
        .map(|_| Param { w: small(&mut rng), m: small(&mut rng) & 0x7fff_ffff, v: 0, vmax: 0 })
        .map(|p| Param { v: f32::from_bits(p.m).abs().to_bits(), ..p })
        .collect();
    let arrays = d.arrays();
    let pick = |p: &Param, a: usize| [p.w, p.m, p.v, p.vmax][a];
    for a in 0..4 {
        if arrays & (1 << a) != 0 {
            let words: Vec<u32> = state.iter().map(|p| pick(p, a)).collect();
            tb.store_put(d.bases[a], &words);
        }
    }
    let b = reg::layer(0);
    for (i, base) in d.bases.iter().enumerate() {
        tb.write(Slot::Mx, b + 4 * i as u32, *base);
    }
    tb.write(Slot::Mx, b + reg::LEN, d.len);
    tb.write(Slot::Mx, b + reg::CHUNK, d.chunk);
    tb.write(Slot::Mx, b + reg::MODE, d.opt);
    write_slot(&mut tb, 0, &consts(&h, 1));
    tb.write(Slot::Mx, b + reg::STEP, 1);
    tb.write(Slot::Mx, reg::CMD, reg::OP_ENABLE);
    for _ in 0..40 {
        tb.step();
    }
    assert_eq!(
        tb.read(Slot::Mx, b + reg::L_STATUS) & 1,
        1,
        "layer enabled (refusal {:#x})",
        tb.read(Slot::Mx, reg::ERR)
    );

    let mask = ((1u32 << wafers) - 1) as u16;
    let wout_ctrl = if wafers > 0 {
        tb.write(Slot::Swarm, swarm::PORT_MASK, u32::from(mask));
        tb.write(Slot::Dma, mxdma::GRAD_ROUTE, wafers as u32);
        1 | mxdma::wout_ctrl::SWARM.val(1)
    } else {
        1
    };
    // Capture the weight-out flits into a ring.
    let (cap_base, cap_len) = (0x4000u32, 0x4000u32);
    tb.write(Slot::Dma, mxdma::WOUT_BASE, cap_base);
    tb.write(Slot::Dma, mxdma::WOUT_LEN, cap_len);
    tb.write(Slot::Dma, mxdma::WOUT_LIMIT, cap_len);
    tb.write(Slot::Dma, mxdma::WOUT_CTRL, wout_ctrl);
    tb.step(); // capture turns on the cycle after the write (its ring is checked first)
    assert_ne!(mxdma::wout_head::ON.get(tb.read(Slot::Dma, mxdma::WOUT_HEAD)), 0, "capture on");

    let steps = 3u32;
    for t in 1..=steps {
        let slot = (t - 1) % 2;
        if t > 1 {
            write_slot(&mut tb, slot, &consts(&h, t));
            tb.write(Slot::Mx, b + reg::STEP, t | (slot << 16));
            // The capture ring is read out after each step: restart it.
            tb.write(Slot::Dma, mxdma::WOUT_CTRL, wout_ctrl);
        }
        let c = consts(&h, t);
        let per_wafer: Vec<Vec<u32>> =
            (0..wafers.max(1)).map(|_| (0..len).map(|_| small(&mut rng)).collect()).collect();
        let (grads, fed) = if wafers > 0 {
            (reduced(&per_wafer, mask), interleave(&per_wafer))
        } else {
            (per_wafer[0].clone(), per_wafer[0].clone())
        };
        for (p, g) in state.iter_mut().zip(&grads) {
            *p = golden::update(&c, *p, *g);
        }
        // The ring wraps after 4 words.
        let (gbase, glen) = if wafers > 0 { (0x8000u32, 0x1000u32) } else { (0x8000u32, 0x800u32) };
        let goff = glen - 0x10;
        tb.ring_put(gbase, glen, goff, &fed);
        let err = tb.op(OP_TO_GRAD, (gbase, glen, goff), 0, len, (0, t, chunk, 0));
        assert_eq!(err, 0, "step {t}: gradient feed");
        let start = tb.dut.cycle();
        while tb.read(Slot::Mx, b + reg::DONE) & 0xffff != d.chunks() {
            assert!(
                tb.dut.cycle() - start < 100_000,
                "step {t}: chunks retired {}",
                tb.read(Slot::Mx, b + reg::DONE)
            );
        }
        for _ in 0..64 {
            tb.step(); // the last capture writes
        }
        assert_eq!(tb.read(Slot::Mx, reg::ERR) & 0xff, 0, "step {t}: streamer error");
        let head = mxdma::wout_head::BYTES.get(tb.read(Slot::Dma, mxdma::WOUT_HEAD));
        assert_eq!(head, 4 * len, "step {t}: captured bytes");
        let wout = tb.ring_get(cap_base, cap_len, 0, len as usize);
        let want_w: Vec<u32> = state.iter().map(|p| p.w).collect();
        assert_eq!(wout, want_w, "step {t}: weight-out flits = updated weights");
    }
    for a in 0..4 {
        if arrays & (1 << a) != 0 {
            let got = tb.store_get(d.bases[a], len as usize);
            let want: Vec<u32> = state.iter().map(|p| pick(p, a)).collect();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    g,
                    w,
                    "array {a} param {i}: {:e} vs golden {:e}",
                    f32::from_bits(*g),
                    f32::from_bits(*w)
                );
            }
        }
    }
    assert_eq!(tb.read(Slot::Dma, mxdma::GRAD_FLITS), steps * len * wafers.max(1) as u32);
    assert_eq!(tb.read(Slot::Dma, mxdma::WOUT_FLITS), steps * len);
    assert_eq!(tb.read(Slot::Dma, mxdma::WOUT_DROPPED), 0);
    if wafers > 0 {
        assert_eq!(tb.read(Slot::Swarm, swarm::CNT_REDUCED), steps * len, "reduced flits");
        assert_eq!(tb.read(Slot::Swarm, swarm::CNT_BCAST), steps * len, "broadcast flits");
        assert_eq!(tb.read(Slot::Swarm, swarm::CNT_ERRORS), 0, "aborted chunks");
        for k in 0..SWARM_PORTS as u32 {
            let up = tb.read(Slot::Swarm, swarm::UP_FLITS0 + 0x10 * k);
            let dn = tb.read(Slot::Swarm, swarm::DN_FLITS0 + 0x10 * k);
            let want = if (k as usize) < wafers { steps * len } else { 0 };
            assert_eq!((up, dn), (want, want), "port {k}: flits up and down");
        }
    }
}

#[test]
fn an_adam_step_goes_from_rings_through_the_lanes_bit_exact() {
    run_steps(Hyper { weight_decay: 0.01, ..Hyper::ADAM }, 0x3a31, Pattern::Mixed, 0);
}

#[test]
fn three_wafers_gradients_are_reduced_by_swarmx_into_an_adam_step_bit_exact() {
    run_steps(Hyper { weight_decay: 0.01, ..Hyper::ADAM }, 0x3a35, Pattern::Mixed, 3);
}

#[test]
fn a_nesterov_sgd_step_goes_from_rings_through_the_lanes_bit_exact() {
    let h = Hyper { momentum: 0.9, nesterov: true, weight_decay: 1e-4, ..Hyper::SGD };
    run_steps(h, 0x3a41, Pattern::Random(0.6), 0);
}

#[test]
fn weight_flits_are_dropped_and_counted_without_capture() {
    let mut tb = Tb::new(0x3a51, Pattern::Always);
    let mut rng = StdRng::seed_from_u64(0x3a52);
    let len = 100u32;
    let w = random_words(&mut rng, len as usize).into_iter().map(|x| x & 0x3fff_ffff).collect::<Vec<_>>();
    tb.store_put(0x1000, &w);
    let b = reg::layer(3);
    tb.write(Slot::Mx, b + reg::W_BASE, 0x1000);
    tb.write(Slot::Mx, b + reg::LEN, len);
    tb.write(Slot::Mx, b + reg::CHUNK, 32);
    tb.write(Slot::Mx, b + reg::MODE, Opt::Sgd as u32);
    write_slot(&mut tb, 0, &consts(&Hyper::SGD, 1));
    tb.write(Slot::Mx, b + reg::STEP, 1);
    tb.write(Slot::Mx, reg::CMD, reg::OP_ENABLE | (3 << 4));
    for _ in 0..40 {
        tb.step();
    }
    tb.write(Slot::Mx, reg::CMD, reg::OP_STREAM | (3 << 4));
    let start = tb.dut.cycle();
    while tb.read(Slot::Dma, mxdma::WOUT_FLITS) < len {
        assert!(tb.dut.cycle() - start < 50_000, "streamed weights never left");
    }
    assert_eq!(tb.read(Slot::Dma, mxdma::WOUT_DROPPED), len);
    assert_eq!(tb.read(Slot::Mx, reg::ERR) & 0xff, 0);
    // A capture ring that fails the check leaves capture off and is counted.
    tb.write(Slot::Dma, mxdma::WOUT_BASE, 0x10);
    tb.write(Slot::Dma, mxdma::WOUT_LEN, 0x100);
    tb.write(Slot::Dma, mxdma::WOUT_CTRL, 1);
    assert_eq!(mxdma::wout_head::ON.get(tb.read(Slot::Dma, mxdma::WOUT_HEAD)), 0);
    assert_eq!(tb.read(Slot::Dma, mxdma::REFUSED), 1);
}

/// Capture from a stream position (WOUT_START): the capture ring as a ring already part way
/// round, as firmware uses a link TX ring. Twice: from 3·len − 8 (two words before the ring
/// wraps) and from 2^31 − 12 (WOUT_HEAD wraps its 31 bits after three words). WOUT_HEAD
/// starts at WOUT_START; word i lands at ring offset (WOUT_START + 4i) mod WOUT_LEN, across
/// the wrap, and nothing else in or around the ring is written; the stream stalls with
/// WOUT_HEAD exactly at WOUT_LIMIT and goes on when WOUT_LIMIT moves. A start that is not a
/// whole word is refused like a bad ring, and WOUT_START = 0 restarts WOUT_HEAD at 0.
#[test]
fn capture_starts_at_a_stream_position_and_stalls_at_the_limit() {
    let mut tb = Tb::new(0x3a81, Pattern::Mixed);
    let mut rng = StdRng::seed_from_u64(0x3a82);
    let n = 40u32;
    let w: Vec<u32> = random_words(&mut rng, n as usize).into_iter().map(|x| x & 0x3fff_ffff).collect();
    tb.store_put(0x1000, &w);
    let b = reg::layer(3);
    tb.write(Slot::Mx, b + reg::W_BASE, 0x1000);
    tb.write(Slot::Mx, b + reg::LEN, n);
    tb.write(Slot::Mx, b + reg::CHUNK, 16);
    tb.write(Slot::Mx, b + reg::MODE, Opt::Sgd as u32);
    write_slot(&mut tb, 0, &consts(&Hyper::SGD, 1));
    tb.write(Slot::Mx, b + reg::STEP, 1);
    tb.write(Slot::Mx, reg::CMD, reg::OP_ENABLE | (3 << 4));
    for _ in 0..40 {
        tb.step();
    }

    // A 64-word ring: the 40 words leave 24 of it, and the words either side, untouched.
    let (base, len) = (0x2000u32, 0x100u32);
    let stop = 10u32; // WOUT_LIMIT at word 10: past the ring's wrap (and the head's)
    for start in [3 * len - 8, 0x8000_0000 - 12] {
        let at = |i: u32| start.wrapping_add(4 * i) & 0x7fff_ffff;
        let span = (base / 4 - 1) as usize..=((base + len) / 4) as usize;
        for (k, m) in tb.ram[span.clone()].iter_mut().enumerate() {
            *m = 0xdead_0000 | k as u32;
        }
        let before = tb.ram[span.clone()].to_vec();
        tb.write(Slot::Dma, mxdma::WOUT_BASE, base);
        tb.write(Slot::Dma, mxdma::WOUT_LEN, len);
        tb.write(Slot::Dma, mxdma::WOUT_START, start);
        tb.write(Slot::Dma, mxdma::WOUT_LIMIT, at(stop));
        tb.write(Slot::Dma, mxdma::WOUT_CTRL, 1);
        tb.step();
        let head = tb.read(Slot::Dma, mxdma::WOUT_HEAD);
        assert_eq!(mxdma::wout_head::ON.get(head), 1, "start {start:#x}: capture on");
        assert_eq!(mxdma::wout_head::BYTES.get(head), start, "WOUT_HEAD starts at WOUT_START");

        let flits0 = tb.read(Slot::Dma, mxdma::WOUT_FLITS);
        tb.write(Slot::Mx, reg::CMD, reg::OP_STREAM | (3 << 4));
        for _ in 0..3000 {
            tb.step();
        }
        // Stalled at the limit, and it stays there.
        for _ in 0..2 {
            let head = mxdma::wout_head::BYTES.get(tb.read(Slot::Dma, mxdma::WOUT_HEAD));
            assert_eq!(head, at(stop), "start {start:#x}: WOUT_HEAD stops at WOUT_LIMIT");
            assert_eq!(tb.read(Slot::Dma, mxdma::WOUT_FLITS) - flits0, stop, "start {start:#x}: flits taken");
            for _ in 0..500 {
                tb.step();
            }
        }
        // One word more, then the rest.
        for limit in [stop + 1, n] {
            tb.write(Slot::Dma, mxdma::WOUT_LIMIT, at(limit));
            let t0 = tb.dut.cycle();
            while tb.read(Slot::Dma, mxdma::WOUT_FLITS) - flits0 != limit {
                assert!(
                    tb.dut.cycle() - t0 < 20_000,
                    "start {start:#x}: the stream did not go on to {limit}"
                );
            }
            for _ in 0..200 {
                tb.step();
            }
            let head = mxdma::wout_head::BYTES.get(tb.read(Slot::Dma, mxdma::WOUT_HEAD));
            assert_eq!(head, at(limit), "start {start:#x}: WOUT_HEAD at the moved limit");
            assert_eq!(tb.read(Slot::Dma, mxdma::WOUT_FLITS) - flits0, limit);
        }
        assert_eq!(tb.read(Slot::Mx, reg::ERR) & 0xff, 0, "start {start:#x}: streamer error");

        let mut want = before;
        for (i, x) in w.iter().enumerate() {
            want[1 + ((at(i as u32) & (len - 1)) / 4) as usize] = *x;
        }
        assert_eq!(tb.ram[span], want[..], "start {start:#x}: the ring, word by word");
    }

    // A start inside a word is refused; WOUT_START = 0 is the count from 0 of before.
    tb.write(Slot::Dma, mxdma::WOUT_CTRL, 0);
    let refused = tb.read(Slot::Dma, mxdma::REFUSED);
    tb.write(Slot::Dma, mxdma::WOUT_START, 3 * len - 6);
    tb.write(Slot::Dma, mxdma::WOUT_CTRL, 1);
    tb.step();
    assert_eq!(
        mxdma::wout_head::ON.get(tb.read(Slot::Dma, mxdma::WOUT_HEAD)),
        0,
        "a start inside a word is refused"
    );
    assert_eq!(tb.read(Slot::Dma, mxdma::REFUSED), refused + 1);
    tb.write(Slot::Dma, mxdma::WOUT_START, 0);
    tb.write(Slot::Dma, mxdma::WOUT_CTRL, 1);
    tb.step();
    let head = tb.read(Slot::Dma, mxdma::WOUT_HEAD);
    assert_eq!((mxdma::wout_head::ON.get(head), mxdma::wout_head::BYTES.get(head)), (1, 0));
    assert_eq!(tb.read(Slot::Dma, mxdma::WOUT_START), 0);
}

#[test]
fn a_dead_wafer_aborts_its_chunks_untouched_and_the_masked_node_goes_on() {
    let mut tb = Tb::new(0x3a61, Pattern::Mixed);
    let mut rng = StdRng::seed_from_u64(0x3a62);
    let (len, chunk) = (96u32, 32u32);
    let h = Hyper::SGD;
    let w0: Vec<u32> = (0..len).map(|_| rng.random_range(-1.0f32..1.0).to_bits()).collect();
    tb.store_put(0x2000, &w0);
    let b = reg::layer(1);
    tb.write(Slot::Mx, b + reg::W_BASE, 0x2000);
    tb.write(Slot::Mx, b + reg::LEN, len);
    tb.write(Slot::Mx, b + reg::CHUNK, chunk);
    tb.write(Slot::Mx, b + reg::MODE, Opt::Sgd as u32);
    write_slot(&mut tb, 0, &consts(&h, 1));
    tb.write(Slot::Mx, b + reg::STEP, 1);
    tb.write(Slot::Mx, reg::CMD, reg::OP_ENABLE | (1 << 4));
    for _ in 0..40 {
        tb.step();
    }
    tb.write(Slot::Swarm, swarm::PORT_MASK, 0xf);
    tb.write(Slot::Swarm, swarm::TIMEOUT, 300);
    tb.write(Slot::Swarm, swarm::CTRL, swarm::ctrl::IRQ_ERR.val(1));
    let per_wafer: Vec<Vec<u32>> =
        (0..4).map(|_| (0..len).map(|_| rng.random_range(-1.0f32..1.0).to_bits()).collect()).collect();
    // Below the scratch ring of store_put/store_get (the upper half of the RAM).
    let (gbase, glen) = (0x1000u32, 0x800u32);
    tb.ring_put(gbase, glen, 0, &interleave(&per_wafer));
    // Wafer 2 has stopped answering: its words are read and never sent.
    tb.write(Slot::Dma, mxdma::GRAD_ROUTE, 4 | (1 << (16 + 2)));
    assert_eq!(tb.op(OP_TO_GRAD, (gbase, glen, 0), 0, len, (1, 1, chunk, 0)), 0, "feed");
    for _ in 0..2000 {
        tb.step();
    }
    let chunks = len.div_ceil(chunk);
    assert_eq!(tb.read(Slot::Swarm, swarm::CNT_ERRORS), chunks, "every chunk aborted");
    let err = tb.read(Slot::Swarm, swarm::ERR);
    assert_eq!(swarm::err::PENDING.get(err), 1, "abort latched");
    assert_eq!(swarm::err::CODE.get(err), 1, "timeout");
    assert_eq!(swarm::err::PORT.get(err), 2, "blamed port");
    assert_eq!(swarm::err_ports::TIMEOUT.get(tb.read(Slot::Swarm, swarm::ERR_PORTS)), 1 << 2);
    assert!(tb.dut.get_bool(tb.p.swarm_irq), "the abort interrupts");
    assert_eq!(tb.read(Slot::Mx, b + reg::DONE) & 0xffff, 0, "no chunk retired");
    assert_eq!(tb.store_get(0x2000, len as usize), w0, "aborted chunks touch nothing");

    // The firmware's policy: mask the port, release the abort, feed the chunks again.
    tb.write(Slot::Swarm, swarm::PORT_MASK, 0xb);
    tb.write(Slot::Swarm, swarm::ERR, swarm::err::PENDING.val(1));
    assert!(!tb.dut.get_bool(tb.p.swarm_irq), "released");
    tb.write(Slot::Mx, reg::ERR, 0);
    assert_eq!(tb.op(OP_TO_GRAD, (gbase, glen, 0), 0, len, (1, 1, chunk, 0)), 0, "second feed");
    let start = tb.dut.cycle();
    while tb.read(Slot::Mx, b + reg::DONE) & 0xffff != chunks {
        assert!(tb.dut.cycle() - start < 50_000, "chunks retired {}", tb.read(Slot::Mx, b + reg::DONE));
    }
    assert_eq!(tb.read(Slot::Swarm, swarm::CNT_ERRORS), chunks, "no new abort");
    assert_eq!(tb.read(Slot::Mx, reg::ERR) & 0xff, 0, "streamer error");
    let c = consts(&h, 1);
    let want: Vec<u32> = w0
        .iter()
        .zip(reduced(&per_wafer, 0xb))
        .map(|(w, g)| golden::update(&c, Param { w: *w, m: 0, v: 0, vmax: 0 }, g).w)
        .collect();
    assert_eq!(tb.store_get(0x2000, len as usize), want, "three-wafer sums, bit-exact");
}

#[test]
fn a_fan_out_wider_than_the_node_is_refused() {
    let mut tb = Tb::new(0x3a71, Pattern::Always);
    let params = tb.read(Slot::Dma, mxdma::PARAMS);
    assert_eq!(mxdma::params::SWARM_PORTS.get(params), SWARM_PORTS as u32);
    tb.write(Slot::Dma, mxdma::GRAD_ROUTE, SWARM_PORTS as u32 + 1);
    assert_eq!(tb.op(OP_TO_GRAD, (0x8000, 0x800, 0), 0, 8, (0, 1, 8, 0)), 9, "BAD_ROUTE");
    // K·WORDS words must fit the ring: 4 × 129 > 512.
    tb.write(Slot::Dma, mxdma::GRAD_ROUTE, 4);
    assert_eq!(tb.op(OP_TO_GRAD, (0x8000, 0x800, 0), 0, 129, (0, 1, 8, 0)), 6, "TOO_LONG");
    assert_eq!(tb.read(Slot::Dma, mxdma::GRAD_FLITS), 0, "nothing fed");
}

const OP_TO_MESH: u32 = 4;
const OP_TO_SAMPLES: u32 = 5;

/// Writes `words` from `(pe, addr)` on through CFG_TARGET / CFG_DATA.
fn mesh_cfg(tb: &mut Tb, pe: u32, addr: u32, words: &[u32]) {
    tb.write(Slot::Mesh, mesh::CFG_TARGET, addr | (pe << 16));
    for w in words {
        tb.write(Slot::Mesh, mesh::CFG_DATA, *w);
    }
}

/// A whole MLP training step on the block's 2×2 mesh, driven the way firmware drives it:
/// route tables through ROUTE, programs and the egress table through CFG_*, each PE's samples
/// and labels from a DMA ring through the data mover (op 5 with SX_TARGET), the weight rows
/// from a ring (op 4, forward then backward), the gradient egress into the mover's capture
/// ring (CTRL.grad_capture), the metrics from their FIFO. Every gradient word and both
/// metrics words equal `golden::mesh::step::run`; counters and flags read back through the
/// registers. Without a mesh, ops 4 and 5 are refused.
#[test]
fn a_mesh_step_runs_from_rings_bit_exact() {
    use ws_common::golden::mesh::step as golden_step;
    use ws_common::golden::mesh::Layer;
    use ws_hdl::mesh_top::scenario::{params, TEST_PE};
    use ws_hdl::mesh_top::step::{config, program, StepMap, METRICS_ID};
    use ws_hdl::mesh_top::{self as top, Segment};

    let mut tb = Tb::build(0x3e5, Pattern::Mixed, 2);
    let mut rng = StdRng::seed_from_u64(0x3e5);
    let side = 2;
    let id = tb.read(Slot::Mesh, 0);
    assert_eq!(id, 0x4d45_0101, "mesh ID word");
    let prm = tb.read(Slot::Mesh, mesh::PARAMS);
    assert_eq!((mesh::params::ROWS.get(prm), mesh::params::COLS.get(prm)), (2, 2));

    // The routes of docs/mesh-array.md, checked, through ROUTE.
    let routes = top::routes(&params(side, TEST_PE));
    routes.check().expect("routes");
    for w in routes.writes() {
        let v = u32::from(w.mask)
            | (w.quota << 8)
            | ((w.color as u32) << 16)
            | ((w.in_port as u32) << 18)
            | ((w.router as u32) << 24);
        tb.write(Slot::Mesh, mesh::ROUTE, v);
    }

    let dims = vec![16usize, 24, 12, 5];
    let (b, n, rpc) = (4usize, 14usize, 3usize);
    let cfg = config(&dims, side, b, rpc);
    let model = cfg.model;
    let wparams: Vec<u32> =
        (0..model.param_words()).map(|_| rng.random_range(-0.4f32..0.4).to_bits()).collect();
    let x: Vec<u32> = (0..n * dims[0]).map(|_| rng.random_range(-1.0f32..1.0).to_bits()).collect();
    let labels: Vec<u32> = (0..n).map(|_| rng.random_range(0..5u32)).collect();
    let golden = golden_step::run(&cfg, &wparams, &x, &labels).expect("golden step");

    // Programs, and each PE's samples and labels through the data mover.
    let g = ws_hdl::mesh::Geometry::new(side, side);
    let map = StepMap::new(&dims, b);
    let (ring, ring_len) = (0u32, 0x4000u32);
    let mut len = 0;
    for pos in 0..g.routers() {
        let r = top::snake_router(g, pos);
        let range = cfg.mesh.samples_at(pos, n);
        let prog = program(&dims, &map, range.len().max(1), range.len(), pos == 0);
        len = prog.len() as u32;
        let words: Vec<u32> = prog.iter().flat_map(|i| i.words()).collect();
        mesh_cfg(&mut tb, r as u32, 0x1000, &words);
        if range.is_empty() {
            continue;
        }
        for (at, data) in [
            (map.x, x[range.start * dims[0]..range.end * dims[0]].to_vec()),
            (map.labels, labels[range.clone()].to_vec()),
        ] {
            tb.write(Slot::Mesh, mesh::SX_TARGET, at | ((r as u32) << 16));
            tb.ring_put(ring, ring_len, 0, &data);
            assert_eq!(tb.op(OP_TO_SAMPLES, (ring, ring_len, 0), 0, data.len() as u32, (0, 0, 1, 0)), 0);
            let next = tb.read(Slot::Mesh, mesh::SX_NEXT);
            assert_eq!(next, (at + data.len() as u32) | ((r as u32) << 16), "SX_NEXT after the feed");
        }
    }
    let fed = tb.read(Slot::Mesh, mesh::SAMPLE_WORDS);
    assert_eq!(fed as usize, n * (dims[0] + 1), "sample words written");

    // The egress table and the step: metrics, then every layer's gradient, last first.
    let layers = dims.len() - 1;
    let layer = |l: usize| Layer::new(dims[l], dims[l + 1]);
    let mut segs = vec![Segment::metrics(METRICS_ID, 2)];
    segs.extend((0..layers).rev().map(|l| Segment::new(l, layer(l), cfg.stream)));
    for (k, sg) in segs.iter().enumerate() {
        let w0 = u32::from(sg.layer) | (u32::from(sg.metrics) << 16);
        mesh_cfg(&mut tb, 0xfe, 0x0100 + 4 * k as u32, &[w0, sg.chunk_words, sg.words]);
    }
    let step = 0x0b0e_u16;
    mesh_cfg(&mut tb, 0xfe, 0x0001, &[segs.len() as u32]);
    mesh_cfg(&mut tb, 0xfe, 0x0000, &[u32::from(step)]);

    // Gradients to the capture ring.
    let (cap_base, cap_len) = (0x8000u32, 0x4000u32);
    tb.write(Slot::Dma, mxdma::WOUT_BASE, cap_base);
    tb.write(Slot::Dma, mxdma::WOUT_LEN, cap_len);
    tb.write(Slot::Dma, mxdma::WOUT_LIMIT, cap_len);
    tb.write(Slot::Dma, mxdma::WOUT_CTRL, 1);
    tb.write(Slot::Mesh, mesh::CTRL, 1);

    // Start every PE, then stream the weights: layers 0..L-1, then L-1..1 again.
    mesh_cfg(&mut tb, 0xff, 0x0000, &[(len << 16) | 1]);
    let passes: Vec<usize> = (0..layers).chain((1..layers).rev()).collect();
    for l in passes {
        let w = &wparams[model.param_offset(l)..model.param_offset(l + 1)];
        let chunk = (rpc * (dims[l] + 1)) as u32;
        tb.ring_put(ring, ring_len, 0, w);
        let err =
            tb.op(OP_TO_MESH, (ring, ring_len, 0), 0, w.len() as u32, (l as u32, u32::from(step), chunk, 0));
        assert_eq!(err, 0, "weights of layer {l}");
    }
    let all = (1u32 << g.routers()) - 1;
    let start = tb.dut.cycle();
    loop {
        let d = tb.read(Slot::Mesh, mesh::DONE);
        assert_eq!(
            mesh::done::ERR.get(d),
            0,
            "a PE refused its program: {:#x}",
            tb.read(Slot::Mesh, mesh::ERR_CODES)
        );
        let busy = tb.read(Slot::Mesh, mesh::BUSY);
        if mesh::done::DONE.get(d) == all && busy == 0 {
            break;
        }
        assert!(tb.dut.cycle() - start < 400_000, "the mesh did not finish: BUSY {busy:#x} DONE {d:#x}");
    }

    // Metrics: the loss sum and the correct count, in their FIFO.
    let flags = tb.read(Slot::Mesh, mesh::FLAGS);
    assert_eq!(mesh::flags::METRICS_COUNT.get(flags), 2, "metrics words");
    assert_eq!(
        mesh::flags::GRAD_OVERRUN.get(flags) | mesh::flags::OVERFLOW.get(flags),
        0,
        "flags {flags:#x}"
    );
    let m = golden.metrics;
    for (i, want) in [m.loss, (m.correct as f32).to_bits()].into_iter().enumerate() {
        let v = tb.read(Slot::Mesh, mesh::METRICS);
        let hdr = tb.read(Slot::Mesh, mesh::METRICS_HDR);
        assert_eq!(v, want, "metrics word {i}");
        assert_eq!(mesh::metrics_hdr::INDEX.get(hdr), i as u32);
        assert_eq!(mesh::metrics_hdr::LAST.get(hdr), u32::from(i == 1));
        assert_eq!(mesh::metrics_hdr::STEP.get(hdr), u32::from(step));
        tb.write(Slot::Mesh, mesh::CMD, mesh::cmd::POP_METRICS.val(1));
    }
    assert_eq!(mesh::flags::METRICS_COUNT.get(tb.read(Slot::Mesh, mesh::FLAGS)), 0);

    // Gradients: every layer, last first, word for word in the capture ring.
    let want: Vec<u32> =
        golden.gradient_flits(&cfg, step).expect("flits").iter().map(|f| f.payload).collect();
    assert_eq!(tb.read(Slot::Mesh, mesh::GRAD_WORDS) as usize, want.len(), "gradient words out");
    let head = mxdma::wout_head::BYTES.get(tb.read(Slot::Dma, mxdma::WOUT_HEAD));
    assert_eq!(head as usize, 4 * want.len(), "captured bytes");
    let got = tb.ring_get(cap_base, cap_len, 0, want.len());
    for (j, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(g == w, "gradient word {j}: got {g:#010x}, golden {w:#010x}");
    }
    let wwords: usize = (0..layers).map(|l| layer(l).words().unwrap()).sum::<usize>()
        + (1..layers).map(|l| layer(l).words().unwrap()).sum::<usize>();
    assert_eq!(tb.read(Slot::Mesh, mesh::FEED_WORDS) as usize, wwords, "weight words taken");

    // Counters through CNT_SEL: every PE issued FMAs and spent cycles in LOSS; the cycle
    // counter runs.
    for r in 0..g.routers() as u32 {
        tb.write(Slot::Mesh, mesh::CNT_SEL, r);
        assert!(tb.read(Slot::Mesh, mesh::CNT_VALUE) > 0, "PE {r}: FMAs");
        tb.write(Slot::Mesh, mesh::CNT_SEL, r | (4 << 16));
        assert!(tb.read(Slot::Mesh, mesh::CNT_VALUE) > 0, "PE {r}: LOSS cycles");
    }
    tb.write(Slot::Mesh, mesh::CNT_SEL, 13 << 16);
    let c0 = tb.read(Slot::Mesh, mesh::CNT_VALUE);
    assert!(tb.read(Slot::Mesh, mesh::CNT_VALUE) > c0, "cycle counter");
    tb.write(Slot::Mesh, mesh::CNT_SEL, 99 << 16);
    assert_eq!(tb.read(Slot::Mesh, mesh::CNT_VALUE), 0, "a group that does not exist reads 0");

    // The chain registers (docs/mesh-array.md "Chained steps"): FMAS is the sum of the PEs'
    // counters; CHAIN, written through CFG_TARGET 0xfe, fires at once (every PE is done) into
    // a program of length 0, which every PE refuses, latching the marks; the table is
    // exhausted, so the advance goes with the fire.
    let pe_fmas: u32 = (0..g.routers() as u32)
        .map(|r| {
            tb.write(Slot::Mesh, mesh::CNT_SEL, r);
            tb.read(Slot::Mesh, mesh::CNT_VALUE)
        })
        .sum();
    assert_eq!(tb.read(Slot::Mesh, mesh::FMAS), pe_fmas, "FMAS: every PE's FMAs");
    assert_eq!(tb.read(Slot::Mesh, mesh::CHAIN_STAT), 0, "no chain yet");
    mesh_cfg(&mut tb, 0xfe, 0x0002, &[ws_common::mesh::start_word(0, 0)]);
    // The fire comes in the cycle after the CFG_DATA write: a read right behind the write may
    // still see CHAIN armed.
    let mut st = tb.read(Slot::Mesh, mesh::CHAIN_STAT);
    for _ in 0..4 {
        if mesh::chain_stat::CHAINS.get(st) != 0 {
            break;
        }
        st = tb.read(Slot::Mesh, mesh::CHAIN_STAT);
    }
    assert_eq!(
        (
            mesh::chain_stat::CHAINS.get(st),
            mesh::chain_stat::ARMED.get(st),
            mesh::chain_stat::PENDING.get(st)
        ),
        (1, 0, 0),
        "CHAIN fired and advanced"
    );
    assert_eq!(mesh::done::ERR.get(tb.read(Slot::Mesh, mesh::DONE)), all, "every PE refused length 0");
    assert_eq!(tb.read(Slot::Mesh, mesh::CHAIN_FMAS), pe_fmas, "CHAIN_FMAS: FMAS at the fire");
    assert_eq!(tb.read(Slot::Mesh, mesh::CHAIN_GRAD) as usize, want.len(), "CHAIN_GRAD: the step's words");
    tb.write(Slot::Mesh, mesh::CNT_SEL, 13 << 16);
    let fired = tb.read(Slot::Mesh, mesh::CHAIN_CYCLE);
    assert!(fired > c0 && fired < tb.read(Slot::Mesh, mesh::CNT_VALUE), "CHAIN_CYCLE: the fire's cycle");

    // Weight flits need a chunk size: op 4 with GRAD_CHUNK.params = 0 is refused (BAD_CHUNK)
    // and moves nothing.
    let fed_before = tb.read(Slot::Mesh, mesh::FEED_WORDS);
    assert_eq!(tb.op(OP_TO_MESH, (ring, ring_len, 0), 0, 4, (0, 0, 0, 0)), 7, "op 4, chunk 0: BAD_CHUNK");
    assert_eq!(tb.read(Slot::Mesh, mesh::FEED_WORDS), fed_before, "a refused op 4 fed nothing");

    // Without a mesh, ops 4 and 5 are refused, and the mesh slot reads 0.
    let mut bare = Tb::new(0x3e6, Pattern::Always);
    assert_eq!(bare.read(Slot::Mesh, 0), 0);
    for op in [OP_TO_MESH, OP_TO_SAMPLES] {
        assert_eq!(bare.op(op, (0, 0x100, 0), 0, 4, (0, 0, 4, 0)), 2, "op {op} without a mesh: BAD_OP");
    }
}

/// ROUTE and CFG_DATA writes that address nothing on the 2×2 mesh: a route for router 4 (past
/// the array) sets FLAGS.bad_route, CFG_DATA to PE 4 or 0xfd (neither a PE nor 0xfe/0xff)
/// sets FLAGS.bad_target, and neither changes anything: every readable register is as before
/// (but CFG_NEXT, which moves on as for any CFG_DATA write), and a program start sent to the
/// missing PEs starts none. Good writes (a real router, PE 3, 0xfe, 0xff) set neither flag;
/// each flag clears by writing 1 to it, alone.
#[test]
fn mesh_writes_that_address_nothing_are_flagged_and_dropped() {
    let mut tb = Tb::build(0x3e7, Pattern::Always, 2);
    let bad = |tb: &mut Tb| {
        let f = tb.read(Slot::Mesh, mesh::FLAGS);
        (mesh::flags::BAD_ROUTE.get(f), mesh::flags::BAD_TARGET.get(f))
    };
    // Everything readable but CFG_NEXT, with FLAGS' two sticky bits masked off.
    let regs = [
        mesh::PARAMS,
        mesh::MEMS,
        mesh::SX_NEXT,
        mesh::BUSY,
        mesh::DONE,
        mesh::ERR_CODES,
        mesh::FLAGS,
        mesh::METRICS,
        mesh::METRICS_HDR,
        mesh::RESULTS,
        mesh::RESULTS_LAST,
        mesh::CNT_VALUE,
        mesh::FEED_WORDS,
        mesh::SAMPLE_WORDS,
        mesh::GRAD_WORDS,
        mesh::CHAIN_STAT,
        mesh::CHAIN_CYCLE,
        mesh::CHAIN_FMAS,
        mesh::CHAIN_GRAD,
        mesh::FMAS,
    ];
    let sticky = mesh::flags::BAD_ROUTE.val(1) | mesh::flags::BAD_TARGET.val(1);
    let snapshot = |tb: &mut Tb| -> Vec<u32> {
        regs.iter().map(|&r| tb.read(Slot::Mesh, r) & if r == mesh::FLAGS { !sticky } else { !0 }).collect()
    };
    // A route entry: router, input port 4 (local), color 0, out to port 1 (E).
    let route = |router: u32| 0b00010 | (4 << 18) | (router << 24);
    let start = (1u32 << 16) | 1; // CTRL: start a one-instruction program

    // Good writes flag nothing.
    tb.write(Slot::Mesh, mesh::ROUTE, route(3));
    mesh_cfg(&mut tb, 3, 0x8000, &[1, 2]);
    mesh_cfg(&mut tb, 0xff, 0x8010, &[3]);
    mesh_cfg(&mut tb, 0xfe, 0x0001, &[0]);
    assert_eq!(bad(&mut tb), (0, 0), "good writes");
    let was = snapshot(&mut tb);

    tb.write(Slot::Mesh, mesh::ROUTE, route(4));
    assert_eq!(bad(&mut tb), (1, 0), "ROUTE to router 4");
    for pe in [4u32, 0xfd] {
        mesh_cfg(&mut tb, pe, 0x0000, &[start]);
        let next = tb.read(Slot::Mesh, mesh::CFG_NEXT);
        assert_eq!(next, 1 | (pe << 16), "PE {pe:#x}: CFG_NEXT moves on");
    }
    assert_eq!(bad(&mut tb), (1, 1), "CFG_DATA to PEs 4 and 0xfd");
    for _ in 0..100 {
        tb.step();
    }
    assert_eq!(snapshot(&mut tb), was, "nothing changed, no PE started");

    // Write 1 clears, each flag alone; 0 leaves them.
    tb.write(Slot::Mesh, mesh::FLAGS, 0);
    assert_eq!(bad(&mut tb), (1, 1));
    tb.write(Slot::Mesh, mesh::FLAGS, mesh::flags::BAD_ROUTE.val(1));
    assert_eq!(bad(&mut tb), (0, 1), "bad_route cleared");
    tb.write(Slot::Mesh, mesh::FLAGS, mesh::flags::BAD_TARGET.val(1));
    assert_eq!(bad(&mut tb), (0, 0), "bad_target cleared");

    // The same start sent to a PE that exists does start it (it refuses the empty program).
    mesh_cfg(&mut tb, 3, 0x0000, &[start]);
    for _ in 0..100 {
        tb.step();
    }
    let d = tb.read(Slot::Mesh, mesh::DONE);
    assert_eq!(mesh::done::DONE.get(d) | mesh::done::ERR.get(d), 1 << 3, "PE 3 ran: DONE {d:#x}");
    assert_eq!(bad(&mut tb), (0, 0));
}

/// The forward buffer (docs/memoryx-soc.md "SwarmX in the block", WOUT_CTRL.fwd): with a mesh
/// on SwarmX that runs no program (so the broadcast stalls once its routers are full), layer
/// 0's updated weights all go into the buffer and none to the sink; a STREAM of layer 1 then
/// waits behind them (none of its chunks retires); and a WOUT_CTRL write that leaves `reads`
/// off empties the buffer, after which the STREAM's beats go to the sink and retire.
#[test]
fn forwarded_updates_wait_in_the_buffer_ahead_of_streams_and_a_job_end_empties_it() {
    use ws_hdl::mesh_top::scenario::{params, TEST_PE};
    use ws_hdl::mesh_top::{self as top};

    const FWD_WORDS: u32 = 1024;
    let mut tb = Tb::build_with(0xf0d, Pattern::Mixed, 2, FWD_WORDS);
    let mut rng = StdRng::seed_from_u64(0xf0d);
    let fp = tb.read(Slot::Dma, mxdma::FWD_PARAMS);
    assert_eq!(mxdma::fwd_params::DEPTH_LOG2.get(fp), 10, "FWD_PARAMS: 1024 words");

    // The mesh's routes, no program: its PEs take no weight word, so the broadcast stalls.
    for w in top::routes(&params(2, TEST_PE)).writes() {
        let v = u32::from(w.mask)
            | (w.quota << 8)
            | ((w.color as u32) << 16)
            | ((w.in_port as u32) << 18)
            | ((w.router as u32) << 24);
        tb.write(Slot::Mesh, mesh::ROUTE, v);
    }
    tb.write(Slot::Mesh, mesh::CTRL, mesh::ctrl::SWARM.val(1));

    // Two SGD layers: 0 of 300 weights (forwarded), 1 of 100.
    let lens = [300u32, 100];
    let chunk = 64u32;
    let h = Hyper::SGD;
    for (l, &len) in lens.iter().enumerate() {
        let base = 0x1_0000 * (l as u32 + 1);
        let w: Vec<u32> = (0..len).map(|_| rng.random_range(-1.0f32..1.0).to_bits()).collect();
        tb.store_put(base, &w);
        let b = reg::layer(l as u32);
        tb.write(Slot::Mx, b + reg::W_BASE, base);
        tb.write(Slot::Mx, b + reg::LEN, len);
        tb.write(Slot::Mx, b + reg::CHUNK, chunk);
        tb.write(Slot::Mx, b + reg::MODE, Opt::of(&h) as u32);
        tb.write(Slot::Mx, b + reg::STEP, 1);
        tb.write(Slot::Mx, reg::CMD, reg::OP_ENABLE | ((l as u32) << 4));
        for _ in 0..40 {
            tb.step();
        }
        assert_eq!(tb.read(Slot::Mx, b + reg::L_STATUS) & 1, 1, "layer {l} enabled");
    }
    write_slot(&mut tb, 0, &consts(&h, 1));
    let fwd =
        mxdma::wout_ctrl::READS.val(1) | mxdma::wout_ctrl::FWD.val(1) | mxdma::wout_ctrl::FWD_LAYER.val(0);
    tb.write(Slot::Dma, mxdma::WOUT_CTRL, fwd);
    let dropped0 = tb.read(Slot::Dma, mxdma::WOUT_DROPPED);

    // Layer 0's step: every updated weight goes into the buffer.
    let g: Vec<u32> = (0..lens[0]).map(|_| rng.random_range(-1.0f32..1.0).to_bits()).collect();
    let (gbase, glen) = (0x8000u32, 0x800u32);
    tb.ring_put(gbase, glen, 0, &g);
    assert_eq!(tb.op(OP_TO_GRAD, (gbase, glen, 0), 0, lens[0], (0, 1, chunk, 0)), 0, "gradient feed");
    let start = tb.dut.cycle();
    while tb.read(Slot::Mx, reg::layer(0) + reg::DONE) & 0xffff != lens[0].div_ceil(chunk) {
        assert!(tb.dut.cycle() - start < 100_000, "layer 0's update retires");
    }
    assert_eq!(tb.read(Slot::Mx, reg::ERR) & 0xff, 0, "streamer error");
    assert_eq!(tb.read(Slot::Dma, mxdma::FWD_WORDS), lens[0], "every update word forwarded");
    assert_eq!(tb.read(Slot::Dma, mxdma::WOUT_DROPPED), dropped0, "no update word in the sink");
    let level = tb.read(Slot::Dma, mxdma::FWD_LEVEL);
    assert!(
        level > 0 && level <= lens[0],
        "the buffer holds what the stalled broadcast did not take: {level}"
    );

    // A STREAM of layer 1 waits behind the forwarded words.
    let streamed = |tb: &mut Tb| tb.read(Slot::Mx, reg::COUNTERS + 4 * mx::cnt::CHUNKS_STREAMED);
    let streamed0 = streamed(&mut tb);
    tb.write(Slot::Mx, reg::CMD, reg::OP_STREAM | (1 << 4));
    for _ in 0..2000 {
        tb.step();
    }
    assert_eq!(streamed(&mut tb), streamed0, "no STREAM chunk passes forwarded words");
    assert_eq!(tb.read(Slot::Dma, mxdma::FWD_LEVEL), level, "the buffer still holds them");

    // The job ends: WOUT_CTRL with `reads` off empties the buffer, and the STREAM goes to the sink.
    tb.write(Slot::Dma, mxdma::WOUT_CTRL, 0);
    let start = tb.dut.cycle();
    while streamed(&mut tb) != streamed0 + lens[1].div_ceil(chunk) {
        assert!(tb.dut.cycle() - start < 100_000, "the STREAM retires into the sink");
    }
    assert_eq!(tb.read(Slot::Dma, mxdma::FWD_LEVEL), 0, "the buffer is empty");
    assert_eq!(tb.read(Slot::Dma, mxdma::WOUT_DROPPED), dropped0 + lens[1], "the STREAM's words in the sink");
    assert_eq!(tb.read(Slot::Dma, mxdma::FWD_WORDS), lens[0], "nothing more forwarded");
    assert_eq!(tb.dut.get(tb.p.mem_err), 0, "store protocol");
}
