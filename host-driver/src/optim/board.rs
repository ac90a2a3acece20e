//! [`BoardMx`]: the board's MemoryX over link protocol v2, an [`MxDevice`].
//!
//! The control requests (`ws_common::ctrl::cmd::Mx*`) say what to do; the words go on the
//! bulk channels in MemoryX's bulk mode (docs/memoryx-soc.md "Firmware"): `MxWrite` words on
//! channel 2 to the board, `MxStep` gradients on channel 3, `MxRead` words back on channel 2.
//! Each request consumes or produces exactly the words it names, so the streams stay in step;
//! the request is sent first and its words stream while the board answers, the link's credit
//! pacing the host to the store.
//!
//! Every range is checked here first, against the layer the board created, so a refusal on
//! the board (which would still consume the words) means a bug, and is reported with the
//! board's status.

use std::collections::BTreeMap;
use std::time::Duration;

use ws_common::ctrl::cmd::{
    BulkMode, LinkMode, MxArray, MxCounterValues, MxCounters, MxCreate, MxInfo, MxInfoData, MxLayerInfo,
    MxLayerList, MxLayers, MxRange, MxRead, MxRelease, MxStep, MxStepDone, MxWrite, SwarmStatus,
};
use ws_common::ctrl::Status;
use ws_common::link::Channel;

use super::{arrays_for, check_len, Array, LayerConfig, MxDevice};
use crate::error::{Error, OptimError, ProtocolError};
use crate::link::Link;
use crate::Result;

/// How long a MemoryX request may wait without a word moving (a simulated board is slow).
pub const STALL: Duration = Duration::from_secs(120);

/// One layer as the board created it.
#[derive(Debug, Clone, Copy)]
struct BoardLayer {
    len: u32,
    placed: MxLayerInfo,
    /// The last step the board ran.
    at: u32,
}

/// The board's MemoryX.
pub struct BoardMx {
    link: Link,
    name: String,
    info: MxInfoData,
    layers: BTreeMap<u16, BoardLayer>,
    /// The answers of every step run, in order (layer, answer).
    pub steps: Vec<(u16, MxStepDone)>,
    released: u16,
}

impl Drop for BoardMx {
    /// The job ends: its layers are released, whether it succeeded or failed, so the next
    /// job finds the store empty. A board that does not answer keeps them until the next
    /// job's [`open_board`] replaces them.
    fn drop(&mut self) {
        let mine = self.own_layers();
        if mine != 0 {
            let _ = self.link.request(&MxRelease { layers: mine }, Duration::from_secs(5), 0);
        }
    }
}

impl std::fmt::Debug for BoardMx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoardMx").field("board", &self.name).field("info", &self.info).finish_non_exhaustive()
    }
}

fn array_code(a: Array) -> MxArray {
    match a {
        Array::W => MxArray::W,
        Array::M => MxArray::M,
        Array::V => MxArray::V,
        Array::Vmax => MxArray::Vmax,
    }
}

fn words_to_bytes(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Opens MemoryX on a connected link: switches the board's bulk channels to MemoryX's rings
/// and reads what the block offers. `name` names the board in messages.
pub fn open_board(mut link: Link, name: &str) -> Result<BoardMx> {
    let mode = link.request(&LinkMode { mode: BulkMode::MemoryX }, STALL, 1)?;
    if mode != BulkMode::MemoryX {
        return Err(
            OptimError::Board { board: name.into(), what: format!("stayed in bulk mode {mode:?}") }.into()
        );
    }
    let mut info = link.request(&MxInfo, STALL, 1)?;
    // A job owns MemoryX's layers: what an earlier job left (it failed before its release,
    // or its host process died) is replaced, never built on.
    let released = info.layers;
    if released != 0 {
        info = link.request(&MxRelease { layers: released }, STALL, 1)?;
    }
    Ok(BoardMx {
        link,
        name: format!("board `{name}` ({})", link_desc(&info)),
        info,
        layers: BTreeMap::new(),
        steps: Vec::new(),
        released,
    })
}

/// The layers of `mask`, as a list for messages (`0, 1, 2`).
pub fn layer_list(mask: u16) -> String {
    (0..16).filter(|i| mask & (1 << i) != 0).map(|i: u16| i.to_string()).collect::<Vec<_>>().join(", ")
}

/// What MemoryX's store holds, by layer, for `wsctl mx status` and a full store's message.
pub fn store_usage(info: &MxInfoData, layers: &MxLayerList) -> String {
    let used = info.store_bytes.saturating_sub(info.free_bytes);
    let mut s = format!("{used} of {} store bytes in use", info.store_bytes);
    if layers.count == 0 {
        s.push_str(", no layers");
    }
    for l in layers.as_slice() {
        s.push_str(&format!(
            "; layer {}: {} parameters, {}, step {}, {} bytes",
            l.layer,
            l.len,
            optimizer_name(l.opt),
            l.at,
            l.bytes
        ));
    }
    s
}

/// The streamer's optimizer code as a name.
pub fn optimizer_name(code: u8) -> &'static str {
    match code {
        0 => "sgd",
        1 => "sgd+momentum",
        2 => "adam",
        3 => "adamw",
        4 => "adam+amsgrad",
        5 => "adamw+amsgrad",
        _ => "unknown optimizer",
    }
}

fn link_desc(i: &MxInfoData) -> String {
    format!("MemoryX {} lane(s), {} KiB store", i.lanes, i.store_bytes / 1024)
}

impl BoardMx {
    /// What the block reported when it was opened.
    pub fn info(&self) -> &MxInfoData {
        &self.info
    }

    /// The layers this job created, as a mask.
    fn own_layers(&self) -> u16 {
        self.layers.keys().fold(0u16, |m, &l| m | 1u16.checked_shl(u32::from(l)).unwrap_or(0))
    }

    /// The layers an earlier job had left on the board, released when this one opened it.
    pub fn released_at_open(&self) -> u16 {
        self.released
    }

    /// Releases every layer this job created (they are released on drop too).
    pub fn release(&mut self) -> Result<MxInfoData> {
        let mine = self.own_layers();
        self.info = self.link.request(&MxRelease { layers: mine }, STALL, 1)?;
        self.layers.clear();
        Ok(self.info)
    }

    /// Where the board placed `layer`'s arrays, and its chunk.
    pub fn placement(&self, layer: u16) -> Option<MxLayerInfo> {
        self.layers.get(&layer).map(|l| l.placed)
    }

    /// What the store holds, by layer ([`store_usage`]).
    pub fn usage(&mut self) -> Result<String> {
        let info = self.link.request(&MxInfo, STALL, 1)?;
        let layers = self.link.request(&MxLayers, STALL, 1)?;
        Ok(store_usage(&info, &layers))
    }

    /// MemoryX's counters.
    pub fn counters(&mut self) -> Result<MxCounterValues> {
        self.link.request(&MxCounters, STALL, 1)
    }

    /// The link, for its counters or a last request.
    pub fn link(&mut self) -> &mut Link {
        &mut self.link
    }

    fn layer(&self, layer: u16) -> Result<BoardLayer> {
        self.layers
            .get(&layer)
            .copied()
            .ok_or_else(|| OptimError::NoLayer { layer, device: self.describe() }.into())
    }

    /// Streams `bytes` on channel 2 while `MxWrite` of `range` runs.
    fn write_range(&mut self, range: MxRange, bytes: &[u8]) -> Result<()> {
        let mut sent = 0usize;
        let got = self.link.request_with(&MxWrite(range), STALL, 0, &mut |ep| {
            if sent == bytes.len() {
                return Ok(false);
            }
            let n = ep.write(Channel::Weights, &bytes[sent..]).map_err(ProtocolError::Stream)?;
            sent += n;
            Ok(n > 0)
        })?;
        if got != range.count || sent != bytes.len() {
            return Err(OptimError::Board {
                board: self.name.clone(),
                what: format!("MxWrite took {got} of {} words ({sent} B sent)", range.count),
            }
            .into());
        }
        Ok(())
    }
}

impl MxDevice for BoardMx {
    fn describe(&self) -> String {
        self.name.clone()
    }

    fn create_layer(&mut self, layer: u16, cfg: &LayerConfig) -> Result<()> {
        if self.layers.contains_key(&layer) {
            return Err(OptimError::LayerExists { layer, device: self.describe() }.into());
        }
        if cfg.len == 0 {
            return Err(OptimError::ZeroLength { layer }.into());
        }
        if u32::from(layer) >= u32::from(self.info.max_layers) {
            return Err(OptimError::Board {
                board: self.name.clone(),
                what: format!(
                    "has {} layer table entries, so layer {layer} cannot be created; use fewer tensors per run",
                    self.info.max_layers
                ),
            }
            .into());
        }
        let req = MxCreate {
            layer,
            len: cfg.len,
            workers: cfg.workers,
            batch: cfg.batch,
            hyper: cfg.hyper,
            schedule: cfg.schedule,
            start: cfg.start,
        };
        let placed = match self.link.request(&req, STALL, 1) {
            Ok(p) => p,
            Err(e) if matches!(e.refusal(), Some(Status::StoreFull)) => {
                let usage = self.usage().unwrap_or_else(|u| format!("(could not list the layers: {u})"));
                return Err(OptimError::Board {
                    board: self.name.clone(),
                    what: format!(
                        "has no room for layer {layer}'s {} parameters ({}): {usage}; free them with `wsctl mx clear`, or train a smaller model",
                        cfg.len,
                        arrays_for(&cfg.hyper).iter().map(|a| a.name()).collect::<Vec<_>>().join(", ")
                    ),
                }
                .into());
            }
            Err(e) => return Err(e),
        };
        self.layers.insert(layer, BoardLayer { len: cfg.len, placed, at: 0 });
        // The store holds whatever it held: every array starts at zero, as on the golden model.
        let zeros = vec![0u32; cfg.len as usize];
        for &a in arrays_for(&cfg.hyper) {
            self.write_array(layer, a, &zeros)?;
        }
        Ok(())
    }

    fn write_array(&mut self, layer: u16, array: Array, words: &[u32]) -> Result<()> {
        let l = self.layer(layer)?;
        check_len(layer, || format!("the {} array", array.name()), words.len(), l.len)?;
        let range = MxRange { layer, array: array_code(array), offset: 0, count: l.len };
        self.write_range(range, &words_to_bytes(words))
    }

    fn read_array(&mut self, layer: u16, array: Array, len: u32) -> Result<Vec<u32>> {
        let l = self.layer(layer)?;
        check_len(layer, || format!("the read of {}", array.name()), len as usize, l.len)?;
        let want = 4 * len as usize;
        let mut got: Vec<u8> = Vec::with_capacity(want);
        let mut buf = vec![0u8; 64 << 10];
        let mut take = |ep: &mut crate::link::Endpoint, got: &mut Vec<u8>| -> Result<bool> {
            let mut moved = false;
            while got.len() < want {
                let room = (want - got.len()).min(buf.len());
                let n = ep.read(Channel::Weights, &mut buf[..room]).map_err(ProtocolError::Stream)?;
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
                moved = true;
            }
            Ok(moved)
        };
        let range = MxRange { layer, array: array_code(array), offset: 0, count: len };
        let words = self.link.request_with(&MxRead(range), STALL, 0, &mut |ep| take(ep, &mut got))?;
        if words != len {
            return Err(OptimError::Board {
                board: self.name.clone(),
                what: format!("MxRead gave {words} of {len} words"),
            }
            .into());
        }
        // The answer comes once the board has queued every word; the last may still be on
        // the wire.
        let deadline = crate::board_time::Deadline::new(STALL, self.link.board_clock());
        while got.len() < want {
            self.link.pump(Duration::from_millis(2))?;
            let before = got.len();
            take(self.link.endpoint(), &mut got)?;
            if got.len() == before && deadline.expired() {
                return Err(OptimError::Board {
                    board: self.name.clone(),
                    what: format!("sent {} of the {want} bytes of its MxRead answer", got.len()),
                }
                .into());
            }
        }
        Ok(got.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }

    fn step_wafers(&mut self, t: u32, wafers: u32, grads: &[(u16, &[u32])]) -> Result<()> {
        for &(layer, g) in grads {
            let len = self.layer(layer)?.len;
            check_len(layer, || format!("the {wafers} wafers' gradients"), g.len(), len * wafers)?;
        }
        for &(layer, g) in grads {
            let per: Vec<&[u32]> = g.chunks(g.len() / wafers.max(1) as usize).collect();
            self.step_layer_wafers(layer, t, &per)?;
        }
        Ok(())
    }

    fn step(&mut self, t: u32, grads: &[(u16, &[u32])]) -> Result<()> {
        // Check every layer first: a refused step changes nothing.
        for &(layer, g) in grads {
            let l = self.layer(layer)?;
            check_len(layer, || "the gradient".into(), g.len(), l.len)?;
            if t != l.at + 1 {
                return Err(OptimError::StepOrder { t, layer, at: l.at }.into());
            }
        }
        for &(layer, g) in grads {
            self.send_step(layer, t, 0, &words_to_bytes(g))?;
        }
        Ok(())
    }
}

impl BoardMx {
    /// Runs step `t` of `layer` from the gradients of `per_wafer.len()` wafers (K ≥ 1, each
    /// one word per parameter), which the board's SwarmX node sums in its fixed order
    /// (ports 0..K−1) before the optimizer lanes (`MxStep::wafers`). Needs a board whose SoC
    /// has SwarmX, with at least K ports.
    pub fn step_layer_wafers(&mut self, layer: u16, t: u32, per_wafer: &[&[u32]]) -> Result<MxStepDone> {
        let l = self.layer(layer)?;
        if per_wafer.is_empty() || per_wafer.len() > usize::from(u8::MAX) {
            return Err(OptimError::Board {
                board: self.name.clone(),
                what: format!("a multi-wafer step needs 1 to 255 wafers, not {}", per_wafer.len()),
            }
            .into());
        }
        for (k, g) in per_wafer.iter().enumerate() {
            check_len(layer, || format!("wafer {k}'s gradient"), g.len(), l.len)?;
        }
        if t != l.at + 1 {
            return Err(OptimError::StepOrder { t, layer, at: l.at }.into());
        }
        let words: Vec<u32> = (0..l.len as usize).flat_map(|i| per_wafer.iter().map(move |g| g[i])).collect();
        let wafers = per_wafer.len();
        self.send_step(layer, t, wafers as u8, &words_to_bytes(&words))
            .map_err(|e| self.explain_wafers(e, wafers))
    }

    /// A refused K-wafer step whose SwarmX ports 0..K−1 are all masked says so, with the mask
    /// and what to do (the firmware answers BadArgument alone).
    fn explain_wafers(&mut self, e: Error, wafers: usize) -> Error {
        let Error::Protocol(ProtocolError::Refused { command, status: Status::BadArgument, context }) = e
        else {
            return e;
        };
        let fed = if wafers >= 16 { u16::MAX } else { (1u16 << wafers) - 1 };
        let note = match self.link.request(&SwarmStatus, STALL, 0) {
            Ok(s) if s.port_mask & fed == 0 => format!(
                " (the SwarmX node's ports 0..{} that a {wafers}-wafer step uses are all masked: port mask {:#x}; \
                 unmask one with `wsctl swarm config --mask`)",
                wafers - 1,
                s.port_mask
            ),
            _ => String::new(),
        };
        Error::Protocol(ProtocolError::Refused {
            command,
            status: Status::BadArgument,
            context: context + &note,
        })
    }

    /// Sends `MxStep` with its gradient bytes on channel 3 and records the answer.
    fn send_step(&mut self, layer: u16, t: u32, wafers: u8, bytes: &[u8]) -> Result<MxStepDone> {
        let mut sent = 0usize;
        let done = self.link.request_with(&MxStep { layer, t, wafers }, STALL, 0, &mut |ep| {
            if sent == bytes.len() {
                return Ok(false);
            }
            let n = ep.write(Channel::Gradients, &bytes[sent..]).map_err(ProtocolError::Stream)?;
            sent += n;
            Ok(n > 0)
        })?;
        let l = self.layers.get_mut(&layer).expect("checked by the caller");
        l.at = t;
        self.steps.push((layer, done));
        Ok(done)
    }
}
