//! Scenario: halting the running firmware over JTAG stops it, and resuming lets it go on
//! where it was: nothing is reset, no counter starts over, and the link works again.
//!
//! Needs: the board's JTAG port and the host link.

use std::time::Duration;

use hil_tests::{Needs, Rig};
use host_driver::jtag::{CoreState, Debugger, ProbeSpec, TargetDescription, Wire};

#[test]
fn halt_and_resume_keep_the_firmware_state() {
    let Some(mut rig) = Rig::open("jtag_halt_resume", Needs::default()) else {
        return;
    };
    let ram = rig.board.memory("ram").expect("the board has a ram region").clone();
    let before = rig.client.stats().unwrap();

    let spec = ProbeSpec::for_board(&rig.board, None, rig.jtag_addr(), None, Wire::Xvc).unwrap();
    let target = TargetDescription::for_board(&rig.board).unwrap();
    let mut dbg = Debugger::attach(&spec, target).unwrap_or_else(|e| panic!("attaching over JTAG: {e}"));

    let pc = dbg.halt().unwrap();
    assert!(ram.base <= u64::from(pc) && u64::from(pc) < ram.end(), "halted in the firmware: pc {pc:#x}");
    assert!(matches!(dbg.state().unwrap(), CoreState::Halted(_)));
    let regs = dbg.registers().unwrap();
    assert!(!regs.was_running);
    assert_eq!(regs.pc, pc);
    assert_eq!(regs.dcsr >> 6 & 7, 3, "dcsr.cause = haltreq (RISC-V Debug 0.13.2 §4.8.1)");
    let sp = u64::from(regs.gpr[2]);
    assert!(ram.base < sp && sp <= ram.end(), "sp {sp:#x} in RAM");

    // Halted means halted: the firmware does not answer.
    rig.client.set_timeout(Duration::from_millis(300));
    let e = rig.client.ping(0x4a17).expect_err("a halted core answered a ping");
    assert!(e.is_timeout(), "{e}");
    // Memory reads work while halted (system-bus access).
    let code = dbg.read(ram.base, 16).unwrap();
    assert_ne!(code, [0u8; 16]);

    dbg.resume().unwrap();
    assert!(!dbg.state().unwrap().is_halted());
    rig.client.set_timeout(Duration::from_secs(10));
    // The ping sent while halted is answered late and skipped as stale; a new one works.
    rig.client.ping(0x4a18).unwrap_or_else(|e| panic!("no ping after resume: {e}"));
    let after = rig.client.stats().unwrap();
    assert!(after.frames_ok >= before.frames_ok + 3, "frame counter went on: {before:?} -> {after:?}");
    assert!(after.timer_ticks > before.timer_ticks, "tick went on: {before:?} -> {after:?}");
    assert!(after.mtime > before.mtime);
    assert_eq!(after.tick_period, before.tick_period);

    // Halting a second time, and reading registers of a running core (halts and resumes it).
    let regs = dbg.registers().unwrap();
    assert!(regs.was_running);
    rig.client.ping(0x4a19).unwrap();
}
