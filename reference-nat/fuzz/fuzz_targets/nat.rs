#![no_main]
//! libFuzzer target over the packet parser and the NAT44 translator.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dplog_nat::fuzz::one_input(data);
});
