//! Fuzz target `link_decoder`: see `weightstream_fuzz::link_decoder`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weightstream_fuzz::link_decoder(data));
