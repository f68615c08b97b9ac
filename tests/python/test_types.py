"""Every CQL type survives a round trip, written as a CQL literal and as a bound value.

Two paths reach the server's value codec differently: a literal is parsed from the statement text
(`VALUES (..., 0x00ff, ...)`), a bound value arrives as bytes in an EXECUTE. Each case below is
written both ways and read back both ways (a simple SELECT, and a prepared one, whose results the
driver decodes with the metadata from PREPARE), and must come back as Cassandra returns it:
edge values, NaN, empty strings and blobs, and nulls included.
"""

from __future__ import annotations

import datetime
import itertools
import math
import re
import struct
import uuid
from decimal import Decimal

import pytest
from cassandra import InvalidRequest
from cassandra.util import Date, Duration, Time

from conftest import REFERENCE, RUN_ID

_key = itertools.count(1)


def f32(x: float) -> float:
    """What a float column gives back for x: the nearest 32-bit float."""
    return struct.unpack(">f", struct.pack(">f", x))[0]


U = uuid.UUID("8f2a4c1e-3b7d-4e6f-9a1b-2c3d4e5f6a7b")
TU = uuid.UUID("fe2b4360-28c6-11e2-81c1-0800200c9a66")

# (column type, CQL literal, value to bind, value expected back); expected None means "as bound".
SCALARS = [
    ("ascii", "'hello'", "hello", None),
    ("ascii", "''", "", None),
    ("text", "'héllo wörld 世界 🚀'", "héllo wörld 世界 🚀", None),
    ("text", "'it''s quoted'", "it's quoted", None),
    ("text", "''", "", None),
    ("varchar", "'varchar is text'", "varchar is text", None),
    ("blob", "0x00ff10", b"\x00\xff\x10", None),
    ("blob", "0x", b"", None),
    ("boolean", "true", True, None),
    ("boolean", "FALSE", False, None),
    ("tinyint", "-128", -128, None),
    ("tinyint", "127", 127, None),
    ("smallint", "-32768", -32768, None),
    ("smallint", "32767", 32767, None),
    ("int", "-2147483648", -(2**31), None),
    ("int", "2147483647", 2**31 - 1, None),
    ("bigint", "-9223372036854775808", -(2**63), None),
    ("bigint", "9223372036854775807", 2**63 - 1, None),
    ("varint", "123456789012345678901234567890", 123456789012345678901234567890, None),
    ("varint", "-340282366920938463463374607431768211456", -(2**128), None),
    ("varint", "0", 0, None),
    ("float", "1.5", 1.5, None),
    ("float", "3.4028235E38", 3.4028235e38, f32(3.4028235e38)),
    ("float", "-Infinity", -math.inf, None),
    ("float", "NaN", math.nan, None),
    ("double", "1.7976931348623157E308", 1.7976931348623157e308, None),
    ("double", "4.9E-324", 5e-324, None),
    ("double", "-0.25", -0.25, None),
    ("double", "Infinity", math.inf, None),
    ("double", "NaN", math.nan, None),
    ("decimal", "123.4500", Decimal("123.4500"), None),
    ("decimal", "-0.000000000000000000001", Decimal("-1E-21"), None),
    ("decimal", "98765432109876543210.0123456789", Decimal("98765432109876543210.0123456789"), None),
    ("timestamp", "'2024-01-02 03:04:05.678+0000'", datetime.datetime(2024, 1, 2, 3, 4, 5, 678000), None),
    ("timestamp", "'1969-12-31 23:59:59.999+0000'", datetime.datetime(1969, 12, 31, 23, 59, 59, 999000), None),
    ("timestamp", "0", datetime.datetime(1970, 1, 1), None),
    ("date", "'2024-02-29'", datetime.date(2024, 2, 29), None),
    ("date", "'1970-01-01'", datetime.date(1970, 1, 1), None),
    ("date", "'1900-03-01'", datetime.date(1900, 3, 1), None),
    ("time", "'23:59:59.999999999'", Time(86_399_999_999_999), None),
    ("time", "'00:00:00'", Time(0), None),
    ("time", "'12:34:56.789'", Time(45_296_789_000_000), None),
    ("uuid", str(U), U, None),
    ("timeuuid", str(TU), TU, None),
    ("inet", "'127.0.0.1'", "127.0.0.1", None),
    ("inet", "'::1'", "::1", None),
    ("inet", "'2001:db8::ff00:42:8329'", "2001:db8::ff00:42:8329", None),
    ("duration", "1mo2d3h4m5s6ms7us8ns", Duration(1, 2, 3 * 3600 * 10**9 + 4 * 60 * 10**9 + 5 * 10**9 + 6 * 10**6 + 7000 + 8), None),
    ("duration", "P1Y2M3DT4H", Duration(14, 3, 4 * 3600 * 10**9), None),
    ("duration", "-2d", Duration(0, -2, 0), None),
]

COLLECTIONS = [
    ("list<int>", "[3, 1, 2, 1]", [3, 1, 2, 1], None),
    ("set<text>", "{'b', 'a', 'ü'}", {"b", "a", "ü"}, None),
    ("map<text, int>", "{'one': 1, 'two': 2}", {"one": 1, "two": 2}, None),
    ("frozen<list<bigint>>", "[-9223372036854775808, 0]", [-(2**63), 0], None),
    ("frozen<set<uuid>>", f"{{{U}}}", {U}, None),
    ("frozen<map<int, text>>", "{2: 'b', 1: 'a'}", {1: "a", 2: "b"}, None),
    ("frozen<list<int>>", "[]", [], None),
    ("frozen<map<text, frozen<list<frozen<set<int>>>>>>", "{'x': [{1, 2}, {}], 'y': []}",
     {"x": [{1, 2}, set()], "y": []}, None),
    ("list<frozen<map<text, blob>>>", "[{'k': 0xcafe}, {}]", [{"k": b"\xca\xfe"}, {}], None),
    ("map<timestamp, frozen<list<double>>>", "{'2020-01-01 00:00:00+0000': [1.5, -2.0]}",
     {datetime.datetime(2020, 1, 1): [1.5, -2.0]}, None),
    ("set<date>", "{'2000-01-01', '1999-12-31'}", {datetime.date(2000, 1, 1), datetime.date(1999, 12, 31)}, None),
    ("list<inet>", "['10.0.0.1', '::2']", ["10.0.0.1", "::2"], None),
    ("map<ascii, decimal>", "{'pi': 3.14159}", {"pi": Decimal("3.14159")}, None),
    ("set<varint>", "{-1, 18446744073709551616}", {-1, 2**64}, None),
    ("list<time>", "['01:02:03']", [Time(3_723_000_000_000)], None),
    ("map<timeuuid, boolean>", f"{{{TU}: true}}", {TU: True}, None),
    ("list<duration>", "[1h, 2d]", [Duration(0, 0, 3600 * 10**9), Duration(0, 2, 0)], None),
    ("set<tinyint>", "{-128, 127}", {-128, 127}, None),
    ("list<text>", "['', 'x', '']", ["", "x", ""], None),
]

CASES = SCALARS + COLLECTIONS


def column_name(cql_type: str) -> str:
    return "c_" + "".join(ch if ch.isalnum() else "_" for ch in cql_type)


@pytest.fixture(scope="module")
def typed(_shared):
    """One table with a column for every type in CASES (created once for the module)."""
    session = _shared.get_session()
    name = f"types_{RUN_ID}"
    session.execute(f"CREATE KEYSPACE IF NOT EXISTS {name} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    types = sorted({c[0] for c in CASES})
    cols = ", ".join(f"{column_name(t)} {t}" for t in types)
    session.execute(f"CREATE TABLE IF NOT EXISTS {name}.t (k int PRIMARY KEY, {cols})")
    s = _shared.cluster.connect(name)
    yield s
    s.shutdown()


def same(got, want) -> bool:
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    if isinstance(want, Decimal):
        # Cassandra keeps a decimal's scale: 123.4500 stays 123.4500, not 123.45.
        return isinstance(got, Decimal) and str(got) == str(want)
    if isinstance(want, datetime.date) and not isinstance(want, datetime.datetime):
        return isinstance(got, Date) and got.date() == want
    if isinstance(want, set):
        return got is not None and len(got) == len(want) and all(any(same(g, w) for g in got) for w in want)
    if isinstance(want, dict):
        return (got is not None and len(got) == len(want)
                and all(any(same(gk, k) and same(gv, v) for gk, gv in got.items()) for k, v in want.items()))
    if isinstance(want, list):
        return got is not None and len(got) == len(want) and all(same(g, w) for g, w in zip(got, want))
    return type(got) is type(want) and got == want


def read_back(session, col: str, key: int):
    simple = session.execute(f"SELECT {col} FROM t WHERE k = {key}").one()
    prepared = session.execute(session.prepare(f"SELECT {col} FROM t WHERE k = ?"), [key]).one()
    assert simple is not None and prepared is not None, f"row {key} was not written"
    return simple[0], prepared[0]


def case_id(case) -> str:
    return f"{case[0]}={case[1]}"[:60]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_literal_round_trip(typed, case):
    cql_type, literal, value, expected = case
    expected = value if expected is None else expected
    col, key = column_name(cql_type), next(_key)
    typed.execute(f"INSERT INTO t (k, {col}) VALUES ({key}, {literal})")
    simple, prepared = read_back(typed, col, key)
    assert same(simple, expected), f"{literal} as {cql_type} came back as {simple!r}"
    assert same(prepared, expected), f"{literal} as {cql_type} came back as {prepared!r} (prepared SELECT)"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_bound_round_trip(typed, case):
    cql_type, literal, value, expected = case
    expected = value if expected is None else expected
    col, key = column_name(cql_type), next(_key)
    typed.execute(typed.prepare(f"INSERT INTO t (k, {col}) VALUES (?, ?)"), [key, value])
    simple, prepared = read_back(typed, col, key)
    assert same(simple, expected), f"{value!r} bound as {cql_type} came back as {simple!r}"
    assert same(prepared, expected), f"{value!r} bound as {cql_type} came back as {prepared!r} (prepared SELECT)"


def test_nulls_in_every_column(typed):
    cols = sorted({column_name(c[0]) for c in CASES})
    literal_key, bound_key, absent_key = next(_key), next(_key), next(_key)
    typed.execute(f"INSERT INTO t (k, {', '.join(cols)}) VALUES ({literal_key}, {', '.join('null' for _ in cols)})")
    insert = typed.prepare(f"INSERT INTO t (k, {', '.join(cols)}) VALUES (?, {', '.join('?' for _ in cols)})")
    typed.execute(insert, [bound_key] + [None] * len(cols))
    typed.execute(f"INSERT INTO t (k) VALUES ({absent_key})")
    for key in (literal_key, bound_key, absent_key):
        row = typed.execute(f"SELECT * FROM t WHERE k = {key}").one()
        assert row is not None, f"the INSERT of row {key} with only nulls must still create the row"
        assert {c: getattr(row, c) for c in cols} == {c: None for c in cols}


def test_empty_non_frozen_collection_is_null(typed):
    """Cassandra stores no cells for an empty non-frozen collection: it reads back as null,
    while an empty frozen collection is a value."""
    key = next(_key)
    typed.execute(f"INSERT INTO t (k, c_list_int_, c_set_text_, c_map_text__int_, c_frozen_list_int__) "
                  f"VALUES ({key}, [], {{}}, {{}}, [])")
    row = typed.execute(f"SELECT c_list_int_, c_set_text_, c_map_text__int_, c_frozen_list_int__ FROM t WHERE k = {key}").one()
    assert tuple(row) == (None, None, None, [])


def test_wide_row_with_every_type_at_once(typed):
    """All columns written in one INSERT and read in one SELECT *, as an application does."""
    by_col = {}
    for cql_type, _, value, expected in CASES:
        by_col.setdefault(column_name(cql_type), (value, value if expected is None else expected))
    key = next(_key)
    cols = sorted(by_col)
    insert = typed.prepare(f"INSERT INTO t (k, {', '.join(cols)}) VALUES (?, {', '.join('?' for _ in cols)})")
    typed.execute(insert, [key] + [by_col[c][0] for c in cols])
    row = typed.execute(f"SELECT * FROM t WHERE k = {key}").one()
    wrong = {c: getattr(row, c) for c in cols if not same(getattr(row, c), by_col[c][1])}
    assert wrong == {}, "columns that did not come back as written"


def test_now_generates_distinct_timeuuids(ks):
    ks.session.execute("CREATE TABLE ids (k int, id timeuuid, PRIMARY KEY (k, id))")
    for _ in range(20):
        ks.session.execute("INSERT INTO ids (k, id) VALUES (1, now())")
    ids = [r.id for r in ks.session.execute("SELECT id FROM ids WHERE k = 1")]
    assert len(set(ids)) == 20
    assert all(i.version == 1 for i in ids)
    assert [i.time for i in ids] == sorted(i.time for i in ids), "timeuuid clustering sorts by time"


# Clustering order is each type's comparator, not byte order: negative numbers first, text by
# UTF-8 bytes, timestamps before 1970 first. Wrong orders break range queries and paging.
ORDERED = [
    ("int", [-2147483648, -1, 0, 1, 2147483647]),
    ("bigint", [-(2**63), -300, 0, 7, 2**63 - 1]),
    ("tinyint", [-128, -1, 0, 127]),
    ("varint", [-(2**70), -1, 0, 255, 256, 2**70]),
    ("decimal", [Decimal("-1000.5"), Decimal("-0.001"), Decimal("0"), Decimal("0.5"), Decimal("12")]),
    ("double", [-math.inf, -1.5, -0.0001, 0.0, 2.5, math.inf]),
    ("float", [-math.inf, -1.5, 0.0, 2.5, math.inf]),
    ("text", ["", "A", "B", "a", "é", "世"]),
    ("blob", [b"", b"\x00", b"\x00\x00", b"\x01", b"\x7f", b"\x80", b"\xff"]),
    ("timestamp", [datetime.datetime(1900, 1, 1), datetime.datetime(1969, 12, 31, 23, 59), datetime.datetime(1970, 1, 1),
                   datetime.datetime(2024, 5, 6)]),
    ("date", [datetime.date(1800, 1, 1), datetime.date(1969, 12, 31), datetime.date(1970, 1, 1), datetime.date(2100, 1, 1)]),
    ("boolean", [False, True]),
]


@pytest.mark.parametrize("cql_type,values", ORDERED, ids=[o[0] for o in ORDERED])
def test_clustering_order_follows_the_type(ks, cql_type, values):
    ks.session.execute(f"CREATE TABLE o (k int, c {cql_type}, PRIMARY KEY (k, c))")
    insert = ks.session.prepare("INSERT INTO o (k, c) VALUES (1, ?)")
    for v in reversed(values):
        ks.session.execute(insert, [v])
    got = [r.c for r in ks.session.execute("SELECT c FROM o WHERE k = 1")]
    assert len(got) == len(values) and all(same(g, w) for g, w in zip(got, values)), f"got {got}"
    desc = [r.c for r in ks.session.execute("SELECT c FROM o WHERE k = 1 ORDER BY c DESC")]
    assert all(same(g, w) for g, w in zip(desc, list(reversed(values))))


@pytest.mark.parametrize("cql_type,value", [
    ("text", "ключ"), ("bigint", -(2**63)), ("uuid", U), ("timestamp", datetime.datetime(2001, 2, 3)),
    ("blob", b"\x00"), ("double", -0.5), ("frozen<list<int>>", [1, 2]), ("boolean", False),
], ids=lambda v: str(v)[:20])
def test_types_as_partition_keys(ks, cql_type, value):
    ks.session.execute(f"CREATE TABLE p (k {cql_type} PRIMARY KEY, v int)")
    ks.session.execute(ks.session.prepare("INSERT INTO p (k, v) VALUES (?, 1)"), [value])
    row = ks.session.execute(ks.session.prepare("SELECT k, v FROM p WHERE k = ?"), [value]).one()
    assert row is not None and same(row.k, value) and row.v == 1


def test_tuples(ks):
    ks.session.execute("CREATE TABLE tup (k int PRIMARY KEY, t tuple<int, text, frozen<list<double>>>)")
    ks.session.execute("INSERT INTO tup (k, t) VALUES (1, (1, 'one', [1.5]))")
    ks.session.execute(ks.session.prepare("INSERT INTO tup (k, t) VALUES (?, ?)"), (2, (2, None, [])))
    got = {r.k: r.t for r in ks.session.execute("SELECT k, t FROM tup")}
    assert got == {1: (1, "one", [1.5]), 2: (2, None, [])}


def test_user_defined_types(ks, cluster):
    s = ks.session
    s.execute("CREATE TYPE address (street text, zip int, tags frozen<set<text>>)")
    s.execute("CREATE TABLE people (k int PRIMARY KEY, home frozen<address>, others list<frozen<address>>)")
    s.execute("INSERT INTO people (k, home, others) VALUES (1, {street: 'Main', zip: 12345, tags: {'a'}}, "
              "[{street: 'Side', zip: 1}])")
    row = s.execute("SELECT home, others FROM people WHERE k = 1").one()
    assert (row.home.street, row.home.zip, row.home.tags) == ("Main", 12345, {"a"})
    assert (row.others[0].street, row.others[0].zip, row.others[0].tags) == ("Side", 1, None)
    assert "address" in cluster.metadata.keyspaces[ks.name].user_types


@pytest.mark.parametrize("size", [64 * 1024, 512 * 1024])
def test_large_values_round_trip(ks, size):
    """Rows of 64 KiB and 512 KiB (half blob, half two-byte UTF-8 text)."""
    ks.session.execute("CREATE TABLE IF NOT EXISTS big (k int PRIMARY KEY, b blob, s text)")
    blob = bytes(range(256)) * (size // 2 // 256)
    text = "é" * (size // 4)
    ks.session.execute(ks.session.prepare("INSERT INTO big (k, b, s) VALUES (?, ?, ?)"), (size, blob, text))
    row = ks.session.execute("SELECT b, s FROM big WHERE k = %s", [size]).one()
    assert row.b == blob and row.s == text


@pytest.mark.hayate_scope
def test_value_larger_than_a_write_block_is_refused_clearly(ks):
    """hayate stores a row in one write block (1 MiB by default, as Aerospike's write-block-size);
    Cassandra has no such limit. A larger row must get an error that says it is too large, not a
    timeout or a dropped connection, and the connection must keep working."""
    from cassandra import DriverException

    ks.session.execute("CREATE TABLE big (k int PRIMARY KEY, b blob)")
    insert = ks.session.prepare("INSERT INTO big (k, b) VALUES (?, ?)")
    try:
        ks.session.execute(insert, (1, b"\x01" * (3 * 1024 * 1024)))
    except DriverException as e:
        assert re.search(r"(?i)too large|larger than|exceeds|block|size", str(e)), str(e)
    else:
        assert ks.session.execute("SELECT b FROM big WHERE k = 1").one().b == b"\x01" * (3 * 1024 * 1024)
    ks.session.execute(insert, (2, b"small"))
    assert ks.session.execute("SELECT b FROM big WHERE k = 2").one().b == b"small"
