"""Fixtures: real `hayate` nodes and Cassandra driver sessions connected to them.

Most tests share one node (`node`) and give themselves a fresh keyspace (`ks`), because starting a
process per test would make the suite slow without testing anything more. Tests that restart,
kill or reconfigure a node make their own with `node_factory`, which kills whatever it started
when the test ends, pass or fail.

If the shared node dies during a test, that test fails with the node's log, and the node is
started again on the same data directory for the tests after it: one crash should be reported
once, by the test that caused it, not as a hundred connection errors.

`HAYATE_REFERENCE=127.0.0.1:9042 pytest tests/python` runs the shared-node tests against a server
started elsewhere (Apache Cassandra, to check that an expectation here is really Cassandra's);
tests that start their own nodes are skipped then.
"""

from __future__ import annotations

import itertools
import os
import re

import pytest

from hayate_node import ExternalNode, Node, NodeError

REFERENCE = os.environ.get("HAYATE_REFERENCE")


def pytest_collection_modifyitems(config, items):
    if REFERENCE:
        skip = pytest.mark.skip(reason="hayate refuses this by design; Cassandra accepts it")
        for item in items:
            if "hayate_scope" in item.keywords:
                item.add_marker(skip)


class SharedNode:
    """The suite's long-lived node and one driver session to it, rebuilt if the node restarts."""

    def __init__(self):
        self.node = ExternalNode(REFERENCE) if REFERENCE else Node("shared")
        self.cluster = None
        self.session = None

    def ensure_started(self) -> Node:
        if not self.node.alive():
            self.drop_session()
            self.node.start()
        return self.node

    def get_session(self):
        self.ensure_started()
        if self.session is None:
            try:
                self.cluster, self.session = self.node.connect()
            except Exception as e:
                raise NodeError(
                    f"the Python driver could not connect to the shared node: {e}\n"
                    f"{self.node.log_tail()}"
                ) from e
        return self.session

    def drop_session(self) -> None:
        if self.cluster is not None:
            self.cluster.shutdown()
        self.cluster = None
        self.session = None


@pytest.fixture(scope="session")
def _shared():
    shared = SharedNode()
    yield shared
    shared.drop_session()
    shared.node.discard()


@pytest.fixture
def node(_shared, request):
    """The shared node, checked to be still alive after the test that used it."""
    n = _shared.ensure_started()
    yield n
    if not n.alive():
        tail = n.log_tail()
        code = n.proc.returncode
        _shared.drop_session()
        pytest.fail(f"the shared node died during {request.node.name} (status {code}).\n{tail}")


@pytest.fixture
def session(node, _shared):
    """A driver session (protocol v4) to the shared node, with no keyspace set."""
    return _shared.get_session()


@pytest.fixture
def cluster(node, _shared):
    _shared.get_session()
    return _shared.cluster


_ks_counter = itertools.count()
# Distinguishes this run's keyspaces from an earlier run's on a long-lived reference server.
RUN_ID = os.urandom(2).hex()


@pytest.fixture
def fresh_name(request):
    """Makes keyspace names unique to this test and this run: `fresh_name("ddl")`."""
    def make(prefix: str) -> str:
        return f"{prefix}_{next(_ks_counter)}_{RUN_ID}"
    return make


class Keyspace:
    def __init__(self, name: str, session):
        self.name = name
        self.session = session

    def __str__(self) -> str:
        return self.name


@pytest.fixture
def ks(request, session, cluster):
    """A fresh keyspace (SimpleStrategy, RF 1) named after the test, and a session using it."""
    base = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower()).strip("_")
    name = f"{base[:34]}_{next(_ks_counter)}_{RUN_ID}"
    session.execute(
        f"CREATE KEYSPACE {name} WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    ks_session = cluster.connect(name)
    yield Keyspace(name, ks_session)
    ks_session.shutdown()


@pytest.fixture
def node_factory(request):
    """Makes extra nodes (`node_factory(name, **options)`); kills every one at the end."""
    if REFERENCE:
        pytest.skip("starts its own hayate nodes (HAYATE_REFERENCE is set)")
    made: list[Node] = []
    clusters = []

    def make(name: str | None = None, *, start: bool = True, **options) -> Node:
        n = Node(name or re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:40], **options)
        made.append(n)
        if start:
            n.start()
        return n

    def connect(n: Node, keyspace: str | None = None, **kwargs):
        cluster, session = n.connect(keyspace, **kwargs)
        clusters.append(cluster)
        return cluster, session

    make.connect = connect
    yield make
    for c in clusters:
        try:
            c.shutdown()
        except Exception:
            pass
    for n in made:
        n.discard()
