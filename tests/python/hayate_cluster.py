"""Clusters of real `hayate` processes for the multi-node acceptance tests (test_cluster_*.py).

A cluster of N nodes lives on a loopback block of its own, 127.A.B.1 to 127.A.B.N (any address
in 127.0.0.0/8 works on Linux without setup), and every node of it uses the same CQL, storage and
metrics ports: the Python driver reads `system.peers` and connects to each peer on the port of
its contact point, so a cluster whose nodes differ only by port would not work with it. The
single-node tests run on 127.0.0.1, so a block never meets them.

Each node is a `hayate_node.Node` (its data directory and `node.log` under target/test-nodes/,
the log quoted in failures, SIGKILL at exit whatever happens) started with the cluster's seeds.
`Cluster` starts them together, waits until every node's `/status` agrees (all members up and
normal, one schema version, a metadata leader), and makes driver sessions that are token-aware
(or pinned to one node with a white list) and are shut down with the cluster.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import time
import urllib.request
from dataclasses import dataclass, field

from hayate_node import Node, NodeError, free_ports

# The loopback blocks this process hands out: 127.A.B.0/24 with A fixed per process (so that
# two test runs on one machine rarely meet) and B counting up. 127.0.x.x is left to the rest of
# the suite and to `hayate local` (127.0.0.1-N).
_BLOCK_A = 64 + os.getpid() % 128
_block_counter = itertools.count(1)
# How long a cluster may take to agree on its members and schema after its nodes opened their
# CQL ports. Forming a cluster takes about a second; gossip publishes schema versions every 2 s.
AGREE_TIMEOUT_S = 30
# How long a node may take to open its CQL port in a cluster: it first joins, which waits for
# every seed (or formation_wait_ms, 10 s by default) when the cluster forms.
CLUSTER_START_TIMEOUT_S = 60
# Replica answers a coordinator times before it speculates (crates/cluster/src/coordinator/
# latency.rs, SAMPLES_MIN), with a margin: the figure counts answers since the node started.
SPECULATION_SAMPLES_MIN = 200
# A request timeout for driver sessions longer than the server's read timeout (5 s), so that the
# server's own ReadTimeout or Unavailable reaches the test rather than the driver's.
REQUEST_TIMEOUT_S = 12


def next_block() -> str:
    """A fresh loopback block prefix such as '127.77.3'; node k of a cluster is '127.77.3.k'."""
    b = next(_block_counter)
    if b > 250:
        raise NodeError("this test process ran out of loopback blocks (more than 250 clusters)")
    return f"127.{_BLOCK_A}.{b}"


def scrape(host: str, port: int, timeout_s: float = 5.0) -> dict[str, float]:
    """A node's Prometheus metrics: name (labels included, as written) -> value."""
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=timeout_s) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        try:
            out[name] = float(value)
        except ValueError:
            pass
    return out


def fetch_status(host: str, port: int, timeout_s: float = 5.0) -> dict:
    """A node's `/status` document (what `hayate status` prints)."""
    with urllib.request.urlopen(f"http://{host}:{port}/status", timeout=timeout_s) as r:
        return json.loads(r.read().decode())


class ClusterNode(Node):
    """Node k of a cluster: its own loopback address, the cluster's ports and seeds."""

    # Colours would make the logs quoted in failures (and searched by tests) unreadable; panics keep
    # their backtraces (RUST_BACKTRACE=1), but errors do not capture one each (chitchat warns of
    # every failed gossip round, four a second while a peer is unreachable).
    env = {"NO_COLOR": "1", "RUST_LIB_BACKTRACE": "0"}

    def __init__(self, cluster: "Cluster", index: int, *, data_center: str | None, rack: str | None):
        super().__init__(
            f"{cluster.name}-n{index}",
            metrics_port=cluster.metrics_port,
            port=cluster.cql_port,
            commit_to_device=cluster.commit_to_device,
            device_size=cluster.device_size,
            write_block_size=cluster.write_block_size,
        )
        self.index = index
        self.host = f"{cluster.block}.{index}"
        self.storage_port = cluster.storage_port
        self.seeds = cluster.seeds
        self.data_center = data_center
        self.rack = rack
        self.extra_args = list(cluster.extra_args)
        if cluster.config:
            # Settings of the cluster's own (e.g. `[cluster] cleanup_delay_ms`), after the
            # sections every node writes.
            with open(self.config_path, "a") as f:
                f.write(cluster.config.strip() + "\n")

    def command(self) -> list[str]:
        cmd = super().command() + ["--seeds", ",".join(self.seeds)]
        if self.data_center:
            cmd += ["--data-center", self.data_center]
        if self.rack:
            cmd += ["--rack", self.rack]
        return cmd + self.extra_args

    def start(self, timeout_s: float = CLUSTER_START_TIMEOUT_S) -> "ClusterNode":
        return super().start(timeout_s)

    def metrics(self) -> dict[str, float]:
        return scrape(self.host, self.metrics_port)

    def metric(self, name: str) -> float:
        return self.metrics().get(name, 0.0)

    def status(self) -> dict:
        return fetch_status(self.host, self.metrics_port)

    def __repr__(self) -> str:
        return f"<{self.name} {self.host}>"


class ClusterError(NodeError):
    """The cluster did not reach the state a test waited for."""


@dataclass
class Cluster:
    """N `hayate` processes forming one ring. Use as a context manager or call `close()`."""

    name: str
    nodes_count: int = 3
    commit_to_device: bool = False
    device_size: str = "256MiB"
    # The nodes' write block size (`[storage] write_block_size`); None leaves the default.
    write_block_size: str | None = None
    # Per node (1-based index -> value); None leaves the server's default (datacenter1, rack1).
    data_centers: dict[int, str] = field(default_factory=dict)
    racks: dict[int, str] = field(default_factory=dict)
    extra_args: list[str] = field(default_factory=list)
    # TOML appended to every node's config file, e.g. "[cluster]\ncleanup_delay_ms = 1000".
    config: str = ""
    # Addresses beyond the first nodes_count that must find the ports free too (nodes added later).
    spare_nodes: int = 1
    block: str = field(default_factory=next_block)

    def __post_init__(self):
        self.name = re.sub(r"[^a-z0-9]+", "_", self.name.lower())[:32]
        hosts = [f"{self.block}.{k}" for k in range(1, self.nodes_count + 1 + self.spare_nodes)]
        # The spare addresses (nodes added later) must find the ports free too.
        self.cql_port, self.storage_port, self.metrics_port = free_ports(hosts, 3)
        self.seeds = [f"{self.block}.{k}" for k in range(1, self.nodes_count + 1)]
        # Every node made, members or not (a test may drop a refused node from `nodes`):
        # close discards them all.
        self._made: list[ClusterNode] = []
        # Nodes that are no longer members (`forget`): `start` leaves them be.
        self._forgotten: list[ClusterNode] = []
        self.nodes: list[ClusterNode] = [self._make_node(k) for k in range(1, self.nodes_count + 1)]
        self._drivers: list = []

    def _make_node(self, k: int) -> ClusterNode:
        n = ClusterNode(self, k, data_center=self.data_centers.get(k), rack=self.racks.get(k))
        self._made.append(n)
        return n

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def node(self, k: int) -> ClusterNode:
        """Node k, 1-based as its address (127.A.B.k)."""
        return self.nodes[k - 1]

    def live_nodes(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.alive()]

    def add_node(self, extra_args: list[str] | tuple[str, ...] = ()) -> ClusterNode:
        """A node with the next address, the same seeds, not started; `extra_args` go on its
        command line after the cluster's."""
        n = self._make_node(len(self.nodes) + 1)
        n.extra_args += list(extra_args)
        self.nodes.append(n)
        return n

    def renew_node(self, k: int, extra_args: list[str] | tuple[str, ...] = ()) -> ClusterNode:
        """A fresh node on node k's address, in its place in `nodes`, not started: the machine
        with a new disk. Node k must not be running; its data is deleted (the old disk is
        lost), its log kept."""
        old = self.node(k)
        if old.alive():
            raise ClusterError(f"{old.name} is still running: kill it before giving its address to a new node")
        old.discard()
        n = self._make_node(k)
        n.extra_args += list(extra_args)
        self.nodes[k - 1] = n
        return n

    def forget(self, k: int) -> None:
        """Node k is no longer a member (decommissioned, removed, or replaced from another
        address): the agreement checks stop expecting it, and its process, if any, is killed and
        its data discarded (its log stays, and `logs()` still quotes it)."""
        n = self.node(k)
        n.discard()
        n.proc = None
        self._forgotten.append(n)

    # ---- processes -------------------------------------------------------------------------

    def start(self, timeout_s: float = CLUSTER_START_TIMEOUT_S) -> "Cluster":
        """Starts every node that is not running (and was not forgotten), together, and waits
        for agreement."""
        starting = [n for n in self.nodes if not n.alive() and n not in self._forgotten]
        for n in starting:
            n.proc = n.spawn()
        for n in starting:
            try:
                n.wait_ready(timeout_s)
            except NodeError as e:
                raise ClusterError(f"{e}\n{self.logs(exclude=n)}") from e
        self.wait_agreement()
        return self

    def start_node(self, k: int, *, agree: bool = True) -> ClusterNode:
        n = self.node(k)
        try:
            n.start()
        except NodeError as e:
            raise ClusterError(f"{e}\n{self.logs(exclude=n)}") from e
        if agree:
            self.wait_agreement()
        return n

    def kill(self, k: int) -> float:
        """SIGKILLs node k; returns the monotonic time of the kill."""
        n = self.node(k)
        if not n.alive():
            raise ClusterError(f"{n.name} is not running")
        killed_at = time.monotonic()
        n.kill()
        return killed_at

    def stop(self, k: int) -> None:
        """SIGTERMs node k and checks that it exited cleanly."""
        n = self.node(k)
        code = n.stop()
        if code != 0:
            raise ClusterError(f"{n.name} exited with status {code} on SIGTERM.\n{n.log_tail()}")

    def close(self) -> None:
        """Shuts the driver sessions down and kills every node it made (SIGKILL; nothing to
        keep but the logs)."""
        for c in self._drivers:
            try:
                c.shutdown()
            except Exception:
                pass
        self._drivers.clear()
        for n in self._made:
            n.discard()

    def logs(self, lines: int = 25, exclude: ClusterNode | None = None) -> str:
        return "\n".join(n.log_tail(lines) for n in self.nodes if n is not exclude)

    def check_alive(self) -> None:
        """Fails with the log of any node that should run and does not."""
        for n in self.nodes:
            if n.proc is not None and n.proc.returncode is None and n.proc.poll() is not None:
                raise ClusterError(f"{n.name} died (status {n.proc.returncode}).\n{n.log_tail(60)}")

    # ---- agreement -------------------------------------------------------------------------

    def statuses(self, nodes: list[ClusterNode] | None = None) -> dict[str, dict]:
        """host -> its `/status` document, for each live node that answers."""
        out = {}
        for n in nodes if nodes is not None else self.live_nodes():
            try:
                out[n.host] = n.status()
            except OSError:
                pass
        return out

    def agreement_problem(self, up: list[ClusterNode] | None = None) -> str | None:
        """Why the live nodes do not agree yet (None once they do): each must list every member,
        see exactly `up` (default: the live nodes) up and normal, know a metadata leader, and
        report one schema version for every up node."""
        up = up if up is not None else self.live_nodes()
        want_up = sorted(n.host for n in up)
        members = sorted(n.host for n in self.nodes if n.proc is not None)
        docs = self.statuses(up)
        for n in up:
            doc = docs.get(n.host)
            if doc is None:
                return f"{n.host} does not answer /status"
            listed = sorted(m["address"] for m in doc["nodes"])
            if listed != members:
                return f"{n.host} lists members {listed}, expected {members}"
            seen_up = sorted(m["address"] for m in doc["nodes"] if m["state"] == "up")
            if seen_up != want_up:
                return f"{n.host} sees {seen_up} up, expected {want_up}"
            not_normal = [m["address"] for m in doc["nodes"] if m["state"] == "up" and m["status"] != "normal"]
            if not_normal:
                return f"{n.host} sees {not_normal} not normal"
            if not doc["metadata"].get("leader"):
                return f"{n.host} knows no metadata leader"
            versions = {m["schema_version"] for m in doc["nodes"] if m["state"] == "up"}
            if len(versions) != 1:
                return f"{n.host} sees schema versions {sorted(map(str, versions))}"
        versions = {m["schema_version"] for d in docs.values() for m in d["nodes"] if m["state"] == "up"}
        if len(versions) != 1:
            return f"the nodes disagree on the schema version: {sorted(map(str, versions))}"
        return None

    def wait_agreement(self, up: list[ClusterNode] | None = None, timeout_s: float = AGREE_TIMEOUT_S) -> float:
        """Waits until `agreement_problem` is None; returns the seconds it took."""
        start = time.monotonic()
        deadline = start + timeout_s
        problem = "not checked"
        while time.monotonic() < deadline:
            self.check_alive()
            problem = self.agreement_problem(up)
            if problem is None:
                return time.monotonic() - start
            time.sleep(0.1)
        raise ClusterError(f"the cluster did not agree within {timeout_s} s: {problem}\n{self.logs()}")

    def wait_seen_down(self, k: int, by: list[ClusterNode] | None = None, timeout_s: float = 30) -> float:
        """Waits until every live node (or `by`) sees node k down; returns when (monotonic)."""
        host = self.node(k).host
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            docs = self.statuses(by)
            if docs and all(
                any(m["address"] == host and m["state"] == "down" for m in d["nodes"]) for d in docs.values()
            ):
                return time.monotonic()
            time.sleep(0.05)
        raise ClusterError(f"node {host} was not seen down within {timeout_s} s\n{self.logs()}")

    def local_schema_versions(self) -> dict[str, str]:
        """host -> the schema version each live node reports for itself."""
        out = {}
        for host, doc in self.statuses().items():
            me = [m for m in doc["nodes"] if m["host_id"] == doc["local"]]
            out[host] = me[0]["schema_version"] if me else None
        return out

    def leader(self) -> ClusterNode:
        """The node the live nodes name as the metadata log's leader (they must agree)."""
        docs = self.statuses()
        leaders = {d["metadata"].get("leader") for d in docs.values()}
        if len(leaders) != 1 or None in leaders:
            raise ClusterError(f"the live nodes name different metadata leaders: {leaders}")
        (leader,) = leaders
        for host, doc in docs.items():
            if doc["local"] == leader:
                return next(n for n in self.nodes if n.host == host)
        raise ClusterError(f"the metadata leader {leader} is not a live node")

    def table_exists_everywhere(self, keyspace: str, table: str, within_s: float = 5.0) -> dict[str, bool]:
        """host -> whether the node's system_schema lists the table, waiting up to `within_s` for
        every live node to list it."""
        sessions = {n.host: self.session(whitelist=[n]) for n in self.live_nodes()}
        deadline = time.monotonic() + within_s
        while True:
            found = {
                host: s.execute(
                    "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
                    (keyspace, table),
                ).one() is not None
                for host, s in sessions.items()
            }
            if all(found.values()) or time.monotonic() > deadline:
                return found
            time.sleep(0.1)

    # ---- metrics ---------------------------------------------------------------------------

    def metric_sum(self, name: str, nodes: list[ClusterNode] | None = None) -> float:
        """A metric summed over the live nodes (or `nodes`)."""
        return sum(n.metric(name) for n in (nodes if nodes is not None else self.live_nodes()))

    def metric_by_node(self, name: str) -> dict[str, float]:
        return {n.host: n.metric(name) for n in self.live_nodes()}

    def wait_hints_replayed(self, timeout_s: float, after: str) -> None:
        """Waits until no live node holds hints (`hayate_hints_pending_bytes` is 0 on each)."""
        deadline = time.monotonic() + timeout_s
        while True:
            pending = self.metric_by_node("hayate_hints_pending_bytes")
            if not any(pending.values()):
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"hints still pending {timeout_s} s after {after}: {pending}\n{self.logs()}")
            time.sleep(0.2)

    def wait_speculation_ready(self, timeout_s: float = 60) -> float:
        """Waits until every live node has timed enough replica answers to speculate.

        A coordinator asks one more replica when one is slower than its 99th percentile of
        replica latency, but knows no percentile before SPECULATION_SAMPLES_MIN answers: until
        then a read that asked a node that just died waits for the whole read timeout (5 s).
        Tests that kill a node under load run the load until speculation is armed, so that their
        outcome does not depend on how fast the machine got there. Returns the seconds waited."""
        start = time.monotonic()
        while True:
            counts = self.metric_by_node("hayate_coordinator_replica_responses_total")
            if all(c >= SPECULATION_SAMPLES_MIN for c in counts.values()):
                return time.monotonic() - start
            if time.monotonic() - start > timeout_s:
                raise ClusterError(f"the load gave too few replica answers to arm speculation: {counts}")
            time.sleep(0.1)

    # ---- drivers ---------------------------------------------------------------------------

    def driver(self, *, whitelist: list[ClusterNode] | None = None, consistency=None,
               retry_policy=None, request_timeout: float = REQUEST_TIMEOUT_S, **kwargs):
        """A `cassandra.cluster.Cluster` (protocol v4), token-aware over the whole cluster, or
        round robin over `whitelist` only; shut down by `close()`."""
        from cassandra import ConsistencyLevel
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster as DriverCluster, ExecutionProfile
        from cassandra.policies import (DCAwareRoundRobinPolicy, RetryPolicy, TokenAwarePolicy,
                                        WhiteListRoundRobinPolicy)

        if whitelist:
            policy = WhiteListRoundRobinPolicy([n.host for n in whitelist])
            contact = [n.host for n in whitelist]
        else:
            policy = TokenAwarePolicy(DCAwareRoundRobinPolicy())
            contact = [n.host for n in self.live_nodes()] or [self.nodes[0].host]
        profile = ExecutionProfile(
            load_balancing_policy=policy,
            consistency_level=consistency if consistency is not None else ConsistencyLevel.QUORUM,
            retry_policy=retry_policy or RetryPolicy(),
            request_timeout=request_timeout,
        )
        kwargs.setdefault("protocol_version", 4)
        kwargs.setdefault("connect_timeout", 5)
        kwargs.setdefault("control_connection_timeout", 5)
        c = DriverCluster(contact, port=self.cql_port, execution_profiles={EXEC_PROFILE_DEFAULT: profile}, **kwargs)
        self._drivers.append(c)
        return c

    def session(self, keyspace: str | None = None, **kwargs):
        """A connected session of `driver(**kwargs)`."""
        c = self.driver(**kwargs)
        try:
            session = c.connect(keyspace)
        except Exception as e:
            raise ClusterError(f"the driver could not connect: {e!r}\n{self.logs()}") from e
        # The driver opens its pools to the other hosts in the background; a statement sent to
        # one (`execute(..., host=h)`) before its pool is open fails with "Host has been marked
        # down or removed". Wait for a connection to every host it will use.
        want = len(kwargs.get("whitelist") or self.live_nodes())
        deadline = time.monotonic() + 15
        while True:
            states = session.get_pool_state()
            if len(states) >= want and all(st.get("open_count", 0) > 0 for st in states.values()):
                return session
            if time.monotonic() > deadline:
                raise ClusterError(f"the driver opened no connection to some hosts in 15 s: {states}\n{self.logs()}")
            time.sleep(0.05)


def running(name: str, **options):
    """For a module-scoped fixture: `yield from running("schema")` starts a cluster, yields it,
    and kills its nodes when the module is done (pass or fail). Skipped when the suite runs
    against a server it did not start (HAYATE_REFERENCE)."""
    import pytest

    if os.environ.get("HAYATE_REFERENCE"):
        pytest.skip("starts its own hayate cluster (HAYATE_REFERENCE is set)")
    with Cluster(name, **options) as c:
        c.start()
        yield c


def whitelisted(cluster: Cluster, k: int, **kwargs):
    """A session that sends every request to node k (WhiteListRoundRobinPolicy)."""
    return cluster.session(whitelist=[cluster.node(k)], **kwargs)
