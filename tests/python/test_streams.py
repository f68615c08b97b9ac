"""Many requests in flight on one connection, and LZ4-compressed frames.

Protocol v4 multiplexes up to 32,768 streams on a connection and the Python driver uses a single
connection per host, so an application's `execute_async` burst all travels on it. Every response
must come back on its own stream id with its own data: a mix-up shows as a row answering the
wrong key.
"""

import threading

import pytest
from cassandra.query import SimpleStatement

import cqlwire

IN_FLIGHT = 1000


@pytest.fixture
def kv(ks):
    ks.session.execute("CREATE TABLE kv (k int PRIMARY KEY, v text)")
    return ks.session


def test_a_thousand_requests_in_flight_on_one_connection(kv):
    insert = kv.prepare("INSERT INTO kv (k, v) VALUES (?, ?)")
    futures = [kv.execute_async(insert, (k, f"value of {k}")) for k in range(IN_FLIGHT)]
    for f in futures:
        f.result()
    pools = kv.get_pool_state()
    assert [len(state["in_flights"]) for state in pools.values()] == [1], "one connection to the node"

    select = kv.prepare("SELECT k, v FROM kv WHERE k = ?")
    futures = {k: kv.execute_async(select, [k]) for k in range(IN_FLIGHT)}
    for k, f in futures.items():
        row = f.result().one()
        assert row is not None and (row.k, row.v) == (k, f"value of {k}"), f"key {k} was answered with {row}"


def test_mixed_request_kinds_in_flight(kv):
    """Queries, prepared executes, batches and errors interleaved on the same connection."""
    from cassandra.query import BatchStatement
    from cassandra.protocol import SyntaxException

    insert = kv.prepare("INSERT INTO kv (k, v) VALUES (?, ?)")
    futures = []
    for i in range(300):
        kind = i % 4
        if kind == 0:
            futures.append(("ok", kv.execute_async(insert, (i, str(i)))))
        elif kind == 1:
            futures.append(("ok", kv.execute_async(f"INSERT INTO kv (k, v) VALUES ({i}, '{i}')")))
        elif kind == 2:
            batch = BatchStatement()
            batch.add(insert, (i, str(i)))
            futures.append(("ok", kv.execute_async(batch)))
        else:
            futures.append(("syntax", kv.execute_async("INSERT INTO kv (k, v) VALUES")))
    for expected, f in futures:
        if expected == "ok":
            f.result()
        else:
            with pytest.raises(SyntaxException):
                f.result()
    rows = {r.k: r.v for r in kv.execute(SimpleStatement("SELECT k, v FROM kv", fetch_size=1000))}
    assert rows == {i: str(i) for i in range(300) if i % 4 != 3}


def test_concurrent_clients(node, ks):
    """Eight clients, each with its own connection, writing and reading at once."""
    ks.session.execute("CREATE TABLE kv (k int PRIMARY KEY, v int)")
    errors = []

    def client(n):
        try:
            cluster, s = node.connect(ks.name)
            try:
                insert = s.prepare("INSERT INTO kv (k, v) VALUES (?, ?)")
                select = s.prepare("SELECT v FROM kv WHERE k = ?")
                for i in range(100):
                    k = n * 1000 + i
                    s.execute(insert, (k, k * 2))
                    assert s.execute(select, [k]).one().v == k * 2
            finally:
                cluster.shutdown()
        except Exception as e:  # reported below with the client number
            errors.append((n, e))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert ks.session.execute("SELECT count(*) FROM kv").one()[0] == 800


def test_lz4_compression(node, fresh_name, session):
    """`compression='lz4'`: the driver asks for it only if SUPPORTED lists it, and silently falls
    back to no compression otherwise, so the test checks the connection really compresses."""
    name = fresh_name("lz4")
    session.execute(f"CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    cluster, s = node.connect(compression="lz4")
    try:
        connection = cluster.control_connection._connection
        assert connection.compressor is not None, "the server did not agree to LZ4 (check SUPPORTED's COMPRESSION)"
        s.execute(f"CREATE TABLE {name}.t (k int PRIMARY KEY, v text)")
        big = "compressible " * 5000  # frames far larger than LZ4's 64 KiB block
        insert = s.prepare(f"INSERT INTO {name}.t (k, v) VALUES (?, ?)")
        for k in range(20):
            s.execute(insert, (k, f"{k}:{big}"))
        rows = {r.k: r.v for r in s.execute(f"SELECT k, v FROM {name}.t")}
        assert rows == {k: f"{k}:{big}" for k in range(20)}
        futures = [s.execute_async(f"SELECT v FROM {name}.t WHERE k = {k}") for k in range(20)]
        assert [f.result().one().v for f in futures] == [f"{k}:{big}" for k in range(20)]
    finally:
        cluster.shutdown()


def test_supported_lists_cql_version_and_compression(node):
    with cqlwire.RawConnection(node.host, node.port) as conn:
        reply = conn.request(cqlwire.OPTIONS, b"")
    assert reply.opcode == cqlwire.SUPPORTED
    options = cqlwire.parse_string_multimap(reply.body)
    assert any(v.startswith("3.") for v in options.get("CQL_VERSION", [])), options
    assert "lz4" in options.get("COMPRESSION", []), options


def test_more_requests_in_flight_than_the_server_takes_at_once(kv):
    """4,096 requests at once on one connection: more than a server's per-connection bound
    (hayate's max_requests_in_flight_per_connection defaults to 1,024), so the server must
    push back by reading more slowly, never by dropping or failing requests."""
    insert = kv.prepare("INSERT INTO kv (k, v) VALUES (?, ?)")
    futures = [kv.execute_async(insert, (k, str(k))) for k in range(4096)]
    for f in futures:
        f.result()
    count = kv.execute(SimpleStatement("SELECT count(*) FROM kv")).one()[0]
    assert count == 4096
