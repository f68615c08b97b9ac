"""The Grafana dashboard (ops/grafana/hayate-cluster.json) against a real Prometheus scraping a
real 3-node cluster: every query of every panel returns data.

Grafana is not needed to check that: a panel is its PromQL, and the dashboard's only variables
are Grafana's rate interval and `$instance`. The test reads the JSON (no expression is written
here), starts a cluster (RF 3, 128 KiB write blocks, hints replayed slowly on purpose), starts
Debian's `prometheus` scraping every node each second with its own port and storage under the
test's tmp dir, and drives what the panels show:

- reads, writes, deletes and prepared statements (requests, latency, connections, device writes);
- an invalid query and a syntax error (errors by code);
- most rows written again, twice, whole (defragmentation frees blocks and moves bytes);
- a snapshot before the second overwrite (snapshot space pinned);
- node 3 killed: reads at ALL answer Unavailable, writes at ONE are hinted; node 3 back, the
  hinted rows are read at ALL before the (throttled) hints reach it, so the reads repair them,
  and then the hints are replayed; older rows read at ALL reach node 3's device (its post-write
  cache is empty after the restart).

Then, for each panel target, `$instance` becomes `.*` (the variable's "All") and
`$__rate_interval` and `$__interval` a window covering the whole test, as if the panel were
asked for one point over the test's time range; the query goes to `/api/v1/query` and must
return at least one series. Every target must also show a value above zero, except those in
MAY_BE_ZERO, each with the reason the test does not make it move (they are still checked for a
series). The `instance` variable's query must list the three nodes.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from cassandra import ConsistencyLevel, InvalidRequest, Unavailable
from cassandra.protocol import SyntaxException
from cassandra.query import SimpleStatement

from hayate_cluster import Cluster, ClusterError
from hayate_node import free_ports
from topology import hayate, on, output

DASHBOARD = Path(__file__).resolve().parents[2] / "ops" / "grafana" / "hayate-cluster.json"
PROMETHEUS = shutil.which("prometheus")
KEYSPACE = "dash"
TABLE = f"{KEYSPACE}.t"
# Rows of about 1 KiB: 600 of them fill several 128 KiB write blocks on every node (RF 3).
ROWS = 600
VALUE_BYTES = 1000
# Rows written at ONE while node 3 is down, then read at ALL as soon as it is back.
HINTED_ROWS = 40
# Hints replayed at 1 KiB/s split over two other nodes: the hinted rows (a few hundred bytes of
# hint each) take about ten seconds to reach node 3, so the reads at ALL right after its restart
# find it behind and repair it; without a throttle the replay could win the race.
HINT_THROTTLE = "1KiB"
SCRAPE_INTERVAL_S = 1
# How long Prometheus may take to start answering, and the nodes' figures to reach it.
PROMETHEUS_READY_TIMEOUT_S = 30
# How long defragmentation may take to free the blocks the overwrites emptied.
DEFRAG_TIMEOUT_S = 30
HINTS_TIMEOUT_S = 90

# (panel title, refId) -> why this test does not make the target's value move. The target is
# still checked for a series; only "above zero" is waived.
MAY_BE_ZERO = {
    ("Unavailables and timeouts", "B"): "a write timeout needs a replica up but silent for 2 s "
                                        "(test_cluster_partition.py makes one)",
    ("Unavailables and timeouts", "C"): "a read timeout needs a replica up but silent for 5 s",
    ("Speculative retries", "A"): "a coordinator speculates only after timing 200 replica answers, "
                                  "when a replica is slower than its p99: not something a short "
                                  "test can cause on purpose",
    ("Hints written, replayed and dropped", "C"): "hints are dropped only past max_hint_window "
                                                  "(3 h) or max_hints_size_per_host (1 GiB)",
    ("Hints pending", "A"): "the hints are all replayed before the queries; a one-point query at "
                            "the end reads 0",
    ("Stream bytes in and out", "A"): "no node joins or leaves in this test "
                                      "(tests/python/test_topology_*.py stream)",
    ("Streams in flight", "A"): "no node joins or leaves in this test",
    ("Pending ranges", "A"): "no node joins or leaves in this test",
}


def panel_targets(dashboard: dict) -> list[tuple[str, str, str]]:
    """(panel title, refId, expr) of every query of every panel, rows' nested panels included."""
    out = []

    def walk(panels):
        for p in panels:
            walk(p.get("panels", []))
            for t in p.get("targets", []):
                # Imported dashboards ask for their data source: every query must use the input.
                assert t["datasource"]["uid"] == "${DS_PROMETHEUS}", f"{p['title']}: {t['datasource']}"
                out.append((p["title"], t["refId"], t["expr"]))

    walk(dashboard["panels"])
    return out


def concrete(expr: str, window: str) -> str:
    """What Grafana sends for `expr` with "All" nodes chosen, the rate window set to `window`."""
    for name in ("__rate_interval", "__interval", "__range"):
        expr = expr.replace("${%s}" % name, window).replace("$" + name, window)
    expr = re.sub(r"\$\{instance(:regex)?\}|\$instance\b", ".*", expr)
    assert "$" not in expr, f"a variable this test does not know: {expr}"
    return expr


class Prometheus:
    """Debian's `prometheus`, its own port, config and storage under `directory`."""

    def __init__(self, directory: Path, targets: list[str]):
        self.directory = directory
        (self.port,) = free_ports(["127.0.0.1"], 1)
        self.url = f"http://127.0.0.1:{self.port}"
        config = directory / "prometheus.yml"
        config.write_text(
            "global:\n"
            f"  scrape_interval: {SCRAPE_INTERVAL_S}s\n"
            f"  scrape_timeout: {SCRAPE_INTERVAL_S}s\n"
            f"  evaluation_interval: {SCRAPE_INTERVAL_S}s\n"
            "scrape_configs:\n"
            "  - job_name: hayate\n"
            "    static_configs:\n"
            f"      - targets: {json.dumps(targets)}\n"
        )
        self.log_path = directory / "prometheus.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={directory / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
            )
        self.started = time.monotonic()

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "prometheus log:\n" + "\n".join(text[-lines:])

    def get(self, path: str, **params) -> dict:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.loads(r.read().decode())
        except urllib.error.HTTPError as e:
            # Prometheus answers a bad query with 400 and a JSON error: quote it.
            return json.loads(e.read().decode())

    def query(self, expr: str) -> list[dict]:
        answer = self.get("/api/v1/query", query=expr)
        assert answer.get("status") == "success", f"{expr}\n{answer}"
        data = answer["data"]
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        assert data["resultType"] == "vector", f"{expr}: {data['resultType']}"
        return data["result"]

    def wait_up(self, count: int) -> None:
        """Until Prometheus answers and has scraped `count` targets successfully."""
        deadline = time.monotonic() + PROMETHEUS_READY_TIMEOUT_S
        up = []
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"prometheus exited with {self.proc.returncode}\n{self.log_tail()}")
            try:
                # 503 until its storage is open.
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=5):
                    pass
            except OSError:
                time.sleep(0.2)
                continue
            up = self.query('up{job="hayate"} == 1')
            if len(up) == count:
                return
            time.sleep(0.2)
        raise AssertionError(f"prometheus scraped {len(up)} of {count} nodes within "
                             f"{PROMETHEUS_READY_TIMEOUT_S} s\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait_metric(cluster: Cluster, name: str, what: str, timeout_s: float) -> float:
    """Waits until `name` summed over the live nodes is above zero; returns the sum (0 if the
    time ran out: the dashboard check that follows then says which panel stayed flat)."""
    deadline = time.monotonic() + timeout_s
    while True:
        total = cluster.metric_sum(name)
        if total > 0 or time.monotonic() > deadline:
            print(f"{what}: {name} = {total}")
            return total
        time.sleep(0.2)


def value_of(k: int) -> str:
    return (f"{k}:" * VALUE_BYTES)[:VALUE_BYTES]


def drive(cluster: Cluster) -> None:
    """The traffic the module docstring lists, in that order."""
    session = cluster.session()
    session.execute(f"CREATE KEYSPACE {KEYSPACE} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 3}")
    session.execute(f"CREATE TABLE {TABLE} (k int PRIMARY KEY, v text)")
    insert = session.prepare(f"INSERT INTO {TABLE} (k, v) VALUES (?, ?)")
    select = session.prepare(f"SELECT v FROM {TABLE} WHERE k = ?")

    with pytest.raises(InvalidRequest):
        session.execute(f"SELECT * FROM {KEYSPACE}.no_such_table")
    with pytest.raises(SyntaxException):
        session.execute("SELEKT everything")

    for k in range(ROWS):
        session.execute(insert, (k, value_of(k)))
    for k in range(0, ROWS, 3):
        assert session.execute(select, (k,)).one().v == value_of(k)
    for k in range(ROWS - 50, ROWS):
        session.execute(f"DELETE FROM {TABLE} WHERE k = {k}")
    session.execute(f"SELECT * FROM {TABLE} LIMIT 100")

    # Three rows in four written again: the blocks they were in fall below defrag_lwm_pct (50%).
    # With a TTL, since an insert that only sets cells is a blind write: a delta kept beside the
    # row it updates, which stays live in its block.
    rewrite = session.prepare(f"INSERT INTO {TABLE} (k, v) VALUES (?, ?) USING TTL 86400")
    for k in range(ROWS):
        if k % 4:
            session.execute(rewrite, (k, value_of(k + 1)))
    wait_metric(cluster, "hayate_storage_defrag_blocks_total", "after the first overwrite", DEFRAG_TIMEOUT_S)

    # A snapshot pins the blocks the table is in: written over again, they are not reused.
    result = hayate("snapshot", KEYSPACE, "-t", "dashboard", "--all-nodes", *on(cluster.node(1)))
    assert result.returncode == 0, output(result)
    for k in range(ROWS):
        session.execute(rewrite, (k, value_of(k + 2)))

    # Node 3 down: Unavailable at ALL, hints for the writes at ONE.
    cluster.kill(3)
    cluster.wait_seen_down(3)
    at_all = SimpleStatement(f"SELECT v FROM {TABLE} WHERE k = 1", consistency_level=ConsistencyLevel.ALL)
    for _ in range(2):
        with pytest.raises(Unavailable):
            session.execute(at_all)
        time.sleep(1.5 * SCRAPE_INTERVAL_S)
    hinted = range(10_000, 10_000 + HINTED_ROWS)
    at_one = SimpleStatement(f"INSERT INTO {TABLE} (k, v) VALUES (%s, %s)", consistency_level=ConsistencyLevel.ONE)
    for k in hinted:
        session.execute(at_one, (k, f"hinted {k}"))
    assert cluster.metric_sum("hayate_hints_written_total") > 0, "writes at ONE with node 3 down wrote no hints"

    # Node 3 back: the reads at ALL find it behind (its hints are throttled) and repair it. Its
    # post-write cache starts empty, so its share of reads of the older rows goes to the device.
    cluster.start_node(3)
    read_at_all = SimpleStatement(f"SELECT v FROM {TABLE} WHERE k = %s", consistency_level=ConsistencyLevel.ALL)
    for k in hinted:
        assert session.execute(read_at_all, (k,)).one().v == f"hinted {k}"
    for k in range(0, ROWS - 50, 5):
        assert session.execute(read_at_all, (k,)).one().v == value_of(k + 2)
    print(f"read repairs: {cluster.metric_sum('hayate_coordinator_read_repairs_total')}")
    cluster.wait_hints_replayed(HINTS_TIMEOUT_S, after="node 3 came back")
    print(f"hints replayed: {cluster.metric_sum('hayate_hints_replayed_total')}")

    with pytest.raises(InvalidRequest):
        session.execute(f"SELECT * FROM {KEYSPACE}.no_such_table")


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_every_dashboard_query_returns_data(tmp_path):
    if os.environ.get("HAYATE_REFERENCE"):
        pytest.skip("starts its own hayate cluster (HAYATE_REFERENCE is set)")
    if PROMETHEUS is None:
        pytest.skip("the prometheus binary is not on PATH: install Debian's package "
                    "(apt-get install prometheus; scripts/driver-tests.sh does as root)")
    dashboard = json.loads(DASHBOARD.read_text())
    targets = panel_targets(dashboard)
    assert targets, f"{DASHBOARD} has no queries"
    (variable,) = [v for v in dashboard["templating"]["list"] if v["name"] == "instance"]

    config = f'[cluster]\nhinted_handoff_throttle = "{HINT_THROTTLE}"\n'
    with Cluster("dashboard", nodes_count=3, spare_nodes=0, write_block_size="128KiB", config=config) as cluster:
        cluster.start()
        scrape_targets = [f"{n.host}:{n.metrics_port}" for n in cluster.nodes]
        prometheus = Prometheus(tmp_path, scrape_targets)
        try:
            prometheus.wait_up(len(scrape_targets))
            drive(cluster)
            # The last figures reach Prometheus: a few scrapes of every node, node 3 included.
            time.sleep(3 * SCRAPE_INTERVAL_S)
            prometheus.wait_up(len(scrape_targets))
            window = f"{math.ceil(time.monotonic() - prometheus.started) + 5}s"

            # The variable lists every node.
            m = re.fullmatch(r"label_values\((\w+), instance\)", variable["query"]["query"])
            assert m, f"the instance variable's query is not label_values(METRIC, instance): {variable}"
            listed = {s["metric"]["instance"] for s in prometheus.query(m.group(1))}
            assert listed == set(scrape_targets), f"the instance variable lists {listed}"

            empty, flat, report = [], [], []
            for title, ref, expr in targets:
                query = concrete(expr, window)
                series = prometheus.query(query)
                values = [float(s["value"][1]) for s in series]
                finite = [v for v in values if math.isfinite(v)]
                top = max(finite, default=float("nan"))
                waived = MAY_BE_ZERO.get((title, ref))
                report.append(f"{title} [{ref}]: {len(series)} series, max {top:g}"
                              + (f" (may be 0: {waived})" if waived else ""))
                if not series:
                    empty.append(f"{title} [{ref}]: {query}")
                elif waived is None and not top > 0:
                    flat.append(f"{title} [{ref}]: {values} from {query}")
            print("\n" + "\n".join(report))
            assert not empty, "dashboard queries that returned no series:\n" + "\n".join(empty)
            assert not flat, "dashboard queries whose values never rose above 0:\n" + "\n".join(flat)
            # A waiver for a target the dashboard no longer has should go with it.
            assert all(k in {(t, r) for t, r, _ in targets} for k in MAY_BE_ZERO), \
                "MAY_BE_ZERO names a panel target the dashboard no longer has"
        except (AssertionError, ClusterError):
            print(prometheus.log_tail())
            raise
        finally:
            prometheus.stop()
