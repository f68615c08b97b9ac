//! A WHERE clause compiled against its table, once per statement: each relation's column found
//! by name and its part decided (a partition key value, a clustering prefix or slice, a token
//! bound, a filter), so that binding a request's values ([`super::values`]) looks nothing up.
//!
//! Compiling refuses what no value could make valid (an unknown column, `<` on the partition key
//! without ALLOW FILTERING, `token()` over the wrong columns, ...). What depends on the values
//! or on how relations combine (a column restricted twice, missing key parts, too many IN
//! combinations) is judged when binding, in the order the relations come, as before.

use hayate_cql::statement::{CompareOp, InValues, Relation, RelationLhs, Term};
use hayate_cql::value::DataType;

use super::needs_filtering;
use crate::error::{invalid, QueryResult};
use crate::schema::index::IndexDef;
use crate::schema::{ColumnKind, Table};

/// Key columns a point read or write fixes at most: past this, the general binding decides.
pub(super) const POINT_COLUMNS_MAX: usize = 8;

/// A WHERE clause, compiled for one table (the plan that holds it is good for that table only).
#[derive(Debug)]
pub struct WherePlan {
    /// The relations, in the order the statement gives them.
    pub(super) steps: Vec<Step>,
    /// `Some` when the clause is `=` on every partition key column and on a prefix of the
    /// clustering columns, each once: the shape nearly every request has, bound without the
    /// general binding's lists of lists.
    pub(super) point: Option<Point>,
    pub(super) allow_filtering: bool,
    pub(super) is_virtual: bool,
    /// The secondary index a scan reads by, when a relation is on an indexed column.
    pub index: Option<PlannedIndex>,
}

/// The index a clause is answered by: its number in the table, the column it indexes, and how
/// that column's values order as its terms.
#[derive(Clone, Copy, Debug)]
pub struct PlannedIndex {
    pub(super) id: u32,
    pub(super) column: usize,
    pub(super) order: hayate_storage::TermOrder,
    pub(super) by: IndexedBy,
}

/// Which relations on the indexed column give the index its terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexedBy {
    /// `=` and ranges on the column's value.
    Value,
    /// `CONTAINS` an element (a list's or set's elements, a map's values).
    Contains,
    /// `CONTAINS KEY` (a map's keys).
    ContainsKey,
    /// `m[key] = value` (a map's entries).
    Entry,
}

/// A primary key column, by its position in its part of the key.
#[derive(Clone, Copy, Debug)]
pub(super) enum KeyColumn {
    Partition(usize),
    Clustering(usize),
}

/// One relation, its column resolved.
#[derive(Debug)]
pub(super) enum Step {
    /// `=` on a key column.
    KeyEq {
        key: KeyColumn,
        column: usize,
        name: String,
        value: Term,
    },
    /// `IN` on a key column.
    KeyIn {
        key: KeyColumn,
        column: usize,
        name: String,
        values: InValues,
    },
    /// `<`, `<=`, `>`, `>=` on the clustering column at `pos`.
    ClusteringSlice {
        pos: usize,
        column: usize,
        op: CompareOp,
        value: Term,
    },
    /// A condition checked on each row read (ALLOW FILTERING, or a built-in table).
    Filter {
        column: usize,
        op: CompareOp,
        value: Term,
    },
    /// `m[key] = value` on a map column (a filter).
    FilterEntry { column: usize, key: Term, value: Term },
    /// `IN` on a column that is not a key column (a filter).
    FilterIn { column: usize, values: InValues },
    /// `token(pk...) op rhs`.
    Token { op: CompareOp, value: Term },
    /// `(c1, c2, ...) = (...)` on clustering columns from `first`.
    TupleEq {
        first: usize,
        columns: Vec<usize>,
        names: Vec<String>,
        value: Term,
    },
    /// `(c1, c2, ...) op (...)` on clustering columns from `first`.
    TupleSlice {
        first: usize,
        columns: Vec<usize>,
        op: CompareOp,
        value: Term,
        descending: bool,
    },
    /// `IS NOT NULL`, which every stored key column satisfies.
    IsNotNull,
}

/// The values of a point, in the order the relations give them.
#[derive(Debug)]
pub(super) struct Point {
    /// (the key column, its index among the table's columns, its value)
    pub(super) slots: Vec<(KeyColumn, usize, Term)>,
    /// Clustering columns the point fixes (a prefix).
    pub(super) prefix_len: usize,
}

fn column_index(table: &Table, name: &str) -> QueryResult<usize> {
    table.column_index(name).ok_or_else(|| {
        invalid(format!(
            "Undefined column name {name} in table {}.{}",
            table.keyspace, table.name
        ))
    })
}

impl WherePlan {
    /// Compiles `relations` for `table`; `allow_filtering` is the statement's ALLOW FILTERING.
    pub fn compile(table: &Table, relations: &[Relation], allow_filtering: bool) -> QueryResult<WherePlan> {
        let steps = relations
            .iter()
            .map(|r| step(table, r, allow_filtering))
            .collect::<QueryResult<Vec<_>>>()?;
        let index = choose_index(table, &steps, allow_filtering)?;
        Ok(WherePlan {
            point: point(table, &steps),
            steps,
            allow_filtering,
            is_virtual: table.is_virtual,
            index,
        })
    }
}

fn step(table: &Table, r: &Relation, allow_filtering: bool) -> QueryResult<Step> {
    let stored = !table.is_virtual;
    Ok(match r {
        Relation::Compare {
            lhs: RelationLhs::Column(name),
            op,
            rhs,
        } => {
            let column = column_index(table, name)?;
            let pos = table.key_position(column).unwrap_or(0);
            let value = rhs.clone();
            match (table.columns[column].kind, op) {
                (ColumnKind::PartitionKey, CompareOp::Eq) if stored => Step::KeyEq {
                    key: KeyColumn::Partition(pos),
                    column,
                    name: name.clone(),
                    value,
                },
                (ColumnKind::Clustering, CompareOp::Eq) if stored => Step::KeyEq {
                    key: KeyColumn::Clustering(pos),
                    column,
                    name: name.clone(),
                    value,
                },
                (ColumnKind::Clustering, CompareOp::Lt | CompareOp::Lte | CompareOp::Gt | CompareOp::Gte)
                    if stored =>
                {
                    Step::ClusteringSlice {
                        pos,
                        column,
                        op: *op,
                        value,
                    }
                }
                (ColumnKind::PartitionKey, _) if stored && !allow_filtering => {
                    return Err(invalid(
                        "Only EQ and IN relation are supported on the partition key (unless you use the token() function or allow filtering)",
                    ));
                }
                _ => {
                    let c = &table.columns[column];
                    match op {
                        CompareOp::ContainsKey if !matches!(c.ty, DataType::Map { .. }) => {
                            return Err(invalid(format!(
                                "Cannot use CONTAINS KEY on non-map column {name}"
                            )));
                        }
                        CompareOp::Contains if !c.ty.is_collection() => {
                            return Err(invalid(format!(
                                "Cannot use CONTAINS on non-collection column {name}"
                            )));
                        }
                        CompareOp::Like => return Err(invalid("hayate does not support LIKE yet")),
                        _ if c.ty.is_collection()
                            && c.ty.is_multi_cell()
                            && *op != CompareOp::Contains
                            && *op != CompareOp::ContainsKey =>
                        {
                            return Err(invalid(format!(
                                "Collection column '{name}' ({}) cannot be restricted by a '{}' relation",
                                c.ty,
                                op_text(*op)
                            )));
                        }
                        _ => {}
                    }
                    if !allow_filtering && stored && serving_index(table, column, *op).is_none() {
                        return Err(needs_filtering());
                    }
                    Step::Filter {
                        column,
                        op: *op,
                        value,
                    }
                }
            }
        }
        Relation::In {
            lhs: RelationLhs::Column(name),
            values,
        } => {
            let column = column_index(table, name)?;
            let values = values.clone();
            match (table.columns[column].kind, table.key_position(column)) {
                (ColumnKind::PartitionKey, Some(pos)) if stored => Step::KeyIn {
                    key: KeyColumn::Partition(pos),
                    column,
                    name: name.clone(),
                    values,
                },
                (ColumnKind::Clustering, Some(pos)) if stored => Step::KeyIn {
                    key: KeyColumn::Clustering(pos),
                    column,
                    name: name.clone(),
                    values,
                },
                _ => {
                    if !allow_filtering && stored {
                        return Err(needs_filtering());
                    }
                    Step::FilterIn { column, values }
                }
            }
        }
        Relation::Compare {
            lhs: RelationLhs::Token(cols),
            op,
            rhs,
        } => {
            let expected: Vec<&str> = table.partition_columns().map(|c| c.name.as_str()).collect();
            if cols.iter().map(String::as_str).ne(expected.iter().copied()) {
                return Err(invalid(format!(
                    "The token() function must be applied to all partition key components or none of them ({})",
                    expected.join(", ")
                )));
            }
            if !matches!(
                op,
                CompareOp::Gt | CompareOp::Gte | CompareOp::Lt | CompareOp::Lte | CompareOp::Eq
            ) {
                return Err(invalid("Unsupported operator on token()"));
            }
            Step::Token {
                op: *op,
                value: rhs.clone(),
            }
        }
        Relation::Compare {
            lhs: RelationLhs::Tuple(names),
            op,
            rhs,
        } => {
            let columns: Vec<usize> = names
                .iter()
                .map(|n| column_index(table, n))
                .collect::<QueryResult<_>>()?;
            let first = columns
                .first()
                .and_then(|&c| table.clustering.iter().position(|&i| i == c))
                .ok_or_else(|| invalid("Multi-column relations can only be applied to clustering columns"))?;
            for (k, &c) in columns.iter().enumerate() {
                if table.clustering.get(first + k) != Some(&c) {
                    return Err(invalid(
                        "Clustering columns must appear in the PRIMARY KEY order in multi-column relations",
                    ));
                }
            }
            if *op == CompareOp::Eq {
                Step::TupleEq {
                    first,
                    columns,
                    names: names.clone(),
                    value: rhs.clone(),
                }
            } else {
                let descending = table.columns[columns[0]].descending;
                if columns.iter().any(|&c| table.columns[c].descending != descending) {
                    return Err(invalid(
                        "hayate does not support multi-column slices over columns of mixed clustering order yet",
                    ));
                }
                Step::TupleSlice {
                    first,
                    columns,
                    op: *op,
                    value: rhs.clone(),
                    descending,
                }
            }
        }
        Relation::Compare {
            lhs: RelationLhs::Element { column: name, key },
            op,
            rhs,
        } => {
            let column = column_index(table, name)?;
            if !matches!(table.columns[column].ty, DataType::Map { .. }) {
                return Err(invalid(format!("Column {name} cannot be used as a map")));
            }
            if *op != CompareOp::Eq {
                return Err(invalid("Only EQ relations are supported on map entries"));
            }
            if !allow_filtering && stored && entries_index(table, column).is_none() {
                return Err(needs_filtering());
            }
            Step::FilterEntry {
                column,
                key: key.clone(),
                value: rhs.clone(),
            }
        }
        Relation::IsNotNull { .. } => Step::IsNotNull,
        _ => return Err(invalid("hayate does not support this kind of relation yet")),
    })
}

fn op_text(op: CompareOp) -> &'static str {
    match op {
        CompareOp::Eq => "=",
        CompareOp::Neq => "!=",
        CompareOp::Lt => "<",
        CompareOp::Lte => "<=",
        CompareOp::Gt => ">",
        CompareOp::Gte => ">=",
        CompareOp::Contains => "CONTAINS",
        CompareOp::ContainsKey => "CONTAINS KEY",
        CompareOp::Like => "LIKE",
    }
}

/// The index on the entries of map `column`, which answers `m[key] = value`.
fn entries_index(table: &Table, column: usize) -> Option<&IndexDef> {
    let id = table.columns[column].id;
    table
        .indexes
        .iter()
        .find(|i| i.column == id && i.target == crate::schema::index::Target::Entries)
}

/// The index that answers `column op value`, if one does: a storage-attached one first.
fn serving_index(table: &Table, column: usize, op: CompareOp) -> Option<&IndexDef> {
    let c = &table.columns[column];
    let serving = |i: &&IndexDef| i.column == c.id && i.serves(&c.ty, op);
    let mut serving = table.indexes.iter().filter(serving);
    let first = serving.next()?;
    Some(if first.is_sai() {
        first
    } else {
        serving.next().unwrap_or(first)
    })
}

/// The index a scan with these relations reads by, as Cassandra 5.0 chooses and refuses: an
/// indexed `=` first, then an indexed range. Without ALLOW FILTERING, a legacy index takes no
/// other indexed relation beside it (storage-attached ones combine with AND), and no relation
/// on a clustering column when the partition key is not given.
fn choose_index(table: &Table, steps: &[Step], allow_filtering: bool) -> QueryResult<Option<PlannedIndex>> {
    if table.indexes.is_empty() || table.is_virtual {
        return Ok(None);
    }
    let served: Vec<(usize, CompareOp, &IndexDef)> = steps
        .iter()
        .filter_map(|s| match s {
            Step::Filter { column, op, .. } => serving_index(table, *column, *op).map(|i| (*column, *op, i)),
            Step::FilterEntry { column, .. } => {
                entries_index(table, *column).map(|i| (*column, CompareOp::Eq, i))
            }
            _ => None,
        })
        .collect();
    let Some(&(column, op, index)) = served
        .iter()
        .find(|(_, op, _)| *op == CompareOp::Eq)
        .or_else(|| served.first())
    else {
        return Ok(None);
    };
    let by = match (index.target, op) {
        (crate::schema::index::Target::Entries, _) => IndexedBy::Entry,
        (_, CompareOp::Contains) => IndexedBy::Contains,
        (_, CompareOp::ContainsKey) => IndexedBy::ContainsKey,
        _ => IndexedBy::Value,
    };
    if !allow_filtering {
        let columns = |legacy: bool| -> Vec<usize> {
            served
                .iter()
                .filter(|(_, _, i)| !legacy || !i.is_sai())
                .map(|(c, _, _)| *c)
                .collect()
        };
        // Several relations on storage-attached indexes combine; a legacy index takes one.
        if served.len() > 1 && !columns(true).is_empty() {
            return Err(needs_filtering());
        }
        let partition_given = (0..table.partition_key.len()).all(|pos| {
            steps.iter().any(|s| {
                matches!(s, Step::KeyEq { key: KeyColumn::Partition(p), .. } | Step::KeyIn { key: KeyColumn::Partition(p), .. } if *p == pos)
            })
        });
        let on_clustering = steps.iter().any(|s| {
            matches!(
                s,
                Step::KeyEq {
                    key: KeyColumn::Clustering(_),
                    ..
                } | Step::KeyIn {
                    key: KeyColumn::Clustering(_),
                    ..
                } | Step::ClusteringSlice { .. }
                    | Step::TupleEq { .. }
                    | Step::TupleSlice { .. }
            )
        });
        if on_clustering && !partition_given {
            return Err(needs_filtering());
        }
    }
    // The terms order as the storage engine's index orders them.
    Ok(index.spec(table).map(|spec| PlannedIndex {
        id: index.id,
        column,
        order: spec.order,
        by,
    }))
}

/// The point shape, when `steps` have it: `=` on each partition key column once, and on a
/// prefix of the clustering columns once each, and nothing else.
fn point(table: &Table, steps: &[Step]) -> Option<Point> {
    let (n_pk, n_ck) = (table.partition_key.len(), table.clustering.len());
    if table.is_virtual || steps.len() < n_pk || steps.len() > POINT_COLUMNS_MAX {
        return None;
    }
    let mut pk = [false; POINT_COLUMNS_MAX];
    let mut ck = [false; POINT_COLUMNS_MAX];
    let mut slots = Vec::with_capacity(steps.len());
    for s in steps {
        let Step::KeyEq {
            key, column, value, ..
        } = s
        else {
            return None;
        };
        let seen = match *key {
            KeyColumn::Partition(pos) => pk.get_mut(pos)?,
            KeyColumn::Clustering(pos) => ck.get_mut(pos)?,
        };
        if std::mem::replace(seen, true) {
            return None;
        }
        slots.push((*key, *column, value.clone()));
    }
    if !pk[..n_pk].iter().all(|&s| s) {
        return None;
    }
    // A table may have more clustering columns than a point fixes here: those past the last
    // slot were not restricted.
    let prefix_len = ck.iter().take(n_ck).take_while(|&&s| s).count();
    if n_pk + prefix_len != steps.len() {
        return None; // a clustering column restricted after one that is not
    }
    Some(Point { slots, prefix_len })
}
