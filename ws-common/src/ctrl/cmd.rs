//! One type per control command. Adding a command means adding a file here and an opcode.

mod identity;
mod link_counters;
mod link_mode;
mod load_begin;
mod load_boot;
mod load_data;
mod loader_info;
mod log_echo;
mod mesh;
mod mesh_eval;
mod mesh_run;
mod mx_counters;
mod mx_create;
mod mx_info;
mod mx_release;
mod mx_step;
mod mx_transfer;
mod peek;
mod ping;
mod poke;
mod reset;
mod stats;
mod swarm;
mod trace_ctl;

pub use identity::{BlockInfo, Identity, IdentityInfo, Window, MAX_BLOCKS};
pub use link_counters::{CounterWords, LinkCounters, MAX_LINK_COUNTERS};
pub use link_mode::{BulkMode, LinkMode};
pub use load_begin::LoadBegin;
pub use load_boot::LoadBoot;
pub use load_data::{LoadData, MAX_LOAD_CHUNK};
pub use loader_info::{LoaderInfo, LoaderState};
pub use log_echo::LogEcho;
pub use mesh::{MeshPlan, MeshSetup, MeshStep, MeshStepDone, MeshTrain, MESH_MAX_DIMS};
pub use mesh_eval::MeshEval;
pub use mesh_run::{MeshRunDone, MeshTrainRun, MAX_RUN_STEPS};
pub use mx_counters::{MxCounterValues, MxCounters, MX_COUNTERS, MX_COUNTER_NAMES};
pub use mx_create::{MxCreate, MxLayerInfo};
pub use mx_info::{MxInfo, MxInfoData};
pub use mx_release::{MxLayerList, MxLayerState, MxLayers, MxRelease, MX_MAX_LAYERS};
pub use mx_step::{MxStep, MxStepDone, MAX_REFEEDS};
pub use mx_transfer::{MxArray, MxRange, MxRead, MxWrite};
pub use peek::{Peek, PeekData, MAX_PEEK};
pub use ping::Ping;
pub use poke::{Poke, MAX_POKE};
pub use reset::Reset;
pub use stats::{Stats, StatsInfo};
pub use swarm::{
    SwarmConfig, SwarmEvent, SwarmEventList, SwarmEvents, SwarmPort, SwarmStatus, SwarmStatusData,
    SWARM_MAX_EVENTS, SWARM_MAX_PORTS,
};
pub use trace_ctl::{TraceCtl, TraceOp, TraceState, TRACE_ALL};

use super::{encode_frame, Command, Status, MAX_PAYLOAD, RESPONSE_BIT};

/// Opcodes of every request this protocol version defines.
pub mod opcode {
    /// [`super::Ping`].
    pub const PING: u8 = 0x01;
    /// [`super::Identity`].
    pub const IDENTITY: u8 = 0x02;
    /// [`super::Peek`].
    pub const PEEK: u8 = 0x03;
    /// [`super::Poke`].
    pub const POKE: u8 = 0x04;
    /// [`super::Reset`].
    pub const RESET: u8 = 0x05;
    /// [`super::Stats`].
    pub const STATS: u8 = 0x06;
    /// [`super::LogEcho`].
    pub const LOG_ECHO: u8 = 0x07;
    /// [`super::LinkCounters`] (link protocol v2 only).
    pub const LINK_COUNTERS: u8 = 0x08;
    /// [`super::LinkMode`] (link protocol v2 only).
    pub const LINK_MODE: u8 = 0x09;
    /// [`super::MxInfo`] (link v2; MemoryX).
    pub const MX_INFO: u8 = 0x30;
    /// [`super::MxCreate`] (link v2; MemoryX).
    pub const MX_CREATE: u8 = 0x31;
    /// [`super::MxWrite`] (link v2; MemoryX).
    pub const MX_WRITE: u8 = 0x32;
    /// [`super::MxRead`] (link v2; MemoryX).
    pub const MX_READ: u8 = 0x33;
    /// [`super::MxStep`] (link v2; MemoryX).
    pub const MX_STEP: u8 = 0x34;
    /// [`super::MxCounters`] (link v2; MemoryX).
    pub const MX_COUNTERS: u8 = 0x35;
    /// [`super::MxRelease`] (link v2; MemoryX).
    pub const MX_RELEASE: u8 = 0x36;
    /// [`super::MxLayers`] (link v2; MemoryX).
    pub const MX_LAYERS: u8 = 0x37;
    /// [`super::SwarmStatus`].
    pub const SWARM_STATUS: u8 = 0x40;
    /// [`super::SwarmConfig`].
    pub const SWARM_CONFIG: u8 = 0x41;
    /// [`super::SwarmEvents`].
    pub const SWARM_EVENTS: u8 = 0x42;
    /// [`super::MeshSetup`] (link v2; the wafer mesh).
    pub const MESH_SETUP: u8 = 0x50;
    /// [`super::MeshStep`] (link v2; the wafer mesh).
    pub const MESH_STEP: u8 = 0x51;
    /// [`super::MeshTrain`] (link v2; the wafer mesh with MemoryX and SwarmX).
    pub const MESH_TRAIN: u8 = 0x52;
    /// [`super::MeshEval`] (link v2; the wafers' forward pass with MemoryX's weights).
    pub const MESH_EVAL: u8 = 0x53;
    /// [`super::MeshTrainRun`] (link v2; consecutive training steps in one request).
    pub const MESH_TRAIN_RUN: u8 = 0x54;
    /// [`super::TraceCtl`] (link v2; the pipeline trace).
    pub const TRACE_CTL: u8 = 0x60;
    /// [`super::LoaderInfo`] (boot-ROM loader only).
    pub const LOADER_INFO: u8 = 0x20;
    /// [`super::LoadBegin`] (boot-ROM loader only).
    pub const LOAD_BEGIN: u8 = 0x21;
    /// [`super::LoadData`] (boot-ROM loader only).
    pub const LOAD_DATA: u8 = 0x22;
    /// [`super::LoadBoot`] (boot-ROM loader only).
    pub const LOAD_BOOT: u8 = 0x23;
}

/// Encodes a whole response frame: status byte, then (on success) the command's data.
pub fn encode_response<'a, C: Command<'a>>(
    req_id: u16,
    result: Result<&C::Response, Status>,
    out: &mut [u8],
) -> Result<usize, Status> {
    let mut payload = [0u8; MAX_PAYLOAD];
    let len = match result {
        Ok(resp) => {
            payload[0] = Status::Ok as u8;
            1 + C::encode_response(resp, &mut payload[1..])?
        }
        Err(status) => {
            payload[0] = status as u8;
            1
        }
    };
    encode_frame(C::OPCODE | RESPONSE_BIT, req_id, &payload[..len], out)
}

/// Encodes an error response to any opcode (used for unknown opcodes and bad payloads).
pub fn encode_error(opcode: u8, req_id: u16, status: Status, out: &mut [u8]) -> Result<usize, Status> {
    encode_frame(opcode | RESPONSE_BIT, req_id, &[status as u8], out)
}

/// Parses a response payload for command `C`: checks the status byte, then decodes the data.
pub fn decode_response<'a, C: Command<'a>>(payload: &'a [u8]) -> Result<C::Response, Status> {
    let (&status, data) = payload.split_first().ok_or(Status::BadLength)?;
    match Status::from_u8(status) {
        Status::Ok => C::decode_response(data),
        other => Err(other),
    }
}

/// Encodes a request frame for command `cmd`.
pub fn encode_request<'a, C: Command<'a>>(cmd: &C, req_id: u16, out: &mut [u8]) -> Result<usize, Status> {
    let mut payload = [0u8; MAX_PAYLOAD];
    let len = cmd.encode(&mut payload)?;
    encode_frame(C::OPCODE, req_id, &payload[..len], out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctrl::{Event, FrameDecoder, MAX_FRAME};

    fn roundtrip<'a, C: Command<'a> + core::fmt::Debug + PartialEq>(
        cmd: C,
        buf: &'a mut [u8; MAX_FRAME],
    ) -> C {
        let n = encode_request(&cmd, 42, buf).unwrap();
        let mut d = FrameDecoder::new();
        let mut got = None;
        for &b in &buf[..n] {
            if let Event::Frame(f) = d.feed(b) {
                assert_eq!((f.opcode, f.req_id), (C::OPCODE, 42));
                got = Some(f.payload.len());
            }
        }
        let plen = got.expect("frame decoded");
        C::decode(&buf[8..8 + plen]).unwrap()
    }

    #[test]
    fn requests_roundtrip() {
        let mut b = [0u8; MAX_FRAME];
        assert_eq!(roundtrip(Ping { nonce: 0xdead_beef }, &mut b), Ping { nonce: 0xdead_beef });
        let mut b = [0u8; MAX_FRAME];
        assert_eq!(
            roundtrip(Peek { addr: 0x1000_0000, len: 64 }, &mut b),
            Peek { addr: 0x1000_0000, len: 64 }
        );
        let mut b = [0u8; MAX_FRAME];
        let data = [1u8, 2, 3, 4];
        let p = roundtrip(Poke { addr: 0x1000_0100, data: &data }, &mut b);
        assert_eq!((p.addr, p.data), (0x1000_0100, &data[..]));
        let mut b = [0u8; MAX_FRAME];
        assert_eq!(roundtrip(LogEcho { value: 7, tag: -3 }, &mut b), LogEcho { value: 7, tag: -3 });
    }

    #[test]
    fn error_responses_decode_to_their_status() {
        let mut out = [0u8; MAX_FRAME];
        let n = encode_response::<Peek>(5, Err(Status::OutOfWindow), &mut out).unwrap();
        let payload = &out[8..n - 4];
        assert_eq!(decode_response::<Peek>(payload), Err(Status::OutOfWindow));
    }

    #[test]
    fn identity_roundtrip() {
        let mut info = IdentityInfo {
            fw_version: [0, 1, 0],
            build_hash: 0x1234_5678,
            clk_hz: 50_000_000,
            rom: Window { base: 0, len: 8192 },
            ram: Window { base: 0x1000_0000, len: 256 * 1024 },
            peek: Window { base: 0x1000_0000, len: 256 * 1024 },
            poke: Window { base: 0x1003_f000, len: 4096 },
            tick_hz: 1000,
            num_blocks: 2,
            blocks: [BlockInfo::default(); MAX_BLOCKS],
        };
        info.blocks[0] = BlockInfo { slot: 0, id: 0x5359, major: 1, minor: 0 };
        info.blocks[1] = BlockInfo { slot: 4, id: 0x484c, major: 0, minor: 1 };
        let mut out = [0u8; MAX_FRAME];
        let n = encode_response::<Identity>(1, Ok(&info), &mut out).unwrap();
        let back = decode_response::<Identity>(&out[8..n - 4]).unwrap();
        assert_eq!(back, info);
    }
}
