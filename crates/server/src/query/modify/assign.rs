//! The cells one assignment or removal writes, from its compiled form and one request's values:
//! a whole column, collection elements, a list element (which needs the current list, so it
//! becomes a [`ReadOp`]), a UDT field.

use hayate_cql::value::{split_components, DataType};
use hayate_storage::row::{Cell, Deletion, Row};

use super::plan::{Assign, AssignOp, Removal, RemovalKind};
use super::{ReadOp, ReadOpKind, WriteTime};
use crate::error::{invalid, QueryResult};
use crate::query::bind::{evaluate, evaluate_integer, Binds, Evaluated, Integer, Receiver};
use crate::query::cells::{element_path, field_path, list_path};
use crate::query::restrictions::split_list;
use crate::schema::{Column, Table};

pub(super) fn live_cell(col: &Column, path: Vec<u8>, value: Vec<u8>, wt: WriteTime) -> Cell {
    let mut cell = if wt.ttl_s > 0 {
        Cell::expiring(col.id, wt.timestamp_us, value, wt.ttl_s, wt.now_s)
    } else {
        Cell::live(col.id, wt.timestamp_us, value)
    };
    cell.path = path;
    cell
}

pub(super) fn tombstone_cell(col: &Column, path: Vec<u8>, wt: WriteTime) -> Cell {
    let mut cell = Cell::tombstone(col.id, wt.timestamp_us, wt.now_s);
    cell.path = path;
    cell
}

/// The delta of `c = c + value` (or `- value`, `negate`), from the value's bytes.
fn increment(bytes: &[u8], negate: bool) -> QueryResult<i64> {
    let bytes: [u8; 8] = bytes
        .try_into()
        .map_err(|_| invalid("Invalid null value for counter increment/decrement"))?;
    let delta = i64::from_be_bytes(bytes);
    if !negate {
        return Ok(delta);
    }
    delta.checked_neg().ok_or_else(|| {
        invalid(format!(
            "The negation of {delta} overflows supported counter precision (signed 8 bytes integer)"
        ))
    })
}

/// Adds `delta` to the increment of `col` that `update` carries: an UPDATE's row holds, for a
/// counter, one cell whose value is the sum of the statement's increments (8 bytes,
/// big-endian), which the counter's leader adds to its shard ([`super::apply`]); it is never
/// stored as it is.
fn add_increment(col: &Column, delta: i64, wt: WriteTime, update: &mut Row) {
    if let Some(cell) = update.cells.iter_mut().find(|c| c.column == col.id) {
        let sum = hayate_cluster::counter::shard_count(cell)
            .unwrap_or(0)
            .wrapping_add(delta);
        *cell = Cell::live(col.id, wt.timestamp_us, sum.to_be_bytes().to_vec());
        return;
    }
    update
        .cells
        .push(Cell::live(col.id, wt.timestamp_us, delta.to_be_bytes().to_vec()));
}

impl Assign {
    /// Adds the cells of this assignment, with `binds`' values, to `update`; list operations
    /// that need the current list go to `reads`.
    pub(super) fn bind(
        &self,
        table: &Table,
        binds: &Binds<'_>,
        wt: WriteTime,
        update: &mut Row,
        reads: &mut Vec<ReadOp>,
    ) -> QueryResult<()> {
        let col = &table.columns[self.column];
        let eval = |t, ty| evaluate(t, &Receiver { name: &col.name, ty }, binds);
        match &self.op {
            AssignOp::Set(t) => set_column(col, eval(t, &col.ty)?, wt, update)?,
            AssignOp::Add(t) => {
                if let Evaluated::Bytes(b) = eval(t, &col.ty)? {
                    add_elements(col, &b, wt, false, update)?;
                }
            }
            AssignOp::Prepend(t) => {
                if let Evaluated::Bytes(b) = eval(t, &col.ty)? {
                    add_elements(col, &b, wt, true, update)?;
                }
            }
            AssignOp::Increment { term, negate } => match eval(term, &col.ty)? {
                Evaluated::Bytes(b) => add_increment(col, increment(&b, *negate)?, wt, update),
                // A null literal is refused by the plan, with "increment/decrement".
                Evaluated::Null => return Err(invalid("Invalid null value for counter increment")),
                Evaluated::Unset => {}
            },
            AssignOp::SubtractList(t) => {
                if let Evaluated::Bytes(b) = eval(t, &col.ty)? {
                    let values = split_list(&b).ok_or_else(|| invalid("Invalid list value"))?;
                    reads.push(ReadOp {
                        column: self.column,
                        kind: ReadOpKind::RemoveValues(values),
                        timestamp_us: wt.timestamp_us,
                        ttl_s: wt.ttl_s,
                    });
                }
            }
            AssignOp::SubtractSet(t) => {
                let DataType::Set { element, .. } = &col.ty else {
                    unreachable!("the plan checked the column is a set")
                };
                if let Evaluated::Bytes(b) = eval(t, &col.ty)? {
                    for e in split_list(&b).ok_or_else(|| invalid("Invalid set value"))? {
                        update
                            .cells
                            .push(tombstone_cell(col, element_path(element, &e), wt));
                    }
                }
            }
            AssignOp::SubtractMapKeys { term, keys } => {
                let DataType::Map { key, .. } = &col.ty else {
                    unreachable!("the plan checked the column is a map")
                };
                if let Evaluated::Bytes(b) = eval(term, keys)? {
                    for k in split_list(&b).ok_or_else(|| invalid("Invalid set of map keys"))? {
                        update.cells.push(tombstone_cell(col, element_path(key, &k), wt));
                    }
                }
            }
            AssignOp::SetMapValue { key, value } => {
                let DataType::Map {
                    key: kt, value: vt, ..
                } = &col.ty
                else {
                    unreachable!("the plan checked the column is a map")
                };
                let k = match eval(key, kt)? {
                    Evaluated::Bytes(k) => k,
                    _ => return Err(invalid(format!("Invalid null map key for {}", col.name))),
                };
                match eval(value, vt)? {
                    Evaluated::Bytes(v) => update.cells.push(live_cell(col, element_path(kt, &k), v, wt)),
                    Evaluated::Null => update.cells.push(tombstone_cell(col, element_path(kt, &k), wt)),
                    Evaluated::Unset => {}
                }
            }
            AssignOp::SetListElement { index, value } => {
                let DataType::List { element, .. } = &col.ty else {
                    unreachable!("the plan checked the column is a list")
                };
                let Integer::Value(index) = evaluate_integer(index, &col.name, &DataType::Int, binds)? else {
                    return Err(invalid(format!("Invalid null list index for {}", col.name)));
                };
                let index = index as i32; // an int's 4 bytes
                let value = match eval(value, element)? {
                    Evaluated::Bytes(v) => Some(v),
                    Evaluated::Null => None,
                    Evaluated::Unset => return Ok(()),
                };
                reads.push(ReadOp {
                    column: self.column,
                    kind: ReadOpKind::SetIndex { index, value },
                    timestamp_us: wt.timestamp_us,
                    ttl_s: wt.ttl_s,
                });
            }
            AssignOp::SetField { field, value } => {
                let DataType::Udt { def, .. } = &col.ty else {
                    unreachable!("the plan checked the column is a UDT")
                };
                match eval(value, &def.field_types[*field])? {
                    Evaluated::Bytes(v) => update.cells.push(live_cell(col, field_path(*field), v, wt)),
                    Evaluated::Null => update.cells.push(tombstone_cell(col, field_path(*field), wt)),
                    Evaluated::Unset => {}
                }
            }
        }
        Ok(())
    }
}

/// Adds the tombstones of one DELETE target, with `binds`' values, to `update`; a list element
/// by index goes to `reads`.
pub(super) fn remove(
    table: &Table,
    removal: &Removal,
    binds: &Binds<'_>,
    wt: WriteTime,
    update: &mut Row,
    reads: &mut Vec<ReadOp>,
) -> QueryResult<()> {
    let col = &table.columns[removal.column];
    let name = col.name.as_str();
    match &removal.what {
        RemovalKind::Field(f) => update.cells.push(tombstone_cell(col, field_path(*f), wt)),
        // A counter is a cell per shard, as a collection is a cell per element.
        RemovalKind::Column if col.ty.is_multi_cell() || col.ty.is_counter() => {
            delete_column(col, wt.timestamp_us, wt.now_s, update)
        }
        RemovalKind::Column => update.cells.push(tombstone_cell(col, Vec::new(), wt)),
        RemovalKind::MapKey(k) => {
            let DataType::Map { key: kt, .. } = &col.ty else {
                unreachable!("the plan checked the column is a map")
            };
            if let Evaluated::Bytes(k) = evaluate(k, &Receiver { name, ty: kt }, binds)? {
                update.cells.push(tombstone_cell(col, element_path(kt, &k), wt));
            }
        }
        RemovalKind::SetElement(k) => {
            let DataType::Set { element, .. } = &col.ty else {
                unreachable!("the plan checked the column is a set")
            };
            if let Evaluated::Bytes(k) = evaluate(k, &Receiver { name, ty: element }, binds)? {
                update
                    .cells
                    .push(tombstone_cell(col, element_path(element, &k), wt));
            }
        }
        RemovalKind::ListIndex(k) => {
            let Integer::Value(index) = evaluate_integer(k, name, &DataType::Int, binds)? else {
                return Err(invalid(format!("Invalid null list index for {name}")));
            };
            reads.push(ReadOp {
                column: removal.column,
                kind: ReadOpKind::SetIndex {
                    index: index as i32, // an int's 4 bytes
                    value: None,
                },
                timestamp_us: wt.timestamp_us,
                ttl_s: 0,
            });
        }
    }
    Ok(())
}

/// `col = value`: the whole column.
pub(super) fn set_column(col: &Column, v: Evaluated, wt: WriteTime, update: &mut Row) -> QueryResult<()> {
    match v {
        Evaluated::Unset => {}
        Evaluated::Null if col.ty.is_multi_cell() => delete_column(col, wt.timestamp_us, wt.now_s, update),
        Evaluated::Null => update.cells.push(tombstone_cell(col, Vec::new(), wt)),
        Evaluated::Bytes(b) if col.ty.is_multi_cell() => {
            delete_column(col, wt.timestamp_us - 1, wt.now_s, update);
            add_elements(col, &b, wt, false, update)?;
        }
        Evaluated::Bytes(b) => update.cells.push(live_cell(col, Vec::new(), b, wt)),
    }
    Ok(())
}

fn delete_column(col: &Column, timestamp_us: i64, now_s: u32, update: &mut Row) {
    update.column_deletions.push((
        col.id,
        Deletion {
            timestamp_us,
            deleted_at_s: now_s,
        },
    ));
    update.column_deletions.sort_by_key(|(c, _)| *c);
}

/// Appends (or prepends) the elements of a serialized collection value as cells.
fn add_elements(
    col: &Column,
    value: &[u8],
    wt: WriteTime,
    prepend: bool,
    update: &mut Row,
) -> QueryResult<()> {
    let bad = || invalid(format!("Invalid collection value for {}", col.name));
    match &col.ty {
        DataType::List { .. } => {
            let items = split_list(value).ok_or_else(bad)?;
            let n = items.len() as u64;
            for (seq, item) in items.into_iter().enumerate() {
                // Prepended elements keep their order: the first gets the smallest id.
                let seq = if prepend { n - seq as u64 } else { seq as u64 };
                update
                    .cells
                    .push(live_cell(col, list_path(wt.timestamp_us, seq, prepend), item, wt));
            }
        }
        DataType::Set { element, .. } => {
            for item in split_list(value).ok_or_else(bad)? {
                key_size(col, &item)?;
                update
                    .cells
                    .push(live_cell(col, element_path(element, &item), Vec::new(), wt));
            }
        }
        DataType::Map { key, .. } => {
            for (k, v) in split_map(value).ok_or_else(bad)? {
                key_size(col, &k)?;
                update.cells.push(live_cell(col, element_path(key, &k), v, wt));
            }
        }
        DataType::Udt { def, .. } => {
            let fields = split_components(value).map_err(|_| bad())?;
            if fields.len() > def.field_names.len() {
                return Err(bad());
            }
            // Null fields need no cell: the column deletion before them removed the old ones.
            for (i, field) in fields.into_iter().enumerate() {
                if let Some(v) = field {
                    update.cells.push(live_cell(col, field_path(i), v.to_vec(), wt));
                }
            }
        }
        _ => return Err(bad()),
    }
    Ok(())
}

/// A set element or map key is a cell's key, bounded as a clustering value is.
fn key_size(col: &Column, key: &[u8]) -> QueryResult<()> {
    let max = hayate_cql::value::ORDERED_VALUE_MAX_BYTES;
    if key.len() > max {
        return Err(invalid(format!(
            "Set element or map key of {} bytes in {} is larger than the maximum of {max} bytes",
            key.len(),
            col.name
        )));
    }
    Ok(())
}

fn split_map(bytes: &[u8]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    // A map is a list of 2n elements, alternating key and value, after a count of n.
    let n = i32::from_be_bytes(bytes.get(..4)?.try_into().ok()?);
    let mut as_list = Vec::with_capacity(bytes.len());
    as_list.extend_from_slice(&n.checked_mul(2)?.to_be_bytes());
    as_list.extend_from_slice(&bytes[4..]);
    let flat = split_list(&as_list)?;
    let mut out = Vec::with_capacity(flat.len() / 2);
    let mut it = flat.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    Some(out)
}
