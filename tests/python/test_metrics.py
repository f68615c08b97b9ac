"""The Prometheus endpoint: request counts by kind and storage figures, in Prometheus text.

Metric names are hayate's to choose, so these tests do not name them: they look for a series
labelled with the request kind whose count moved by exactly the number of requests this test
sent, which no constant, stale or mislabelled series can do.
"""

import re
import urllib.request

import pytest

from hayate_node import free_port

SAMPLE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?P<labels>.*)\})?\s+(?P<value>\S+)(\s+-?\d+)?$"
)
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape(port: int) -> tuple[dict, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        assert resp.status == 200
        content_type = resp.headers.get("Content-Type", "")
        text = resp.read().decode()
    samples = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a Prometheus sample line: {line!r}"
        labels = tuple(sorted(LABEL.findall(m.group("labels") or "")))
        samples[(m.group("name"), labels)] = float(m.group("value"))
    return samples, content_type


@pytest.fixture
def metrics_node(node_factory):
    return node_factory("metrics", metrics_port=free_port())


def series_for(samples: dict, kind: str) -> dict:
    """Series with any label value equal to kind, ignoring case (opcode="EXECUTE", kind="execute")."""
    return {key: v for key, v in samples.items() if any(val.lower() == kind for _, val in key[1])}


def test_endpoint_serves_prometheus_text(metrics_node):
    samples, content_type = scrape(metrics_node.metrics_port)
    assert content_type.startswith("text/plain"), content_type
    assert samples, "the endpoint returned no samples"


def test_request_counters_by_kind(metrics_node, node_factory):
    cluster, session = node_factory.connect(metrics_node)
    session.execute("CREATE KEYSPACE m WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE m.t (k int PRIMARY KEY, v text)")
    insert = session.prepare("INSERT INTO m.t (k, v) VALUES (?, ?)")
    before, _ = scrape(metrics_node.metrics_port)

    executes, queries = 31, 17
    for k in range(executes):
        session.execute(insert, (k, "x"))
    for k in range(queries):
        session.execute(f"SELECT v FROM m.t WHERE k = {k}")

    after, _ = scrape(metrics_node.metrics_port)
    for kind, sent in (("execute", executes), ("query", queries)):
        moved = {key: after[key] - before.get(key, 0.0) for key in series_for(after, kind)}
        assert moved, f"no series is labelled with the request kind {kind!r}"
        assert sent in moved.values(), (
            f"no {kind} series moved by the {sent} requests sent: {moved}")


def test_storage_figures_move_with_writes(metrics_node, node_factory):
    cluster, session = node_factory.connect(metrics_node)
    before, _ = scrape(metrics_node.metrics_port)
    storage = {key for key in before if re.search(r"storage|device|record|block|bytes", key[0])}
    assert storage, "no storage figures (device, records, blocks, bytes) in /metrics"

    session.execute("CREATE KEYSPACE m WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE m.t (k int PRIMARY KEY, v blob)")
    insert = session.prepare("INSERT INTO m.t (k, v) VALUES (?, ?)")
    for k in range(500):
        session.execute(insert, (k, bytes(1024)))

    after, _ = scrape(metrics_node.metrics_port)
    grew = [key for key in storage if after.get(key, 0.0) > before[key]]
    assert grew, "no storage figure changed after writing 500 KiB of rows"
