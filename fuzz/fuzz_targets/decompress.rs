//! Frame body decompression on arbitrary bytes: nothing a client sends in a compressed frame may
//! panic the server or make it allocate more than the frame bound. Input: `mode u8 | body`.
//!
//! Mode bit 0 picks the algorithm (LZ4 or Snappy). The body goes through `decompress` with a
//! small bound (mode bit 1) or the frame limit, and whatever decompresses must survive our own
//! compression round trip under both algorithms.

#![no_main]

use hayate_cql::compression::{Compression, CompressionError};
use hayate_cql::frame::FRAME_BODY_MAX_BYTES;
use libfuzzer_sys::fuzz_target;

/// The small bound mode bit 1 chooses, so that the length checks are explored at their edge.
const SMALL_BOUND_BYTES: usize = 64;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else {
        return;
    };
    let algorithm = if mode & 1 == 0 {
        Compression::Lz4
    } else {
        Compression::Snappy
    };
    let bound = if mode & 2 == 0 {
        FRAME_BODY_MAX_BYTES as usize
    } else {
        SMALL_BOUND_BYTES
    };
    match algorithm.decompress(body, bound) {
        Ok(plain) => {
            assert!(plain.len() <= bound, "{algorithm} decompressed past its bound");
            for again in Compression::ALL {
                let mut packed = Vec::new();
                again.compress(&plain, &mut packed);
                assert_eq!(
                    again.decompress(&packed, plain.len()).as_deref(),
                    Ok(plain.as_slice()),
                    "{again} round trip"
                );
            }
        }
        Err(CompressionError::LengthTooLarge { max_bytes, .. }) => assert_eq!(max_bytes, bound),
        Err(_) => {}
    }
});
