//! SwarmX behind the bulk channels (docs/swarmx.md "Firmware and host"): the node, the
//! firmware's masking policy (`crate::swarm`), and the host's `SwarmStatus`, `SwarmConfig` and
//! `SwarmEvents`.

use ws_common::ctrl::cmd::{SwarmConfig, SwarmEventList, SwarmStatusData, SWARM_MAX_EVENTS};
use ws_common::ctrl::Status;

use super::MemoryXPlane;
use crate::hal::swarm::SwarmX;
use crate::swarm::{Event, EventKind, Policy};

/// SwarmX and the firmware's policy for it (`crate::swarm`), when the SoC has the node.
#[derive(Debug)]
pub(super) struct SwarmPlane {
    pub(super) hw: SwarmX,
    pub(super) policy: Policy,
    /// CNT_ERRORS and CNT_REDUCED at the last look.
    pub(super) errors: u32,
    pub(super) reduced: u32,
    /// Fault injection (`SwarmConfig::dead`): wafers whose words multi-wafer steps skip.
    pub(super) dead: u16,
    /// The ports with a wafer behind them: ports 0..K−1 during a step of K wafers, every
    /// port otherwise. The node's mask never holds a port outside it.
    pub(super) fed: u16,
}

/// The node's ports 0..K−1, which a step of K wafers feeds.
pub(super) fn fed_ports(wafers: u32) -> u16 {
    1u16.checked_shl(wafers).map_or(u16::MAX, |b| b.wrapping_sub(1))
}

impl MemoryXPlane {
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

    pub(super) fn swarm_status(&self) -> Result<SwarmStatusData, Status> {
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

    pub(super) fn swarm_config(&mut self, q: &SwarmConfig) -> Result<SwarmStatusData, Status> {
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

    pub(super) fn swarm_events(&mut self) -> Result<SwarmEventList, Status> {
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

    /// Limits the node to the ports of `fed` (those with a wafer behind them) and writes
    /// the policy's mask and scale within them.
    pub(super) fn set_fed(&mut self, fed: u16) {
        if let Some(sw) = self.swarm.as_mut() {
            sw.fed = fed;
            sw.hw.apply(&sw.policy.settings_within(fed));
        }
    }
}
