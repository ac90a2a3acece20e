//! Scenario: probe-rs flashes the firmware ELF over JTAG, the firmware runs, and a variable it
//! sets at boot reads back through the debug module.
//!
//! Needs: the board's JTAG port (the simulator's XVC server, or the board's `[jtag] probe`)
//! and the host link. To prove the flash really wrote RAM, the firmware's first 4 KiB of code
//! are wiped over JTAG first (so the board is dead until the flash), then the ELF is flashed
//! through the real riscv-dbg debug module by probe-rs' own RISC-V implementation.

use std::time::Duration;

use hil_tests::{Needs, Rig};
use host_driver::flash::{find_symbols, flash_elf, ElfImage, FlashStep};
use host_driver::jtag::{CoreState, Debugger, ProbeSpec, TargetDescription, Wire};

fn debugger(rig: &Rig) -> Debugger {
    let spec = ProbeSpec::for_board(&rig.board, None, rig.jtag_addr(), None, Wire::Xvc)
        .unwrap_or_else(|e| panic!("choosing the JTAG probe: {e}"));
    let target = TargetDescription::for_board(&rig.board).unwrap_or_else(|e| panic!("{e}"));
    Debugger::attach(&spec, target).unwrap_or_else(|e| panic!("attaching over JTAG: {e}"))
}

#[test]
fn probe_rs_flashes_the_firmware_which_then_runs() {
    let Some(mut rig) = Rig::open("jtag_flash", Needs::default()) else {
        return;
    };
    let elf_bytes = std::fs::read(&rig.elf).unwrap();
    let image = ElfImage::parse(&elf_bytes, &rig.elf.display().to_string()).unwrap();
    // `logger::CLK_HZ`: a .bss word the firmware sets to the clock frequency at boot.
    let clk_hz = find_symbols(&elf_bytes, "6logger6CLK_HZ")
        .unwrap()
        .into_iter()
        .find(|s| s.size == 4)
        .expect("the firmware ELF has logger::CLK_HZ (a 4-byte static); this scenario reads it");

    let mut dbg = debugger(&rig);
    assert_eq!(dbg.read_u32(u64::from(clk_hz.addr)).unwrap(), rig.board.clock_hz as u32, "booted by the rig");

    // Wipe the start of the code (and CLK_HZ) with the core held at the reset vector.
    dbg.reset_and_halt().unwrap();
    let code = image.segments.iter().find(|s| s.paddr == image.entry).expect("a segment at the entry point");
    dbg.write(u64::from(code.paddr), &[0u8; 4096]).unwrap();
    dbg.write(u64::from(clk_hz.addr), &[0u8; 4]).unwrap();
    assert_eq!(dbg.read(u64::from(code.paddr), 4096).unwrap(), vec![0u8; 4096], "the wipe took");

    let mut steps = Vec::new();
    let report = flash_elf(&mut dbg, &image, &mut |s| steps.push(s)).unwrap_or_else(|e| panic!("flash: {e}"));
    assert_eq!(report.bytes, image.bytes());
    assert_eq!(report.entry, image.entry);
    assert!(steps.contains(&FlashStep::Writing { done: report.written, total: report.written }), "{steps:?}");
    assert!(
        steps.contains(&FlashStep::Verifying { done: report.written, total: report.written }),
        "{steps:?}"
    );
    eprintln!(
        "jtag_flash: {} bytes written at {:.1} KiB/s, whole flash {:.2} s",
        report.bytes,
        report.write_bytes_per_s() / 1024.0,
        report.total.as_secs_f64()
    );
    assert!(!matches!(dbg.state().unwrap(), CoreState::Halted(_)), "flash_elf resumes the core");

    // The flashed firmware boots: it answers on the host link and sets CLK_HZ again.
    let deadline = rig.deadline(Duration::from_secs(30));
    rig.client.set_timeout(Duration::from_millis(500));
    while let Err(e) = rig.client.ping(0x7a57_f1a5) {
        assert!(e.is_timeout() && !deadline.expired(), "no ping after the flash: {e}");
    }
    let id = rig.client.identity().unwrap();
    assert_eq!(u64::from(id.clk_hz), rig.board.clock_hz);
    assert_eq!(
        dbg.read_u32(u64::from(clk_hz.addr)).unwrap(),
        rig.board.clock_hz as u32,
        "set by the new boot"
    );
    // The code reads back as the ELF has it.
    assert_eq!(dbg.read(u64::from(code.paddr), 256).unwrap(), code.data[..256]);
    drop(dbg);

    // The boot header was written with the image: a soft reset boots it again.
    assert!(report.boot_header, "{:?}", image.boot);
    rig.client.reset().unwrap();
    let deadline = rig.deadline(Duration::from_secs(30));
    while let Err(e) = rig.client.ping(0x7a57_f1a6) {
        assert!(e.is_timeout() && !deadline.expired(), "no ping after the reset: {e}");
    }
}
