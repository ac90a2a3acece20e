//! The weightstream firmware binary: boots the SoC, then serves the control protocol on the
//! host link forever. See `docs/firmware.md` for the boot flow, the memory layout and the
//! panic state; the logic lives in the `ws_firmware` library.
#![no_std]
#![no_main]

use core::panic::PanicInfo;

use embedded_hal_nb::serial::Read;
use portable_atomic::{AtomicBool, Ordering};
use riscv::register::{mcause, mepc, mtval};
use ws_common::regmap::{block_name, BLOCKS};
use ws_firmware::board::HwBoard;
use ws_firmware::control::{self, Action, Controller, Server};
use ws_firmware::hal::gpio::Gpio;
use ws_firmware::hal::hostlink::Hostlink;
use ws_firmware::hal::sysinfo::Sysinfo;
use ws_firmware::hal::timer::{self, Timer};
use ws_firmware::hal::uart::{self, Uart};
use ws_firmware::layout::Windows;
use ws_firmware::link::LinkServer;
use ws_firmware::rt::{self, Irq};
use ws_firmware::timing::{LOG_BAUD, TICK_HZ};
use ws_firmware::{logger, pac, tick, FW_VERSION, PANIC_LEDS};

#[riscv_rt::entry]
fn main() -> ! {
    // The first and only call: cannot fail.
    let Some(p) = pac::Peripherals::take() else { halt() };
    rt::enable_counters();

    let mut sysinfo = Sysinfo::new(p.sysinfo);
    let sys = sysinfo.info();
    let uart = Uart::new(p.uart, uart::Config { clk_hz: sys.clk_hz, baud: LOG_BAUD });
    logger::init(uart, sys.clk_hz);
    defmt::info!(
        "weightstream firmware {=str} booted: clk={=u32} Hz, ram={=u32} KiB",
        env!("CARGO_PKG_VERSION"),
        sys.clk_hz,
        sys.ram_bytes / 1024
    );

    let blocks = control::discover_blocks(sys.slots, |slot| sysinfo.id_word(slot));
    for b in &blocks {
        let name = block_name(b.id).unwrap_or("unknown");
        defmt::info!(
            "block {=str} in slot {=u8}: id={=u16:#06x} v{=u8}.{=u8}",
            name,
            b.slot,
            b.id,
            b.major,
            b.minor
        );
        if let Some(known) = BLOCKS.iter().find(|k| k.id == b.id) {
            if known.major != b.major {
                defmt::warn!(
                    "block {=str}: hardware is v{=u8}, firmware was built for v{=u8}",
                    name,
                    b.major,
                    known.major
                );
            }
        }
    }

    let [led0, ..] = Gpio::new(p.gpio).split();
    let timer = Timer::new(p.timer, timer::Config { clk_hz: sys.clk_hz });
    let tick_hz = match tick::start(timer, led0, TICK_HZ) {
        Ok(period) => {
            defmt::info!("tick {=u32} Hz ({=u32} cycles)", TICK_HZ, period);
            TICK_HZ
        }
        Err(e) => {
            defmt::error!("no timer tick: {}", e);
            0
        }
    };

    let windows = Windows::new(sys.rom_bytes, sys.ram_bytes);
    let identity = control::identity(FW_VERSION, &sys, &windows, tick_hz, &blocks);
    let mut server = Server::new(Controller::new(identity, windows));
    let mut link = LinkServer::new();
    let mut board = HwBoard;
    let mut hostlink = Hostlink::new(p.hostlink);
    // The line wakes WFI in `rt::wait_for_host`; it is enabled in `mie` only there.
    hostlink.set_rx_interrupt(true);
    // SAFETY: every handler and the shared state they use are set up.
    unsafe { riscv::interrupt::enable() };

    loop {
        match hostlink.read() {
            Ok(byte) => {
                // Both protocols read every byte; each ignores the other's frames.
                let mut action = server.receive(byte, &mut board, &mut |reply| hostlink.write_all(reply));
                if action == Action::Continue {
                    action = link.receive(&[byte], server.controller_mut(), &mut board, &mut |reply| {
                        hostlink.write_all(reply)
                    });
                }
                if action == Action::Reset {
                    defmt::info!("reset requested by the host");
                    while !hostlink.tx_empty() {}
                    logger::drain();
                    sysinfo.reset();
                }
            }
            Err(nb::Error::WouldBlock) => rt::wait_for_host(&hostlink),
            Err(nb::Error::Other(e)) => defmt::warn!("host link: {}", e),
        }
    }
}

#[riscv_rt::core_interrupt(Irq::MachineTimer)]
fn machine_timer() {
    tick::on_interrupt();
}

/// Never expected: the line is enabled in `mie` only while interrupts are masked around WFI.
/// Masking it again is all a spurious entry needs.
#[riscv_rt::core_interrupt(Irq::HostlinkRx)]
fn hostlink_rx() {
    rt::disable(Irq::HostlinkRx);
}

/// Never expected: the UART receive interrupt is never enabled.
#[riscv_rt::core_interrupt(Irq::UartRx)]
fn uart_rx() {
    rt::disable(Irq::UartRx);
}

/// An interrupt line without a handler: mask it and carry on.
#[export_name = "DefaultHandler"]
extern "C" fn default_handler() {
    let code = mcause::read().code();
    if code < usize::BITS as usize {
        // SAFETY: clearing an interrupt-enable bit cannot break anything.
        unsafe { core::arch::asm!("csrc mie, {0}", in(reg) 1usize << code) };
    }
    defmt::warn!("unexpected interrupt {=usize} masked", code);
}

/// A synchronous exception (illegal instruction, access fault, misaligned access, ecall,
/// ebreak outside debug mode): log where, then stop like a panic.
#[export_name = "ExceptionHandler"]
extern "C" fn exception_handler(_frame: &riscv_rt::TrapFrame) -> ! {
    riscv::interrupt::disable();
    if !STOPPED.swap(true, Ordering::SeqCst) {
        logger::force_release();
        defmt::error!(
            "exception mcause={=usize} mepc={=usize:#010x} mtval={=usize:#010x}",
            mcause::read().code(),
            mepc::read(),
            mtval::read()
        );
    }
    halt()
}

/// Set once the firmware has decided to stop; a fault while logging the first one then
/// stops without logging again.
static STOPPED: AtomicBool = AtomicBool::new(false);

#[panic_handler]
fn panic(info: &PanicInfo<'_>) -> ! {
    riscv::interrupt::disable();
    if !STOPPED.swap(true, Ordering::SeqCst) {
        logger::force_release();
        let (file, line) = info.location().map(|l| (l.file(), l.line())).unwrap_or(("?", 0));
        defmt::error!("panic at {=str}:{=u32}: {}", file, line, defmt::Display2Format(&info.message()));
    }
    halt()
}

/// The stopped state the host can detect: no more replies (pings time out), LEDs showing
/// [`PANIC_LEDS`], every interrupt source masked, and the core asleep in WFI (a debugger can
/// still halt it; the simulator sees `core_sleep`).
fn halt() -> ! {
    riscv::interrupt::disable();
    for irq in [Irq::MachineTimer, Irq::UartRx, Irq::HostlinkRx] {
        rt::disable(irq);
    }
    // SAFETY: nothing else runs any more; the LED owners are stopped with it.
    let mut gpio = Gpio::new(unsafe { pac::Peripherals::steal() }.gpio);
    gpio.set_leds(PANIC_LEDS);
    loop {
        riscv::asm::wfi();
    }
}
