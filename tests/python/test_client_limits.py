"""What one client may make the node hold.

A client that sends requests and never reads its responses used to grow the node's response
queue without end: every answer waited in memory for a reader that never came. Now a
connection whose unread responses pass a bound (4 MiB or 4,096 responses) stops being read,
so the rest of its requests wait in TCP's buffers, on its own side of the network, and other
clients do not notice.

The bodies of requests in flight are bounded as well, node-wide and per client address, as
Cassandra's `native_transport_max_request_data_in_flight(_per_ip)`; over them a protocol v4
client is slowed down (its connection paused), or, if it asked with `THROW_ON_OVERLOAD` in its
STARTUP, answered `Overloaded`, as Cassandra 5.0 does.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

import cqlwire
from hayate_node import free_port
from test_metrics import scrape

OVERLOADED = 0x1001

FLOOD_REQUESTS = 100_000
# Each flood request is padded with a comment so that the flood (about 30 MB) is larger than
# what the kernel's socket buffers on both sides can hold: the node must stop reading, and
# the flooding client must find its writes blocked.
FLOOD_PADDING = "/*" + "x" * 300 + "*/"
# Each flood request reads a row of this size, so that unread answers would add up fast:
# 100,000 of them are 1.6 GB.
ROW_VALUE_BYTES = 16 * 1024
# How much the node's resident memory may grow while the flood is held: the backlog's 4 MiB,
# at most 1,024 requests in flight (max_requests_in_flight_per_connection) with their 16 KiB
# answers (16 MiB), the connection's buffers, and room for the allocator's slack. An unbounded
# queue grows by the answers to every request the node reads, 1.6 GB here.
RSS_GROWTH_MAX_BYTES = 96 << 20
# A well-behaved client's query must be answered within this while the flood is held.
QUERY_LATENCY_MAX_S = 2.0


def startup(host: str, port: int, options: dict[str, str] | None = None) -> cqlwire.RawConnection:
    conn = cqlwire.RawConnection(host, port)
    reply = conn.request(
        cqlwire.STARTUP, cqlwire.string_map({"CQL_VERSION": "3.0.0", **(options or {})})
    )
    assert reply.opcode == cqlwire.READY, reply
    return conn


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def limits_node(node_factory):
    return node_factory("client_limits", metrics_port=free_port())


@pytest.fixture
def big_row(limits_node, node_factory):
    """A session on the node and a table with one row of ROW_VALUE_BYTES."""
    _, session = node_factory.connect(limits_node)
    session.execute(
        "CREATE KEYSPACE limits WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    session.execute("CREATE TABLE limits.t (k int PRIMARY KEY, v blob)")
    session.execute("INSERT INTO limits.t (k, v) VALUES (0, %s)", [b"v" * ROW_VALUE_BYTES])
    return session


def flood(sock: socket.socket, sent: list[int]) -> None:
    """Writes FLOOD_REQUESTS queries without reading, until done or the writes block for 3 s."""
    body = cqlwire.query_body(f"SELECT v FROM limits.t WHERE k = 0 {FLOOD_PADDING}")
    batch = 1000
    sock.settimeout(3.0)
    for start in range(0, FLOOD_REQUESTS, batch):
        frames = b"".join(
            cqlwire.frame(cqlwire.QUERY, body, stream=(start + i) % 32768) for i in range(batch)
        )
        try:
            sock.sendall(frames)
        except (socket.timeout, OSError):
            return
        sent[0] = start + batch


def test_a_client_that_never_reads_costs_bounded_memory_and_no_one_else_waits(limits_node, big_row):
    session = big_row
    # Warm up the paths the flood takes, so that the baseline includes their one-time costs.
    for _ in range(200):
        assert len(session.execute("SELECT v FROM limits.t WHERE k = 0").one().v) == ROW_VALUE_BYTES
    baseline = limits_node.rss_bytes()

    flooder = startup(limits_node.host, limits_node.port)
    sent = [0]
    thread = threading.Thread(target=flood, args=(flooder.sock, sent), daemon=True)
    thread.start()
    try:
        # A well-behaved client keeps being answered, promptly, all through the flood.
        latencies = []
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline or thread.is_alive():
            started = time.monotonic()
            row = session.execute("SELECT v FROM limits.t WHERE k = 0").one()
            latencies.append(time.monotonic() - started)
            assert len(row.v) == ROW_VALUE_BYTES
            time.sleep(0.05)
            assert time.monotonic() < deadline + 60, "the flood neither finished nor blocked"
        thread.join()
        assert max(latencies) < QUERY_LATENCY_MAX_S, f"slowest query during the flood: {max(latencies):.2f} s"

        # The node stopped reading the flood: most of it never left the client.
        grown = limits_node.rss_bytes() - baseline
        print(f"flood: {sent[0]} requests sent, resident memory grew by {grown >> 20} MiB")
        assert sent[0] < FLOOD_REQUESTS, (
            f"all {sent[0]} requests were taken in: nothing held the flood back "
            f"(resident memory grew by {grown >> 20} MiB)"
        )
        assert grown < RSS_GROWTH_MAX_BYTES, (
            f"the node's resident memory grew by {grown >> 20} MiB while holding the flood "
            f"(bound {RSS_GROWTH_MAX_BYTES >> 20} MiB)"
        )
        samples, _ = scrape(limits_node.metrics_port)
        assert value(samples, "hayate_connection_pauses_total", reason="responses_unread") >= 1
        assert value(samples, "hayate_connections_paused") == 1
    finally:
        flooder.close()

    # Once the flooder is gone the node forgets it, and keeps serving.
    deadline = time.monotonic() + 10
    while value(scrape(limits_node.metrics_port)[0], "hayate_connections_paused") != 0:
        assert time.monotonic() < deadline, "the closed connection is still paused"
        time.sleep(0.1)
    for _ in range(20):
        assert len(session.execute("SELECT v FROM limits.t WHERE k = 0").one().v) == ROW_VALUE_BYTES
    assert limits_node.alive()


def test_a_client_that_reads_slowly_gets_every_answer(limits_node, big_row):
    """Backpressure delays a pipelining client; it never drops or reorders its answers."""
    count = 2000
    conn = startup(limits_node.host, limits_node.port)
    body = cqlwire.query_body("SELECT v FROM limits.t WHERE k = 0")
    conn.sock.sendall(b"".join(cqlwire.frame(cqlwire.QUERY, body, stream=i) for i in range(count)))
    # Read nothing until the node has had time to fill the backlog and pause.
    time.sleep(1.0)
    streams = set()
    with conn:
        conn.sock.settimeout(10)
        for _ in range(count):
            f = conn.recv_frame()
            assert f.opcode == cqlwire.RESULT, f
            streams.add(f.stream)
    assert streams == set(range(count))


@pytest.fixture
def small_limit_node(node_factory):
    """A node that lets each client address have only 1 KiB of request data in flight."""
    n = node_factory("client_limits_small", start=False, metrics_port=free_port())
    with open(n.config_path, "a") as f:
        f.write('[limits]\nmax_request_data_in_flight_per_ip = "1KiB"\n')
    n.start()
    _, session = node_factory.connect(n)
    session.execute(
        "CREATE KEYSPACE limits WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    session.execute("CREATE TABLE limits.t (k int PRIMARY KEY, v blob)")
    return n


def big_insert(k: int) -> bytes:
    """An INSERT whose body (about 2 KiB) is over the 1 KiB limit on its own."""
    return cqlwire.query_body(
        "INSERT INTO limits.t (k, v) VALUES (?, ?)", [struct.pack(">i", k), b"b" * 2048]
    )


def test_throw_on_overload_answers_overloaded(small_limit_node):
    n = small_limit_node
    with startup(n.host, n.port, {"THROW_ON_OVERLOAD": "true"}) as conn:
        reply = conn.request(cqlwire.QUERY, big_insert(1), stream=3)
        code, message = reply.error()
        assert (reply.stream, code) == (3, OVERLOADED), message
        assert "max_request_data_in_flight_per_ip" in message, message
        # The connection goes on, and a request that fits is served.
        ok = conn.query("SELECT k FROM limits.t WHERE k = 1")
        assert ok.opcode == cqlwire.RESULT, ok
        assert cqlwire.parse_rows(ok.body)[1] == [], "the refused insert was not run"
    samples, _ = scrape(n.metrics_port)
    assert value(samples, "hayate_requests_overloaded_total") == 1


def test_without_throw_on_overload_the_request_runs_and_the_connection_waits(small_limit_node):
    """Cassandra's default for v4 clients: a request over the limit is run, and its connection
    is read again once its requests are done; nothing is refused."""
    n = small_limit_node
    with startup(n.host, n.port) as conn:
        frames = b"".join(cqlwire.frame(cqlwire.QUERY, big_insert(k), stream=k) for k in range(50))
        conn.sock.sendall(frames)
        streams = set()
        for _ in range(50):
            f = conn.recv_frame()
            assert f.opcode == cqlwire.RESULT, f
            streams.add(f.stream)
        assert streams == set(range(50))
        rows = cqlwire.parse_rows(conn.query("SELECT k FROM limits.t").body)[1]
        assert len(rows) == 50
    samples, _ = scrape(n.metrics_port)
    assert value(samples, "hayate_requests_overloaded_total") == 0
    assert value(samples, "hayate_connection_pauses_total", reason="request_data") >= 1
