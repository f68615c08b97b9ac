//! A WHERE clause, turned into what the engine can read: a list of partitions (or a token
//! range), and within a partition a list of clustering ranges; plus filters on other columns
//! when the statement says ALLOW FILTERING.
//!
//! The rules are Cassandra's: partition key columns take `=` or `IN` on every column, or a
//! `token(...)` range; clustering columns take `=`/`IN` on a prefix and then at most one
//! slice; anything else needs ALLOW FILTERING.

use std::cmp::Ordering;
use std::ops::Bound;

use hayate_cql::statement::{CompareOp, InValues, Relation, RelationLhs, Term};
use hayate_cql::value::{compare, DataType};

use super::bind::{evaluate, Binds, Evaluated, Receiver};
use super::guardrails::{check_in_cartesian_product, Guard};
use super::keys::{self, ClusteringRange};
use crate::error::{invalid, QueryResult};
use crate::schema::{ColumnKind, Table};

/// Rows selected by a WHERE clause.
#[derive(Debug, Default)]
pub struct Restrictions {
    /// Serialized partition keys, in the order the IN lists give; `None` means every partition.
    pub partitions: Option<Vec<Vec<u8>>>,
    /// A `token(...)` range, for scans.
    pub token_start: Option<Bound<i64>>,
    pub token_end: Option<Bound<i64>>,
    /// Clustering ranges within each partition, in clustering order.
    pub clustering: Vec<ClusteringRange>,
    /// Every clustering column is fixed by `=`/`IN`: each range is one row.
    pub clustering_complete: bool,
    /// Relations on other columns, applied to each row read.
    pub filters: Vec<Filter>,
}

impl Restrictions {
    /// True if the WHERE clause restricts clustering columns (the rows are not the whole
    /// partition): then a partition's static row alone is not a result, and a write of static
    /// columns only is refused.
    pub fn restricts_clustering(&self) -> bool {
        self.clustering.as_slice() != [ClusteringRange::all()]
    }
}

/// A condition on a column's value, checked on each row.
#[derive(Debug, Clone)]
pub struct Filter {
    pub column: usize,
    pub op: CompareOp,
    pub values: Vec<Vec<u8>>,
}

impl Filter {
    pub fn matches(&self, ty: &DataType, value: Option<&[u8]>) -> bool {
        let Some(v) = value else {
            return false;
        };
        let ord = |x: &[u8]| compare(ty, v, x);
        match self.op {
            CompareOp::Eq => self.values.iter().any(|x| ord(x) == Ordering::Equal),
            CompareOp::Neq => self.values.iter().all(|x| ord(x) != Ordering::Equal),
            CompareOp::Lt => self.values.iter().all(|x| ord(x) == Ordering::Less),
            CompareOp::Lte => self.values.iter().all(|x| ord(x) != Ordering::Greater),
            CompareOp::Gt => self.values.iter().all(|x| ord(x) == Ordering::Greater),
            CompareOp::Gte => self.values.iter().all(|x| ord(x) != Ordering::Less),
            CompareOp::Contains | CompareOp::ContainsKey | CompareOp::Like => false,
        }
    }
}

struct Slice {
    start: Option<(Vec<Vec<u8>>, bool)>,
    end: Option<(Vec<Vec<u8>>, bool)>,
}

fn value_of(table: &Table, col: usize, term: &Term, binds: &Binds<'_>) -> QueryResult<Vec<u8>> {
    let c = &table.columns[col];
    match evaluate(
        term,
        &Receiver {
            name: &c.name,
            ty: &c.ty,
        },
        binds,
    )? {
        Evaluated::Bytes(b) => Ok(b),
        Evaluated::Null => Err(invalid(format!(
            "Invalid null value in condition for column {}",
            c.name
        ))),
        Evaluated::Unset => Err(invalid(format!("Invalid unset value for column {}", c.name))),
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

/// The elements of a serialized list (already validated).
pub fn split_list(bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut rest = bytes;
    let take4 = |r: &mut &[u8]| -> Option<i32> {
        let (h, t) = r.split_first_chunk::<4>()?;
        *r = t;
        Some(i32::from_be_bytes(*h))
    };
    let n = take4(&mut rest)?;
    let mut out = Vec::with_capacity(usize::try_from(n).ok()?.min(rest.len() / 4));
    for _ in 0..n {
        let len = usize::try_from(take4(&mut rest)?).ok()?;
        if rest.len() < len {
            return None;
        }
        out.push(rest[..len].to_vec());
        rest = &rest[len..];
    }
    Some(out)
}

fn column_index(table: &Table, name: &str) -> QueryResult<usize> {
    table.column_index(name).ok_or_else(|| {
        invalid(format!(
            "Undefined column name {name} in table {}.{}",
            table.keyspace, table.name
        ))
    })
}

/// Analyses `relations` for `table`. `allow_filtering` is the statement's ALLOW FILTERING.
pub fn analyse(
    table: &Table,
    relations: &[Relation],
    binds: &Binds<'_>,
    allow_filtering: bool,
    guard: Guard<'_>,
) -> QueryResult<Restrictions> {
    if let Some(point) = key_equalities(table, relations, binds) {
        return Ok(point);
    }
    analyse_any(table, relations, binds, allow_filtering, guard)
}

/// Key columns a point read or write fixes at most: past this, [`analyse_any`] decides.
const POINT_COLUMNS_MAX: usize = 8;

/// The shape nearly every request has, answered without the general analysis's lists of lists:
/// `=` on every partition key column and on a prefix of the clustering columns, each once.
/// `None` for any other shape and for any value the general analysis would refuse (it then
/// gives its error), so the answer is always the one [`analyse_any`] would give.
fn key_equalities(table: &Table, relations: &[Relation], binds: &Binds<'_>) -> Option<Restrictions> {
    let (n_pk, n_ck) = (table.partition_key.len(), table.clustering.len());
    // Every partition key column takes a relation, so there are no more of them than slots.
    if table.is_virtual || relations.len() < n_pk || relations.len() > POINT_COLUMNS_MAX {
        return None;
    }
    let mut pk: [Option<Vec<u8>>; POINT_COLUMNS_MAX] = Default::default();
    let mut ck: [Option<Vec<u8>>; POINT_COLUMNS_MAX] = Default::default();
    for r in relations {
        let Relation::Compare {
            lhs: RelationLhs::Column(name),
            op: CompareOp::Eq,
            rhs,
        } = r
        else {
            return None;
        };
        let col = table.column_index(name)?;
        let slot = match (table.columns[col].kind, table.key_position(col)) {
            (ColumnKind::PartitionKey, Some(p)) => pk.get_mut(p)?,
            (ColumnKind::Clustering, Some(p)) => ck.get_mut(p)?,
            _ => return None,
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(value_of(table, col, rhs, binds).ok()?);
    }
    let parts: Vec<&[u8]> = pk[..n_pk].iter().map(|v| v.as_deref()).collect::<Option<_>>()?;
    // A table may have more clustering columns than a point fixes here: those past the last
    // slot were not restricted (a relation on one went to the general analysis).
    let prefix_len = ck.iter().take(n_ck).take_while(|v| v.is_some()).count();
    if n_pk + prefix_len != relations.len() {
        return None; // a clustering column restricted after one that is not
    }
    let prefix: Vec<&[u8]> = ck[..prefix_len].iter().flatten().map(Vec::as_slice).collect();
    Some(Restrictions {
        partitions: Some(vec![keys::partition_key(&parts).ok()?]),
        clustering: vec![ClusteringRange::prefix(keys::clustering_key(table, &prefix))],
        clustering_complete: prefix_len == n_ck,
        ..Restrictions::default()
    })
}

/// [`analyse`] for every shape of WHERE clause.
fn analyse_any(
    table: &Table,
    relations: &[Relation],
    binds: &Binds<'_>,
    allow_filtering: bool,
    guard: Guard<'_>,
) -> QueryResult<Restrictions> {
    let n_pk = table.partition_key.len();
    let n_ck = table.clustering.len();
    let mut pk_values: Vec<Option<Vec<Vec<u8>>>> = vec![None; n_pk];
    let mut ck_values: Vec<Option<Vec<Vec<u8>>>> = vec![None; n_ck];
    let mut slice: Option<(usize, Slice)> = None;
    let mut out = Restrictions::default();

    for r in relations {
        match r {
            Relation::Compare {
                lhs: RelationLhs::Column(name),
                op,
                rhs,
            } => {
                let col = column_index(table, name)?;
                let kind = table.columns[col].kind;
                let pos = table.key_position(col);
                match (kind, op) {
                    (ColumnKind::PartitionKey, CompareOp::Eq) if !table.is_virtual => {
                        set_once(
                            &mut pk_values[pos.unwrap_or(0)],
                            vec![value_of(table, col, rhs, binds)?],
                            name,
                        )?;
                    }
                    (ColumnKind::Clustering, CompareOp::Eq) if !table.is_virtual => {
                        set_once(
                            &mut ck_values[pos.unwrap_or(0)],
                            vec![value_of(table, col, rhs, binds)?],
                            name,
                        )?;
                    }
                    (
                        ColumnKind::Clustering,
                        CompareOp::Lt | CompareOp::Lte | CompareOp::Gt | CompareOp::Gte,
                    ) if !table.is_virtual => {
                        let p = pos.unwrap_or(0);
                        let v = value_of(table, col, rhs, binds)?;
                        add_slice(&mut slice, p, 1, *op, vec![v], table.columns[col].descending)?;
                    }
                    (ColumnKind::PartitionKey, _) if !table.is_virtual && !allow_filtering => {
                        return Err(invalid(
                            "Only EQ and IN relation are supported on the partition key (unless you use the token() function or allow filtering)",
                        ));
                    }
                    _ => {
                        if !allow_filtering && !table.is_virtual {
                            return Err(needs_filtering());
                        }
                        if matches!(op, CompareOp::Contains | CompareOp::ContainsKey | CompareOp::Like) {
                            return Err(invalid(
                                "hayate does not support CONTAINS, CONTAINS KEY or LIKE yet",
                            ));
                        }
                        out.filters.push(Filter {
                            column: col,
                            op: *op,
                            values: vec![value_of(table, col, rhs, binds)?],
                        });
                    }
                }
            }
            Relation::In {
                lhs: RelationLhs::Column(name),
                values,
            } => {
                let col = column_index(table, name)?;
                let vals = in_values(table, col, values, binds)?;
                match (table.columns[col].kind, table.key_position(col)) {
                    (ColumnKind::PartitionKey, Some(p)) if !table.is_virtual => {
                        set_once(&mut pk_values[p], vals, name)?
                    }
                    (ColumnKind::Clustering, Some(p)) if !table.is_virtual => {
                        set_once(&mut ck_values[p], vals, name)?
                    }
                    _ => {
                        if !allow_filtering && !table.is_virtual {
                            return Err(needs_filtering());
                        }
                        out.filters.push(Filter {
                            column: col,
                            op: CompareOp::Eq,
                            values: vals,
                        });
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
                let token = token_value(table, rhs, binds)?;
                let (start, end) = (&mut out.token_start, &mut out.token_end);
                match op {
                    CompareOp::Gt => *start = Some(Bound::Excluded(token)),
                    CompareOp::Gte => *start = Some(Bound::Included(token)),
                    CompareOp::Lt => *end = Some(Bound::Excluded(token)),
                    CompareOp::Lte => *end = Some(Bound::Included(token)),
                    CompareOp::Eq => {
                        *start = Some(Bound::Included(token));
                        *end = Some(Bound::Included(token));
                    }
                    _ => return Err(invalid("Unsupported operator on token()")),
                }
            }
            Relation::Compare {
                lhs: RelationLhs::Tuple(names),
                op,
                rhs,
            } => {
                let cols: Vec<usize> = names
                    .iter()
                    .map(|n| column_index(table, n))
                    .collect::<QueryResult<_>>()?;
                let first = cols
                    .first()
                    .and_then(|&c| table.clustering.iter().position(|&i| i == c))
                    .ok_or_else(|| {
                        invalid("Multi-column relations can only be applied to clustering columns")
                    })?;
                for (k, &c) in cols.iter().enumerate() {
                    if table.clustering.get(first + k) != Some(&c) {
                        return Err(invalid(
                            "Clustering columns must appear in the PRIMARY KEY order in multi-column relations",
                        ));
                    }
                }
                let values = tuple_values(table, &cols, rhs, binds)?;
                if *op == CompareOp::Eq {
                    for (k, v) in values.into_iter().enumerate() {
                        set_once(&mut ck_values[first + k], vec![v], &names[k])?;
                    }
                } else {
                    let desc = table.columns[cols[0]].descending;
                    if cols.iter().any(|&c| table.columns[c].descending != desc) {
                        return Err(invalid(
                            "hayate does not support multi-column slices over columns of mixed clustering order yet",
                        ));
                    }
                    add_slice(&mut slice, first, cols.len(), *op, values, desc)?;
                }
            }
            Relation::IsNotNull { .. } => {}
            _ => return Err(invalid("hayate does not support this kind of relation yet")),
        }
    }

    if table.is_virtual {
        // Built-in tables are small: every relation is a filter over all their rows.
        return Ok(out);
    }

    // Partition key: all columns or none.
    let set = pk_values.iter().filter(|v| v.is_some()).count();
    if set > 0 && set < n_pk {
        let missing: Vec<&str> = table
            .partition_columns()
            .zip(&pk_values)
            .filter(|(_, v)| v.is_none())
            .map(|(c, _)| c.name.as_str())
            .collect();
        if !allow_filtering {
            return Err(invalid(format!(
                "Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. \
                 If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING \
                 (partition key parts missing: {})",
                missing.join(", ")
            )));
        }
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
    Ok(out)
}

fn bound_key(b: &Bound<Vec<u8>>) -> Vec<u8> {
    match b {
        Bound::Included(v) | Bound::Excluded(v) => v.clone(),
        Bound::Unbounded => Vec::new(),
    }
}

fn needs_filtering() -> crate::error::QueryError {
    invalid(
        "Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. \
         If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING",
    )
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

/// Records a slice on clustering columns `pos..pos+width`. `descending` flips the comparison,
/// since a DESC column's bytes sort in reverse.
fn add_slice(
    slice: &mut Option<(usize, Slice)>,
    pos: usize,
    width: usize,
    op: CompareOp,
    values: Vec<Vec<u8>>,
    descending: bool,
) -> QueryResult<()> {
    let _ = width;
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
        other => {
            let ty = DataType::BigInt;
            match evaluate(
                other,
                &Receiver {
                    name: "partition key token",
                    ty: &ty,
                },
                binds,
            )? {
                Evaluated::Bytes(b) if b.len() == 8 => {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(&b);
                    Ok(i64::from_be_bytes(a))
                }
                _ => Err(invalid("Invalid null value for the partition key token")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use hayate_cql::request::Values;
    use hayate_cql::statement::{parse, Statement};
    use hayate_cql::wire::Value;

    use super::*;
    use crate::schema::{ddl, Schema};

    fn table(create: &str) -> Table {
        let mut schema = Schema::default();
        ddl::add_test_keyspace(&mut schema, 1, &[create]);
        let ks = &schema.keyspaces["ks"];
        Table::clone(ks.tables.values().next().expect("the table"))
    }

    /// The short cut for `=` on the key answers exactly as the general analysis does, takes the
    /// shapes it is for, and leaves every other shape (and every error) to the general one.
    #[test]
    fn key_equalities_answer_as_the_general_analysis() {
        let tables = [
            table("CREATE TABLE ks.one (k text PRIMARY KEY, v int)"),
            table("CREATE TABLE ks.wide (a int, b text, c int, d text, v int, PRIMARY KEY ((a, b), c, d)) WITH CLUSTERING ORDER BY (c DESC, d ASC)"),
            table("CREATE TABLE ks.deep (k int, c1 int, c2 int, c3 int, c4 int, c5 int, c6 int, c7 int, c8 int, c9 int, c10 int, v int, PRIMARY KEY (k, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10))"),
        ];
        let int = 7i32.to_be_bytes();
        let long_text = vec![b'x'; 70_000];
        // (WHERE clause, bind values, table, whether the short cut takes it)
        let cases: &[(&str, &[Value], usize, bool)] = &[
            ("k = ?", &[Value::Bytes(b"key")], 0, true),
            ("k = 'lit'", &[], 0, true),
            ("k = ? AND v = 1", &[Value::Bytes(b"key")], 0, false),
            ("k IN ('a', 'b')", &[], 0, false),
            (
                "k = ? AND k = ?",
                &[Value::Bytes(b"a"), Value::Bytes(b"b")],
                0,
                false,
            ),
            ("k = ?", &[Value::Null], 0, false),
            ("k = ?", &[Value::NotSet], 0, false),
            ("token(k) > 5", &[], 0, false),
            (
                "a = ? AND b = ?",
                &[Value::Bytes(&int), Value::Bytes(b"b")],
                1,
                true,
            ),
            (
                "b = ? AND a = ?",
                &[Value::Bytes(b"b"), Value::Bytes(&int)],
                1,
                true,
            ),
            (
                "a = ? AND b = ? AND c = ?",
                &[Value::Bytes(&int), Value::Bytes(b"b"), Value::Bytes(&int)],
                1,
                true,
            ),
            ("d = 'd' AND c = 3 AND b = 'b' AND a = 1", &[], 1, true),
            ("a = 1 AND b = 'b' AND d = 'd'", &[], 1, false),
            ("a = 1 AND b = 'b' AND c > 3", &[], 1, false),
            ("a = 1", &[], 1, false),
            ("a = 1 AND b = ?", &[Value::Bytes(&long_text)], 1, false),
            ("a = ? AND b = 'b'", &[Value::Bytes(b"no")], 1, false),
            // More clustering columns than a point takes: a short prefix, and one too long.
            ("k = 1", &[], 2, true),
            ("k = 1 AND c1 = 1 AND c2 = 2 AND c3 = 3 AND c4 = 4 AND c5 = 5 AND c6 = 6", &[], 2, true),
            ("k = 1 AND c1 = 1 AND c2 = 2 AND c3 = 3 AND c4 = 4 AND c5 = 5 AND c6 = 6 AND c7 = 7 AND c8 = 8", &[], 2, false),
            ("k = 1 AND c1 = 1 AND c2 = 2 AND c3 = 3 AND c4 = 4 AND c5 = 5 AND c6 = 6 AND c7 = 7 AND c8 = 8 AND c9 = 9 AND c10 = 10", &[], 2, false),
        ];
        let warnings = crate::query::Warnings::default();
        let guard = Guard {
            config: &crate::config::GuardrailsConfig::DEFAULT,
            warnings: &warnings,
        };
        for &(clause, values, t, short_cut) in cases {
            let table = &tables[t];
            let text = format!("SELECT * FROM ks.{} WHERE {clause}", table.name);
            let parsed = parse(&text).expect("parses");
            let Statement::Select(select) = &parsed.statement else {
                panic!("not a SELECT")
            };
            let values = Values::Positional(values.to_vec());
            let binds = Binds::new(&values, &parsed.bind_markers, &[]).expect("binds");
            let quick = key_equalities(table, &select.where_clause, &binds);
            assert_eq!(quick.is_some(), short_cut, "{text}");
            let general = analyse_any(table, &select.where_clause, &binds, false, guard);
            if let Some(quick) = quick {
                let general = general.as_ref().expect("the general analysis takes it too");
                assert_eq!(format!("{quick:?}"), format!("{general:?}"), "{text}");
            }
            let whole = analyse(table, &select.where_clause, &binds, false, guard);
            assert_eq!(format!("{whole:?}"), format!("{general:?}"), "{text}");
        }
    }
}
