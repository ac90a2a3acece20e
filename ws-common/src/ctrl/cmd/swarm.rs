//! SwarmX's host commands (link v2 only; docs/swarmx.md "Firmware and host"):
//!
//! - [`SwarmStatus`]: the node's build parameters, its configuration, what the firmware's
//!   policy made of each port, and every counter, for `wsctl swarm status`;
//! - [`SwarmConfig`]: the host's port mask, wire format, scale and timeout;
//! - [`SwarmEvents`]: the policy's events the host has not read (aborts, masked ports).
//!
//! A board whose SoC has no SwarmX answers each with `Status::NotPresent`.

use crate::ctrl::{get_u16, get_u32, Command, Status, Writer};

/// Ports a node can have.
pub const SWARM_MAX_PORTS: usize = 16;
/// Events one [`SwarmEvents`] answer carries at most.
pub const SWARM_MAX_EVENTS: usize = 16;

/// Asks for [`SwarmStatusData`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwarmStatus;

/// One downstream port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SwarmPort {
    /// The firmware policy's state: 0 off, 1 active, 2 masked after a timeout, 3 masked
    /// after repeated mismatches.
    pub state: u8,
    /// Aborted chunks blamed on the port since its last clean one.
    pub strikes: u8,
    /// Gradient flits taken from the port.
    pub up_flits: u32,
    /// Weight flits delivered to the port.
    pub dn_flits: u32,
    /// Cycles the aligner waited for the port.
    pub up_wait: u32,
    /// Cycles the port held a weight flit it could not deliver.
    pub dn_stall: u32,
}

/// The node as the firmware sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SwarmStatusData {
    /// Downstream ports (PARAMS.ports).
    pub ports: u8,
    /// Adder tree levels.
    pub levels: u8,
    /// The bf16 wire formats are built.
    pub bf16: bool,
    /// The scale multiplier is built.
    pub scale_built: bool,
    /// CTRL.dtype.
    pub dtype: u8,
    /// CTRL.scale_en.
    pub scale_en: bool,
    /// The host's mask.
    pub host_mask: u16,
    /// PORT_MASK as written (the host's minus the policy's).
    pub port_mask: u16,
    /// The uplink mask in effect (MASKS.up).
    pub up_mask: u16,
    /// The downlink mask in effect (MASKS.dn).
    pub dn_mask: u16,
    /// SCALE (binary32 bits).
    pub scale: u32,
    /// TIMEOUT, cycles.
    pub timeout: u32,
    /// Flits broadcast, reduced flits sent, uplink flits dropped, chunks aborted.
    pub bcast: u32,
    /// Flits sent upstream.
    pub reduced: u32,
    /// Uplink flits discarded.
    pub dropped: u32,
    /// Chunks aborted.
    pub errors: u32,
    /// Cycles of the last reduction, and the most since the counters were cleared.
    pub lat_last: u32,
    /// The most.
    pub lat_max: u32,
    /// Events overwritten before the host read them.
    pub events_lost: u32,
    /// Per port, `ports` of them valid.
    pub port: [SwarmPort; SWARM_MAX_PORTS],
}

const HEAD: usize = 4 + 4 * 2 + 4 * 9;
const PORT: usize = 2 + 16;

impl<'a> Command<'a> for SwarmStatus {
    const OPCODE: u8 = super::opcode::SWARM_STATUS;
    type Response = SwarmStatusData;

    fn encode(&self, _out: &mut [u8]) -> Result<usize, Status> {
        Ok(0)
    }
    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        if !p.is_empty() {
            return Err(Status::BadLength);
        }
        Ok(Self)
    }
    fn encode_response(r: &SwarmStatusData, out: &mut [u8]) -> Result<usize, Status> {
        let ports = usize::from(r.ports).min(SWARM_MAX_PORTS);
        let mut w = Writer::new(out);
        let flags = u8::from(r.bf16) | u8::from(r.scale_built) << 1 | u8::from(r.scale_en) << 2;
        w.bytes(&[ports as u8, r.levels, flags, r.dtype])?;
        for m in [r.host_mask, r.port_mask, r.up_mask, r.dn_mask] {
            w.u16(m)?;
        }
        for v in [
            r.scale,
            r.timeout,
            r.bcast,
            r.reduced,
            r.dropped,
            r.errors,
            r.lat_last,
            r.lat_max,
            r.events_lost,
        ] {
            w.u32(v)?;
        }
        for p in &r.port[..ports] {
            w.bytes(&[p.state, p.strikes])?;
            for v in [p.up_flits, p.dn_flits, p.up_wait, p.dn_stall] {
                w.u32(v)?;
            }
        }
        Ok(w.len())
    }
    fn decode_response(d: &'a [u8]) -> Result<SwarmStatusData, Status> {
        if d.len() < HEAD {
            return Err(Status::BadLength);
        }
        let ports = usize::from(d[0]);
        if ports > SWARM_MAX_PORTS || d.len() != HEAD + ports * PORT {
            return Err(Status::BadLength);
        }
        let u = |i: usize| get_u32(d, 12 + 4 * i);
        let mut r = SwarmStatusData {
            ports: d[0],
            levels: d[1],
            bf16: d[2] & 1 != 0,
            scale_built: d[2] & 2 != 0,
            scale_en: d[2] & 4 != 0,
            dtype: d[3],
            host_mask: get_u16(d, 4)?,
            port_mask: get_u16(d, 6)?,
            up_mask: get_u16(d, 8)?,
            dn_mask: get_u16(d, 10)?,
            scale: u(0)?,
            timeout: u(1)?,
            bcast: u(2)?,
            reduced: u(3)?,
            dropped: u(4)?,
            errors: u(5)?,
            lat_last: u(6)?,
            lat_max: u(7)?,
            events_lost: u(8)?,
            port: [SwarmPort::default(); SWARM_MAX_PORTS],
        };
        for (i, p) in r.port[..ports].iter_mut().enumerate() {
            let at = HEAD + i * PORT;
            *p = SwarmPort {
                state: d[at],
                strikes: d[at + 1],
                up_flits: get_u32(d, at + 2)?,
                dn_flits: get_u32(d, at + 6)?,
                up_wait: get_u32(d, at + 10)?,
                dn_stall: get_u32(d, at + 14)?,
            };
        }
        Ok(r)
    }
}

/// The host's configuration of the node. The firmware refuses a mask with a port the node
/// does not have, an empty mask, a dtype above 2 or a bf16 dtype the node was not built with,
/// and a scale the node cannot apply (`BadArgument`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwarmConfig {
    /// Ports that take part (bit p = port p).
    pub mask: u16,
    /// Wire format: 0 fp32, 1 bf16 in with fp32 sums, 2 bf16 in and out.
    pub dtype: u8,
    /// Multiply each sum by 1/(active ports), kept right as the policy masks ports.
    pub scale: bool,
    /// Cycles an active port may lag before it is flagged; 0 never.
    pub timeout: u32,
    /// Fault injection for the rig: wafers (bit k = port k) whose gradients the data mover
    /// reads and never sends in a multi-wafer `MxStep`, as if they had stopped answering.
    pub dead: u16,
}

impl<'a> Command<'a> for SwarmConfig {
    const OPCODE: u8 = super::opcode::SWARM_CONFIG;
    type Response = SwarmStatusData;

    fn encode(&self, out: &mut [u8]) -> Result<usize, Status> {
        let mut w = Writer::new(out);
        w.u16(self.mask)?;
        w.bytes(&[self.dtype, u8::from(self.scale)])?;
        w.u32(self.timeout)?;
        w.u16(self.dead)?;
        Ok(w.len())
    }
    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        if p.len() != 10 {
            return Err(Status::BadLength);
        }
        if p[3] > 1 {
            return Err(Status::BadArgument);
        }
        Ok(Self {
            mask: get_u16(p, 0)?,
            dtype: p[2],
            scale: p[3] != 0,
            timeout: get_u32(p, 4)?,
            dead: get_u16(p, 8)?,
        })
    }
    fn encode_response(r: &SwarmStatusData, out: &mut [u8]) -> Result<usize, Status> {
        SwarmStatus::encode_response(r, out)
    }
    fn decode_response(d: &'a [u8]) -> Result<SwarmStatusData, Status> {
        SwarmStatus::decode_response(d)
    }
}

/// Asks for the events the host has not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwarmEvents;

/// One policy event (the firmware's `swarm::Event`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SwarmEvent {
    /// Sequence number, from 1.
    pub seq: u32,
    /// 1 abort, 2 port masked, 3 last port kept, 4 host mask.
    pub kind: u8,
    /// The abort's error code (`flit::ErrorCode`), 0 for a host mask.
    pub code: u8,
    /// The port concerned.
    pub port: u8,
    /// The mask in effect after the event.
    pub mask: u16,
    /// The aborted chunk's layer.
    pub layer: u16,
    /// Its step.
    pub step: u16,
    /// Its chunk.
    pub chunk: u16,
}

/// Up to [`SWARM_MAX_EVENTS`] events, oldest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SwarmEventList {
    /// How many of `events` are valid.
    pub count: u8,
    /// The events.
    pub events: [SwarmEvent; SWARM_MAX_EVENTS],
}

const EVENT: usize = 4 + 3 + 2 * 4;

impl<'a> Command<'a> for SwarmEvents {
    const OPCODE: u8 = super::opcode::SWARM_EVENTS;
    type Response = SwarmEventList;

    fn encode(&self, _out: &mut [u8]) -> Result<usize, Status> {
        Ok(0)
    }
    fn decode(p: &'a [u8]) -> Result<Self, Status> {
        if !p.is_empty() {
            return Err(Status::BadLength);
        }
        Ok(Self)
    }
    fn encode_response(r: &SwarmEventList, out: &mut [u8]) -> Result<usize, Status> {
        let n = usize::from(r.count).min(SWARM_MAX_EVENTS);
        let mut w = Writer::new(out);
        w.u8(n as u8)?;
        for e in &r.events[..n] {
            w.u32(e.seq)?;
            w.bytes(&[e.kind, e.code, e.port])?;
            for v in [e.mask, e.layer, e.step, e.chunk] {
                w.u16(v)?;
            }
        }
        Ok(w.len())
    }
    fn decode_response(d: &'a [u8]) -> Result<SwarmEventList, Status> {
        let (&n, rest) = d.split_first().ok_or(Status::BadLength)?;
        let n = usize::from(n);
        if n > SWARM_MAX_EVENTS || rest.len() != n * EVENT {
            return Err(Status::BadLength);
        }
        let mut r = SwarmEventList { count: n as u8, ..Default::default() };
        for (i, e) in r.events[..n].iter_mut().enumerate() {
            let at = i * EVENT;
            *e = SwarmEvent {
                seq: get_u32(rest, at)?,
                kind: rest[at + 4],
                code: rest[at + 5],
                port: rest[at + 6],
                mask: get_u16(rest, at + 7)?,
                layer: get_u16(rest, at + 9)?,
                step: get_u16(rest, at + 11)?,
                chunk: get_u16(rest, at + 13)?,
            };
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctrl::MAX_PAYLOAD;

    fn status(ports: u8) -> SwarmStatusData {
        let mut r = SwarmStatusData {
            ports,
            levels: 2,
            bf16: true,
            scale_built: true,
            scale_en: true,
            dtype: 1,
            host_mask: 0xf,
            port_mask: 0xb,
            up_mask: 0xb,
            dn_mask: 0xf,
            scale: (1.0f32 / 3.0).to_bits(),
            timeout: 800,
            bcast: 1,
            reduced: 2,
            dropped: 3,
            errors: 4,
            lat_last: 5,
            lat_max: 6,
            events_lost: 7,
            ..Default::default()
        };
        for (i, p) in r.port[..usize::from(ports)].iter_mut().enumerate() {
            let i = i as u32;
            *p = SwarmPort {
                state: 1 + (i % 3) as u8,
                strikes: i as u8,
                up_flits: i,
                dn_flits: 2 * i,
                up_wait: 3 * i,
                dn_stall: 4 * i,
            };
        }
        r
    }

    #[test]
    fn status_round_trips_at_every_port_count_and_fits_a_frame() {
        for ports in 0..=SWARM_MAX_PORTS as u8 {
            let r = status(ports);
            let mut b = [0u8; MAX_PAYLOAD];
            let n = SwarmStatus::encode_response(&r, &mut b).unwrap();
            assert!(n < MAX_PAYLOAD);
            assert_eq!(SwarmStatus::decode_response(&b[..n]), Ok(r));
            assert_eq!(SwarmStatus::decode_response(&b[..n - 1]), Err(Status::BadLength));
        }
        let mut b = [0u8; MAX_PAYLOAD];
        let n = SwarmStatus::encode_response(&status(4), &mut b).unwrap();
        b[0] = 17;
        assert_eq!(SwarmStatus::decode_response(&b[..n]), Err(Status::BadLength));
    }

    #[test]
    fn config_round_trips_and_refuses_odd_flags() {
        let c = SwarmConfig { mask: 0x00f5, dtype: 2, scale: true, timeout: 20_000, dead: 0x0004 };
        let mut b = [0u8; 10];
        let n = c.encode(&mut b).unwrap();
        assert_eq!(SwarmConfig::decode(&b[..n]), Ok(c));
        b[3] = 2;
        assert_eq!(SwarmConfig::decode(&b[..n]), Err(Status::BadArgument));
        assert_eq!(SwarmConfig::decode(&b[..n - 1]), Err(Status::BadLength));
    }

    #[test]
    fn events_round_trip() {
        let mut r = SwarmEventList { count: 3, ..Default::default() };
        for (i, e) in r.events[..3].iter_mut().enumerate() {
            *e = SwarmEvent {
                seq: 10 + i as u32,
                kind: 1 + i as u8,
                code: 2,
                port: i as u8,
                mask: 0xe,
                layer: 3,
                step: 9,
                chunk: 77,
            };
        }
        let mut b = [0u8; MAX_PAYLOAD];
        let n = SwarmEvents::encode_response(&r, &mut b).unwrap();
        assert_eq!(SwarmEvents::decode_response(&b[..n]), Ok(r));
        assert_eq!(SwarmEvents::decode_response(&b[..n - 1]), Err(Status::BadLength));
        assert_eq!(SwarmEvents::decode_response(&[]), Err(Status::BadLength));
    }
}
