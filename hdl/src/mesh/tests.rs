use super::*;

fn mesh(p: usize, q: usize) -> Mesh {
    Mesh::new(Geometry::new(p, q), RouterParams::new())
}

#[test]
fn ports_match_the_verilog_header() {
    let text =
        std::fs::read_to_string(crate::paths::in_workspace("hdl/rtl/include/ws_mesh_flit.vh")).unwrap();
    let want = [
        ("WS_MESH_PORT_N", PORT_N),
        ("WS_MESH_PORT_E", PORT_E),
        ("WS_MESH_PORT_S", PORT_S),
        ("WS_MESH_PORT_W", PORT_W),
        ("WS_MESH_PORT_L", PORT_L),
        ("WS_MESH_PORTS", PORTS),
        ("WS_MESH_LINKS", LINKS),
    ];
    for (name, value) in want {
        let line = text
            .lines()
            .find(|l| l.starts_with("localparam") && l.contains(&format!(" {name} ")))
            .unwrap_or_else(|| panic!("{name} missing from ws_mesh_flit.vh"));
        let rhs = line.split('=').nth(1).unwrap().split(';').next().unwrap().trim();
        let v: usize = rhs.rsplit('d').next().unwrap().parse().unwrap();
        assert_eq!(v, value, "{name}");
    }
}

#[test]
fn geometry_edges_round_trip() {
    for (p, q) in [(1, 1), (2, 3), (4, 4), (3, 1)] {
        let g = Geometry::new(p, q);
        let mut seen = BTreeSet::new();
        for r in 0..g.routers() {
            for port in 0..LINKS {
                match (g.neighbour(r, port), g.edge(r, port)) {
                    (Some(n), None) => assert_eq!(g.neighbour(n, opposite(port)), Some(r)),
                    (None, Some(e)) => {
                        assert_eq!(g.edge_port(e), (r, port));
                        assert!(seen.insert(e));
                    }
                    other => panic!("{p}x{q} r{r} port {port}: {other:?}"),
                }
            }
        }
        assert_eq!(seen.len(), g.edges());
    }
    // A lone router's edges are its ports.
    let g = Geometry::new(1, 1);
    for port in 0..LINKS {
        assert_eq!(g.edge(0, port), Some(port));
    }
}

#[test]
fn standard_patterns_pass_the_checker() {
    for (p, q) in [(1, 1), (2, 2), (3, 3), (4, 4), (8, 8), (2, 5)] {
        let g = Geometry::new(p, q);
        let mut m = mesh(p, q);
        let ingress = g.edge(0, PORT_W).unwrap();
        let egress = g.edge(g.router(p - 1, q - 1), PORT_E).unwrap();
        m.broadcast(0, Endpoint::Edge(ingress)).gather(1, egress, true);
        let plan = m.check().unwrap_or_else(|e| panic!("{p}x{q}: {e}"));
        let bcast = plan.flows.iter().find(|f| f.color == 0).unwrap();
        assert_eq!(bcast.sinks.len(), g.routers(), "broadcast reaches every PE");
        let gathers: Vec<&Flow> = plan.flows.iter().filter(|f| f.color == 1).collect();
        assert_eq!(gathers.len(), g.routers());
        assert!(gathers.iter().all(|f| f.sinks == vec![Endpoint::Edge(egress)]));
        // Round robin gathers pass too.
        let mut m = mesh(p, q);
        m.broadcast(1, Endpoint::Local(g.router(p - 1, 0))).gather(0, egress, false);
        m.check().unwrap_or_else(|e| panic!("{p}x{q}: {e}"));
    }
}

#[test]
fn a_loop_is_refused() {
    // Color 1 around the 2x2 ring: r0 E -> r1 S -> r3 W -> r2 N -> r0.
    let mut m = mesh(2, 2);
    m.set(0, PORT_L, 1, Entry::to(bit(PORT_E)))
        .set(1, PORT_W, 1, Entry::to(bit(PORT_S)))
        .set(3, PORT_N, 1, Entry::to(bit(PORT_W) | bit(PORT_L)))
        .set(2, PORT_E, 1, Entry::to(bit(PORT_N)))
        .set(0, PORT_S, 1, Entry::to(bit(PORT_E)));
    match m.check() {
        Err(RouteError::Loop { color: 1, path }) => {
            assert_eq!(path.first(), path.last());
            assert_eq!(path.len(), 5, "{}", show_path(&path));
        }
        other => panic!("{other:?}"),
    }
    let msg = m.check().unwrap_err().to_string();
    assert!(msg.contains("loop") && msg.contains("r0.S"), "{msg}");
    // A U-turn between two routers is a loop as well.
    let mut m = mesh(1, 2);
    m.set(0, PORT_E, 0, Entry::to(bit(PORT_E))).set(1, PORT_W, 0, Entry::to(bit(PORT_W)));
    assert!(matches!(m.check(), Err(RouteError::Loop { color: 0, .. })));
    // The model refuses it too, instead of running forever.
    assert!(m.deliver::<u32>(0, &BTreeMap::new()).is_err());
}

#[test]
fn bad_configurations_are_named() {
    let g = Geometry::new(2, 2);
    // Off the array through an edge that is not an egress.
    let mut m = mesh(2, 2);
    m.set(0, PORT_L, 0, Entry::to(bit(PORT_N)));
    assert!(matches!(m.check(), Err(RouteError::OffMesh { router: 0, port: PORT_N, edge: 0, .. })));
    m.add_egress(0, 0);
    m.check().unwrap();
    // A dead end.
    let mut m = mesh(2, 2);
    m.set(0, PORT_L, 0, Entry::to(bit(PORT_E)));
    assert!(matches!(m.check(), Err(RouteError::DeadEnd { at: Channel { router: 1, port: PORT_W }, .. })));
    // Reconvergence: r0 copies east and south, both branches meet at r3.
    let mut m = mesh(2, 2);
    m.set(0, PORT_L, 0, Entry::to(bit(PORT_E) | bit(PORT_S)))
        .set(1, PORT_W, 0, Entry::to(bit(PORT_S)))
        .set(2, PORT_N, 0, Entry::to(bit(PORT_E)))
        .set(3, PORT_N, 0, Entry::to(bit(PORT_L)))
        .set(3, PORT_W, 0, Entry::to(bit(PORT_L)));
    assert!(matches!(m.check(), Err(RouteError::Reconvergent { .. })), "{:?}", m.check());
    // A multicast into a merge.
    let mut m = Mesh::new(Geometry::new(1, 1), RouterParams::new());
    m.set(0, PORT_N, 0, Entry::to(bit(PORT_S) | bit(PORT_L))).set(0, PORT_E, 0, Entry::to(bit(PORT_S)));
    assert!(matches!(m.check_routers(), Err(RouteError::MulticastFunnel { out: PORT_S, .. })));
    // Mixed ordered / round robin.
    let mut m = Mesh::new(Geometry::new(1, 1), RouterParams::new());
    m.set(0, PORT_N, 0, Entry { mask: bit(PORT_S), quota: 2 }).set(0, PORT_E, 0, Entry::to(bit(PORT_S)));
    assert!(matches!(m.check_routers(), Err(RouteError::MixedOrder { .. })));
    // A quota that does not match the sources behind the input.
    let mut m = mesh(2, 2);
    let egress = g.edge(3, PORT_E).unwrap();
    m.gather(1, egress, true);
    m.check().unwrap();
    let e = m.entry(3, PORT_N, 1);
    assert_eq!(e.quota, 2, "r1 sends its own and r0's packets");
    m.set(3, PORT_N, 1, Entry { quota: 1, ..e });
    assert!(matches!(m.check(), Err(RouteError::QuotaMismatch { sources: 2, quota: 1, .. })));
    // A quota beyond QUOTA_WIDTH.
    let mut m = Mesh::new(Geometry::new(1, 1), RouterParams { quota_width: 2, ..RouterParams::new() });
    m.set(0, PORT_N, 0, Entry { mask: bit(PORT_S), quota: 4 });
    assert!(matches!(m.check_routers(), Err(RouteError::QuotaTooLarge { max: 3, .. })));
}

#[test]
fn the_model_orders_an_ordered_gather() {
    // 2x2 gather to the east edge of r3: r0 -> r1 -> r3 and r2 -> r3.
    let g = Geometry::new(2, 2);
    let mut m = mesh(2, 2);
    let egress = g.edge(3, PORT_E).unwrap();
    m.gather(1, egress, true);
    let mut inject = BTreeMap::new();
    for r in 0..4 {
        // Two rounds of one packet (two flits) per PE.
        inject.insert(
            Endpoint::Local(r),
            vec![((r, 0), false), ((r, 1), true), ((r, 2), false), ((r, 3), true)],
        );
    }
    let d = m.deliver(1, &inject).unwrap();
    let s = &d.sinks[&Endpoint::Edge(egress)];
    assert!(s.exact);
    assert_eq!(s.stalled, 0);
    let order: Vec<usize> = s.items.iter().step_by(2).map(|((r, _), _)| *r).collect();
    // r3 takes N (r1: r0 then r1) before W (r2) before L (r3), every round.
    assert_eq!(order, vec![0, 1, 2, 3, 0, 1, 2, 3]);
    assert_eq!(d.forwarded[&Channel { router: 3, port: PORT_E }], 16);
    assert_eq!(d.forwarded[&Channel { router: 0, port: PORT_E }], 4);
    // On 3x3 the order is the router index too: row by row, west to east.
    let g3 = Geometry::new(3, 3);
    let mut m3 = mesh(3, 3);
    let e3 = g3.edge(8, PORT_E).unwrap();
    m3.gather(1, e3, true);
    let inj3: BTreeMap<Endpoint, Items<usize>> =
        (0..9).map(|r| (Endpoint::Local(r), vec![(r, true), (r, true)])).collect();
    let s3 = &m3.deliver(1, &inj3).unwrap().sinks[&Endpoint::Edge(e3)];
    let order3: Vec<usize> = s3.items.iter().map(|(r, _)| *r).collect();
    assert_eq!(order3, (0..9).chain(0..9).collect::<Vec<_>>());
    // Round robin keeps only each source's order.
    let mut m = mesh(2, 2);
    m.gather(1, egress, false);
    let d = m.deliver(1, &inject).unwrap();
    assert!(!d.sinks[&Endpoint::Edge(egress)].exact);
    // One PE sends a packet less: the ordered merge would wait for it.
    let mut m = mesh(2, 2);
    m.gather(1, egress, true);
    inject.get_mut(&Endpoint::Local(2)).unwrap().truncate(2);
    let d = m.deliver(1, &inject).unwrap();
    assert_eq!(d.sinks[&Endpoint::Edge(egress)].stalled, 2, "r3's own last packet waits behind r2's");
}

#[test]
fn writes_cover_every_entry() {
    let mut m = mesh(2, 3);
    m.broadcast(0, Endpoint::Local(4));
    let w = m.writes();
    assert_eq!(w.len(), 6 * PORTS * 2);
    assert_eq!(w.iter().filter(|w| w.mask != 0).count(), 6);
}
