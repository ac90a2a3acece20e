//! [`Link`]: an [`Endpoint`] driven over a [`Transport`]: connect with HELLO, control
//! requests with retries under one request id, and the pump that moves the bulk streams.

use std::time::{Duration, Instant};

use crate::board_time::{BoardClock, Deadline};

use ws_common::ctrl::cmd::{TraceCtl, TraceOp, TraceState};
use ws_common::ctrl::{Status, RESPONSE_BIT};
use ws_common::link::control::{CtrlHeader, CTRL_HEADER_LEN};
use ws_common::link::{Channel, MAX_CTRL_PAYLOAD};

use super::{Config, Endpoint, LinkState, Role, RxCheckpoint};
use crate::client::Request;
use crate::error::{Error, ProtocolError};
use crate::transport::Transport;

/// Bytes moved per pump in each direction at most.
const PUMP_BUDGET: usize = 1 << 20;

/// A connected v2 link to a board.
pub struct Link {
    ep: Endpoint,
    t: Box<dyn Transport>,
    epoch: Instant,
    next_id: u16,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    /// Control retries sent (a request resent under its id after a timeout).
    pub retries: u64,
    clock: Option<BoardClock>,
    trace: TraceTap,
}

/// What the pump does with channel 6 (the board's pipeline trace) while a trace is kept
/// ([`Link::keep_trace`]): every byte is read as it arrives, so the channel's credit never
/// stalls the board's trace unit. Otherwise channel 6 is left to whoever reads the endpoint
/// (the echo self-test loops channel 4 back on it).
#[derive(Debug, Default)]
struct TraceTap {
    /// Stream position of the next byte read (mod 2³²), while keeping.
    pos: u32,
    /// The position of `kept[0]`, while keeping.
    from: Option<u32>,
    kept: Vec<u8>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link").field("peer", &self.t.describe()).field("endpoint", &self.ep).finish()
    }
}

impl Link {
    /// Says HELLO over `t` and waits up to `timeout` for the board's answer. Ticks are
    /// microseconds. Every wait of the link (this one, and each request's) is measured in
    /// board time too when the transport has a board clock (`crate::board_time`). A board of another major version is refused with both versions named.
    pub fn connect(t: Box<dyn Transport>, cfg: Config, timeout: Duration) -> Result<Link, Error> {
        Self::resume(t, cfg, &[], timeout)
    }

    /// As [`Link::connect`] for a host process that continues where an earlier one stopped:
    /// each receiving stream starts from its checkpoint and the board is asked to RESUME
    /// (with no checkpoint this is a fresh connect). The board's HELLO then says how far it
    /// got on each stream this side sends ([`Endpoint::peer_state`]'s `rx_committed`): write
    /// on from there.
    pub fn resume(
        t: Box<dyn Transport>,
        cfg: Config,
        checkpoints: &[RxCheckpoint],
        timeout: Duration,
    ) -> Result<Link, Error> {
        let mut ep = Endpoint::new(Role::Initiator, cfg);
        for cp in checkpoints {
            ep.restore(cp).map_err(ProtocolError::Stream)?;
        }
        let mut link = Link {
            ep,
            clock: t.board_clock(),
            t,
            epoch: Instant::now(),
            next_id: 1,
            rbuf: vec![0; 256 << 10],
            wbuf: Vec::new(),
            retries: 0,
            trace: TraceTap::default(),
        };
        let deadline = Deadline::new(timeout, link.clock.as_ref());
        loop {
            link.pump(Duration::from_millis(5))?;
            match link.ep.state() {
                LinkState::Up { .. } => return Ok(link),
                LinkState::Refused(e) => return Err(ProtocolError::Hello(*e).into()),
                LinkState::Connecting => {}
            }
            if deadline.expired() {
                return Err(
                    ProtocolError::NoHello { peer: link.t.describe(), waited: deadline.describe() }.into()
                );
            }
        }
    }

    /// The protocol engine (streams, counters).
    pub fn endpoint(&mut self) -> &mut Endpoint {
        &mut self.ep
    }

    /// The board clock the link's waits are measured with, if any.
    pub fn board_clock(&self) -> Option<&BoardClock> {
        self.clock.as_ref()
    }

    /// The transport's description.
    pub fn describe(&self) -> String {
        self.t.describe()
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    /// Sends what is due, then waits up to `wait` for bytes and feeds them in.
    pub fn pump(&mut self, wait: Duration) -> Result<(), Error> {
        self.wbuf.clear();
        let now = self.now();
        self.ep.output(now, &mut self.wbuf, PUMP_BUDGET);
        if !self.wbuf.is_empty() {
            self.t.send(&self.wbuf)?;
        }
        let n = self.t.recv(&mut self.rbuf, wait)?;
        if n > 0 {
            let now = self.now();
            self.ep.input(&self.rbuf[..n], now);
            if self.trace.from.is_some() {
                self.read_trace()?;
            }
        }
        Ok(())
    }

    fn read_trace(&mut self) -> Result<(), Error> {
        let mut buf = [0u8; 16 << 10];
        loop {
            let n = self.ep.read(Channel::Trace, &mut buf).map_err(ProtocolError::Stream)?;
            if n == 0 {
                return Ok(());
            }
            self.trace.kept.extend_from_slice(&buf[..n]);
            self.trace.pos = self.trace.pos.wrapping_add(n as u32);
        }
    }

    /// Starts keeping what arrives on channel 6 (and forgets what was kept); returns the
    /// stream position of the first byte it will keep.
    pub fn keep_trace(&mut self) -> u32 {
        let committed = self.ep.receiver(Channel::Trace).map_or(0, |r| r.committed());
        self.trace.pos = committed.wrapping_sub(self.ep.readable(Channel::Trace) as u32);
        self.trace.from = Some(self.trace.pos);
        self.trace.kept.clear();
        self.trace.pos
    }

    /// The stream position after the last channel 6 byte kept.
    pub fn trace_position(&self) -> u32 {
        self.trace.pos
    }

    /// Starts the board's pipeline trace with `probes` (`ws_common::ctrl::cmd::TRACE_ALL`:
    /// every hop), keeping channel 6 from before the board writes its first record
    /// (docs/trace.md).
    pub fn trace_start(&mut self, probes: u32, timeout: Duration) -> Result<TraceState, Error> {
        self.keep_trace();
        let r = self.request(&TraceCtl { op: TraceOp::Start, probes }, timeout, 0);
        if r.is_err() {
            self.trace.from = None;
        }
        r
    }

    /// Stops the board's trace and waits, up to `timeout` without progress, for the rest of it
    /// to arrive. Returns the unit's final counts and the trace's bytes: whole records, from
    /// where it started to where it ended on channel 6.
    pub fn trace_stop(&mut self, timeout: Duration) -> Result<(TraceState, Vec<u8>), Error> {
        let st = self.request(&TraceCtl { op: TraceOp::Stop, probes: 0 }, timeout, 1)?;
        let want = st.head.wrapping_sub(st.start);
        let mut deadline = Deadline::new(timeout, self.clock.as_ref());
        let mut got = self.trace.pos.wrapping_sub(st.start);
        while got < want && !deadline.expired() {
            self.pump(Duration::from_millis(2))?;
            let now = self.trace.pos.wrapping_sub(st.start);
            if now != got {
                deadline.restart();
                got = now;
            }
        }
        let incomplete = |why| ProtocolError::TraceIncomplete {
            end: st.head,
            want,
            got: got.min(want),
            waited: deadline.describe(),
            why,
        };
        if got < want {
            self.trace.from = None;
            return Err(incomplete("the rest never came").into());
        }
        let bytes = self
            .take_trace(st.start, st.head)
            .ok_or_else(|| incomplete("this host started keeping channel 6 after the trace began"))?;
        Ok((st, bytes))
    }

    /// Stops keeping channel 6 and hands over the bytes of stream positions `[from, to)`
    /// (`None` when they were not all kept: asked for before [`Link::keep_trace`], or not
    /// received yet).
    pub fn take_trace(&mut self, from: u32, to: u32) -> Option<Vec<u8>> {
        let kept_from = self.trace.from.take()?;
        let kept = std::mem::take(&mut self.trace.kept);
        let skip = from.wrapping_sub(kept_from) as usize;
        let len = to.wrapping_sub(from) as usize;
        kept.get(skip..skip.checked_add(len)?).map(<[u8]>::to_vec)
    }

    /// Runs control request `req`: sends it, waits up to `timeout` for the answer, and
    /// resends it under the **same** request id up to `retries` times. The board answers a
    /// repeated id from its replay cache, so a retry never runs a command twice, `Poke` and
    /// `Reset` included.
    pub fn request<R: Request>(
        &mut self,
        req: &R,
        timeout: Duration,
        retries: u32,
    ) -> Result<R::Output, Error> {
        self.request_with(req, timeout, retries, &mut |_| Ok(false))
    }

    /// As [`Link::request`] for a request whose answer waits on bulk traffic (MemoryX moves
    /// words the host streams, or streams words to the host, before it answers): `bulk` runs
    /// after every pump, writing or reading the endpoint's bulk streams, and returns whether
    /// it moved anything. Each move restarts the timeout, so `timeout` bounds a stall, not the
    /// whole transfer.
    pub fn request_with<R: Request>(
        &mut self,
        req: &R,
        timeout: Duration,
        retries: u32,
        bulk: &mut dyn FnMut(&mut Endpoint) -> Result<bool, Error>,
    ) -> Result<R::Output, Error> {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        let mut payload = [0u8; MAX_CTRL_PAYLOAD];
        payload[..CTRL_HEADER_LEN].copy_from_slice(&CtrlHeader { opcode: R::OPCODE, req_id: id }.encode());
        let n = req
            .encode(&mut payload[CTRL_HEADER_LEN..MAX_CTRL_PAYLOAD])
            .map_err(|status| ProtocolError::Encode { command: R::NAME, status })?;
        let payload = &payload[..CTRL_HEADER_LEN + n];
        let mut waited = String::new();
        for attempt in 0..=retries {
            if attempt > 0 {
                self.retries += 1;
            }
            self.wbuf.clear();
            self.ep.send_control(payload, &mut self.wbuf);
            self.t.send(&self.wbuf)?;
            let mut deadline = Deadline::new(timeout, self.clock.as_ref());
            while !deadline.expired() {
                if bulk(&mut self.ep)? {
                    deadline.restart();
                }
                self.pump(Duration::from_millis(2))?;
                if bulk(&mut self.ep)? {
                    deadline.restart();
                }
                while let Some(p) = self.ep.pop_control() {
                    let Ok((h, body)) = CtrlHeader::decode(&p) else { continue };
                    // A stale answer (an earlier request's late reply) is skipped.
                    if h.req_id != id || h.opcode != R::OPCODE | RESPONSE_BIT {
                        continue;
                    }
                    let Some((&status, data)) = body.split_first() else {
                        return Err(ProtocolError::BadResponse {
                            command: R::NAME,
                            status: Status::BadLength,
                        }
                        .into());
                    };
                    return match Status::from_u8(status) {
                        Status::Ok => R::decode_output(data)
                            .map_err(|status| ProtocolError::BadResponse { command: R::NAME, status }.into()),
                        status => {
                            Err(ProtocolError::Refused { command: R::NAME, status, context: String::new() }
                                .into())
                        }
                    };
                }
            }
            waited = deadline.describe();
        }
        if retries > 0 {
            waited = format!("{} tries of {waited}", retries + 1);
        }
        Err(ProtocolError::Timeout {
            command: R::NAME,
            req_id: id,
            peer: self.t.describe(),
            waited,
            frame_errors: String::new(),
        }
        .into())
    }
}
