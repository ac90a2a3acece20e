//! Scenario: peek and poke work inside the firmware's windows and are refused outside them.
//!
//! Needs: nothing but the host link. Windows come from the identity answer, so the scenario
//! holds on any board whatever its memory sizes.

use hil_tests::{Needs, Rig};
use ws_common::ctrl::Status;
use ws_common::regmap::{map, sysinfo};

#[test]
fn peek_poke_inside_and_refused_outside() {
    let Some(mut rig) = Rig::open("peek_poke", Needs::default()) else {
        return;
    };
    let id = rig.client.identity().expect("identity");
    let w = id.poke;

    // Inside: the whole scratch window, in several frames, reads back exactly.
    let pattern: Vec<u8> = (0..w.len).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    rig.client.poke(w.base, &pattern).expect("poke the scratch window");
    assert_eq!(rig.client.peek(w.base, pattern.len()).expect("peek it back"), pattern);
    // Its two edge words.
    rig.client.poke(w.base, &[1, 2, 3, 4]).unwrap();
    rig.client.poke(w.base + w.len - 4, &[5, 6, 7, 8]).unwrap();
    assert_eq!(rig.client.peek(w.base, 4).unwrap(), [1, 2, 3, 4]);
    assert_eq!(rig.client.peek(w.base + w.len - 4, 4).unwrap(), [5, 6, 7, 8]);

    // Peek reads ROM and RAM: the boot ROM's first word is not erased flash.
    let rom = rig.client.peek(map::BOOTROM_BASE, 4).expect("peek ROM");
    assert_ne!(rom, [0, 0, 0, 0]);

    // Refusals, each with its own status, and nothing written.
    let refused = |r: host_driver::Result<()>| r.expect_err("should be refused").refusal();
    assert_eq!(
        refused(rig.client.poke(w.base + w.len, &[0; 4])),
        Some(Status::OutOfWindow),
        "one past the end"
    );
    assert_eq!(
        refused(rig.client.poke(w.base + w.len - 4, &[0; 8])),
        Some(Status::OutOfWindow),
        "straddles the end"
    );
    assert_eq!(refused(rig.client.poke(w.base - 4, &[0; 4])), Some(Status::OutOfWindow), "below the window");
    assert_eq!(refused(rig.client.poke(map::RAM_BASE, &[0; 4])), Some(Status::OutOfWindow), "firmware code");
    assert_eq!(
        refused(rig.client.poke(sysinfo::BASE + sysinfo::RESET, &[0; 4])),
        Some(Status::OutOfWindow),
        "a register"
    );
    assert_eq!(refused(rig.client.poke(w.base + 1, &[0; 4])), Some(Status::Misaligned));
    let peek_refused = |r: host_driver::Result<Vec<u8>>| r.expect_err("should be refused").refusal();
    assert_eq!(peek_refused(rig.client.peek(map::PERIPH_BASE, 4)), Some(Status::OutOfWindow));
    assert_eq!(peek_refused(rig.client.peek(id.ram.base + id.ram.len, 4)), Some(Status::OutOfWindow));
    assert_eq!(peek_refused(rig.client.peek(map::WEIGHTS_BASE, 4)), Some(Status::OutOfWindow));
    assert_eq!(rig.client.peek(w.base, 4).unwrap(), [1, 2, 3, 4], "refused pokes wrote nothing");

    let stats = rig.client.stats().expect("stats");
    assert!(stats.refused >= 9, "refusals counted: {stats:?}");
}
