//! MemoryX bookkeeping (docs/memoryx-soc.md "Firmware"): the layers the host created, where
//! their arrays live in the weight store, which step each layer is at, and the checks every
//! host request passes before a register is touched. Plain Rust, tested on the host; the
//! register side is `hal::mx` and the sequencing `dataplane`.
//!
//! Store layout: every array of every layer is one run of `len` words rounded up to whole
//! store beats, starting on a beat (the streamer's rule, docs/memoryx-store.md "Layout"), and
//! placed first fit, so no two runs overlap and none leaves the store. The hardware checks the
//! same at ENABLE; this allocator only ever offers it entries that pass.

use ws_common::ctrl::cmd::{MxArray, MxCreate, MxLayerInfo, MxLayerList, MxLayerState, MxRange};
use ws_common::ctrl::Status;
use ws_common::golden::optim::{step_consts, Consts, Hyper, Kind};
use ws_common::golden::schedule::Schedule;

/// Layer table entries the firmware manages (the hardware's MAX_LAYERS may be fewer).
pub const MAX_LAYERS: usize = 16;
/// Parameters per chunk of every layer: a multiple of any beat (1, 2, 4, 8 words), and
/// small enough that a step's gradient ring holds many chunks.
pub const CHUNK: u32 = 256;

/// The streamer's optimizer code (`L_MODE.opt`) for `h`.
pub fn opt_code(h: &Hyper) -> u32 {
    match (h.kind, h.amsgrad) {
        (Kind::Sgd, _) if h.momentum != 0.0 => 1,
        (Kind::Sgd, _) => 0,
        (Kind::Adam, false) => 2,
        (Kind::AdamW, false) => 3,
        (Kind::Adam, true) => 4,
        (Kind::AdamW, true) => 5,
    }
}

/// Arrays the optimizer keeps: bit 0 w, 1 m, 2 v, 3 vmax.
pub fn arrays_of(h: &Hyper) -> u32 {
    match opt_code(h) {
        0 => 0b0001,
        1 => 0b0011,
        2 | 3 => 0b0111,
        _ => 0b1111,
    }
}

/// One created layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Layer {
    /// Parameters.
    pub len: u32,
    /// Where the arrays went, and the chunk.
    pub info: MxLayerInfo,
    /// Arrays kept (bit 0 w .. bit 3 vmax).
    pub arrays: u32,
    /// The optimizer.
    pub hyper: Hyper,
    /// The learning rate of every step.
    pub schedule: Schedule,
    /// Gradient scale divisors.
    pub workers: u32,
    /// Samples per wafer and step.
    pub batch: u32,
    /// The last step run (0 before the first).
    pub at: u32,
}

impl Layer {
    /// Update chunks of one step.
    pub fn chunks(&self) -> u32 {
        self.len.div_ceil(self.info.chunk)
    }

    /// The constants of step `t`.
    pub fn consts(&self, t: u32) -> Consts {
        step_consts(&self.hyper, t, self.schedule.lr_at(t), self.workers, self.batch)
    }
}

/// The store region a transfer touches, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreRun {
    /// Byte address of the first word, on a beat.
    pub addr: u32,
    /// Words.
    pub words: u32,
}

/// Every created layer and the store they share.
#[derive(Debug, Clone)]
pub struct Table {
    layers: [Option<Layer>; MAX_LAYERS],
    /// Layer numbers below this exist in hardware.
    max_layers: u16,
    store_bytes: u32,
    beat_bytes: u32,
}

impl Table {
    /// An empty table for a store of `store_bytes` with beats of `beat_words` words and a
    /// hardware table of `max_layers` entries.
    pub fn new(store_bytes: u32, beat_words: u32, max_layers: u32) -> Self {
        Self {
            layers: [None; MAX_LAYERS],
            max_layers: max_layers.min(MAX_LAYERS as u32) as u16,
            store_bytes,
            beat_bytes: 4 * beat_words.max(1),
        }
    }

    /// Words per store beat.
    pub fn beat_words(&self) -> u32 {
        self.beat_bytes / 4
    }

    /// Bytes of the store.
    pub fn store_bytes(&self) -> u32 {
        self.store_bytes
    }

    /// Bit `i` set when layer `i` exists.
    pub fn layer_mask(&self) -> u16 {
        self.layers.iter().enumerate().filter(|(_, l)| l.is_some()).fold(0, |m, (i, _)| m | 1 << i)
    }

    /// Layer `n`, if created.
    pub fn layer(&self, n: u16) -> Result<&Layer, Status> {
        self.layers.get(n as usize).and_then(Option::as_ref).ok_or(Status::NoLayer)
    }

    /// Records that layer `n` ran step `t`.
    pub fn stepped(&mut self, n: u16, t: u32) {
        if let Some(Some(l)) = self.layers.get_mut(n as usize) {
            l.at = t;
        }
    }

    /// Bytes a run of `len` words spans: whole beats.
    fn span(&self, len: u32) -> Option<u32> {
        let bytes = u64::from(len) * 4;
        let beats = bytes.div_ceil(u64::from(self.beat_bytes));
        u32::try_from(beats * u64::from(self.beat_bytes)).ok()
    }

    /// Every run in use, as (start, end) byte ranges.
    fn runs(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.layers.iter().flatten().flat_map(move |l| {
            let span = self.span(l.len).unwrap_or(0);
            (0..4)
                .filter(move |a| l.arrays & (1 << a) != 0)
                .map(move |a| (l.info.bases[a], l.info.bases[a] + span))
        })
    }

    /// The lowest beat-aligned address where `span` bytes fit between the runs in use and
    /// `extra` (runs being placed for the same layer).
    fn first_fit(&self, span: u32, extra: &[(u32, u32)]) -> Option<u32> {
        let mut at = 0u32;
        loop {
            let end = at.checked_add(span)?;
            if end > self.store_bytes {
                return None;
            }
            // The first run that overlaps [at, end) pushes the candidate past its end.
            let clash = self
                .runs()
                .chain(extra.iter().copied())
                .filter(|&(s, e)| s < end && at < e)
                .map(|(_, e)| e)
                .max();
            match clash {
                None => return Some(at),
                Some(e) => at = e,
            }
        }
    }

    /// Bytes not used by any array (free space may be fragmented).
    pub fn free_bytes(&self) -> u32 {
        let used: u64 = self.runs().map(|(s, e)| u64::from(e - s)).sum();
        (u64::from(self.store_bytes).saturating_sub(used)) as u32
    }

    /// Places layer `c.layer`: checks it and allocates its arrays. Nothing changes on `Err`.
    pub fn create(&mut self, c: &MxCreate) -> Result<Layer, Status> {
        if c.layer >= self.max_layers {
            return Err(Status::NoLayer);
        }
        if self.layers[c.layer as usize].is_some() {
            return Err(Status::BadArgument);
        }
        // More than 2^16 chunks do not fit the flit's chunk field.
        if c.len == 0 || c.len.div_ceil(CHUNK) > 1 << 16 || c.workers == 0 || c.batch == 0 {
            return Err(Status::BadArgument);
        }
        let span = self.span(c.len).ok_or(Status::StoreFull)?;
        let arrays = arrays_of(&c.hyper);
        let mut bases = [0u32; 4];
        let mut placed: [(u32, u32); 4] = [(0, 0); 4];
        let mut n = 0;
        for (a, base) in bases.iter_mut().enumerate() {
            if arrays & (1 << a) == 0 {
                continue;
            }
            let at = self.first_fit(span, &placed[..n]).ok_or(Status::StoreFull)?;
            *base = at;
            placed[n] = (at, at + span);
            n += 1;
        }
        let l = Layer {
            len: c.len,
            info: MxLayerInfo { chunk: CHUNK, bases },
            arrays,
            hyper: c.hyper,
            schedule: c.schedule,
            workers: c.workers,
            batch: c.batch,
            at: c.start,
        };
        self.layers[c.layer as usize] = Some(l);
        Ok(l)
    }

    /// Forgets layer `n` (its ENABLE was refused by the hardware).
    pub fn remove(&mut self, n: u16) {
        if let Some(slot) = self.layers.get_mut(n as usize) {
            *slot = None;
        }
    }

    /// The created layers among `mask` (bit `i` for layer `i`).
    pub fn existing(&self, mask: u16) -> u16 {
        self.layer_mask() & mask
    }

    /// Every created layer: its shape, optimizer, step and the store bytes it takes.
    pub fn states(&self) -> MxLayerList {
        let mut r = MxLayerList::default();
        for (i, l) in self.layers.iter().enumerate() {
            let (Some(l), Some(slot)) = (l, r.layers.get_mut(usize::from(r.count))) else { continue };
            let span = self.span(l.len).unwrap_or(0);
            *slot = MxLayerState {
                layer: i as u16,
                opt: opt_code(&l.hyper) as u8,
                arrays: l.arrays as u8,
                len: l.len,
                at: l.at,
                bytes: span.saturating_mul(l.arrays.count_ones()),
            };
            r.count += 1;
        }
        r
    }

    /// Checks a transfer: the layer exists and keeps the array, the range lies inside the
    /// layer, and it starts on a store beat (a partial last beat is fine).
    pub fn run(&self, r: &MxRange) -> Result<StoreRun, Status> {
        let l = self.layer(r.layer)?;
        let a = r.array as usize;
        if l.arrays & (1 << a) == 0 {
            return Err(Status::BadArgument);
        }
        let end = r.offset.checked_add(r.count).ok_or(Status::OutOfWindow)?;
        if r.count == 0 || end > l.len {
            return Err(Status::OutOfWindow);
        }
        if r.offset % self.beat_words() != 0 {
            return Err(Status::Misaligned);
        }
        Ok(StoreRun { addr: l.info.bases[a] + 4 * r.offset, words: r.count })
    }

    /// Checks step `t` of layer `n`: steps run in order from 1, so a replayed step is refused.
    pub fn check_step(&self, n: u16, t: u32) -> Result<&Layer, Status> {
        let l = self.layer(n)?;
        if t == 0 || t != l.at.wrapping_add(1) {
            return Err(Status::BadStep);
        }
        Ok(l)
    }
}

/// The array code of `a` (for messages).
pub fn array_name(a: MxArray) -> &'static str {
    match a {
        MxArray::W => "w",
        MxArray::M => "m",
        MxArray::V => "v",
        MxArray::Vmax => "vmax",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(layer: u16, len: u32, hyper: Hyper) -> MxCreate {
        MxCreate { layer, len, workers: 1, batch: 1, hyper, schedule: Schedule::constant(0.01), start: 0 }
    }

    fn adam() -> Hyper {
        Hyper::ADAM
    }

    #[test]
    fn layers_are_placed_first_fit_without_overlap() {
        let mut t = Table::new(1 << 16, 8, 16);
        let a = t.create(&create(0, 10, adam())).unwrap();
        // 10 words span two beats of 32 bytes.
        assert_eq!(a.info.bases, [0, 64, 128, 0]);
        assert_eq!(a.chunks(), 1);
        let b = t.create(&create(3, 300, Hyper::SGD)).unwrap();
        assert_eq!(b.info.bases[0], 192);
        assert_eq!(b.arrays, 1);
        let c = t.create(&create(1, 8, Hyper { amsgrad: true, ..adam() })).unwrap();
        assert_eq!(c.info.bases, [192 + 1216, 192 + 1248, 192 + 1280, 192 + 1312]);
        assert_eq!(t.layer_mask(), 0b1011);
        let mut runs: Vec<_> = t.runs().collect();
        runs.sort();
        assert!(runs.windows(2).all(|w| w[0].1 <= w[1].0), "no overlap: {runs:?}");
        assert!(runs.iter().all(|r| r.0 % 32 == 0 && r.1 <= 1 << 16));
        assert_eq!(t.free_bytes(), (1 << 16) - 3 * 64 - 1216 - 4 * 32);
        // A removed layer's space is reused from the bottom.
        t.remove(0);
        let d = t.create(&create(0, 16, Hyper { momentum: 0.9, ..Hyper::SGD })).unwrap();
        assert_eq!(d.info.bases, [0, 64, 0, 0]);
    }

    #[test]
    fn bad_layers_are_refused_and_change_nothing() {
        let mut t = Table::new(4096, 8, 4);
        assert_eq!(t.create(&create(4, 8, adam())), Err(Status::NoLayer));
        assert_eq!(t.create(&create(0, 0, adam())), Err(Status::BadArgument));
        assert_eq!(t.create(&MxCreate { workers: 0, ..create(0, 8, adam()) }), Err(Status::BadArgument));
        // Three arrays of 344 words (1376 B each, 4128 B) do not fit 4 KiB.
        assert_eq!(t.create(&create(0, 344, adam())), Err(Status::StoreFull));
        assert_eq!(t.create(&create(0, u32::MAX, adam())), Err(Status::BadArgument));
        assert_eq!(t.layer_mask(), 0);
        assert_eq!(t.free_bytes(), 4096);
        t.create(&create(0, 336, adam())).unwrap();
        assert_eq!(t.create(&create(0, 8, adam())), Err(Status::BadArgument), "exists");
        assert_eq!(t.create(&create(1, 8, adam())), Err(Status::StoreFull));
        assert_eq!(t.create(&create(1, 8, Hyper::SGD)).map(|l| l.info.bases[0]), Ok(4032));
    }

    #[test]
    fn transfers_are_checked() {
        let mut t = Table::new(1 << 16, 8, 16);
        let l = t.create(&create(2, 100, Hyper { momentum: 0.9, ..Hyper::SGD })).unwrap();
        let r = |array, offset, count| MxRange { layer: 2, array, offset, count };
        assert_eq!(t.run(&r(MxArray::M, 8, 92)), Ok(StoreRun { addr: l.info.bases[1] + 32, words: 92 }));
        assert_eq!(t.run(&r(MxArray::W, 0, 100)).map(|s| s.addr), Ok(0));
        assert_eq!(t.run(&r(MxArray::V, 0, 1)), Err(Status::BadArgument), "SGD keeps no v");
        assert_eq!(t.run(&r(MxArray::W, 8, 93)), Err(Status::OutOfWindow));
        assert_eq!(t.run(&r(MxArray::W, u32::MAX, 2)), Err(Status::OutOfWindow));
        assert_eq!(t.run(&r(MxArray::W, 4, 8)), Err(Status::Misaligned));
        assert_eq!(t.run(&MxRange { layer: 1, ..r(MxArray::W, 0, 1) }), Err(Status::NoLayer));
        assert_eq!(t.run(&MxRange { layer: 999, ..r(MxArray::W, 0, 1) }), Err(Status::NoLayer));
    }

    #[test]
    fn steps_run_in_order() {
        let mut t = Table::new(1 << 16, 8, 16);
        t.create(&create(0, 8, adam())).unwrap();
        assert_eq!(t.check_step(0, 0).err(), Some(Status::BadStep));
        assert_eq!(t.check_step(0, 2).err(), Some(Status::BadStep));
        assert!(t.check_step(0, 1).is_ok());
        t.stepped(0, 1);
        assert_eq!(t.check_step(0, 1).err(), Some(Status::BadStep), "a replayed step");
        assert!(t.check_step(0, 2).is_ok());
        assert_eq!(t.check_step(5, 1).err(), Some(Status::NoLayer));
    }

    #[test]
    fn released_layers_free_their_store_and_states_say_what_is_used() {
        let mut t = Table::new(4096, 8, 4);
        t.create(&create(0, 336, adam())).unwrap();
        t.create(&create(2, 8, Hyper::SGD)).unwrap();
        let s = t.states();
        assert_eq!(s.as_slice().len(), 2);
        assert_eq!((s.layers[0].layer, s.layers[0].opt, s.layers[0].arrays), (0, 2, 0b111));
        assert_eq!(s.layers[0].bytes, 3 * 1344);
        assert_eq!((s.layers[1].layer, s.layers[1].bytes), (2, 32));
        assert_eq!(t.free_bytes(), 4096 - 3 * 1344 - 32);
        assert_eq!(t.existing(u16::MAX), 0b101);
        assert_eq!(t.existing(0b010), 0);
        // A job run again after a release finds the whole store free.
        t.remove(0);
        t.remove(2);
        assert_eq!(t.free_bytes(), 4096);
        assert_eq!(t.states().count, 0);
        t.create(&create(0, 336, adam())).unwrap();
    }

    #[test]
    fn codes_match_the_streamer() {
        assert_eq!(opt_code(&Hyper::SGD), 0);
        assert_eq!(opt_code(&Hyper { momentum: 0.9, nesterov: true, ..Hyper::SGD }), 1);
        assert_eq!(opt_code(&Hyper::ADAMW), 3);
        assert_eq!(opt_code(&Hyper { amsgrad: true, ..Hyper::ADAMW }), 5);
        assert_eq!(arrays_of(&Hyper { amsgrad: true, ..adam() }), 0b1111);
    }
}
