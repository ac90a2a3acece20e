//! Fuzz target `ctrl_request`: see `weightstream_fuzz::ctrl_request`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weightstream_fuzz::ctrl_request(data));
