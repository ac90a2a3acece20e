//! Scenario: the board boots, answers, and describes itself truthfully.
//!
//! Needs: a board with its host link wired (any board). Checks the identity answer against
//! the board description and the register map the host was built with, and the boot banner
//! in the firmware log.

use std::time::Duration;

use hil_tests::{Needs, Rig};
use ws_common::regmap::{block_name, map, BLOCKS};

#[test]
fn boot_and_identity() {
    let Some(mut rig) = Rig::open("boot_identity", Needs { defmt_log: true, ..Needs::default() }) else {
        return;
    };
    let id = rig.client.identity().expect("identity");

    assert_eq!(u64::from(id.clk_hz), rig.board.clock_hz, "clock: sysinfo vs board.toml");
    let ram = rig.board.memory("ram").expect("board has a ram region");
    assert_eq!((u64::from(id.ram.base), u64::from(id.ram.len)), (ram.base, ram.size), "RAM window");
    assert_eq!(id.rom.base, map::BOOTROM_BASE);
    assert!(id.rom.len > 0 && id.rom.len <= map::BOOTROM_SIZE);
    assert!(id.poke.len > 0, "the firmware should open a scratch poke window");
    assert_eq!(id.tick_hz, 1000);

    // Every block the SoC instantiates is found, in its slot, at the version the host expects.
    let found = &id.blocks[..usize::from(id.num_blocks)];
    for want in BLOCKS.iter().filter(|b| b.in_soc) {
        let got = found
            .iter()
            .find(|b| u32::from(b.slot) == want.slot)
            .unwrap_or_else(|| panic!("block {} (slot {}) missing from {found:?}", want.name, want.slot));
        assert_eq!(block_name(got.id), Some(want.name), "slot {}", want.slot);
        assert_eq!((got.major, got.minor), (want.major, want.minor), "{} version", want.name);
    }

    let lines = rig.wait_for_log("booted", Duration::from_secs(20));
    let banner = lines
        .iter()
        .find(|l| l.message.starts_with("weightstream firmware "))
        .unwrap_or_else(|| panic!("no boot banner in {lines:#?}"));
    assert!(banner.message.contains(&format!("clk={} Hz", id.clk_hz)), "{}", banner.message);
    assert!(banner.message.contains(&format!("ram={} KiB", id.ram.len / 1024)), "{}", banner.message);
    assert!(banner.file.as_deref().is_some_and(|f| f.ends_with("main.rs")), "banner location: {banner:?}");
    for want in BLOCKS.iter().filter(|b| b.in_soc) {
        assert!(
            lines
                .iter()
                .any(|l| l.message.starts_with(&format!("block {} in slot {}", want.name, want.slot))),
            "no discovery line for {}",
            want.name
        );
    }
}
