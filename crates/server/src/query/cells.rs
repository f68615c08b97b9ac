//! A stored row as CQL column values, and the cell layout of collections.
//!
//! A frozen value or a scalar is one cell with an empty path. A non-frozen collection is one
//! cell per element: a list element's path is a 16-byte time-ordered id (so appends sort last
//! and prepends first), a set element's path is the element's order key with an empty value,
//! and a map entry's path is the key's order key. A non-frozen user-defined type is one cell
//! per non-null field, whose path is the field's index ([`field_path`]). A counter is one cell
//! per shard, whose path is the shard's leader ([`hayate_cluster::counter`]). Cells iterate in path order, which is
//! therefore the collection's order, as Cassandra returns it.

use std::borrow::Cow;

use hayate_cql::value::{decode_order_key, encode_list, encode_map, encode_set, encode_tuple, DataType};
use hayate_storage::row::{Cell, CellValue, Row};

use crate::schema::{ColumnKind, Table};

/// One row as CQL values, by column index of the table. A single-cell column's value is
/// borrowed from the stored row it was read from.
pub struct RowValues<'r> {
    pub values: Vec<Option<Cow<'r, [u8]>>>,
    /// Write time (µs) of each non-key, single-cell column that has a live cell.
    pub writetimes: Vec<Option<i64>>,
    /// Seconds left to live of each such column that expires.
    pub ttls: Vec<Option<i32>>,
}

/// Turns a stored row (already visible at `now_s`) into column values. `statics` is the
/// partition's static row (visible too), whose cells fill the static columns: every row of a
/// partition shows the same static values.
pub fn row_values<'r>(
    table: &Table,
    partition: &[u8],
    clustering: &[u8],
    row: &'r Row,
    statics: Option<&'r Row>,
    now_s: u32,
) -> RowValues<'r> {
    let n = table.columns.len();
    let mut out = RowValues {
        values: vec![None; n],
        writetimes: vec![None; n],
        ttls: vec![None; n],
    };
    for (i, v) in table
        .partition_key
        .iter()
        .zip(super::keys::split_partition_key(table, partition))
    {
        out.values[*i] = Some(Cow::Owned(v));
    }
    // The static row alone (a partition with no live rows) shows null clustering columns.
    if !table.clustering.is_empty() && !is_static_key(table, clustering) {
        for (i, v) in table
            .clustering
            .iter()
            .zip(super::keys::split_clustering_key(table, clustering))
        {
            out.values[*i] = Some(Cow::Owned(v));
        }
    }
    if !is_static_key(table, clustering) {
        fill_cells(table, row, ColumnKind::Regular, now_s, &mut out);
    }
    if let Some(statics) = statics {
        fill_cells(table, statics, ColumnKind::Static, now_s, &mut out);
    }
    out
}

/// True if `clustering` is the key of a partition's static row. A static row is stored as the
/// row with the empty clustering key: every clustering column's order key is at least one byte
/// long (see `hayate_cql::value::order`), so in a table with clustering columns no regular row
/// has that key, and it sorts before every row of its partition.
pub fn is_static_key(table: &Table, clustering: &[u8]) -> bool {
    clustering.is_empty() && !table.clustering.is_empty()
}

/// The values of the columns of `kind` that `row`'s cells hold.
fn fill_cells<'r>(table: &Table, row: &'r Row, kind: ColumnKind, now_s: u32, out: &mut RowValues<'r>) {
    let mut start = 0;
    while start < row.cells.len() {
        let id = row.cells[start].column;
        let end = start + row.cells[start..].iter().take_while(|c| c.column == id).count();
        let cells = &row.cells[start..end];
        start = end;
        let Some(i) = table.columns.iter().position(|c| c.id == id && c.kind == kind) else {
            continue; // a dropped column's leftovers
        };
        let ty = &table.columns[i].ty;
        if ty.is_counter() {
            // A counter is one cell per replica that led an increment: its value is their sum,
            // its write time the latest shard's.
            let shards = || cells.iter().filter(|c| c.value_at(now_s).is_some());
            if let Some(latest) = shards().map(|c| c.timestamp_us).max() {
                let sum = shards()
                    .filter_map(hayate_cluster::counter::shard_count)
                    .fold(0i64, i64::wrapping_add);
                out.values[i] = Some(Cow::Owned(sum.to_be_bytes().to_vec()));
                out.writetimes[i] = Some(latest);
            }
        } else if ty.is_multi_cell() {
            out.values[i] = collection_value(ty, cells, now_s).map(Cow::Owned);
        } else if let Some(cell) = cells.iter().find(|c| c.path.is_empty()) {
            if let Some(v) = cell.value_at(now_s) {
                out.values[i] = Some(Cow::Borrowed(v));
                out.writetimes[i] = Some(cell.timestamp_us);
                if let CellValue::Live {
                    ttl_s, expires_at_s, ..
                } = &cell.value
                {
                    if *ttl_s > 0 {
                        out.ttls[i] = Some(expires_at_s.saturating_sub(now_s) as i32);
                    }
                }
            }
        }
    }
}

/// A non-frozen collection's serialized value from its live cells; `None` when it has none
/// (an empty collection reads as null, as in Cassandra).
pub(crate) fn collection_value(ty: &DataType, cells: &[Cell], now_s: u32) -> Option<Vec<u8>> {
    let live: Vec<(&[u8], &[u8])> = cells
        .iter()
        .filter_map(|c| c.value_at(now_s).map(|v| (c.path.as_slice(), v)))
        .collect();
    if live.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    match ty {
        DataType::List { .. } => encode_list(live.iter().map(|(_, v)| *v), &mut out),
        DataType::Set { element, .. } => {
            let elements = live.iter().filter_map(|(p, _)| path_value(element, p)).collect();
            encode_set(element, elements, &mut out);
        }
        DataType::Map { key, .. } => {
            let entries = live
                .iter()
                .filter_map(|(p, v)| Some((path_value(key, p)?, v.to_vec())))
                .collect();
            encode_map(key, entries, &mut out);
        }
        DataType::Udt { def, .. } => {
            let mut fields: Vec<Option<&[u8]>> = vec![None; def.field_names.len()];
            for (p, v) in &live {
                // A field dropped from the type cannot be, but a damaged path is skipped.
                if let Some(slot) = field_of_path(p).and_then(|i| fields.get_mut(i)) {
                    *slot = Some(v);
                }
            }
            encode_tuple(fields, &mut out);
        }
        _ => return None,
    }
    Some(out)
}

/// The path of field `index` of a non-frozen user-defined type: the index as a big-endian u16
/// (a type has at most [`hayate_cql::value::UDT_FIELDS_MAX`] fields), so fields iterate in
/// declaration order.
pub fn field_path(index: usize) -> Vec<u8> {
    let index = u16::try_from(index).expect("a user type has at most UDT_FIELDS_MAX fields");
    index.to_be_bytes().to_vec()
}

fn field_of_path(path: &[u8]) -> Option<usize> {
    let bytes: [u8; 2] = path.try_into().ok()?;
    Some(usize::from(u16::from_be_bytes(bytes)))
}

/// The serialized value a set element's or map key's path stands for.
pub fn path_value(ty: &DataType, path: &[u8]) -> Option<Vec<u8>> {
    let mut rest = path;
    let mut out = Vec::new();
    decode_order_key(ty, false, &mut rest, &mut out).ok()?;
    Some(out)
}

/// The path of a set element or map key (callers refuse values over
/// [`hayate_cql::value::ORDERED_VALUE_MAX_BYTES`] first, as Cassandra does).
pub fn element_path(ty: &DataType, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    hayate_cql::value::encode_order_key(ty, value, false, &mut out);
    out
}

/// A fresh list element id: later calls sort after earlier ones (appends), or before them
/// when `prepend`.
pub fn list_path(timestamp_us: i64, seq: u64, prepend: bool) -> Vec<u8> {
    let t = (timestamp_us.max(0) as u64)
        .wrapping_mul(1024)
        .wrapping_add(seq & 1023);
    let order = if prepend {
        (1u64 << 63) - t.min(1 << 62)
    } else {
        (1u64 << 63) + t.min(1 << 62)
    };
    let mut p = Vec::with_capacity(16);
    p.extend_from_slice(&order.to_be_bytes());
    p.extend_from_slice(&crate::schema::random_uuid()[..8]);
    p
}
