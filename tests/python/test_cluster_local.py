"""`hayate local start`, `hayate status` and `hayate local stop`, end to end.

`hayate local` runs its nodes on 127.0.0.1 to 127.0.0.N with every port at its default (CQL
9042, internode 7000, metrics 9180), as a user's machine would; the test is skipped, saying so,
when any of those is taken (another hayate or Cassandra running here, another test run).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from hayate_node import _bindable
from hayate_node import HAYATE_BIN, NODES_ROOT, pid_alive as alive

NODES = 3
HOSTS = [f"127.0.0.{k}" for k in range(1, NODES + 1)]
PORTS = (9042, 7000, 9180)
COMMAND_TIMEOUT_S = 180


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(HAYATE_BIN), *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                          env={**os.environ, "NO_COLOR": "1"})


def node_pids(directory: Path) -> dict[int, int]:
    out = {}
    for k in range(1, NODES + 1):
        try:
            out[k] = int((directory / f"node{k}" / "hayate.pid").read_text().strip())
        except (OSError, ValueError):
            pass
    return out


@pytest.fixture
def local_dir():
    if os.environ.get("HAYATE_REFERENCE"):
        pytest.skip("starts its own hayate cluster (HAYATE_REFERENCE is set)")
    taken = [f"{h}:{p}" for h in HOSTS for p in PORTS if not _bindable(h, p)]
    if taken:
        pytest.skip(f"`hayate local` needs the default ports, and these are taken: {', '.join(taken)}")
    directory = NODES_ROOT / f"local-{os.getpid()}"
    shutil.rmtree(directory, ignore_errors=True)
    yield directory
    # Whatever happened, no node outlives the test.
    for pid in node_pids(directory).values():
        if alive(pid) and b"hayate" in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.kill(pid, signal.SIGKILL)
    for k in range(1, NODES + 1):
        shutil.rmtree(directory / f"node{k}" / "data", ignore_errors=True)


def logs(directory: Path) -> str:
    out = []
    for k in range(1, NODES + 1):
        path = directory / f"node{k}" / "node.log"
        lines = path.read_text(errors="replace").splitlines()[-20:] if path.exists() else ["(no log)"]
        out.append(f"--- {path} ---\n" + "\n".join(lines))
    return "\n".join(out)


@pytest.mark.slow
def test_local_start_status_stop(local_dir):
    started = run("local", "start", "--nodes", str(NODES), "--dir", str(local_dir), "--", "--device-size", "256MiB")
    if started.returncode != 0 and "Address already in use" in started.stderr + logs(local_dir):
        pytest.skip(f"a default port was taken meanwhile: {started.stderr.strip()[:300]}")
    assert started.returncode == 0, f"local start failed:\n{started.stdout}\n{started.stderr}\n{logs(local_dir)}"
    pids = node_pids(local_dir)
    assert sorted(pids) == list(range(1, NODES + 1)) and all(alive(p) for p in pids.values())
    # start prints the status table once every node is up.
    assert len(re.findall(r"^UN\s+127\.0\.0\.\d", started.stdout, re.M)) == NODES, started.stdout

    status = run("status", "--host", "127.0.0.2", "--port", "9180")
    assert status.returncode == 0, status.stderr
    rows = re.findall(r"^(UN)\s+(127\.0\.0\.\d)\s+.*?\s(16)\s+(33\.3%)\s", status.stdout, re.M)
    assert sorted(r[1] for r in rows) == HOSTS, f"hayate status printed:\n{status.stdout}"

    # A driver through the first node finds the three.
    from cassandra import ConsistencyLevel
    from cassandra.cluster import Cluster
    from cassandra.query import SimpleStatement
    cluster = Cluster(["127.0.0.1"], port=9042, protocol_version=4, connect_timeout=5)
    try:
        session = cluster.connect()
        assert sorted(h.address for h in cluster.metadata.all_hosts()) == HOSTS
        session.execute("CREATE KEYSPACE lc WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        session.execute("CREATE TABLE lc.t (k int PRIMARY KEY, v int)")
        # At QUORUM: at the driver's default (LOCAL_ONE) the read may reach a replica the write
        # has not reached yet, which is eventual consistency, not a fault.
        quorum = ConsistencyLevel.QUORUM
        session.execute(SimpleStatement("INSERT INTO lc.t (k, v) VALUES (1, 1)", consistency_level=quorum))
        row = session.execute(SimpleStatement("SELECT v FROM lc.t WHERE k = 1", consistency_level=quorum)).one()
        assert row is not None and row.v == 1, row
    finally:
        cluster.shutdown()

    # A second start of a running cluster says so and starts nothing.
    again = run("local", "start", "--dir", str(local_dir))
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("already running") == NODES, again.stdout
    assert node_pids(local_dir) == pids

    stopped = run("local", "stop", "--dir", str(local_dir))
    assert stopped.returncode == 0, f"local stop failed:\n{stopped.stdout}\n{stopped.stderr}"
    assert stopped.stdout.count("stopped") == NODES, stopped.stdout
    assert not any(alive(p) for p in pids.values()), "a node outlived `hayate local stop`"
    after = run("status", "--host", "127.0.0.1", "--port", "9180")
    assert after.returncode != 0, "hayate status should fail once the nodes are stopped"
