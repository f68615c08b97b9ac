//! `BlockHeader::decode` on arbitrary bytes, with its round trip. Input: `mode u8 | header
//! bytes`; with the reseal bit the header's checksum is fixed first (see `src/lib.rs`).

#![no_main]

use hayate_fuzz::{check_header, reseal_header, MODE_RESEAL};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, payload)) = data.split_first() else {
        return;
    };
    if mode & MODE_RESEAL != 0 {
        let mut sealed = payload.to_vec();
        reseal_header(&mut sealed);
        check_header(&sealed);
    } else {
        check_header(payload);
    }
});
