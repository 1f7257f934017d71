//! See `serverfs_fuzz_checks::rel_path`: the properties live there, so that
//! `cargo test` replays the committed seeds on stable.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| serverfs_fuzz_checks::rel_path::check(data));
