//! A modification statement compiled once and bound many times, and a plan dropped when a table
//! it names changes: the row updates are checked as planned, before any coordinator sees them.

use std::sync::Arc;

use hayate_cql::request::Values;
use hayate_cql::statement::{parse, Parsed};
use hayate_cql::wire::{Consistency, Value};
use hayate_storage::{ManualClock, Row};

use super::{plan, Mutation, Plan, Target};
use crate::config::GuardrailsConfig;
use crate::query::{keys, Binds, Context, Guard, Memo, Warnings};
use crate::schema::{ddl, Schema, Table};

const NOW_US: i64 = 1_750_000_000_000_000;

const TABLES: &[&str] = &[
    "CREATE TABLE t (k int, c int, s int static, v text, PRIMARY KEY (k, c))",
    "CREATE TABLE u (k int PRIMARY KEY, l list<int>)",
];

/// What a request needs besides its statement, against a schema of the test's own.
struct Node {
    schema: Arc<Schema>,
    clock: ManualClock,
    guardrails: GuardrailsConfig,
    warnings: Warnings,
}

impl Node {
    fn new(schema: Schema) -> Node {
        Node {
            schema: Arc::new(schema),
            clock: ManualClock::new(NOW_US),
            guardrails: GuardrailsConfig::DEFAULT,
            warnings: Warnings::default(),
        }
    }

    fn context<'a>(&'a self, memo: &'a Memo) -> Context<'a> {
        Context {
            schema: self.schema.clone(),
            keyspace: Some("ks"),
            role: None,
            consistency: Consistency::One,
            serial_consistency: hayate_cql::wire::Consistency::Serial,
            page_size: None,
            paging_state: None,
            default_timestamp_us: None,
            skip_metadata: false,
            clock: &self.clock,
            memo: Some(memo),
            guard: Guard {
                config: &self.guardrails,
                warnings: &self.warnings,
            },
        }
    }

    fn table(&self, name: &str) -> &Arc<Table> {
        &self.schema.keyspace("ks").expect("ks").tables[name]
    }

    /// The mutations of one EXECUTE of `parsed` with `values`, its memo `memo`.
    fn execute(&self, memo: &Memo, parsed: &Parsed, values: &[Value<'_>]) -> Vec<Mutation> {
        let values = Values::Positional(values.to_vec());
        let binds = Binds::new(&values, &parsed.bind_markers, &[]).expect("binds");
        let mut mutations = Vec::new();
        plan(&self.context(memo), &parsed.statement, &binds, &mut mutations).expect("plans");
        mutations
    }
}

fn schema() -> Schema {
    let mut schema = Schema::default();
    ddl::add_test_keyspace(&mut schema, 1, TABLES);
    schema
}

/// `schema` with table `name` replaced by an equal copy: what a schema change leaves of a table
/// the statement names (a new `Arc`), with the other tables as they were.
fn with_new_table(schema: &Schema, name: &str) -> Schema {
    let mut schema = schema.clone();
    let ks = schema.keyspaces.get_mut("ks").expect("ks");
    let mut copy = (**ks).clone();
    let table = (*copy.tables[name]).clone();
    copy.tables.insert(name.to_owned(), Arc::new(table));
    *ks = Arc::new(copy);
    schema
}

fn int(v: i32) -> [u8; 4] {
    v.to_be_bytes()
}

/// The one row update of `m`, and its clustering key.
fn row(m: &Mutation) -> (&[u8], &Row) {
    match &m.target {
        Target::Row {
            clustering, update, ..
        } => (clustering, update),
        Target::Range { .. } => panic!("a range, not a row"),
    }
}

fn values(update: &Row) -> Vec<Option<&[u8]>> {
    update.cells.iter().map(|c| c.value_at(0)).collect()
}

#[test]
fn one_plan_binds_each_request_into_its_own_rows() {
    let node = Node::new(schema());
    let table = node.table("t").clone();
    let memo = Memo::default();
    let update = parse("UPDATE t SET v = ? WHERE k = ? AND c = ?").expect("parses");

    let (k1, c1, k2, c2) = (int(1), int(10), int(2), int(20));
    let first = node.execute(
        &memo,
        &update,
        &[Value::Bytes(b"one"), Value::Bytes(&k1), Value::Bytes(&c1)],
    );
    let plan = memo
        .modify
        .get()
        .expect("the first EXECUTE leaves its plan")
        .clone();
    let second = node.execute(
        &memo,
        &update,
        &[Value::Bytes(b"two"), Value::Bytes(&k2), Value::Bytes(&c2)],
    );
    assert!(
        Arc::ptr_eq(&plan, memo.modify.get().expect("kept")),
        "the second EXECUTE compiled a plan of its own"
    );

    for (mutations, k, c, v) in [(&first, k1, c1, b"one"), (&second, k2, c2, b"two")] {
        assert_eq!(mutations.len(), 1);
        let m = &mutations[0];
        assert_eq!(m.partition, keys::partition_key(&[&k]).expect("a key"));
        let (clustering, update) = row(m);
        assert_eq!(clustering, keys::clustering_key(&table, &[&c]));
        assert_eq!(values(update), vec![Some(&v[..])]);
        assert!(update.liveness.is_none(), "an UPDATE writes no row marker");
    }

    // A static column only: the partition's static row, whatever the values.
    let statics = parse("UPDATE t SET s = ? WHERE k = ?").expect("parses");
    let memo = Memo::default();
    for k in [3, 4] {
        let mutations = node.execute(
            &memo,
            &statics,
            &[Value::Bytes(&int(k * 100)), Value::Bytes(&int(k))],
        );
        assert_eq!(mutations.len(), 1);
        assert_eq!(
            mutations[0].partition,
            keys::partition_key(&[&int(k)]).expect("a key")
        );
        let (clustering, update) = row(&mutations[0]);
        assert!(
            clustering.is_empty(),
            "the static row has the empty clustering key"
        );
        assert_eq!(values(update), vec![Some(&int(k * 100)[..])]);
    }
}

#[test]
fn an_insert_plan_takes_new_values_and_unset_ones() {
    let node = Node::new(schema());
    let memo = Memo::default();
    let insert = parse("INSERT INTO t (k, c, v) VALUES (?, ?, ?)").expect("parses");

    let (k, c) = (int(1), int(2));
    let set = node.execute(
        &memo,
        &insert,
        &[Value::Bytes(&k), Value::Bytes(&c), Value::Bytes(b"x")],
    );
    let unset = node.execute(
        &memo,
        &insert,
        &[Value::Bytes(&k), Value::Bytes(&c), Value::NotSet],
    );
    let null = node.execute(&memo, &insert, &[Value::Bytes(&k), Value::Bytes(&c), Value::Null]);
    assert_eq!(values(row(&set[0]).1), vec![Some(&b"x"[..])]);
    assert_eq!(
        values(row(&unset[0]).1),
        Vec::<Option<&[u8]>>::new(),
        "an unset value writes no cell"
    );
    assert_eq!(
        values(row(&null[0]).1),
        vec![None],
        "a null value writes a tombstone"
    );
    assert!(
        row(&unset[0]).1.liveness.is_some(),
        "an INSERT writes the row marker"
    );
}

#[test]
fn a_plan_is_compiled_again_once_a_table_it_names_changes() {
    let before = Node::new(schema());
    let memo = Memo::default();
    let batch = parse(
        "BEGIN BATCH UPDATE t SET v = ? WHERE k = ? AND c = ?; DELETE l FROM u WHERE k = ?; APPLY BATCH",
    )
    .expect("parses");
    let (k, c) = (int(1), int(2));
    let binds = [
        Value::Bytes(b"v"),
        Value::Bytes(&k),
        Value::Bytes(&c),
        Value::Bytes(&k),
    ];
    assert_eq!(before.execute(&memo, &batch, &binds).len(), 2);
    let plan = memo.modify.get().expect("kept").clone();
    before.execute(&memo, &batch, &binds);
    let own_memo = Memo::default();
    let (reused, _) = Plan::for_statement(&before.context(&memo), &batch.statement).expect("plans");
    assert!(Arc::ptr_eq(&reused, &plan), "the same tables: the same plan");

    // The second table of the batch changes, the first does not: the plan is not good any more.
    let after = Node::new(with_new_table(&before.schema, "u"));
    assert!(Arc::ptr_eq(after.table("t"), before.table("t")));
    let (fresh, _) = Plan::for_statement(&after.context(&memo), &batch.statement).expect("plans");
    assert!(
        !Arc::ptr_eq(&fresh, &plan),
        "a plan for a table that is gone was used"
    );
    assert!(Arc::ptr_eq(&fresh.writes[1].table, after.table("u")));
    let mutations = after.execute(&memo, &batch, &binds);
    assert!(
        Arc::ptr_eq(&mutations[1].table, after.table("u")),
        "the DELETE writes the table as it is now"
    );
    // The memo keeps the plan it had: it is only slower for the statement.
    assert!(Arc::ptr_eq(memo.modify.get().expect("kept"), &plan));

    // A memo of its own, on the new schema, keeps the new plan.
    after.execute(&own_memo, &batch, &binds);
    let kept = own_memo.modify.get().expect("kept").clone();
    assert!(Arc::ptr_eq(&kept.writes[1].table, after.table("u")));
}

/// Compiling finds an unknown column before any value is bound, but reports it where it always
/// was: after what the WHERE clause lacks, and after the values of the columns before it.
#[test]
fn a_column_the_plan_could_not_resolve_is_reported_in_its_old_place() {
    let node = Node::new(schema());
    let error = |cql: &str| {
        let parsed = parse(cql).expect("parses");
        let binds = Binds::new(&Values::None, &parsed.bind_markers, &[]).expect("binds");
        let memo = Memo::default();
        let mut mutations = Vec::new();
        match plan(&node.context(&memo), &parsed.statement, &binds, &mut mutations) {
            Err(e) => e.to_string(),
            Ok(()) => panic!("{cql}: planned"),
        }
    };
    assert_eq!(
        error("UPDATE t SET nosuch = 1 WHERE k = 1"),
        "Some clustering keys are missing: c"
    );
    assert_eq!(
        error("UPDATE t SET v = 'x', nosuch = 1 WHERE k = 1 AND c = 1"),
        "Undefined column name nosuch"
    );
    assert_eq!(
        error("INSERT INTO t (k, c, v, nosuch) VALUES (1, 2, null, 4)"),
        "Undefined column name nosuch"
    );
    assert_eq!(
        error("INSERT INTO t (k, c, nosuch) VALUES (null, 2, 3)"),
        "Undefined column name nosuch",
        "a null key is judged after every column is found, as before"
    );
    assert_eq!(
        error("DELETE nosuch FROM t WHERE k = 1 AND c > 1"),
        "Range deletions are not supported for specific columns"
    );
}
