//! SwarmX (docs/swarmx.md, slot 24): the node's registers. The policy that decides the port
//! mask is `crate::swarm`; this module reads the node's state into the shapes it and the host
//! commands use, and writes the settings back. Configuration is taken by the node at its next
//! chunk boundary in each direction (docs/swarmx.md "Configuration and status ports").

use ws_common::ctrl::cmd::{SwarmPort, SwarmStatusData, SWARM_MAX_PORTS};
use ws_common::regmap::swarm as reg;

use crate::pac;
use crate::swarm::{Abort, NodeSettings};

/// The node's build parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwarmParams {
    /// Downstream ports.
    pub ports: u8,
    /// Adder tree levels.
    pub levels: u8,
    /// The bf16 wire formats are built.
    pub bf16: bool,
    /// The scale multiplier is built.
    pub scale: bool,
}

/// One SwarmX node.
#[derive(Debug)]
pub struct SwarmX {
    r: pac::Swarm,
    params: SwarmParams,
}

impl SwarmX {
    /// Takes the block when the SoC has it: its slot reads the SwarmX ID word (an empty slot
    /// reads 0, docs/soc.md); `None` otherwise.
    pub fn probe(r: pac::Swarm) -> Option<Self> {
        if r.id().read() != reg::ID_WORD {
            return None;
        }
        let p = r.params().read();
        let params = SwarmParams {
            ports: (reg::params::PORTS.get(p) as u8).min(SWARM_MAX_PORTS as u8),
            levels: reg::params::LEVELS.get(p) as u8,
            bf16: reg::params::BF16.get(p) != 0,
            scale: reg::params::SCALE.get(p) != 0,
        };
        Some(Self { r, params })
    }

    /// The build parameters.
    pub fn params(&self) -> SwarmParams {
        self.params
    }

    /// Writes the port mask and the scale (CTRL.scale_en with it), keeping CTRL's other
    /// fields.
    pub fn apply(&self, s: &NodeSettings) {
        self.r.port_mask().write(u32::from(s.mask));
        let ctrl = self.r.ctrl().read();
        if let Some(bits) = s.scale {
            self.r.scale().write(bits);
        }
        self.r.ctrl().write(reg::ctrl::SCALE_EN.set(ctrl, u32::from(s.scale.is_some())));
    }

    /// Lets a latched abort raise the node's interrupt line (CTRL.irq_err).
    pub fn enable_irq(&self) {
        let ctrl = self.r.ctrl().read();
        self.r.ctrl().write(reg::ctrl::IRQ_ERR.set(ctrl, 1));
    }

    /// Sets the wire format (0 fp32, 1 bf16 in, 2 bf16 in and out) and the timeout.
    pub fn set_format(&self, dtype: u8, timeout: u32) {
        let ctrl = self.r.ctrl().read();
        self.r.ctrl().write(reg::ctrl::DTYPE.set(ctrl, u32::from(dtype)));
        self.r.timeout().write(timeout);
    }

    /// Chunks aborted since the counters were cleared (CNT_ERRORS) and flits sent upstream
    /// (CNT_REDUCED): the policy's progress signal.
    pub fn progress(&self) -> (u32, u32) {
        (self.r.cnt_errors().read(), self.r.cnt_reduced().read())
    }

    /// The latched abort, if one is pending; releases it so the next can latch.
    pub fn take_abort(&self) -> Option<Abort> {
        let e = self.r.err().read();
        if reg::err::PENDING.get(e) == 0 {
            return None;
        }
        let ports = self.r.err_ports().read();
        let lo = self.r.err_user_lo().read();
        let hi = self.r.err_user_hi().read();
        let a = Abort {
            code: reg::err::CODE.get(e) as u8,
            port: reg::err::PORT.get(e) as u8,
            timeout_ports: reg::err_ports::TIMEOUT.get(ports) as u16,
            mismatch_ports: reg::err_ports::MISMATCH.get(ports) as u16,
            forwarded: reg::err_forward::PORTS.get(self.r.err_forward().read()) as u16,
            // The header (ws_common::flit): kind [3:0], layer [15:4], step [31:16]; chunk
            // [47:32].
            layer: ((lo >> 4) & 0xfff) as u16,
            step: (lo >> 16) as u16,
            chunk: hi as u16,
        };
        self.r.err().write(reg::err::PENDING.set(0, 1));
        Some(a)
    }

    /// Everything `wsctl swarm status` shows that the node holds (the policy fills the
    /// host mask, the port states and strikes, and the events lost).
    pub fn status(&self) -> SwarmStatusData {
        let p = self.params;
        let ctrl = self.r.ctrl().read();
        let masks = self.r.masks().read();
        let mut s = SwarmStatusData {
            ports: p.ports,
            levels: p.levels,
            bf16: p.bf16,
            scale_built: p.scale,
            dtype: reg::ctrl::DTYPE.get(ctrl) as u8,
            scale_en: reg::ctrl::SCALE_EN.get(ctrl) != 0,
            port_mask: self.r.port_mask().read() as u16,
            up_mask: reg::masks::UP.get(masks) as u16,
            dn_mask: reg::masks::DN.get(masks) as u16,
            scale: self.r.scale().read(),
            timeout: self.r.timeout().read(),
            bcast: self.r.cnt_bcast().read(),
            reduced: self.r.cnt_reduced().read(),
            dropped: self.r.cnt_dropped().read(),
            errors: self.r.cnt_errors().read(),
            lat_last: self.r.lat_last().read(),
            lat_max: self.r.lat_max().read(),
            ..Default::default()
        };
        for (i, port) in s.port[..usize::from(p.ports)].iter_mut().enumerate() {
            *port = SwarmPort {
                up_flits: self.r.up_flits(i).read(),
                dn_flits: self.r.dn_flits(i).read(),
                up_wait: self.r.up_wait(i).read(),
                dn_stall: self.r.dn_stall(i).read(),
                ..Default::default()
            };
        }
        s
    }
}
