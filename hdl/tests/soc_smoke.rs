//! temp
use ws_hdl::sim::{programs, Soc, SocConfig, StopOn};
use ws_hdl::vbuild::soc::SocBuild;
#[test]
fn smoke() {
    let model = Soc::build(&SocBuild::default(), &mut |e| eprintln!("{e:?}")).unwrap();
    eprintln!("build {:?} hit {}", model.build_time, model.cache_hit);
    let mut soc = Soc::load(model, &SocConfig { uart_div_fallback: 16, ..Default::default() }).unwrap();
    eprintln!("ram words {}", soc.ram_words());
    for (i, w) in programs::echo_plus_one().iter().enumerate() { soc.ram_write(i as u32, *w).unwrap(); }
    soc.reset(10);
    let t = std::time::Instant::now();
    let r = soc.run(200_000, StopOn::default());
    eprintln!("{r:?} {:.0} c/s", r.cycles as f64 / t.elapsed().as_secs_f64());
    let mut tx = Vec::new(); soc.take_tx(&mut tx, 100);
    let mut log = Vec::new(); soc.take_log(&mut log);
    eprintln!("tx {:?} log {:?} gpio {:x} ctr {:?}", String::from_utf8_lossy(&tx), String::from_utf8_lossy(&log), soc.gpio_out(), soc.counters());
    soc.push_rx(b"abc");
    soc.run(20_000, StopOn::default());
    tx.clear(); soc.take_tx(&mut tx, 100);
    eprintln!("echo {:?}", String::from_utf8_lossy(&tx));
}
