//! The on-disk format, byte by byte: [`block`] headers, [`record`]s and the [`chunks`] of rows
//! larger than a block; and the [`stream`] chunk, in which records travel between nodes when a
//! token range moves. `docs/storage-format.md` draws the same layouts for readers who do not
//! read Rust.
//!
//! Every decoder here takes untrusted bytes (a device may return anything after a crash or a
//! bit flip) and returns a [`DecodeError`] rather than panicking; `fuzz/` holds a target for
//! each.

pub mod block;
pub mod chunks;
pub mod record;
pub mod stream;

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    Truncated,
    BadMagic,
    BadVersion(u8),
    BadLength(usize),
    BadChecksum {
        stored: u32,
        computed: u32,
    },
    BadVarint,
    TooMany(usize),
    TrailingBytes,
    /// A flags byte with a combination the format does not define.
    BadFlags(u8),
    /// A valid record, but of another key than the index expected there.
    OtherKey,
    /// A chunked row's head names a block that no longer holds its chunk.
    ChunkGone {
        block: u32,
    },
    /// A stream record of a kind the format does not define.
    BadKind(u8),
    /// A stream record whose token is not the token of its partition key.
    BadToken {
        stored: i64,
        computed: i64,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated => write!(f, "record is cut short"),
            DecodeError::BadMagic => write!(f, "no record magic"),
            DecodeError::BadVersion(v) => write!(f, "unknown record version {v}"),
            DecodeError::BadLength(n) => write!(f, "impossible record length {n}"),
            DecodeError::BadChecksum { stored, computed } => {
                write!(
                    f,
                    "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
                )
            }
            DecodeError::BadVarint => write!(f, "malformed varint"),
            DecodeError::TooMany(n) => write!(f, "count {n} exceeds the format's bound"),
            DecodeError::BadFlags(b) => write!(f, "undefined flag combination {b:#04x}"),
            DecodeError::TrailingBytes => write!(f, "bytes left over after the row body"),
            DecodeError::OtherKey => write!(f, "the record there belongs to another key"),
            DecodeError::ChunkGone { block } => {
                write!(f, "block {block} no longer holds the row's chunk it should")
            }
            DecodeError::BadKind(k) => write!(f, "unknown record kind {k}"),
            DecodeError::BadToken { stored, computed } => write!(
                f,
                "record token {stored} is not its partition key's token {computed}"
            ),
        }
    }
}

impl std::error::Error for DecodeError {}

// Fixed-offset little-endian readers. Callers have checked the length first.
pub(crate) fn read_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

pub(crate) fn read_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(crate) fn read_u64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

pub(crate) fn read_i64(b: &[u8], at: usize) -> i64 {
    read_u64(b, at) as i64
}

/// Appends `v` as a LEB128 varint (what [`Cursor::varint`] reads).
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` zigzag-encoded as a varint (what [`Cursor::zigzag`] reads).
pub fn put_zigzag(out: &mut Vec<u8>, v: i64) {
    put_varint(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// A reader over untrusted bytes that consumes from the front: the crate's one byte cursor
/// (records, stream chunks, the index snapshot, and the node's backup files), little-endian
/// throughout.
pub struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    pub fn new(b: &'a [u8]) -> Cursor<'a> {
        Cursor { rest: b }
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.rest.len() < n {
            return Err(DecodeError::Truncated);
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(read_u16(self.take(2)?, 0))
    }

    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(read_u32(self.take(4)?, 0))
    }

    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(read_i64(self.take(8)?, 0))
    }

    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(read_u64(self.take(8)?, 0))
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }

    pub fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = self.u8()?;
            // The tenth byte holds only bit 63; anything more does not fit in 64 bits.
            if shift == 63 && byte > 1 {
                return Err(DecodeError::BadVarint);
            }
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::BadVarint)
    }

    pub fn varint_u32(&mut self) -> Result<u32, DecodeError> {
        u32::try_from(self.varint()?).map_err(|_| DecodeError::BadVarint)
    }

    pub fn zigzag(&mut self) -> Result<i64, DecodeError> {
        let v = self.varint()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    /// A count bounded by `max` and by what the remaining bytes could possibly hold.
    pub fn count(&mut self, max: usize) -> Result<usize, DecodeError> {
        let n = self.varint()?;
        if n > max as u64 || n > self.rest.len() as u64 {
            return Err(DecodeError::TooMany(n.min(usize::MAX as u64) as usize));
        }
        Ok(n as usize)
    }

    pub fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.varint()?;
        if n > self.rest.len() as u64 {
            return Err(DecodeError::Truncated);
        }
        self.take(n as usize)
    }
}
