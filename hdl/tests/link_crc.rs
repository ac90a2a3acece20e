//! `ws_link_crc32c`, the link engine's CRC step, against `ws_common::crc32c`: every byte
//! count 0..=4 on random words, the RFC 3720 §B.4 vectors and the "123456789" check value fed
//! one word at a time with a short last word, and whole random frames chained word by word.

use rand::RngExt;
use ws_common::crc32c::{crc32c, Crc32c};
use ws_hdl::dut::{rng, BlockSpec, Dut};

fn dut() -> Dut {
    Dut::build(BlockSpec::new("ws_link_crc32c").file("hdl/rtl/ws_link_crc32c.v"))
        .expect("building ws_link_crc32c")
}

/// Runs `bytes` through the DUT four at a time (the last word short) and returns the CRC.
fn hw_crc(dut: &mut Dut, bytes: &[u8]) -> u32 {
    let (crc_i, data_i, n_i, crc_o) =
        (dut.port("crc_i"), dut.port("data_i"), dut.port("bytes_i"), dut.port("crc_o"));
    let mut reg = 0xffff_ffffu32;
    for chunk in bytes.chunks(4) {
        let mut w = [0u8; 4];
        w[..chunk.len()].copy_from_slice(chunk);
        dut.set(crc_i, u64::from(reg));
        dut.set(data_i, u64::from(u32::from_le_bytes(w)));
        dut.set(n_i, chunk.len() as u64);
        dut.eval();
        reg = dut.get(crc_o) as u32;
    }
    !reg
}

#[test]
fn crc_step_matches_the_golden_crc() {
    let mut dut = dut();
    // Check value and RFC 3720 §B.4 vectors; 9 bytes end on a 1-byte word.
    assert_eq!(hw_crc(&mut dut, b"123456789"), 0xe306_9283);
    assert_eq!(hw_crc(&mut dut, &[0u8; 32]), 0x8a91_36aa);
    assert_eq!(hw_crc(&mut dut, &[0xffu8; 32]), 0x62a8_ab43);
    let up: Vec<u8> = (0..32).collect();
    assert_eq!(hw_crc(&mut dut, &up), 0x46dd_794e);

    // Every byte count on random registers and words, against the golden update.
    let (crc_i, data_i, n_i, crc_o) =
        (dut.port("crc_i"), dut.port("data_i"), dut.port("bytes_i"), dut.port("crc_o"));
    let mut r = rng(0x11c, 1);
    for _ in 0..20_000 {
        let reg: u32 = r.random();
        let word: u32 = r.random();
        let n = r.random_range(0..=4usize);
        dut.set(crc_i, u64::from(reg));
        dut.set(data_i, u64::from(word));
        dut.set(n_i, n as u64);
        dut.eval();
        // Crc32c holds the running register inverted: finish() is !register.
        let mut golden = Crc32c::from_register(reg);
        golden.update(&word.to_le_bytes()[..n]);
        assert_eq!(dut.get(crc_o) as u32, golden.register(), "reg {reg:#010x} word {word:#010x} bytes {n}");
    }

    // Random frames of every length mod 4.
    for len in 0..300usize {
        let bytes: Vec<u8> = (0..len).map(|_| r.random()).collect();
        assert_eq!(hw_crc(&mut dut, &bytes), crc32c(&bytes), "length {len}");
    }
}
