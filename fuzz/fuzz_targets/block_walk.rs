//! A whole block through cold start's record walk: the header, then every record in turn until
//! the terminator or the first damaged record, each checked as in `record_decode`. Input:
//! `sequence u64 LE | mode u8 | block bytes` (see `src/lib.rs`).

#![no_main]

use hayate_fuzz::{check_header, walk, WalkEnd, MODE_HEADER, MODE_RESEAL};
use hayate_storage::format::block::{BlockHeader, BLOCK_HEADER_BYTES};
use hayate_storage::format::record::RECORD_ALIGN_BYTES;
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
    let (records, end) = walk(&mut block, sequence, mode & MODE_RESEAL != 0);
    let mut expected = BLOCK_HEADER_BYTES;
    for &(offset, len) in &records {
        assert_eq!(offset, expected, "records are back to back");
        assert_eq!(offset % RECORD_ALIGN_BYTES, 0);
        expected = offset + len;
    }
    assert!(expected <= block.len().max(BLOCK_HEADER_BYTES));
    if let WalkEnd::Damaged { offset } = end {
        assert_eq!(offset, expected, "the walk stops where the last record ended");
    }
});
