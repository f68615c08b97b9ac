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
