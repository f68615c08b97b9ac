//! The parser against the statements real clients send: YCSB's CassandraCQLClient, the Python
//! and Java drivers at connect time, cqlsh, and hand-written DDL, plus the lexer's ambiguous
//! cases, syntax error positions, and the bounds that keep hostile text from hurting us.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::value::Literal;

fn ok(text: &str) -> Parsed {
    parse(text).unwrap_or_else(|e| panic!("{text:?} should parse, got: {e}"))
}

fn statement(text: &str) -> Statement {
    ok(text).statement
}

fn err(text: &str) -> SyntaxError {
    match parse(text) {
        Ok(parsed) => panic!("{text:?} should not parse, got: {:?}", parsed.statement),
        Err(e) => e,
    }
}

fn select(text: &str) -> Select {
    match statement(text) {
        Statement::Select(s) => s,
        other => panic!("not a select: {other:?}"),
    }
}

fn insert(text: &str) -> Insert {
    match statement(text) {
        Statement::Insert(s) => s,
        other => panic!("not an insert: {other:?}"),
    }
}

fn update(text: &str) -> Update {
    match statement(text) {
        Statement::Update(s) => s,
        other => panic!("not an update: {other:?}"),
    }
}

fn delete(text: &str) -> Delete {
    match statement(text) {
        Statement::Delete(s) => s,
        other => panic!("not a delete: {other:?}"),
    }
}

fn create_table(text: &str) -> CreateTable {
    match statement(text) {
        Statement::CreateTable(s) => s,
        other => panic!("not a create table: {other:?}"),
    }
}

/// The single term of `SELECT * FROM t WHERE a = <term>`.
fn term(text: &str) -> Term {
    match select(&format!("SELECT * FROM t WHERE a = {text}"))
        .where_clause
        .remove(0)
    {
        Relation::Compare { rhs, .. } => rhs,
        other => panic!("not a comparison: {other:?}"),
    }
}

fn lit(literal: Literal) -> Term {
    Term::Literal(literal)
}

fn int(text: &str) -> Term {
    lit(Literal::Int(text.to_owned()))
}

fn string(text: &str) -> Term {
    lit(Literal::Str(text.to_owned()))
}

fn name(text: &str) -> QualifiedName {
    match text.split_once('.') {
        Some((ks, n)) => QualifiedName::new(Some(ks), n),
        None => QualifiedName::new(None, text),
    }
}

fn col(c: &str) -> RelationLhs {
    RelationLhs::Column(c.to_owned())
}

fn eq(c: &str, rhs: Term) -> Relation {
    Relation::Compare {
        lhs: col(c),
        op: CompareOp::Eq,
        rhs,
    }
}

fn function(n: &str, args: Vec<Term>) -> Term {
    Term::Function { name: name(n), args }
}

fn unnamed(count: usize) -> Vec<BindMarker> {
    vec![BindMarker { name: None }; count]
}

// ---- YCSB's CassandraCQLClient ----

#[test]
fn ycsb_insert() {
    let fields: Vec<String> = (0..10).map(|i| format!("field{i}")).collect();
    let text = format!(
        "INSERT INTO usertable (y_id,{}) VALUES (?{})",
        fields.join(","),
        ",?".repeat(10)
    );
    let parsed = ok(&text);
    assert_eq!(parsed.bind_markers, unnamed(11));
    let Statement::Insert(insert) = parsed.statement else {
        panic!()
    };
    assert_eq!(insert.table, name("usertable"));
    let InsertValues::Columns { columns, values } = insert.values else {
        panic!()
    };
    assert_eq!(columns[0], "y_id");
    assert_eq!(columns[10], "field9");
    assert_eq!(values, (0..11).map(Term::Marker).collect::<Vec<_>>());
    assert!(!insert.if_not_exists);
    assert_eq!(insert.using, Using::default());
}

#[test]
fn ycsb_read() {
    let parsed = ok("SELECT * FROM usertable WHERE y_id = ? LIMIT 1");
    assert_eq!(parsed.bind_markers, unnamed(1));
    let Statement::Select(s) = parsed.statement else {
        panic!()
    };
    assert_eq!(s.selection, Selection::Wildcard);
    assert_eq!(s.where_clause, vec![eq("y_id", Term::Marker(0))]);
    assert_eq!(s.limit, Some(int("1")));

    let s = select("SELECT field0,field1 FROM usertable WHERE y_id = ? LIMIT 1");
    let Selection::Selectors(selectors) = s.selection else {
        panic!()
    };
    assert_eq!(
        selectors,
        vec![
            Selector {
                expr: SelectorExpr::Column("field0".into()),
                alias: None
            },
            Selector {
                expr: SelectorExpr::Column("field1".into()),
                alias: None
            },
        ]
    );
}

#[test]
fn ycsb_scan() {
    let parsed = ok("SELECT field0,field1 FROM usertable WHERE token(y_id) >= token(?) LIMIT ?");
    assert_eq!(parsed.bind_markers, unnamed(2));
    let Statement::Select(s) = parsed.statement else {
        panic!()
    };
    assert_eq!(
        s.where_clause,
        vec![Relation::Compare {
            lhs: RelationLhs::Token(vec!["y_id".into()]),
            op: CompareOp::Gte,
            rhs: function("token", vec![Term::Marker(0)]),
        }]
    );
    assert_eq!(s.limit, Some(Term::Marker(1)));
    assert_eq!(
        select("SELECT * FROM usertable WHERE token(y_id) >= token(?) LIMIT ?").limit,
        Some(Term::Marker(1))
    );
}

#[test]
fn ycsb_update_and_delete() {
    let u = update("UPDATE usertable SET field1 = ? WHERE y_id = ?");
    assert_eq!(
        u.assignments,
        vec![Assignment {
            column: "field1".into(),
            operation: Operation::Set(Term::Marker(0))
        }]
    );
    assert_eq!(u.where_clause, vec![eq("y_id", Term::Marker(1))]);
    assert_eq!(u.condition, Condition::None);

    let d = delete("DELETE FROM usertable WHERE y_id = ?");
    assert!(d.targets.is_empty());
    assert_eq!(d.where_clause, vec![eq("y_id", Term::Marker(0))]);
}

#[test]
fn ycsb_create_table() {
    let t = create_table(
        "CREATE TABLE ycsb.usertable (y_id varchar primary key, field0 varchar, field1 varchar, \
         field2 varchar)",
    );
    assert_eq!(t.table, name("ycsb.usertable"));
    assert_eq!(t.partition_key, vec!["y_id"]);
    assert!(t.clustering_columns.is_empty());
    assert_eq!(t.columns.len(), 4);
    assert_eq!(t.columns[0].type_text, "varchar");
}

// ---- What drivers and cqlsh send at connect ----

#[test]
fn driver_system_queries() {
    let s = select("SELECT * FROM system.local WHERE key='local'");
    assert_eq!(s.table, name("system.local"));
    assert_eq!(s.where_clause, vec![eq("key", string("local"))]);

    let s = select(
        "SELECT peer, data_center, host_id, preferred_ip, rack, rpc_address, schema_version, tokens \
         FROM system.peers",
    );
    let Selection::Selectors(selectors) = s.selection else {
        panic!()
    };
    assert_eq!(selectors.len(), 8);
    assert_eq!(selectors[7].expr, SelectorExpr::Column("tokens".into()));
    assert!(s.where_clause.is_empty());

    for text in [
        "SELECT * FROM system_schema.keyspaces",
        "SELECT * FROM system_schema.tables",
        "SELECT * FROM system_schema.columns",
        "SELECT * FROM system_schema.types",
        "SELECT * FROM system_schema.functions",
        "SELECT * FROM system_schema.aggregates",
        "SELECT * FROM system_schema.views",
        "SELECT * FROM system_schema.indexes",
        "SELECT * FROM system_schema.triggers",
        "SELECT * FROM system.peers_v2",
        "SELECT schema_version FROM system.local WHERE key='local'",
        "SELECT peer, rpc_address, schema_version FROM system.peers",
        "SELECT cluster_name, release_version FROM system.local",
        "SELECT * FROM system_virtual_schema.keyspaces",
        "select * from system_schema.tables where keyspace_name = 'ks' and table_name = 'usertable'",
    ] {
        ok(text);
    }
}

// ---- SELECT ----

#[test]
fn select_everything() {
    let s = select(
        "SELECT JSON DISTINCT a AS x, count(*), COUNT(1), COUNT(b), writetime(c), TTL(c), \
         token(a, b), toJson(m), now(), toTimestamp(now()), max(v), CAST(v AS text) AS v_text, \
         ks.f(1, ?) \
         FROM ks.t WHERE a = 1 AND b IN (1, 2) AND c > 3 AND c <= 10 AND d != 'x' \
         AND s CONTAINS 5 AND m CONTAINS KEY 'k' AND n LIKE 'ab%' AND z IS NOT NULL \
         GROUP BY a, b ORDER BY c DESC, d ASC, e PER PARTITION LIMIT 2 LIMIT 100 ALLOW FILTERING",
    );
    assert!(s.json && s.distinct && s.allow_filtering);
    let Selection::Selectors(sel) = s.selection else {
        panic!()
    };
    let exprs: Vec<SelectorExpr> = sel.iter().map(|s| s.expr.clone()).collect();
    assert_eq!(sel[0].alias.as_deref(), Some("x"));
    assert_eq!(exprs[1], SelectorExpr::CountRows);
    assert_eq!(exprs[2], SelectorExpr::CountRows);
    assert_eq!(
        exprs[3],
        SelectorExpr::Function {
            name: name("count"),
            args: vec![SelectorExpr::Column("b".into())]
        }
    );
    assert_eq!(exprs[4], SelectorExpr::WriteTime("c".into()));
    assert_eq!(exprs[5], SelectorExpr::Ttl("c".into()));
    assert_eq!(
        exprs[6],
        SelectorExpr::Function {
            name: name("token"),
            args: vec![SelectorExpr::Column("a".into()), SelectorExpr::Column("b".into())]
        }
    );
    assert_eq!(
        exprs[9],
        SelectorExpr::Function {
            name: name("totimestamp"),
            args: vec![SelectorExpr::Function {
                name: name("now"),
                args: vec![]
            }]
        }
    );
    assert_eq!(
        exprs[11],
        SelectorExpr::Cast {
            expr: Box::new(SelectorExpr::Column("v".into())),
            type_text: "text".into()
        }
    );
    assert_eq!(sel[11].alias.as_deref(), Some("v_text"));
    assert_eq!(
        exprs[12],
        SelectorExpr::Function {
            name: name("ks.f"),
            args: vec![SelectorExpr::Term(int("1")), SelectorExpr::Term(Term::Marker(0))]
        }
    );
    let ops: Vec<_> = s
        .where_clause
        .iter()
        .map(|r| match r {
            Relation::Compare { op, .. } => Some(*op),
            _ => None,
        })
        .collect();
    use CompareOp::*;
    assert_eq!(
        ops,
        vec![
            Some(Eq),
            None,
            Some(Gt),
            Some(Lte),
            Some(Neq),
            Some(Contains),
            Some(ContainsKey),
            Some(Like),
            None
        ]
    );
    assert_eq!(
        s.where_clause[1],
        Relation::In {
            lhs: col("b"),
            values: InValues::Terms(vec![int("1"), int("2")])
        }
    );
    assert_eq!(s.where_clause[8], Relation::IsNotNull { column: "z".into() });
    assert_eq!(s.group_by, vec!["a", "b"]);
    assert_eq!(
        s.order_by,
        vec![
            Ordering {
                column: "c".into(),
                descending: true
            },
            Ordering {
                column: "d".into(),
                descending: false
            },
            Ordering {
                column: "e".into(),
                descending: false
            },
        ]
    );
    assert_eq!(s.per_partition_limit, Some(int("2")));
    assert_eq!(s.limit, Some(int("100")));
}

#[test]
fn json_and_distinct_are_also_column_names() {
    let s = select("SELECT json, distinct FROM t");
    assert!(!s.json && !s.distinct);
    assert_eq!(
        s.selection,
        Selection::Selectors(vec![
            Selector {
                expr: SelectorExpr::Column("json".into()),
                alias: None
            },
            Selector {
                expr: SelectorExpr::Column("distinct".into()),
                alias: None
            },
        ])
    );
    assert!(!select("SELECT json FROM t").json);
    assert!(select("SELECT JSON * FROM t").json);
}

#[test]
fn multi_column_and_token_relations() {
    let parsed = ok(
        "SELECT * FROM t WHERE k = ? AND (c1, c2) > (1, ?) AND (c1, c2) IN ((1, 2), (3, 4)) \
         AND (c1, c2) = ? AND (c1, c2) IN ? AND token(a, b) > token(1, 'x') AND c IN ? AND d IN :ds",
    );
    assert_eq!(parsed.bind_markers.len(), 6);
    assert_eq!(parsed.bind_markers[5].name.as_deref(), Some("ds"));
    let Statement::Select(s) = parsed.statement else {
        panic!()
    };
    let tuple = RelationLhs::Tuple(vec!["c1".into(), "c2".into()]);
    assert_eq!(
        s.where_clause[1],
        Relation::Compare {
            lhs: tuple.clone(),
            op: CompareOp::Gt,
            rhs: Term::Tuple(vec![int("1"), Term::Marker(1)])
        }
    );
    assert_eq!(
        s.where_clause[2],
        Relation::In {
            lhs: tuple.clone(),
            values: InValues::Terms(vec![
                Term::Tuple(vec![int("1"), int("2")]),
                Term::Tuple(vec![int("3"), int("4")])
            ])
        }
    );
    assert_eq!(
        s.where_clause[3],
        Relation::Compare {
            lhs: tuple.clone(),
            op: CompareOp::Eq,
            rhs: Term::Marker(2)
        }
    );
    assert_eq!(
        s.where_clause[4],
        Relation::In {
            lhs: tuple,
            values: InValues::Marker(3)
        }
    );
    assert_eq!(
        s.where_clause[5],
        Relation::Compare {
            lhs: RelationLhs::Token(vec!["a".into(), "b".into()]),
            op: CompareOp::Gt,
            rhs: function("token", vec![int("1"), string("x")])
        }
    );
    assert_eq!(
        s.where_clause[6],
        Relation::In {
            lhs: col("c"),
            values: InValues::Marker(4)
        }
    );
    assert_eq!(
        select("SELECT * FROM t WHERE token(a) >= ?").where_clause,
        vec![Relation::Compare {
            lhs: RelationLhs::Token(vec!["a".into()]),
            op: CompareOp::Gte,
            rhs: Term::Marker(0)
        }]
    );
    assert_eq!(
        select("SELECT * FROM t WHERE a IN ()").where_clause,
        vec![Relation::In {
            lhs: col("a"),
            values: InValues::Terms(vec![])
        }]
    );
}

// ---- Terms and the lexer ----

#[test]
fn constants() {
    assert_eq!(term("'it''s'"), string("it's"));
    assert_eq!(term("$$it's a 'quote'$$"), string("it's a 'quote'"));
    assert_eq!(term("''"), string(""));
    assert_eq!(term("42"), int("42"));
    assert_eq!(term("-42"), int("-42"));
    assert_eq!(term("- 42"), int("-42"));
    assert_eq!(term("1.5"), lit(Literal::Float("1.5".into())));
    assert_eq!(term("1."), lit(Literal::Float("1.".into())));
    assert_eq!(term("1e5"), lit(Literal::Float("1e5".into())));
    assert_eq!(term("2.5E-3"), lit(Literal::Float("2.5E-3".into())));
    assert_eq!(term("-1.5e+10"), lit(Literal::Float("-1.5e+10".into())));
    assert_eq!(term("NaN"), lit(Literal::Float("NaN".into())));
    assert_eq!(term("Infinity"), lit(Literal::Float("Infinity".into())));
    assert_eq!(term("-Infinity"), lit(Literal::Float("-Infinity".into())));
    assert_eq!(term("true"), lit(Literal::Bool(true)));
    assert_eq!(term("FALSE"), lit(Literal::Bool(false)));
    assert_eq!(term("null"), lit(Literal::Null));
    assert_eq!(term("0xCAFE"), lit(Literal::Hex(vec![0xCA, 0xFE])));
    assert_eq!(term("0x"), lit(Literal::Hex(vec![])));
}

#[test]
fn lexer_ambiguities() {
    let uuid = |s: &str| lit(Literal::Uuid(s.to_owned()));
    let duration = |s: &str| lit(Literal::Duration(s.to_owned()));
    // Starts like the float 123e4567.
    assert_eq!(
        term("123e4567-e89b-12d3-a456-426614174000"),
        uuid("123e4567-e89b-12d3-a456-426614174000")
    );
    // Starts like an identifier.
    assert_eq!(
        term("deadbeef-0000-4000-8000-00000000ABCD"),
        uuid("deadbeef-0000-4000-8000-00000000ABCD")
    );
    assert_eq!(term("1h"), duration("1h"));
    assert_eq!(term("12h30m"), duration("12h30m"));
    assert_eq!(
        term("1y2mo3w4d5h6m7s8ms9us10ns"),
        duration("1y2mo3w4d5h6m7s8ms9us10ns")
    );
    assert_eq!(term("10µs"), duration("10µs"));
    assert_eq!(term("-3d"), duration("-3d"));
    assert_eq!(term("P1DT2H"), duration("P1DT2H"));
    assert_eq!(term("P1W"), duration("P1W"));
    assert_eq!(term("PT10S"), duration("PT10S"));
    assert_eq!(term("1e5"), lit(Literal::Float("1e5".into())));
    // A word that starts with P but is no duration stays a name (here, a function).
    assert_eq!(term("p1()"), function("p1", vec![]));
    assert_eq!(term("pt()"), function("pt", vec![]));
    // Minus is its own token, so `c = c -1` subtracts.
    assert_eq!(
        update("UPDATE t SET c = c -1 WHERE k = 0").assignments[0].operation,
        Operation::Subtract(int("1"))
    );
    assert!(err("SELECT * FROM t WHERE a = 12abc")
        .message
        .contains("invalid number '12abc'"));
    assert!(err("SELECT * FROM t WHERE a = 1h30")
        .message
        .contains("invalid number"));
    assert!(err("SELECT * FROM t WHERE a = 0xZZ")
        .message
        .contains("invalid blob constant"));
    assert!(err("SELECT * FROM t WHERE a = 0xABC")
        .message
        .contains("odd number of hex digits"));
}

#[test]
fn names_fold_unless_quoted() {
    let s = select("SeLeCt \"MyCol\", OtherCol FROM \"MyKs\".MyTable WHERE \"a\"\"b\" = 1");
    assert_eq!(s.table, name("MyKs.mytable"));
    let Selection::Selectors(sel) = s.selection else {
        panic!()
    };
    assert_eq!(sel[0].expr, SelectorExpr::Column("MyCol".into()));
    assert_eq!(sel[1].expr, SelectorExpr::Column("othercol".into()));
    assert_eq!(s.where_clause, vec![eq("a\"b", int("1"))]);
    // Unreserved keywords are names; reserved ones must be quoted.
    ok("SELECT key, type, ttl, count, values, options, login FROM t");
    ok("SELECT \"from\" FROM \"select\"");
    assert!(
        parser::RESERVED.windows(2).all(|w| w[0] < w[1]),
        "RESERVED must stay sorted"
    );
    let e = err("SELECT from FROM t");
    assert!(e.message.contains("'from'"), "{e}");
}

#[test]
fn comments_and_whitespace() {
    let s = select("-- a comment\nSELECT /* inline\n comment */ a // trailing\n FROM t -- more\n;");
    assert_eq!(s.table, name("t"));
    let e = err("SELECT * FROM t /* never closed");
    assert_eq!((e.line, e.column), (1, 17));
    assert!(e.message.contains("unterminated comment"));
}

#[test]
fn collections_and_structured_terms() {
    assert_eq!(term("[1, 2]"), Term::List(vec![int("1"), int("2")]));
    assert_eq!(term("[]"), Term::List(vec![]));
    assert_eq!(term("{1, 2}"), Term::Set(vec![int("1"), int("2")]));
    assert_eq!(term("{}"), Term::EmptyBraces);
    assert_eq!(
        term("{'a': 1, 'b': [2]}"),
        Term::Map(vec![
            (string("a"), int("1")),
            (string("b"), Term::List(vec![int("2")]))
        ])
    );
    assert_eq!(
        term("{street: '1 Main', zip: 12345}"),
        Term::UserType(vec![
            ("street".into(), string("1 Main")),
            ("zip".into(), int("12345"))
        ])
    );
    assert_eq!(
        term("{true: 1}"),
        Term::Map(vec![(lit(Literal::Bool(true)), int("1"))])
    );
    assert_eq!(term("(1, 'a')"), Term::Tuple(vec![int("1"), string("a")]));
    assert_eq!(term("(1)"), Term::Tuple(vec![int("1")]));
    assert_eq!(
        term("(int) ?"),
        Term::Cast {
            type_text: "int".into(),
            term: Box::new(Term::Marker(0))
        }
    );
    assert_eq!(
        term("(frozen<list<int>>)[1]"),
        Term::Cast {
            type_text: "frozen<list<int>>".into(),
            term: Box::new(Term::List(vec![int("1")]))
        }
    );
    assert_eq!(term("-?"), Term::Negate(Box::new(Term::Marker(0))));
    assert_eq!(term("now()"), function("now", vec![]));
    assert_eq!(term("uuid()"), function("uuid", vec![]));
    assert_eq!(term("currentTimestamp()"), function("currenttimestamp", vec![]));
    assert_eq!(
        term("toTimestamp(now())"),
        function("totimestamp", vec![function("now", vec![])])
    );
    assert_eq!(
        term("{now(): 1}"),
        Term::Map(vec![(function("now", vec![]), int("1"))])
    );
}

#[test]
fn bind_markers_number_in_order_of_appearance() {
    let parsed =
        ok("UPDATE t USING TTL ? SET m = m + {?: :v}, l[?] = ?, s = {?, ?} WHERE k = :key IF x = [?]");
    let names: Vec<Option<&str>> = parsed.bind_markers.iter().map(|m| m.name.as_deref()).collect();
    assert_eq!(
        names,
        vec![None, None, Some("v"), None, None, None, None, Some("key"), None]
    );
    let Statement::Update(u) = parsed.statement else {
        panic!()
    };
    assert_eq!(u.using.ttl, Some(Term::Marker(0)));
    assert_eq!(
        u.assignments[0].operation,
        Operation::Add(Term::Map(vec![(Term::Marker(1), Term::Marker(2))]))
    );
    assert_eq!(
        u.assignments[1].operation,
        Operation::SetElement {
            key: Term::Marker(3),
            value: Term::Marker(4)
        }
    );
    assert_eq!(u.where_clause, vec![eq("k", Term::Marker(7))]);
    assert_eq!(
        u.condition,
        Condition::If(vec![eq("x", Term::List(vec![Term::Marker(8)]))])
    );
    assert_eq!(
        ok("SELECT * FROM t WHERE k = :\"Key\"").bind_markers[0]
            .name
            .as_deref(),
        Some("Key")
    );
}

// ---- INSERT, UPDATE, DELETE ----

#[test]
fn insert_forms() {
    let i = insert(
        "INSERT INTO ks.t (k, v, m) VALUES (1, 'x', {'a': 1}) IF NOT EXISTS USING TTL 86400 AND \
         TIMESTAMP ?;",
    );
    assert_eq!(i.table, name("ks.t"));
    assert!(i.if_not_exists);
    assert_eq!(i.using.ttl, Some(int("86400")));
    assert_eq!(i.using.timestamp, Some(Term::Marker(0)));
    let i = insert("INSERT INTO t (k) VALUES (?) USING TIMESTAMP 123 AND TTL 5");
    assert_eq!(i.using.timestamp, Some(int("123")));
    assert_eq!(i.using.ttl, Some(int("5")));

    let i = insert("INSERT INTO t JSON '{\"k\": 1}' DEFAULT UNSET");
    assert_eq!(
        i.values,
        InsertValues::Json {
            json: string("{\"k\": 1}"),
            default_unset: true
        }
    );
    let i = insert("INSERT INTO t JSON ?");
    assert_eq!(
        i.values,
        InsertValues::Json {
            json: Term::Marker(0),
            default_unset: false
        }
    );
    let e = err("INSERT INTO t (a, b) VALUES (1)");
    assert!(e.message.contains("2 columns but 1 values"), "{e}");
    assert_eq!((e.line, e.column), (1, 29));
    assert!(err("INSERT INTO t (a) VALUES (1) USING TTL 1 AND TTL 2")
        .message
        .contains("TTL is given twice"));
}

#[test]
fn update_assignment_forms() {
    let u = update(
        "UPDATE ks.t USING TTL 10 AND TIMESTAMP 20 SET a = 1, l = l + [1], l = [0] + l, s = s - {2}, \
         m['k'] = 'v', l[0] = 5, c = c + 1, c = c - 1, n += 3, n -= ?, u.f = 1 \
         WHERE k = 1 AND c1 = 2 IF EXISTS",
    );
    let ops: Vec<(String, Operation)> = u
        .assignments
        .into_iter()
        .map(|a| (a.column, a.operation))
        .collect();
    assert_eq!(
        ops,
        vec![
            ("a".into(), Operation::Set(int("1"))),
            ("l".into(), Operation::Add(Term::List(vec![int("1")]))),
            ("l".into(), Operation::Prepend(Term::List(vec![int("0")]))),
            ("s".into(), Operation::Subtract(Term::Set(vec![int("2")]))),
            (
                "m".into(),
                Operation::SetElement {
                    key: string("k"),
                    value: string("v")
                }
            ),
            (
                "l".into(),
                Operation::SetElement {
                    key: int("0"),
                    value: int("5")
                }
            ),
            ("c".into(), Operation::Add(int("1"))),
            ("c".into(), Operation::Subtract(int("1"))),
            ("n".into(), Operation::Add(int("3"))),
            ("n".into(), Operation::Subtract(Term::Marker(0))),
            (
                "u".into(),
                Operation::SetField {
                    field: "f".into(),
                    value: int("1")
                }
            ),
        ]
    );
    assert_eq!(u.condition, Condition::Exists);
    assert_eq!(u.using.ttl, Some(int("10")));

    let u = update("UPDATE t SET v = 2 WHERE k = 1 IF v = 1 AND m['a'] > 3 AND u.f IN (1, 2) AND w != null");
    let Condition::If(conditions) = u.condition else {
        panic!()
    };
    assert_eq!(conditions.len(), 4);
    assert_eq!(
        conditions[1],
        Relation::Compare {
            lhs: RelationLhs::Element {
                column: "m".into(),
                key: string("a")
            },
            op: CompareOp::Gt,
            rhs: int("3")
        }
    );
    assert_eq!(
        conditions[2],
        Relation::In {
            lhs: RelationLhs::Field {
                column: "u".into(),
                field: "f".into()
            },
            values: InValues::Terms(vec![int("1"), int("2")])
        }
    );

    let e = err("UPDATE t SET a = b + 1 WHERE k = 1");
    assert!(e.message.contains("not 'b'"), "{e}");
    assert_eq!((e.line, e.column), (1, 18));
}

#[test]
fn delete_forms() {
    let d = delete(
        "DELETE a, m['k'], l[1], u.f FROM ks.t USING TIMESTAMP 1234 WHERE k = ? AND c IN (1, 2) \
         IF a = 3",
    );
    assert_eq!(
        d.targets,
        vec![
            DeleteTarget::Column("a".into()),
            DeleteTarget::Element {
                column: "m".into(),
                key: string("k")
            },
            DeleteTarget::Element {
                column: "l".into(),
                key: int("1")
            },
            DeleteTarget::Field {
                column: "u".into(),
                field: "f".into()
            },
        ]
    );
    assert_eq!(d.using.timestamp, Some(int("1234")));
    assert_eq!(d.condition, Condition::If(vec![eq("a", int("3"))]));
    assert_eq!(
        delete("DELETE FROM t WHERE k = 1 IF EXISTS").condition,
        Condition::Exists
    );
}

#[test]
fn batches() {
    let parsed = ok("BEGIN BATCH USING TIMESTAMP ?\n\
         INSERT INTO t (k, v) VALUES (?, ?);\n\
         UPDATE t SET v = ? WHERE k = ?;\n\
         DELETE FROM t WHERE k = :gone\n\
         APPLY BATCH;");
    assert_eq!(parsed.bind_markers.len(), 6);
    assert_eq!(parsed.bind_markers[5].name.as_deref(), Some("gone"));
    let Statement::Batch(batch) = parsed.statement else {
        panic!()
    };
    assert_eq!(batch.kind, BatchKind::Logged);
    assert_eq!(batch.using.timestamp, Some(Term::Marker(0)));
    assert_eq!(batch.statements.len(), 3);
    let BatchStatement::Update(u) = &batch.statements[1] else {
        panic!()
    };
    assert_eq!(u.assignments[0].operation, Operation::Set(Term::Marker(3)));
    assert_eq!(u.where_clause, vec![eq("k", Term::Marker(4))]);
    assert_eq!(batch.statements[2].table(), &name("t"));

    let Statement::Batch(b) = statement("BEGIN UNLOGGED BATCH APPLY BATCH") else {
        panic!()
    };
    assert_eq!((b.kind, b.statements.len()), (BatchKind::Unlogged, 0));
    let Statement::Batch(b) = statement(
        "begin counter batch update c set n = n + 1 where k = 1 update c set n = n - 1 where k = 2 apply batch",
    ) else {
        panic!()
    };
    assert_eq!((b.kind, b.statements.len()), (BatchKind::Counter, 2));

    let e = err("BEGIN BATCH SELECT * FROM t; APPLY BATCH");
    assert!(
        e.message
            .contains("expecting INSERT, UPDATE, DELETE or APPLY BATCH"),
        "{e}"
    );
    assert_eq!((e.line, e.column), (1, 13));
    let e = err("BEGIN BATCH INSERT INTO t (k) VALUES (1);");
    assert!(e.message.contains("'<EOF>'"), "{e}");
}

// ---- DDL ----

#[test]
fn keyspaces() {
    let Statement::CreateKeyspace {
        keyspace,
        if_not_exists,
        properties,
    } = statement(
        "CREATE KEYSPACE IF NOT EXISTS ycsb WITH replication = {'class': 'SimpleStrategy', \
         'replication_factor': 1} AND durable_writes = true",
    )
    else {
        panic!()
    };
    assert_eq!(keyspace, "ycsb");
    assert!(if_not_exists);
    assert_eq!(
        properties,
        vec![
            Property {
                name: "replication".into(),
                value: PropertyValue::Map(vec![
                    (
                        Literal::Str("class".into()),
                        Literal::Str("SimpleStrategy".into())
                    ),
                    (
                        Literal::Str("replication_factor".into()),
                        Literal::Int("1".into())
                    ),
                ])
            },
            Property {
                name: "durable_writes".into(),
                value: PropertyValue::Constant(Literal::Bool(true))
            },
        ]
    );
    let Statement::AlterKeyspace { properties, .. } =
        statement("ALTER KEYSPACE ks WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': '3'}")
    else {
        panic!()
    };
    assert_eq!(properties.len(), 1);
    assert_eq!(
        statement("DROP KEYSPACE IF EXISTS ks"),
        Statement::DropKeyspace {
            keyspace: "ks".into(),
            if_exists: true
        }
    );
    assert_eq!(
        statement("USE \"MyKs\";"),
        Statement::Use {
            keyspace: "MyKs".into()
        }
    );
}

#[test]
fn create_table_forms() {
    let t = create_table(
        "CREATE TABLE IF NOT EXISTS ks.events (\n\
           a int, b text, c timeuuid, d bigint, s text STATIC,\n\
           m map<text, frozen<list<int>>>, tu tuple<int,text>, v vector<float, 3>, u \"MyType\",\n\
           PRIMARY KEY ((a, b), c, d)\n\
         ) WITH CLUSTERING ORDER BY (c DESC, d ASC)\n\
           AND compaction = {'class': 'LeveledCompactionStrategy'}\n\
           AND comment = 'x' AND gc_grace_seconds = 3600 AND caching = keys_only\n\
           AND COMPACT STORAGE",
    );
    assert!(t.if_not_exists);
    assert_eq!(t.partition_key, vec!["a", "b"]);
    assert_eq!(t.clustering_columns, vec!["c", "d"]);
    let types: Vec<&str> = t.columns.iter().map(|c| c.type_text.as_str()).collect();
    assert_eq!(
        types,
        vec![
            "int",
            "text",
            "timeuuid",
            "bigint",
            "text",
            "map<text, frozen<list<int>>>",
            "tuple<int, text>",
            "vector<float, 3>",
            "\"MyType\""
        ]
    );
    assert!(t.columns[4].is_static && !t.columns[3].is_static);
    assert_eq!(
        t.clustering_order,
        vec![
            Ordering {
                column: "c".into(),
                descending: true
            },
            Ordering {
                column: "d".into(),
                descending: false
            }
        ]
    );
    assert!(t.compact_storage);
    let names: Vec<&str> = t.properties.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["compaction", "comment", "gc_grace_seconds", "caching"]
    );
    assert_eq!(
        t.properties[3].value,
        PropertyValue::Identifier("keys_only".into())
    );

    let t = create_table("CREATE TABLE t (a int, b int, PRIMARY KEY (a))");
    assert_eq!(
        (t.partition_key, t.clustering_columns),
        (vec!["a".to_owned()], vec![])
    );
    let t = create_table("CREATE TABLE t (a int, c int, v text, PRIMARY KEY (a, c),)");
    assert_eq!(t.clustering_columns, vec!["c"]);
    let t = create_table("CREATE COLUMNFAMILY t (k text PRIMARY KEY)");
    assert_eq!(t.partition_key, vec!["k"]);

    let e = err("CREATE TABLE t (a int, b int)");
    assert!(e.message.contains("no PRIMARY KEY"), "{e}");
    let e = err("CREATE TABLE t (a int PRIMARY KEY, b int, PRIMARY KEY (b))");
    assert!(e.message.contains("multiple PRIMARY KEYs"), "{e}");
    assert_eq!((e.line, e.column), (1, 43));
}

#[test]
fn alter_drop_truncate() {
    let alter = |text: &str| match statement(text) {
        Statement::AlterTable { action, .. } => action,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        alter("ALTER TABLE ks.t ADD c set<text>"),
        AlterTableAction::Add(vec![ColumnDefinition {
            name: "c".into(),
            type_text: "set<text>".into(),
            is_static: false
        }])
    );
    let AlterTableAction::Add(columns) = alter("ALTER TABLE t ADD (c1 int, c2 text static)") else {
        panic!()
    };
    assert_eq!(columns.len(), 2);
    assert!(columns[1].is_static);
    assert_eq!(
        alter("ALTER TABLE t DROP c"),
        AlterTableAction::Drop(vec!["c".into()])
    );
    assert_eq!(
        alter("ALTER TABLE t DROP (c1, c2)"),
        AlterTableAction::Drop(vec!["c1".into(), "c2".into()])
    );
    assert_eq!(
        alter("ALTER TABLE t RENAME a TO b AND c TO d"),
        AlterTableAction::Rename(vec![("a".into(), "b".into()), ("c".into(), "d".into())])
    );
    assert!(matches!(
        alter("ALTER TABLE t WITH comment = 'hi' AND default_time_to_live = 0"),
        AlterTableAction::With(p) if p.len() == 2
    ));
    assert_eq!(
        statement("DROP TABLE IF EXISTS ks.t"),
        Statement::DropTable {
            table: name("ks.t"),
            if_exists: true
        }
    );
    assert_eq!(
        statement("TRUNCATE TABLE ks.t"),
        Statement::Truncate { table: name("ks.t") }
    );
    assert_eq!(statement("truncate t"), Statement::Truncate { table: name("t") });
}

#[test]
fn unsupported_statements_are_named() {
    for (text, what) in [
        (
            "CREATE OR REPLACE FUNCTION f (a int) CALLED ON NULL INPUT RETURNS int LANGUAGE java AS $$ return a; $$",
            "CREATE FUNCTION",
        ),
        ("CREATE AGGREGATE a (int) SFUNC f STYPE int", "CREATE AGGREGATE"),
        (
            "CREATE MATERIALIZED VIEW v AS SELECT * FROM t WHERE a IS NOT NULL PRIMARY KEY (a)",
            "CREATE MATERIALIZED VIEW",
        ),
        ("CREATE TRIGGER tr ON t USING 'org.Trigger'", "CREATE TRIGGER"),
        ("ALTER MATERIALIZED VIEW v WITH comment = 'x'", "ALTER MATERIALIZED VIEW"),
        ("DROP FUNCTION f", "DROP FUNCTION"),
        ("DROP AGGREGATE a", "DROP AGGREGATE"),
        ("DROP MATERIALIZED VIEW v", "DROP MATERIALIZED VIEW"),
        ("DROP TRIGGER tr ON t", "DROP TRIGGER"),
        ("LIST SUPERUSERS", "LIST SUPERUSERS"),
        ("ADD IDENTITY 'x' TO ROLE 'r'", "ADD IDENTITY"),
    ] {
        let parsed = ok(text);
        assert_eq!(parsed.statement, Statement::Unsupported { what }, "{text}");
        assert_eq!(parsed.statement.kind(), "unsupported");
    }
    // The rest is skipped, but it must still lex.
    assert!(err("CREATE TRIGGER tr ON t USING 'unterminated")
        .message
        .contains("unterminated string"));
}

#[test]
fn indexes() {
    let simple = |column: &str| IndexTarget {
        kind: IndexTargetKind::Simple,
        column: column.into(),
    };
    assert_eq!(
        statement("CREATE INDEX ON t (v)"),
        Statement::CreateIndex(CreateIndex {
            name: None,
            table: name("t"),
            if_not_exists: false,
            custom: false,
            targets: vec![simple("v")],
            using: None,
            properties: Vec::new(),
        })
    );
    let Statement::CreateIndex(c) = statement(
        "CREATE CUSTOM INDEX IF NOT EXISTS \"Idx\" ON ks.t (keys(m)) USING 'StorageAttachedIndex' WITH OPTIONS = {'case_sensitive': 'false'}",
    ) else {
        panic!("not CREATE INDEX")
    };
    assert_eq!(c.name.as_deref(), Some("Idx"));
    assert!(c.custom && c.if_not_exists);
    assert_eq!(
        c.targets,
        [IndexTarget {
            kind: IndexTargetKind::Keys,
            column: "m".into()
        }]
    );
    assert_eq!(c.using.as_deref(), Some("StorageAttachedIndex"));
    assert_eq!(c.properties.len(), 1);
    for (text, kind) in [
        ("values(m)", IndexTargetKind::Values),
        ("ENTRIES(m)", IndexTargetKind::Entries),
        ("full(m)", IndexTargetKind::Full),
        ("keys", IndexTargetKind::Simple),
    ] {
        let Statement::CreateIndex(c) = statement(&format!("CREATE INDEX i ON t ({text})")) else {
            panic!("not CREATE INDEX")
        };
        assert_eq!(c.targets[0].kind, kind, "{text}");
    }
    assert_eq!(
        statement("DROP INDEX IF EXISTS ks.idx"),
        Statement::DropIndex {
            name: name("ks.idx"),
            if_exists: true
        }
    );
    assert!(err("CREATE INDEX ON t").message.contains("mismatched"));
}

// ---- Roles and permissions ----

#[test]
fn roles_and_users() {
    assert_eq!(
        statement(
            "CREATE ROLE IF NOT EXISTS alice WITH PASSWORD = 'p''w' AND LOGIN = true AND SUPERUSER = false \
             AND OPTIONS = {'custom': 1} AND ACCESS TO DATACENTERS {'dc1', 'dc2'}"
        ),
        Statement::CreateRole {
            role: "alice".into(),
            if_not_exists: true,
            options: vec![
                RoleOption::Password("p'w".into()),
                RoleOption::Login(true),
                RoleOption::Superuser(false),
                RoleOption::Options(vec![(Literal::Str("custom".into()), Literal::Int("1".into()))]),
                RoleOption::AccessToDatacenters(vec!["dc1".into(), "dc2".into()]),
            ]
        }
    );
    assert_eq!(
        statement("CREATE ROLE 'Bob'"),
        Statement::CreateRole {
            role: "Bob".into(),
            if_not_exists: false,
            options: vec![]
        }
    );
    assert_eq!(
        statement("ALTER ROLE bob WITH HASHED PASSWORD = '$2a$10$x' AND ACCESS TO ALL DATACENTERS"),
        Statement::AlterRole {
            role: "bob".into(),
            if_exists: false,
            options: vec![
                RoleOption::HashedPassword("$2a$10$x".into()),
                RoleOption::AccessToAllDatacenters
            ]
        }
    );
    assert_eq!(
        statement("DROP ROLE IF EXISTS bob"),
        Statement::DropRole {
            role: "bob".into(),
            if_exists: true
        }
    );
    assert_eq!(
        statement("LIST ROLES OF alice NORECURSIVE"),
        Statement::ListRoles {
            of: Some("alice".into()),
            norecursive: true
        }
    );
    assert_eq!(
        statement("LIST ROLES"),
        Statement::ListRoles {
            of: None,
            norecursive: false
        }
    );
    assert_eq!(
        statement("CREATE USER cassandra2 WITH PASSWORD 'pw' SUPERUSER"),
        Statement::CreateUser {
            user: "cassandra2".into(),
            if_not_exists: false,
            password: Some("pw".into()),
            superuser: Some(true)
        }
    );
    assert_eq!(
        statement("ALTER USER u NOSUPERUSER"),
        Statement::AlterUser {
            user: "u".into(),
            if_exists: false,
            password: None,
            superuser: Some(false)
        }
    );
    assert_eq!(
        statement("DROP USER IF EXISTS u"),
        Statement::DropUser {
            user: "u".into(),
            if_exists: true
        }
    );
    assert_eq!(statement("LIST USERS"), Statement::ListUsers);
    assert_eq!(statement("LIST USERS").kind(), "role");
    assert!(err("CREATE ROLE r WITH LOGIN = 'yes'")
        .message
        .contains("expecting true or false"));
}

#[test]
fn grants() {
    assert_eq!(
        statement("GRANT SELECT ON KEYSPACE ks TO alice"),
        Statement::GrantPermissions {
            permissions: Permissions::Only(vec!["SELECT".into()]),
            resource: Resource::Keyspace("ks".into()),
            role: "alice".into()
        }
    );
    assert_eq!(
        statement("GRANT ALL PERMISSIONS ON ALL KEYSPACES TO admin"),
        Statement::GrantPermissions {
            permissions: Permissions::All,
            resource: Resource::AllKeyspaces,
            role: "admin".into()
        }
    );
    assert_eq!(
        statement("REVOKE MODIFY PERMISSION ON TABLE ks.t FROM bob"),
        Statement::RevokePermissions {
            permissions: Permissions::Only(vec!["MODIFY".into()]),
            resource: Resource::Table(name("ks.t")),
            role: "bob".into()
        }
    );
    assert_eq!(
        statement("GRANT reader TO bob"),
        Statement::GrantRole {
            role: "reader".into(),
            grantee: "bob".into()
        }
    );
    assert_eq!(
        statement("REVOKE reader FROM bob"),
        Statement::RevokeRole {
            role: "reader".into(),
            revokee: "bob".into()
        }
    );
    assert_eq!(
        statement("LIST ALL PERMISSIONS OF bob NORECURSIVE"),
        Statement::ListPermissions {
            permissions: Permissions::All,
            resource: None,
            role: Some("bob".into()),
            norecursive: true
        }
    );
    assert_eq!(
        statement("LIST SELECT, MODIFY ON ks.t"),
        Statement::ListPermissions {
            permissions: Permissions::Only(vec!["SELECT".into(), "MODIFY".into()]),
            resource: Some(Resource::Table(name("ks.t"))),
            role: None,
            norecursive: false
        }
    );
    assert_eq!(
        statement("GRANT EXECUTE ON FUNCTION ks.f(int, text) TO r"),
        Statement::GrantPermissions {
            permissions: Permissions::Only(vec!["EXECUTE".into()]),
            resource: Resource::Other("FUNCTION ks.f(int, text)".into()),
            role: "r".into()
        }
    );
    ok("GRANT DESCRIBE ON ALL ROLES TO r");
    ok("GRANT AUTHORIZE ON ROLE bob TO r");
    ok("GRANT EXECUTE ON ALL FUNCTIONS IN KEYSPACE ks TO r");
    ok("GRANT SELECT ON ALL MBEANS TO r");
    assert_eq!(statement("GRANT reader TO bob").kind(), "role");
    assert_eq!(statement("LIST ALL").kind(), "permission");
}

// ---- DESCRIBE ----

#[test]
fn describe_forms() {
    let describe = |text: &str| match statement(text) {
        Statement::Describe(d) => d,
        other => panic!("{other:?}"),
    };
    use DescribeTarget as D;
    for (text, target) in [
        ("DESCRIBE SCHEMA", D::Schema { full: false }),
        ("DESC FULL SCHEMA", D::Schema { full: true }),
        ("DESCRIBE KEYSPACES", D::Keyspaces),
        (
            "DESCRIBE KEYSPACE",
            D::Keyspace {
                keyspace: None,
                only: false,
            },
        ),
        (
            "DESCRIBE ONLY KEYSPACE ks",
            D::Keyspace {
                keyspace: Some("ks".into()),
                only: true,
            },
        ),
        ("DESCRIBE TABLES", D::Tables),
        ("DESCRIBE TABLE ks.t", D::Table(name("ks.t"))),
        ("DESC COLUMNFAMILY t", D::Table(name("t"))),
        ("DESCRIBE TYPES", D::Types),
        ("DESCRIBE TYPE ks.address", D::Type(name("ks.address"))),
        ("DESCRIBE FUNCTIONS", D::Functions),
        ("DESCRIBE FUNCTION f", D::Function(name("f"))),
        ("DESCRIBE AGGREGATES", D::Aggregates),
        ("DESCRIBE AGGREGATE a", D::Aggregate(name("a"))),
        ("DESCRIBE CLUSTER", D::Cluster),
        ("DESCRIBE INDEX ks.i", D::Index(name("ks.i"))),
        ("DESCRIBE MATERIALIZED VIEW v", D::MaterializedView(name("v"))),
        ("DESCRIBE ks", D::Name(name("ks"))),
        ("desc ks.usertable;", D::Name(name("ks.usertable"))),
    ] {
        let d = describe(text);
        assert_eq!(d.target, target, "{text}");
        assert!(!d.with_internals);
    }
    let d = describe("DESCRIBE KEYSPACE ks WITH INTERNALS");
    assert!(d.with_internals);
    assert_eq!(
        d.target,
        D::Keyspace {
            keyspace: Some("ks".into()),
            only: false
        }
    );
    assert!(describe("DESCRIBE KEYSPACE WITH INTERNALS").with_internals);
    assert_eq!(statement("DESCRIBE SCHEMA").kind(), "describe");
}

// ---- Errors ----

#[test]
fn syntax_errors_point_at_the_offending_token() {
    let e = err("SELECT * FRM t");
    assert_eq!((e.line, e.column), (1, 10));
    assert_eq!(
        e.to_string(),
        "line 1:10 mismatched input 'FRM' expecting FROM (SELECT * [FRM]...)"
    );

    let e = err("SELECT a\nFROM t\n  WHERE = 1");
    assert_eq!((e.line, e.column), (3, 9));
    assert!(e.to_string().starts_with("line 3:9 mismatched input '='"), "{e}");

    let e = err("SELEC * FROM t");
    assert_eq!((e.line, e.column), (1, 1));
    assert!(
        e.message.starts_with("no viable alternative at input 'SELEC'"),
        "{e}"
    );

    let e = err("SELECT * FROM");
    assert_eq!((e.line, e.column), (1, 14));
    assert!(e.message.contains("'<EOF>'"), "{e}");

    let e = err("SELECT * FROM t LIMIT 1 garbage");
    assert_eq!((e.line, e.column), (1, 25));

    let e = err("INSERT INTO t (k) VALUES ('abc)");
    assert_eq!((e.line, e.column), (1, 27));
    assert!(e.message.contains("unterminated string"), "{e}");

    // Columns count characters, not bytes.
    let e = err("SELECT * FROM t WHERE a = 'é' AND b == 1");
    assert_eq!((e.line, e.column), (1, 38));

    let e = err("SELECT * FROM t WHERE a = 1 OR b = 2");
    assert_eq!((e.line, e.column), (1, 29));

    let e = err("SELECT * FROM t WHERE a = §");
    assert!(e.message.contains("token recognition error at: '§'"), "{e}");

    assert_eq!(err("").message, "no viable alternative at input '<EOF>' ()");
    assert!(err(";").message.starts_with("no viable alternative at input ';'"));
}

#[test]
fn trailing_semicolons() {
    ok("SELECT * FROM t;");
    ok("SELECT * FROM t ; ;");
    let e = err("SELECT * FROM t; SELECT * FROM u");
    assert_eq!((e.line, e.column), (1, 18));
}

#[test]
fn statement_helpers() {
    let kinds: Vec<&str> = [
        "SELECT * FROM t",
        "INSERT INTO t (k) VALUES (1)",
        "UPDATE t SET v = 1 WHERE k = 1",
        "DELETE FROM t WHERE k = 1",
        "BEGIN BATCH APPLY BATCH",
        "USE ks",
        "CREATE TABLE t (k int PRIMARY KEY)",
        "TRUNCATE t",
        "CREATE ROLE r",
        "DESCRIBE TABLES",
    ]
    .iter()
    .map(|t| statement(t).kind())
    .collect();
    assert_eq!(
        kinds,
        vec!["select", "insert", "update", "delete", "batch", "use", "ddl", "truncate", "role", "describe"]
    );
    assert_eq!(
        statement("SELECT * FROM ks.t").keyspace_table(),
        Some((Some("ks"), "t"))
    );
    assert_eq!(
        statement("DELETE FROM t WHERE k = 1").keyspace_table(),
        Some((None, "t"))
    );
    assert_eq!(statement("USE ks").keyspace_table(), None);
}

// ---- Bounds ----

/// A statement nested 10,000 levels deep once overflowed the stack of a naive recursive
/// parser; each nesting form must stop at NESTING_DEPTH_MAX with an error instead.
#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let depth = 10_000;
    let cases = [
        format!(
            "SELECT * FROM t WHERE a = {}1{}",
            "[".repeat(depth),
            "]".repeat(depth)
        ),
        format!(
            "SELECT * FROM t WHERE a = {}1{}",
            "(".repeat(depth),
            ")".repeat(depth)
        ),
        format!(
            "SELECT * FROM t WHERE a = {}1{}",
            "{".repeat(depth),
            "}".repeat(depth)
        ),
        format!(
            "SELECT * FROM t WHERE a = {}1{}",
            "f(".repeat(depth),
            ")".repeat(depth)
        ),
        format!("SELECT * FROM t WHERE a = {}1", "- ".repeat(depth)),
        format!("SELECT * FROM t WHERE a = {}1", "(int)".repeat(depth)),
        format!("SELECT {}a{} FROM t", "f(".repeat(depth), ")".repeat(depth)),
        format!(
            "SELECT {}a{} FROM t",
            "cast(".repeat(depth),
            " as int)".repeat(depth)
        ),
        format!(
            "CREATE TABLE t (k {}int{} PRIMARY KEY)",
            "frozen<".repeat(depth),
            ">".repeat(depth)
        ),
    ];
    for text in cases {
        let e = err(&text);
        assert!(e.message.contains("nests deeper than"), "{}: {e}", &text[..40]);
    }
    // Just inside the bound is fine.
    let inside = NESTING_DEPTH_MAX - 1;
    ok(&format!(
        "SELECT * FROM t WHERE a = {}1{}",
        "[".repeat(inside),
        "]".repeat(inside)
    ));
}

#[test]
fn bind_markers_are_bounded() {
    let at_max = format!(
        "SELECT * FROM t WHERE a IN (?{})",
        ",?".repeat(BIND_MARKERS_MAX - 1)
    );
    assert_eq!(ok(&at_max).bind_markers.len(), BIND_MARKERS_MAX);
    let over = format!(
        "BEGIN BATCH INSERT INTO t (a) VALUES (?) UPDATE t SET v = ? WHERE a IN (?{}) APPLY BATCH",
        ",?".repeat(BIND_MARKERS_MAX - 2)
    );
    assert!(err(&over).message.contains("more than 65535 bind markers"));
}

#[test]
fn lists_and_tokens_are_bounded() {
    let over = format!("SELECT * FROM t WHERE a IN (1{})", ",1".repeat(LIST_ITEMS_MAX));
    assert!(err(&over).message.contains("more than 65535 items"));
    let too_many_tokens = format!(
        "SELECT * FROM t WHERE a = 1{}",
        " AND a = 1".repeat(TOKENS_MAX / 4)
    );
    assert!(err(&too_many_tokens).message.contains("tokens"));
    let long_name = format!("SELECT * FROM \"{}\"", "x".repeat(IDENTIFIER_MAX_BYTES + 1));
    assert!(err(&long_name).message.contains("identifier longer than"));
}

#[test]
fn type_statements_parse() {
    let Statement::CreateType {
        name,
        if_not_exists,
        fields,
    } = parse("CREATE TYPE IF NOT EXISTS ks.address (street text, zip int, tags frozen<set<text>>)")
        .expect("parses")
        .statement
    else {
        panic!("not CREATE TYPE")
    };
    assert!(if_not_exists);
    assert_eq!(name.keyspace.as_deref(), Some("ks"));
    assert_eq!(fields[2], ("tags".to_owned(), "frozen<set<text>>".to_owned()));
    let Statement::AlterType { action, .. } = parse("ALTER TYPE address RENAME a TO b AND c TO d")
        .expect("parses")
        .statement
    else {
        panic!("not ALTER TYPE")
    };
    assert_eq!(
        action,
        AlterTypeAction::Rename(vec![("a".into(), "b".into()), ("c".into(), "d".into())])
    );
    assert!(matches!(
        parse("DROP TYPE IF EXISTS address").expect("parses").statement,
        Statement::DropType { if_exists: true, .. }
    ));
    assert!(
        parse("CREATE TYPE empty ()").is_err(),
        "a type has at least one field, as in Cassandra"
    );
}
