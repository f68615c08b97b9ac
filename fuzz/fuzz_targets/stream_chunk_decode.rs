//! `format::stream::decode_chunk` (what `Engine::import_chunk` runs on bytes from the network) on
//! arbitrary bytes, with the round trip `check_stream_chunk` asserts. Input: `mode u8 | chunk
//! bytes`; mode bit 0 fixes the chunk's length field and checksum first (see `src/lib.rs`).

#![no_main]

use hayate_fuzz::{check_stream_chunk, reseal_stream_chunk, MODE_RESEAL};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, payload)) = data.split_first() else {
        return;
    };
    if mode & MODE_RESEAL != 0 {
        let mut sealed = payload.to_vec();
        reseal_stream_chunk(&mut sealed);
        check_stream_chunk(&sealed);
    } else {
        check_stream_chunk(payload);
    }
});
