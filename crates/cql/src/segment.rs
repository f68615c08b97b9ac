//! Protocol v5 segments: how frames travel once STARTUP has been answered.
//!
//! Spec: native_protocol_v5.spec, section 2 ("Frames" carrying "envelopes"). In v5 the 9-byte
//! frame of [`crate::frame`] no longer goes on the wire bare: after the server's READY or
//! AUTHENTICATE, both sides wrap frames in segments, each with a checksummed header and a
//! checksummed payload. A *self-contained* segment holds one or more whole frames; a frame
//! larger than a segment's payload is cut into consecutive segments that are not
//! self-contained. All integers in the segment header and trailer are little-endian (unlike
//! the rest of the protocol).
//!
//! Uncompressed segment (no compression negotiated):
//!
//! ```text
//!  0                   17 18        24                  48
//!  +---------------------+-+--------+-------------------+
//!  | payload length (17) |S| pad (6)|  CRC24 of bytes 0-2 |
//!  +---------------------+-+--------+-------------------+
//!  | payload (payload length bytes)  | CRC32 of payload (4) |
//!  +---------------------------------+---------------------+
//! ```
//!
//! Compressed segment (LZ4 negotiated in STARTUP):
//!
//! ```text
//!  0                   17                     34 35       40                    64
//!  +---------------------+----------------------+-+---------+--------------------+
//!  | payload length (17) | uncompressed len (17)|S| pad (5) | CRC24 of bytes 0-4 |
//!  +---------------------+----------------------+-+---------+--------------------+
//!  | payload: one LZ4 block, or the raw bytes if uncompressed len is 0 | CRC32 (4) |
//!  +-------------------------------------------------------------------+-----------+
//! ```
//!
//! `S` is the self-contained flag. The CRC24 is Cassandra's (polynomial 0x1974F0B, initial
//! value 0x875060, fed the header's bytes least significant first); the CRC32 is the zlib one
//! started, as Cassandra starts it, over the four bytes `FA 2D 55 CA`. A segment whose
//! checksum fails cannot be trusted to say where the next one starts, so the caller closes the
//! connection, as Cassandra does. Frames inside segments are never compressed themselves.

use std::fmt;

use crate::compression::{Compression, CompressionError};

/// The most payload bytes one segment carries (17 bits), compressed or not.
pub const SEGMENT_PAYLOAD_MAX_BYTES: usize = (1 << 17) - 1;
/// Header bytes of an uncompressed segment, CRC24 included.
pub const UNCOMPRESSED_HEADER_BYTES: usize = 3 + CRC24_BYTES;
/// Header bytes of a compressed segment, CRC24 included.
pub const COMPRESSED_HEADER_BYTES: usize = 5 + CRC24_BYTES;
/// Bytes of the CRC24 that ends a header.
pub const CRC24_BYTES: usize = 3;
/// Bytes of the CRC32 that follows a payload.
pub const CRC32_BYTES: usize = 4;

const CRC24_INIT: u32 = 0x0087_5060;
const CRC24_POLY: u32 = 0x0197_4F0B;
/// The bytes Cassandra runs its payload CRC32 over before the payload itself.
const CRC32_SEED_BYTES: [u8; 4] = [0xFA, 0x2D, 0x55, 0xCA];
const LENGTH_MASK: u64 = SEGMENT_PAYLOAD_MAX_BYTES as u64;

/// Why a segment was refused. Every one of these closes the connection: the byte stream is no
/// longer known to be aligned on segments.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SegmentError {
    /// The header's CRC24 does not match its bytes.
    HeaderCrc { received: u32, computed: u32 },
    /// The payload's CRC32 does not match its bytes.
    PayloadCrc { received: u32, computed: u32 },
    /// A compressed payload does not decompress to the length its header claims.
    Decompress(CompressionError),
}

impl fmt::Display for SegmentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SegmentError::HeaderCrc { received, computed } => write!(
                f,
                "invalid, unrecoverable CRC mismatch detected in frame header (v5 segment): \
                 received {received:06x}, computed {computed:06x}; the connection is closed"
            ),
            SegmentError::PayloadCrc { received, computed } => write!(
                f,
                "invalid, unrecoverable CRC mismatch detected in frame body (v5 segment payload): \
                 received {received:08x}, computed {computed:08x}; the connection is closed"
            ),
            SegmentError::Decompress(e) => write!(f, "v5 segment payload: {e}"),
        }
    }
}

impl std::error::Error for SegmentError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SegmentError::Decompress(e) => Some(e),
            _ => None,
        }
    }
}

/// One decoded segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// The payload, decompressed.
    pub payload: Vec<u8>,
    /// Whether the payload holds whole frames (else it is a piece of one large frame).
    pub self_contained: bool,
}

/// Cassandra's CRC24 over the low `bytes` bytes of `value`, least significant first.
pub fn crc24(mut value: u64, bytes: usize) -> u32 {
    let mut crc = CRC24_INIT;
    for _ in 0..bytes {
        crc ^= ((value & 0xFF) as u32) << 16;
        value >>= 8;
        for _ in 0..8 {
            crc <<= 1;
            if crc & 0x0100_0000 != 0 {
                crc ^= CRC24_POLY;
            }
        }
    }
    crc & 0x00FF_FFFF
}

/// The payload checksum: zlib's CRC32 continued from the seed bytes.
pub fn crc32(payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&CRC32_SEED_BYTES);
    hasher.update(payload);
    hasher.finalize()
}

fn read_le(bytes: &[u8]) -> u64 {
    bytes.iter().rev().fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
}

fn write_le(out: &mut Vec<u8>, value: u64, bytes: usize) {
    out.extend((0..bytes).map(|i| (value >> (8 * i)) as u8));
}

/// Reads and writes segments for one connection: with LZ4 when it was negotiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentCodec {
    compressed: bool,
}

impl SegmentCodec {
    /// A codec for a connection that negotiated `compression`. Only LZ4 compresses segments;
    /// STARTUP refuses Snappy on v5 before a codec is made.
    pub fn new(compression: Option<Compression>) -> SegmentCodec {
        assert_ne!(
            compression,
            Some(Compression::Snappy),
            "protocol v5 segments are never Snappy-compressed"
        );
        SegmentCodec {
            compressed: compression.is_some(),
        }
    }

    fn header_bytes(self) -> usize {
        if self.compressed {
            COMPRESSED_HEADER_BYTES
        } else {
            UNCOMPRESSED_HEADER_BYTES
        }
    }

    /// Cuts one segment off the front of `buf`. `Ok(None)` means more bytes are needed;
    /// `Ok(Some((segment, used)))` that the first `used` bytes were one segment.
    pub fn decode(self, buf: &[u8]) -> Result<Option<(Segment, usize)>, SegmentError> {
        let header_bytes = self.header_bytes();
        if buf.len() < header_bytes {
            return Ok(None);
        }
        let fields_bytes = header_bytes - CRC24_BYTES;
        let fields = read_le(&buf[..fields_bytes]);
        let received = read_le(&buf[fields_bytes..header_bytes]) as u32;
        let computed = crc24(fields, fields_bytes);
        if received != computed {
            return Err(SegmentError::HeaderCrc { received, computed });
        }
        let payload_bytes = (fields & LENGTH_MASK) as usize;
        let (uncompressed_bytes, flag_bit) = if self.compressed {
            (((fields >> 17) & LENGTH_MASK) as usize, 34)
        } else {
            (0, 17)
        };
        let self_contained = (fields >> flag_bit) & 1 == 1;
        let total = header_bytes + payload_bytes + CRC32_BYTES;
        if buf.len() < total {
            return Ok(None);
        }
        let payload = &buf[header_bytes..header_bytes + payload_bytes];
        let received = read_le(&buf[header_bytes + payload_bytes..total]) as u32;
        let computed = crc32(payload);
        if received != computed {
            return Err(SegmentError::PayloadCrc { received, computed });
        }
        let payload = if uncompressed_bytes == 0 {
            payload.to_vec()
        } else {
            decompress_block(payload, uncompressed_bytes).map_err(SegmentError::Decompress)?
        };
        Ok(Some((
            Segment {
                payload,
                self_contained,
            },
            total,
        )))
    }

    /// Appends `frames` (whole encoded frames) as segments: one self-contained segment if
    /// they fit, else consecutive pieces that are not self-contained. The caller passes one
    /// large frame alone, never several frames that together overflow a segment.
    pub fn encode(self, frames: &[u8], out: &mut Vec<u8>) {
        if frames.len() <= SEGMENT_PAYLOAD_MAX_BYTES {
            self.encode_one(frames, true, out);
        } else {
            for piece in frames.chunks(SEGMENT_PAYLOAD_MAX_BYTES) {
                self.encode_one(piece, false, out);
            }
        }
    }

    fn encode_one(self, payload: &[u8], self_contained: bool, out: &mut Vec<u8>) {
        assert!(
            payload.len() <= SEGMENT_PAYLOAD_MAX_BYTES,
            "segment payload too long"
        );
        let flag = u64::from(self_contained);
        if !self.compressed {
            let fields = payload.len() as u64 | (flag << 17);
            write_le(out, fields, 3);
            write_le(out, u64::from(crc24(fields, 3)), CRC24_BYTES);
            out.extend_from_slice(payload);
            write_le(out, u64::from(crc32(payload)), CRC32_BYTES);
            return;
        }
        let mut block = Vec::with_capacity(lz4_flex::block::get_maximum_output_size(payload.len()));
        Compression::Lz4.compress(payload, &mut block);
        // The protocol's LZ4 body starts with a 4-byte length the segment header carries
        // instead. A payload that does not shrink is sent as it is, marked by length 0.
        let compressed = &block[crate::compression::LENGTH_PREFIX_BYTES..];
        let (sent, uncompressed_bytes) = if compressed.len() < payload.len() {
            (compressed, payload.len())
        } else {
            (payload, 0)
        };
        let fields = sent.len() as u64 | ((uncompressed_bytes as u64) << 17) | (flag << 34);
        write_le(out, fields, 5);
        write_le(out, u64::from(crc24(fields, 5)), CRC24_BYTES);
        out.extend_from_slice(sent);
        write_le(out, u64::from(crc32(sent)), CRC32_BYTES);
    }
}

/// Decompresses an LZ4 block whose length the segment header gave.
fn decompress_block(block: &[u8], length: usize) -> Result<Vec<u8>, CompressionError> {
    let mut prefixed = Vec::with_capacity(crate::compression::LENGTH_PREFIX_BYTES + block.len());
    prefixed.extend_from_slice(&(length as i32).to_be_bytes());
    prefixed.extend_from_slice(block);
    Compression::Lz4.decompress(&prefixed, SEGMENT_PAYLOAD_MAX_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(codec: SegmentCodec, frames: &[u8]) -> Vec<Segment> {
        let mut wire = Vec::new();
        codec.encode(frames, &mut wire);
        let mut segments = Vec::new();
        let mut rest = wire.as_slice();
        while !rest.is_empty() {
            let (segment, used) = codec.decode(rest).expect("valid").expect("whole");
            segments.push(segment);
            rest = &rest[used..];
        }
        let joined: Vec<u8> = segments.iter().flat_map(|s| s.payload.clone()).collect();
        assert_eq!(joined, frames);
        segments
    }

    #[test]
    fn crc24_matches_the_python_drivers_values() {
        // The Python driver (cassandra/segment.py) and Cassandra agree on these: a header for
        // a 9-byte self-contained payload, and the CRC32s of an empty and a 5-byte payload.
        let fields = 9 | (1 << 17);
        assert_eq!(crc24(fields, 3), 0xC1_C8_A4);
        assert_eq!(crc32(b""), 0x4477_7ED3);
        assert_eq!(crc32(b"hello"), 0xB60E_8074);
    }

    #[test]
    fn small_and_large_frames_round_trip_in_both_codecs() {
        let big: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        for codec in [SegmentCodec::new(None), SegmentCodec::new(Some(Compression::Lz4))] {
            let small = round_trip(codec, b"\x85\x00\x00\x01\x08\x00\x00\x00\x04\x00\x00\x00\x01");
            assert_eq!(small.len(), 1);
            assert!(small[0].self_contained);
            let large = round_trip(codec, &big);
            assert_eq!(large.len(), 3);
            assert!(large.iter().all(|s| !s.self_contained));
            round_trip(codec, &[0u8; SEGMENT_PAYLOAD_MAX_BYTES]);
        }
        // Random bytes do not shrink: they go uncompressed inside a compressed segment.
        let noise: Vec<u8> = (0..1000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        round_trip(SegmentCodec::new(Some(Compression::Lz4)), &noise);
    }

    #[test]
    fn partial_segments_wait_for_more_bytes() {
        let codec = SegmentCodec::new(None);
        let mut wire = Vec::new();
        codec.encode(b"hello frames", &mut wire);
        for cut in 0..wire.len() {
            assert_eq!(codec.decode(&wire[..cut]), Ok(None), "{cut}");
        }
    }

    #[test]
    fn a_flipped_bit_anywhere_is_a_crc_error() {
        for codec in [SegmentCodec::new(None), SegmentCodec::new(Some(Compression::Lz4))] {
            let mut wire = Vec::new();
            codec.encode(&b"SELECT * FROM system.local".repeat(4), &mut wire);
            for byte in 0..wire.len() {
                let mut bad = wire.clone();
                bad[byte] ^= 0x04;
                match codec.decode(&bad) {
                    Err(SegmentError::HeaderCrc { .. } | SegmentError::PayloadCrc { .. }) => {}
                    // A flipped length bit may make the segment look longer than the bytes
                    // at hand only if its CRC24 also matched, which it cannot.
                    other => panic!("byte {byte}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn a_compressed_payload_that_lies_about_its_length_is_refused() {
        let codec = SegmentCodec::new(Some(Compression::Lz4));
        let mut block = Vec::new();
        Compression::Lz4.compress(&[7u8; 1000], &mut block);
        let sent = &block[4..];
        // Claims 2000 uncompressed bytes where the block holds 1000.
        let fields = sent.len() as u64 | (2000u64 << 17) | (1u64 << 34);
        let mut wire = Vec::new();
        write_le(&mut wire, fields, 5);
        write_le(&mut wire, u64::from(crc24(fields, 5)), 3);
        wire.extend_from_slice(sent);
        write_le(&mut wire, u64::from(crc32(sent)), 4);
        assert!(matches!(codec.decode(&wire), Err(SegmentError::Decompress(_))));
    }
}
