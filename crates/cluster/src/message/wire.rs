//! Big-endian primitives and LEB128 varints: a cursor that reads untrusted bytes from the front
//! and returns [`DecodeError`] rather than panicking, and the `put_*` helpers that write what it
//! reads. (The little-endian reads are for the frozen row layout of versions 1 to 3 alone.)
//!
//! The workspace lint forbids host-endian conversions, so every integer goes through these.

use super::DecodeError;

pub(crate) fn put_u8(out: &mut Vec<u8>, v: u8) {
    out.push(v);
}

pub(crate) fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_bool(out: &mut Vec<u8>, v: bool) {
    out.push(u8::from(v));
}

/// Appends `v` as an unsigned LEB128 varint: seven bits a byte, low bits first, the top bit set
/// on every byte but the last.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` zig-zag encoded (0, -1, 1, -2, ... as 0, 1, 2, 3, ...) as a varint, so a small
/// negative delta takes as few bytes as a small positive one.
pub(crate) fn put_zigzag(out: &mut Vec<u8>, v: i64) {
    put_varint(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// Overwrites four bytes at `at` (a length or checksum filled in after the fact).
pub(crate) fn set_u32(out: &mut [u8], at: usize, v: u32) {
    out[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// Reads the u32 at `at`; the caller has checked that four bytes are there.
pub(crate) fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// A reader over untrusted bytes that consumes from the front.
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Reader<'a> {
        Reader { rest: b }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.rest.len()
    }

    pub(crate) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.rest.len() < n {
            return Err(DecodeError::Truncated { what });
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    /// Everything left.
    pub(crate) fn take_rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.rest)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        Ok(get_u32(self.take(4, what)?, 0))
    }

    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8, what)?);
        Ok(u64::from_be_bytes(b))
    }

    pub(crate) fn i64(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        Ok(self.u64(what)? as i64)
    }

    pub(crate) fn u32_le(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// An unsigned LEB128 varint of at most ten bytes that fits in 64 bits.
    pub(crate) fn varint(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = self.u8(what)?;
            // The tenth byte holds only bit 63; anything more does not fit in 64 bits.
            if shift == 63 && byte > 1 {
                return Err(DecodeError::BadVarint { what });
            }
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::BadVarint { what })
    }

    pub(crate) fn varint_u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        u32::try_from(self.varint(what)?).map_err(|_| DecodeError::BadVarint { what })
    }

    pub(crate) fn zigzag(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        let v = self.varint(what)?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    /// A varint count bounded by `max`, and by the bytes left when each item takes at least
    /// `item_bytes_min`, before anything is allocated for it.
    pub(crate) fn count_varint(
        &mut self,
        what: &'static str,
        max: usize,
        item_bytes_min: usize,
    ) -> Result<usize, DecodeError> {
        let n = self.varint(what)?;
        if n > max as u64 {
            return Err(DecodeError::TooMany {
                what,
                count: n,
                max: max as u64,
            });
        }
        if n.saturating_mul(item_bytes_min as u64) > self.rest.len() as u64 {
            return Err(DecodeError::Truncated { what });
        }
        Ok(n as usize)
    }

    /// Bytes behind a varint length, at most `max` of them.
    pub(crate) fn bytes_varint(&mut self, what: &'static str, max: usize) -> Result<&'a [u8], DecodeError> {
        let n = self.varint(what)?;
        if n > max as u64 {
            return Err(DecodeError::TooLong {
                what,
                len_bytes: n,
                max_bytes: max as u64,
            });
        }
        self.take(n as usize, what)
    }

    /// A byte that must be 0 or 1: anything else means the stream is not what we think.
    pub(crate) fn bool(&mut self, what: &'static str) -> Result<bool, DecodeError> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            tag => Err(DecodeError::BadTag { what, tag }),
        }
    }

    /// A count bounded by `max` before anything is allocated for it.
    pub(crate) fn count_u32(&mut self, what: &'static str, max: usize) -> Result<usize, DecodeError> {
        let n = self.u32(what)?;
        if n as usize > max {
            return Err(DecodeError::TooMany {
                what,
                count: u64::from(n),
                max: max as u64,
            });
        }
        Ok(n as usize)
    }

    /// Bytes behind a u16 length, at most `max` of them.
    pub(crate) fn bytes_u16(&mut self, what: &'static str, max: usize) -> Result<&'a [u8], DecodeError> {
        let n = usize::from(self.u16(what)?);
        if n > max {
            return Err(DecodeError::TooLong {
                what,
                len_bytes: n as u64,
                max_bytes: max as u64,
            });
        }
        self.take(n, what)
    }

    /// Bytes behind a u32 length, at most `max` of them. The length is also checked against
    /// what is left before anything is taken, so a lying length never allocates.
    pub(crate) fn bytes_u32(&mut self, what: &'static str, max: usize) -> Result<&'a [u8], DecodeError> {
        let n = self.u32(what)? as usize;
        if n > max {
            return Err(DecodeError::TooLong {
                what,
                len_bytes: n as u64,
                max_bytes: max as u64,
            });
        }
        self.take(n, what)
    }
}
