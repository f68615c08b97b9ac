//! The stream chunk: records of one table on their way from one node to another when a token
//! range moves (join, decommission, replace). [`crate::Engine::export_range`] makes one,
//! [`crate::Engine::import_chunk`] applies one; the cluster sends it as it is.
//!
//! ```text
//!  0       4   5   6       8           12          16          20          24
//!  +-------+---+---+-------+-----------+-----------+-----------+-----------+
//!  | magic |ver|flg|  rsv  |  crc32c   |   chunk   |   table   |  records  |
//!  | HSTC  |u8 |u8 |u16 = 0|           | bytes u32 |    u32    |    u32    |
//!  +-------+---+---+-------+-----------+-----------+-----------+-----------+
//!  24: records, one after another, `records` of them:
//!
//!  0   1                 9                 17    19    21          25
//!  +---+-----------------+-----------------+-----+-----+-----------+
//!  |knd|      token      | base timestamp  | pk  | ck  |   body    |
//!  |u8 |       i64       |     µs i64      | len | len |  len u32  |
//!  +---+-----------------+-----------------+-----+-----+-----------+
//!  25: partition key bytes | clustering key bytes | body bytes   (no padding)
//! ```
//!
//! All integers little-endian, as everywhere in the storage format. `chunk bytes` is the whole
//! chunk, header included; `crc32c` covers bytes 0..8 and 12..chunk bytes (everything but
//! itself). Kind 1 is a row: its body is [`super::record::encode_body`]'s, its timestamps
//! relative to `base timestamp`. Kind 2 is a partition's range and partition tombstones: its
//! body is [`super::record::encode_tombstones_body`]'s and its clustering key is empty. The flags
//! byte and the reserved bytes are written 0 and refused otherwise: a later meaning for them
//! comes with a new version, so a receiver never half-understands a chunk.
//!
//! The decoder takes bytes from the network: it checks the header, the length and the
//! checksum, then every record, including that its body decodes and that its token is the
//! Murmur3 token of its partition key, and refuses unknown kinds and leftover bytes. Every
//! count and length is bounded by a `*_MAX` below before anything is allocated for it.

use super::record::{decode_body, decode_tombstones_body};
use super::{read_u16, read_u32, Cursor, DecodeError};
use crate::range_tombstones::PartitionTombstones;
use crate::row::Row;
use crate::token::token;
use crate::{KEY_MAX_BYTES, ROW_MAX_BYTES};

pub const STREAM_MAGIC: [u8; 4] = *b"HSTC";
pub const STREAM_VERSION: u8 = 1;
pub const CHUNK_HEADER_BYTES: usize = 24;
/// A record's fixed part, before its keys and body.
pub const RECORD_HEAD_BYTES: usize = 25;

/// The records of one chunk, but its last, take at most this many bytes: an export stops once
/// it has this much (or the caller's smaller limit), so a chunk stays a bounded buffer on both
/// sides however large the range.
pub const CHUNK_DATA_BYTES_MAX: usize = 64 << 20;
/// The largest one record may be: the largest row the engine stores, with the largest keys.
pub const STREAM_RECORD_BYTES_MAX: usize = RECORD_HEAD_BYTES + 2 * KEY_MAX_BYTES + ROW_MAX_BYTES;
/// The largest chunk: the bounded data, and one record that may take it past the bound (an
/// export always sends at least one record, so one 32 MiB row still goes).
pub const CHUNK_BYTES_MAX: usize = CHUNK_HEADER_BYTES + CHUNK_DATA_BYTES_MAX + STREAM_RECORD_BYTES_MAX;
/// The most records one chunk may carry (an export stops there too). Decoded records cost
/// RAM beyond their bytes; this bounds that cost for a chunk of many tiny rows.
pub const RECORDS_PER_CHUNK_MAX: usize = 1 << 20;
/// The largest body: a row's (a partition's tombstones record is smaller, since it fits in a
/// write block).
pub const BODY_BYTES_MAX: usize = ROW_MAX_BYTES;

const OFFSET_VERSION: usize = 4;
const OFFSET_FLAGS: usize = 5;
const OFFSET_RESERVED: usize = 6;
const OFFSET_CRC: usize = 8;
const OFFSET_CHUNK_BYTES: usize = 12;
const OFFSET_TABLE: usize = 16;
const OFFSET_RECORDS: usize = 20;

const _: () = assert!(CHUNK_BYTES_MAX <= u32::MAX as usize);

/// What a stream record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RecordKind {
    /// One row as stored: live cells, deletions, TTLs.
    Row = 1,
    /// A partition's range and partition tombstones.
    Tombstones = 2,
}

impl RecordKind {
    fn from_u8(b: u8) -> Result<RecordKind, DecodeError> {
        match b {
            1 => Ok(RecordKind::Row),
            2 => Ok(RecordKind::Tombstones),
            _ => Err(DecodeError::BadKind(b)),
        }
    }
}

/// A record's body, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Contents {
    Row(Row),
    Tombstones(PartitionTombstones),
}

/// One decoded record; keys and body borrow the chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamRecord<'a> {
    pub kind: RecordKind,
    pub token: i64,
    pub base_timestamp_us: i64,
    pub partition_key: &'a [u8],
    pub clustering_key: &'a [u8],
    pub body: &'a [u8],
    pub contents: Contents,
}

/// A chunk that passed every check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamChunk<'a> {
    pub table: u32,
    pub records: Vec<StreamRecord<'a>>,
}

/// The bytes one record takes in a chunk.
pub fn record_bytes(partition_key: &[u8], clustering_key: &[u8], body: &[u8]) -> usize {
    RECORD_HEAD_BYTES + partition_key.len() + clustering_key.len() + body.len()
}

/// Builds a chunk record by record. Its callers hold records the engine stored, so a record
/// beyond the format's bounds is a programmer error and panics.
pub struct ChunkEncoder {
    buf: Vec<u8>,
    records: usize,
}

impl ChunkEncoder {
    pub fn new(table: u32) -> ChunkEncoder {
        let mut buf = Vec::with_capacity(CHUNK_HEADER_BYTES);
        buf.extend_from_slice(&STREAM_MAGIC);
        buf.push(STREAM_VERSION);
        buf.push(0); // flags
        buf.extend_from_slice(&[0u8; 2]); // reserved
        buf.extend_from_slice(&[0u8; 4]); // crc, filled in by `finish`
        buf.extend_from_slice(&[0u8; 4]); // chunk bytes, filled in by `finish`
        buf.extend_from_slice(&table.to_le_bytes());
        buf.extend_from_slice(&[0u8; 4]); // records, filled in by `finish`
        ChunkEncoder { buf, records: 0 }
    }

    pub fn records(&self) -> usize {
        self.records
    }

    /// Bytes of the records so far (the chunk less its header).
    pub fn data_bytes(&self) -> usize {
        self.buf.len() - CHUNK_HEADER_BYTES
    }

    /// True if one more record may follow: below both bounds on what a chunk carries.
    pub fn has_room(&self) -> bool {
        self.records < RECORDS_PER_CHUNK_MAX && self.data_bytes() < CHUNK_DATA_BYTES_MAX
    }

    /// Appends a record whose body is already encoded against `base_timestamp_us`.
    pub fn push(
        &mut self,
        kind: RecordKind,
        token: i64,
        base_timestamp_us: i64,
        partition_key: &[u8],
        clustering_key: &[u8],
        body: &[u8],
    ) {
        assert!(self.has_room(), "the chunk is full: the caller checks has_room");
        assert!(
            partition_key.len() <= KEY_MAX_BYTES && clustering_key.len() <= KEY_MAX_BYTES,
            "keys the engine stored fit in u16"
        );
        assert!(body.len() <= BODY_BYTES_MAX, "a body the engine stored");
        assert!(
            kind == RecordKind::Row || clustering_key.is_empty(),
            "a partition's tombstones have no clustering key"
        );
        self.buf.push(kind as u8);
        self.buf.extend_from_slice(&token.to_le_bytes());
        self.buf.extend_from_slice(&base_timestamp_us.to_le_bytes());
        self.buf
            .extend_from_slice(&(partition_key.len() as u16).to_le_bytes());
        self.buf
            .extend_from_slice(&(clustering_key.len() as u16).to_le_bytes());
        self.buf.extend_from_slice(&(body.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(partition_key);
        self.buf.extend_from_slice(clustering_key);
        self.buf.extend_from_slice(body);
        self.records += 1;
    }

    /// The finished chunk, counted, measured and sealed.
    pub fn finish(mut self) -> Vec<u8> {
        assert!(self.buf.len() <= CHUNK_BYTES_MAX, "bounded by has_room");
        self.buf[OFFSET_RECORDS..OFFSET_RECORDS + 4].copy_from_slice(&(self.records as u32).to_le_bytes());
        reseal_chunk(&mut self.buf);
        self.buf
    }
}

/// Writes the length and the checksum of a whole chunk into it: the encoder's last step, and
/// how the fuzzer reaches the parsing behind the checksum. A chunk too short for a header, or
/// too long for the length field, is left as it is.
pub fn reseal_chunk(chunk: &mut [u8]) {
    let Ok(len) = u32::try_from(chunk.len()) else {
        return;
    };
    if chunk.len() < CHUNK_HEADER_BYTES {
        return;
    }
    chunk[OFFSET_CHUNK_BYTES..OFFSET_CHUNK_BYTES + 4].copy_from_slice(&len.to_le_bytes());
    let crc = chunk_crc(chunk);
    chunk[OFFSET_CRC..OFFSET_CRC + 4].copy_from_slice(&crc.to_le_bytes());
}

fn chunk_crc(chunk: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&chunk[..OFFSET_CRC]);
    crc32c::crc32c_append(crc, &chunk[OFFSET_CRC + 4..])
}

/// Decodes and checks a whole chunk: nothing of a chunk that fails here may be applied.
pub fn decode_chunk(b: &[u8]) -> Result<StreamChunk<'_>, DecodeError> {
    if b.len() < CHUNK_HEADER_BYTES {
        return Err(DecodeError::Truncated);
    }
    if b[..4] != STREAM_MAGIC {
        return Err(DecodeError::BadMagic);
    }
    if b[OFFSET_VERSION] != STREAM_VERSION {
        return Err(DecodeError::BadVersion(b[OFFSET_VERSION]));
    }
    if b[OFFSET_FLAGS] != 0 {
        return Err(DecodeError::BadFlags(b[OFFSET_FLAGS]));
    }
    if read_u16(b, OFFSET_RESERVED) != 0 {
        return Err(DecodeError::BadFlags(b[OFFSET_RESERVED] | b[OFFSET_RESERVED + 1]));
    }
    let len = read_u32(b, OFFSET_CHUNK_BYTES) as usize;
    if !(CHUNK_HEADER_BYTES..=CHUNK_BYTES_MAX).contains(&len) {
        return Err(DecodeError::BadLength(len));
    }
    if len > b.len() {
        return Err(DecodeError::Truncated);
    }
    if len < b.len() {
        return Err(DecodeError::TrailingBytes);
    }
    let stored = read_u32(b, OFFSET_CRC);
    let computed = chunk_crc(b);
    if stored != computed {
        return Err(DecodeError::BadChecksum { stored, computed });
    }
    let count = read_u32(b, OFFSET_RECORDS) as usize;
    // Every record takes at least its fixed part, so the bytes bound the count as well.
    if count > RECORDS_PER_CHUNK_MAX || count > (len - CHUNK_HEADER_BYTES) / RECORD_HEAD_BYTES {
        return Err(DecodeError::TooMany(count));
    }
    let mut cur = Cursor::new(&b[CHUNK_HEADER_BYTES..]);
    let mut records = Vec::with_capacity(count);
    for i in 0..count {
        // As the encoder makes them: only the last record may start past the data bound.
        let data_bytes = len - CHUNK_HEADER_BYTES - cur.remaining();
        if i > 0 && data_bytes >= CHUNK_DATA_BYTES_MAX {
            return Err(DecodeError::BadLength(data_bytes));
        }
        records.push(decode_record(&mut cur)?);
    }
    if !cur.is_empty() {
        return Err(DecodeError::TrailingBytes);
    }
    Ok(StreamChunk {
        table: read_u32(b, OFFSET_TABLE),
        records,
    })
}

fn decode_record<'a>(cur: &mut Cursor<'a>) -> Result<StreamRecord<'a>, DecodeError> {
    let kind = RecordKind::from_u8(cur.u8()?)?;
    let token_stored = cur.i64()?;
    let base_timestamp_us = cur.i64()?;
    let pk_len = cur.u16()? as usize;
    let ck_len = cur.u16()? as usize;
    let body_len = cur.u32()? as usize;
    if body_len > BODY_BYTES_MAX {
        return Err(DecodeError::BadLength(body_len));
    }
    if kind == RecordKind::Tombstones && ck_len != 0 {
        return Err(DecodeError::BadLength(ck_len));
    }
    if pk_len + ck_len + body_len > cur.remaining() {
        return Err(DecodeError::Truncated);
    }
    let partition_key = cur.take(pk_len)?;
    let clustering_key = cur.take(ck_len)?;
    let body = cur.take(body_len)?;
    let computed = token(partition_key);
    if computed != token_stored {
        return Err(DecodeError::BadToken {
            stored: token_stored,
            computed,
        });
    }
    let contents = match kind {
        RecordKind::Row => Contents::Row(decode_body(body, base_timestamp_us)?),
        RecordKind::Tombstones => {
            let t = decode_tombstones_body(body, base_timestamp_us)?;
            check_bounds(&t)?;
            Contents::Tombstones(t)
        }
    };
    Ok(StreamRecord {
        kind,
        token: token_stored,
        base_timestamp_us,
        partition_key,
        clustering_key,
        body,
        contents,
    })
}

/// A range tombstone's bounds are clustering keys: no longer than a key may be, as
/// `Engine::delete_range` demands of the deletes that made them.
fn check_bounds(t: &PartitionTombstones) -> Result<(), DecodeError> {
    for r in &t.ranges {
        for b in [&r.start, &r.end] {
            if let std::ops::Bound::Included(k) | std::ops::Bound::Excluded(k) = b {
                if k.len() > KEY_MAX_BYTES {
                    return Err(DecodeError::BadLength(k.len()));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::ops::Bound;

    use super::*;
    use crate::format::record::{encode_body, encode_tombstones_body};
    use crate::row::{Cell, Deletion};

    fn sample() -> Vec<u8> {
        let mut e = ChunkEncoder::new(7);
        let row = Row {
            cells: vec![
                Cell::live(1, 1_000, b"value".to_vec()),
                Cell::tombstone(2, 900, 5),
            ],
            ..Row::default()
        };
        let mut body = Vec::new();
        encode_body(&mut body, &row, 1_000);
        e.push(RecordKind::Row, token(b"pk"), 1_000, b"pk", b"ck", &body);
        let t = PartitionTombstones::of(
            Bound::Included(b"a".to_vec()),
            Bound::Unbounded,
            Deletion {
                timestamp_us: 50,
                deleted_at_s: 9,
            },
        );
        let mut body = Vec::new();
        encode_tombstones_body(&mut body, &t, 50);
        e.push(RecordKind::Tombstones, token(b"other"), 50, b"other", b"", &body);
        e.finish()
    }

    #[test]
    fn a_chunk_round_trips() {
        let b = sample();
        let chunk = decode_chunk(&b).expect("valid");
        assert_eq!(chunk.table, 7);
        assert_eq!(chunk.records.len(), 2);
        assert_eq!(chunk.records[0].kind, RecordKind::Row);
        assert_eq!(chunk.records[0].clustering_key, b"ck");
        assert!(matches!(&chunk.records[1].contents, Contents::Tombstones(t) if t.ranges.len() == 1));
        let empty = ChunkEncoder::new(3).finish();
        assert_eq!(decode_chunk(&empty).expect("valid").records, Vec::new());
    }

    /// Damage anywhere is refused: every cut and every single-bit flip of every byte.
    #[test]
    fn every_truncation_and_bit_flip_is_refused() {
        let b = sample();
        for cut in 0..b.len() {
            assert!(decode_chunk(&b[..cut]).is_err(), "cut at {cut}");
        }
        for i in 0..b.len() {
            for bit in 0..8 {
                let mut damaged = b.clone();
                damaged[i] ^= 1 << bit;
                assert!(decode_chunk(&damaged).is_err(), "flip of bit {bit} of byte {i}");
            }
        }
        let mut longer = b.clone();
        longer.push(0);
        assert_eq!(decode_chunk(&longer), Err(DecodeError::TrailingBytes));
    }

    /// Behind a valid checksum, what the format does not define is still refused.
    #[test]
    fn unknown_kinds_wrong_tokens_and_leftovers_are_refused_behind_a_valid_checksum() {
        let resealed = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut b = sample();
            f(&mut b);
            reseal_chunk(&mut b);
            decode_chunk(&b).map(|c| c.records.len())
        };
        let first = CHUNK_HEADER_BYTES;
        assert_eq!(resealed(&|b| b[first] = 3), Err(DecodeError::BadKind(3)));
        assert!(matches!(
            resealed(&|b| b[first + 1] ^= 1),
            Err(DecodeError::BadToken { .. })
        ));
        assert_eq!(resealed(&|b| b[OFFSET_FLAGS] = 1), Err(DecodeError::BadFlags(1)));
        // One record fewer than the chunk holds: the second is left over.
        assert_eq!(
            resealed(&|b| b[OFFSET_RECORDS] = 1),
            Err(DecodeError::TrailingBytes)
        );
        assert_eq!(
            resealed(&|b| b[OFFSET_RECORDS..OFFSET_RECORDS + 4].copy_from_slice(&u32::MAX.to_le_bytes())),
            Err(DecodeError::TooMany(u32::MAX as usize))
        );
        // A body length past the bound is refused before anything is taken for it.
        let body_len_at = first + 21;
        assert_eq!(
            resealed(&|b| b[body_len_at..body_len_at + 4].copy_from_slice(&u32::MAX.to_le_bytes())),
            Err(DecodeError::BadLength(u32::MAX as usize))
        );
    }

    #[test]
    fn a_full_chunk_says_so() {
        let mut e = ChunkEncoder::new(1);
        let body = vec![0u8; 1 << 20];
        while e.has_room() {
            e.push(RecordKind::Row, token(b"k"), 0, b"k", b"", &body);
        }
        assert_eq!(e.records(), CHUNK_DATA_BYTES_MAX / (1 << 20));
        assert!(e.finish().len() <= CHUNK_BYTES_MAX);
    }
}
