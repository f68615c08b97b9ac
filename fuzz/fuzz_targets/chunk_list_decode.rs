//! `ChunkList::decode` (the body of a chunked row's head record) on arbitrary bytes, with its
//! round trip. Input: the body bytes.

#![no_main]

use hayate_fuzz::check_chunk_list;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    check_chunk_list(data);
});
