//! The data plane behind the bulk channels (docs/memoryx-soc.md "Firmware"): the link
//! engine's bulk mode and MemoryX's host commands.
//!
//! **Bulk modes.** In echo mode (the boot default, the link's self-test) every RX window
//! loops back into its TX slot. In MemoryX mode the DMA RAM is split in five rings:
//!
//! | ring | bytes | stream |
//! |---|---|---|
//! | RX0 | [0, ¼) | channel 2, weights host → board: the words of `MxWrite` |
//! | RX1 | [¼, ½) | channel 3, gradients host → board: the words of `MxStep` |
//! | RX2 | [½, ⅝) | channel 4, data: the samples of `MeshStep`, `MeshTrain`, `MeshTrainRun` and `MeshEval` |
//! | TX2 | [⅝, ¾) | channel 6, trace board → host: the trace unit's records (`TraceCtl`) |
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
mod optim;
mod state;
mod swarm;
mod trace;

use ws_common::ctrl::cmd::{
    opcode, BulkMode, LinkMode, MeshEval, MeshSetup, MeshStep, MeshTrain, MeshTrainRun, MxCounters, MxCreate,
    MxInfo, MxLayers, MxRead, MxRelease, MxStep, MxWrite, SwarmConfig, SwarmEvents, SwarmStatus, TraceCtl,
};
use ws_common::ctrl::{Command, Status};
use ws_common::link::control::{encode_error, encode_response};

use crate::hal::link::{LinkEngine, Window};
use crate::hal::mx::{MemoryX, MxError};
use crate::hal::trace::TraceUnit;
use crate::link::DataPlane;
use crate::mx::Table;
use swarm::SwarmPlane;

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
    trace: Option<TraceUnit>,
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
            trace: None,
        }
    }

    /// The rings of MemoryX mode: RX0, RX1, RX2, TX0 (the trace's is [`Self::trace_ring`]).
    fn rings(eng: &LinkEngine) -> [Window; 4] {
        let q = eng.dma_bytes() / 4;
        [
            Window { base: 0, len: q },
            Window { base: q, len: q },
            Window { base: 2 * q, len: q / 2 },
            Window { base: 3 * q, len: q },
        ]
    }

    /// TX2's ring (channel 6): the eighth of the DMA RAM after RX2's.
    fn trace_ring(eng: &LinkEngine) -> Window {
        let q = eng.dma_bytes() / 4;
        Window { base: 2 * q + q / 2, len: q / 2 }
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
        self.trace_off();
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
            opcode::MX_RELEASE => {
                self.answer::<MxRelease>(req_id, body, out, |s, q| s.release_layers(q.layers))
            }
            opcode::MX_LAYERS => self.answer::<MxLayers>(req_id, body, out, |s, _| Ok(s.layers())),
            opcode::SWARM_STATUS => self.answer::<SwarmStatus>(req_id, body, out, |s, _| s.swarm_status()),
            opcode::SWARM_CONFIG => self.answer::<SwarmConfig>(req_id, body, out, |s, q| s.swarm_config(&q)),
            opcode::SWARM_EVENTS => self.answer::<SwarmEvents>(req_id, body, out, |s, _| s.swarm_events()),
            opcode::MESH_SETUP => self.answer::<MeshSetup>(req_id, body, out, |s, q| s.mesh_setup(&q, eng)),
            opcode::MESH_STEP => self.answer::<MeshStep>(req_id, body, out, |s, q| s.mesh_step(&q, eng)),
            opcode::MESH_TRAIN => self.answer::<MeshTrain>(req_id, body, out, |s, q| s.mesh_train(&q, eng)),
            opcode::MESH_EVAL => self.answer::<MeshEval>(req_id, body, out, |s, q| s.mesh_eval(&q, eng)),
            opcode::MESH_TRAIN_RUN => {
                self.answer::<MeshTrainRun>(req_id, body, out, |s, q| s.mesh_train_run(&q, eng))
            }
            opcode::TRACE_CTL => self.answer::<TraceCtl>(req_id, body, out, |s, q| s.trace_ctl(&q, eng)),
            _ => return None,
        })
    }
}
