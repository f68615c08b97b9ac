"""The Java driver 4.x during a join: tests/java's Join4Test connects to a cluster of three
holding data, then a fourth node joins (streaming its ranges); the driver must learn of it by
itself (its TOPOLOGY_CHANGE event and system.peers_v2), with its 16 tokens, and route requests
to it by its token map, with under 5% of the requests reaching a node that is not a replica
(`hayate_coordinator_not_replica_total`).

The Maven run starts first and connects; once it has written its ready file, the fourth node
starts here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

import pytest

from hayate_cluster import running
from test_java_drivers import POM, REPORTS, junit_results

READY_TIMEOUT_S = 600


@pytest.fixture(scope="module")
def three():
    yield from running("java_join")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_java_driver_sees_a_joining_node_and_routes_to_it(three, tmp_path):
    mvn = shutil.which("mvn")
    assert mvn, "Maven (mvn) is not on PATH; tests/java needs Maven 3.8 and Java 17"
    session = three.session()
    session.execute("CREATE KEYSPACE held WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}")
    session.execute("CREATE TABLE held.t (k int PRIMARY KEY, v int)")
    insert = session.prepare("INSERT INTO held.t (k, v) VALUES (?, ?)")
    for k in range(500):
        session.execute(insert, (k, k))
    fourth = three.add_node()
    ready = tmp_path / "ready"
    if REPORTS.exists():
        shutil.rmtree(REPORTS)
    cmd = [mvn, "-q", "-B", "-f", str(POM), "test", "-Dtest=Join4Test",
           f"-Dhayate.cluster.hosts={','.join(n.host for n in three.nodes[:3])}",
           f"-Dhayate.port={three.cql_port}", f"-Dhayate.metrics.port={three.metrics_port}",
           f"-Dhayate.join.host={fourth.host}", f"-Dhayate.join.ready={ready}",
           "-Dsurefire.failIfNoSpecifiedTests=false", "-Dmaven.test.failure.ignore=true"]
    if os.environ.get("HAYATE_MVN_OFFLINE") == "1":
        cmd.insert(1, "-o")
    maven = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not ready.exists() and maven.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if ready.exists():
            three.start_node(fourth.index)
        stdout, stderr = maven.communicate(timeout=600)
    finally:
        if maven.poll() is None:
            maven.kill()
    results = junit_results("Join4Test")
    assert results is not None, f"Maven produced no report (exit {maven.returncode}).\n{stdout[-4000:]}\n{stderr[-4000:]}"
    tests, failures = results
    assert tests == 1, f"Join4Test ran {tests} tests:\n{stdout[-3000:]}"
    assert not failures, "Join4Test failed:\n" + "\n".join(failures) + f"\n{three.logs()}"
    for line in re.findall(r"driver 4.18 after a join: .*", stdout):
        print(f"\n{line}")
