//! The row and tombstones layout of frame versions 1 to 3, frozen: what a node of an older build
//! sends and expects, and what a read digest hashes.
//!
//! Versions 1 to 3 carried a row as the storage engine's record body of the day. That layout is
//! kept here, in the cluster crate, so that the engine's body can change without changing what
//! travels: a peer still on version 3 keeps talking to a newer node during a rolling upgrade,
//! and two replicas of different builds still compute the same digest for the same rows
//! ([`super::digest()`]). New peers use [`super::row`]. `docs/internode-protocol.md` draws it.
//!
//! ```text
//! row              base timestamp µs i64 | body length u32 | body
//!   body           flags u8 (bit 0 liveness, bit 1 liveness expires, bit 2 row deletion)
//!                  | [liveness: timestamp Δ zigzag | [ttl s varint | expires at s u32 LE]]
//!                  | [row deletion: timestamp Δ zigzag | deleted at s u32 LE]
//!                  | count varint | (column varint | timestamp Δ zigzag | deleted at s u32 LE) * count
//!                  | count varint | cell * count
//!   cell           column varint | flags u8 (bit 0 tombstone, bit 1 expires, bit 2 path)
//!                  | timestamp Δ zigzag | [deleted at s u32 LE] | [ttl s varint | expires at s u32 LE]
//!                  | [path: length varint | bytes] | [value: length varint | bytes, unless a tombstone]
//! tombstones       base timestamp µs i64 | body length u32 | body
//!   body           flags u8 (bit 0 partition deletion) | [timestamp Δ zigzag | deleted at s u32 LE]
//!                  | count varint | range * count
//!   range          bounds u8 (bits 0-1 start, bits 2-3 end: 0 open, 1 included, 2 excluded)
//!                  | [start: length varint | bytes] | [end: length varint | bytes]
//!                  | timestamp Δ zigzag | deleted at s u32 LE
//! ```
//!
//! The base is the newest timestamp in the row (or in the tombstones); `body length` and the base
//! are big-endian like the rest of the frame, the fixed fields inside the body little-endian like
//! the engine's record. Unknown flag bits are ignored, as the engine's decoder ignored them.

use std::ops::Bound;

use hayate_storage::{
    Cell, CellValue, Deletion, Liveness, PartitionTombstones, RangeTombstone, Row,
    RANGE_TOMBSTONES_PER_PARTITION_MAX,
};

use super::row::CELLS_PER_ROW_MAX;
use super::wire::{put_i64, put_u32, put_varint, put_zigzag, set_u32, Reader};
use super::{DecodeError, FRAME_BYTES_MAX};

const ROW_LIVENESS: u8 = 1;
const ROW_LIVENESS_EXPIRES: u8 = 2;
const ROW_DELETION: u8 = 4;
const CELL_TOMBSTONE: u8 = 1;
const CELL_EXPIRES: u8 = 2;
const CELL_PATH: u8 = 4;
const TOMBSTONES_PARTITION: u8 = 1;
const BOUND_OPEN: u8 = 0;
const BOUND_INCLUDED: u8 = 1;
const BOUND_EXCLUDED: u8 = 2;

/// Appends `row`: its newest timestamp, then the length and the body.
pub fn put_row(out: &mut Vec<u8>, row: &Row) {
    let base_ts = row.max_timestamp_us();
    put_i64(out, base_ts);
    let len_at = out.len();
    put_u32(out, 0); // body length, filled in below
    put_row_body(out, row, base_ts);
    set_body_length(out, len_at);
}

/// Appends a partition's tombstones (without the partition they belong to).
pub fn put_tombstones(out: &mut Vec<u8>, t: &PartitionTombstones) {
    let base_ts = t.max_timestamp_us();
    put_i64(out, base_ts);
    let len_at = out.len();
    put_u32(out, 0); // body length, filled in below
    put_tombstones_body(out, t, base_ts);
    set_body_length(out, len_at);
}

fn set_body_length(out: &mut [u8], len_at: usize) {
    let body_bytes = out.len() - len_at - 4;
    // A body larger than u32 could not fit in a frame either; the frame check refuses it.
    set_u32(out, len_at, u32::try_from(body_bytes).unwrap_or(u32::MAX));
}

fn put_le_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_row_body(out: &mut Vec<u8>, row: &Row, base_ts: i64) {
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
            put_le_u32(out, l.expires_at_s);
        }
    }
    if let Some(d) = &row.deletion {
        put_zigzag(out, d.timestamp_us.wrapping_sub(base_ts));
        put_le_u32(out, d.deleted_at_s);
    }
    put_varint(out, row.column_deletions.len() as u64);
    for (column, d) in &row.column_deletions {
        put_varint(out, u64::from(*column));
        put_zigzag(out, d.timestamp_us.wrapping_sub(base_ts));
        put_le_u32(out, d.deleted_at_s);
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
            CellValue::Tombstone { deleted_at_s } => put_le_u32(out, *deleted_at_s),
            CellValue::Live {
                ttl_s, expires_at_s, ..
            } if *ttl_s != 0 => {
                put_varint(out, u64::from(*ttl_s));
                put_le_u32(out, *expires_at_s);
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

fn put_tombstones_body(out: &mut Vec<u8>, t: &PartitionTombstones, base_ts: i64) {
    let put_deletion = |out: &mut Vec<u8>, d: &Deletion| {
        put_zigzag(out, d.timestamp_us.wrapping_sub(base_ts));
        put_le_u32(out, d.deleted_at_s);
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
    let kind = |b: &Bound<Vec<u8>>| match b {
        Bound::Unbounded => BOUND_OPEN,
        Bound::Included(_) => BOUND_INCLUDED,
        Bound::Excluded(_) => BOUND_EXCLUDED,
    };
    for r in &t.ranges {
        out.push(kind(&r.start) | kind(&r.end) << 2);
        for b in [&r.start, &r.end] {
            if let Bound::Included(v) | Bound::Excluded(v) = b {
                put_varint(out, v.len() as u64);
                out.extend_from_slice(v);
            }
        }
        put_deletion(out, &r.deletion);
    }
}

/// Reads a row: base, length, then a body that must be read to its last byte.
pub fn get_row(r: &mut Reader<'_>) -> Result<Row, DecodeError> {
    let base_ts = r.i64("row base timestamp")?;
    let mut body = Reader::new(r.bytes_u32("row body", FRAME_BYTES_MAX)?);
    let row = get_row_body(&mut body, base_ts)?;
    end_of_body(&body, "row body")?;
    Ok(row)
}

pub fn get_tombstones(r: &mut Reader<'_>) -> Result<PartitionTombstones, DecodeError> {
    let base_ts = r.i64("tombstones base timestamp")?;
    let mut body = Reader::new(r.bytes_u32("tombstones body", FRAME_BYTES_MAX)?);
    let t = get_tombstones_body(&mut body, base_ts)?;
    end_of_body(&body, "tombstones body")?;
    Ok(t)
}

fn end_of_body(body: &Reader<'_>, what: &'static str) -> Result<(), DecodeError> {
    match body.remaining() {
        0 => Ok(()),
        bytes => Err(DecodeError::TrailingBytes { what, bytes }),
    }
}

fn get_row_body(b: &mut Reader<'_>, base_ts: i64) -> Result<Row, DecodeError> {
    let stamp = |b: &mut Reader<'_>, what| Ok::<_, DecodeError>(base_ts.wrapping_add(b.zigzag(what)?));
    let flags = b.u8("row flags")?;
    let mut row = Row::default();
    if flags & ROW_LIVENESS != 0 {
        let timestamp_us = stamp(b, "liveness timestamp")?;
        let (ttl_s, expires_at_s) = if flags & ROW_LIVENESS_EXPIRES != 0 {
            (b.varint_u32("liveness TTL")?, b.u32_le("liveness expiry")?)
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
            timestamp_us: stamp(b, "row deletion timestamp")?,
            deleted_at_s: b.u32_le("row deletion time")?,
        });
    }
    let n = b.count_varint("column deletions", CELLS_PER_ROW_MAX, 1)?;
    for _ in 0..n {
        let column = b.varint_u32("column deletion column")?;
        let deletion = Deletion {
            timestamp_us: stamp(b, "column deletion timestamp")?,
            deleted_at_s: b.u32_le("column deletion time")?,
        };
        row.column_deletions.push((column, deletion));
    }
    let n = b.count_varint("cells", CELLS_PER_ROW_MAX, 1)?;
    row.cells.reserve(n);
    for _ in 0..n {
        let column = b.varint_u32("cell column")?;
        let f = b.u8("cell flags")?;
        let timestamp_us = stamp(b, "cell timestamp")?;
        let tombstone_at = if f & CELL_TOMBSTONE != 0 {
            Some(b.u32_le("cell deletion time")?)
        } else {
            None
        };
        let (ttl_s, expires_at_s) = if f & CELL_EXPIRES != 0 {
            (b.varint_u32("cell TTL")?, b.u32_le("cell expiry")?)
        } else {
            (0, 0)
        };
        let path = if f & CELL_PATH != 0 {
            b.bytes_varint("cell path", FRAME_BYTES_MAX)?.to_vec()
        } else {
            Vec::new()
        };
        let value = match tombstone_at {
            Some(deleted_at_s) => CellValue::Tombstone { deleted_at_s },
            None => CellValue::Live {
                value: b.bytes_varint("cell value", FRAME_BYTES_MAX)?.to_vec(),
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
    Ok(row)
}

fn get_tombstones_body(b: &mut Reader<'_>, base_ts: i64) -> Result<PartitionTombstones, DecodeError> {
    let deletion = |b: &mut Reader<'_>| -> Result<Deletion, DecodeError> {
        Ok(Deletion {
            timestamp_us: base_ts.wrapping_add(b.zigzag("tombstone timestamp")?),
            deleted_at_s: b.u32_le("tombstone deletion time")?,
        })
    };
    let flags = b.u8("tombstones flags")?;
    let mut t = PartitionTombstones::default();
    if flags & TOMBSTONES_PARTITION != 0 {
        t.partition = Some(deletion(b)?);
    }
    let n = b.count_varint("range tombstones", RANGE_TOMBSTONES_PER_PARTITION_MAX, 1)?;
    t.ranges.reserve(n);
    for _ in 0..n {
        let kinds = b.u8("range tombstone bounds")?;
        let mut bound = |kind: u8| -> Result<Bound<Vec<u8>>, DecodeError> {
            let what = "range tombstone bound";
            match kind {
                BOUND_OPEN => Ok(Bound::Unbounded),
                BOUND_INCLUDED => Ok(Bound::Included(b.bytes_varint(what, FRAME_BYTES_MAX)?.to_vec())),
                BOUND_EXCLUDED => Ok(Bound::Excluded(b.bytes_varint(what, FRAME_BYTES_MAX)?.to_vec())),
                _ => Err(DecodeError::BadTag {
                    what: "range tombstone bounds",
                    tag: kinds,
                }),
            }
        };
        let start = bound(kinds & 3)?;
        let end = bound(kinds >> 2 & 3)?;
        let deletion = deletion(b)?;
        t.ranges.push(RangeTombstone { start, end, deletion });
    }
    Ok(t)
}
