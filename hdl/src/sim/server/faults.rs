//! The simulator's link fault injection (docs/link.md "Fault injection", docs/sim.md): one
//! `ws_common::link::fault::Injector` per direction of the link port, driven by the rules of
//! `--fault` and of the control port's `fault` request, clocked in simulated cycles (a
//! `delay=N` holds a frame for N board cycles).

use serde_json::{json, Value};
use ws_common::link::fault::{parse_rules, rule_text, Dir, FaultStats, Injector, Kind, Rule};
use ws_common::link::CHANNELS;

/// Both directions' injectors and the rules they were made from.
pub(crate) struct LinkFaults {
    rules: Vec<Rule>,
    seed: u64,
    to_board: Injector,
    to_host: Injector,
    /// Totals of injectors retired by a reconnect or a rule change.
    past: [FaultStats; 2],
    warned_unparsed: bool,
    scratch: Vec<u8>,
}

impl LinkFaults {
    pub(crate) fn new(rules: Vec<Rule>, seed: u64) -> Self {
        Self {
            to_board: Injector::new(Dir::ToBoard, &rules, seed),
            to_host: Injector::new(Dir::ToHost, &rules, seed ^ 0x5bd1_e995),
            rules,
            seed,
            past: Default::default(),
            warned_unparsed: false,
            scratch: Vec::new(),
        }
    }

    /// Whether any rule is set (without rules the link is a plain copy).
    pub(crate) fn active(&self) -> bool {
        !self.rules.is_empty()
    }

    /// Host-to-board bytes: what the injector lets through is appended to `out`.
    pub(crate) fn toward_board(&mut self, input: &[u8], cycle: u64, out: &mut Vec<u8>) {
        self.to_board.push(input, cycle, out);
        self.warn_unparsed();
    }

    /// Board-to-host bytes.
    pub(crate) fn toward_host(&mut self, input: &[u8], cycle: u64, out: &mut Vec<u8>) {
        self.to_host.push(input, cycle, out);
        self.warn_unparsed();
    }

    /// Releases delayed frames: host-to-board into `board`, board-to-host into `host`.
    pub(crate) fn poll(&mut self, cycle: u64, board: &mut Vec<u8>, host: &mut Vec<u8>) {
        self.to_board.poll(cycle, board);
        self.to_host.poll(cycle, host);
    }

    /// Whether either direction holds delayed frames.
    pub(crate) fn holding(&self) -> bool {
        self.to_board.holding() || self.to_host.holding()
    }

    /// A new link client: half-parsed frames and held frames of the old one are gone.
    pub(crate) fn reconnect(&mut self) {
        self.replace(self.rules.clone());
    }

    fn replace(&mut self, rules: Vec<Rule>) {
        let next = Self::new(rules, self.seed.wrapping_add(1));
        let old = std::mem::replace(self, next);
        self.past = old.past;
        self.warned_unparsed = old.warned_unparsed;
        add(&mut self.past[0], old.to_board.stats());
        add(&mut self.past[1], old.to_host.stats());
    }

    fn warn_unparsed(&mut self) {
        let n = self.to_board.stats().unparsed + self.to_host.stats().unparsed;
        if n > 0 && !self.warned_unparsed {
            self.warned_unparsed = true;
            eprintln!(
                "ws-sim: fault injection dropped {n} link bytes that are not protocol v2 frames; \
                 fault rules need a v2 host and firmware (`fault clear` on the control port turns them off)"
            );
        }
    }

    /// The control port's `fault …` request: `fault` or `fault stats` (report), `fault clear`,
    /// or `fault RULE [RULE…]` (replaces the rules; separate rules with spaces or `;`).
    pub(crate) fn request(&mut self, args: &str) -> Value {
        let args = args.trim();
        match args {
            "" | "stats" => {}
            "clear" => self.replace(Vec::new()),
            specs => match parse_rules(specs) {
                Ok(rules) => self.replace(rules),
                Err(e) => return json!({ "ok": false, "error": e }),
            },
        }
        let mut v = self.report();
        v["ok"] = json!(true);
        v
    }

    /// Rules and totals since start, per direction: the `fault` object of `stats`.
    pub(crate) fn report(&self) -> Value {
        let dir = |past: &FaultStats, now: &FaultStats| {
            let mut t = past.clone();
            add(&mut t, now);
            let kinds: serde_json::Map<String, Value> = Kind::ALL
                .iter()
                .map(|&k| {
                    (
                        k.name().to_string(),
                        json!({ "total": t.total(k), "data": t.total_data(k), "per_channel": t.injected[k as usize] }),
                    )
                })
                .collect();
            json!({
                "frames": t.frames,
                "injected": kinds,
                "header_hits": t.header_hits,
                "payload_hits": t.payload_hits,
                "unparsed_bytes": t.unparsed,
                "summary": t.summary(),
            })
        };
        json!({
            "rules": self.rules.iter().map(rule_text).collect::<Vec<_>>(),
            "h2b": dir(&self.past[0], self.to_board.stats()),
            "b2h": dir(&self.past[1], self.to_host.stats()),
            "holding": self.holding(),
        })
    }

    /// A buffer for callers that need one for a moment.
    pub(crate) fn scratch(&mut self) -> Vec<u8> {
        let mut v = std::mem::take(&mut self.scratch);
        v.clear();
        v
    }

    /// Gives back a buffer from [`LinkFaults::scratch`].
    pub(crate) fn give_back(&mut self, v: Vec<u8>) {
        self.scratch = v;
    }
}

fn add(t: &mut FaultStats, s: &FaultStats) {
    t.frames += s.frames;
    for k in 0..Kind::ALL.len() {
        for c in 0..CHANNELS {
            t.injected[k][c] += s.injected[k][c];
            t.injected_data[k][c] += s.injected_data[k][c];
        }
    }
    t.header_hits += s.header_hits;
    for c in 0..CHANNELS {
        t.payload_hits[c] += s.payload_hits[c];
    }
    t.unparsed += s.unparsed;
}

#[cfg(test)]
mod tests {
    use super::*;
    use ws_common::link::{encode_frame, flags, frame_len, Channel, Header};

    fn frame(seq: u32) -> Vec<u8> {
        let mut h = Header::new(Channel::Weights, flags::DATA);
        h.seq = seq;
        h.length = 64;
        let mut out = vec![0u8; frame_len(64)];
        encode_frame(&h, &[seq as u8; 64], &mut out).unwrap();
        out
    }

    #[test]
    fn rules_from_the_control_port_and_totals_across_reconnects() {
        let mut f = LinkFaults::new(Vec::new(), 1);
        assert!(!f.active());
        let bad = f.request("h2b:explode:rate=1");
        assert_eq!(bad["ok"], false);
        assert!(bad["error"].as_str().unwrap().contains("kind `explode`"));
        let v = f.request("h2b:drop:every=2 b2h:dup:at=0");
        assert_eq!(v["rules"], json!(["h2b:drop:every=2", "b2h:dup:at=0"]));
        let mut out = Vec::new();
        for s in 0..10 {
            f.toward_board(&frame(s), 0, &mut out);
        }
        assert_eq!(out.len(), 5 * frame_len(64));
        f.reconnect();
        for s in 0..4 {
            f.toward_board(&frame(s), 0, &mut out);
        }
        let mut back = Vec::new();
        f.toward_host(&frame(0), 0, &mut back);
        assert_eq!(back.len(), 2 * frame_len(64));
        let r = f.request("stats");
        assert_eq!(r["h2b"]["injected"]["drop"]["total"], 7);
        assert_eq!(r["h2b"]["frames"], 14);
        assert_eq!(r["b2h"]["injected"]["dup"]["per_channel"][2], 1);
        let r = f.request("clear");
        assert_eq!(r["rules"], json!([]));
        assert_eq!(r["h2b"]["injected"]["drop"]["total"], 7, "totals survive a rule change");
        assert!(!f.active());
    }
}
