"""The Java drivers (tests/java): DataStax 3.11 as YCSB uses it, and Apache Cassandra 4.18.

One Maven run against the shared node covers both JUnit classes; each becomes one pytest result
here, failing with the JUnit failures of its class. The first run downloads the drivers into
~/.m2; later runs work offline (HAYATE_MVN_OFFLINE=1 passes -o to prove it).
"""

import os
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from hayate_node import REPO_ROOT

POM = REPO_ROOT / "tests" / "java" / "pom.xml"
REPORTS = REPO_ROOT / "target" / "java-tests" / "surefire-reports"


@pytest.fixture(scope="module")
def maven_run(_shared):
    node = _shared.ensure_started()
    mvn = shutil.which("mvn")
    assert mvn, "Maven (mvn) is not on PATH; tests/java needs Maven 3.8 and Java 17"
    if REPORTS.exists():
        shutil.rmtree(REPORTS)
    cmd = [mvn, "-q", "-B", "-f", str(POM), "test",
           f"-Dhayate.host={node.host}", f"-Dhayate.port={node.port}",
           # Keep going after a failing class, so that both report.
           "-Dsurefire.failIfNoSpecifiedTests=false", "-Dmaven.test.failure.ignore=true"]
    if os.environ.get("HAYATE_MVN_OFFLINE") == "1":
        cmd.insert(1, "-o")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    return proc


def junit_results(cls: str):
    path = REPORTS / f"TEST-hayate.{cls}.xml"
    if not path.exists():
        return None
    suite = ET.parse(path).getroot()
    failures = []
    for case in suite.iter("testcase"):
        for kind in ("failure", "error"):
            for el in case.findall(kind):
                first_line = (el.get("message") or el.text or "").strip().splitlines()[:1]
                failures.append(f"{case.get('name')}: {el.get('type')}: {first_line[0] if first_line else ''}")
    return int(suite.get("tests")), failures


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("cls", ["Driver3Test", "Driver4Test"])
def test_java_driver(maven_run, cls):
    results = junit_results(cls)
    assert results is not None, (
        f"Maven produced no report for {cls} (exit {maven_run.returncode}).\n"
        f"stdout:\n{maven_run.stdout[-4000:]}\nstderr:\n{maven_run.stderr[-4000:]}")
    tests, failures = results
    assert tests > 0
    assert not failures, f"{len(failures)} of {tests} JUnit tests failed:\n" + "\n".join(failures)
    complaints = driver_complaints(cls)
    assert not complaints, f"the {cls} driver logged {len(complaints)} errors or warnings:\n" + "\n".join(complaints[:5])


# What a driver may rightly warn about against any server: a test keyspace of replication
# factor 3 on this one node (the driver cannot place three replicas, and says so).
EXPECTED_WARNINGS = ("could not achieve replication factor",)


def driver_complaints(cls: str):
    """The ERROR and WARN lines the drivers logged (simplelogger, tests/java/src/test/resources)
    while the class ran: reading the schema metadata must raise none of them.

    The DataStax 3.11 driver once logged an ERROR for every table because system_schema.tables
    lacked the `read_repair_chance` column Cassandra 5.0 still has; this catches such gaps."""
    suite = ET.parse(REPORTS / f"TEST-hayate.{cls}.xml").getroot()
    lines = []
    for el in suite.iter():
        if el.tag in ("system-out", "system-err") and el.text:
            lines.extend(el.text.splitlines())
    return [ln for ln in lines
            if (" ERROR " in ln or " WARN " in ln) and not any(w in ln for w in EXPECTED_WARNINGS)]
