//! Fuzz target `ctrl_response`: see `weightstream_fuzz::ctrl_response`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weightstream_fuzz::ctrl_response(data));
