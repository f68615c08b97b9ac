//! Binding a compiled WHERE clause ([`WherePlan`]) to one request's values: each value
//! evaluated for the column it restricts, then partition keys, clustering ranges, a token range
//! and filters made of them ([`Restrictions`]).

use std::ops::Bound;

use hayate_cql::statement::{CompareOp, InValues, Term};
use hayate_cql::value::DataType;

use super::plan::{KeyColumn, Point, Step, WherePlan};
use super::{split_list, ClusteringRange, Filter, Restrictions};
use crate::error::{invalid, QueryResult};
use crate::query::bind::{evaluate, evaluate_integer, Binds, Evaluated, Integer, Receiver};
use crate::query::guardrails::{check_in_cartesian_product, Guard};
use crate::query::keys;
use crate::schema::Table;

struct Slice {
    start: Option<(Vec<Vec<u8>>, bool)>,
    end: Option<(Vec<Vec<u8>>, bool)>,
}

impl WherePlan {
    /// The rows the clause selects with `binds`' values. `table` must be the table the plan
    /// was compiled for.
    pub fn bind(&self, table: &Table, binds: &Binds<'_>, guard: Guard<'_>) -> QueryResult<Restrictions> {
        if let Some(point) = &self.point {
            // Any value the general binding would refuse goes to it, for its error.
            if let Some(r) = bind_point(table, point, binds) {
                return Ok(r);
            }
        }
        self.bind_any(table, binds, guard)
    }

    /// [`WherePlan::bind`] for every shape of WHERE clause.
    pub(super) fn bind_any(
        &self,
        table: &Table,
        binds: &Binds<'_>,
        guard: Guard<'_>,
    ) -> QueryResult<Restrictions> {
        let allow_filtering = self.allow_filtering;
        let n_pk = table.partition_key.len();
        let n_ck = table.clustering.len();
        let mut pk_values: Vec<Option<Vec<Vec<u8>>>> = vec![None; n_pk];
        let mut ck_values: Vec<Option<Vec<Vec<u8>>>> = vec![None; n_ck];
        let mut slice: Option<(usize, Slice)> = None;
        let mut out = Restrictions::default();

        for step in &self.steps {
            match step {
                Step::KeyEq {
                    key,
                    column,
                    name,
                    value,
                } => {
                    let slot = key_slot(&mut pk_values, &mut ck_values, *key);
                    set_once(slot, vec![value_of(table, *column, value, binds)?], name)?
                }
                Step::ClusteringSlice {
                    pos,
                    column,
                    op,
                    value,
                } => {
                    let v = value_of(table, *column, value, binds)?;
                    add_slice(&mut slice, *pos, *op, vec![v], table.columns[*column].descending)?;
                }
                Step::Filter { column, op, value } => {
                    let c = &table.columns[*column];
                    let v = value_as(&c.name, super::operand_type(*op, &c.ty), value, binds)?;
                    out.filters.push(Filter {
                        column: *column,
                        op: *op,
                        values: vec![v],
                        key: None,
                    })
                }
                Step::FilterEntry { column, key, value } => {
                    let c = &table.columns[*column];
                    let DataType::Map {
                        key: kt, value: vt, ..
                    } = &c.ty
                    else {
                        return Err(invalid(format!("Column {} cannot be used as a map", c.name)));
                    };
                    out.filters.push(Filter {
                        column: *column,
                        op: CompareOp::Eq,
                        values: vec![value_as(&c.name, vt, value, binds)?],
                        key: Some(value_as(&c.name, kt, key, binds)?),
                    })
                }
                Step::KeyIn {
                    key,
                    column,
                    name,
                    values,
                } => {
                    let slot = key_slot(&mut pk_values, &mut ck_values, *key);
                    set_once(slot, in_values(table, *column, values, binds)?, name)?
                }
                Step::FilterIn { column, values } => out.filters.push(Filter {
                    column: *column,
                    op: CompareOp::Eq,
                    values: in_values(table, *column, values, binds)?,
                    key: None,
                }),
                Step::Token { op, value } => {
                    let token = token_value(table, value, binds)?;
                    let (start, end) = (&mut out.token_start, &mut out.token_end);
                    match op {
                        CompareOp::Gt => *start = Some(Bound::Excluded(token)),
                        CompareOp::Gte => *start = Some(Bound::Included(token)),
                        CompareOp::Lt => *end = Some(Bound::Excluded(token)),
                        CompareOp::Lte => *end = Some(Bound::Included(token)),
                        _ => {
                            *start = Some(Bound::Included(token));
                            *end = Some(Bound::Included(token));
                        }
                    }
                }
                Step::TupleEq {
                    first,
                    columns,
                    names,
                    value,
                } => {
                    let values = tuple_values(table, columns, value, binds)?;
                    for (k, v) in values.into_iter().enumerate() {
                        set_once(&mut ck_values[first + k], vec![v], &names[k])?;
                    }
                }
                Step::TupleSlice {
                    first,
                    columns,
                    op,
                    value,
                    descending,
                } => {
                    let values = tuple_values(table, columns, value, binds)?;
                    add_slice(&mut slice, *first, *op, values, *descending)?;
                }
                Step::IsNotNull => {}
            }
        }

        if self.is_virtual {
            // Built-in tables are small: every relation is a filter over all their rows.
            return Ok(out);
        }

        // Partition key: all columns or none.
        let set = pk_values.iter().filter(|v| v.is_some()).count();
        if set > 0 && set < n_pk && !allow_filtering {
            let missing: Vec<&str> = table
                .partition_columns()
                .zip(&pk_values)
                .filter(|(_, v)| v.is_none())
                .map(|(c, _)| c.name.as_str())
                .collect();
            return Err(invalid(format!(
                "Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. \
                 If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING \
                 (partition key parts missing: {})",
                missing.join(", ")
            )));
        }
        if set == n_pk {
            let lists: Vec<Vec<Vec<u8>>> = pk_values.into_iter().map(|v| v.unwrap_or_default()).collect();
            let mut keys = Vec::new();
            check_in_cartesian_product(guard, "partition key", &lists)?;
            for combo in cartesian(&lists) {
                let parts: Vec<&[u8]> = combo.iter().map(|v| v.as_slice()).collect();
                keys.push(keys::partition_key(&parts)?);
            }
            out.partitions = Some(keys);
        }

        // Clustering: an =/IN prefix, then at most one slice starting right after it.
        let prefix_len = ck_values.iter().take_while(|v| v.is_some()).count();
        if let Some(extra) = ck_values[prefix_len..].iter().position(|v| v.is_some()) {
            let missing = &table.columns[table.clustering[prefix_len]].name;
            let restricted = &table.columns[table.clustering[prefix_len + extra]].name;
            if !allow_filtering {
                return Err(invalid(format!(
                    "PRIMARY KEY column \"{restricted}\" cannot be restricted as preceding column \"{missing}\" is not restricted"
                )));
            }
        }
        let ck_lists: Vec<Vec<Vec<u8>>> = ck_values[..prefix_len]
            .iter()
            .map(|v| v.clone().unwrap_or_default())
            .collect();
        check_in_cartesian_product(guard, "clustering key", &ck_lists)?;
        let prefixes = cartesian(&ck_lists);
        out.clustering_complete = prefix_len == n_ck && slice.is_none();
        for prefix in prefixes {
            let refs: Vec<&[u8]> = prefix.iter().map(|v| v.as_slice()).collect();
            let encoded = keys::clustering_key(table, &refs);
            let range = match &slice {
                None => ClusteringRange::prefix(encoded),
                Some((pos, s)) => {
                    if *pos != prefix_len {
                        let name = &table.columns[table.clustering[prefix_len.min(n_ck - 1)]].name;
                        return Err(invalid(format!(
                            "Clustering column \"{name}\" cannot be restricted (preceding column is restricted by a non-EQ relation)"
                        )));
                    }
                    slice_range(table, &prefix, s)
                }
            };
            out.clustering.push(range);
        }
        // Ranges in clustering order: IN lists may come in any order.
        out.clustering.sort_by_key(|r| bound_key(&r.start));
        out.clustering.dedup();
        if out.partitions.is_none() {
            out.index = self
                .index
                .and_then(|i| i.read(&table.columns[i.column].ty, &out.filters));
        }
        Ok(out)
    }
}

/// A point's restrictions, or `None` for any value the general binding would refuse (it then
/// gives its error), so that the answer is always the one [`WherePlan::bind_any`] would give.
pub(super) fn bind_point(table: &Table, point: &Point, binds: &Binds<'_>) -> Option<Restrictions> {
    let n_pk = table.partition_key.len();
    let mut pk: [&[u8]; super::plan::POINT_COLUMNS_MAX] = Default::default();
    let mut ck: [&[u8]; super::plan::POINT_COLUMNS_MAX] = Default::default();
    let values: Vec<Vec<u8>> = point
        .slots
        .iter()
        .map(|(_, column, term)| value_of(table, *column, term, binds).ok())
        .collect::<Option<_>>()?;
    for ((key, _, _), v) in point.slots.iter().zip(&values) {
        match *key {
            KeyColumn::Partition(pos) => pk[pos] = v,
            KeyColumn::Clustering(pos) => ck[pos] = v,
        }
    }
    Some(Restrictions {
        partitions: Some(vec![keys::partition_key(&pk[..n_pk]).ok()?]),
        clustering: vec![ClusteringRange::prefix(keys::clustering_key(
            table,
            &ck[..point.prefix_len],
        ))],
        clustering_complete: point.prefix_len == table.clustering.len(),
        ..Restrictions::default()
    })
}

fn value_of(table: &Table, col: usize, term: &Term, binds: &Binds<'_>) -> QueryResult<Vec<u8>> {
    let c = &table.columns[col];
    value_as(&c.name, &c.ty, term, binds)
}

/// `term` as a value of `ty`, for column `name` (its element's type, for CONTAINS).
fn value_as(name: &str, ty: &DataType, term: &Term, binds: &Binds<'_>) -> QueryResult<Vec<u8>> {
    match evaluate(term, &Receiver { name, ty }, binds)? {
        Evaluated::Bytes(b) => Ok(b),
        Evaluated::Null => Err(invalid(format!(
            "Invalid null value in condition for column {name}"
        ))),
        Evaluated::Unset => Err(invalid(format!("Invalid unset value for column {name}"))),
    }
}

fn in_values(table: &Table, col: usize, values: &InValues, binds: &Binds<'_>) -> QueryResult<Vec<Vec<u8>>> {
    match values {
        InValues::Terms(terms) => terms.iter().map(|t| value_of(table, col, t, binds)).collect(),
        InValues::Marker(i) => {
            let c = &table.columns[col];
            let list_ty = DataType::List {
                element: Box::new(c.ty.clone()),
                frozen: true,
            };
            let name = format!("in({})", c.name);
            let bytes = match evaluate(
                &Term::Marker(*i),
                &Receiver {
                    name: &name,
                    ty: &list_ty,
                },
                binds,
            )? {
                Evaluated::Bytes(b) => b,
                _ => {
                    return Err(invalid(format!(
                        "Invalid null value for IN restriction on {}",
                        c.name
                    )))
                }
            };
            split_list(&bytes).ok_or_else(|| invalid(format!("Invalid IN list for {}", c.name)))
        }
    }
}

fn bound_key(b: &Bound<Vec<u8>>) -> Vec<u8> {
    match b {
        Bound::Included(v) | Bound::Excluded(v) => v.clone(),
        Bound::Unbounded => Vec::new(),
    }
}

/// The values slot of a key column.
fn key_slot<'v>(
    pk_values: &'v mut [Option<Vec<Vec<u8>>>],
    ck_values: &'v mut [Option<Vec<Vec<u8>>>],
    key: KeyColumn,
) -> &'v mut Option<Vec<Vec<u8>>> {
    match key {
        KeyColumn::Partition(pos) => &mut pk_values[pos],
        KeyColumn::Clustering(pos) => &mut ck_values[pos],
    }
}

fn set_once(slot: &mut Option<Vec<Vec<u8>>>, values: Vec<Vec<u8>>, name: &str) -> QueryResult<()> {
    if slot.is_some() {
        return Err(invalid(format!(
            "{name} cannot be restricted by more than one relation if it includes an Equal"
        )));
    }
    *slot = Some(values);
    Ok(())
}

/// Records a slice on clustering columns from `pos`. `descending` flips the comparison, since
/// a DESC column's bytes sort in reverse.
fn add_slice(
    slice: &mut Option<(usize, Slice)>,
    pos: usize,
    op: CompareOp,
    values: Vec<Vec<u8>>,
    descending: bool,
) -> QueryResult<()> {
    let (_, s) = slice.get_or_insert_with(|| {
        (
            pos,
            Slice {
                start: None,
                end: None,
            },
        )
    });
    let (lower, inclusive) = match op {
        CompareOp::Gt => (true, false),
        CompareOp::Gte => (true, true),
        CompareOp::Lt => (false, false),
        CompareOp::Lte => (false, true),
        _ => return Err(invalid("Unsupported slice operator")),
    };
    // In byte order a DESC column's lower bound is an upper one.
    let lower = lower != descending;
    let slot = if lower { &mut s.start } else { &mut s.end };
    if slot.is_some() {
        return Err(invalid(
            "More than one restriction was found for the start or end bound of a clustering column",
        ));
    }
    *slot = Some((values, inclusive));
    Ok(())
}

fn slice_range(table: &Table, prefix: &[Vec<u8>], s: &Slice) -> ClusteringRange {
    let encode = |extra: &[Vec<u8>]| {
        let mut all: Vec<&[u8]> = prefix.iter().map(|v| v.as_slice()).collect();
        all.extend(extra.iter().map(|v| v.as_slice()));
        keys::clustering_key(table, &all)
    };
    let base = encode(&[]);
    let mut range = ClusteringRange::prefix(base);
    if let Some((v, inclusive)) = &s.start {
        range.start = ClusteringRange::start_at(encode(v), *inclusive);
    }
    if let Some((v, inclusive)) = &s.end {
        range.end = ClusteringRange::end_at(encode(v), *inclusive);
    }
    range
}

/// Every combination of one value from each list, in order. The caller has bounded their
/// number with [`check_in_cartesian_product`] (`in_select_cartesian_product_fail_threshold`).
fn cartesian(lists: &[Vec<Vec<u8>>]) -> Vec<Vec<Vec<u8>>> {
    let mut out: Vec<Vec<Vec<u8>>> = vec![Vec::new()];
    for list in lists {
        let mut next = Vec::with_capacity(out.len() * list.len());
        for prefix in &out {
            for v in list {
                let mut p = prefix.clone();
                p.push(v.clone());
                next.push(p);
            }
        }
        out = next;
    }
    out
}

fn tuple_values(table: &Table, cols: &[usize], rhs: &Term, binds: &Binds<'_>) -> QueryResult<Vec<Vec<u8>>> {
    match rhs {
        Term::Tuple(items) if items.len() == cols.len() => items
            .iter()
            .zip(cols)
            .map(|(t, &c)| value_of(table, c, t, binds))
            .collect(),
        Term::Marker(_) => {
            let ty = DataType::Tuple(cols.iter().map(|&c| table.columns[c].ty.clone()).collect());
            let bytes = match evaluate(
                rhs,
                &Receiver {
                    name: "tuple",
                    ty: &ty,
                },
                binds,
            )? {
                Evaluated::Bytes(b) => b,
                _ => return Err(invalid("Invalid null value for a multi-column relation")),
            };
            let mut rest = bytes.as_slice();
            let mut out = Vec::new();
            for _ in cols {
                let (h, t) = rest
                    .split_first_chunk::<4>()
                    .ok_or_else(|| invalid("Invalid tuple value"))?;
                let len =
                    usize::try_from(i32::from_be_bytes(*h)).map_err(|_| invalid("Invalid null in tuple"))?;
                if t.len() < len {
                    return Err(invalid("Invalid tuple value"));
                }
                out.push(t[..len].to_vec());
                rest = &t[len..];
            }
            Ok(out)
        }
        _ => Err(invalid(
            "Expected a tuple of as many values as columns in the multi-column relation",
        )),
    }
}

/// `token(?)`, `token(literal, ...)`, or a bigint literal or marker.
fn token_value(table: &Table, rhs: &Term, binds: &Binds<'_>) -> QueryResult<i64> {
    match rhs {
        Term::Function { name, args } if name.name.eq_ignore_ascii_case("token") => {
            if args.len() != table.partition_key.len() {
                return Err(invalid("token() needs one value per partition key column"));
            }
            let parts: Vec<Vec<u8>> = args
                .iter()
                .zip(&table.partition_key)
                .map(|(t, &c)| value_of(table, c, t, binds))
                .collect::<QueryResult<_>>()?;
            let refs: Vec<&[u8]> = parts.iter().map(|v| v.as_slice()).collect();
            Ok(hayate_storage::token::token(&keys::partition_key(&refs)?))
        }
        other => match evaluate_integer(other, "partition key token", &DataType::BigInt, binds)? {
            Integer::Value(token) => Ok(token),
            _ => Err(invalid("Invalid null value for the partition key token")),
        },
    }
}
