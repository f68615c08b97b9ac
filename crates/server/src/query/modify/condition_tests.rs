//! Conditions judged on stored rows: each operator, null on either side, IN, whole
//! collections (frozen and not), their elements, and the refusals Cassandra makes.

use hayate_cql::request::Values;
use hayate_cql::statement::{parse, Condition, Statement};
use hayate_cql::wire::Value;
use hayate_storage::row::{Cell, Row};

use super::*;
use crate::query::cells::list_path;
use crate::schema::{ddl, Schema};

const NOW_S: u32 = 1_000_000;

fn table() -> Table {
    let mut schema = Schema::default();
    ddl::add_test_keyspace(
        &mut schema,
        1,
        &[
            "CREATE TABLE ks.t (k int PRIMARY KEY, v int, w text, l list<int>, m map<text, int>, \
           st set<int>, fl frozen<list<int>>, fm frozen<map<text, int>>)",
        ],
    );
    let ks = &schema.keyspaces["ks"];
    Table::clone(ks.tables.values().next().expect("the table"))
}

fn int(v: i32) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

/// The row `k = 1, v = 10, w = 'b', l = [1, 2], m = {'a': 1, 'b': 2}, st = {1, 2},
/// fl = [1, 2], fm = {'a': 1}`, as stored.
fn row(t: &Table) -> Row {
    let id = |name: &str| t.column(name).expect("column").id;
    let mut cells = vec![
        Cell::live(id("v"), 1, int(10)),
        Cell::live(id("w"), 1, b"b".to_vec()),
    ];
    for (i, e) in [1, 2].into_iter().enumerate() {
        let mut c = Cell::live(id("l"), 1, int(e));
        c.path = list_path(1, i as u64, false);
        cells.push(c);
    }
    for (k, v) in [("a", 1), ("b", 2)] {
        let mut c = Cell::live(id("m"), 1, int(v));
        c.path = element_path(&DataType::Text, k.as_bytes());
        cells.push(c);
    }
    for e in [1, 2] {
        let mut c = Cell::live(id("st"), 1, Vec::new());
        c.path = element_path(&DataType::Int, &int(e));
        cells.push(c);
    }
    let mut fl = Vec::new();
    hayate_cql::value::encode_list([int(1), int(2)].iter(), &mut fl);
    cells.push(Cell::live(id("fl"), 1, fl));
    let mut fm = Vec::new();
    hayate_cql::value::encode_map(&DataType::Text, vec![(b"a".to_vec(), int(1))], &mut fm);
    cells.push(Cell::live(id("fm"), 1, fm));
    let mut row = Row {
        cells,
        ..Row::default()
    };
    row.normalize();
    row
}

/// Judges `IF <condition>` (with `values` for its markers) on `row`.
fn judge(t: &Table, condition: &str, values: &[Value], row: Option<&Row>) -> QueryResult<bool> {
    let parsed = parse(&format!("UPDATE ks.t SET v = 1 WHERE k = 1 IF {condition}")).expect("parses");
    let Statement::Update(u) = &parsed.statement else {
        panic!("an UPDATE")
    };
    let Condition::If(relations) = &u.condition else {
        panic!("IF conditions")
    };
    let values = Values::Positional(values.to_vec());
    let binds = Binds::new(&values, &parsed.bind_markers, &[]).expect("binds");
    let mut all = true;
    for c in compile(t, relations)? {
        all &= c.bind(t, &binds)?.holds(t, row, NOW_S)?;
    }
    Ok(all)
}

/// [`judge`], for conditions that must not be refused.
fn holds(t: &Table, condition: &str, values: &[Value], row: Option<&Row>) -> bool {
    judge(t, condition, values, row).expect(condition)
}

#[test]
fn each_operator_on_a_scalar() {
    let t = table();
    let r = row(&t);
    let cases = [
        ("v = 10", true),
        ("v = 11", false),
        ("v != 11", true),
        ("v != 10", false),
        ("v < 11", true),
        ("v < 10", false),
        ("v <= 10", true),
        ("v > 9", true),
        ("v > 10", false),
        ("v >= 10", true),
        ("v >= 11", false),
        ("v IN (1, 10)", true),
        ("v IN (1, 2)", false),
        ("v IN ()", false),
        ("w = 'b'", true),
        ("w > 'a'", true),
        ("w < 'a'", false),
        ("v = 10 AND w = 'c'", false),
    ];
    for (condition, holds) in cases {
        assert_eq!(
            judge(&t, condition, &[], Some(&r)).expect(condition),
            holds,
            "{condition}"
        );
    }
}

#[test]
fn null_on_either_side() {
    let t = table();
    let r = row(&t);
    // A null value takes = and != only.
    assert!(!holds(&t, "v = null", &[], Some(&r)));
    assert!(holds(&t, "v != null", &[], Some(&r)));
    let e = judge(&t, "v < null", &[], Some(&r)).expect_err("refused");
    assert!(
        e.to_string()
            .contains(r#"Invalid comparison with null for operator "<""#),
        "{e}"
    );
    // A null column (or a missing row) satisfies only `= null` and `!= value`.
    for row in [None, Some(&Row::default())] {
        assert!(holds(&t, "v = null", &[], row));
        assert!(holds(&t, "v != 3", &[], row));
        assert!(!holds(&t, "v = 3", &[], row));
        assert!(!holds(&t, "v > 3", &[], row));
        assert!(!holds(&t, "v != null", &[], row));
        assert!(holds(&t, "v IN (null, 3)", &[], row));
    }
    // An expired cell is a null.
    let mut expired = Row::default();
    expired.cells.push(Cell::expiring(
        t.column("v").expect("v").id,
        1,
        int(10),
        5,
        NOW_S - 10,
    ));
    assert!(holds(&t, "v = null", &[], Some(&expired)));
}

#[test]
fn bound_values_null_unset_and_in_lists() {
    let t = table();
    let r = row(&t);
    let ten = int(10);
    assert!(holds(&t, "v = ?", &[Value::Bytes(&ten)], Some(&r)));
    assert!(!holds(&t, "v = ?", &[Value::Null], Some(&r)));
    let e = judge(&t, "v = ?", &[Value::NotSet], Some(&r)).expect_err("refused");
    assert!(
        e.to_string().contains("Invalid 'unset' value in condition"),
        "{e}"
    );
    let mut list = Vec::new();
    hayate_cql::value::encode_list([int(3), int(10)].iter(), &mut list);
    assert!(holds(&t, "v IN ?", &[Value::Bytes(&list)], Some(&r)));
    let e = judge(&t, "v IN ?", &[Value::Null], Some(&r)).expect_err("refused");
    assert!(e.to_string().contains("Invalid null list in IN condition"), "{e}");
    // Unset values in an IN list are left out.
    assert!(holds(&t, "v IN (?, 10)", &[Value::NotSet], Some(&r)));
}

#[test]
fn collections_whole_and_by_element() {
    let t = table();
    let r = row(&t);
    let cases = [
        ("m['a'] = 1", true),
        ("m['a'] = 2", false),
        ("m['zz'] = null", true),
        ("m['b'] > 1", true),
        ("l[0] = 1", true),
        ("l[1] = 1", false),
        ("l[9] = null", true),
        ("fl[1] = 2", true),
        ("fm['a'] = 1", true),
        ("fm['b'] = null", true),
        ("m = {'a': 1, 'b': 2}", true),
        ("m = {'b': 2, 'a': 1}", true),
        ("m = {'a': 1}", false),
        ("m > {'a': 1}", true),
        ("m < {'a': 1, 'c': 0}", true),
        ("l = [1, 2]", true),
        ("l < [1, 3]", true),
        ("l >= [1, 2, 0]", false),
        ("st = {2, 1}", true),
        ("st != {1}", true),
        ("fl = [1, 2]", true),
        ("fl > [1]", true),
        ("m CONTAINS KEY 'b'", true),
        ("m CONTAINS 2", true),
        ("st CONTAINS 3", false),
        ("l CONTAINS 2", true),
    ];
    for (condition, holds) in cases {
        assert_eq!(
            judge(&t, condition, &[], Some(&r)).expect(condition),
            holds,
            "{condition}"
        );
    }
}

#[test]
fn an_absent_collection_is_null_and_empty() {
    let t = table();
    let empty = Row::default();
    assert!(holds(&t, "l = null", &[], Some(&empty)));
    assert!(holds(&t, "st = {}", &[], Some(&empty)));
    // To an ordering it is null, as Cassandra 5.0.6 judges it.
    assert!(!holds(&t, "l < [0]", &[], Some(&empty)));
    assert!(!holds(&t, "l >= [0]", &[], Some(&empty)));
    assert!(!holds(&t, "l != null", &[], Some(&empty)));
    assert!(!holds(&t, "m['a'] = 1", &[], None));
}

#[test]
fn refusals() {
    let t = table();
    let refused = |condition: &str, message: &str| {
        let e = judge(&t, condition, &[], None).expect_err("refused");
        assert!(e.to_string().contains(message), "{condition}: {e}");
    };
    refused("k = 1", "PRIMARY KEY column 'k' cannot have IF conditions");
    refused("st[1] = 1", "Invalid element access syntax for set column st");
    refused(
        "v[1] = 1",
        "Invalid element access syntax for non-collection column v",
    );
    refused("nope = 1", "Undefined column name nope");
    refused("v CONTAINS KEY 1", "Cannot use CONTAINS KEY on non-map column v");
    refused("l[-1] = 1", "Invalid negative list index -1");
    refused("m[null] = 1", "Invalid null value for map element access");
}
