//! MemoryX (docs/memoryx-soc.md): the streamer's layer table and constant slots (`mx`,
//! slot 16, docs/memoryx-store.md) and the data mover (`mxdma`, slot 17) that moves words
//! between rings in the link engine's DMA RAM and the weight store. Every wait here is
//! bounded by a poll budget; the caller turns an expired budget into a `Timeout` answer.

use ws_common::golden::optim::Consts;
use ws_common::regmap::{mx, mxdma};

use crate::pac;

/// The streamer's counter of STREAM chunks retired (docs/memoryx-store.md "Counters").
const CHUNKS_STREAMED: usize = 2;

/// Data-mover operations (`mxdma` CMD).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Op {
    /// Ring words into the store.
    RingToStore = 1,
    /// Store words into a ring.
    StoreToRing = 2,
    /// Ring words into the streamer as gradient flits.
    RingToGrad = 3,
    /// Ring words into the wafer mesh's weight ingress as weight flits (layer, step and
    /// chunk words from the `grad` argument of [`MemoryX::mover`]).
    RingToMesh = 4,
    /// Ring words into PE SRAMs from the mesh's SX_TARGET on.
    RingToSamples = 5,
}

/// A ring in the DMA RAM and where an operation starts in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ring {
    /// Byte address, aligned to `len`.
    pub base: u32,
    /// Bytes, a power of two.
    pub len: u32,
    /// Byte offset of the first word.
    pub off: u32,
}

/// Why a MemoryX operation did not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MxError {
    /// The data mover refused or failed the operation: its STATUS.err code.
    Mover(u8),
    /// ENABLE refused the layer entry: the streamer's refusal code.
    Refused(u8),
    /// The streamer reported an error (ERR code, layer) while a step ran.
    Streamer(u8, u16),
    /// A wait ran out of budget.
    Timeout,
}

/// Build parameters of the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MxParams {
    /// Lanes of the streamer.
    pub lanes: u32,
    /// Words per store beat.
    pub beat_words: u32,
    /// Layer table entries.
    pub max_layers: u32,
    /// Constant slots.
    pub num_slots: u32,
    /// Bytes of the weight store.
    pub store_bytes: u32,
}

/// The two register blocks of MemoryX.
#[derive(Debug)]
pub struct MemoryX {
    mx: pac::Mx,
    dma: pac::Mxdma,
}

impl MemoryX {
    /// Takes both blocks; the weight-out sink drops and counts (nothing reads weights out
    /// until the wafers are wired behind SwarmX).
    pub fn new(mx: pac::Mx, dma: pac::Mxdma) -> Self {
        dma.wout_ctrl().write(0);
        Self { mx, dma }
    }

    /// Turns the streamer's per-chunk trace records on or off (CTRL.TRACE_EN). On, a record
    /// that has nowhere to go stalls retirement, so only the trace unit, which always takes
    /// them, may be behind it (docs/memoryx-store.md "Trace records").
    pub fn set_trace(&self, on: bool) {
        self.mx.ctrl().write(mx::ctrl::TRACE_EN.val(u32::from(on)));
    }

    /// The build parameters.
    pub fn params(&self) -> MxParams {
        let c = self.mx.config().read();
        MxParams {
            lanes: mx::config::LANES.get(c),
            beat_words: mx::config::BEAT_WORDS.get(c),
            max_layers: mx::config::MAX_LAYERS.get(c),
            num_slots: mx::config::NUM_SLOTS.get(c),
            store_bytes: self.mx.store_bytes().read(),
        }
    }

    /// Writes layer `i`'s entry (bases of w, m, v, vmax; length; chunk; optimizer code; fp32
    /// weight flits; step 0 on slot `slot`) and ENABLEs it, waiting for the verdict.
    #[allow(clippy::too_many_arguments)]
    pub fn enable_layer(
        &mut self,
        i: usize,
        bases: [u32; 4],
        len: u32,
        chunk: u32,
        opt: u32,
        slot: u32,
        budget: u32,
    ) -> Result<(), MxError> {
        self.mx.l_w_base(i).write(bases[0]);
        self.mx.l_m_base(i).write(bases[1]);
        self.mx.l_v_base(i).write(bases[2]);
        self.mx.l_vmax_base(i).write(bases[3]);
        self.mx.l_len(i).write(len);
        self.mx.l_chunk(i).write(chunk);
        self.mx.l_mode(i).write(opt);
        self.mx.l_step(i).write(slot << 16);
        self.wait_cmd(budget)?;
        self.mx.cmd().write(mx::cmd::OP.val(1) | mx::cmd::LAYER.val(i as u32));
        self.wait_cmd(budget)?;
        let st = self.mx.l_status(i).read();
        if st & 1 == 0 {
            return Err(MxError::Refused((st >> 8) as u8));
        }
        Ok(())
    }

    /// DISABLEs layer `i`: the streamer takes no new chunk for it and completes the command
    /// once none is in flight (docs/memoryx-store.md "Layer commands").
    pub fn disable_layer(&mut self, i: usize, budget: u32) -> Result<(), MxError> {
        self.wait_cmd(budget)?;
        self.mx.cmd().write(mx::cmd::OP.val(2) | mx::cmd::LAYER.val(i as u32));
        self.wait_cmd(budget)
    }

    fn wait_cmd(&self, budget: u32) -> Result<(), MxError> {
        for _ in 0..budget.max(1) {
            if mx::status::CMD_BUSY.get(self.mx.status().read()) == 0 {
                return Ok(());
            }
        }
        Err(MxError::Timeout)
    }

    /// Writes constant slot `s`.
    pub fn write_slot(&mut self, s: usize, c: &Consts) {
        let r = &self.mx;
        r.s_flags(s).write(c.flags);
        r.s_gscale(s).write(c.gscale);
        r.s_wd(s).write(c.wd);
        r.s_decay(s).write(c.decay);
        r.s_k1(s).write(c.k1);
        r.s_k2(s).write(c.k2);
        r.s_beta2(s).write(c.beta2);
        r.s_c2(s).write(c.c2);
        r.s_ibc2s(s).write(c.ibc2s);
        r.s_eps(s).write(c.eps);
        r.s_neg_rate(s).write(c.neg_rate);
    }

    /// Points layer `i` at step `t` (its low 16 bits, the flit's step field) on slot `s`;
    /// restarts its DONE count.
    pub fn set_step(&mut self, i: usize, t: u32, s: u32) {
        self.mx.l_step(i).write((t & 0xffff) | (s << 16));
    }

    /// Update chunks layer `i` retired since its STEP was written.
    pub fn done_chunks(&self, i: usize) -> u32 {
        self.mx.l_done(i).read() & 0xffff
    }

    /// Errors the streamer counted since reset.
    pub fn err_count(&self) -> u32 {
        self.mx.err_count().read()
    }

    /// The streamer's last error: (code, layer).
    pub fn last_err(&self) -> (u8, u16) {
        let e = self.mx.err().read();
        (mx::err::CODE.get(e) as u8, mx::err::LAYER.get(e) as u16)
    }

    /// Waits until layer `i` has retired `chunks` chunks since its STEP; an error the
    /// streamer counts meanwhile (beyond `errs_before`) ends the wait.
    pub fn wait_done(&self, i: usize, chunks: u32, errs_before: u32, budget: u32) -> Result<(), MxError> {
        for _ in 0..budget.max(1) {
            if self.done_chunks(i) >= chunks {
                return Ok(());
            }
            if self.err_count() != errs_before {
                let (code, layer) = self.last_err();
                return Err(MxError::Streamer(code, layer));
            }
        }
        Err(MxError::Timeout)
    }

    /// The streamer's cycle counter (low word).
    pub fn cycles(&self) -> u32 {
        let lo = self.mx.ts_lo().read();
        let _ = self.mx.ts_hi().read();
        lo
    }

    /// Streamer counter `i` (docs/memoryx-store.md "Counters").
    pub fn counter(&self, i: usize) -> u32 {
        self.mx.cnt(i).read()
    }

    /// The data mover's (ops, refused, status, weight-out flits, weight-out dropped,
    /// gradient flits).
    pub fn mover_counters(&self) -> [u32; 6] {
        let d = &self.dma;
        [
            d.ops().read(),
            d.refused().read(),
            d.status().read(),
            d.wout_flits().read(),
            d.wout_dropped().read(),
            d.grad_flits().read(),
        ]
    }

    /// Where the next gradient feeds go (GRAD_ROUTE): `ports` = 0 straight into the
    /// streamer; K > 0 fanned out over SwarmX's downstream ports 0..K−1 (the ring holds K
    /// interleaved words per flit), with the ports of `skip` read and not sent.
    pub fn set_route(&mut self, ports: u32, skip: u16) {
        self.dma
            .grad_route()
            .write(mxdma::grad_route::PORTS.val(ports) | mxdma::grad_route::SKIP.val(u32::from(skip)));
    }

    /// Sends the weight-out stream down SwarmX's broadcast (WOUT_CTRL.swarm), keeping the
    /// capture setting.
    pub fn set_wout_swarm(&mut self, on: bool) {
        let c = self.dma.wout_ctrl().read();
        if mxdma::wout_ctrl::SWARM.get(c) != u32::from(on) {
            self.dma.wout_ctrl().write(mxdma::wout_ctrl::SWARM.set(c, u32::from(on)));
        }
    }

    /// With a mesh on SwarmX, SwarmX's broadcast takes the streamer's STREAM chunks instead
    /// of the data mover's op 4 flits, and the updated weights go to the sink
    /// (WOUT_CTRL.reads, keeping the other settings). Only while no weight flit is in flight.
    pub fn set_wout_reads(&mut self, on: bool) {
        let c = self.dma.wout_ctrl().read();
        if mxdma::wout_ctrl::READS.get(c) != u32::from(on) {
            self.dma.wout_ctrl().write(mxdma::wout_ctrl::READS.set(c, u32::from(on)));
        }
    }

    /// The words MemoryX's forward buffer holds (WOUT_CTRL.fwd, mxdma version 1.2 on; 0: the
    /// block has none).
    pub fn forward_depth(&self) -> u32 {
        let id = self.dma.id().read();
        let (major, minor) = ((id >> 8) & 0xff, id & 0xff);
        if major < 1 || (major == 1 && minor < 2) {
            return 0;
        }
        match mxdma::fwd_params::DEPTH_LOG2.get(self.dma.fwd_params().read()) {
            0 => 0,
            n if n < 32 => 1 << n,
            _ => 0,
        }
    }

    /// Forwards layer `layer`'s updated weights through the forward buffer into SwarmX's
    /// broadcast (WOUT_CTRL.fwd and fwd_layer, keeping the other settings); `None` sends every
    /// update to the sink. Only between that layer's updates.
    pub fn set_forward(&mut self, layer: Option<usize>) {
        let c = self.dma.wout_ctrl().read();
        let c = mxdma::wout_ctrl::FWD.set(c, u32::from(layer.is_some()));
        let c = mxdma::wout_ctrl::FWD_LAYER.set(c, layer.unwrap_or(0) as u32);
        self.dma.wout_ctrl().write(c);
    }

    /// Words in the forward buffer now (FWD_LEVEL).
    pub fn forward_level(&self) -> u32 {
        self.dma.fwd_level().read()
    }

    /// Updated words taken into the forward buffer since reset (FWD_WORDS).
    pub fn forwarded(&self) -> u32 {
        self.dma.fwd_words().read()
    }

    /// Ends a store-fed job's weight streams: WOUT_CTRL.reads and fwd off (written even when
    /// they are off already), which also empties the forward buffer. Returns the words it
    /// held, which no step took.
    pub fn end_streams(&mut self) -> u32 {
        let left = self.forward_level();
        let c = self.dma.wout_ctrl().read();
        let c = mxdma::wout_ctrl::READS.set(c, 0);
        self.dma.wout_ctrl().write(mxdma::wout_ctrl::FWD.set(c, 0));
        left
    }

    /// Whether the data mover has WOUT_CTRL.reads (version 1.1 on).
    pub fn has_reads(&self) -> bool {
        // The ID word: block id, major, minor (a byte each below the id).
        let id = self.dma.id().read();
        let (major, minor) = ((id >> 8) & 0xff, id & 0xff);
        major > 1 || (major == 1 && minor >= 1)
    }

    /// STREAMs layer `i`'s weights from the store onto the weight-out stream, once the
    /// command before has completed; the command completes when every chunk has a
    /// descriptor (docs/memoryx-store.md "Layer commands").
    pub fn stream(&mut self, i: usize, budget: u32) -> Result<(), MxError> {
        self.wait_cmd(budget)?;
        self.mx.cmd().write(mx::cmd::OP.val(3) | mx::cmd::LAYER.val(i as u32));
        Ok(())
    }

    /// STREAMs layer `i` once its DONE reaches `after` (STREAM_AFTER, version 1.1): the
    /// streamer reads the layer back from the store the cycle after the update's last chunk
    /// retires, and stamps the flits with step STEP + 1. The command stays busy until then,
    /// so no other command (and no STEP write of the layer) may follow before it completes
    /// ([`Self::wait_idle`]).
    pub fn stream_after(&mut self, i: usize, after: u32, budget: u32) -> Result<(), MxError> {
        self.wait_cmd(budget)?;
        self.mx.cmd().write(mx::cmd::OP.val(4) | mx::cmd::LAYER.val(i as u32) | mx::cmd::AFTER.val(after));
        Ok(())
    }

    /// Waits until no layer command is pending (CMD_BUSY clear).
    pub fn wait_idle(&self, budget: u32) -> Result<(), MxError> {
        self.wait_cmd(budget)
    }

    /// STREAM chunks the streamer has retired since reset (CHUNKS_STREAMED).
    pub fn streamed(&self) -> u32 {
        self.counter(CHUNKS_STREAMED)
    }

    /// Waits until the streamer has retired `chunks` STREAM chunks in all (its CHUNKS_STREAMED
    /// counter; a chunk retires once its last weight flit has left); an error it counts
    /// meanwhile (beyond `errs_before`) ends the wait.
    pub fn wait_streamed(&self, chunks: u32, errs_before: u32, budget: u32) -> Result<(), MxError> {
        for _ in 0..budget.max(1) {
            if self.counter(CHUNKS_STREAMED).wrapping_sub(chunks) as i32 >= 0 {
                return Ok(());
            }
            if self.err_count() != errs_before {
                let (code, layer) = self.last_err();
                return Err(MxError::Streamer(code, layer));
            }
        }
        Err(MxError::Timeout)
    }

    /// Runs one data-mover operation of `words` words and waits for it. `store` is the store
    /// byte address (ops 1, 2); `grad` the (layer, step, chunk params, first chunk) of ops 3
    /// and 4.
    pub fn mover(
        &mut self,
        op: Op,
        ring: Ring,
        store: u32,
        words: u32,
        grad: (u32, u32, u32, u32),
        budget: u32,
    ) -> Result<(), MxError> {
        self.start_mover(op, ring, store, words, grad);
        for _ in 0..budget.max(1) {
            if let Some(r) = self.mover_done() {
                return r;
            }
        }
        Err(MxError::Timeout)
    }

    /// Starts one data-mover operation (see [`MemoryX::mover`]) without waiting for it.
    pub fn start_mover(&mut self, op: Op, ring: Ring, store: u32, words: u32, grad: (u32, u32, u32, u32)) {
        let d = &self.dma;
        d.ring_base().write(ring.base);
        d.ring_len().write(ring.len);
        d.ring_off().write(ring.off);
        d.store_addr().write(store);
        d.words().write(words);
        d.grad_hdr().write(mxdma::grad_hdr::LAYER.val(grad.0) | mxdma::grad_hdr::STEP.val(grad.1 & 0xffff));
        d.grad_chunk().write(mxdma::grad_chunk::PARAMS.val(grad.2) | mxdma::grad_chunk::FIRST.val(grad.3));
        d.cmd().write(op as u32);
    }

    /// Starts operation `op` again on the ring, store address and headers of the operation
    /// before, from ring offset `off`, for `words` words (fewer register writes, for a run of
    /// operations on one ring).
    pub fn restart_mover(&mut self, op: Op, off: u32, words: u32) {
        let d = &self.dma;
        d.ring_off().write(off);
        d.words().write(words);
        d.cmd().write(op as u32);
    }

    /// How the operation last started ended, or `None` while it runs.
    pub fn mover_done(&self) -> Option<Result<(), MxError>> {
        let st = self.dma.status().read();
        if mxdma::status::BUSY.get(st) != 0 {
            return None;
        }
        Some(match mxdma::status::ERR.get(st) as u8 {
            0 => Ok(()),
            e => Err(MxError::Mover(e)),
        })
    }

    /// Turns the capture sink on over `ring` (its `off` unused), its head starting at stream
    /// position `start` (WOUT_START, 31 bits) and allowed up to `limit`; or off. The
    /// weight-out's SwarmX setting is kept. Returns whether the sink took the ring.
    pub fn set_capture(&mut self, ring: Option<(Ring, u32, u32)>) -> bool {
        let d = &self.dma;
        let c = d.wout_ctrl().read();
        match ring {
            None => {
                d.wout_ctrl().write(mxdma::wout_ctrl::CAPTURE.set(c, 0));
                true
            }
            Some((r, start, limit)) => {
                d.wout_base().write(r.base);
                d.wout_len().write(r.len);
                d.wout_start().write(start & 0x7fff_ffff);
                d.wout_limit().write(limit & 0x7fff_ffff);
                d.wout_ctrl().write(mxdma::wout_ctrl::CAPTURE.set(c, 1));
                // The sink checks the ring the cycle after the write.
                (0..64).any(|_| mxdma::wout_head::ON.get(d.wout_head().read()) != 0)
            }
        }
    }

    /// The capture sink's head (WOUT_HEAD.bytes, a 31-bit stream position).
    pub fn capture_head(&self) -> u32 {
        mxdma::wout_head::BYTES.get(self.dma.wout_head().read())
    }

    /// Lets the capture sink write up to stream position `limit` (31 bits).
    pub fn set_capture_limit(&mut self, limit: u32) {
        self.dma.wout_limit().write(limit & 0x7fff_ffff);
    }
}
