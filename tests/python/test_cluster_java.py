"""The Java drivers against a cluster of three: tests/java's Cluster3Test (the DataStax driver
3.11, YCSB's) and Cluster4Test (the Apache driver 4.18).

Each connects through one contact point, must see all three hosts (up, datacenter1, 16 tokens
each), and route by token: every bound statement of a workload at RF 1 runs on a host the
driver's own token map names a replica, and hayate counts under 5% of the requests as reaching a
node that is not a replica (`hayate_coordinator_not_replica_total`, summed over the nodes).
One Maven run covers both classes; each becomes one pytest result, as in test_java_drivers.py.
"""

import os
import re
import shutil
import subprocess

import pytest

from hayate_cluster import running
from test_java_drivers import POM, REPORTS, junit_results


@pytest.fixture(scope="module")
def three():
    yield from running("java")


@pytest.fixture(scope="module")
def maven_run(three):
    mvn = shutil.which("mvn")
    assert mvn, "Maven (mvn) is not on PATH; tests/java needs Maven 3.8 and Java 17"
    if REPORTS.exists():
        shutil.rmtree(REPORTS)
    cmd = [mvn, "-q", "-B", "-f", str(POM), "test",
           "-Dtest=Cluster3Test,Cluster4Test",
           f"-Dhayate.cluster.hosts={','.join(n.host for n in three.nodes)}",
           f"-Dhayate.port={three.cql_port}", f"-Dhayate.metrics.port={three.metrics_port}",
           "-Dsurefire.failIfNoSpecifiedTests=false", "-Dmaven.test.failure.ignore=true"]
    if os.environ.get("HAYATE_MVN_OFFLINE") == "1":
        cmd.insert(1, "-o")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("cls", ["Cluster3Test", "Cluster4Test"])
def test_java_driver_on_a_cluster(three, maven_run, cls):
    results = junit_results(cls)
    assert results is not None, (
        f"Maven produced no report for {cls} (exit {maven_run.returncode}).\n"
        f"stdout:\n{maven_run.stdout[-4000:]}\nstderr:\n{maven_run.stderr[-4000:]}")
    tests, failures = results
    assert tests == 2, f"{cls} ran {tests} tests"
    assert not failures, (f"{len(failures)} of {tests} JUnit tests failed:\n" + "\n".join(failures)
                          + f"\n{three.logs()}")
    # The routing figure the class prints.
    version = {"Cluster3Test": "3.11", "Cluster4Test": "4.18"}[cls]
    for line in re.findall(rf"driver {re.escape(version)}: .*", maven_run.stdout):
        print(f"\n{line}")
