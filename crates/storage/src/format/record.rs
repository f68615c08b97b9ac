//! The record: one version of one row, as it sits in a write block.
//!
//! ```text
//!  0     2   3   4           8           12          16                      24
//!  +-----+---+---+-----------+-----------+-----------+-----------------------+
//!  |magic|ver|flg|  record   |  crc32c   |   table   |        token          |
//!  | HR  |u8 |u8 |  bytes    |           |    u32    |         i64           |
//!  +-----+---+---+-----------+-----------+-----------+-----------------------+
//!  24                      32                      40          44    46    48          52
//!  +-----------------------+-----------------------+-----------+-----+-----+-----------+
//!  |        digest         |   write timestamp µs  | expiry s  | pk  | ck  |   body    |
//!  |         u64           |         i64           |    u32    | len | len |   len     |
//!  +-----------------------+-----------------------+-----------+-----+-----+-----------+
//!  52: partition key bytes | clustering key bytes | body bytes | zero padding to 16 bytes
//! ```
//!
//! All integers little-endian. `record bytes` is the whole record with padding, a multiple of
//! 16. `crc32c` covers the block's sequence number (8 bytes LE), then bytes 0..8 and 12..record
//! bytes (everything but itself): folding in the sequence means a stale record left over from an earlier use of the
//! same block can never pass for part of the current one. Flag bit 0 marks a tombstone (the row
//! has no live content, only deletions); bit 1 says the row carries deletions of any kind; bit 2 marks a partition's tombstones, bit 3 a
//! chunked row's head, bit 4 a delta (cells to merge over the row's previous whole version).
//! `expiry s` is, for a live record, the second after which
//! nothing in it is live (0: something lives forever); for a tombstone, its latest deletion
//! time. The write timestamp is the newest timestamp anywhere in the row.
//!
//! The body (see [`encode_body`]) holds the row: flags, liveness, deletions, then the cells, with
//! timestamps as zig-zag varint deltas from the record's write timestamp.

use super::{put_varint, put_zigzag, read_i64, read_u16, read_u32, read_u64, Cursor, DecodeError};
use crate::range_tombstones::{PartitionTombstones, RangeTombstone, RANGE_TOMBSTONES_PER_PARTITION_MAX};
use crate::row::{Cell, CellValue, Deletion, Liveness, Row};

pub const RECORD_MAGIC: [u8; 2] = *b"HR";
pub const RECORD_VERSION: u8 = 1;
pub const RECORD_HEADER_BYTES: usize = 52;
/// Records start and end on this boundary, so the index can address them in 16-byte units.
pub const RECORD_ALIGN_BYTES: usize = 16;
pub const FLAG_TOMBSTONE: u8 = 1;
pub const FLAG_DELETIONS: u8 = 2;
/// The record holds a partition's range and partition tombstones, not a row: its body is
/// [`encode_tombstones_body`]'s, its clustering key is empty, and its digest is
/// [`crate::token::tombstones_digest`]'s.
pub const FLAG_RANGE_TOMBSTONES: u8 = 4;
/// The body is not the row but where its pieces are: a row too large for one write block is
/// written whole into blocks of its own ([`super::chunks`]), and this record is its head.
pub const FLAG_CHUNKED: u8 = 8;
/// The body is not the whole row but a **delta**: cells written without reading the row
/// (`deltas.rs`), to be merged over the row's newest whole version written before it.
pub const FLAG_DELTA: u8 = 16;

const OFFSET_VERSION: usize = 2;
const OFFSET_FLAGS: usize = 3;
const OFFSET_LEN: usize = 4;
const OFFSET_CRC: usize = 8;
const OFFSET_TABLE: usize = 12;
const OFFSET_TOKEN: usize = 16;
const OFFSET_DIGEST: usize = 24;
const OFFSET_TIMESTAMP: usize = 32;
const OFFSET_EXPIRY: usize = 40;
const OFFSET_PK_LEN: usize = 44;
const OFFSET_CK_LEN: usize = 46;
const OFFSET_BODY_LEN: usize = 48;

/// The fixed-size part of a record: everything the RAM index needs, without the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordMeta {
    pub table: u32,
    pub token: i64,
    pub digest: u64,
    pub write_timestamp_us: i64,
    pub expiry_s: u32,
    pub tombstone: bool,
    /// The row carries deletions (a row or column deletion, or a cell tombstone), which must
    /// outlive its live content until their grace period ends.
    pub has_deletions: bool,
    /// The record is a partition's tombstones ([`FLAG_RANGE_TOMBSTONES`]).
    pub range_tombstones: bool,
    /// The body lists the chunks the row's real body was written to ([`FLAG_CHUNKED`]).
    pub chunked: bool,
    /// The body is a delta over the row's previous whole version ([`FLAG_DELTA`]).
    pub delta: bool,
}

/// A decoded record that borrows its bytes from the block.
#[derive(Clone, Copy, Debug)]
pub struct RecordView<'a> {
    pub meta: RecordMeta,
    pub partition_key: &'a [u8],
    pub clustering_key: &'a [u8],
    pub body: &'a [u8],
    /// Bytes the record occupies in the block, padding included.
    pub record_bytes: usize,
}

pub fn padded_len(unpadded: usize) -> usize {
    unpadded.div_ceil(RECORD_ALIGN_BYTES) * RECORD_ALIGN_BYTES
}

/// Appends a whole record to `out` (which must start the record at a 16-byte boundary).
/// Returns the record's length.
pub fn encode_record(
    out: &mut Vec<u8>,
    block_sequence: u64,
    meta: &RecordMeta,
    partition_key: &[u8],
    clustering_key: &[u8],
    body: &[u8],
) -> usize {
    assert!(
        partition_key.len() <= u16::MAX as usize,
        "partition key checked by the caller"
    );
    assert!(
        clustering_key.len() <= u16::MAX as usize,
        "clustering key checked by the caller"
    );
    let start = out.len();
    let unpadded = RECORD_HEADER_BYTES + partition_key.len() + clustering_key.len() + body.len();
    let len = padded_len(unpadded);
    out.extend_from_slice(&RECORD_MAGIC);
    out.push(RECORD_VERSION);
    out.push(
        if meta.tombstone { FLAG_TOMBSTONE } else { 0 }
            | if meta.has_deletions { FLAG_DELETIONS } else { 0 }
            | if meta.range_tombstones {
                FLAG_RANGE_TOMBSTONES
            } else {
                0
            }
            | if meta.chunked { FLAG_CHUNKED } else { 0 }
            | if meta.delta { FLAG_DELTA } else { 0 },
    );
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(&[0u8; 4]); // crc, filled in below
    out.extend_from_slice(&meta.table.to_le_bytes());
    out.extend_from_slice(&meta.token.to_le_bytes());
    out.extend_from_slice(&meta.digest.to_le_bytes());
    out.extend_from_slice(&meta.write_timestamp_us.to_le_bytes());
    out.extend_from_slice(&meta.expiry_s.to_le_bytes());
    out.extend_from_slice(&(partition_key.len() as u16).to_le_bytes());
    out.extend_from_slice(&(clustering_key.len() as u16).to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(partition_key);
    out.extend_from_slice(clustering_key);
    out.extend_from_slice(body);
    out.resize(start + len, 0);
    reseal_record(&mut out[start..start + len], block_sequence);
    len
}

/// Re-seals a record copied into a block with another sequence number (defragmentation).
pub fn reseal_record(record: &mut [u8], block_sequence: u64) {
    let crc = record_crc(block_sequence, record);
    record[OFFSET_CRC..OFFSET_CRC + 4].copy_from_slice(&crc.to_le_bytes());
}

/// The checksum of a whole record (`record` is exactly the record) but its own field.
fn record_crc(block_sequence: u64, record: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&block_sequence.to_le_bytes());
    let crc = crc32c::crc32c_append(crc, &record[..OFFSET_CRC]);
    crc32c::crc32c_append(crc, &record[OFFSET_CRC + 4..])
}

/// Decodes the record at the start of `b`. `b` may run past the record (the rest of the
/// block); `block_sequence` is the sequence of the block it was read from.
pub fn decode_record(b: &[u8], block_sequence: u64) -> Result<RecordView<'_>, DecodeError> {
    if b.len() < RECORD_HEADER_BYTES {
        return Err(DecodeError::Truncated);
    }
    if b[..2] != RECORD_MAGIC {
        return Err(DecodeError::BadMagic);
    }
    if b[OFFSET_VERSION] != RECORD_VERSION {
        return Err(DecodeError::BadVersion(b[OFFSET_VERSION]));
    }
    let len = read_u32(b, OFFSET_LEN) as usize;
    if len < RECORD_HEADER_BYTES || !len.is_multiple_of(RECORD_ALIGN_BYTES) || len > b.len() {
        return Err(DecodeError::BadLength(len));
    }
    let stored = read_u32(b, OFFSET_CRC);
    let computed = record_crc(block_sequence, &b[..len]);
    if stored != computed {
        return Err(DecodeError::BadChecksum { stored, computed });
    }
    let pk_len = read_u16(b, OFFSET_PK_LEN) as usize;
    let ck_len = read_u16(b, OFFSET_CK_LEN) as usize;
    let body_len = read_u32(b, OFFSET_BODY_LEN) as usize;
    let end = RECORD_HEADER_BYTES + pk_len + ck_len + body_len;
    if end > len {
        return Err(DecodeError::BadLength(len));
    }
    let pk_end = RECORD_HEADER_BYTES + pk_len;
    let ck_end = pk_end + ck_len;
    Ok(RecordView {
        meta: RecordMeta {
            table: read_u32(b, OFFSET_TABLE),
            token: read_i64(b, OFFSET_TOKEN),
            digest: read_u64(b, OFFSET_DIGEST),
            write_timestamp_us: read_i64(b, OFFSET_TIMESTAMP),
            expiry_s: read_u32(b, OFFSET_EXPIRY),
            tombstone: b[OFFSET_FLAGS] & FLAG_TOMBSTONE != 0,
            has_deletions: b[OFFSET_FLAGS] & FLAG_DELETIONS != 0,
            range_tombstones: b[OFFSET_FLAGS] & FLAG_RANGE_TOMBSTONES != 0,
            chunked: b[OFFSET_FLAGS] & FLAG_CHUNKED != 0,
            delta: b[OFFSET_FLAGS] & FLAG_DELTA != 0,
        },
        partition_key: &b[RECORD_HEADER_BYTES..pk_end],
        clustering_key: &b[pk_end..ck_end],
        body: &b[ck_end..end],
        record_bytes: len,
    })
}

// Body: a row.
//
//   u8 flags        bit 0 liveness, bit 1 liveness expires, bit 2 row deletion
//   [liveness]      zigzag ts delta; if it expires: varint ttl, u32 expiry
//   [row deletion]  zigzag ts delta, u32 deleted-at
//   varint n        column deletions, each: varint column, zigzag ts delta, u32 deleted-at
//   varint n        cells, each:
//                     varint column, u8 flags (bit 0 tombstone, bit 1 expires, bit 2 path),
//                     zigzag ts delta,
//                     tombstone: u32 deleted-at; expiring: varint ttl, u32 expiry,
//                     path: varint len, bytes; live: varint len, value bytes
const ROW_LIVENESS: u8 = 1;
const ROW_LIVENESS_EXPIRES: u8 = 2;
const ROW_DELETION: u8 = 4;
const CELL_TOMBSTONE: u8 = 1;
const CELL_EXPIRES: u8 = 2;
const CELL_PATH: u8 = 4;

/// The most cells one row may hold; bounds the decoder's allocations.
pub const CELLS_PER_ROW_MAX: usize = 1 << 16;

pub fn encode_body(out: &mut Vec<u8>, row: &Row, base_ts: i64) {
    let mut flags = 0u8;
    if let Some(l) = &row.liveness {
        flags |= ROW_LIVENESS;
        if l.ttl_s != 0 {
            flags |= ROW_LIVENESS_EXPIRES;
        }
    }
    if row.deletion.is_some() {
        flags |= ROW_DELETION;
    }
    out.push(flags);
    if let Some(l) = &row.liveness {
        put_zigzag(out, l.timestamp_us.wrapping_sub(base_ts));
        if l.ttl_s != 0 {
            put_varint(out, u64::from(l.ttl_s));
            out.extend_from_slice(&l.expires_at_s.to_le_bytes());
        }
    }
    if let Some(d) = &row.deletion {
        put_zigzag(out, d.timestamp_us.wrapping_sub(base_ts));
        out.extend_from_slice(&d.deleted_at_s.to_le_bytes());
    }
    put_varint(out, row.column_deletions.len() as u64);
    for (column, d) in &row.column_deletions {
        put_varint(out, u64::from(*column));
        put_zigzag(out, d.timestamp_us.wrapping_sub(base_ts));
        out.extend_from_slice(&d.deleted_at_s.to_le_bytes());
    }
    put_varint(out, row.cells.len() as u64);
    for c in &row.cells {
        put_varint(out, u64::from(c.column));
        let mut f = 0u8;
        match &c.value {
            CellValue::Tombstone { .. } => f |= CELL_TOMBSTONE,
            CellValue::Live { ttl_s, .. } if *ttl_s != 0 => f |= CELL_EXPIRES,
            CellValue::Live { .. } => {}
        }
        if !c.path.is_empty() {
            f |= CELL_PATH;
        }
        out.push(f);
        put_zigzag(out, c.timestamp_us.wrapping_sub(base_ts));
        match &c.value {
            CellValue::Tombstone { deleted_at_s } => out.extend_from_slice(&deleted_at_s.to_le_bytes()),
            CellValue::Live {
                ttl_s, expires_at_s, ..
            } if *ttl_s != 0 => {
                put_varint(out, u64::from(*ttl_s));
                out.extend_from_slice(&expires_at_s.to_le_bytes());
            }
            CellValue::Live { .. } => {}
        }
        if !c.path.is_empty() {
            put_varint(out, c.path.len() as u64);
            out.extend_from_slice(&c.path);
        }
        if let CellValue::Live { value, .. } = &c.value {
            put_varint(out, value.len() as u64);
            out.extend_from_slice(value);
        }
    }
}

/// How many bytes [`encode_body`] writes for `row` against `base_ts`, without writing them:
/// for decisions made before a row is encoded.
pub fn body_bytes(row: &Row, base_ts: i64) -> usize {
    let stamp = |ts: i64| zigzag_bytes(ts.wrapping_sub(base_ts));
    let mut n = 1;
    if let Some(l) = &row.liveness {
        n += stamp(l.timestamp_us);
        if l.ttl_s != 0 {
            n += varint_bytes(u64::from(l.ttl_s)) + 4;
        }
    }
    if let Some(d) = &row.deletion {
        n += stamp(d.timestamp_us) + 4;
    }
    n += varint_bytes(row.column_deletions.len() as u64);
    for (column, d) in &row.column_deletions {
        n += varint_bytes(u64::from(*column)) + stamp(d.timestamp_us) + 4;
    }
    n += varint_bytes(row.cells.len() as u64);
    for c in &row.cells {
        n += varint_bytes(u64::from(c.column)) + 1 + stamp(c.timestamp_us);
        n += match &c.value {
            CellValue::Tombstone { .. } => 4,
            CellValue::Live { ttl_s, .. } if *ttl_s != 0 => varint_bytes(u64::from(*ttl_s)) + 4,
            CellValue::Live { .. } => 0,
        };
        if !c.path.is_empty() {
            n += varint_bytes(c.path.len() as u64) + c.path.len();
        }
        if let CellValue::Live { value, .. } = &c.value {
            n += varint_bytes(value.len() as u64) + value.len();
        }
    }
    n
}

pub fn decode_body(body: &[u8], base_ts: i64) -> Result<Row, DecodeError> {
    let mut cur = Cursor::new(body);
    let flags = cur.u8()?;
    let mut row = Row::default();
    if flags & ROW_LIVENESS != 0 {
        let timestamp_us = base_ts.wrapping_add(cur.zigzag()?);
        let (ttl_s, expires_at_s) = if flags & ROW_LIVENESS_EXPIRES != 0 {
            (cur.varint_u32()?, cur.u32()?)
        } else {
            (0, 0)
        };
        row.liveness = Some(Liveness {
            timestamp_us,
            ttl_s,
            expires_at_s,
        });
    }
    if flags & ROW_DELETION != 0 {
        row.deletion = Some(Deletion {
            timestamp_us: base_ts.wrapping_add(cur.zigzag()?),
            deleted_at_s: cur.u32()?,
        });
    }
    let n = cur.count(CELLS_PER_ROW_MAX)?;
    for _ in 0..n {
        let column = cur.varint_u32()?;
        let timestamp_us = base_ts.wrapping_add(cur.zigzag()?);
        let deleted_at_s = cur.u32()?;
        row.column_deletions.push((
            column,
            Deletion {
                timestamp_us,
                deleted_at_s,
            },
        ));
    }
    let n = cur.count(CELLS_PER_ROW_MAX)?;
    row.cells.reserve(n);
    for _ in 0..n {
        let column = cur.varint_u32()?;
        let f = cur.u8()?;
        let timestamp_us = base_ts.wrapping_add(cur.zigzag()?);
        let tombstone_at = if f & CELL_TOMBSTONE != 0 {
            Some(cur.u32()?)
        } else {
            None
        };
        let (ttl_s, expires_at_s) = if f & CELL_EXPIRES != 0 {
            (cur.varint_u32()?, cur.u32()?)
        } else {
            (0, 0)
        };
        let path = if f & CELL_PATH != 0 {
            cur.bytes()?.to_vec()
        } else {
            Vec::new()
        };
        let value = match tombstone_at {
            Some(deleted_at_s) => CellValue::Tombstone { deleted_at_s },
            None => CellValue::Live {
                value: cur.bytes()?.to_vec(),
                ttl_s,
                expires_at_s,
            },
        };
        row.cells.push(Cell {
            column,
            path,
            timestamp_us,
            value,
        });
    }
    if !cur.is_empty() {
        return Err(DecodeError::TrailingBytes);
    }
    Ok(row)
}

// Body of a partition's tombstones (record flag bit 2).
//
//   u8 flags        bit 0 partition deletion
//   [partition]     zigzag ts delta, u32 deleted-at
//   varint n        range tombstones, each:
//                     u8 bounds (bits 0-1 start, bits 2-3 end: 0 open, 1 inclusive, 2 exclusive),
//                     start: varint len, bytes (unless open); end: the same,
//                     zigzag ts delta, u32 deleted-at
const TOMBSTONES_PARTITION: u8 = 1;
const BOUND_OPEN: u8 = 0;
const BOUND_INCLUSIVE: u8 = 1;
const BOUND_EXCLUSIVE: u8 = 2;

pub fn encode_tombstones_body(out: &mut Vec<u8>, t: &PartitionTombstones, base_ts: i64) {
    let put_deletion = |out: &mut Vec<u8>, d: &Deletion| {
        put_zigzag(out, d.timestamp_us.wrapping_sub(base_ts));
        out.extend_from_slice(&d.deleted_at_s.to_le_bytes());
    };
    out.push(if t.partition.is_some() {
        TOMBSTONES_PARTITION
    } else {
        0
    });
    if let Some(d) = &t.partition {
        put_deletion(out, d);
    }
    put_varint(out, t.ranges.len() as u64);
    let kind = |b: &std::ops::Bound<Vec<u8>>| match b {
        std::ops::Bound::Unbounded => BOUND_OPEN,
        std::ops::Bound::Included(_) => BOUND_INCLUSIVE,
        std::ops::Bound::Excluded(_) => BOUND_EXCLUSIVE,
    };
    for r in &t.ranges {
        out.push(kind(&r.start) | kind(&r.end) << 2);
        for b in [&r.start, &r.end] {
            if let std::ops::Bound::Included(v) | std::ops::Bound::Excluded(v) = b {
                put_varint(out, v.len() as u64);
                out.extend_from_slice(v);
            }
        }
        put_deletion(out, &r.deletion);
    }
}

pub fn decode_tombstones_body(body: &[u8], base_ts: i64) -> Result<PartitionTombstones, DecodeError> {
    let mut cur = Cursor::new(body);
    let flags = cur.u8()?;
    let deletion = |cur: &mut Cursor<'_>| -> Result<Deletion, DecodeError> {
        Ok(Deletion {
            timestamp_us: base_ts.wrapping_add(cur.zigzag()?),
            deleted_at_s: cur.u32()?,
        })
    };
    let mut t = PartitionTombstones::default();
    if flags & TOMBSTONES_PARTITION != 0 {
        t.partition = Some(deletion(&mut cur)?);
    }
    let n = cur.count(RANGE_TOMBSTONES_PER_PARTITION_MAX)?;
    t.ranges.reserve(n);
    for _ in 0..n {
        let kinds = cur.u8()?;
        let mut bound = |kind: u8| -> Result<std::ops::Bound<Vec<u8>>, DecodeError> {
            match kind {
                BOUND_OPEN => Ok(std::ops::Bound::Unbounded),
                BOUND_INCLUSIVE => Ok(std::ops::Bound::Included(cur.bytes()?.to_vec())),
                BOUND_EXCLUSIVE => Ok(std::ops::Bound::Excluded(cur.bytes()?.to_vec())),
                _ => Err(DecodeError::BadFlags(kinds)),
            }
        };
        let start = bound(kinds & 3)?;
        let end = bound(kinds >> 2 & 3)?;
        let d = deletion(&mut cur)?;
        t.ranges.push(RangeTombstone {
            start,
            end,
            deletion: d,
        });
    }
    if !cur.is_empty() {
        return Err(DecodeError::TrailingBytes);
    }
    Ok(t)
}

fn varint_bytes(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn zigzag_bytes(v: i64) -> usize {
    varint_bytes(((v << 1) ^ (v >> 63)) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_row() -> Row {
        let mut row = Row {
            liveness: Some(Liveness {
                timestamp_us: 1_000,
                ttl_s: 60,
                expires_at_s: 5_000,
            }),
            deletion: Some(Deletion {
                timestamp_us: 10,
                deleted_at_s: 7,
            }),
            column_deletions: vec![(
                3,
                Deletion {
                    timestamp_us: 20,
                    deleted_at_s: 8,
                },
            )],
            cells: vec![
                Cell::live(1, 1_000, vec![7; 100]),
                Cell::tombstone(2, 900, 77),
                Cell {
                    column: 3,
                    path: b"key".to_vec(),
                    timestamp_us: 1_200,
                    value: CellValue::Live {
                        value: b"v".to_vec(),
                        ttl_s: 9,
                        expires_at_s: 99,
                    },
                },
            ],
        };
        row.normalize();
        row
    }

    /// The count matches what is written, for every kind of cell and any base timestamp.
    #[test]
    fn body_bytes_counts_what_encode_body_writes() {
        let mut rows = vec![sample_row(), Row::default()];
        rows.push(Row {
            cells: vec![
                Cell::live(9, i64::MAX, vec![1; 300]),
                Cell::live(1 << 20, i64::MIN, Vec::new()),
                Cell::live(127, 0, vec![2; 127]),
                Cell::live(128, 1 << 40, vec![3; 128]),
            ],
            ..Row::default()
        });
        for row in &rows {
            for base_ts in [0, -1, 63, -64, 64, i64::MIN, i64::MAX, row.max_timestamp_us()] {
                let mut body = Vec::new();
                encode_body(&mut body, row, base_ts);
                assert_eq!(body.len(), body_bytes(row, base_ts), "{row:?} at {base_ts}");
            }
        }
    }

    #[test]
    fn record_round_trips() {
        let row = sample_row();
        let mut body = Vec::new();
        encode_body(&mut body, &row, row.max_timestamp_us());
        let meta = RecordMeta {
            table: 9,
            token: -5,
            digest: 77,
            write_timestamp_us: row.max_timestamp_us(),
            expiry_s: 0,
            tombstone: false,
            has_deletions: false,
            range_tombstones: false,
            chunked: false,
            delta: false,
        };
        let mut out = Vec::new();
        let len = encode_record(&mut out, 3, &meta, b"pk", b"ck", &body);
        assert_eq!(len % RECORD_ALIGN_BYTES, 0);
        let view = decode_record(&out, 3).expect("valid record");
        assert_eq!(view.meta, meta);
        assert_eq!(view.partition_key, b"pk");
        assert_eq!(view.clustering_key, b"ck");
        assert_eq!(
            decode_body(view.body, meta.write_timestamp_us).expect("valid body"),
            row
        );
    }

    #[test]
    fn a_record_from_another_use_of_the_block_is_rejected() {
        let mut out = Vec::new();
        let meta = RecordMeta {
            table: 1,
            token: 1,
            digest: 1,
            write_timestamp_us: 1,
            expiry_s: 0,
            tombstone: false,
            has_deletions: false,
            range_tombstones: false,
            chunked: false,
            delta: false,
        };
        encode_record(&mut out, 3, &meta, b"k", b"", &[0]);
        assert!(matches!(
            decode_record(&out, 4),
            Err(DecodeError::BadChecksum { .. })
        ));
        reseal_record(&mut out, 4);
        assert!(decode_record(&out, 4).is_ok());
    }

    #[test]
    fn every_truncation_and_bit_flip_is_caught() {
        let row = sample_row();
        let mut body = Vec::new();
        encode_body(&mut body, &row, 1_000);
        let meta = RecordMeta {
            table: 1,
            token: 2,
            digest: 3,
            write_timestamp_us: 1_000,
            expiry_s: 0,
            tombstone: false,
            has_deletions: false,
            range_tombstones: false,
            chunked: false,
            delta: false,
        };
        let mut out = Vec::new();
        let len = encode_record(&mut out, 1, &meta, b"pk", b"", &body);
        for cut in 0..len {
            assert!(decode_record(&out[..cut], 1).is_err(), "truncated at {cut}");
        }
        for i in 0..len {
            let mut damaged = out.clone();
            damaged[i] ^= 0x10;
            assert!(decode_record(&damaged, 1).is_err(), "flip at byte {i}");
        }
    }

    #[test]
    fn partition_tombstones_round_trip_and_reject_damage() {
        use std::ops::Bound;
        let mut t = PartitionTombstones::of(
            Bound::Unbounded,
            Bound::Unbounded,
            Deletion {
                timestamp_us: 500,
                deleted_at_s: 9,
            },
        );
        t.merge(PartitionTombstones::of(
            Bound::Included(vec![1, 2]),
            Bound::Excluded(vec![3]),
            Deletion {
                timestamp_us: 900,
                deleted_at_s: 10,
            },
        ));
        t.merge(PartitionTombstones::of(
            Bound::Unbounded,
            Bound::Included(vec![0]),
            Deletion {
                timestamp_us: 1_000,
                deleted_at_s: 11,
            },
        ));
        let mut body = Vec::new();
        encode_tombstones_body(&mut body, &t, 1_000);
        assert_eq!(decode_tombstones_body(&body, 1_000).expect("valid"), t);
        for cut in 0..body.len() {
            assert!(
                decode_tombstones_body(&body[..cut], 1_000).is_err(),
                "cut at {cut}"
            );
        }
        let mut bad = body.clone();
        bad.push(0);
        assert_eq!(
            decode_tombstones_body(&bad, 1_000),
            Err(DecodeError::TrailingBytes)
        );
    }
}
