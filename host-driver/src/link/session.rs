//! [`Link`]: an [`Endpoint`] driven over a [`Transport`]: connect with HELLO, control
//! requests with retries under one request id, and the pump that moves the bulk streams.

use std::time::{Duration, Instant};

use crate::board_time::{BoardClock, Deadline};

use ws_common::ctrl::{Status, RESPONSE_BIT};
use ws_common::link::control::{CtrlHeader, CTRL_HEADER_LEN};
use ws_common::link::MAX_CTRL_PAYLOAD;

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
        }
        Ok(())
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
