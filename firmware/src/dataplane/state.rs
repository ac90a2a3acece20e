//! Every job starts from a known state (docs/firmware.md "Every job starts from a known
//! state"). A job (an `MxStep`, a `MeshStep`, a `MeshTrain`, a `MeshEval`) first puts every data-plane
//! block it uses into the state written down there, whatever the job before it left
//! behind, finished or failed; and it checks the one thing a job cannot reset, the link's
//! outgoing stream, for bytes the engine sent that the firmware never gave it.

use ws_common::ctrl::Status;

use super::{MemoryXPlane, TX_WEIGHTS};
use crate::hal::link::LinkEngine;

impl MemoryXPlane {
    /// The known state of a job's start:
    ///
    /// - the data mover idle, its capture sink off, the streamer's weight-out to the sink
    ///   and SwarmX's broadcast fed by op 4 (WOUT_CTRL = 0, which also empties the forward
    ///   buffer), gradient feeds straight into the streamer (GRAD_ROUTE = 0);
    /// - SwarmX fed on every port, with the host's mask and scale (`SwarmConfig`, a setting
    ///   of the rig that jobs keep), and any abort it latched handed to the policy;
    /// - every wafer mesh stopped, its CTRL 0 (weights from the mover, gradients held), its metrics
    ///   and results FIFOs empty and its configuration flags clear;
    /// - TX0 has sent nothing past the position the firmware made ready.
    pub(super) fn known_state(&mut self, eng: &LinkEngine) -> Result<(), Status> {
        if !(0..self.budget.max(1)).any(|_| self.mx.mover_done().is_some()) {
            return Err(Status::Timeout);
        }
        self.mx.set_capture(None);
        self.mx.set_wout_swarm(false);
        // The weight streams end, and the forward buffer empties (words a failed run
        // forwarded and no step took).
        let _left = self.mx.end_streams();
        #[cfg(feature = "defmt")]
        if _left != 0 {
            defmt::warn!("mx: dropped {=u32} forwarded words of an earlier job", _left);
        }
        self.mx.set_route(0, 0);
        self.poll();
        self.set_fed(u16::MAX);
        for hw in self.mesh.iter().flat_map(|m| &m.wafers) {
            if hw.busy() {
                #[cfg(feature = "defmt")]
                defmt::warn!("mesh: wafer {=u8} busy at the start of a job", hw.params().wafer);
                return Err(Status::DeviceFault);
            }
            hw.set_ctrl(false, false, false);
            let _stale = hw.drain_fifos();
            hw.take_refused();
            #[cfg(feature = "defmt")]
            if _stale != (0, 0) {
                defmt::warn!(
                    "mesh: wafer {=u8}: dropped {=u32} metrics and {=u32} results words of an earlier job",
                    hw.params().wafer,
                    _stale.0,
                    _stale.1
                );
            }
        }
        self.tx_in_step(eng)
    }

    /// Checks that TX0 has sent no byte past its ready position: bytes sent beyond it were
    /// never written for this stream, and a job that went on would hand the host a stale
    /// ring's words as its own.
    pub(super) fn tx_in_step(&self, eng: &LinkEngine) -> Result<(), Status> {
        if eng.loopback() & 1 != 0 {
            return Ok(());
        }
        let (sent, ready) = (eng.tx_sent(TX_WEIGHTS), eng.tx_ready(TX_WEIGHTS));
        if (sent.wrapping_sub(ready) as i32) > 0 {
            #[cfg(feature = "defmt")]
            defmt::error!("link: TX0 sent up to byte {=u32} but only {=u32} were made ready", sent, ready);
            return Err(Status::DeviceFault);
        }
        Ok(())
    }
}
