//! One side of a v2 link: HELLO, the go-back-N senders and receivers of the bulk channels,
//! framing and the resynchronising decoder (docs/link.md).

use std::collections::VecDeque;

use ws_common::link::gbn::{Receiver, RttEstimator, RxDecision, Sender};
use ws_common::link::hello::{hello_flags, ChannelState, Hello, HelloError, HELLO_LEN};
use ws_common::link::{
    encode_frame, flags, frame_len, Channel, DecodeError, Decoder, Event, Header, CHANNELS, MAX_FRAME,
    MAX_PAYLOAD,
};

/// Largest go-back-N window an endpoint supports (HELLO negotiates down to the peer's).
pub const MAX_WINDOW: usize = 64;

/// Which side of the handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Sends HELLO (the host). Sends on channels 2, 3, 4; receives on 2, 3, 6.
    Initiator,
    /// Answers HELLO (the board). Sends on channels 2, 3, 6; receives on 2, 3, 4.
    Responder,
}

impl Role {
    /// Whether this side sends bulk data on `ch`.
    pub fn sends(self, ch: Channel) -> bool {
        match self {
            Role::Initiator => matches!(ch, Channel::Weights | Channel::Gradients | Channel::Data),
            Role::Responder => matches!(ch, Channel::Weights | Channel::Gradients | Channel::Trace),
        }
    }

    /// Whether this side receives bulk data on `ch`.
    pub fn receives(self, ch: Channel) -> bool {
        match self {
            Role::Initiator => matches!(ch, Channel::Weights | Channel::Gradients | Channel::Trace),
            Role::Responder => matches!(ch, Channel::Weights | Channel::Gradients | Channel::Data),
        }
    }
}

/// Sizes and timers of an endpoint. Ticks are the caller's unit (the host uses
/// microseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Largest bulk payload this side sends or accepts (a multiple of 4, ≤ 65 536).
    pub max_payload: u32,
    /// Go-back-N window in frames (≤ [`MAX_WINDOW`]).
    pub window: u16,
    /// Bytes each sending channel buffers: the application's writes and the frames not yet
    /// acknowledged.
    pub tx_buffer: usize,
    /// Bytes each receiving channel buffers for the application: its credit.
    pub rx_buffer: u32,
    /// Retransmission timeout before the first round trip is measured. From then on each
    /// sending channel adapts it to the link (RFC 6298, [`RttEstimator`]) within
    /// `min_rto..=max_rto`.
    pub rto: u64,
    /// Smallest adaptive retransmission timeout.
    pub min_rto: u64,
    /// Largest adaptive retransmission timeout (where exponential back-off stops).
    pub max_rto: u64,
    /// Longest an accepted frame waits for its ACK.
    pub ack_delay: u64,
    /// HELLO is resent this often until answered.
    pub hello_retry: u64,
    /// Ask the peer to keep its channel state (reconnect after a host restart).
    pub resume: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_payload: 16 << 10,
            window: 32,
            tx_buffer: 4 << 20,
            rx_buffer: 1 << 20,
            // RFC 6298 §2.1: 1 s until a round trip is measured; 10 ms at least after (a
            // USB or PCIe board answers in well under that), 5 s at most.
            rto: 1_000_000,
            min_rto: 10_000,
            max_rto: 5_000_000,
            ack_delay: 2_000,
            hello_retry: 200_000,
            resume: false,
        }
    }
}

/// Where the handshake is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkState {
    /// HELLO not yet exchanged.
    Connecting,
    /// Streams flow.
    Up {
        /// The negotiated largest payload.
        max_payload: u32,
        /// The negotiated window.
        window: u16,
        /// Whether channel state carried over from an earlier connection.
        resumed: bool,
    },
    /// The peer was refused (or refused us); nothing more flows.
    Refused(HelloError),
}

/// Why a stream call was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// This side does not send (or receive) on the channel.
    #[error("channel {0:?} does not carry bulk data in this direction")]
    WrongDirection(Channel),
    /// Bulk streams move whole 32-bit words (docs/link.md "Engine internals").
    #[error("bulk writes must be a multiple of 4 bytes ({0} given): pad the tensor's last word")]
    NotWords(usize),
}

/// A receiving stream's position, as [`Endpoint::checkpoint`] gives it and
/// [`Endpoint::restore`] takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxCheckpoint {
    /// The channel.
    pub channel: Channel,
    /// The next seq expected.
    pub expected: u32,
    /// Stream bytes committed (and read) since the channel was reset.
    pub committed: u32,
}

/// Counters of one endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Frames decoded (all channels).
    pub frames_in: u64,
    /// Frames sent.
    pub frames_out: u64,
    /// Wire bytes sent.
    pub bytes_out: u64,
    /// Header CRC errors (and other refused headers).
    pub header_errors: u64,
    /// Payload CRC errors per channel.
    pub payload_errors: [u64; CHANNELS],
    /// DATA frames for a channel this side does not receive on, or frames before HELLO.
    pub unexpected: u64,
    /// HELLOs sent.
    pub hellos: u64,
    /// Log channel frames that did not follow the previous one (lost log bytes).
    pub log_gaps: u64,
}

struct Tx {
    sender: Sender<MAX_WINDOW>,
    rtt: RttEstimator,
    /// Stream bytes from the sender's acked position on: frames in flight, then bytes not
    /// yet framed.
    ring: VecDeque<u8>,
}

impl Tx {
    /// Bytes in the ring not yet in a frame.
    fn unframed(&self) -> usize {
        self.ring.len() - self.sender.queued_bytes().wrapping_sub(self.sender.acked_bytes()) as usize
    }
}

struct Rx {
    receiver: Receiver,
    data: VecDeque<u8>,
    nak: bool,
}

/// One side of a link; see the module docs.
pub struct Endpoint {
    role: Role,
    cfg: Config,
    state: LinkState,
    decoder: Box<Decoder<MAX_FRAME>>,
    tx: [Option<Tx>; CHANNELS],
    rx: [Option<Rx>; CHANNELS],
    /// Channel state kept from before a reconnect, for RESUME.
    hello_due: Option<u64>,
    hello_reply: bool,
    peer_state: Option<[ChannelState; CHANNELS]>,
    stats: EndpointStats,
    frame: Vec<u8>,
    payload: Vec<u8>,
    /// Control payloads (channel 1) received, oldest first.
    control_in: VecDeque<Vec<u8>>,
    /// Log channel (5) bytes received, oldest first, and the next seq expected there.
    log_in: VecDeque<u8>,
    log_seq: u32,
    /// This connection attempt's HELLO `session`: kept across HELLO retries, new for every
    /// fresh start, so the board resets its streams once per start, never on a retry.
    session: u32,
}

/// A session id no other endpoint of this machine is likely to pick: time, pid and a
/// counter, mixed (splitmix64); never 0 (0 means "unknown" in HELLO).
fn new_session() -> u32 {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let t =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut z = t ^ (std::process::id() as u64) << 32 ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((z ^ (z >> 31)) as u32).max(1)
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("role", &self.role)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// A new endpoint; an initiator sends HELLO on its first [`Endpoint::output`].
    pub fn new(role: Role, cfg: Config) -> Self {
        let mut cfg = cfg;
        cfg.max_payload = (cfg.max_payload.clamp(4, MAX_PAYLOAD as u32)) & !3;
        cfg.window = cfg.window.clamp(1, MAX_WINDOW as u16);
        Endpoint {
            role,
            cfg,
            state: LinkState::Connecting,
            decoder: Box::new(Decoder::new()),
            tx: Default::default(),
            rx: Default::default(),
            hello_due: (role == Role::Initiator).then_some(0),
            hello_reply: false,
            peer_state: None,
            stats: EndpointStats::default(),
            frame: vec![0; MAX_FRAME],
            payload: Vec::new(),
            control_in: VecDeque::new(),
            log_in: VecDeque::new(),
            log_seq: 0,
            session: new_session(),
        }
    }

    /// The handshake state.
    pub fn state(&self) -> &LinkState {
        &self.state
    }

    /// Whether streams flow.
    pub fn is_up(&self) -> bool {
        matches!(self.state, LinkState::Up { .. })
    }

    /// Counters.
    pub fn stats(&self) -> &EndpointStats {
        &self.stats
    }

    /// The sender of `ch`, for its counters and positions.
    pub fn sender(&self, ch: Channel) -> Option<&Sender<MAX_WINDOW>> {
        self.tx[ch.index()].as_ref().map(|t| &t.sender)
    }

    /// The receiver of `ch`, for its counters and positions.
    pub fn receiver(&self, ch: Channel) -> Option<&Receiver> {
        self.rx[ch.index()].as_ref().map(|r| &r.receiver)
    }

    /// What the peer said about its channels in its HELLO (for a resumed stream: where the
    /// peer's receivers are).
    pub fn peer_state(&self, ch: Channel) -> Option<ChannelState> {
        self.peer_state.map(|s| s[ch.index()])
    }

    /// The stream position the next [`Endpoint::write`] on `ch` continues at: 0 on a fresh
    /// link, the peer's committed count after a resume.
    pub fn tx_position(&self, ch: Channel) -> Option<u32> {
        self.tx[ch.index()].as_ref().map(|t| t.sender.acked_bytes().wrapping_add(t.ring.len() as u32))
    }

    /// Queues stream bytes on `ch`; returns how many were taken (limited by the buffer).
    /// Before the handshake nothing is taken.
    pub fn write(&mut self, ch: Channel, bytes: &[u8]) -> Result<usize, StreamError> {
        if !self.role.sends(ch) {
            return Err(StreamError::WrongDirection(ch));
        }
        if bytes.len() % 4 != 0 {
            return Err(StreamError::NotWords(bytes.len()));
        }
        let cap = self.cfg.tx_buffer;
        let Some(t) = self.tx[ch.index()].as_mut() else { return Ok(0) };
        let n = cap.saturating_sub(t.ring.len()).min(bytes.len()) & !3;
        t.ring.extend(&bytes[..n]);
        Ok(n)
    }

    /// Whether everything written on `ch` has been acknowledged by the peer.
    pub fn flushed(&self, ch: Channel) -> bool {
        self.tx[ch.index()].as_ref().is_none_or(|t| t.ring.is_empty())
    }

    /// Bytes waiting to be read on `ch`.
    pub fn readable(&self, ch: Channel) -> usize {
        self.rx[ch.index()].as_ref().map_or(0, |r| r.data.len())
    }

    /// Reads committed stream bytes of `ch` into `buf`; freeing them grows the peer's credit.
    pub fn read(&mut self, ch: Channel, buf: &mut [u8]) -> Result<usize, StreamError> {
        if !self.role.receives(ch) {
            return Err(StreamError::WrongDirection(ch));
        }
        let Some(r) = self.rx[ch.index()].as_mut() else { return Ok(0) };
        let n = buf.len().min(r.data.len());
        for (d, s) in buf[..n].iter_mut().zip(r.data.drain(..n)) {
            *d = s;
        }
        r.receiver.release(n as u32);
        Ok(n)
    }

    /// Frames one control payload (docs/link.md "Control": seq 0, no ACK) into `out`.
    pub fn send_control(&mut self, payload: &[u8], out: &mut Vec<u8>) {
        let h = Header { length: payload.len() as u32, ..Header::new(Channel::Control, flags::DATA) };
        self.emit(&h, Some(payload), out);
    }

    /// Moves the log channel's bytes received so far (the board's defmt stream) into `out`.
    pub fn take_log(&mut self, out: &mut Vec<u8>) -> usize {
        let n = self.log_in.len();
        out.extend(self.log_in.drain(..));
        n
    }

    /// The oldest control payload received and not yet taken.
    pub fn pop_control(&mut self) -> Option<Vec<u8>> {
        self.control_in.pop_front()
    }

    /// Where a receiving stream of `ch` stands, for a host process that may stop and be
    /// restarted: the next seq expected and the bytes committed. Only once the application
    /// has read every committed byte (`None` before, and on a channel this side does not
    /// receive), so the checkpoint and what the application kept agree. Persist it with the
    /// bytes, before the next [`Endpoint::output`], which acknowledges them.
    pub fn checkpoint(&self, ch: Channel) -> Option<RxCheckpoint> {
        let r = self.rx[ch.index()].as_ref()?;
        r.data.is_empty().then(|| RxCheckpoint {
            channel: ch,
            expected: r.receiver.expected(),
            committed: r.receiver.committed(),
        })
    }

    /// Before connecting: continue a receiving stream from a checkpoint an earlier process
    /// left, and ask the peer to RESUME. The peer retransmits what it sent after the
    /// checkpoint; nothing before it comes again.
    pub fn restore(&mut self, cp: &RxCheckpoint) -> Result<(), StreamError> {
        if !self.role.receives(cp.channel) {
            return Err(StreamError::WrongDirection(cp.channel));
        }
        let receiver = Receiver::resume(
            cp.expected,
            cp.committed,
            self.cfg.rx_buffer,
            self.cfg.window,
            self.cfg.max_payload,
            self.cfg.ack_delay,
        );
        self.rx[cp.channel.index()] = Some(Rx { receiver, data: VecDeque::new(), nak: false });
        self.cfg.resume = true;
        Ok(())
    }

    /// The peer went away (a reconnect follows): half-received frames are dropped, and an
    /// initiator says HELLO again (with RESUME if configured, so the streams continue).
    pub fn reconnect(&mut self, resume: bool) {
        self.decoder.reset();
        self.cfg.resume = resume;
        if !resume {
            self.session = new_session();
        }
        self.state = LinkState::Connecting;
        if self.role == Role::Initiator {
            self.hello_due = Some(0);
        }
    }

    fn my_hello(&self) -> Hello {
        let mut h = Hello::new(self.cfg.max_payload, self.cfg.window);
        h.session = self.session;
        if self.cfg.resume {
            h.flags |= hello_flags::RESUME;
        }
        for ch in Channel::ALL {
            let s = &mut h.state[ch.index()];
            if let Some(r) = &self.rx[ch.index()] {
                s.rx_expected = r.receiver.expected();
                s.rx_committed = r.receiver.committed();
                s.credit = r.receiver.credit();
            } else if self.role.receives(ch) {
                s.credit = self.cfg.rx_buffer;
            }
            if let Some(t) = &self.tx[ch.index()] {
                s.tx_next = t.sender.next_seq();
            }
        }
        h
    }

    /// Brings the channels up after a good HELLO exchange.
    fn establish(&mut self, peer: Hello) {
        let mine = self.my_hello();
        let n = match mine.negotiate(&peer) {
            Ok(n) => n,
            Err(e) => {
                self.state = LinkState::Refused(e);
                return;
            }
        };
        self.decoder.set_max_bulk_payload(n.max_payload as usize);
        for ch in Channel::ALL {
            let i = ch.index();
            let ps = peer.state[i];
            if self.role.sends(ch) {
                let keep = self.tx[i].take().filter(|_| n.resume);
                let rtt = RttEstimator::new(self.cfg.rto, self.cfg.min_rto, self.cfg.max_rto);
                let sender = Sender::resume(ps.rx_expected, ps.rx_committed, n.window, ps.credit, rtt.rto());
                let mut ring = VecDeque::new();
                if let Some(old) = keep {
                    // Drop what the peer committed; the rest is resent from its position.
                    let mut old_ring = old.ring;
                    let done = ps.rx_committed.wrapping_sub(old.sender.acked_bytes()) as usize;
                    old_ring.drain(..done.min(old_ring.len()));
                    ring = old_ring;
                }
                self.tx[i] = Some(Tx { sender, rtt, ring });
            }
            if self.role.receives(ch) {
                let keep = self.rx[i].take().filter(|_| n.resume);
                let rx = match keep {
                    Some(mut r) => {
                        r.nak = false;
                        r
                    }
                    None => Rx {
                        receiver: Receiver::new(
                            self.cfg.rx_buffer,
                            n.window,
                            n.max_payload,
                            self.cfg.ack_delay,
                        ),
                        data: VecDeque::new(),
                        nak: false,
                    },
                };
                self.rx[i] = Some(rx);
            }
        }
        self.peer_state = Some(peer.state);
        self.state = LinkState::Up { max_payload: n.max_payload, window: n.window, resumed: n.resume };
    }

    /// Feeds bytes from the peer at tick `now`.
    pub fn input(&mut self, bytes: &[u8], now: u64) {
        let mut rest = bytes;
        loop {
            let r = self.decoder.feed(rest);
            let consumed = r.consumed;
            let got = match r.event {
                None => None,
                Some(Event::Error(e)) => Some(Err(e)),
                Some(Event::Frame(f)) => {
                    self.payload.clear();
                    self.payload.extend_from_slice(f.payload);
                    Some(Ok(f.header))
                }
            };
            rest = &rest[consumed..];
            match got {
                None => break,
                Some(Err(DecodeError::BadPayloadCrc { channel, .. })) => {
                    self.stats.payload_errors[channel.index()] += 1;
                    if let Some(r) = self.rx[channel.index()].as_mut() {
                        if let RxDecision::Gap { nak: true } = r.receiver.on_bad_frame() {
                            r.nak = true;
                        }
                    }
                }
                Some(Err(_)) => self.stats.header_errors += 1,
                Some(Ok(h)) => {
                    self.stats.frames_in += 1;
                    self.frame_in(h, now);
                }
            }
        }
    }

    fn frame_in(&mut self, h: Header, now: u64) {
        if h.channel == Channel::Link && h.has(flags::HELLO) {
            let peer = Hello::decode(&self.payload);
            match (self.role, peer) {
                (_, Err(e)) => self.state = LinkState::Refused(e),
                (_, Ok(_)) if h.has(flags::ERROR) => {
                    let peer = Hello::decode(&self.payload).ok();
                    let v = peer.map_or((0, 0), |p| (p.major, p.minor));
                    self.state = LinkState::Refused(HelloError::VersionMismatch {
                        peer: v,
                        ours: (ws_common::link::VERSION, ws_common::link::VERSION_MINOR),
                    });
                }
                (Role::Responder, Ok(p)) => {
                    self.cfg.resume = p.flags & hello_flags::RESUME != 0;
                    self.establish(p);
                    self.hello_reply = true;
                }
                (Role::Initiator, Ok(p)) => {
                    if !self.is_up() {
                        self.establish(p);
                        self.hello_due = None;
                    }
                }
            }
            return;
        }
        if h.channel == Channel::Control && h.has(flags::DATA) {
            self.control_in.push_back(self.payload.clone());
            return;
        }
        if h.channel == Channel::Log && h.has(flags::DATA) {
            // Sequenced, never retransmitted: a gap is counted, and the bytes go on (the
            // defmt decoder resynchronises at the next frame).
            if h.seq != self.log_seq {
                self.stats.log_gaps += 1;
            }
            self.log_seq = h.seq.wrapping_add(1);
            self.log_in.extend(&self.payload);
            return;
        }
        if !self.is_up() {
            self.stats.unexpected += 1;
            return;
        }
        let i = h.channel.index();
        if h.has(flags::ACK) {
            if let Some(t) = self.tx[i].as_mut() {
                let eff = t.sender.on_ack(h.ack, h.credit, h.has(flags::NAK));
                if let Some(at) = eff.sent_at {
                    t.rtt.sample(now.saturating_sub(at));
                    t.sender.set_rto(t.rtt.rto());
                }
                t.ring.drain(..(eff.bytes as usize).min(t.ring.len()));
            }
        }
        if h.has(flags::DATA) {
            let Some(r) = self.rx[i].as_mut() else {
                self.stats.unexpected += 1;
                return;
            };
            match r.receiver.on_data(h.seq, h.length, now) {
                RxDecision::Accept { .. } => r.data.extend(&self.payload),
                RxDecision::Duplicate => {}
                RxDecision::Gap { nak } => r.nak |= nak,
            }
        }
    }

    /// Appends the frames due at tick `now` to `out`: HELLO, ACKs and NAKs, new and
    /// retransmitted DATA frames. At most about `budget` bytes are added.
    pub fn output(&mut self, now: u64, out: &mut Vec<u8>, budget: usize) {
        let start = out.len();
        if let Some(due) = self.hello_due {
            if now >= due {
                let mine = self.my_hello();
                self.send_hello(&mine, out);
                self.hello_due = Some(now + self.cfg.hello_retry);
            }
        }
        if self.hello_reply {
            self.hello_reply = false;
            let mine = self.my_hello();
            self.send_hello(&mine, out);
        }
        if !self.is_up() {
            return;
        }
        // Acknowledgements first: they are small and unblock the peer.
        for ch in Channel::ALL {
            let i = ch.index();
            let Some(r) = self.rx[i].as_mut() else { continue };
            if r.nak || r.receiver.ack_due(now) {
                let a = r.receiver.ack(r.nak, now);
                r.nak = false;
                let mut h = Header::new(ch, flags::ACK | if a.nak { flags::NAK } else { 0 });
                h.ack = a.ack;
                h.credit = a.credit;
                self.emit(&h, None, out);
            }
        }
        let max = match self.state {
            LinkState::Up { max_payload, .. } => max_payload as usize,
            _ => return,
        };
        // Then data, channel by channel, a frame each in turn.
        let mut progress = true;
        while progress && out.len() - start < budget {
            progress = false;
            for ch in Channel::ALL {
                let i = ch.index();
                let Some(t) = self.tx[i].as_mut() else { continue };
                if t.sender.on_tick(now) {
                    t.rtt.backoff();
                    t.sender.set_rto(t.rtt.rto());
                }
                // Cut new frames from bytes not yet framed.
                loop {
                    let len = (t.unframed().min(max) & !3) as u32;
                    if len == 0 || t.sender.queue(len).is_err() {
                        break;
                    }
                }
                let Some(x) = t.sender.poll_transmit(now) else { continue };
                let from = x.offset.wrapping_sub(t.sender.acked_bytes()) as usize;
                self.payload.clear();
                self.payload.extend(t.ring.range(from..from + x.len as usize));
                let mut h = Header::new(ch, flags::DATA | if x.retx { flags::RETX } else { 0 });
                h.seq = x.seq;
                h.length = x.len;
                // Piggyback the reverse direction's ACK.
                if let Some(r) = self.rx[i].as_mut() {
                    let a = r.receiver.ack(false, now);
                    h.flags |= flags::ACK;
                    h.ack = a.ack;
                    h.credit = a.credit;
                }
                let payload = std::mem::take(&mut self.payload);
                self.emit(&h, Some(&payload), out);
                self.payload = payload;
                progress = true;
            }
        }
    }

    fn send_hello(&mut self, hello: &Hello, out: &mut Vec<u8>) {
        let h = Header { length: HELLO_LEN as u32, ..Header::new(Channel::Link, flags::HELLO) };
        let p = hello.encode();
        self.emit(&h, Some(&p), out);
        self.stats.hellos += 1;
    }

    fn emit(&mut self, h: &Header, payload: Option<&[u8]>, out: &mut Vec<u8>) {
        let p = payload.unwrap_or(&[]);
        let n = frame_len(p.len());
        if let Ok(n) = encode_frame(h, p, &mut self.frame[..n]) {
            out.extend_from_slice(&self.frame[..n]);
            self.stats.frames_out += 1;
            self.stats.bytes_out += n as u64;
        }
    }
}
