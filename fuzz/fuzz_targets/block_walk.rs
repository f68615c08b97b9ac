//! A whole block through cold start's record walk, the storage crate's own
//! (`hayate_storage::fuzzing::walk_block`): the header, then every record in turn until the
//! terminator or the first damaged record, each checked as in `record_decode`. Input:
//! `sequence u64 LE | mode u8 | block bytes` (see `src/lib.rs`).

#![no_main]

use hayate_fuzz::{check_header, reseal_records, walk, MODE_HEADER, MODE_RESEAL};
use hayate_storage::format::block::{BlockHeader, BLOCK_HEADER_BYTES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((sequence, mode, payload)) = hayate_fuzz::split_sequenced(data) else {
        return;
    };
    let mut block = payload.to_vec();
    if mode & MODE_HEADER != 0 && block.len() >= BLOCK_HEADER_BYTES {
        let header = BlockHeader {
            sequence,
            block_index: 0,
            block_size_bytes: block.len() as u32,
            free: false,
            chunk: false,
        };
        block[..BLOCK_HEADER_BYTES].copy_from_slice(&header.encode());
    }
    check_header(&block);
    // Cold start walks a block under the sequence its header names.
    let sequence = BlockHeader::decode(&block).map_or(sequence, |h| h.sequence);
    if mode & MODE_RESEAL != 0 {
        reseal_records(&mut block, sequence);
    }
    // `walk` asserts every property of what the walk found and where it stopped.
    let _ = walk(&block, sequence);
});
