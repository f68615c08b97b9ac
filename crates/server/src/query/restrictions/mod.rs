//! A WHERE clause, turned into what the engine can read: a list of partitions (or a token
//! range), and within a partition a list of clustering ranges; plus filters on other columns
//! when the statement says ALLOW FILTERING.
//!
//! The rules are Cassandra's: partition key columns take `=` or `IN` on every column, or a
//! `token(...)` range; clustering columns take `=`/`IN` on a prefix and then at most one
//! slice; anything else needs ALLOW FILTERING.
//!
//! A clause is compiled once per statement and table ([`WherePlan::compile`], in `plan.rs`),
//! and bound to each request's values ([`WherePlan::bind`], in `values.rs`).

mod plan;
mod values;

use std::cmp::Ordering;
use std::ops::Bound;

use hayate_cql::statement::CompareOp;
use hayate_cql::value::{compare, DataType};

use super::keys::ClusteringRange;
use crate::error::invalid;

pub use plan::{IndexedBy, PlannedIndex, WherePlan};

use hayate_cluster::replica::IndexRead;
use hayate_storage::TermRange;

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
    /// For a scan: the secondary index it reads by, and the terms (the filters on the
    /// indexed column, which still apply to the rows read).
    pub index: Option<IndexRead>,
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
    /// For CONTAINS, an element (a map's value); for CONTAINS KEY, a map's key.
    pub values: Vec<Vec<u8>>,
    /// `m[key] = value`: the entry's key (`values` holds its value).
    pub key: Option<Vec<u8>>,
}

impl Filter {
    pub fn matches(&self, ty: &DataType, value: Option<&[u8]>) -> bool {
        let Some(v) = value else {
            return false;
        };
        let [wanted] = self.values.as_slice() else {
            return self.matches_value(ty, v);
        };
        match (self.op, ty, &self.key) {
            (
                CompareOp::Eq,
                DataType::Map {
                    key: kt, value: vt, ..
                },
                Some(key),
            ) => split_map(v).unwrap_or_default().iter().any(|(k, x)| {
                compare(kt, k, key) == Ordering::Equal
                    && x.as_deref()
                        .is_some_and(|x| compare(vt, x, wanted) == Ordering::Equal)
            }),
            (CompareOp::Contains | CompareOp::ContainsKey, _, _) => {
                contains(ty, self.op == CompareOp::ContainsKey, v, wanted)
            }
            _ => self.matches_value(ty, v),
        }
    }

    fn matches_value(&self, ty: &DataType, v: &[u8]) -> bool {
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

impl PlannedIndex {
    /// The index read for `filters`: the intersection of the bounds they put on the indexed
    /// column. `None` when they put none (the plan chose another shape).
    pub fn read(&self, ty: &DataType, filters: &[Filter]) -> Option<IndexRead> {
        let mut start = Bound::Unbounded;
        let mut end = Bound::Unbounded;
        let mut any = false;
        let key = |v: &[u8]| self.order.key(v);
        for f in filters.iter().filter(|f| f.column == self.column) {
            let [v] = f.values.as_slice() else { continue };
            // A set's elements and a map's keys are cell paths, which hold their order keys.
            let path = |ty: &DataType, v: &[u8]| crate::query::cells::element_path(ty, v);
            let term = match (self.by, f.op, &f.key, ty) {
                (IndexedBy::Value, _, None, _) => None,
                (IndexedBy::Contains, CompareOp::Contains, None, DataType::Set { element, .. }) => {
                    Some(path(element, v))
                }
                (IndexedBy::Contains, CompareOp::Contains, None, _) => Some(v.clone()),
                (IndexedBy::ContainsKey, CompareOp::ContainsKey, None, DataType::Map { key, .. }) => {
                    Some(path(key, v))
                }
                (IndexedBy::Entry, CompareOp::Eq, Some(k), DataType::Map { key, .. }) => {
                    Some(hayate_storage::entry_term(&path(key, k), v))
                }
                _ => continue,
            };
            if let Some(term) = term {
                return Some(IndexRead {
                    index: self.id,
                    terms: TermRange::eq(term),
                });
            }
            let (s, e) = match f.op {
                CompareOp::Eq => (Bound::Included(key(v)), Bound::Included(key(v))),
                CompareOp::Gt => (Bound::Excluded(key(v)), Bound::Unbounded),
                CompareOp::Gte => (Bound::Included(key(v)), Bound::Unbounded),
                CompareOp::Lt => (Bound::Unbounded, Bound::Excluded(key(v))),
                CompareOp::Lte => (Bound::Unbounded, Bound::Included(key(v))),
                _ => continue,
            };
            any = true;
            start = tighter(start, s, true);
            end = tighter(end, e, false);
        }
        any.then_some(IndexRead {
            index: self.id,
            terms: TermRange { start, end },
        })
    }
}

/// The tighter of two bounds of one side of a range: of two starts the larger, of two ends the
/// smaller; of two equal values the excluding one.
fn tighter(a: Bound<Vec<u8>>, b: Bound<Vec<u8>>, start: bool) -> Bound<Vec<u8>> {
    let (x, y) = match (&a, &b) {
        (Bound::Unbounded, _) => return b,
        (_, Bound::Unbounded) => return a,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => (x, y),
    };
    match x.cmp(y) {
        Ordering::Equal if matches!(a, Bound::Excluded(_)) => a,
        Ordering::Equal => b,
        Ordering::Less if start => b,
        Ordering::Greater if !start => b,
        _ => a,
    }
}

/// `CONTAINS` (an element, or a map's value) or, with `key`, `CONTAINS KEY` on a serialized
/// collection of type `ty`.
pub fn contains(ty: &DataType, key: bool, collection: &[u8], value: &[u8]) -> bool {
    match ty {
        DataType::List { element, .. } | DataType::Set { element, .. } => split_list(collection)
            .unwrap_or_default()
            .iter()
            .any(|e| compare(element, e, value) == Ordering::Equal),
        DataType::Map {
            key: kt, value: vt, ..
        } => split_map(collection).unwrap_or_default().iter().any(|(k, v)| {
            if key {
                compare(kt, k, value) == Ordering::Equal
            } else {
                v.as_deref()
                    .is_some_and(|v| compare(vt, v, value) == Ordering::Equal)
            }
        }),
        _ => false,
    }
}

/// The type of the value a relation on a column of type `ty` takes: an element (or a map's
/// value) for CONTAINS, a key for CONTAINS KEY, else `ty` itself.
pub fn operand_type(op: CompareOp, ty: &DataType) -> &DataType {
    match (op, ty) {
        (CompareOp::ContainsKey, DataType::Map { key, .. }) => key,
        (CompareOp::Contains, DataType::Map { value, .. }) => value,
        (CompareOp::Contains, DataType::List { element, .. } | DataType::Set { element, .. }) => element,
        _ => ty,
    }
}

/// A map's entries: each key, and its value (`None` for a null).
pub type MapEntries = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// The entries of a serialized map: `[n][k1][v1]...[kn][vn]`, each `[int length][bytes]` (a
/// negative length is a null value).
pub fn split_map(bytes: &[u8]) -> Option<MapEntries> {
    fn int(r: &mut &[u8]) -> Option<i32> {
        let (h, t) = r.split_first_chunk::<4>()?;
        *r = t;
        Some(i32::from_be_bytes(*h))
    }
    fn item(r: &mut &[u8]) -> Option<Option<Vec<u8>>> {
        let Ok(len) = usize::try_from(int(r)?) else {
            return Some(None);
        };
        let (v, t) = r.split_at_checked(len)?;
        *r = t;
        Some(Some(v.to_vec()))
    }
    let mut rest = bytes;
    let n = usize::try_from(int(&mut rest)?).ok()?;
    let mut out = Vec::with_capacity(n.min(rest.len() / 8));
    for _ in 0..n {
        let k = item(&mut rest)??;
        let v = item(&mut rest)?;
        out.push((k, v));
    }
    Some(out)
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

fn needs_filtering() -> crate::error::QueryError {
    invalid(
        "Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. \
         If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING",
    )
}

#[cfg(test)]
mod tests {
    use hayate_cql::request::Values;
    use hayate_cql::statement::{parse, Relation, Statement};
    use hayate_cql::wire::Value;

    use super::*;
    use crate::error::QueryResult;
    use crate::query::bind::Binds;
    use crate::query::guardrails::Guard;
    use crate::schema::{ddl, Schema, Table};

    /// Compiles and binds `relations` for `table` at once (the tests' short way).
    fn analyse(
        table: &Table,
        relations: &[Relation],
        binds: &Binds<'_>,
        allow_filtering: bool,
        guard: Guard<'_>,
    ) -> QueryResult<Restrictions> {
        WherePlan::compile(table, relations, allow_filtering)?.bind(table, binds, guard)
    }

    fn table(create: &str) -> Table {
        let mut schema = Schema::default();
        ddl::add_test_keyspace(&mut schema, 1, &[create]);
        let ks = &schema.keyspaces["ks"];
        Table::clone(ks.tables.values().next().expect("the table"))
    }

    /// The short cut for `=` on the key answers exactly as the general binding does, takes the
    /// shapes it is for, and leaves every other shape (and every error) to the general one.
    #[test]
    fn a_point_binds_as_the_general_binding() {
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
            let plan = WherePlan::compile(table, &select.where_clause, false);
            let quick = plan
                .as_ref()
                .ok()
                .and_then(|p| p.point.as_ref())
                .and_then(|point| values::bind_point(table, point, &binds));
            assert_eq!(quick.is_some(), short_cut, "{text}");
            let general = plan
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|p| p.bind_any(table, &binds, guard));
            if let Some(quick) = quick {
                let general = general.as_ref().expect("the general binding takes it too");
                assert_eq!(format!("{quick:?}"), format!("{general:?}"), "{text}");
            }
            let whole = analyse(table, &select.where_clause, &binds, false, guard);
            assert_eq!(format!("{whole:?}"), format!("{general:?}"), "{text}");
        }
    }
}
