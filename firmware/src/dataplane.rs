//! The data plane behind the bulk channels (docs/memoryx-soc.md "Firmware"): the link
//! engine's bulk mode and MemoryX's host commands.
//!
//! **Bulk modes.** In echo mode (the boot default, the link's self-test) every RX window
//! loops back into its TX slot. In MemoryX mode the DMA RAM is split in four rings:
//!
//! | ring | bytes | stream |
//! |---|---|---|
//! | RX0 | [0, ¼) | channel 2, weights host → board: the words of `MxWrite` |
//! | RX1 | [¼, ½) | channel 3, gradients host → board: the words of `MxStep` |
//! | RX2 | [½, ¾) | channel 4, data: the samples of `MeshStep` |
//! | TX0 | [¾, 1) | channel 2, weights board → host: the words of `MxRead`, the gradients of `MeshStep` |
//!
//! The CPU never touches a payload word: the data mover moves them between these rings and
//! the weight store, and the firmware only moves the rings' positions (RX released, TX ready),
//! so the link's credit flow control paces the host to the store.
//!
//! **Streams stay in step.** Every transfer consumes exactly the words its request names, in
//! order. A write or step that is refused after its words were sent (a bad range, a step out
//! of order) still consumes them, so the next request finds its own words first.
//!
//! Every wait is bounded: when the host stops sending, the request is answered `Timeout`.

mod mesh;

use ws_common::ctrl::cmd::{
    opcode, BulkMode, LinkMode, MeshSetup, MeshStep, MeshTrain, MxCounterValues, MxCounters, MxCreate,
    MxInfo, MxInfoData, MxRead, MxStep, MxStepDone, MxWrite, SwarmConfig, SwarmEventList, SwarmEvents,
    SwarmStatus, SwarmStatusData, MAX_REFEEDS, MX_COUNTERS, SWARM_MAX_EVENTS,
};
use ws_common::ctrl::{Command, Status};
use ws_common::link::control::{encode_error, encode_response};

use crate::hal::link::{LinkEngine, Window};
use crate::hal::mx::{MemoryX, MxError, Op, Ring};
use crate::hal::swarm::SwarmX;
use crate::link::DataPlane;
use crate::mx::{opt_code, Layer, Table};
use crate::swarm::{Event, EventKind, Policy};

/// RX slot of the weights the host writes (channel 2).
const RX_WEIGHTS: usize = 0;
/// RX slot of the gradients (channel 3).
const RX_GRADS: usize = 1;
/// TX slot of the weights the host reads (channel 2).
const TX_WEIGHTS: usize = 0;

/// The link's bulk channels and MemoryX, as the host drives them.
#[derive(Debug)]
pub struct MemoryXPlane {
    mx: MemoryX,
    table: Table,
    mode: BulkMode,
    slots: u32,
    lanes: u32,
    max_layers: u32,
    /// Register polls before a wait gives up.
    budget: u32,
    host_refusals: u32,
    steps: u32,
    swarm: Option<SwarmPlane>,
    mesh: Option<mesh::MeshPlane>,
}

/// SwarmX and the firmware's policy for it (`crate::swarm`), when the SoC has the node.
#[derive(Debug)]
struct SwarmPlane {
    hw: SwarmX,
    policy: Policy,
    /// CNT_ERRORS and CNT_REDUCED at the last look.
    errors: u32,
    reduced: u32,
    /// Fault injection (`SwarmConfig::dead`): wafers whose words multi-wafer steps skip.
    dead: u16,
    /// The ports with a wafer behind them: ports 0..K−1 during a step of K wafers, every
    /// port otherwise. The node's mask never holds a port outside it.
    fed: u16,
}

/// How one chunk of a multi-wafer step ended.
enum ChunkEnd {
    /// It retired in the store.
    Retired,
    /// SwarmX aborted it; `clean` when the streamer refused it at its first flit, so none
    /// of it was applied and it can be fed again.
    Aborted { clean: bool },
}

/// The streamer's code for a gradient chunk whose first flit is not a gradient (SwarmX's
/// error flit in its place): refused whole, nothing applied (docs/memoryx-store.md "Errors").
const E_GRAD_KIND: u8 = 0x14;

/// The node's ports 0..K−1, which a step of K wafers feeds.
fn fed_ports(wafers: u32) -> u16 {
    1u16.checked_shl(wafers).map_or(u16::MAX, |b| b.wrapping_sub(1))
}

/// Failure of a request: its status, logged with the cause.
fn fault(e: MxError) -> Status {
    #[cfg(feature = "defmt")]
    defmt::warn!("memoryx: {}", e);
    match e {
        MxError::Timeout => Status::Timeout,
        _ => Status::DeviceFault,
    }
}

impl MemoryXPlane {
    /// Takes MemoryX. `budget` bounds every wait, in register polls (about 250 ms of board
    /// time is right: long against any transfer, short against the host's timeout).
    pub fn new(mx: MemoryX, budget: u32) -> Self {
        let p = mx.params();
        Self {
            table: Table::new(p.store_bytes, p.beat_words, p.max_layers),
            mx,
            mode: BulkMode::Echo,
            slots: p.num_slots.max(1),
            lanes: p.lanes,
            max_layers: p.max_layers,
            budget,
            host_refusals: 0,
            steps: 0,
            swarm: None,
            mesh: None,
        }
    }

    /// Adds the SwarmX node `hw` (`SwarmX::probe`'s answer: `None` on a SoC without one),
    /// every port active, fp32, no scale.
    pub fn with_swarm(mut self, hw: Option<SwarmX>) -> Self {
        self.swarm = hw.map(|hw| {
            let mut policy = Policy::new(hw.params().ports);
            let (errors, reduced) = hw.progress();
            if let Ok(s) = policy.set_host(policy.active(), false) {
                hw.apply(&s);
            }
            // An abort wakes the core from WFI (rt::wait_for_host), so the policy acts at once.
            hw.enable_irq();
            #[cfg(feature = "defmt")]
            defmt::info!("swarmx: {=u8} ports, {=u8} adder levels", hw.params().ports, hw.params().levels);
            SwarmPlane { hw, policy, errors, reduced, dead: 0, fed: u16::MAX }
        });
        self
    }

    /// Acts on what SwarmX reported since the last call: a latched abort goes to the policy,
    /// whose new mask and scale go to the node; reduced flits without a new abort forgive
    /// every strike. Call it from the main loop.
    pub fn poll(&mut self) {
        let Some(sw) = self.swarm.as_mut() else { return };
        if let Some(a) = sw.hw.take_abort() {
            #[cfg(feature = "defmt")]
            defmt::warn!(
                "swarmx: chunk aborted (code {=u8}, port {=u8}, layer {=u16} step {=u16} chunk {=u16})",
                a.code,
                a.port,
                a.layer,
                a.step,
                a.chunk
            );
            if sw.policy.on_abort(&a).is_some() {
                let s = sw.policy.settings_within(sw.fed);
                sw.hw.apply(&s);
                #[cfg(feature = "defmt")]
                defmt::warn!("swarmx: ports now {=u16:#06x}", s.mask);
            }
        }
        let (errors, reduced) = sw.hw.progress();
        if errors == sw.errors && reduced != sw.reduced {
            sw.policy.on_progress();
        }
        (sw.errors, sw.reduced) = (errors, reduced);
    }

    fn swarm_status(&self) -> Result<SwarmStatusData, Status> {
        let sw = self.swarm.as_ref().ok_or(Status::NotPresent)?;
        let mut s = sw.hw.status();
        s.host_mask = sw.policy.host_mask();
        s.events_lost = sw.policy.lost();
        for (i, p) in s.port[..usize::from(s.ports)].iter_mut().enumerate() {
            p.state = sw.policy.state(i).code();
            p.strikes = sw.policy.strikes(i);
        }
        Ok(s)
    }

    fn swarm_config(&mut self, q: &SwarmConfig) -> Result<SwarmStatusData, Status> {
        let sw = self.swarm.as_mut().ok_or(Status::NotPresent)?;
        let p = sw.hw.params();
        if q.dtype > 2 || (q.dtype != 0 && !p.bf16) || (q.scale && !p.scale) {
            return Err(Status::BadArgument);
        }
        let s = sw.policy.set_host(q.mask, q.scale).map_err(|_| Status::BadArgument)?;
        sw.hw.set_format(q.dtype, q.timeout);
        sw.dead = q.dead;
        sw.hw.apply(&s);
        self.swarm_status()
    }

    fn swarm_events(&mut self) -> Result<SwarmEventList, Status> {
        let sw = self.swarm.as_mut().ok_or(Status::NotPresent)?;
        let blank =
            Event { seq: 0, kind: EventKind::Abort, code: 0, port: 0, mask: 0, layer: 0, step: 0, chunk: 0 };
        let mut got = [blank; SWARM_MAX_EVENTS];
        let n = sw.policy.drain(&mut got);
        let mut r = SwarmEventList { count: n as u8, ..Default::default() };
        for (w, e) in r.events.iter_mut().zip(&got[..n]) {
            *w = ws_common::ctrl::cmd::SwarmEvent {
                seq: e.seq,
                kind: e.kind as u8,
                code: e.code,
                port: e.port,
                mask: e.mask,
                layer: e.layer,
                step: e.step,
                chunk: e.chunk,
            };
        }
        Ok(r)
    }

    /// The rings of MemoryX mode, each a quarter of the DMA RAM: RX0, RX1, RX2, TX0.
    fn rings(eng: &LinkEngine) -> [Window; 4] {
        let q = eng.dma_bytes() / 4;
        [0, 1, 2, 3].map(|i| Window { base: i * q, len: q })
    }

    /// Waits until every looped slot has echoed and had acknowledged all it received, and
    /// TX0 all it was given: the only moments the windows may change.
    fn idle(&self, eng: &LinkEngine) -> Result<(), Status> {
        for _ in 0..self.budget.max(1) {
            let loop_mask = eng.loopback();
            let looped_idle =
                (0..3).all(|i| loop_mask & (1 << i) == 0 || eng.rx_committed(i) == eng.tx_acked(i));
            let tx_idle = loop_mask & 1 != 0 || eng.tx_ready(TX_WEIGHTS) == eng.tx_acked(TX_WEIGHTS);
            if looped_idle && tx_idle {
                return Ok(());
            }
        }
        Err(Status::Timeout)
    }

    fn set_mode(&mut self, want: BulkMode, eng: &mut LinkEngine) -> Result<BulkMode, Status> {
        if want == self.mode {
            return Ok(want);
        }
        self.idle(eng)?;
        let r = Self::rings(eng);
        match want {
            BulkMode::MemoryX => {
                eng.close_all();
                eng.set_loopback(0);
                let ok = eng.open_rx(0, r[0], eng.rx_committed(0))
                    && eng.open_rx(1, r[1], eng.rx_committed(1))
                    && eng.open_rx(2, r[2], eng.rx_committed(2))
                    && eng.open_tx(TX_WEIGHTS, r[3], eng.tx_sent(TX_WEIGHTS));
                if !ok {
                    return Err(Status::DeviceFault);
                }
            }
            BulkMode::Echo => {
                // An echo sends RX byte p from the ring slot RX wrote it to, so it needs the
                // two streams at the same position: true after a fresh HELLO.
                if (0..3).any(|i| eng.rx_committed(i) != eng.tx_sent(i)) {
                    return Err(Status::WrongMode);
                }
                eng.close_all();
                eng.set_loopback(0b111);
                let q = eng.dma_bytes() / 4;
                for i in 0..3 {
                    if !eng.open_rx(i, Window { base: i as u32 * q, len: q }, 0) {
                        return Err(Status::DeviceFault);
                    }
                }
            }
        }
        #[cfg(feature = "defmt")]
        defmt::info!("link: bulk mode {=u8}", want as u8);
        self.mode = want;
        Ok(want)
    }

    fn memoryx_mode(&self) -> Result<(), Status> {
        if self.mode == BulkMode::MemoryX {
            Ok(())
        } else {
            Err(Status::WrongMode)
        }
    }

    fn info(&self) -> MxInfoData {
        MxInfoData {
            lanes: self.lanes as u8,
            beat_words: self.table.beat_words() as u8,
            max_layers: self.max_layers as u8,
            mode: self.mode as u8,
            store_bytes: self.table.store_bytes(),
            free_bytes: self.table.free_bytes(),
            layers: self.table.layer_mask(),
            chunk: crate::mx::CHUNK as u16,
        }
    }

    fn create(&mut self, c: &MxCreate) -> Result<ws_common::ctrl::cmd::MxLayerInfo, Status> {
        let l = self.table.create(c)?;
        let i = c.layer as usize;
        let slot = c.layer as u32 % self.slots;
        let r =
            self.mx.enable_layer(i, l.info.bases, l.len, l.info.chunk, opt_code(&l.hyper), slot, self.budget);
        if let Err(e) = r {
            self.table.remove(c.layer);
            return Err(fault(e));
        }
        #[cfg(feature = "defmt")]
        defmt::info!(
            "memoryx: layer {=u16}: {=u32} params, opt {=u32}, w at {=u32:#x}",
            c.layer,
            l.len,
            opt_code(&l.hyper),
            l.info.bases[0]
        );
        Ok(l.info)
    }

    /// Waits until RX slot `slot` holds `bytes` unreleased bytes; returns the ring offset of
    /// the first.
    fn wait_rx(&self, eng: &LinkEngine, slot: usize, bytes: u32, len: u32) -> Result<u32, Status> {
        let rel = eng.rx_released(slot);
        for _ in 0..self.budget.max(1) {
            if eng.rx_committed(slot).wrapping_sub(rel) >= bytes {
                return Ok(rel & (len - 1));
            }
        }
        Err(Status::Timeout)
    }

    fn release(eng: &mut LinkEngine, slot: usize, bytes: u32) {
        let p = eng.rx_released(slot).wrapping_add(bytes);
        eng.release_rx(slot, p);
    }

    /// Consumes `words` words of RX slot `slot` unread (a refused request's payload).
    fn drain(&self, eng: &mut LinkEngine, slot: usize, words: u32) {
        let len = Self::rings(eng)[slot].len;
        let mut left = words;
        while left > 0 {
            let piece = left.min(len / 8);
            if self.wait_rx(eng, slot, 4 * piece, len).is_err() {
                return;
            }
            Self::release(eng, slot, 4 * piece);
            left -= piece;
        }
    }

    /// The largest piece of a transfer: half a ring, so the host fills one half while the
    /// data mover empties the other.
    fn piece_words(len: u32) -> u32 {
        len / 8
    }

    fn write(&mut self, q: &MxWrite, eng: &mut LinkEngine) -> Result<u32, Status> {
        self.memoryx_mode()?;
        let run = match self.table.run(&q.0) {
            Ok(r) => r,
            Err(s) => {
                self.drain(eng, RX_WEIGHTS, q.0.count);
                return Err(s);
            }
        };
        let ring = Self::rings(eng)[0];
        let mut done = 0u32;
        while done < run.words {
            let piece = (run.words - done).min(Self::piece_words(ring.len));
            let off = self.wait_rx(eng, RX_WEIGHTS, 4 * piece, ring.len)?;
            let r = Ring { base: ring.base, len: ring.len, off };
            self.mx
                .mover(Op::RingToStore, r, run.addr + 4 * done, piece, (0, 0, 0, 0), self.budget)
                .map_err(fault)?;
            Self::release(eng, RX_WEIGHTS, 4 * piece);
            done += piece;
        }
        Ok(done)
    }

    fn read(&mut self, q: &MxRead, eng: &mut LinkEngine) -> Result<u32, Status> {
        self.memoryx_mode()?;
        let run = self.table.run(&q.0)?;
        let ring = Self::rings(eng)[3];
        let mut done = 0u32;
        while done < run.words {
            let piece = (run.words - done).min(Self::piece_words(ring.len));
            let ready = eng.tx_ready(TX_WEIGHTS);
            // Room in the ring: the host has acknowledged all but what still fits.
            let mut room = false;
            for _ in 0..self.budget.max(1) {
                if ready.wrapping_sub(eng.tx_acked(TX_WEIGHTS)) + 4 * piece <= ring.len {
                    room = true;
                    break;
                }
            }
            if !room {
                return Err(Status::Timeout);
            }
            let r = Ring { base: ring.base, len: ring.len, off: ready & (ring.len - 1) };
            self.mx
                .mover(Op::StoreToRing, r, run.addr + 4 * done, piece, (0, 0, 0, 0), self.budget)
                .map_err(fault)?;
            eng.set_tx_ready(TX_WEIGHTS, ready.wrapping_add(4 * piece));
            done += piece;
        }
        Ok(done)
    }

    fn step(&mut self, q: &MxStep, eng: &mut LinkEngine) -> Result<MxStepDone, Status> {
        self.memoryx_mode()?;
        let wafers = u32::from(q.wafers);
        let checked = self.table.check_step(q.layer, q.t).copied().and_then(|l| match &self.swarm {
            _ if wafers == 0 => Ok(l),
            None => Err(Status::NotPresent),
            Some(sw) if wafers > u32::from(sw.hw.params().ports) => Err(Status::BadArgument),
            // Every port with a wafer behind it is masked: nothing would be summed.
            Some(sw) if sw.policy.active() & fed_ports(wafers) == 0 => Err(Status::BadArgument),
            Some(_) => Ok(l),
        });
        let l = match checked {
            Ok(l) => l,
            Err(s) => {
                if let Ok(l) = self.table.layer(q.layer) {
                    let words = l.len * wafers.max(1);
                    self.drain(eng, RX_GRADS, words);
                }
                return Err(s);
            }
        };
        let i = q.layer as usize;
        let slot = q.layer as u32 % self.slots;
        let c = l.consts(q.t);
        self.mx.write_slot(slot as usize, &c);
        let start = self.mx.cycles();
        self.mx.set_step(i, q.t, slot);
        let refed = if wafers == 0 {
            self.feed_direct(q, &l, eng)?;
            0
        } else {
            let dead = self.swarm.as_ref().map_or(0, |sw| sw.dead);
            self.set_fed(fed_ports(wafers));
            self.mx.set_route(wafers, dead);
            self.mx.set_wout_swarm(true);
            let r = self.feed_wafers(q, &l, wafers, eng);
            self.mx.set_route(0, 0);
            self.mx.set_wout_swarm(false);
            self.set_fed(u16::MAX);
            r?
        };
        let cycles = self.mx.cycles().wrapping_sub(start);
        self.table.stepped(q.layer, q.t);
        self.steps = self.steps.wrapping_add(1);
        let lr = (l.schedule.lr_at(q.t) as f32).to_bits();
        Ok(MxStepDone { t: q.t, chunks: l.chunks(), lr, cycles, refed })
    }

    /// Limits the node to the ports of `fed` (those with a wafer behind them) and writes
    /// the policy's mask and scale within them.
    fn set_fed(&mut self, fed: u16) {
        if let Some(sw) = self.swarm.as_mut() {
            sw.fed = fed;
            sw.hw.apply(&sw.policy.settings_within(fed));
        }
    }

    /// One reduced gradient per parameter, straight into the streamer, in pieces of whole
    /// chunks as the host's words arrive; waits until every chunk has retired.
    fn feed_direct(&mut self, q: &MxStep, l: &Layer, eng: &mut LinkEngine) -> Result<(), Status> {
        let errs = self.mx.err_count();
        let ring = Self::rings(eng)[1];
        let chunk = l.info.chunk;
        // Whole chunks per piece, so every piece starts a chunk.
        let per = (Self::piece_words(ring.len) / chunk).max(1) * chunk;
        let mut done = 0u32;
        while done < l.len {
            let piece = (l.len - done).min(per);
            let off = self.wait_rx(eng, RX_GRADS, 4 * piece, ring.len)?;
            let r = Ring { base: ring.base, len: ring.len, off };
            let grad = (q.layer as u32, q.t, chunk, done / chunk);
            self.mx.mover(Op::RingToGrad, r, 0, piece, grad, self.budget).map_err(fault)?;
            Self::release(eng, RX_GRADS, 4 * piece);
            done += piece;
        }
        self.mx.wait_done(q.layer as usize, l.chunks(), errs, self.budget).map_err(fault)
    }

    /// K wafers' gradients through SwarmX, a chunk at a time: each chunk's K interleaved
    /// words go to the node's ports 0..K−1 (the route is set), and the next chunk is fed
    /// only once this one has retired or been aborted, so the firmware always knows which
    /// chunk an abort hit. An aborted chunk goes to the SwarmX policy (which may mask the
    /// port) and, when the streamer refused it whole, is fed again from the words still in
    /// the ring. Returns the chunks fed again.
    fn feed_wafers(
        &mut self,
        q: &MxStep,
        l: &Layer,
        wafers: u32,
        eng: &mut LinkEngine,
    ) -> Result<u32, Status> {
        let ring = Self::rings(eng)[1];
        let chunk = l.info.chunk;
        let per_chunks = (Self::piece_words(ring.len) / (chunk * wafers)).max(1);
        let mut c = 0u32;
        let mut refed = 0u32;
        while c < l.chunks() {
            let n = (l.chunks() - c).min(per_chunks);
            let params = (l.len - c * chunk).min(n * chunk);
            let off = self.wait_rx(eng, RX_GRADS, 4 * params * wafers, ring.len)?;
            for j in 0..n {
                let cc = c + j;
                let count = (l.len - cc * chunk).min(chunk);
                let at = (off + 4 * j * chunk * wafers) & (ring.len - 1);
                let r = Ring { base: ring.base, len: ring.len, off: at };
                let mut tries = 0u32;
                loop {
                    let end = self.feed_chunk(q, r, count, chunk, cc)?;
                    match end {
                        ChunkEnd::Retired => break,
                        ChunkEnd::Aborted { clean } => {
                            // The policy masks the port now, before the chunk goes again.
                            self.poll();
                            if !clean || tries == MAX_REFEEDS {
                                #[cfg(feature = "defmt")]
                                defmt::warn!(
                                    "memoryx: layer {=u16} step {=u32} chunk {=u32} aborted (clean {=bool}, tries {=u32})",
                                    q.layer,
                                    q.t,
                                    cc,
                                    clean,
                                    tries
                                );
                                Self::release(eng, RX_GRADS, 4 * params * wafers);
                                self.drain_rest(eng, l, c + n, wafers);
                                return Err(Status::Aborted);
                            }
                            tries += 1;
                            refed += 1;
                        }
                    }
                }
            }
            Self::release(eng, RX_GRADS, 4 * params * wafers);
            c += n;
        }
        Ok(refed)
    }

    /// Consumes the words of chunks `from..` of a multi-wafer step that ends early, so the
    /// next request finds its own words first.
    fn drain_rest(&self, eng: &mut LinkEngine, l: &Layer, from: u32, wafers: u32) {
        let left = l.len.saturating_sub(from * l.info.chunk);
        self.drain(eng, RX_GRADS, left * wafers);
    }

    /// Feeds chunk `cc` (`count` flits per wafer) and waits until it retires or SwarmX
    /// aborts it.
    fn feed_chunk(
        &mut self,
        q: &MxStep,
        r: Ring,
        count: u32,
        chunk: u32,
        cc: u32,
    ) -> Result<ChunkEnd, Status> {
        let i = q.layer as usize;
        let sw = self.swarm.as_ref().ok_or(Status::NotPresent)?;
        let (aborts, _) = sw.hw.progress();
        let errs = self.mx.err_count();
        let done = self.mx.done_chunks(i);
        let grad = (q.layer as u32, q.t, chunk, cc);
        self.mx.mover(Op::RingToGrad, r, 0, count, grad, self.budget).map_err(fault)?;
        let mut aborted = false;
        for _ in 0..self.budget.max(1) {
            // The node counts an abort before its error flit can reach the streamer, so a
            // chunk cut short mid-way (whose head the streamer did update) is never taken
            // for a retired one.
            aborted |= sw.hw.progress().0 != aborts;
            if !aborted && self.mx.done_chunks(i) != done {
                return Ok(ChunkEnd::Retired);
            }
            // The error flit that replaces the chunk reaches the streamer after the node
            // counts the abort: wait for the streamer's verdict.
            if self.mx.err_count() != errs {
                let (code, _) = self.mx.last_err();
                if aborted {
                    return Ok(ChunkEnd::Aborted { clean: code == E_GRAD_KIND });
                }
                return Err(fault(MxError::Streamer(code, q.layer)));
            }
        }
        Err(Status::Timeout)
    }

    fn counters(&self) -> MxCounterValues {
        let mut v = [0u32; MX_COUNTERS];
        for (i, x) in v.iter_mut().take(12).enumerate() {
            *x = self.mx.counter(i);
        }
        v[12] = self.mx.err_count();
        let (code, layer) = self.mx.last_err();
        v[13] = u32::from(code) | (u32::from(layer) << 8);
        v[14..20].copy_from_slice(&self.mx.mover_counters());
        v[20] = self.host_refusals;
        v[21] = self.steps;
        MxCounterValues(v)
    }

    /// Runs `C` on `body` with `f` and encodes the answer.
    fn answer<'a, C: Command<'a>>(
        &mut self,
        req_id: u16,
        body: &'a [u8],
        out: &mut [u8],
        f: impl FnOnce(&mut Self, C) -> Result<C::Response, Status>,
    ) -> usize {
        let r = C::decode(body).and_then(|q| f(self, q));
        if r.is_err() {
            self.host_refusals = self.host_refusals.wrapping_add(1);
        }
        let n = match &r {
            Ok(v) => encode_response::<C>(req_id, Ok(v), out),
            Err(s) => encode_error(C::OPCODE, req_id, *s, out),
        };
        n.unwrap_or(0)
    }
}

impl DataPlane<LinkEngine> for MemoryXPlane {
    fn request(
        &mut self,
        op: u8,
        req_id: u16,
        body: &[u8],
        out: &mut [u8],
        eng: &mut LinkEngine,
    ) -> Option<usize> {
        Some(match op {
            opcode::LINK_MODE => self.answer::<LinkMode>(req_id, body, out, |s, q| s.set_mode(q.mode, eng)),
            opcode::MX_INFO => self.answer::<MxInfo>(req_id, body, out, |s, _| Ok(s.info())),
            opcode::MX_CREATE => self.answer::<MxCreate>(req_id, body, out, |s, q| s.create(&q)),
            opcode::MX_WRITE => self.answer::<MxWrite>(req_id, body, out, |s, q| s.write(&q, eng)),
            opcode::MX_READ => self.answer::<MxRead>(req_id, body, out, |s, q| s.read(&q, eng)),
            opcode::MX_STEP => self.answer::<MxStep>(req_id, body, out, |s, q| s.step(&q, eng)),
            opcode::MX_COUNTERS => self.answer::<MxCounters>(req_id, body, out, |s, _| Ok(s.counters())),
            opcode::SWARM_STATUS => self.answer::<SwarmStatus>(req_id, body, out, |s, _| s.swarm_status()),
            opcode::SWARM_CONFIG => self.answer::<SwarmConfig>(req_id, body, out, |s, q| s.swarm_config(&q)),
            opcode::SWARM_EVENTS => self.answer::<SwarmEvents>(req_id, body, out, |s, _| s.swarm_events()),
            opcode::MESH_SETUP => self.answer::<MeshSetup>(req_id, body, out, |s, q| s.mesh_setup(&q, eng)),
            opcode::MESH_STEP => self.answer::<MeshStep>(req_id, body, out, |s, q| s.mesh_step(&q, eng)),
            opcode::MESH_TRAIN => self.answer::<MeshTrain>(req_id, body, out, |s, q| s.mesh_train(&q, eng)),
            _ => return None,
        })
    }
}
