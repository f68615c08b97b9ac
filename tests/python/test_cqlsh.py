"""cqlsh (the PyPI package, 6.2) pointed at the node, non-interactively, as a person would use it.

The PyPI cqlsh runs on the cassandra-driver installed beside it (only the cqlsh script inside a
Cassandra tarball bundles its own driver, which is what CQLSH_NO_BUNDLED is about), so nothing
needs setting on a fresh machine. It writes its history and reads cqlshrc under ~/.cassandra, so
each run gets its own HOME. cqlsh 6 sends DESCRIBE to the server as a query when the server's
release_version is 4.0 or later, and prints the `create_statement` column it gets back.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REFERENCE

CQLSH = Path(sys.executable).parent / "cqlsh"


@pytest.fixture
def cqlsh(node, tmp_path):
    home = tmp_path / "home"
    home.mkdir()

    def run(*args, expect_ok=True, target=None):
        target = target or node
        # cqlsh adds a ";" to an -e string that does not end with one; trailing blanks would make
        # that an empty statement.
        proc = subprocess.run(
            [str(CQLSH), target.host, str(target.port), *(a.strip() for a in args)],
            capture_output=True, text=True, timeout=60,
            env={**os.environ, "HOME": str(home)},
        )
        # "WARNING: cqlsh was built against 5.0.0, but this server is X": printed whenever the
        # versions differ (hayate claims 5.0.0, so only against a reference server), and not part
        # of any output checked here; `raw_stdout` keeps it for the test that checks it is absent.
        proc.raw_stdout = proc.stdout
        proc.stdout = "\n".join(ln for ln in proc.stdout.splitlines() if not ln.startswith("WARNING: cqlsh was built"))
        if expect_ok:
            assert proc.returncode == 0, f"cqlsh exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
            assert "Error" not in proc.stderr, proc.stderr
        return proc

    return run


def table_lines(output: str) -> list[list[str]]:
    """The cells of cqlsh's printed result table (header first), whitespace-trimmed."""
    lines = [ln for ln in output.splitlines() if "|" in ln]
    return [[cell.strip() for cell in ln.split("|")] for ln in lines]


@pytest.mark.skipif(bool(REFERENCE), reason="a reference Cassandra reports its own release")
def test_cqlsh_finds_the_release_it_was_built_for(cqlsh):
    """cqlsh 6.2 was built against Cassandra 5.0.0 and warns at every start when the server
    reports another version; hayate reports the 5.0 line it speaks."""
    proc = cqlsh("-e", "SELECT release_version FROM system.local")
    assert "WARNING" not in proc.raw_stdout + proc.stderr, proc.raw_stdout + proc.stderr
    assert "5.0.0" in proc.stdout


def test_execute_creates_inserts_and_prints_a_table(cqlsh, fresh_name):
    ks = fresh_name("cqlsh")
    out = cqlsh("-e", f"""
        CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}};
        CREATE TABLE {ks}.people (id int PRIMARY KEY, name text, score double, tags set<text>);
        INSERT INTO {ks}.people (id, name, score, tags) VALUES (1, 'Ada', 9.5, {{'math', 'engines'}});
        INSERT INTO {ks}.people (id, name) VALUES (2, 'Grace');
        SELECT id, name, score, tags FROM {ks}.people WHERE id IN (1, 2);
    """).stdout
    assert table_lines(out) == [
        ["id", "name", "score", "tags"],
        ["1", "Ada", "9.5", "{'engines', 'math'}"],
        ["2", "Grace", "null", "null"],
    ]
    assert "(2 rows)" in out


def test_file_with_use_comments_and_multiline_statements(cqlsh, fresh_name, tmp_path):
    ks = fresh_name("cqlsh_file")
    script = tmp_path / "script.cql"
    script.write_text(f"""
-- a comment line
CREATE KEYSPACE {ks} WITH replication =
    {{'class': 'SimpleStrategy', 'replication_factor': 1}};
USE {ks};
CREATE TABLE t (
    k int,
    c int,   // trailing comment
    v text,
    PRIMARY KEY (k, c)
);
/* a block
   comment */
INSERT INTO t (k, c, v) VALUES (1, 2, 'two');
INSERT INTO t (k, c, v) VALUES (1, 1, 'one');
SELECT c, v FROM t WHERE k = 1;
""")
    out = cqlsh("-f", str(script)).stdout
    assert table_lines(out) == [["c", "v"], ["1", "one"], ["2", "two"]]


def test_errors_go_to_stderr_with_a_failing_exit_code(cqlsh):
    proc = cqlsh("-e", "SELECT * FROM no_such_keyspace.t", expect_ok=False)
    assert proc.returncode != 0
    assert "InvalidRequest" in proc.stderr and "no_such_keyspace" in proc.stderr, proc.stderr
    proc = cqlsh("-e", "SELEC 1", expect_ok=False)
    assert proc.returncode != 0
    assert "SyntaxException" in proc.stderr, proc.stderr


def test_describe_keyspaces(cqlsh, fresh_name):
    ks = fresh_name("cqlsh_list")
    cqlsh("-e", f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    names = cqlsh("-e", "DESCRIBE KEYSPACES").stdout.split()
    assert ks in names
    assert {"system", "system_schema"} <= set(names)


def test_describe_keyspace_shows_its_create_statements(cqlsh, fresh_name):
    ks = fresh_name("cqlsh_desc")
    cqlsh("-e", f"""
        CREATE KEYSPACE {ks} WITH replication = {{'class': 'NetworkTopologyStrategy', 'datacenter1': 1}};
        CREATE TABLE {ks}.a (k int PRIMARY KEY, v text);
        CREATE TABLE {ks}.b (k int, c int, PRIMARY KEY (k, c));
    """)
    out = cqlsh("-e", f"DESCRIBE KEYSPACE {ks}").stdout
    assert re.search(rf"CREATE KEYSPACE {ks} WITH replication = \{{'class': '(org\.apache\.cassandra\.locator\.)?"
                     rf"NetworkTopologyStrategy', 'datacenter1': '1'\}}\s+AND durable_writes = true;", out), out
    assert f"CREATE TABLE {ks}.a (" in out and f"CREATE TABLE {ks}.b (" in out


SOURCE_TABLE = """CREATE TABLE {ks}.events (
    tenant text,
    day int,
    at timestamp,
    seq int,
    body text,
    tags set<text>,
    attrs map<text, frozen<list<int>>>,
    PRIMARY KEY ((tenant, day), at, seq)
) WITH CLUSTERING ORDER BY (at DESC, seq ASC)
    AND comment = 'described and recreated'
    AND default_time_to_live = 3600
    AND gc_grace_seconds = 7200"""


def test_describe_table_recreates_the_same_table(cqlsh, fresh_name, session, cluster):
    """DESCRIBE TABLE's output, run in another keyspace, makes an identical table."""
    source, copy = fresh_name("cqlsh_src"), fresh_name("cqlsh_copy")
    for ks in (source, copy):
        session.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    session.execute(SOURCE_TABLE.format(ks=source))

    out = cqlsh("-e", f"DESCRIBE TABLE {source}.events").stdout
    assert f"CREATE TABLE {source}.events (" in out, out
    # cqlsh may print a version warning first; the statement runs to the end.
    described = out[out.index("CREATE TABLE"):].strip()
    session.execute(described.replace(f"{source}.events", f"{copy}.events"))

    cluster.refresh_schema_metadata()
    a = cluster.metadata.keyspaces[source].tables["events"]
    b = cluster.metadata.keyspaces[copy].tables["events"]
    assert a.export_as_string().replace(source, copy) == b.export_as_string()
    assert [c.name for c in b.partition_key] == ["tenant", "day"]
    assert [(c.name, c.is_reversed) for c in b.clustering_key] == [("at", True), ("seq", False)]
    assert {n: c.cql_type for n, c in b.columns.items()}["attrs"] == "map<text, frozen<list<int>>>"
    assert (b.options["comment"], b.options["default_time_to_live"], b.options["gc_grace_seconds"]) == (
        "described and recreated", 3600, 7200)
    # And the copy describes the same way.
    again = cqlsh("-e", f"DESCRIBE TABLE {copy}.events").stdout
    assert again[again.index("CREATE TABLE"):].strip() == described.replace(f"{source}.events", f"{copy}.events")


def test_describe_tables_in_a_keyspace(cqlsh, fresh_name):
    ks = fresh_name("cqlsh_tables")
    cqlsh("-e", f"""
        CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}};
        CREATE TABLE {ks}.first (k int PRIMARY KEY);
        CREATE TABLE {ks}.second (k int PRIMARY KEY);
    """)
    out = cqlsh("-k", ks, "-e", "DESCRIBE TABLES").stdout
    assert out.split() == ["first", "second"]


def test_login_with_username_and_password(node_factory, tmp_path):
    n = node_factory("cqlsh_auth", authenticator="PasswordAuthenticator")
    env = {**os.environ, "HOME": str(tmp_path)}

    def run(*args):
        return subprocess.run([str(CQLSH), n.host, str(n.port), *args], capture_output=True, text=True,
                              timeout=60, env=env)

    ok = run("-u", "cassandra", "-p", "cassandra", "-e", "SELECT cluster_name FROM system.local")
    assert ok.returncode == 0, ok.stderr
    assert "(1 rows)" in ok.stdout
    bad = run("-u", "cassandra", "-p", "wrong", "-e", "SELECT cluster_name FROM system.local")
    assert bad.returncode != 0
    assert "AuthenticationFailed" in bad.stderr or "Bad credentials" in bad.stderr, bad.stderr


def test_copy_to_and_from_csv(cqlsh, fresh_name, tmp_path, session):
    """COPY TO reads the table by token ranges from worker processes; COPY FROM writes it back
    with prepared batches: a round trip through CSV must give the same rows."""
    ks = fresh_name("cqlsh_copy_csv")
    session.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    session.execute(f"CREATE TABLE {ks}.src (k int, c text, v double, tags set<text>, PRIMARY KEY (k, c))")
    session.execute(f"CREATE TABLE {ks}.dst (k int, c text, v double, tags set<text>, PRIMARY KEY (k, c))")
    insert = session.prepare(f"INSERT INTO {ks}.src (k, c, v, tags) VALUES (?, ?, ?, ?)")
    for k in range(300):
        session.execute(insert, (k, f"c,{k}", k / 4, {"a", f"t{k % 3}"}))
    csv_path = tmp_path / "rows.csv"
    out = cqlsh("-e", f"COPY {ks}.src (k, c, v, tags) TO '{csv_path}' WITH HEADER = true").stdout
    assert "300 rows exported" in out, out
    out = cqlsh("-e", f"COPY {ks}.dst (k, c, v, tags) FROM '{csv_path}' WITH HEADER = true").stdout
    assert "300 rows imported" in out, out
    src = sorted(tuple(r) for r in session.execute(f"SELECT k, c, v, tags FROM {ks}.src"))
    dst = sorted(tuple(r) for r in session.execute(f"SELECT k, c, v, tags FROM {ks}.dst"))
    assert len(src) == 300 and dst == src


def test_describe_cluster_and_consistency(cqlsh, session):
    out = cqlsh("-e", "DESCRIBE CLUSTER").stdout
    name = session.execute("SELECT cluster_name FROM system.local").one().cluster_name
    assert f"Cluster: {name}" in out, out
    # Cassandra's server-side DESCRIBE CLUSTER names the partitioner by its short class name.
    assert "Partitioner: Murmur3Partitioner" in out.splitlines(), out
    out = cqlsh("-e", "CONSISTENCY QUORUM; SELECT cluster_name FROM system.local").stdout
    assert "Consistency level set to QUORUM." in out and "(1 rows)" in out, out
