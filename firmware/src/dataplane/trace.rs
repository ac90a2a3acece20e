//! `TraceCtl` (docs/trace.md): the pipeline trace on link channel 6. The trace unit writes its
//! records into TX2's ring and moves that window's ready position itself, so the firmware
//! only opens the window, starts and stops the unit, and reports its counts: no record passes
//! through the core.

use ws_common::ctrl::cmd::{TraceCtl, TraceOp, TraceState};
use ws_common::ctrl::Status;

use super::MemoryXPlane;
use crate::hal::link::{LinkEngine, TX_TRACE};
use crate::hal::trace::TraceUnit;

impl MemoryXPlane {
    /// Adds the trace unit (`TraceUnit::probe`'s answer for slot 18), switched off.
    pub fn with_trace(mut self, t: Option<TraceUnit>) -> Self {
        if let Some(t) = &t {
            t.off();
            #[cfg(feature = "defmt")]
            defmt::info!("trace: {=u32} stream probes", t.probes());
        }
        self.trace = t;
        self
    }

    /// Switches the unit off (a change of bulk mode closes its window).
    pub(super) fn trace_off(&mut self) {
        if let Some(t) = &self.trace {
            self.mx.set_trace(false);
            t.off();
        }
    }

    /// Starts, stops or reports the trace. Refused outside MemoryX mode (TX2's ring is one of
    /// its rings) and on a board without the unit.
    pub(super) fn trace_ctl(&mut self, q: &TraceCtl, eng: &mut LinkEngine) -> Result<TraceState, Status> {
        self.memoryx_mode()?;
        let t = self.trace.as_ref().ok_or(Status::NotPresent)?;
        match q.op {
            TraceOp::Status => {}
            TraceOp::Stop => {
                self.mx.set_trace(false);
                let _head = t.drain(self.budget);
                #[cfg(feature = "defmt")]
                defmt::info!(
                    "trace: stopped at byte {=u32} of channel 6 (sent {=u32}, acked {=u32}), status {=u32:#x}",
                    _head,
                    eng.tx_sent(TX_TRACE),
                    eng.tx_acked(TX_TRACE),
                    t.status()
                );
            }
            TraceOp::Start => {
                // A running trace ends first; the new one goes on from the end of its last
                // whole record, so channel 6 stays one byte stream.
                self.mx.set_trace(false);
                let mut at = t.drain(self.budget);
                let ring = Self::trace_ring(eng);
                if !eng.tx_open(TX_TRACE) {
                    // Closed by a new session or a mode change: the stream restarted under
                    // the unit, which lets go of it before the window opens where the stream
                    // stands (nothing unsent).
                    t.off();
                    at = eng.tx_sent(TX_TRACE);
                    if !eng.open_tx(TX_TRACE, ring, at) {
                        return Err(Status::DeviceFault);
                    }
                }
                if !t.start(ring, at, q.probes) {
                    t.off();
                    return Err(Status::DeviceFault);
                }
                self.mx.set_trace(true);
                #[cfg(feature = "defmt")]
                defmt::info!(
                    "trace: started at byte {=u32} of channel 6 (sent {=u32}, acked {=u32}), status {=u32:#x}",
                    at,
                    eng.tx_sent(TX_TRACE),
                    eng.tx_acked(TX_TRACE),
                    t.status()
                );
            }
        }
        Ok(t.state())
    }
}
