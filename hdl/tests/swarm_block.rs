//! SwarmX's register block (`ws_swarm_block`: the node behind `hdl/regmap/swarm.toml`'s
//! generated CSR file), driven only through its register port, as firmware will drive it:
//!
//! - identity and build parameters;
//! - a 4-port reduce configured by PORT_MASK / CTRL / SCALE, bit-exact with the golden tree,
//!   with the per-port and total counters agreeing with the flits moved;
//! - a chunk with a wrong chunk id on port 2: aborted, never summed; ERR latches the code and
//!   the port, ERR_PORTS the mismatching port, the interrupt follows CTRL.irq_err, a W1C write
//!   releases it, and the next chunk is reduced again;
//! - a broadcast with port 2 masked: the other ports get every flit, port 2 none, and the
//!   per-port counters say so.
//!
//! The node itself (backpressure, skew, timeouts, cascades, bf16) is proven by
//! `swarm_node.rs`, `swarm_fault.rs` and `swarm_cascade.rs`.

use ws_common::flit::{ErrorCode, Header, Kind};
use ws_common::golden::swarm::{NodeConfig, Tree};
use ws_common::regmap::swarm as reg;
use ws_hdl::dut::{run_test, Dut};
use ws_hdl::swarm::tb::operand_set;
use ws_hdl::swarm::{block_spec, NodeParams};

const PORTS: usize = 4;

fn wr(dut: &mut Dut, addr: u32, value: u32) {
    for (n, v) in [
        ("reg_req", 1),
        ("reg_we", 1),
        ("reg_addr", addr as u64),
        ("reg_wdata", value as u64),
        ("reg_be", 0xf),
    ] {
        let p = dut.port(n);
        dut.set(p, v);
    }
    dut.tick();
    for n in ["reg_req", "reg_we"] {
        let p = dut.port(n);
        dut.set(p, 0);
    }
}

fn rd(dut: &mut Dut, addr: u32) -> u32 {
    for (n, v) in [("reg_req", 1), ("reg_we", 0), ("reg_addr", addr as u64)] {
        let p = dut.port(n);
        dut.set(p, v);
    }
    dut.tick();
    let p = dut.port("reg_req");
    dut.set(p, 0);
    dut.eval();
    dut.get(dut.port("reg_rdata")) as u32
}

fn hdr(chunk: u16, index: u16) -> Header {
    Header::new(Kind::Gradient, 3, 41, chunk, index)
}

/// Offers one flit per port (`flits[p]`), holding each until its port takes it, with the
/// upstream sink always ready; returns the flits that left upstream meanwhile as
/// (payload, user, last).
fn offer(dut: &mut Dut, flits: &[(u32, u64, bool)], out: &mut Vec<(u32, u64, bool)>) {
    let mut pending = (1u64 << PORTS) - 1;
    let (valid, ready, data, user, last) = (
        dut.port("s_dn_valid"),
        dut.port("s_dn_ready"),
        dut.port("s_dn_data"),
        dut.port("s_dn_user"),
        dut.port("s_dn_last"),
    );
    let words: Vec<u32> = flits.iter().map(|f| f.0).collect();
    let users: Vec<u32> = flits.iter().flat_map(|f| [f.1 as u32, (f.1 >> 32) as u32]).collect();
    dut.set_words(data, &words);
    dut.set_words(user, &users);
    dut.set(last, flits.iter().enumerate().fold(0, |m, (p, f)| m | (f.2 as u64) << p));
    let mut guard = 0;
    while pending != 0 {
        dut.set(valid, pending);
        dut.eval();
        let took = dut.get(ready) & pending;
        collect(dut, out);
        dut.tick();
        pending &= !took;
        guard += 1;
        assert!(guard < 10_000, "the node never took the flits (pending {pending:#b})");
    }
    dut.set(valid, 0);
}

/// Records the upstream flit presented this cycle (m_up_ready is held at 1).
fn collect(dut: &mut Dut, out: &mut Vec<(u32, u64, bool)>) {
    if dut.get(dut.port("m_up_valid")) != 0 {
        let user = dut.get_words(dut.port("m_up_user"));
        out.push((
            dut.get(dut.port("m_up_data")) as u32,
            user[0] as u64 | (user[1] as u64) << 32,
            dut.get(dut.port("m_up_last")) != 0,
        ));
    }
}

fn drain(dut: &mut Dut, out: &mut Vec<(u32, u64, bool)>) {
    for _ in 0..200 {
        dut.eval();
        collect(dut, out);
        dut.tick();
    }
}

#[test]
fn the_node_is_configured_and_watched_through_its_registers() {
    let spec = block_spec(&NodeParams::new(PORTS as u32)).expect("FPnew sources (run `cargo xtask setup`)");
    run_test("swarm_block", &spec, 71, |dut| {
        dut.reset(4);
        let p = dut.port("m_up_ready");
        dut.set(p, 1);
        let p = dut.port("m_dn_ready");
        dut.set(p, 0xf);
        let mut rng = dut.rng(1);
        assert_eq!(rd(dut, 0), reg::ID_WORD);
        let params = rd(dut, reg::PARAMS);
        assert_eq!((reg::params::PORTS.get(params), reg::params::LEVELS.get(params)), (4, 2));

        // Reduce with all ports and the 1/4 scale.
        let quarter = 0.25f32.to_bits();
        wr(dut, reg::PORT_MASK, 0xf);
        wr(dut, reg::SCALE, quarter);
        wr(dut, reg::CTRL, reg::ctrl::SCALE_EN.val(1));
        let cfg = NodeConfig::new(PORTS).scale(quarter);
        let tree = Tree { fanout: &[PORTS], nodes: &[cfg] };
        let (chunks, len) = (3u16, 8u16);
        let mut want = Vec::new();
        let mut got = Vec::new();
        for c in 0..chunks {
            for i in 0..len {
                let set = operand_set(&mut rng, PORTS);
                let h = hdr(c, i);
                let last = i + 1 == len;
                for f in tree.reduce(h, last, &set).unwrap().as_slice() {
                    want.push((f.payload, f.header.pack(), f.last));
                }
                let flits: Vec<_> = set.iter().map(|&v| (v, h.pack(), last)).collect();
                offer(dut, &flits, &mut got);
            }
        }
        drain(dut, &mut got);
        assert_eq!(got, want, "the sums differ from the golden tree's");
        let n = (chunks * len) as u32;
        assert_eq!(rd(dut, reg::CNT_REDUCED), n);
        for p in 0..PORTS as u32 {
            assert_eq!(rd(dut, reg::UP_FLITS0 + 0x10 * p), n, "port {p}");
        }
        assert_eq!(reg::masks::UP.get(rd(dut, reg::MASKS)), 0xf);
        assert_eq!(rd(dut, reg::ERR) & 1, 0);

        // A wrong chunk id on port 2: aborted with an error flit, latched in ERR.
        wr(dut, reg::CTRL, reg::ctrl::SCALE_EN.val(1) | reg::ctrl::IRQ_ERR.val(1));
        got.clear();
        for i in 0..len {
            let set = operand_set(&mut rng, PORTS);
            let last = i + 1 == len;
            let flits: Vec<_> = (0..PORTS)
                .map(|p| (set[p], if p == 2 { hdr(99, i) } else { hdr(chunks, i) }.pack(), last))
                .collect();
            offer(dut, &flits, &mut got);
        }
        drain(dut, &mut got);
        assert_eq!(got.len(), 1, "one error flit, nothing summed: {got:x?}");
        assert_eq!(Header::unpack(got[0].1).unwrap().kind, Kind::Error);
        let err = rd(dut, reg::ERR);
        assert_eq!(reg::err::PENDING.get(err), 1);
        assert_eq!(reg::err::CODE.get(err), ErrorCode::Mismatch as u32);
        assert_eq!(reg::err::PORT.get(err), 2);
        assert_eq!(reg::err_ports::MISMATCH.get(rd(dut, reg::ERR_PORTS)), 1 << 2);
        assert_eq!(rd(dut, reg::ERR_PAYLOAD), got[0].0, "ERR_PAYLOAD is the error flit's payload");
        assert_eq!(rd(dut, reg::CNT_ERRORS), 1);
        assert_eq!(dut.get(dut.port("irq")), 1, "irq while ERR.pending and CTRL.irq_err");
        wr(dut, reg::ERR, reg::err::PENDING.val(1));
        assert_eq!(rd(dut, reg::ERR) & 1, 0);
        dut.eval();
        assert_eq!(dut.get(dut.port("irq")), 0);

        // The next chunk is reduced again.
        got.clear();
        want.clear();
        for i in 0..len {
            let set = operand_set(&mut rng, PORTS);
            let h = hdr(chunks + 1, i);
            let last = i + 1 == len;
            for f in tree.reduce(h, last, &set).unwrap().as_slice() {
                want.push((f.payload, f.header.pack(), f.last));
            }
            offer(dut, &set.iter().map(|&v| (v, h.pack(), last)).collect::<Vec<_>>(), &mut got);
        }
        drain(dut, &mut got);
        assert_eq!(got, want, "after the abort");

        // Broadcast with port 2 masked.
        wr(dut, reg::PORT_MASK, 0b1011);
        wr(dut, reg::CNT_CLEAR, 1);
        let (v, r, d, u, l) = (
            dut.port("s_up_valid"),
            dut.port("s_up_ready"),
            dut.port("s_up_data"),
            dut.port("s_up_user"),
            dut.port("s_up_last"),
        );
        let dn_valid = dut.port("m_dn_valid");
        let mut seen2 = false;
        let mut sent = 0;
        while sent < 10 {
            let h = Header::new(Kind::Weight, 3, 42, 0, sent);
            dut.set(v, 1);
            dut.set(d, 0x3f80_0000 + sent as u64);
            dut.set_words(u, &[h.pack() as u32, (h.pack() >> 32) as u32]);
            dut.set(l, (sent == 9) as u64);
            dut.eval();
            seen2 |= dut.get(dn_valid) & 0b100 != 0;
            let took = dut.get(r) != 0;
            dut.tick();
            sent += took as u16;
        }
        dut.set(v, 0);
        for _ in 0..50 {
            dut.eval();
            seen2 |= dut.get(dn_valid) & 0b100 != 0;
            dut.tick();
        }
        assert!(!seen2, "the masked port was offered a flit");
        let dn: Vec<u32> = (0..PORTS as u32).map(|p| rd(dut, reg::DN_FLITS0 + 0x10 * p)).collect();
        assert_eq!(dn, vec![10, 10, 0, 10]);
        assert_eq!(rd(dut, reg::CNT_BCAST), 10);
        assert_eq!(reg::masks::DN.get(rd(dut, reg::MASKS)), 0b1011);
    });
}
