"""CQL chores of the benchmark harness, on the Python cassandra-driver (run with the harness's
venv Python, which compare.py makes: $HAYATE_BENCH_CACHE/pyenv, `pip install cqlsh==6.2.2`).

    cqltool.py HOST PORT exec STATEMENT...    run statements in order (schema creation)
    cqltool.py HOST PORT version              print system.local's release_version
    cqltool.py HOST PORT settle [--quiet-s 30] [--poll-s 5] [--timeout-s 3600]

`settle` waits for Cassandra's compactions to finish, as the reference did after its load:
"wait for any compactions to finish in order to obtain a known starting state". It polls
system_views.sstable_tasks (the running compactions, what `nodetool compactionstats` lists) and
the CompactionExecutor pool in system_views.thread_pools, and returns once both have been idle
for --quiet-s in a row (a leveled compaction that just ended often starts the next at once, so
one empty poll is not enough). It prints one JSON line: settled, waited_s, busy_polls.
"""

import argparse
import json
import sys
import time

from cassandra.cluster import Cluster


def connect(host, port):
    cluster = Cluster([host], port=port, protocol_version=4, connect_timeout=30)
    return cluster, cluster.connect()


def compaction_busy(session):
    tasks = list(session.execute("SELECT keyspace_name, table_name, kind, progress, total "
                                 "FROM system_views.sstable_tasks"))
    pools = list(session.execute("SELECT active_tasks, pending_tasks FROM system_views.thread_pools "
                                 "WHERE name = 'CompactionExecutor'"))
    queued = sum(row.active_tasks + row.pending_tasks for row in pools)
    return len(tasks) > 0 or queued > 0, len(tasks), queued


def settle(session, quiet_s, poll_s, timeout_s):
    start = time.monotonic()
    quiet_since = None
    busy_polls = 0
    while True:
        now = time.monotonic()
        busy, tasks, queued = compaction_busy(session)
        if busy:
            busy_polls += 1
            quiet_since = None
            print(f"settle: {now - start:.0f}s, {tasks} compactions running, {queued} in the pool",
                  file=sys.stderr, flush=True)
        elif quiet_since is None:
            quiet_since = now
        if quiet_since is not None and now - quiet_since >= quiet_s:
            return {"settled": True, "waited_s": round(now - start, 1), "busy_polls": busy_polls}
        if now - start >= timeout_s:
            return {"settled": False, "waited_s": round(now - start, 1), "busy_polls": busy_polls}
        time.sleep(poll_s)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("exec")
    run.add_argument("statements", nargs="+")
    sub.add_parser("version")
    wait = sub.add_parser("settle")
    wait.add_argument("--quiet-s", type=float, default=30)
    wait.add_argument("--poll-s", type=float, default=5)
    wait.add_argument("--timeout-s", type=float, default=3600)
    args = parser.parse_args()

    cluster, session = connect(args.host, args.port)
    try:
        if args.command == "exec":
            for statement in args.statements:
                # Schema statements can take longer than the default 10 s on a loaded machine.
                session.execute(statement, timeout=120)
        elif args.command == "version":
            print(session.execute("SELECT release_version FROM system.local").one().release_version)
        elif args.command == "settle":
            print(json.dumps(settle(session, args.quiet_s, args.poll_s, args.timeout_s)))
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
