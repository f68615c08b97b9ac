//! The `[applied]` answer of a lightweight transaction, as Cassandra builds it: `true` alone,
//! `false` alone when the rows judged do not exist, and otherwise `false` with the current
//! values of the columns the answer shows, one row per row judged.

use hayate_cluster::replica::ReplicaRow;
use hayate_storage::row::Cell;

use super::*;
use crate::query::keys::{clustering_key, partition_key};
use crate::schema::{ddl, Schema};

const NOW_S: u32 = 1_000_000;

fn int(v: i32) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

/// A request on `ks.ck (k, c, v, s static)` whose checks are on the rows `c = cs` of
/// partition `k = 1` (an empty `cs` checks the static row), and whose answer shows `columns`.
fn request(cs: &[i32], columns: &[&str], statics: bool) -> Request {
    let mut schema = Schema::default();
    ddl::add_test_keyspace(
        &mut schema,
        1,
        &["CREATE TABLE ks.ck (k int, c int, v int, s int static, PRIMARY KEY (k, c))"],
    );
    let keyspace = schema.keyspaces["ks"].clone();
    let table = keyspace.tables.values().next().expect("the table").clone();
    let mut checks: Vec<(Vec<u8>, Check)> = cs
        .iter()
        .map(|c| (clustering_key(&table, &[&int(*c)]), Check::Exists))
        .collect();
    if cs.is_empty() {
        checks.push((Vec::new(), Check::Exists));
    }
    Request {
        columns: columns
            .iter()
            .map(|n| table.column_index(n).expect("column"))
            .collect(),
        partition: partition_key(&[&int(1)]).expect("key"),
        keyspace,
        table,
        checks,
        also_read: BTreeSet::new(),
        statics,
        regulars: !cs.is_empty(),
    }
}

/// What Paxos read: the rows `c = (c, v)` and the static row's `s`, if given.
fn current(r: &Request, rows: &[(i32, i32)], s: Option<i32>) -> ReadResult {
    let t = &r.table;
    let id = |name: &str| t.column(name).expect("column").id;
    let replica_row = |clustering: Vec<u8>, cells: Vec<Cell>| ReplicaRow {
        token: 0,
        partition: r.partition.clone(),
        clustering,
        row: Row {
            cells,
            ..Row::default()
        },
    };
    let mut out = Vec::new();
    if let Some(s) = s {
        out.push(replica_row(Vec::new(), vec![Cell::live(id("s"), 1, int(s))]));
    }
    for (c, v) in rows {
        out.push(replica_row(
            clustering_key(t, &[&int(*c)]),
            vec![Cell::live(id("v"), 1, int(*v))],
        ));
    }
    ReadResult {
        rows: out,
        more: false,
    }
}

fn names(rows: &Rows) -> Vec<&str> {
    rows.metadata.columns.iter().map(|c| c.name.as_str()).collect()
}

/// Each row's cells: `[int length][bytes]`, the length -1 for a null.
fn cells(rows: &Rows) -> Vec<Option<Vec<u8>>> {
    let mut rest = rows.rows_content.as_slice();
    let mut out = Vec::new();
    while let Some((len, tail)) = rest.split_first_chunk::<4>() {
        let len = i32::from_be_bytes(*len);
        match usize::try_from(len) {
            Ok(n) => {
                out.push(Some(tail[..n].to_vec()));
                rest = &tail[n..];
            }
            Err(_) => {
                out.push(None);
                rest = tail;
            }
        }
    }
    out
}

#[test]
fn applied_is_one_boolean_column_of_the_table() {
    let r = request(&[1], &["v"], false);
    let rows = r.answer(true, &current(&r, &[(1, 10)], None), NOW_S);
    assert_eq!(names(&rows), ["[applied]"]);
    let spec = &rows.metadata.columns[0];
    assert_eq!(
        (spec.table.keyspace.as_str(), spec.table.table.as_str()),
        ("ks", "ck")
    );
    assert_eq!(spec.ty, ColumnType::Boolean);
    assert_eq!(rows.rows_count, 1);
    assert_eq!(cells(&rows), [Some(vec![1])]);
}

#[test]
fn not_applied_on_a_missing_row_is_false_alone() {
    let r = request(&[1], &["v"], false);
    let rows = r.answer(false, &current(&r, &[], None), NOW_S);
    assert_eq!(names(&rows), ["[applied]"]);
    assert_eq!(cells(&rows), [Some(vec![0])]);
}

#[test]
fn not_applied_shows_the_judged_rows_only() {
    // Row 2 lies between the judged rows 1 and 3 (the read covers it) and is not shown.
    let r = request(&[1, 3], &["k", "c", "v"], false);
    let rows = r.answer(false, &current(&r, &[(1, 10), (2, 20), (3, 30)], Some(7)), NOW_S);
    assert_eq!(names(&rows), ["[applied]", "k", "c", "v"]);
    assert_eq!(rows.rows_count, 2);
    let (f, one, three) = (Some(vec![0]), Some(int(1)), Some(int(3)));
    assert_eq!(
        cells(&rows),
        [
            f.clone(),
            one.clone(),
            one.clone(),
            Some(int(10)),
            f,
            one,
            three,
            Some(int(30))
        ]
    );
}

#[test]
fn static_checks_show_the_partition_s_first_row() {
    // Only the static row is checked: the first live row is read and shown (its regular
    // columns were not read, as in Cassandra).
    let r = request(&[], &["k", "c", "s", "v"], true);
    let rows = r.answer(false, &current(&r, &[(4, 40), (5, 50)], Some(7)), NOW_S);
    assert_eq!(
        cells(&rows),
        [Some(vec![0]), Some(int(1)), Some(int(4)), Some(int(7)), None]
    );
}

#[test]
fn the_static_row_alone_shows_null_clustering_columns() {
    let r = request(&[], &["s"], true);
    let rows = r.answer(false, &current(&r, &[], Some(7)), NOW_S);
    assert_eq!(names(&rows), ["[applied]", "s"]);
    assert_eq!(cells(&rows), [Some(vec![0]), Some(int(7))]);
    // Static values are shown only when the static row was read.
    let r = request(&[1], &["k", "c", "s", "v"], false);
    let rows = r.answer(false, &current(&r, &[(1, 10)], Some(7)), NOW_S);
    assert_eq!(
        cells(&rows),
        [Some(vec![0]), Some(int(1)), Some(int(1)), None, Some(int(10))]
    );
}
