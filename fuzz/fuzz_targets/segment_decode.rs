//! Protocol v5 segment decoding on arbitrary bytes: nothing a client sends after STARTUP may
//! panic the server, and a segment that decodes must be one our encoder would write the same
//! payload into. Input: `mode u8 | bytes`.
//!
//! Mode bit 0 picks the compressed (LZ4) codec. Bit 1 reseals the first segment's header CRC24
//! and payload CRC32 before decoding, so that the fuzzer explores what lies behind the
//! checksums (lengths, the self-contained flag, LZ4 blocks) instead of stopping at them.

#![no_main]

use hayate_cql::compression::Compression;
use hayate_cql::segment::{
    crc24, crc32, SegmentCodec, COMPRESSED_HEADER_BYTES, CRC24_BYTES, CRC32_BYTES, UNCOMPRESSED_HEADER_BYTES,
};
use libfuzzer_sys::fuzz_target;

fn reseal(data: &mut [u8], header_bytes: usize) {
    if data.len() < header_bytes {
        return;
    }
    let fields_bytes = header_bytes - CRC24_BYTES;
    let fields = data[..fields_bytes]
        .iter()
        .rev()
        .fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
    let crc = crc24(fields, fields_bytes);
    data[fields_bytes..header_bytes].copy_from_slice(&crc.to_le_bytes()[..CRC24_BYTES]);
    let payload_bytes = (fields & ((1 << 17) - 1)) as usize;
    let end = header_bytes + payload_bytes;
    if data.len() >= end + CRC32_BYTES {
        let crc = crc32(&data[header_bytes..end]);
        data[end..end + CRC32_BYTES].copy_from_slice(&crc.to_le_bytes());
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&mode, bytes)) = input.split_first() else {
        return;
    };
    let (codec, header_bytes) = if mode & 1 == 0 {
        (SegmentCodec::new(None), UNCOMPRESSED_HEADER_BYTES)
    } else {
        (SegmentCodec::new(Some(Compression::Lz4)), COMPRESSED_HEADER_BYTES)
    };
    let mut data = bytes.to_vec();
    if mode & 2 != 0 {
        reseal(&mut data, header_bytes);
    }
    let mut rest = data.as_slice();
    while let Ok(Some((segment, used))) = codec.decode(rest) {
        assert!(
            used > 0 && used <= rest.len(),
            "a segment must consume bytes it was given"
        );
        let mut again = Vec::new();
        codec.encode(&segment.payload, &mut again);
        let (decoded, used_again) = match codec.decode(&again) {
            Ok(Some(d)) => d,
            other => panic!("our own segment did not decode: {other:?}"),
        };
        assert_eq!(used_again, again.len());
        assert_eq!(decoded.payload, segment.payload);
        rest = &rest[used..];
    }
});
