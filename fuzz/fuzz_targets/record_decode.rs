//! `decode_record` and `decode_body` on arbitrary bytes, with the round trips `check_record`
//! asserts. Input: `sequence u64 LE | mode u8 | record bytes` (see `src/lib.rs`).

#![no_main]

use hayate_fuzz::{check_record, reseal_candidate, split_sequenced, MODE_RESEAL};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((sequence, mode, payload)) = split_sequenced(data) else {
        return;
    };
    if mode & MODE_RESEAL != 0 {
        let mut sealed = payload.to_vec();
        reseal_candidate(&mut sealed, sequence);
        check_record(&sealed, sequence);
    } else {
        check_record(payload, sequence);
    }
});
