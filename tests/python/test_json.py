"""JSON in CQL: SELECT JSON, INSERT JSON (literal and prepared, DEFAULT NULL and DEFAULT UNSET),
toJson() in a selection and fromJson() in INSERT and UPDATE values. The JSON texts expected here
were checked once against Apache Cassandra 5.0 (HAYATE_REFERENCE), type by type."""

import json

import pytest
from cassandra import FunctionFailure, InvalidRequest
from cassandra.query import SimpleStatement

COLUMNS = (
    'k int PRIMARY KEY, "Mixed" text, t text, a ascii, bl blob, bo boolean, ti tinyint, si smallint, '
    "i int, bi bigint, vi varint, f float, d double, de decimal, ts timestamp, dt date, tm time, "
    "u uuid, tu timeuuid, ip inet, du duration, l list<int>, st set<text>, m map<text, int>, "
    "mi map<int, text>, fm frozen<map<timestamp, boolean>>, tp tuple<int, text>, "
    "lt list<frozen<list<int>>>, ms map<frozen<set<int>>, text>"
)

ROW_1 = (
    "INSERT INTO j (k, \"Mixed\", t, a, bl, bo, ti, si, i, bi, vi, f, d, de, ts, dt, tm, u, tu, ip, du, "
    "l, st, m, mi, fm, tp, lt, ms) VALUES (1, 'M', 'he said \"hi\"\n\\ é \u0001', 'asc', 0xcafe, true, -1, "
    "300, 70000, 123456789012345, 123456789012345678901234567890, 1.5, -2.25e-10, 123.4500, "
    "'2011-02-03 04:05:06.789+0000', '2020-01-02', '01:02:03.000004', 123e4567-e89b-12d3-a456-426614174000, "
    "50554d6e-29bb-11e5-b345-feff819cdc9f, '::1', 1y2mo3d4h5m6s7ms8us9ns, [1, 2], {'b', 'a'}, {'x': 1}, "
    "{2: 'two', 1: 'one'}, {'2011-02-03 04:05:00+0000': true}, (1, 'x'), [[1], [2, 3]], {{1, 2}: 'a'})"
)

# Cassandra's SELECT JSON * of ROW_1, byte for byte: the columns in SELECT * order, the
# case-sensitive name in double quotes, each value in Cassandra's JSON form.
ROW_1_JSON = (
    '{"k": 1, "\\"Mixed\\"": "M", "a": "asc", "bi": 123456789012345, "bl": "0xcafe", "bo": true, '
    '"d": -2.25E-10, "de": 123.4500, "dt": "2020-01-02", "du": "1y2mo3d4h5m6s7ms8us9ns", "f": 1.5, '
    '"fm": {"2011-02-03 04:05:00.000Z": true}, "i": 70000, "ip": "0:0:0:0:0:0:0:1", "l": [1, 2], '
    '"lt": [[1], [2, 3]], "m": {"x": 1}, "mi": {"1": "one", "2": "two"}, "ms": {"[1, 2]": "a"}, '
    '"si": 300, "st": ["a", "b"], "t": "he said \\"hi\\"\\n\\\\ é \\u0001", "ti": -1, '
    '"tm": "01:02:03.000004000", "tp": [1, "x"], "ts": "2011-02-03 04:05:06.789Z", '
    '"tu": "50554d6e-29bb-11e5-b345-feff819cdc9f", "u": "123e4567-e89b-12d3-a456-426614174000", '
    '"vi": 123456789012345678901234567890}'
)


@pytest.fixture
def j(ks):
    s = ks.session
    s.execute(f"CREATE TABLE j ({COLUMNS})")
    s.execute(ROW_1)
    return s


def one(session, query, params=None):
    rows = list(session.execute(query, params))
    assert len(rows) == 1, rows
    return tuple(rows[0])


def test_select_json_writes_every_type_as_cassandra_does(j):
    rs = j.execute("SELECT JSON * FROM j WHERE k = 1")
    assert rs.column_names == ["[json]"]
    text = rs.one()[0]
    assert text == ROW_1_JSON
    json.loads(text)  # and it is JSON


def test_select_json_of_nulls_empty_values_and_special_floats(j):
    j.execute("INSERT INTO j (k) VALUES (2)")
    got = json.loads(one(j, "SELECT JSON * FROM j WHERE k = 2")[0])
    assert got["k"] == 2 and all(v is None for key, v in got.items() if key != "k")
    j.execute("INSERT INTO j (k, t, bl, f, d, de) VALUES (3, '', 0x, NaN, -Infinity, 1E+3)")
    assert one(j, "SELECT JSON k, t, bl, f, d, de FROM j WHERE k = 3") == (
        '{"k": 3, "t": "", "bl": "0x", "f": null, "d": null, "de": 1E+3}',
    )
    j.execute("INSERT INTO j (k, f, d, ts) VALUES (4, 1e20, 1e-7, -1)")
    assert one(j, "SELECT JSON f, d, ts FROM j WHERE k = 4") == (
        '{"f": 1.0E20, "d": 1.0E-7, "ts": "1969-12-31 23:59:59.999Z"}',
    )
    j.execute("INSERT INTO j (k, f, d) VALUES (5, 100.0, 3)")
    assert one(j, "SELECT JSON f, d FROM j WHERE k = 5") == ('{"f": 100.0, "d": 3.0}',)


def test_select_json_keys_are_selector_names(j):
    got = one(j, 'SELECT JSON k, i AS foo, "Mixed", i AS "Big", ttl(t), token(k) FROM j WHERE k = 1')[0]
    assert got.startswith('{"k": 1, "foo": 70000, "\\"Mixed\\"": "M", "\\"Big\\"": 70000, "ttl(t)": null, ')
    assert '"system.token(k)": ' in got
    assert one(j, "SELECT JSON count(*) FROM j") == ('{"count": 1}',)
    assert list(j.execute("SELECT JSON * FROM j WHERE k = 999")) == []


def test_to_json_in_a_selection(j):
    rs = j.execute("SELECT k, toJson(l), toJson(tp), toJson(ts), toJson(k), toJson(m) FROM j WHERE k = 1")
    assert rs.column_names == [
        "k", "system.tojson(l)", "system.tojson(tp)", "system.tojson(ts)", "system.tojson(k)", "system.tojson(m)",
    ]
    assert tuple(rs.one()) == (1, "[1, 2]", '[1, "x"]', '"2011-02-03 04:05:06.789Z"', "1", '{"x": 1}')
    j.execute("INSERT INTO j (k) VALUES (2)")
    assert one(j, "SELECT toJson(t), toJson(i) FROM j WHERE k = 2") == ("null", "null")
    assert one(j, "SELECT JSON k, toJson(l) AS x FROM j WHERE k = 1") == ('{"k": 1, "x": "[1, 2]"}',)


def test_insert_json_round_trips_select_json(j):
    # (Cassandra reads a JSON decimal through a double, so 123.4500 would come back 123.45;
    # hayate keeps every digit. The document uses a decimal both read alike.)
    doc = ROW_1_JSON.replace('"k": 1', '"k": 7').replace("123.4500", "123.45")
    j.execute("INSERT INTO j JSON %s", (doc,))
    assert one(j, "SELECT JSON * FROM j WHERE k = 7")[0] == doc


def test_insert_json_accepts_strings_for_scalars_and_keeps_big_integers(j):
    j.execute(
        "INSERT INTO j JSON '{\"k\": 10, \"i\": \"12\", \"bi\": \"-5\", \"ti\": 3, "
        "\"vi\": 123456789012345678901234567890123, \"f\": 2.5, \"d\": \"3.25\", \"bo\": \"true\", "
        "\"bl\": \"0xCAFE\", \"u\": \"123E4567-E89B-12D3-A456-426614174000\", \"ip\": \"127.0.0.1\", "
        "\"du\": \"1h\", \"a\": \"x\", \"ts\": \"2011-02-03\", \"dt\": \"2011-02-03\", \"tm\": \"08:12:54.123\"}'"
    )
    assert one(j, "SELECT JSON k, i, bi, ti, vi, f, d, bo, bl, u, ip, du, a, ts, dt, tm FROM j WHERE k = 10") == (
        '{"k": 10, "i": 12, "bi": -5, "ti": 3, "vi": 123456789012345678901234567890123, "f": 2.5, '
        '"d": 3.25, "bo": true, "bl": "0xcafe", "u": "123e4567-e89b-12d3-a456-426614174000", '
        '"ip": "127.0.0.1", "du": "1h", "a": "x", "ts": "2011-02-03 00:00:00.000Z", "dt": "2011-02-03", '
        '"tm": "08:12:54.123000000"}',
    )


def test_insert_json_collections(j):
    j.execute(
        "INSERT INTO j JSON '{\"k\": 14, \"l\": [3, 1], \"st\": [\"z\", \"a\", \"z\"], \"m\": {\"b\": 2}, "
        "\"mi\": {\"7\": \"seven\"}, \"fm\": {\"2011-02-03 04:05:00+0000\": false}, \"tp\": [1, null], "
        "\"lt\": [[1, 2]], \"ms\": {\"[3, 1]\": \"v\"}}'"
    )
    assert one(j, "SELECT JSON l, st, m, mi, fm, tp, lt, ms FROM j WHERE k = 14") == (
        '{"l": [3, 1], "st": ["a", "z"], "m": {"b": 2}, "mi": {"7": "seven"}, '
        '"fm": {"2011-02-03 04:05:00.000Z": false}, "tp": [1, null], "lt": [[1, 2]], "ms": {"[1, 3]": "v"}}',
    )
    assert one(j, "SELECT l, st, m FROM j WHERE k = 14") == ([3, 1], {"a", "z"}, {"b": 2})


def test_insert_json_names_columns_as_cql_does(j):
    # Unquoted keys fold to lower case; a key in double quotes keeps its case.
    j.execute('INSERT INTO j JSON \'{"K": 16, "T": "upper", "\\"Mixed\\"": "kept"}\'')
    assert one(j, 'SELECT k, t, "Mixed" FROM j WHERE k = 16') == (16, "upper", "kept")
    # Of two equal keys the last wins.
    j.execute('INSERT INTO j JSON \'{"k": 17, "t": "a", "t": "b"}\'')
    assert one(j, "SELECT t FROM j WHERE k = 17") == ("b",)


def test_default_null_and_default_unset(j):
    j.execute('INSERT INTO j JSON \'{"k": 19, "t": "a", "i": 1}\'')
    j.execute('INSERT INTO j JSON \'{"k": 19, "t": "b"}\' DEFAULT UNSET')
    assert one(j, "SELECT t, i FROM j WHERE k = 19") == ("b", 1)
    j.execute('INSERT INTO j JSON \'{"k": 19, "t": "c"}\' DEFAULT NULL')
    assert one(j, "SELECT t, i FROM j WHERE k = 19") == ("c", None)
    j.execute('INSERT INTO j JSON \'{"k": 19, "i": 5}\'')
    assert one(j, "SELECT t, i FROM j WHERE k = 19") == (None, 5), "DEFAULT NULL is the default"
    j.execute('INSERT INTO j JSON \'{"k": 20, "t": null, "i": null}\'')
    assert one(j, "SELECT t, i FROM j WHERE k = 20") == (None, None)


def test_prepared_insert_json(j):
    stmt = j.prepare("INSERT INTO j JSON ?")
    assert [(c.name, c.type.typename) for c in stmt.column_metadata] == [("[json]", "varchar")]
    j.execute(stmt, ['{"k": 30, "t": "p", "l": [9]}'])
    unset = j.prepare("INSERT INTO j JSON ? DEFAULT UNSET")
    j.execute(unset, ['{"k": 30, "i": 3}'])
    assert one(j, "SELECT t, l, i FROM j WHERE k = 30") == ("p", [9], 3)
    select = j.prepare("SELECT JSON k, t FROM j WHERE k = ?")
    assert [c[2] for c in select.result_metadata] == ["[json]"]
    assert one(j, select, [30]) == ('{"k": 30, "t": "p"}',)


def test_from_json_in_insert_and_update(j):
    j.execute("INSERT INTO j (k, l, m) VALUES (21, fromJson('[4, 5]'), fromJson('{\"q\": 1}'))")
    j.execute("UPDATE j SET t = fromJson('\"up\"'), i = fromJson('\"7\"') WHERE k = 21")
    assert one(j, "SELECT l, m, t, i FROM j WHERE k = 21") == ([4, 5], {"q": 1}, "up", 7)
    j.execute("UPDATE j SET t = fromJson('null') WHERE k = 21")
    assert one(j, "SELECT t FROM j WHERE k = 21") == (None,)
    stmt = j.prepare("UPDATE j SET i = fromJson(?) WHERE k = ?")
    assert [c.name for c in stmt.column_metadata] == ["arg0(system.fromjson)", "k"]
    j.execute(stmt, ["42", 21])
    assert one(j, "SELECT i FROM j WHERE k = 21") == (42,)


def test_select_json_pages_and_groups(j):
    for k in range(2, 12):
        j.execute("INSERT INTO j (k, i) VALUES (%s, %s)", (k, k))
    rs = j.execute(SimpleStatement("SELECT JSON k, i FROM j", fetch_size=3))
    got = [json.loads(r[0]) for r in rs]
    assert sorted(g["k"] for g in got) == list(range(1, 12))
    assert one(j, "SELECT JSON k, count(*) FROM j WHERE k = 3 GROUP BY k") == ('{"k": 3, "count": 1}',)


@pytest.mark.parametrize(
    "doc, message",
    [
        ('{"k": 15, "t": "a"', "Could not decode JSON string as a map"),
        ("[1, 2]", "Could not decode JSON string as a map"),
        ("null", "Got null for INSERT JSON values"),
        ('{"k": 15, "nope": 1}', "JSON values map contains unrecognized column: nope"),
        ('{"k": 15, "i": 1.5}', "Error decoding JSON value for i: Expected an int value, but got a Double: 1.5"),
        ('{"k": 15, "i": 3000000000}', "Error decoding JSON value for i: Expected an int value, but got a Long"),
        ('{"k": 15, "i": "abc"}', "Error decoding JSON value for i"),
        ('{"k": 15, "t": 5}', "Error decoding JSON value for t: Expected a UTF-8 string, but got a Integer: 5"),
        ('{"k": 15, "bo": 1}', "Error decoding JSON value for bo"),
        ('{"k": 15, "bl": "cafe"}', "missing 0x prefix"),
        ('{"k": 15, "l": 5}', "Error decoding JSON value for l: Expected a list, but got a Integer: 5"),
        ('{"k": 15, "l": [null]}', "Invalid null element in list"),
        ('{"k": 15, "m": [1]}', "Error decoding JSON value for m: Expected a map"),
        ('{"k": 15, "mi": {"x": "seven"}}', "Error decoding JSON value for mi"),
        ('{"k": 15, "tp": [1, "a", 3]}', "Tuple contains extra items (expected 2)"),
        ('{"k": 15, "vi": 5.0}', "Error decoding JSON value for vi"),
        ('{"k": 15, "u": "not-a-uuid"}', "Error decoding JSON value for u"),
        ('{"t": "no key"}', "Invalid null value in condition for column k"),
        ('{"k": null}', "Invalid null value in condition for column k"),
    ],
)
def test_bad_insert_json_is_refused(j, doc, message):
    with pytest.raises(InvalidRequest) as e:
        j.execute("INSERT INTO j JSON %s", (doc,))
    assert message in str(e.value)
    # Nothing was written, and the node keeps serving.
    assert list(j.execute("SELECT k FROM j WHERE k = 15")) == []
    assert one(j, "SELECT i FROM j WHERE k = 1") == (70000,)


def test_bad_from_json_fails_the_function(j):
    with pytest.raises(FunctionFailure) as e:
        j.execute("UPDATE j SET i = fromJson('x') WHERE k = 1")
    assert "Could not decode JSON string 'x'" in str(e.value)
    with pytest.raises(FunctionFailure) as e:
        j.execute("UPDATE j SET i = fromJson('1.5') WHERE k = 1")
    assert "Expected an int value, but got a Double: 1.5" in str(e.value)
    assert one(j, "SELECT i FROM j WHERE k = 1") == (70000,)
