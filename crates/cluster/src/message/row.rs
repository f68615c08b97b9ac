//! How a row and a partition's tombstones travel between nodes, from frame version 4 on, and the
//! keys, bounds and deletions the payloads build them from.
//!
//! The format is the internode protocol's own: it changes with the frame version and never with
//! the storage engine's record body (`docs/internode-protocol.md`, section 5, draws it; section 7
//! says how versions change). Versions 1 to 3 carried the body of that day; `row_v1.rs`
//! keeps their layout frozen for the peers and stored hints that still speak them.
//!
//! ```text
//! row              base timestamp µs i64 | flags u8 | [liveness] | [row deletion]
//!                  | [column deletions] | cell count varint | cell * count
//!   flags          bit 0 liveness, bit 1 liveness expires, bit 2 row deletion,
//!                  bit 3 column deletions; the other bits are 0
//!   liveness       timestamp Δ zigzag | [ttl s varint | expires at s u32]
//!   row deletion   timestamp Δ zigzag | deleted at s u32
//!   column deletions  count varint | (column varint | timestamp Δ zigzag | deleted at s u32) * count
//!   cell           column varint | kind u8 | timestamp Δ zigzag | by kind:
//!     kind         bits 0-1: 0 live, 1 expiring, 2 tombstone; bit 2: has path; the other bits 0
//!                    live:      [path] | value
//!                    expiring:  ttl s varint | expires at s u32 | [path] | value
//!                    tombstone: deleted at s u32 | [path]
//!   path, value    length varint | bytes
//!
//! tombstones       has partition deletion u8 | [deletion] | count u32 | range * count
//!   range          start bound | end bound | deletion
//! ```
//!
//! Every timestamp Δ is the timestamp minus the row's base, the newest timestamp in the row, so
//! the many timestamps of a row written at once take a byte each. An expiry time travels only
//! with a TTL (a cell with TTL 0 never expires, so its expiry time means nothing). A row is
//! self-delimiting: no length before it.

use std::ops::Bound;

use hayate_storage::{
    Cell, CellValue, Deletion, Liveness, PartitionTombstones, RangeTombstone, Row,
    RANGE_TOMBSTONES_PER_PARTITION_MAX,
};

use super::wire::{put_bool, put_i64, put_u16, put_u32, put_u8, put_varint, put_zigzag, Reader};
use super::{DecodeError, EncodeError, FRAME_BYTES_MAX, KEY_BYTES_MAX};

/// The most cells, and the most column deletions, one row carries: the storage engine's own
/// bound on a row, so every row a replica holds can travel.
pub const CELLS_PER_ROW_MAX: usize = 1 << 16;

const ROW_LIVENESS: u8 = 1;
const ROW_LIVENESS_EXPIRES: u8 = 2;
const ROW_DELETION: u8 = 4;
const ROW_COLUMN_DELETIONS: u8 = 8;
const ROW_FLAGS: u8 = ROW_LIVENESS | ROW_LIVENESS_EXPIRES | ROW_DELETION | ROW_COLUMN_DELETIONS;

const CELL_LIVE: u8 = 0;
const CELL_EXPIRING: u8 = 1;
const CELL_TOMBSTONE: u8 = 2;
const CELL_KIND_MASK: u8 = 3;
const CELL_PATH: u8 = 4;

/// The fewest bytes a cell takes (column, kind, timestamp Δ): bounds a cell count by the bytes
/// left before anything is reserved for it.
const CELL_BYTES_MIN: usize = 3;
/// The fewest bytes a column deletion takes (column, timestamp Δ, deleted at).
const COLUMN_DELETION_BYTES_MIN: usize = 6;
/// The fewest bytes a range tombstone takes (two open bounds and a deletion).
const RANGE_BYTES_MIN: usize = 14;

const BOUND_UNBOUNDED: u8 = 0;
const BOUND_INCLUDED: u8 = 1;
const BOUND_EXCLUDED: u8 = 2;

/// Appends `row`. Refuses a row with more cells or column deletions than
/// [`CELLS_PER_ROW_MAX`], which no replica could decode.
pub fn put_row(out: &mut Vec<u8>, row: &Row) -> Result<(), EncodeError> {
    check_count("cells in a row", row.cells.len())?;
    check_count("column deletions in a row", row.column_deletions.len())?;
    let base_ts = row.max_timestamp_us();
    put_i64(out, base_ts);
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
    if !row.column_deletions.is_empty() {
        flags |= ROW_COLUMN_DELETIONS;
    }
    put_u8(out, flags);
    if let Some(l) = &row.liveness {
        put_zigzag(out, l.timestamp_us.wrapping_sub(base_ts));
        if l.ttl_s != 0 {
            put_varint(out, u64::from(l.ttl_s));
            put_u32(out, l.expires_at_s);
        }
    }
    if let Some(d) = &row.deletion {
        put_zigzag(out, d.timestamp_us.wrapping_sub(base_ts));
        put_u32(out, d.deleted_at_s);
    }
    if !row.column_deletions.is_empty() {
        put_varint(out, row.column_deletions.len() as u64);
        for (column, d) in &row.column_deletions {
            put_varint(out, u64::from(*column));
            put_zigzag(out, d.timestamp_us.wrapping_sub(base_ts));
            put_u32(out, d.deleted_at_s);
        }
    }
    put_varint(out, row.cells.len() as u64);
    for c in &row.cells {
        put_cell(out, c, base_ts);
    }
    Ok(())
}

fn put_cell(out: &mut Vec<u8>, c: &Cell, base_ts: i64) {
    put_varint(out, u64::from(c.column));
    let kind = match &c.value {
        CellValue::Live { ttl_s: 0, .. } => CELL_LIVE,
        CellValue::Live { .. } => CELL_EXPIRING,
        CellValue::Tombstone { .. } => CELL_TOMBSTONE,
    };
    put_u8(out, kind | if c.path.is_empty() { 0 } else { CELL_PATH });
    put_zigzag(out, c.timestamp_us.wrapping_sub(base_ts));
    match &c.value {
        CellValue::Live {
            ttl_s, expires_at_s, ..
        } if *ttl_s != 0 => {
            put_varint(out, u64::from(*ttl_s));
            put_u32(out, *expires_at_s);
        }
        CellValue::Live { .. } => {}
        CellValue::Tombstone { deleted_at_s } => put_u32(out, *deleted_at_s),
    }
    if !c.path.is_empty() {
        put_bytes(out, &c.path);
    }
    if let CellValue::Live { value, .. } = &c.value {
        put_bytes(out, value);
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn check_count(what: &'static str, count: usize) -> Result<(), EncodeError> {
    if count > CELLS_PER_ROW_MAX {
        return Err(EncodeError::TooMany {
            what,
            count,
            max: CELLS_PER_ROW_MAX,
        });
    }
    Ok(())
}

/// About how many bytes `row` takes on the wire, in either layout, without encoding it: a little
/// more than it does, for a send queue's byte bound.
pub fn row_size_hint_bytes(row: &Row) -> usize {
    32 + 16 * row.column_deletions.len()
        + row
            .cells
            .iter()
            .map(|c| {
                16 + c.path.len()
                    + match &c.value {
                        CellValue::Live { value, .. } => value.len(),
                        CellValue::Tombstone { .. } => 0,
                    }
            })
            .sum::<usize>()
}

pub fn get_row(r: &mut Reader<'_>) -> Result<Row, DecodeError> {
    let base_ts = r.i64("row base timestamp")?;
    let flags = r.u8("row flags")?;
    if flags & !ROW_FLAGS != 0 || flags & (ROW_LIVENESS | ROW_LIVENESS_EXPIRES) == ROW_LIVENESS_EXPIRES {
        return Err(DecodeError::BadTag {
            what: "row flags",
            tag: flags,
        });
    }
    let stamp = |r: &mut Reader<'_>, what| Ok::<_, DecodeError>(base_ts.wrapping_add(r.zigzag(what)?));
    let mut row = Row::default();
    if flags & ROW_LIVENESS != 0 {
        let timestamp_us = stamp(r, "liveness timestamp")?;
        let (ttl_s, expires_at_s) = if flags & ROW_LIVENESS_EXPIRES != 0 {
            (get_ttl(r, "liveness TTL")?, r.u32("liveness expiry")?)
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
            timestamp_us: stamp(r, "row deletion timestamp")?,
            deleted_at_s: r.u32("row deletion time")?,
        });
    }
    if flags & ROW_COLUMN_DELETIONS != 0 {
        let what = "column deletions";
        let n = r.count_varint(what, CELLS_PER_ROW_MAX, COLUMN_DELETION_BYTES_MIN)?;
        if n == 0 {
            return Err(DecodeError::BadTag {
                what: "column deletion count (its flag says some follow)",
                tag: 0,
            });
        }
        row.column_deletions.reserve(n);
        for _ in 0..n {
            let column = r.varint_u32("column deletion column")?;
            let deletion = Deletion {
                timestamp_us: stamp(r, "column deletion timestamp")?,
                deleted_at_s: r.u32("column deletion time")?,
            };
            row.column_deletions.push((column, deletion));
        }
    }
    let n = r.count_varint("cells", CELLS_PER_ROW_MAX, CELL_BYTES_MIN)?;
    row.cells.reserve(n);
    for _ in 0..n {
        row.cells.push(get_cell(r, base_ts)?);
    }
    Ok(row)
}

fn get_cell(r: &mut Reader<'_>, base_ts: i64) -> Result<Cell, DecodeError> {
    let column = r.varint_u32("cell column")?;
    let tag = r.u8("cell kind")?;
    if tag & !(CELL_KIND_MASK | CELL_PATH) != 0 {
        return Err(DecodeError::BadTag {
            what: "cell kind",
            tag,
        });
    }
    let timestamp_us = base_ts.wrapping_add(r.zigzag("cell timestamp")?);
    let (ttl_s, expires_at_s) = match tag & CELL_KIND_MASK {
        CELL_EXPIRING => (get_ttl(r, "cell TTL")?, r.u32("cell expiry")?),
        _ => (0, 0),
    };
    let deleted_at_s = match tag & CELL_KIND_MASK {
        CELL_TOMBSTONE => Some(r.u32("cell deletion time")?),
        CELL_LIVE | CELL_EXPIRING => None,
        _ => {
            return Err(DecodeError::BadTag {
                what: "cell kind",
                tag,
            })
        }
    };
    let path = if tag & CELL_PATH != 0 {
        let path = r.bytes_varint("cell path", FRAME_BYTES_MAX)?;
        if path.is_empty() {
            return Err(DecodeError::BadTag {
                what: "cell path length (its flag says one follows)",
                tag: 0,
            });
        }
        path.to_vec()
    } else {
        Vec::new()
    };
    let value = match deleted_at_s {
        Some(deleted_at_s) => CellValue::Tombstone { deleted_at_s },
        None => CellValue::Live {
            value: r.bytes_varint("cell value", FRAME_BYTES_MAX)?.to_vec(),
            ttl_s,
            expires_at_s,
        },
    };
    Ok(Cell {
        column,
        path,
        timestamp_us,
        value,
    })
}

/// A TTL that travels is never 0: a cell without one travels as live, not expiring.
fn get_ttl(r: &mut Reader<'_>, what: &'static str) -> Result<u32, DecodeError> {
    match r.varint_u32(what)? {
        0 => Err(DecodeError::BadTag { what, tag: 0 }),
        ttl_s => Ok(ttl_s),
    }
}

/// Appends a partition's tombstones (without the partition they belong to).
pub fn put_tombstones(out: &mut Vec<u8>, t: &PartitionTombstones) -> Result<(), EncodeError> {
    if t.ranges.len() > RANGE_TOMBSTONES_PER_PARTITION_MAX {
        return Err(EncodeError::TooMany {
            what: "range tombstones in a partition",
            count: t.ranges.len(),
            max: RANGE_TOMBSTONES_PER_PARTITION_MAX,
        });
    }
    put_bool(out, t.partition.is_some());
    if let Some(d) = &t.partition {
        put_deletion(out, d);
    }
    put_u32(out, t.ranges.len() as u32);
    for range in &t.ranges {
        put_bound(out, &range.start)?;
        put_bound(out, &range.end)?;
        put_deletion(out, &range.deletion);
    }
    Ok(())
}

pub fn get_tombstones(r: &mut Reader<'_>) -> Result<PartitionTombstones, DecodeError> {
    let partition = match r.bool("partition deletion flag")? {
        true => Some(get_deletion(r)?),
        false => None,
    };
    let n = r.count_u32("range tombstones", RANGE_TOMBSTONES_PER_PARTITION_MAX)?;
    let mut ranges = Vec::with_capacity(n.min(r.remaining() / RANGE_BYTES_MIN));
    for _ in 0..n {
        ranges.push(RangeTombstone {
            start: get_bound(r)?,
            end: get_bound(r)?,
            deletion: get_deletion(r)?,
        });
    }
    Ok(PartitionTombstones { partition, ranges })
}

/// A deletion as a mutation carries it: `timestamp µs i64 | deleted at s u32`.
pub fn put_deletion(out: &mut Vec<u8>, d: &Deletion) {
    put_i64(out, d.timestamp_us);
    put_u32(out, d.deleted_at_s);
}

pub fn get_deletion(r: &mut Reader<'_>) -> Result<Deletion, DecodeError> {
    Ok(Deletion {
        timestamp_us: r.i64("deletion timestamp")?,
        deleted_at_s: r.u32("deletion time")?,
    })
}

/// A key: `length u16 | bytes`, at most [`KEY_BYTES_MAX`].
pub fn put_key(out: &mut Vec<u8>, what: &'static str, key: &[u8]) -> Result<(), EncodeError> {
    if key.len() > KEY_BYTES_MAX {
        return Err(EncodeError::TooLong {
            what,
            len_bytes: key.len(),
            max_bytes: KEY_BYTES_MAX,
        });
    }
    put_u16(out, key.len() as u16);
    out.extend_from_slice(key);
    Ok(())
}

pub fn get_key(r: &mut Reader<'_>, what: &'static str) -> Result<Vec<u8>, DecodeError> {
    Ok(r.bytes_u16(what, KEY_BYTES_MAX)?.to_vec())
}

/// A clustering bound: `tag u8` (0 unbounded, 1 included, 2 excluded), then the key unless
/// unbounded.
pub fn put_bound(out: &mut Vec<u8>, b: &Bound<Vec<u8>>) -> Result<(), EncodeError> {
    match b {
        Bound::Unbounded => put_u8(out, BOUND_UNBOUNDED),
        Bound::Included(k) => {
            put_u8(out, BOUND_INCLUDED);
            put_key(out, "clustering bound", k)?;
        }
        Bound::Excluded(k) => {
            put_u8(out, BOUND_EXCLUDED);
            put_key(out, "clustering bound", k)?;
        }
    }
    Ok(())
}

pub fn get_bound(r: &mut Reader<'_>) -> Result<Bound<Vec<u8>>, DecodeError> {
    Ok(match r.u8("bound tag")? {
        BOUND_UNBOUNDED => Bound::Unbounded,
        BOUND_INCLUDED => Bound::Included(get_key(r, "clustering bound")?),
        BOUND_EXCLUDED => Bound::Excluded(get_key(r, "clustering bound")?),
        tag => {
            return Err(DecodeError::BadTag {
                what: "bound tag",
                tag,
            })
        }
    })
}

#[cfg(test)]
mod tests;
