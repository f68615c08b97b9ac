"""An interrupted restore goes on where it stopped (`snapshots/resume.rs`), on a real node
through the real tools and driver.

A restore of a snapshot into another table is running when its node is SIGKILLed (as soon as the
restore has recorded its first page's progress in `<data_dir>/restore-progress.json`); the node
starts again, the same restore is asked again, says it goes on from the interrupted run, writes
fewer rows than the table holds, and every row is in the copy afterwards. The progress file is
gone once the restore is done.
"""

from __future__ import annotations

import subprocess
import time

from cassandra import ConsistencyLevel

from topology import (HAYATE_BIN, KEYSPACE, TABLE, hayate_ok, load, on, scan, topology_cluster,
                      value_of)

ROWS = 20_000


def test_a_restore_killed_midway_goes_on_from_its_last_page():
    with topology_cluster("restore_resume", nodes=1, spare=0) as cluster:
        cluster.start()
        session = cluster.session()
        session.execute(f"CREATE KEYSPACE {KEYSPACE} WITH replication = "
                        "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute(f"CREATE TABLE {TABLE} (k bigint PRIMARY KEY, v text)")
        load(session, range(ROWS))
        node = cluster.node(1)
        hayate_ok("snapshot", KEYSPACE, "-t", "base", *on(node))

        args = [str(HAYATE_BIN), "restore", "--snapshot", "base", KEYSPACE, "t", "--to-table",
                f"{KEYSPACE}.copy", "--consistency", "ONE", *on(node)]
        progress = node.data_dir / "restore-progress.json"
        first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not progress.exists():
            assert first.poll() is None, (
                f"the restore ended before it recorded any progress: {first.communicate()}")
            assert time.monotonic() < deadline, "the restore recorded no progress within 120 s"
            time.sleep(0.002)
        cluster.kill(1)
        out, err = first.communicate(timeout=120)
        assert first.returncode != 0, f"the tool said the killed restore succeeded:\n{out}\n{err}"
        assert progress.exists(), "the progress of the interrupted restore is kept"

        cluster.start_node(1)
        out = hayate_ok(*args[1:])
        assert "went on from where an interrupted run stopped" in out, out
        written = int(out.split(f"{KEYSPACE}.copy: ")[-1].split(" rows")[0])
        assert 0 < written < ROWS, f"the second run wrote {written} rows of {ROWS}:\n{out}"
        assert not progress.exists(), "a finished restore leaves nothing to go on from"

        session = cluster.session()
        copy = scan(session, ConsistencyLevel.ALL, f"{KEYSPACE}.copy")
        assert copy == {k: value_of(k) for k in range(ROWS)}, (
            f"the copy holds {len(copy)} of {ROWS} rows\n{out}\n{cluster.logs(20)}")
        cluster.check_alive()
