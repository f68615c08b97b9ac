//! The write block header.
//!
//! A device is an array of equal write blocks. Each block that holds data starts with this
//! 64-byte header, then records packed back to back (each a multiple of 16 bytes) until the first
//! position that does not hold a valid record of this block's sequence number:
//!
//! ```text
//!  0       4       6       8               16      20      24                          60      64
//!  +-------+-------+-------+---------------+-------+-------+---------------------------+-------+
//!  | magic |version| flags |   sequence    | block | block |        reserved (0)       | crc32c|
//!  | HYWB  |  u16  |  u16  |      u64      | index | size  |                           |  u32  |
//!  +-------+-------+-------+---------------+-------+-------+---------------------------+-------+
//!                                             u32     u32
//! ```
//!
//! All integers are little-endian. `crc32c` covers bytes 0..60. The header is written once per
//! use of the block and never changes while the block fills (a partly filled block is rewritten
//! in place as it grows, and the header bytes are rewritten identical), so a torn rewrite can
//! never damage it. `sequence` increases by one for every block the engine opens and orders
//! versions of a record on cold start. A freed block has its header overwritten with one whose
//! flag bit 0 (free) is set and whose sequence is the block's last: the records behind it are
//! dead, and cold start still learns the highest sequence ever used, so it never reuses one.
//! Flag bit 1 (chunk) marks a block that holds one piece of a row larger than a block
//! ([`super::chunks`]) from byte 64 on, instead of records.

use super::record::{decode_record, RecordView, RECORD_ALIGN_BYTES};
use super::{read_u16, read_u32, read_u64, DecodeError};

pub const BLOCK_MAGIC: [u8; 4] = *b"HYWB";
pub const BLOCK_VERSION: u16 = 1;
pub const BLOCK_HEADER_BYTES: usize = 64;

const OFFSET_MAGIC: usize = 0;
const OFFSET_VERSION: usize = 4;
const OFFSET_FLAGS: usize = 6;
const OFFSET_SEQUENCE: usize = 8;
const OFFSET_INDEX: usize = 16;
const OFFSET_SIZE: usize = 20;
const OFFSET_CRC: usize = 60;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockHeader {
    pub sequence: u64,
    /// The block's index in the namespace (across all devices); a header found at another
    /// index is a misplaced copy and is ignored.
    pub block_index: u32,
    pub block_size_bytes: u32,
    /// The block holds no data; `sequence` is the last it had.
    pub free: bool,
    /// The block holds one chunk of a row too large for a write block ([`super::chunks`]), not
    /// records: its bytes are reached only through the row's head record.
    pub chunk: bool,
}

const FLAG_FREE: u16 = 1;
const FLAG_CHUNK: u16 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderError {
    /// All zeros, or no magic: the block was never used.
    Free,
    BadVersion(u16),
    BadChecksum {
        stored: u32,
        computed: u32,
    },
}

impl BlockHeader {
    pub fn encode(&self) -> [u8; BLOCK_HEADER_BYTES] {
        let mut b = [0u8; BLOCK_HEADER_BYTES];
        b[OFFSET_MAGIC..OFFSET_MAGIC + 4].copy_from_slice(&BLOCK_MAGIC);
        b[OFFSET_VERSION..OFFSET_VERSION + 2].copy_from_slice(&BLOCK_VERSION.to_le_bytes());
        let flags = if self.free { FLAG_FREE } else { 0 } | if self.chunk { FLAG_CHUNK } else { 0 };
        b[OFFSET_FLAGS..OFFSET_FLAGS + 2].copy_from_slice(&flags.to_le_bytes());
        b[OFFSET_SEQUENCE..OFFSET_SEQUENCE + 8].copy_from_slice(&self.sequence.to_le_bytes());
        b[OFFSET_INDEX..OFFSET_INDEX + 4].copy_from_slice(&self.block_index.to_le_bytes());
        b[OFFSET_SIZE..OFFSET_SIZE + 4].copy_from_slice(&self.block_size_bytes.to_le_bytes());
        let crc = crc32c::crc32c(&b[..OFFSET_CRC]);
        b[OFFSET_CRC..OFFSET_CRC + 4].copy_from_slice(&crc.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<BlockHeader, HeaderError> {
        if b.len() < BLOCK_HEADER_BYTES || b[OFFSET_MAGIC..OFFSET_MAGIC + 4] != BLOCK_MAGIC {
            return Err(HeaderError::Free);
        }
        let version = read_u16(b, OFFSET_VERSION);
        if version != BLOCK_VERSION {
            return Err(HeaderError::BadVersion(version));
        }
        let stored = read_u32(b, OFFSET_CRC);
        let computed = crc32c::crc32c(&b[..OFFSET_CRC]);
        if stored != computed {
            return Err(HeaderError::BadChecksum { stored, computed });
        }
        Ok(BlockHeader {
            sequence: read_u64(b, OFFSET_SEQUENCE),
            block_index: read_u32(b, OFFSET_INDEX),
            block_size_bytes: read_u32(b, OFFSET_SIZE),
            free: read_u16(b, OFFSET_FLAGS) & FLAG_FREE != 0,
            chunk: read_u16(b, OFFSET_FLAGS) & FLAG_CHUNK != 0,
        })
    }
}

/// How the walk of a block's records ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum WalkEnd {
    /// At zeros (the terminator the writer always leaves) or the end of the block.
    Clean,
    /// At bytes that are not a valid record of this block.
    Damaged { offset: usize, detail: DecodeError },
}

/// Calls `f(offset, record)` for each valid record of a block, in order (cold start and
/// defragmentation walk blocks with it).
pub(crate) fn walk_block(buf: &[u8], sequence: u64, mut f: impl FnMut(usize, &RecordView<'_>)) -> WalkEnd {
    let mut offset = BLOCK_HEADER_BYTES;
    while offset + RECORD_ALIGN_BYTES <= buf.len() {
        let rest = &buf[offset..];
        if rest[..RECORD_ALIGN_BYTES].iter().all(|&b| b == 0) {
            return WalkEnd::Clean;
        }
        match decode_record(rest, sequence) {
            Ok(view) => {
                f(offset, &view);
                offset += view.record_bytes;
            }
            Err(detail) => return WalkEnd::Damaged { offset, detail },
        }
    }
    WalkEnd::Clean
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_detects_damage() {
        let h = BlockHeader {
            sequence: 42,
            block_index: 7,
            block_size_bytes: 1 << 20,
            free: false,
            chunk: true,
        };
        let mut b = h.encode();
        assert_eq!(BlockHeader::decode(&b), Ok(h));
        b[9] ^= 1;
        assert!(matches!(
            BlockHeader::decode(&b),
            Err(HeaderError::BadChecksum { .. })
        ));
        assert_eq!(BlockHeader::decode(&[0u8; 64]), Err(HeaderError::Free));
    }
}
