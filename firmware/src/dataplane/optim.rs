//! MemoryX's host commands (docs/memoryx-soc.md "Firmware: MemoryX bulk mode"): layers
//! created, released and listed, their words written and read, and optimizer steps fed
//! straight into the streamer or through SwarmX from K wafers.

use ws_common::ctrl::cmd::{
    MxCounterValues, MxCreate, MxInfoData, MxLayerList, MxRead, MxStep, MxStepDone, MxWrite, MAX_REFEEDS,
    MX_COUNTERS,
};
use ws_common::ctrl::Status;

use super::swarm::fed_ports;
use super::{fault, MemoryXPlane, RX_GRADS, RX_WEIGHTS, TX_WEIGHTS};
use crate::hal::link::LinkEngine;
use crate::hal::mx::{MxError, Op, Ring};
use crate::mx::{opt_code, Layer};

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

impl MemoryXPlane {
    pub(super) fn info(&self) -> MxInfoData {
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

    pub(super) fn create(&mut self, c: &MxCreate) -> Result<ws_common::ctrl::cmd::MxLayerInfo, Status> {
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

    /// Releases the created layers among `mask`: each is DISABLEd in the streamer (which
    /// waits for its chunks in flight) and its store freed. A layer the streamer does not
    /// disable in time stays, and the request answers `Timeout`.
    pub(super) fn release_layers(&mut self, mask: u16) -> Result<MxInfoData, Status> {
        let gone = self.table.existing(mask);
        for i in (0..16u16).filter(|i| gone & (1 << i) != 0) {
            self.mx.disable_layer(usize::from(i), self.budget).map_err(fault)?;
            self.table.remove(i);
        }
        #[cfg(feature = "defmt")]
        if gone != 0 {
            defmt::info!("memoryx: released layers {=u16:#06x}", gone);
        }
        Ok(self.info())
    }

    pub(super) fn layers(&self) -> MxLayerList {
        self.table.states()
    }

    pub(super) fn write(&mut self, q: &MxWrite, eng: &mut LinkEngine) -> Result<u32, Status> {
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

    pub(super) fn read(&mut self, q: &MxRead, eng: &mut LinkEngine) -> Result<u32, Status> {
        self.memoryx_mode()?;
        let run = self.table.run(&q.0)?;
        self.tx_in_step(eng)?;
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

    pub(super) fn step(&mut self, q: &MxStep, eng: &mut LinkEngine) -> Result<MxStepDone, Status> {
        self.memoryx_mode()?;
        let wafers = u32::from(q.wafers);
        let clean = self.known_state(eng);
        let checked = clean.and_then(|()| self.table.check_step(q.layer, q.t).copied()).and_then(|l| {
            match &self.swarm {
                _ if wafers == 0 => Ok(l),
                None => Err(Status::NotPresent),
                Some(sw) if wafers > u32::from(sw.hw.params().ports) => Err(Status::BadArgument),
                // Every port with a wafer behind it is masked: nothing would be summed.
                Some(sw) if sw.policy.active() & fed_ports(wafers) == 0 => Err(Status::BadArgument),
                Some(_) => Ok(l),
            }
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

    pub(super) fn counters(&self) -> MxCounterValues {
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
}
