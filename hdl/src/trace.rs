//! The hardware trace unit on the host: the RTL file list and block spec of `ws_trace`
//! (`hdl/rtl/ws_trace.v`, docs/trace.md), and a reference model of what the unit forms in
//! each cycle: which records, with which sequence numbers, from the probes' handshakes and
//! the MemoryX streamer's records.
//!
//! Phase sources (`N_PHASES`, the wafers' FMA phase records of `ws_mesh_phases`) come after
//! the probes and before the streamer, in source order and in PROBE_EN's bits.
//!
//! The model speaks [`ws_common::trace::Record`], the format the host decodes, so a test
//! compares what the RTL wrote into its ring with what the model formed, record by record.
//! Where a record goes after it is formed (hold, merge, FIFO, ring) and whether it is lost on
//! the way is the ring writer's business; the block test (`hdl/tests/trace.rs`) checks that
//! from the outside: every record formed is either in the ring exactly once or counted lost.

use ws_common::trace::{extend, Record, RecordKind, Source};

use crate::dut::BlockSpec;

/// The RTL of the unit, leaves first.
pub const FILES: &[&str] = &["hdl/rtl/ws_fifo.v", "hdl/rtl/gen/ws_trace_csr.v", "hdl/rtl/ws_trace.v"];

/// PROBE_EN's bit for the streamer's records.
pub const STREAMER_EN: u32 = 1 << 31;

/// The streamer's record types (`s_rec_user[3:0]`, docs/memoryx-store.md "Trace records").
pub const REC_TYPE_UPDATE: u8 = 1;
/// A stream (read) chunk.
pub const REC_TYPE_STREAM: u8 = 2;

/// Parameters of `ws_trace` (see its header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceParams {
    /// The probes' sources, probe 0 first (`N_PROBES`, `PROBE_IDS`).
    pub probes: Vec<Source>,
    /// `N_PHASES`: wafer phase sources, wafer w with source id 0x30 + w.
    pub phases: u8,
    /// `HOLD_DEPTH`: records each source holds while the merge is busy.
    pub hold_depth: u32,
    /// `FIFO_DEPTH`: records between the merge and the ring writer, a power of two.
    pub fifo_depth: u32,
    /// `DMA_BYTES`: bytes of the link DMA RAM, a power of two.
    pub dma_bytes: u32,
}

impl TraceParams {
    /// The RTL's defaults, which are `ws_mx_block`'s unit with four SwarmX ports: the mover's
    /// feed, SwarmX's broadcast in and reduced out, the streamer's gradient in and weight
    /// out, then ports 0..3 out and ports 0..3 in; and two wafers' phases.
    pub fn soc() -> Self {
        let mut probes = vec![
            Source::MoverFeed,
            Source::SwarmDownIn,
            Source::SwarmUpOut,
            Source::MxGradIn,
            Source::MxWeightOut,
        ];
        probes.extend((0..4).map(Source::SwarmDownOut));
        probes.extend((0..4).map(Source::SwarmUpIn));
        TraceParams { probes, phases: 2, hold_depth: 2, fifo_depth: 32, dma_bytes: 65536 }
    }

    /// `PROBE_IDS` as a sized Verilog literal.
    pub fn probe_ids_literal(&self) -> String {
        let hex: String = self.probes.iter().rev().map(|s| format!("{:02x}", s.id())).collect();
        format!("{}'h{hex}", 8 * self.probes.len())
    }

    /// `PHASE_IDS` as a sized Verilog literal (one slot when there are no phases).
    pub fn phase_ids_literal(&self) -> String {
        let n = self.phases.max(1);
        let hex: String = (0..n).rev().map(|w| format!("{:02x}", Source::Wafer(w).id())).collect();
        format!("{}'h{hex}", 8 * n)
    }

    /// The Verilog parameters of these parameters.
    pub fn verilog_params(&self) -> Vec<(&'static str, String)> {
        vec![
            ("N_PROBES", self.probes.len().to_string()),
            ("PROBE_IDS", self.probe_ids_literal()),
            ("N_PHASES", self.phases.to_string()),
            ("PHASE_IDS", self.phase_ids_literal()),
            ("HOLD_DEPTH", self.hold_depth.to_string()),
            ("FIFO_DEPTH", self.fifo_depth.to_string()),
            ("DMA_BYTES", self.dma_bytes.to_string()),
        ]
    }
}

/// The block spec of `ws_trace` with `p`.
pub fn block_spec(p: &TraceParams) -> BlockSpec {
    let mut spec = BlockSpec::new("ws_trace").files(FILES.iter().copied());
    for (k, v) in p.verilog_params() {
        spec = spec.param(k, v);
    }
    spec
}

/// One record of the streamer's trace port (`m_trace_*` of `ws_mx_streamer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamerRec {
    /// `data`: t_in, t_done, t_wout_first, t_wout_last, t_commit (low word first).
    pub data: [u32; 5],
    /// `user`: n, chunk, step, layer, type (docs/memoryx-store.md "Trace records").
    pub user: u64,
}

impl StreamerRec {
    /// A record of type `ty` with the chunk's header fields and its timestamps.
    pub fn new(ty: u8, layer: u16, step: u16, chunk: u16, n: u16, t: [u32; 5]) -> Self {
        let user = u64::from(n) << 48
            | u64::from(chunk) << 32
            | u64::from(step) << 16
            | u64::from(layer & 0xfff) << 4
            | u64::from(ty & 0xf);
        StreamerRec { data: t, user }
    }

    /// The record type (`user[3:0]`).
    pub fn ty(&self) -> u8 {
        (self.user & 0xf) as u8
    }

    /// What the unit makes of it at cycle `now` with sequence number `seq`: an Update or a
    /// Read record, or `None` for an unknown type (lost, but its `seq` is taken).
    pub fn record(&self, now: u64, seq: u32) -> Option<Record> {
        let kind = match self.ty() {
            REC_TYPE_UPDATE => RecordKind::Update,
            REC_TYPE_STREAM => RecordKind::Read,
            _ => return None,
        };
        let update = kind == RecordKind::Update;
        Some(Record {
            kind,
            source: Source::MxStreamer,
            begin: extend(now, self.data[0]),
            end: extend(now, self.data[1]),
            flits: (self.user >> 48) as u16,
            // Update chunks carry gradients in, read chunks weights out (ws_common::flit::Kind).
            flit_kind: u8::from(update),
            layer: ((self.user >> 4) & 0xfff) as u16,
            step: (self.user >> 16) as u16,
            chunk: (self.user >> 32) as u16,
            seq,
            aux: if update { self.data[4] } else { 0 },
        })
    }
}

/// One wafer's finished instruction on the phase port (`m_rec_*` of `ws_mesh_phases`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PhaseRec {
    /// First FMA issue (48 bits).
    pub begin: u64,
    /// Last FMA issue (48 bits).
    pub end: u64,
    /// {step, layer tag, opcode}.
    pub word4: u32,
    /// The instruction's index.
    pub pc: u16,
    /// PEs that issued.
    pub pes: u16,
    /// FMAs issued.
    pub fmas: u32,
}

impl PhaseRec {
    /// The record the unit forms from it with sequence number `seq`.
    pub fn record(&self, wafer: u8, seq: u32) -> Record {
        Record {
            kind: RecordKind::Phase,
            source: Source::Wafer(wafer),
            begin: self.begin,
            end: self.end,
            flits: self.pes,
            flit_kind: (self.word4 & 0xf) as u8,
            layer: ((self.word4 >> 4) & 0xfff) as u16,
            step: (self.word4 >> 16) as u16,
            chunk: self.pc,
            seq,
            aux: self.fmas,
        }
    }
}

/// What the unit sees in one cycle.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inputs {
    /// Bit i: a handshake on probe i's stream.
    pub fire: u32,
    /// Bit i: its `last`.
    pub last: u32,
    /// Probe i's header (`_user`).
    pub user: Vec<u64>,
    /// A streamer record offered (the unit is always ready).
    pub rec: Option<StreamerRec>,
    /// Wafer w's phase record offered, w < `N_PHASES` (missing entries: none).
    pub phase: Vec<Option<PhaseRec>>,
}

/// A sequence number taken in a cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Formed {
    /// A record, on its way to the ring.
    Record(Record),
    /// A streamer record of unknown type: lost at once.
    Lost(u32),
}

impl Formed {
    /// The sequence number.
    pub fn seq(&self) -> u32 {
        match self {
            Formed::Record(r) => r.seq,
            Formed::Lost(s) => *s,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Open {
    begin: u64,
    header: u64,
    flits: u16,
}

/// The unit's sources and sequence counter, cycle by cycle.
#[derive(Debug, Clone)]
pub struct Former {
    probes: Vec<Source>,
    phases: u8,
    open: Vec<Option<Open>>,
    seq: u32,
    /// The unit forms records (CTRL.en, STATUS.active, no restart pending).
    pub on: bool,
    /// PROBE_EN.
    pub probe_en: u32,
}

impl Former {
    /// The sources of a unit with these probes and phase sources, off, every source enabled
    /// (PROBE_EN's reset).
    pub fn new(probes: &[Source], phases: u8) -> Self {
        Former {
            probes: probes.to_vec(),
            phases,
            open: vec![None; probes.len()],
            seq: 0,
            on: false,
            probe_en: u32::MAX,
        }
    }

    /// What CTRL.en's restart does: sequence 0, no chunk open.
    pub fn restart(&mut self) {
        self.seq = 0;
        self.open.fill(None);
    }

    /// The next sequence number (the SEQ register).
    pub fn seq(&self) -> u32 {
        self.seq
    }

    /// One cycle at counter value `now`: appends what it forms to `out`, in sequence order.
    pub fn step(&mut self, now: u64, inp: &Inputs, out: &mut Vec<Formed>) {
        for (i, open) in self.open.iter_mut().enumerate() {
            if !self.on || self.probe_en >> i & 1 == 0 {
                *open = None;
                continue;
            }
            if inp.fire >> i & 1 == 0 {
                continue;
            }
            let o = match open {
                Some(o) => Open { flits: o.flits.saturating_add(1), ..*o },
                None => Open { begin: now, header: inp.user[i], flits: 1 },
            };
            if inp.last >> i & 1 == 0 {
                *open = Some(o);
                continue;
            }
            *open = None;
            out.push(Formed::Record(Record {
                kind: RecordKind::Chunk,
                source: self.probes[i],
                begin: o.begin,
                end: now,
                flits: o.flits,
                flit_kind: (o.header & 0xf) as u8,
                layer: ((o.header >> 4) & 0xfff) as u16,
                step: (o.header >> 16) as u16,
                chunk: (o.header >> 32) as u16,
                seq: self.seq,
                aux: 0,
            }));
            self.seq = self.seq.wrapping_add(1);
        }
        for w in 0..self.phases {
            let bit = self.probes.len() + usize::from(w);
            let ph = inp.phase.get(usize::from(w)).copied().flatten();
            if let Some(ph) = ph.filter(|_| self.on && self.probe_en >> bit & 1 != 0) {
                out.push(Formed::Record(ph.record(w, self.seq)));
                self.seq = self.seq.wrapping_add(1);
            }
        }
        if let Some(rec) = inp.rec.filter(|_| self.on && self.probe_en & STREAMER_EN != 0) {
            out.push(match rec.record(now, self.seq) {
                Some(r) => Formed::Record(r),
                None => Formed::Lost(self.seq),
            });
            self.seq = self.seq.wrapping_add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(fire: u32, last: u32, user: u64) -> Inputs {
        Inputs { fire, last, user: vec![user; 2], rec: None, phase: Vec::new() }
    }

    #[test]
    fn chunks_open_count_and_close_in_source_order() {
        let mut f = Former::new(&[Source::MxGradIn, Source::SwarmUpIn(2)], 2);
        f.on = true;
        let mut out = Vec::new();
        f.step(10, &inputs(0b01, 0, 0x0007_0003_0042_0051), &mut out);
        f.step(11, &inputs(0b01, 0, 0xffff_ffff_ffff_ffff), &mut out);
        assert!(out.is_empty());
        let rec = StreamerRec::new(REC_TYPE_UPDATE, 5, 6, 7, 8, [3, 9, 0, 0, 12]);
        let ph = PhaseRec { begin: 4, end: 11, word4: 0x0009_0021, pc: 3, pes: 4, fmas: 640 };
        let phase = vec![None, Some(ph)];
        f.step(12, &Inputs { rec: Some(rec), phase, ..inputs(0b11, 0b11, 0x1234) }, &mut out);
        let seqs: Vec<u32> = out.iter().map(Formed::seq).collect();
        assert_eq!(seqs, [0, 1, 2, 3]);
        let Formed::Record(p) = out[2] else { panic!() };
        assert_eq!(
            (p.kind, p.source, p.begin, p.end, p.flits, p.flit_kind, p.layer, p.step, p.chunk, p.aux),
            (RecordKind::Phase, Source::Wafer(1), 4, 11, 4, 1, 2, 9, 3, 640)
        );
        let out: Vec<Formed> = out.into_iter().filter(|f| f.seq() != 2).collect();
        let Formed::Record(a) = out[0] else { panic!() };
        assert_eq!(
            (a.begin, a.end, a.flits, a.chunk, a.step, a.layer, a.flit_kind),
            (10, 12, 3, 3, 0x42, 5, 1)
        );
        let Formed::Record(b) = out[1] else { panic!() };
        assert_eq!((b.source, b.begin, b.end, b.flits, b.step), (Source::SwarmUpIn(2), 12, 12, 1, 0));
        let Formed::Record(c) = out[2] else { panic!() };
        assert_eq!(
            (c.kind, c.begin, c.end, c.flits, c.aux, c.flit_kind),
            (RecordKind::Update, 3, 9, 8, 12, 1)
        );
        assert_eq!(Record::decode(&c.encode()), Ok(c));
    }

    #[test]
    fn unknown_streamer_types_take_a_sequence_number() {
        let mut f = Former::new(&[Source::MoverFeed], 0);
        f.on = true;
        let mut out = Vec::new();
        let rec = StreamerRec::new(7, 0, 0, 0, 0, [0; 5]);
        f.step(1, &Inputs { rec: Some(rec), ..inputs(0, 0, 0) }, &mut out);
        assert_eq!(out, [Formed::Lost(0)]);
        assert_eq!(f.seq(), 1);
    }

    #[test]
    fn probe_ids_are_a_sized_literal_probe_0_lowest() {
        assert_eq!(TraceParams::soc().probe_ids_literal(), "104'h23222120131211100504030200");
        assert_eq!(TraceParams::soc().phase_ids_literal(), "16'h3130");
    }
}
