//! `ws_mesh_router` alone, and small meshes of it (`ws_mesh_fabric`), against the flow model
//! of `ws_hdl::mesh` (docs/mesh-router.md).
//!
//! The lone router sits among credit-link agents on N, E, S and W (upstream routers that send
//! only with credits, downstream routers that buffer BUF_DEPTH flits per color, drain at a
//! random rate and return credits after random delays) and stream agents on the per-color
//! local ports. Every flit carries its source and sequence number in `user`; every output
//! checks that nothing is lost or duplicated, that each (input, color) stream stays in order,
//! that packets stay whole, that multicast copies reach exactly the outputs of the mask, and,
//! where the router fixes the order (one input, or an ordered merge), the exact order. The
//! counters are compared with what the agents saw and what the model predicts.
//!
//! Two parameter sets: A is the default (2 colors, 4 flits per color, 32-bit payload, 64-bit
//! header); B has 3 colors, 2 flits per color, 16-bit payload and header, 3-bit quotas. Four
//! models in all: the router in A and B, a 3×3 fabric in A and a 2×2 fabric in B.

use std::collections::BTreeMap;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::RngExt;
use ws_hdl::dut::{run_test, Dut, Pattern};
use ws_hdl::mesh::tb::{
    self, Flit, LinkLane, LinkRx, LinkTx, LocalSink, LocalSource, Pins, SinkCheck, StreamLane, Tagger,
};
use ws_hdl::mesh::{
    bit, fabric_spec, router_spec, Channel, Endpoint, Entry, Geometry, Items, Mesh, RouteError, RouterParams,
    LINKS, PORTS, PORT_E, PORT_L, PORT_N, PORT_NAMES, PORT_S, PORT_W,
};

/// The default parameters.
const SET_A: RouterParams = RouterParams::new();
/// Three colors, the smallest buffers, narrow flits.
const SET_B: RouterParams =
    RouterParams { colors: 3, buf_depth: 2, data_width: 16, user_width: 16, quota_width: 3, cnt_width: 32 };

/// How the agents around a DUT behave.
#[derive(Debug, Clone, Copy)]
struct Traffic {
    /// valid of the local sources and the upstream links.
    send: Pattern,
    /// ready of the local sinks and the drain of the downstream buffers.
    take: Pattern,
    /// Extra cycles before a returned credit is used (upstream) or sent (downstream).
    credit_delay: u64,
}

const RANDOM: Traffic = Traffic { send: Pattern::Mixed, take: Pattern::Mixed, credit_delay: 6 };
const FULL: Traffic = Traffic { send: Pattern::Always, take: Pattern::Always, credit_delay: 0 };

/// Packets of random length (1..=max_len flits) from source `src`, tagged, as model items.
fn packets(
    tagger: &Tagger,
    rng: &mut StdRng,
    src: usize,
    seq0: &mut u64,
    count: usize,
    max_len: usize,
) -> Items<Flit> {
    let mut out = Vec::new();
    for _ in 0..count {
        let len = rng.random_range(1..=max_len);
        for k in 0..len {
            let f = tagger.flit(src, *seq0, k + 1 == len, rng);
            *seq0 += 1;
            out.push((f, f.last));
        }
    }
    out
}

/// Counters of one router as flat-bus indices: output o, color c is o·COLORS + c.
fn read_router_counters(dut: &Dut, p: &RouterParams, base: usize) -> RouterCounters {
    let w = p.cnt_width;
    let c = p.colors;
    RouterCounters {
        fwd: (0..PORTS)
            .map(|o| (0..c).map(|k| tb::counter(dut, "cnt_fwd", base * PORTS * c + o * c + k, w)).collect())
            .collect(),
        busy: (0..PORTS).map(|o| tb::counter(dut, "cnt_busy", base * PORTS + o, w)).collect(),
        stall: (0..PORTS).map(|o| tb::counter(dut, "cnt_stall", base * PORTS + o, w)).collect(),
        misroute: (0..PORTS).map(|i| tb::counter(dut, "cnt_misroute", base * PORTS + i, w)).collect(),
    }
}

#[derive(Debug)]
struct RouterCounters {
    fwd: Vec<Vec<u64>>,
    busy: Vec<u64>,
    stall: Vec<u64>,
    misroute: Vec<u64>,
}

// ---------------------------------------------------------------------------- one router

/// A lone router with agents on every port. Its routes are a 1×1 [`Mesh`]: link port p is
/// edge link p, and the local port is PE 0.
struct RouterTb {
    p: RouterParams,
    pins: Pins,
    tx: Vec<LinkTx>,
    rx: Vec<LinkRx>,
    src: Vec<LocalSource>,
    sink: Vec<LocalSink>,
    /// By (output port, color).
    checks: BTreeMap<(usize, usize), SinkCheck>,
    tagger: Tagger,
    /// Flits seen per output and color.
    seen: Vec<Vec<u64>>,
}

impl RouterTb {
    fn new(dut: &Dut, p: RouterParams, t: Traffic, salt: u64) -> Self {
        let mut pins = Pins::new();
        let rng = |k: u64| dut.rng(salt * 1000 + k);
        let tx = (0..LINKS)
            .map(|l| {
                let lane = LinkLane::new(&mut pins, dut, "s_link", l, &p);
                LinkTx::new(format!("in {}", PORT_NAMES[l]), lane, &p, t.send, t.credit_delay, rng(l as u64))
            })
            .collect();
        let rx = (0..LINKS)
            .map(|l| {
                let lane = LinkLane::new(&mut pins, dut, "m_link", l, &p);
                LinkRx::new(
                    format!("out {}", PORT_NAMES[l]),
                    lane,
                    &p,
                    t.take,
                    t.credit_delay,
                    rng(10 + l as u64),
                )
            })
            .collect();
        let src = (0..p.colors)
            .map(|c| {
                LocalSource::new(
                    StreamLane::new(&mut pins, dut, "s_local", c, &p),
                    t.send,
                    rng(20 + c as u64),
                )
            })
            .collect();
        let sink = (0..p.colors)
            .map(|c| {
                let lane = StreamLane::new(&mut pins, dut, "m_local", c, &p);
                LocalSink::new(format!("out L color {c}"), lane, t.take, rng(40 + c as u64))
            })
            .collect();
        RouterTb {
            p,
            pins,
            tx,
            rx,
            src,
            sink,
            checks: BTreeMap::new(),
            tagger: Tagger::new(PORTS, &p),
            seen: vec![vec![0; p.colors]; PORTS],
        }
    }

    /// Queues `inject` (per color, per input port as endpoint) and sets every output's
    /// expectations from the model. Returns the model's misroute count per input.
    fn load(&mut self, mesh: &Mesh, inject: &[BTreeMap<Endpoint, Items<Flit>>]) -> Vec<u64> {
        let mut dropped = vec![0u64; PORTS];
        for (c, inj) in inject.iter().enumerate() {
            for (ep, items) in inj {
                for (f, _) in items {
                    match *ep {
                        Endpoint::Edge(l) => self.tx[l].push(c, *f),
                        Endpoint::Local(_) => self.src[c].push(*f),
                    }
                }
            }
            let d = mesh.deliver(c, inj).unwrap();
            for (sink, s) in &d.sinks {
                assert_eq!(s.stalled, 0, "color {c}: the traffic leaves an ordered merge waiting at {sink}");
                let o = match sink {
                    Endpoint::Edge(l) => *l,
                    Endpoint::Local(_) => PORT_L,
                };
                let name = format!("out {} color {c}", PORT_NAMES[o]);
                let tagger = self.tagger;
                let check = self.checks.entry((o, c)).or_insert_with(|| SinkCheck::new(name, tagger));
                check.expect(s.items.iter().map(|(f, _)| *f), s.exact);
            }
            for (ch, n) in &d.dropped {
                dropped[ch.port] += *n as u64;
            }
        }
        dropped
    }

    fn step(&mut self, dut: &mut Dut) {
        let cycle = dut.cycle();
        self.pins.sample(dut);
        for t in &mut self.tx {
            t.step(&mut self.pins, cycle);
        }
        for s in &mut self.src {
            s.step(&mut self.pins);
        }
        for (o, r) in self.rx.iter_mut().enumerate() {
            if let Some((c, f)) = r.step(&mut self.pins, cycle) {
                self.seen[o][c] += 1;
                let check = self.checks.get_mut(&(o, c));
                let check = check.unwrap_or_else(|| {
                    panic!("out {} color {c}: flit {f:x?} not routed here", PORT_NAMES[o])
                });
                check.receive(f, cycle);
            }
        }
        for (c, s) in self.sink.iter_mut().enumerate() {
            if let Some(f) = s.step(&mut self.pins, cycle) {
                self.seen[PORT_L][c] += 1;
                let check = self.checks.get_mut(&(PORT_L, c));
                let check = check.unwrap_or_else(|| panic!("out L color {c}: flit {f:x?} not routed here"));
                check.receive(f, cycle);
            }
        }
        self.pins.drive(dut);
        dut.tick();
    }

    fn done(&self) -> bool {
        self.checks.values().all(|c| c.outstanding() == 0)
            && self.tx.iter().all(|t| t.pending() == 0 && t.idle())
            && self.src.iter().all(|s| s.pending() == 0)
            && self.rx.iter().all(LinkRx::idle)
    }

    /// Steps until everything is delivered and every credit is home, at most `limit` cycles.
    fn run(&mut self, dut: &mut Dut, limit: u64) -> u64 {
        let start = dut.cycle();
        while !self.done() {
            assert!(
                dut.cycle() - start < limit,
                "no progress to completion after {limit} cycles (deadlock?): outstanding {:?}, pending tx {:?}",
                self.checks.iter().map(|(k, c)| (k, c.outstanding())).filter(|(_, n)| *n > 0).collect::<Vec<_>>(),
                self.tx.iter().map(LinkTx::pending).collect::<Vec<_>>()
            );
            self.step(dut);
        }
        // Let the last credits and the output registers settle.
        for _ in 0..4 {
            self.step(dut);
        }
        for c in self.checks.values() {
            c.finish();
        }
        dut.cycle() - start
    }
}

fn reset_and_configure(dut: &mut Dut, mesh: &Mesh) {
    dut.reset(4);
    tb::configure(dut, &mesh.writes());
    let clear = dut.port("cnt_clear");
    dut.set(clear, 1);
    dut.tick();
    dut.set(clear, 0);
    dut.eval();
}

/// A random route table of a lone router that the router rules allow: per color, some
/// inputs multicast to outputs of their own, the others unicast (merging where they meet),
/// some drop everything (mask 0), and some merges are ordered with quotas 1..=3.
fn random_table(rng: &mut StdRng, p: &RouterParams) -> Mesh {
    let mut m = Mesh::new(Geometry::new(1, 1), *p);
    for c in 0..p.colors {
        let mut owned = 0u8; // outputs a multicast owns
        let mut shared = 0u8; // outputs unicasts use
        let mut inputs: Vec<usize> = (0..PORTS).collect();
        for i in (1..inputs.len()).rev() {
            inputs.swap(i, rng.random_range(0..=i));
        }
        for i in inputs {
            let free: Vec<usize> = (0..PORTS).filter(|o| (owned | shared) >> o & 1 == 0).collect();
            let roll = rng.random_range(0..100);
            let mask = if roll < 10 {
                0
            } else if roll < 45 && free.len() >= 2 {
                let mut mask = 0u8;
                while mask.count_ones() < 2 {
                    mask = free.iter().filter(|_| rng.random_bool(0.6)).fold(0, |m, &o| m | bit(o));
                }
                owned |= mask;
                mask
            } else {
                let open: Vec<usize> = (0..PORTS).filter(|o| owned >> o & 1 == 0).collect();
                if open.is_empty() {
                    0
                } else {
                    let o = open[rng.random_range(0..open.len())];
                    shared |= bit(o);
                    bit(o)
                }
            };
            m.set(0, i, c, Entry::to(mask));
        }
        for o in 0..PORTS {
            let members = m.members(0, o, c);
            if members.count_ones() >= 2 && rng.random_bool(0.5) {
                for i in (0..PORTS).filter(|i| members >> i & 1 == 1) {
                    let q = rng.random_range(1..=3u32.min(p.max_quota()));
                    m.set(0, i, c, Entry { mask: bit(o), quota: q });
                }
            }
        }
    }
    m.check_routers().unwrap();
    m
}

/// Random traffic for the table of a lone router: every input of every color sends packets;
/// the members of an ordered merge send `rounds × quota` packets, so that the merge never
/// waits for one that does not come.
fn random_traffic(
    rng: &mut StdRng,
    m: &Mesh,
    tagger: &Tagger,
    packets_per_input: usize,
    max_len: usize,
) -> Vec<BTreeMap<Endpoint, Items<Flit>>> {
    let p = m.params;
    let mut seq = [0u64; PORTS];
    let mut out = Vec::new();
    for c in 0..p.colors {
        let mut inj = BTreeMap::new();
        // Rounds of each ordered output.
        let rounds: Vec<usize> =
            (0..PORTS).map(|_| rng.random_range(1..=packets_per_input.div_ceil(2))).collect();
        for (i, seq) in seq.iter_mut().enumerate() {
            let e = m.entry(0, i, c);
            let count = if e.quota != 0 {
                let o = e.mask.trailing_zeros() as usize;
                rounds[o] * e.quota as usize
            } else {
                rng.random_range(1..=packets_per_input)
            };
            let ep = if i == PORT_L { Endpoint::Local(0) } else { Endpoint::Edge(i) };
            inj.insert(ep, packets(tagger, rng, i, seq, count, max_len));
        }
        out.push(inj);
    }
    out
}

/// Checks the counters of a lone router after a run: forwarded flits against the agents
/// and the model, busy cycles against the links, misroutes against the model.
fn check_router_counters(dut: &Dut, t: &RouterTb, dropped: &[u64], cycles: u64) {
    let p = &t.p;
    let k = read_router_counters(dut, p, 0);
    for (o, name) in PORT_NAMES.iter().enumerate() {
        assert_eq!(k.fwd[o], t.seen[o], "cnt_fwd out {name}, per color");
        let sent: u64 = k.fwd[o].iter().sum();
        assert_eq!(k.busy[o], sent, "cnt_busy out {name}");
        if o < LINKS {
            assert_eq!(k.busy[o], t.rx[o].busy(), "cnt_busy out {name} vs valid cycles");
        }
        assert!(k.busy[o] + k.stall[o] <= cycles + 8, "busy + stall of {name} exceed the cycles");
    }
    assert_eq!(k.misroute, dropped, "cnt_misroute per input");
    assert_eq!(dut.get(dut.port("stat_overflow")), 0, "stat_overflow");
    assert_eq!(dut.get(dut.port("stat_credit_err")), 0, "stat_credit_err");
    assert_eq!(dut.get(dut.port("stat_busy")), 0, "stat_busy after the run");
}

/// Random tables and random traffic on every port and color, under random backpressure and
/// credit delays, in both parameter sets.
#[test]
fn router_random_traffic() {
    for (name, p, tables) in [("a", SET_A, 12u64), ("b", SET_B, 12)] {
        run_test(&format!("mesh_router_random_{name}"), &router_spec(&p), 71, |dut| {
            let mut totals = (0u64, 0u64, 0u64);
            for table in 0..tables {
                let mut rng = dut.rng(table);
                let mesh = random_table(&mut rng, &p);
                let mut t = RouterTb::new(dut, p, RANDOM, table + 1);
                let inject = random_traffic(&mut rng, &mesh, &t.tagger, 40, 6);
                reset_and_configure(dut, &mesh);
                let dropped = t.load(&mesh, &inject);
                let cycles = t.run(dut, 400_000);
                check_router_counters(dut, &t, &dropped, cycles);
                let out: u64 = t.seen.iter().flatten().sum();
                totals.0 += out;
                totals.1 += dropped.iter().sum::<u64>();
                totals.2 += cycles;
            }
            eprintln!(
                "router {name}: {tables} tables, {} flits delivered, {} misrouted, {} cycles",
                totals.0, totals.1, totals.2
            );
        });
    }
}

/// Every input to the opposite output (N↔S, E↔W, L→L) on every color at full load: every
/// output sends a flit every cycle, and one color alone keeps a link busy with BUF_DEPTH = 4
/// (the four-cycle credit round trip), half of it with BUF_DEPTH = 2.
#[test]
fn router_full_rate() {
    for (name, p, one_color_min, one_color_max) in [("a", SET_A, 0.97, 1.0), ("b", SET_B, 0.48, 0.51)] {
        run_test(&format!("mesh_router_full_{name}"), &router_spec(&p), 5, |dut| {
            let mut mesh = Mesh::new(Geometry::new(1, 1), p);
            for c in 0..p.colors {
                for i in 0..LINKS {
                    mesh.set(0, i, c, Entry::to(bit(i ^ 2)));
                }
                mesh.set(0, PORT_L, c, Entry::to(bit(PORT_L)));
            }
            for colors in [p.colors, 1] {
                let mut t = RouterTb::new(dut, p, FULL, colors as u64);
                let mut rng = dut.rng(3);
                let n = 1500;
                let mut inject = vec![BTreeMap::new(); p.colors];
                let mut seq = [0u64; PORTS];
                for inj in inject.iter_mut().take(colors) {
                    for (i, seq) in seq.iter_mut().enumerate() {
                        let ep = if i == PORT_L { Endpoint::Local(0) } else { Endpoint::Edge(i) };
                        inj.insert(ep, packets(&t.tagger, &mut rng, i, seq, n / 4, 4));
                    }
                }
                reset_and_configure(dut, &mesh);
                let dropped = t.load(&mesh, &inject);
                let start = dut.cycle();
                // The steady state: from the start until the first source runs dry.
                let mut window = None;
                while !t.done() {
                    t.step(dut);
                    let dry = t.tx.iter().any(|x| x.pending() == 0)
                        || t.src[..colors].iter().any(|s| s.pending() == 0);
                    if window.is_none() && dry {
                        window = Some((dut.cycle() - start, t.seen.clone()));
                    }
                    assert!(dut.cycle() - start < 100_000, "stuck");
                }
                let cycles = dut.cycle() - start;
                check_router_counters(dut, &t, &dropped, cycles);
                let (span, seen) = window.unwrap();
                let rates: Vec<f64> =
                    seen.iter().map(|o| o.iter().sum::<u64>() as f64 / span as f64).collect();
                let per_link: Vec<String> =
                    (0..PORTS).map(|o| format!("{}={:.3}", PORT_NAMES[o], rates[o])).collect();
                eprintln!(
                    "router {name}, {colors} color(s) at full load: flits/cycle per output over the first {span} cycles: {}",
                    per_link.join(" ")
                );
                let (lo, hi) = if colors == 1 { (one_color_min, one_color_max) } else { (0.97, 1.0) };
                for (o, r) in rates.iter().enumerate().take(LINKS) {
                    assert!(
                        *r >= lo && *r <= hi + 1e-9,
                        "{colors} color(s): output {} at {r:.3} flits/cycle",
                        PORT_NAMES[o]
                    );
                }
                // The local output has a one-flit register per color with a registered valid:
                // full rate as well.
                assert!(rates[PORT_L] >= 0.97, "local output at {:.3}", rates[PORT_L]);
            }
        });
    }
}

/// Credit starvation of one color on one link stops that color only: color 0 (a multicast
/// W → {N, L}) waits while N's color-0 buffer downstream takes nothing, and color 1 (W → N)
/// keeps N busy at full rate through it.
#[test]
fn router_colors_do_not_block_each_other() {
    let p = SET_A;
    run_test("mesh_router_isolation", &router_spec(&p), 17, |dut| {
        let mut mesh = Mesh::new(Geometry::new(1, 1), p);
        mesh.set(0, PORT_W, 0, Entry::to(bit(PORT_N) | bit(PORT_L)));
        mesh.set(0, PORT_W, 1, Entry::to(bit(PORT_N)));
        let mut t = RouterTb::new(dut, p, FULL, 1);
        let mut rng = dut.rng(2);
        let mut seq = 0;
        let weights = packets(&t.tagger, &mut rng, PORT_W, &mut seq, 200, 4);
        let grads = packets(&t.tagger, &mut rng, PORT_W, &mut seq, 600, 4);
        let n1 = grads.len() as u64;
        let inject = vec![
            BTreeMap::from([(Endpoint::Edge(PORT_W), weights)]),
            BTreeMap::from([(Endpoint::Edge(PORT_W), grads)]),
        ];
        reset_and_configure(dut, &mesh);
        let dropped = t.load(&mesh, &inject);
        // N's downstream buffer takes no color-0 flit for the first 2000 cycles.
        t.rx[PORT_N].hold(0, dut.cycle() + 2000);
        let start = dut.cycle();
        while t.seen[PORT_N][1] < n1 {
            t.step(dut);
            assert!(dut.cycle() - start < 5000, "color 1 starved by color 0");
        }
        let c1_cycles = dut.cycle() - start;
        // Color 0 got BUF_DEPTH flits into N's buffer, and as many to L, then waited.
        assert_eq!(t.seen[PORT_N][0], p.buf_depth as u64, "color 0 on N while starved");
        assert_eq!(
            t.seen[PORT_L][0],
            p.buf_depth as u64 + 1,
            "color 0 on L while starved (one head copy ahead)"
        );
        let rate = n1 as f64 / c1_cycles as f64;
        eprintln!(
            "isolation: color 1 at {rate:.3} flits/cycle on N while color 0 is starved of credits there"
        );
        assert!(rate > 0.95, "color 1 slowed to {rate:.3} flits/cycle by color 0");
        let cycles = t.run(dut, 20_000) + c1_cycles;
        check_router_counters(dut, &t, &dropped, cycles);
        // Once color 1 is through, N has a color-0 flit waiting and no credit: stall cycles.
        let k = read_router_counters(dut, &p, 0);
        assert!(k.stall[PORT_N] + c1_cycles + 10 >= 2000, "N stalled only {} cycles", k.stall[PORT_N]);
    });
}

/// An empty table drops every flit at once, counts it per input port and returns its credit,
/// so nothing hangs; the protocol checks flag a flit without credit and a credit too many.
#[test]
fn router_misroutes_and_protocol_errors() {
    let p = SET_A;
    run_test("mesh_router_errors", &router_spec(&p), 23, |dut| {
        // Empty table: all of it is dropped.
        let mesh = Mesh::new(Geometry::new(1, 1), p);
        let mut t = RouterTb::new(dut, p, RANDOM, 1);
        let mut rng = dut.rng(1);
        let inject = random_traffic(&mut rng, &mesh, &t.tagger, 20, 5);
        reset_and_configure(dut, &mesh);
        let dropped = t.load(&mesh, &inject);
        assert!(dropped.iter().all(|&d| d > 0));
        let cycles = t.run(dut, 100_000);
        check_router_counters(dut, &t, &dropped, cycles);
        assert!(t.seen.iter().flatten().all(|&n| n == 0), "a misrouted flit came out");
        eprintln!("misroutes: {dropped:?} flits dropped per input (N, E, S, W, L), none delivered");

        // A flit sent without credit: N -> S, with S's downstream never returning credits.
        let mut mesh = Mesh::new(Geometry::new(1, 1), p);
        mesh.set(0, PORT_N, 0, Entry::to(bit(PORT_S)));
        reset_and_configure(dut, &mesh);
        let v = dut.port("s_link_valid");
        let color = dut.port("s_link_color");
        dut.set(color, 0);
        for k in 0..(2 * p.buf_depth + 1) {
            dut.set(v, 1);
            dut.tick();
            let ovf = dut.get(dut.port("stat_overflow"));
            // S takes BUF_DEPTH flits on credit, the N buffer BUF_DEPTH more, then one is lost.
            assert_eq!(ovf, u64::from(k == 2 * p.buf_depth), "stat_overflow after flit {k}");
        }
        dut.set(v, 0);
        // A credit for E's color 1 with nothing outstanding.
        let credit = dut.port("m_link_credit");
        dut.set(credit, 1 << (PORT_E * p.colors + 1));
        dut.tick();
        dut.set(credit, 0);
        dut.tick();
        assert_eq!(dut.get(dut.port("stat_credit_err")), 1 << PORT_E);
        assert_eq!(dut.get(dut.port("stat_overflow")), 1 << PORT_N);
        assert_eq!(dut.get(dut.port("stat_busy")), 1, "flits wait in N's buffer");
        let clear = dut.port("cnt_clear");
        dut.set(clear, 1);
        dut.tick();
        dut.set(clear, 0);
        dut.tick();
        assert_eq!(dut.get(dut.port("stat_credit_err")), 0);
        assert_eq!(dut.get(dut.port("stat_overflow")), 0);
    });
}

/// An ordered merge delivers one fixed order whatever the timing: four inputs into S with
/// quotas 1, 2, 1, 3 (N, E, W, L), the same packets under three different backpressure
/// patterns, each run checked flit by flit against the model's one order.
#[test]
fn router_ordered_merge_is_timing_independent() {
    let p = SET_A;
    run_test("mesh_router_ordered", &router_spec(&p), 31, |dut| {
        let mut mesh = Mesh::new(Geometry::new(1, 1), p);
        for (i, q) in [(PORT_N, 1), (PORT_E, 2), (PORT_W, 1), (PORT_L, 3)] {
            mesh.set(0, i, 1, Entry { mask: bit(PORT_S), quota: q });
        }
        for (k, traffic) in [
            RANDOM,
            FULL,
            Traffic { send: Pattern::Random(0.3), take: Pattern::Random(0.7), credit_delay: 3 },
        ]
        .into_iter()
        .enumerate()
        {
            let mut t = RouterTb::new(dut, p, traffic, 10 + k as u64);
            let mut rng = dut.rng(99);
            let mut seq = [0u64; PORTS];
            let mut inj = BTreeMap::new();
            for (i, q) in [(PORT_N, 1), (PORT_E, 2), (PORT_W, 1), (PORT_L, 3)] {
                let ep = if i == PORT_L { Endpoint::Local(0) } else { Endpoint::Edge(i) };
                inj.insert(ep, packets(&t.tagger, &mut rng, i, &mut seq[i], 40 * q, 5));
            }
            let inject = vec![BTreeMap::new(), inj];
            reset_and_configure(dut, &mesh);
            let dropped = t.load(&mesh, &inject);
            let d = mesh.deliver(1, &inject[1]).unwrap();
            let s = &d.sinks[&Endpoint::Edge(PORT_S)];
            assert!(s.exact, "the model fixes the order");
            let cycles = t.run(dut, 200_000);
            check_router_counters(dut, &t, &dropped, cycles);
            assert_eq!(t.seen[PORT_S][1], s.items.len() as u64);
            eprintln!(
                "ordered merge, traffic {k}: {} flits in the one fixed order in {cycles} cycles",
                s.items.len()
            );
        }
    });
}

// ---------------------------------------------------------------------------- meshes

/// A fabric with a stream agent on every local port and a credit-link agent on every edge.
struct MeshTb {
    g: Geometry,
    p: RouterParams,
    pins: Pins,
    src: Vec<LocalSource>,
    sink: Vec<LocalSink>,
    tx: Vec<LinkTx>,
    rx: Vec<LinkRx>,
    checks: BTreeMap<(Endpoint, usize), SinkCheck>,
    tagger: Tagger,
}

impl MeshTb {
    fn new(dut: &Dut, g: Geometry, p: RouterParams, t: Traffic, salt: u64) -> Self {
        let mut pins = Pins::new();
        let rng = |k: u64| dut.rng(salt * 100_000 + k);
        let lanes = g.routers() * p.colors;
        let src = (0..lanes)
            .map(|k| {
                LocalSource::new(StreamLane::new(&mut pins, dut, "s_local", k, &p), t.send, rng(k as u64))
            })
            .collect();
        let sink = (0..lanes)
            .map(|k| {
                let lane = StreamLane::new(&mut pins, dut, "m_local", k, &p);
                LocalSink::new(
                    format!("PE {} color {}", k / p.colors, k % p.colors),
                    lane,
                    t.take,
                    rng(1000 + k as u64),
                )
            })
            .collect();
        let tx = (0..g.edges())
            .map(|e| {
                let lane = LinkLane::new(&mut pins, dut, "s_edge", e, &p);
                LinkTx::new(format!("edge {e} in"), lane, &p, t.send, t.credit_delay, rng(2000 + e as u64))
            })
            .collect();
        let rx = (0..g.edges())
            .map(|e| {
                let lane = LinkLane::new(&mut pins, dut, "m_edge", e, &p);
                LinkRx::new(format!("edge {e} out"), lane, &p, t.take, t.credit_delay, rng(3000 + e as u64))
            })
            .collect();
        let tagger = Tagger::new(g.routers() + g.edges(), &p);
        MeshTb { g, p, pins, src, sink, tx, rx, checks: BTreeMap::new(), tagger }
    }

    fn source_id(&self, ep: Endpoint) -> usize {
        match ep {
            Endpoint::Local(r) => r,
            Endpoint::Edge(e) => self.g.routers() + e,
        }
    }

    /// Queues the sources' packets of `color` and the sinks' expectations; returns the
    /// model's forwarded counts.
    fn load(
        &mut self,
        mesh: &Mesh,
        color: usize,
        inject: &BTreeMap<Endpoint, Items<Flit>>,
    ) -> BTreeMap<Channel, usize> {
        for (ep, items) in inject {
            for (f, _) in items {
                match *ep {
                    Endpoint::Local(r) => self.src[r * self.p.colors + color].push(*f),
                    Endpoint::Edge(e) => self.tx[e].push(color, *f),
                }
            }
        }
        let d = mesh.deliver(color, inject).unwrap();
        assert!(d.dropped.is_empty(), "color {color}: the routes drop flits at {:?}", d.dropped);
        for (sink, s) in &d.sinks {
            assert_eq!(s.stalled, 0, "color {color}: an ordered merge would wait at {sink}");
            let tagger = self.tagger;
            let check = self
                .checks
                .entry((*sink, color))
                .or_insert_with(|| SinkCheck::new(format!("{sink} color {color}"), tagger));
            check.expect(s.items.iter().map(|(f, _)| *f), s.exact);
        }
        d.forwarded
    }

    /// Packets from `ep` on `color`.
    fn packets(
        &self,
        rng: &mut StdRng,
        ep: Endpoint,
        seq: &mut u64,
        count: usize,
        max_len: usize,
    ) -> Items<Flit> {
        packets(&self.tagger, rng, self.source_id(ep), seq, count, max_len)
    }

    fn step(&mut self, dut: &mut Dut) {
        let cycle = dut.cycle();
        self.pins.sample(dut);
        for t in &mut self.tx {
            t.step(&mut self.pins, cycle);
        }
        for s in &mut self.src {
            s.step(&mut self.pins);
        }
        for (e, r) in self.rx.iter_mut().enumerate() {
            if let Some((c, f)) = r.step(&mut self.pins, cycle) {
                let check = self.checks.get_mut(&(Endpoint::Edge(e), c));
                let check =
                    check.unwrap_or_else(|| panic!("edge {e} color {c}: flit {f:x?} left the array here"));
                check.receive(f, cycle);
            }
        }
        for (k, s) in self.sink.iter_mut().enumerate() {
            if let Some(f) = s.step(&mut self.pins, cycle) {
                let (r, c) = (k / self.p.colors, k % self.p.colors);
                let check = self.checks.get_mut(&(Endpoint::Local(r), c));
                let check = check.unwrap_or_else(|| panic!("PE {r} color {c}: flit {f:x?} not routed here"));
                check.receive(f, cycle);
            }
        }
        self.pins.drive(dut);
        dut.tick();
    }

    fn done(&self) -> bool {
        self.checks.values().all(|c| c.outstanding() == 0)
            && self.tx.iter().all(|t| t.pending() == 0 && t.idle())
            && self.src.iter().all(|s| s.pending() == 0)
            && self.rx.iter().all(LinkRx::idle)
    }

    /// Runs to completion within `limit` cycles (a deadlock fails here).
    fn run(&mut self, dut: &mut Dut, limit: u64) -> u64 {
        let start = dut.cycle();
        while !self.done() {
            if dut.cycle() - start >= limit {
                let busy = dut.get_words(dut.port("stat_busy"));
                panic!(
                    "the mesh did not finish within {limit} cycles (deadlock?): outstanding {:?}; routers busy {busy:x?}",
                    self.checks.iter().map(|(k, c)| (k, c.outstanding())).filter(|(_, n)| *n > 0).collect::<Vec<_>>()
                );
            }
            self.step(dut);
        }
        for _ in 0..4 {
            self.step(dut);
        }
        for c in self.checks.values() {
            c.finish();
        }
        dut.cycle() - start
    }
}

/// What a mesh run measured.
#[derive(Debug)]
struct MeshRun {
    cycles: u64,
    delivered: u64,
    /// Busy cycles of the egress link / cycles.
    egress: f64,
    /// The largest busy fraction of any router-to-router or edge link.
    busiest: f64,
}

/// The mesh scenario: color 1 gathered from every PE toward the egress edge at the east of
/// router (P−1, Q−1), ordered or round robin; with `broadcast`, at the same time color 0
/// broadcast from the ingress edge at the west of router (0, 0) to every PE and, with a third
/// color, a second broadcast from the PE at (P−1, 0).
#[allow(clippy::too_many_arguments)]
fn mesh_scenario(
    dut: &mut Dut,
    g: Geometry,
    p: RouterParams,
    traffic: Traffic,
    ordered: bool,
    broadcast: bool,
    rounds: usize,
    salt: u64,
) -> MeshRun {
    let ingress = g.edge(0, PORT_W).unwrap();
    let egress = g.edge(g.router(g.rows - 1, g.cols - 1), PORT_E).unwrap();
    let mut mesh = Mesh::new(g, p);
    mesh.gather(1, egress, ordered);
    if broadcast {
        mesh.broadcast(0, Endpoint::Edge(ingress));
        if p.colors > 2 {
            mesh.broadcast(2, Endpoint::Local(g.router(g.rows - 1, 0)));
        }
    }
    // Refused configurations never reach the hardware.
    let plan = mesh.check().unwrap_or_else(|e| panic!("{e}"));
    let broadcasts = if broadcast { 1 + usize::from(p.colors > 2) } else { 0 };
    assert_eq!(plan.flows.len(), g.routers() + broadcasts);

    let mut t = MeshTb::new(dut, g, p, traffic, salt);
    let mut rng = dut.rng(salt);
    let mut seq = BTreeMap::new();
    let mut next = |ep: Endpoint, count: usize, len: usize, rng: &mut StdRng, t: &MeshTb| {
        let s = seq.entry(ep).or_insert(0u64);
        t.packets(rng, ep, s, count, len)
    };
    let mut expected_fwd: BTreeMap<(Channel, usize), usize> = BTreeMap::new();
    let mut inject: Vec<BTreeMap<Endpoint, Items<Flit>>> = vec![BTreeMap::new(); p.colors];
    if broadcast {
        inject[0].insert(Endpoint::Edge(ingress), next(Endpoint::Edge(ingress), 4 * rounds, 8, &mut rng, &t));
    }
    for r in 0..g.routers() {
        // One packet per PE per round: what an ordered gather's quotas assume.
        inject[1].insert(Endpoint::Local(r), next(Endpoint::Local(r), rounds, 6, &mut rng, &t));
    }
    if broadcast && p.colors > 2 {
        let root = Endpoint::Local(g.router(g.rows - 1, 0));
        inject[2].insert(root, next(root, 2 * rounds, 4, &mut rng, &t));
    }
    dut.reset(4);
    tb::configure(dut, &mesh.writes());
    for (c, inj) in inject.iter().enumerate() {
        for (ch, n) in t.load(&mesh, c, inj) {
            expected_fwd.insert((ch, c), n);
        }
    }
    let cycles = t.run(dut, 200_000);

    // Counters: every router output of every color against the model.
    let mut busiest = 0.0f64;
    for r in 0..g.routers() {
        let k = read_router_counters(dut, &p, r);
        for (o, name) in PORT_NAMES.iter().enumerate() {
            for c in 0..p.colors {
                let want =
                    expected_fwd.get(&(Channel { router: r, port: o }, c)).copied().unwrap_or(0) as u64;
                assert_eq!(k.fwd[o][c], want, "router {r} cnt_fwd out {name} color {c}");
            }
            assert_eq!(k.busy[o], k.fwd[o].iter().sum::<u64>(), "router {r} cnt_busy {name}");
            assert!(k.busy[o] + k.stall[o] <= cycles + 200, "router {r} busy + stall");
            if o < LINKS {
                busiest = busiest.max(k.busy[o] as f64 / cycles as f64);
            }
        }
        assert!(k.misroute.iter().all(|&m| m == 0), "router {r} misroutes {:?}", k.misroute);
    }
    for name in ["stat_overflow", "stat_credit_err", "stat_busy"] {
        let w = dut.get_words(dut.port(name));
        assert!(w.iter().all(|&x| x == 0), "{name} = {w:x?}");
    }
    // Nothing left the array except at the egress.
    for (e, r) in t.rx.iter().enumerate() {
        if e != egress {
            assert_eq!(r.received().iter().sum::<u64>(), 0, "flits left through edge {e}");
        }
    }
    let delivered: u64 = t.checks.values().map(SinkCheck::received).sum();
    MeshRun { cycles, delivered, egress: t.rx[egress].busy() as f64 / cycles as f64, busiest }
}

fn describe(g: Geometry, ordered: bool, broadcast: bool, r: &MeshRun) -> String {
    format!(
        "{}x{} {} gather{}: {} flits delivered in {} cycles; egress link busy {:.1} %, busiest link {:.1} %",
        g.rows,
        g.cols,
        if ordered { "ordered" } else { "round-robin" },
        if broadcast { " + broadcast" } else { " alone" },
        r.delivered,
        r.cycles,
        100.0 * r.egress,
        100.0 * r.busiest
    )
}

/// 2×2 (parameter set B, three colors) and 3×3 (set A) meshes: broadcast and gather at the
/// same time under random backpressure everywhere, ordered and round robin; every flit checked,
/// the ordered gather's egress order exact, every router counter exact, no deadlock.
#[test]
fn mesh_broadcast_and_gather() {
    for (g, p, rounds) in [(Geometry::new(2, 2), SET_B, 60), (Geometry::new(3, 3), SET_A, 40)] {
        let spec = fabric_spec(g, &p);
        run_test(&format!("mesh_fabric_{}x{}", g.rows, g.cols), &spec, 41, |dut| {
            for (k, ordered) in [true, false, true, false].into_iter().enumerate() {
                let w0 = Instant::now();
                let r = mesh_scenario(dut, g, p, RANDOM, ordered, true, rounds, k as u64 + 1);
                eprintln!(
                    "{}, random backpressure ({:.1} s)",
                    describe(g, ordered, true, &r),
                    w0.elapsed().as_secs_f64()
                );
            }
        });
    }
}

/// The same scenario at full load (every source always valid, every sink always ready, no
/// credit delay), with and without the broadcast: a gather alone keeps the egress link busy
/// every cycle the credits allow (BUF_DEPTH 4: all of them; BUF_DEPTH 2: half), the figure for
/// "router link utilisation during the mesh reduction"; with the broadcast sharing row 0 and
/// the last column, the shared links are the busy ones.
#[test]
fn mesh_full_load() {
    for (g, p) in [(Geometry::new(2, 2), SET_B), (Geometry::new(3, 3), SET_A)] {
        let spec = fabric_spec(g, &p);
        run_test(&format!("mesh_fabric_full_{}x{}", g.rows, g.cols), &spec, 43, |dut| {
            for (ordered, broadcast) in [(true, true), (false, true), (true, false), (false, false)] {
                let r = mesh_scenario(dut, g, p, FULL, ordered, broadcast, 60, 7);
                eprintln!("{}, full load", describe(g, ordered, broadcast, &r));
                // One color alone on a link: BUF_DEPTH credits per four-cycle round trip.
                let bound = (p.buf_depth as f64 / 4.0).min(1.0);
                if !broadcast {
                    assert!(
                        r.egress > 0.95 * bound,
                        "the gather keeps the egress only {:.1} % busy",
                        100.0 * r.egress
                    );
                }
                assert!(r.busiest > 0.9 * bound, "the busiest link is only {:.1} % busy", 100.0 * r.busiest);
            }
        });
    }
}

/// The "a route table with a loop is refused before a step starts": a gather whose
/// column is bent back into a ring on the 3×3 mesh is caught by the checker, with the loop
/// named, before anything is written to the hardware.
#[test]
fn a_route_table_with_a_loop_is_refused() {
    let g = Geometry::new(3, 3);
    let egress = g.edge(g.router(2, 2), PORT_E).unwrap();
    let mut mesh = Mesh::new(g, SET_A);
    mesh.gather(1, egress, false);
    mesh.check().unwrap();
    // Router (2, 2) sends the column north again instead of out of the array, and (1, 2)
    // sends what comes from the south back south: S -> N -> S.
    mesh.set(g.router(2, 2), PORT_N, 1, Entry::to(bit(PORT_N)));
    mesh.set(g.router(1, 2), PORT_S, 1, Entry::to(bit(PORT_S)));
    match mesh.check() {
        Err(RouteError::Loop { color: 1, path }) => {
            assert_eq!(path.first(), path.last());
            eprintln!("refused: {}", mesh.check().unwrap_err());
        }
        other => panic!("a looped table was not refused: {other:?}"),
    }
    // A weight broadcast whose branches meet again is refused as well.
    let mut mesh = Mesh::new(g, SET_A);
    mesh.broadcast(0, Endpoint::Local(0));
    mesh.set(g.router(1, 1), PORT_W, 0, Entry::to(bit(PORT_L)));
    mesh.set(g.router(1, 0), PORT_N, 0, Entry::to(bit(PORT_S) | bit(PORT_E) | bit(PORT_L)));
    assert!(matches!(
        mesh.check(),
        Err(RouteError::Reconvergent { .. } | RouteError::MulticastFunnel { .. })
    ));
}
