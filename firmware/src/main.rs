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
use ws_firmware::dataplane::MemoryXPlane;
use ws_firmware::hal::gpio::Gpio;
use ws_firmware::hal::hostlink::Hostlink;
use ws_firmware::hal::link::{LinkEngine, Window};
use ws_firmware::hal::mesh::MeshHw;
use ws_firmware::hal::mx::MemoryX;
use ws_firmware::hal::swarm::SwarmX;
use ws_firmware::hal::sysinfo::Sysinfo;
use ws_firmware::hal::timer::{self, Timer};
use ws_firmware::hal::trace::TraceUnit;
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
    let mut engine = LinkEngine::new(p.link);
    open_echo_windows(&mut engine);
    engine.set_rx_interrupt(true);
    // Every MemoryX wait gives up after about 250 ms of board time (a poll is ~8 cycles).
    let mut dataplane = MemoryXPlane::new(MemoryX::new(p.mx, p.mxdma), sys.clk_hz / 32)
        .with_swarm(SwarmX::probe(p.swarm))
        .with_mesh(p.mesh.into_iter().filter_map(MeshHw::probe))
        .with_trace(TraceUnit::probe(p.trace));
    // SAFETY: every handler and the shared state they use are set up.
    unsafe { riscv::interrupt::enable() };

    let mut frame = [0u8; ws_common::link::MAX_CTRL_PAYLOAD];
    let mut log_out = [0u8; ws_common::link::MAX_CTRL_PAYLOAD];
    loop {
        let mut action = Action::Continue;
        let mut idle = true;
        match hostlink.read() {
            // Protocol v1 (boot ROM loader, wsctl ping/info/logs) on the host-link bytes.
            Ok(byte) => {
                idle = false;
                action = server.receive(byte, &mut board, &mut |reply| hostlink.write_all(reply));
            }
            Err(nb::Error::WouldBlock) => {}
            Err(nb::Error::Other(e)) => defmt::warn!("host link: {}", e),
        }
        // Protocol v2: whole frames of the firmware channels from the link engine.
        if action == Action::Continue {
            match engine.read_frame(&mut frame) {
                None => {}
                Some(Ok((h, n))) => {
                    idle = false;
                    action = link.frame(
                        h,
                        &frame[..n],
                        server.controller_mut(),
                        &mut board,
                        &mut engine,
                        &mut dataplane,
                    );
                }
                Some(Err(e)) => {
                    idle = false;
                    link.refused();
                    defmt::warn!(
                        "link engine passed a frame the decoder refuses: {}",
                        defmt::Debug2Format(&e)
                    );
                }
            }
        }
        if action == Action::Reset {
            defmt::info!("reset requested by the host");
            while !hostlink.tx_empty() {}
            logger::drain();
            sysinfo.reset();
        }
        // The defmt log on the link's log channel, once a host listens (the first lines
        // since boot wait in the logger's ring until then).
        if link.host_seen() && logger::link_pending() > 0 {
            let (n, _) = logger::take_link(&mut log_out);
            link.send_log(&log_out[..n], &mut engine);
            idle = false;
        }
        // SwarmX faults: the policy masks dead ports between chunks.
        dataplane.poll();
        if idle {
            rt::wait_for_host(&hostlink, &engine);
        }
    }
}

/// The engine's DMA RAM split into one window per bulk receive channel (2, 3, 4), each looped
/// back into its transmit slot (2 → 2, 3 → 3, 4 → 6): the board echoes every bulk byte from
/// the RAM it landed in, without the CPU touching it. This is the link's self-test mode and
/// the mode the board boots in; the host's `LinkMode` request switches to MemoryX's rings
/// (`ws_firmware::dataplane`).
fn open_echo_windows(engine: &mut LinkEngine) {
    let len = engine.dma_bytes() / 4;
    // Loopback is static configuration: set it while the windows are still off.
    engine.set_loopback(0b111);
    for slot in 0..3 {
        let w = Window { base: slot as u32 * len, len };
        if !engine.open_rx(slot, w, 0) {
            defmt::error!("link: RX window {=usize} at {=u32:#x}+{=u32:#x} refused", slot, w.base, w.len);
        }
    }
    defmt::info!(
        "link engine: {=u32} KiB DMA RAM, echo windows of {=u32} KiB on channels 2, 3, 4",
        engine.dma_bytes() / 1024,
        len / 1024
    );
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

/// Never expected, as for the host-link line.
#[riscv_rt::core_interrupt(Irq::LinkRx)]
fn link_rx() {
    rt::disable(Irq::LinkRx);
}

/// Never expected, as for the host-link line.
#[riscv_rt::core_interrupt(Irq::Swarm)]
fn swarm() {
    rt::disable(Irq::Swarm);
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
    for irq in [Irq::MachineTimer, Irq::UartRx, Irq::HostlinkRx, Irq::LinkRx, Irq::Swarm] {
        rt::disable(irq);
    }
    // SAFETY: nothing else runs any more; the LED owners are stopped with it.
    let mut gpio = Gpio::new(unsafe { pac::Peripherals::steal() }.gpio);
    gpio.set_leds(PANIC_LEDS);
    loop {
        riscv::asm::wfi();
    }
}
