//! Rows larger than a write block.
//!
//! A record must fit in one write block, but a row may be larger (Cassandra takes a mutation of
//! up to 16 MiB). Such a row's body is cut into chunks, each written into a block of its own
//! (a **chunk block**: a block header with the chunk flag, then the chunk's bytes from byte 64),
//! and the row is stored as an ordinary record, its **head**, whose flag `chunked` is set and
//! whose body says where the chunks are:
//!
//! ```text
//!  0                8              12          14
//!  +----------------+--------------+-----------+-----------------------------------------+
//!  | body bytes u64 | crc32c u32   | count u16 | count x { block u32, sequence u64,      |
//!  | (the real body)| of that body |           |           bytes u32 }  (16 bytes each)  |
//!  +----------------+--------------+-----------+-----------------------------------------+
//! ```
//!
//! The chunks, in order, are the real body; the crc covers all of it, so a chunk block that was
//! reused or damaged is caught on read. A chunk block's sequence is given when it is written and
//! named in the head, so a head never mistakes a later use of the block for its chunk.

use super::{read_u16, read_u32, read_u64, DecodeError};

pub const CHUNK_BYTES: usize = 16;
const FIXED_BYTES: usize = 14;
/// More chunks than any allowed row needs at the smallest block size.
pub const CHUNKS_MAX: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub block: u32,
    pub sequence: u64,
    pub bytes: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkList {
    pub body_bytes: u64,
    pub crc32c: u32,
    pub chunks: Vec<Chunk>,
}

impl ChunkList {
    pub fn encode(&self, out: &mut Vec<u8>) {
        assert!(
            self.chunks.len() <= CHUNKS_MAX,
            "chunk count checked by the writer"
        );
        out.extend_from_slice(&self.body_bytes.to_le_bytes());
        out.extend_from_slice(&self.crc32c.to_le_bytes());
        out.extend_from_slice(&(self.chunks.len() as u16).to_le_bytes());
        for c in &self.chunks {
            out.extend_from_slice(&c.block.to_le_bytes());
            out.extend_from_slice(&c.sequence.to_le_bytes());
            out.extend_from_slice(&c.bytes.to_le_bytes());
        }
    }

    pub fn decode(b: &[u8]) -> Result<ChunkList, DecodeError> {
        if b.len() < FIXED_BYTES {
            return Err(DecodeError::Truncated);
        }
        let count = read_u16(b, 12) as usize;
        if count == 0 || count > CHUNKS_MAX {
            return Err(DecodeError::TooMany(count));
        }
        if b.len() != FIXED_BYTES + count * CHUNK_BYTES {
            return Err(DecodeError::BadLength(b.len()));
        }
        let chunks: Vec<Chunk> = (0..count)
            .map(|i| {
                let at = FIXED_BYTES + i * CHUNK_BYTES;
                Chunk {
                    block: read_u32(b, at),
                    sequence: read_u64(b, at + 4),
                    bytes: read_u32(b, at + 12),
                }
            })
            .collect();
        let body_bytes = read_u64(b, 0);
        if chunks.iter().map(|c| u64::from(c.bytes)).sum::<u64>() != body_bytes {
            return Err(DecodeError::BadLength(body_bytes as usize));
        }
        Ok(ChunkList {
            body_bytes,
            crc32c: read_u32(b, 8),
            chunks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_does_not_add_up() {
        let list = ChunkList {
            body_bytes: 3_000_000,
            crc32c: 0xdead_beef,
            chunks: vec![
                Chunk {
                    block: 7,
                    sequence: 900,
                    bytes: 2_000_000,
                },
                Chunk {
                    block: 3,
                    sequence: 901,
                    bytes: 1_000_000,
                },
            ],
        };
        let mut b = Vec::new();
        list.encode(&mut b);
        assert_eq!(b.len(), FIXED_BYTES + 2 * CHUNK_BYTES);
        assert_eq!(ChunkList::decode(&b), Ok(list));
        assert_eq!(
            ChunkList::decode(&b[..b.len() - 1]),
            Err(DecodeError::BadLength(45))
        );
        let mut wrong_total = b.clone();
        wrong_total[0] ^= 1;
        assert!(ChunkList::decode(&wrong_total).is_err());
        let mut none = b[..FIXED_BYTES].to_vec();
        none[12] = 0;
        assert_eq!(ChunkList::decode(&none), Err(DecodeError::TooMany(0)));
    }
}
