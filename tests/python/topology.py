"""What the topology-change tests (test_topology_*.py) share: clusters that clean up quickly, a
data set, a writer that runs through every change, the checks that follow one, the operator's
commands, and the drivers' TOPOLOGY_CHANGE and STATUS_CHANGE events.

Every test of a change runs it under load: a thread writes new rows at QUORUM through a
token-aware driver the whole time, counts every error the client sees, and keeps the key of
every write that was acknowledged. After the change the test checks outcomes, never speed:
- no client error;
- every acknowledged row (the loaded data set and the writer's) reads back at ALL, with its
  value (a row's value is a function of its key, so only keys are kept);
- after a join, a decommission or a removal, each node's load (its own `load_bytes` in
  `/status`, once the nodes that gave ranges up have cleaned them up) is within LOAD_TOLERANCE
  of an even share;
- after a replacement, the replacement alone serves every row at ONE.

Failures quote the nodes' logs (`Cluster.logs`), as the other cluster tests do.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field

from cassandra import ConsistencyLevel
from cassandra.concurrent import execute_concurrent, execute_concurrent_with_args
from cassandra.query import BatchStatement, BatchType, SimpleStatement

import cqlwire
from hayate_cluster import Cluster, ClusterError, ClusterNode
from hayate_node import HAYATE_BIN
from test_cluster_events import EVENT, REGISTER, parse_event

KEYSPACE = "topo"
TABLE = f"{KEYSPACE}.t"
REPLICATION_FACTOR = 3
# A row's value: about 200 bytes, derived from its key so that a read can be checked without
# keeping what was written.
VALUE_BYTES = 200
# How long after a change ends a node drops the ranges it gave up (the default, 10 s, would
# only make the tests wait).
CLEANUP_DELAY_MS = 1000
# How far from an even share of the load a node may be. The token allocator keeps 4 and 5
# nodes within ~1% of even in ownership (crates/cluster/src/ring/); rows on 16 tokens a node add
# sampling noise, and load_bytes counts records as stored.
LOAD_TOLERANCE = 0.20
# How long a node may take to join (stream, finish, open its CQL port), or to leave.
CHANGE_TIMEOUT_S = 120
# How long the nodes that gave ranges up may take to log their cleanup after a change ends
# (cleanup_delay_ms, then a drain of every node, then dropping ranges).
CLEANUP_TIMEOUT_S = 60
# How long an operator command (`hayate decommission`, `removenode`) may run.
TOOL_TIMEOUT_S = 180
# What the cleanup logs when it dropped records (crates/cluster/src/topology/cleanup.rs).
CLEANUP_LOG = "cleanup: dropped the records of ranges this node no longer holds"


def topology_cluster(name: str, *, nodes: int = 3, spare: int = 2, stream_throughput: str | None = None,
                     **options) -> Cluster:
    """A cluster (not started) whose nodes clean up CLEANUP_DELAY_MS after a change, with
    `spare` more addresses free for nodes added later, and, if given, every node's outgoing
    stream rate (`[cluster] stream_throughput`, e.g. "1MiB")."""
    if os.environ.get("HAYATE_REFERENCE"):
        import pytest
        pytest.skip("starts its own hayate cluster (HAYATE_REFERENCE is set)")
    config = f"[cluster]\ncleanup_delay_ms = {CLEANUP_DELAY_MS}\n"
    if stream_throughput is not None:
        config += f'stream_throughput = "{stream_throughput}"\n'
    return Cluster(name, nodes_count=nodes, spare_nodes=spare, config=config, **options)


def value_of(key: int) -> str:
    return (f"{key}:" * (VALUE_BYTES // 2))[:VALUE_BYTES]


def create_table(session) -> None:
    session.execute(f"CREATE KEYSPACE {KEYSPACE} WITH replication = "
                    f"{{'class': 'SimpleStrategy', 'replication_factor': {REPLICATION_FACTOR}}}")
    session.execute(f"CREATE TABLE {TABLE} (k bigint PRIMARY KEY, v text)")


def load(session, keys: Iterable[int], batch_rows: int = 50, concurrency: int = 16) -> set[int]:
    """Writes the rows of `keys` at the session's consistency (QUORUM), in unlogged batches
    (five times faster from Python than one row a request); every one must be acknowledged.
    Returns the keys."""
    keys = list(keys)
    insert = session.prepare(f"INSERT INTO {TABLE} (k, v) VALUES (?, ?)")
    batches = []
    for i in range(0, len(keys), batch_rows):
        batch = BatchStatement(batch_type=BatchType.UNLOGGED)
        for k in keys[i:i + batch_rows]:
            batch.add(insert, (k, value_of(k)))
        batches.append((batch, ()))
    results = execute_concurrent(session, batches, concurrency=concurrency, raise_on_first_error=False)
    failed = [r for ok, r in results if not ok]
    if failed:
        raise ClusterError(f"{len(failed)} of {len(batches)} batches of the data set failed; first: {failed[0]!r}")
    return set(keys)


@dataclass
class Ring:
    """A cluster under test with its session, and every write acknowledged so far (and those that
    failed): what the checks after each change compare the cluster with."""

    cluster: Cluster
    session: object
    acked: set[int] = field(default_factory=set)
    failed: set[int] = field(default_factory=set)
    # Bytes one row takes on a node (for the even-load checks), where a test measured it.
    row_bytes: float = 0.0
    next_key: int = 10_000_000

    def writer(self) -> "Writer":
        """A running writer whose keys no earlier writer of this ring used."""
        w = Writer(self.session, self.next_key)
        self.next_key += 10_000_000
        return w.start()

    def record(self, writer: "Writer") -> None:
        self.acked |= writer.acked
        self.failed |= writer.failed_keys()


class Writer:
    """A thread that writes new rows (keys from `first_key` up) at the session's consistency
    until stopped: `acked` holds the key of every acknowledged write, `errors` every failure the
    client saw, with when it was sent (monotonic) and what it was."""

    # Writes a round, and in flight at once: a steady load that leaves the two cores of a CI
    # machine to the nodes.
    ROUND = 16
    IN_FLIGHT = 4
    PAUSE_S = 0.02

    def __init__(self, session, first_key: int):
        self.session = session
        self.insert = session.prepare(f"INSERT INTO {TABLE} (k, v) VALUES (?, ?)")
        self.next_key = first_key
        self.acked: set[int] = set()
        self.errors: list[tuple[float, int, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="writer", daemon=True)
        self._lock = threading.Lock()

    def _run(self) -> None:
        while not self._stop.is_set():
            keys = list(range(self.next_key, self.next_key + self.ROUND))
            self.next_key += self.ROUND
            sent = time.monotonic()
            try:
                results = execute_concurrent_with_args(
                    self.session, self.insert, [(k, value_of(k)) for k in keys],
                    concurrency=self.IN_FLIGHT, raise_on_first_error=False)
            except Exception as e:  # the driver itself failed: count the whole round
                results = [(False, e)] * len(keys)
            with self._lock:
                for k, (ok, r) in zip(keys, results):
                    if ok:
                        self.acked.add(k)
                    else:
                        self.errors.append((sent, k, repr(r)))
            time.sleep(self.PAUSE_S)

    def start(self) -> "Writer":
        self._thread.start()
        return self

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def wait_acked(self, more: int, timeout_s: float = 30) -> None:
        """Waits until `more` writes beyond those acknowledged now are: the load runs."""
        target = self.count() + more
        deadline = time.monotonic() + timeout_s
        while self.count() < target:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise ClusterError(f"the writer got {self.count()} acknowledgements, waited for {target}; "
                                   f"errors: {self.errors[:3]}")
            time.sleep(0.05)

    def stop(self) -> "Writer":
        self._stop.set()
        self._thread.join(timeout=60)
        return self

    def failed_keys(self) -> set[int]:
        """Keys whose write failed: the row may or may not be there."""
        with self._lock:
            return {k for _, k, _ in self.errors}

    def summary(self) -> str:
        return f"{len(self.acked)} writes acknowledged, {len(self.errors)} failed"

    def assert_no_errors(self, cluster: Cluster, what: str) -> None:
        first = "\n".join(f"  key {k}: {e[:300]}" for _, k, e in self.errors[:5])
        assert not self.errors, (
            f"{len(self.errors)} of {len(self.errors) + len(self.acked)} QUORUM writes failed during {what}; "
            f"first:\n{first}\n{cluster.logs(40)}")


def unreadable_rows(session, keys: Iterable[int], consistency: int) -> list[tuple[int, object]]:
    """The rows of `keys` that `session` does not read back, with their value, at
    `consistency`: (key, what came back or the error)."""
    keys = sorted(keys)
    select = session.prepare(f"SELECT v FROM {TABLE} WHERE k = ?")
    select.consistency_level = consistency
    results = execute_concurrent_with_args(session, select, [(k,) for k in keys], concurrency=96,
                                           raise_on_first_error=False)
    bad = []
    for k, (ok, r) in zip(keys, results):
        if not ok:
            bad.append((k, repr(r)[:300]))
            continue
        row = r.one()
        if row is None or row.v != value_of(k):
            bad.append((k, row))
    return bad


def scan(session, consistency: int, table: str = TABLE) -> dict[int, str]:
    """Every row of the table, read by token range at `consistency` (pages of 5000 rows):
    much faster from Python than a request per row."""
    statement = SimpleStatement(f"SELECT k, v FROM {table}", consistency_level=consistency, fetch_size=5000)
    return {row.k: row.v for row in session.execute(statement)}


def assert_rows_read_back(cluster: Cluster, session, acked: set[int], what: str, *,
                          consistency: int = ConsistencyLevel.ALL, maybe_written: Iterable[int] = (),
                          each: Iterable[int] = ()) -> None:
    """Every acknowledged row reads back with its value at `consistency`: all of them by a
    scan of the table, and the rows of `each` (those written during a change, say) one request
    a row as well, through the single-partition read path. The scan may find no key that was
    never written (`maybe_written`: writes that failed, which may or may not have landed)."""
    level = ConsistencyLevel.value_to_name[consistency]
    try:
        found = scan(session, consistency)
    except Exception as e:
        raise AssertionError(f"after {what}, a scan of {TABLE} at {level} failed: {e!r}\n{cluster.logs(40)}") from e
    missing = sorted(acked - found.keys())
    wrong = sorted(k for k, v in found.items() if k in acked and v != value_of(k))
    unexpected = sorted(found.keys() - acked - set(maybe_written))
    assert not (missing or wrong or unexpected), (
        f"after {what}, a scan at {level} misses {len(missing)} of {len(acked)} acknowledged rows "
        f"(first: {missing[:5]}), reads {len(wrong)} with a wrong value (first: {wrong[:5]}) and "
        f"{len(unexpected)} that were never written (first: {unexpected[:5]})\n{cluster.logs(40)}")
    each = set(each)
    if each:
        bad = unreadable_rows(session, each, consistency)
        assert not bad, (f"after {what}, {len(bad)} of {len(each)} rows written during it do not read back "
                         f"at {level} one by one (the scan found them); first: {bad[:5]}\n{cluster.logs(40)}")


# ---- the ring -------------------------------------------------------------------------------


def members(node: ClusterNode) -> dict[str, tuple[str, str]]:
    """address -> (state, status) of every member `node` lists in its /status."""
    return {m["address"]: (m["state"], m["status"]) for m in node.status()["nodes"]}


def own_load(node: ClusterNode) -> int:
    """The bytes of records `node` holds, as it reports itself in /status (the others know it
    from gossip, a few seconds late)."""
    doc = node.status()
    (me,) = [m for m in doc["nodes"] if m["host_id"] == doc["local"]]
    return me["load_bytes"]


def host_id(node: ClusterNode) -> str:
    return node.status()["local"]


def log_offsets(nodes: Iterable[ClusterNode]) -> dict[str, int]:
    """Where each node's log ends now: `wait_logged` looks only at lines written after."""
    return {n.host: n.log_path.stat().st_size for n in nodes}


def logged_since(node: ClusterNode, offset: int) -> str:
    with open(node.log_path, "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def wait_logged(cluster: Cluster, nodes: Iterable[ClusterNode], text: str, since: dict[str, int],
                timeout_s: float) -> None:
    """Waits until each of `nodes` logged `text` after its offset in `since`."""
    nodes = list(nodes)
    deadline = time.monotonic() + timeout_s
    while True:
        cluster.check_alive()
        missing = [n for n in nodes if text not in logged_since(n, since[n.host])]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise ClusterError(f"{[n.host for n in missing]} did not log {text!r} within {timeout_s} s\n"
                               f"{cluster.logs(40)}")
        time.sleep(0.2)


def loads(cluster: Cluster) -> dict[str, int]:
    """host -> its own load, for every live node."""
    return {n.host: own_load(n) for n in cluster.live_nodes()}


def bytes_per_row(cluster: Cluster, rows: int) -> float:
    """What one row costs in `load_bytes`, measured while every replica holds exactly its rows
    (no change in progress, no cleanup pending): the sum of the loads over RF copies."""
    total = sum(loads(cluster).values())
    return total / (REPLICATION_FACTOR * rows)


def assert_even_loads(cluster: Cluster, what: str, rows: int, row_bytes: float) -> dict[str, int]:
    """Each live node's own load within LOAD_TOLERANCE of an even share of `rows` rows of
    `row_bytes` each, RF copies of each over the live nodes; returns host -> bytes. An absolute
    share, not the mean of the loads: nodes that all kept ranges they gave up, or all missed
    the same rows, would still be even among themselves."""
    now = loads(cluster)
    even = row_bytes * rows * REPLICATION_FACTOR / len(now)
    shares = {h: round(b / even, 3) for h, b in now.items()}
    print(f"loads after {what}: {now}; share of an even {even:.0f} bytes: {shares}")
    off = {h: s for h, s in shares.items() if abs(s - 1) > LOAD_TOLERANCE}
    assert not off, (f"after {what}, nodes hold more or less than {LOAD_TOLERANCE:.0%} off an even share "
                     f"({even:.0f} bytes: {rows} rows of {row_bytes:.0f} bytes, {REPLICATION_FACTOR} copies over "
                     f"{len(now)} nodes): {off}; all loads: {now}\n{cluster.logs(40)}")
    return now


def netstats(node: ClusterNode) -> dict:
    with urllib.request.urlopen(f"http://{node.host}:{node.metrics_port}/netstats", timeout=5) as r:
        return json.loads(r.read().decode())


def stream_bytes_in(node: ClusterNode) -> float:
    return node.metric('hayate_stream_bytes_total{direction="in"}')


# ---- the operator's commands ---------------------------------------------------------------


def hayate(*args: str, timeout_s: float = TOOL_TIMEOUT_S) -> subprocess.CompletedProcess:
    """Runs `hayate ARGS` (an operator command) to its end; its output is in the result."""
    try:
        return subprocess.run([str(HAYATE_BIN), *args], capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise ClusterError(f"`hayate {' '.join(args)}` did not end within {timeout_s} s; it printed:\n"
                           f"{e.stdout}\n{e.stderr}") from e


def hayate_ok(*args: str) -> str:
    """Runs `hayate ARGS` and returns what it printed; it must exit 0."""
    result = hayate(*args)
    assert result.returncode == 0, output(result)
    return result.stdout


def on(node: ClusterNode) -> list[str]:
    """The arguments that point an operator command at `node`'s HTTP endpoint."""
    return ["--host", node.host, "--port", str(node.metrics_port)]


def output(result: subprocess.CompletedProcess) -> str:
    return f"exit status {result.returncode}; stdout:\n{result.stdout}\nstderr:\n{result.stderr}"


# ---- drivers' events -----------------------------------------------------------------------


class Events:
    """A raw connection to one node registered for TOPOLOGY_CHANGE and STATUS_CHANGE (as a
    driver's control connection is), read by a thread so that no event is missed while a test
    waits for something else."""

    def __init__(self, node: ClusterNode, port: int):
        self.node = node
        self.conn = cqlwire.RawConnection(node.host, port)
        assert self.conn.startup().opcode == cqlwire.READY
        kinds = ("TOPOLOGY_CHANGE", "STATUS_CHANGE")
        body = struct.pack(">H", len(kinds)) + b"".join(cqlwire.string(k) for k in kinds)
        answer = self.conn.request(REGISTER, body)
        assert answer.opcode == cqlwire.READY, f"REGISTER answered {answer}"
        self.port = port
        self.seen: list[tuple] = []
        self._thread = threading.Thread(target=self._read, name="events", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        # Blocking reads (a timeout in the middle of a frame would lose its start); `close`
        # shuts the socket down, which ends the read.
        self.conn.sock.settimeout(None)
        while True:
            try:
                frame = self.conn.recv_frame()
            except (cqlwire.Closed, OSError):
                return
            if frame.opcode == EVENT:
                self.seen.append(parse_event(frame.body))

    def wait_for(self, change: str, address: str, within_s: float = 30) -> None:
        """Waits for `change` of `address`: NEW_NODE, REMOVED_NODE (TOPOLOGY_CHANGE), UP or
        DOWN (STATUS_CHANGE)."""
        kind = "STATUS_CHANGE" if change in ("UP", "DOWN") else "TOPOLOGY_CHANGE"
        want = (kind, change, address, self.port)
        deadline = time.monotonic() + within_s
        while want not in self.seen:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.node.host} sent no {kind} {change} for {address} within "
                                     f"{within_s} s; it sent {self.seen}\n{self.node.log_tail()}")
            time.sleep(0.05)

    def of(self, address: str) -> list[str]:
        """The changes sent so far for `address`, in order (NEW_NODE, DOWN, ...)."""
        return [change for _, change, a, _ in self.seen if a == address]

    def close(self) -> None:
        try:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()
        self._thread.join(timeout=5)


# ---- nodes ---------------------------------------------------------------------------------


def restart(cluster: Cluster, ks: Iterable[int]) -> None:
    """Starts nodes `ks` again, together, and waits for the cluster to agree."""
    nodes = [cluster.node(k) for k in ks]
    for n in nodes:
        n.proc = n.spawn()
    for n in nodes:
        try:
            n.wait_ready(CHANGE_TIMEOUT_S)
        except Exception as e:
            raise ClusterError(f"{e}\n{cluster.logs(exclude=n)}") from e
    cluster.wait_agreement()


def assert_alone_serves_everything(cluster: Cluster, k: int, acked: set[int], maybe_written: set[int],
                                   what: str) -> None:
    """Stops every other node (SIGTERM), then checks that node k alone serves every
    acknowledged row at ONE: with RF 3 on three nodes it is a replica of every row. The others
    stay stopped."""
    others = [n.index for n in cluster.live_nodes() if n.index != k]
    assert len(others) == REPLICATION_FACTOR - 1, f"expected {REPLICATION_FACTOR} nodes, have {len(others) + 1}"
    for other in others:
        cluster.stop(other)
    alone = cluster.session(whitelist=[cluster.node(k)], consistency=ConsistencyLevel.ONE)
    assert_rows_read_back(cluster, alone, acked, f"{what}, node {k} alone", consistency=ConsistencyLevel.ONE,
                          maybe_written=maybe_written)
