"""CQL chores of the benchmark harness, on the Python cassandra-driver (run with the harness's
venv Python, which compare.py makes: $HAYATE_BENCH_CACHE/pyenv, `pip install cqlsh==6.2.2`).

    cqltool.py HOSTS PORT exec STATEMENT...    run statements in order (schema creation)
    cqltool.py HOSTS PORT version              print system.local's release_version
    cqltool.py HOSTS PORT settle [--quiet-s 30] [--poll-s 5] [--timeout-s 3600]
    cqltool.py HOSTS PORT ring [--rf 2] [--timeout-s 600]

HOSTS is one address or a comma list (the nodes of a cluster). `exec` and `version` talk to the
first; `settle` and `ring` ask each node about itself (a session per node that sends nothing to
any other, since virtual tables and system.peers are each node's own view).

`settle` waits for Cassandra's compactions to finish, as the reference did after its load:
"wait for any compactions to finish in order to obtain a known starting state". It polls
system_views.sstable_tasks (the running compactions, what `nodetool compactionstats` lists) and
the CompactionExecutor pool in system_views.thread_pools, and returns once both have been idle
for --quiet-s in a row (a leveled compaction that just ended often starts the next at once, so
one empty poll is not enough). It prints one JSON line: settled, waited_s, busy_polls. With
several hosts it waits until every node has been idle for --quiet-s.

`ring` waits until every node lists all the others in system.peers with their tokens and every
node reports the same schema version (the check drivers make for schema agreement, on each node
rather than only through one), then prints one JSON line: the time waited, each node's tokens
count, and the share of the token ring each node owns as primary and as one of --rf replicas
(SimpleStrategy: a range's replicas are the owner of its end token and the next distinct nodes
clockwise), computed from the tokens the first node reports.
"""

import argparse
import json
import sys
import time

from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy

TOKEN_SPACE = 1 << 64  # Murmur3Partitioner's tokens: signed 64-bit integers


def connect(host, port, only=False):
    """A session on HOST; with `only`, one that never sends a request to another node."""
    profiles = {}
    if only:
        profiles[EXEC_PROFILE_DEFAULT] = ExecutionProfile(
            load_balancing_policy=WhiteListRoundRobinPolicy([host]))
    cluster = Cluster([host], port=port, protocol_version=4, connect_timeout=30,
                      execution_profiles=profiles)
    return cluster, cluster.connect()


def compaction_busy(session):
    tasks = list(session.execute("SELECT keyspace_name, table_name, kind, progress, total "
                                 "FROM system_views.sstable_tasks"))
    pools = list(session.execute("SELECT active_tasks, pending_tasks FROM system_views.thread_pools "
                                 "WHERE name = 'CompactionExecutor'"))
    queued = sum(row.active_tasks + row.pending_tasks for row in pools)
    return len(tasks) > 0 or queued > 0, len(tasks), queued


def settle(sessions, quiet_s, poll_s, timeout_s):
    start = time.monotonic()
    quiet_since = None
    busy_polls = 0
    while True:
        now = time.monotonic()
        busy, tasks, queued = False, 0, 0
        for session in sessions:
            one = compaction_busy(session)
            busy, tasks, queued = busy or one[0], tasks + one[1], queued + one[2]
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


def ring_view(session):
    """This node's view: its own address, tokens and schema version, and its peers'."""
    local = session.execute("SELECT listen_address, tokens, schema_version FROM system.local").one()
    nodes = {str(local.listen_address): (sorted(int(t) for t in local.tokens or []),
                                         str(local.schema_version))}
    for peer in session.execute("SELECT peer, tokens, schema_version FROM system.peers"):
        nodes[str(peer.peer)] = (sorted(int(t) for t in peer.tokens or []), str(peer.schema_version))
    return nodes


def ownership(tokens_of, rf):
    """Each node's share of the ring as primary owner and as one of `rf` replicas."""
    ring = sorted((token, node) for node, tokens in tokens_of.items() for token in tokens)
    primary = dict.fromkeys(tokens_of, 0.0)
    replica = dict.fromkeys(tokens_of, 0.0)
    distinct = len(tokens_of)
    for i, (token, node) in enumerate(ring):
        width = (token - ring[i - 1][0]) % TOKEN_SPACE or TOKEN_SPACE if len(ring) > 1 else TOKEN_SPACE
        share = width / TOKEN_SPACE
        primary[node] += share
        holders, j = [], i
        while len(holders) < min(rf, distinct):
            if ring[j % len(ring)][1] not in holders:
                holders.append(ring[j % len(ring)][1])
            j += 1
        for holder in holders:
            replica[holder] += share
    return {node: {"tokens": len(tokens_of[node]), "primary": round(primary[node], 4),
                   "replica": round(replica[node], 4)} for node in sorted(tokens_of)}


def wait_ring(hosts, sessions, rf, timeout_s):
    start = time.monotonic()
    while True:
        views = {host: ring_view(session) for host, session in zip(hosts, sessions)}
        problems = []
        versions = set()
        for host, view in views.items():
            missing = [h for h in hosts if h not in view or not view[h][0]]
            if missing:
                problems.append(f"{host} does not list {', '.join(missing)} with tokens")
            versions |= {version for _, version in view.values()}
        if len(versions) > 1 or "None" in versions:
            problems.append(f"schema versions differ: {sorted(versions)}")
        waited_s = round(time.monotonic() - start, 1)
        if not problems:
            first = views[hosts[0]]
            return {"agreed": True, "waited_s": waited_s, "schema_version": versions.pop(),
                    "ownership": ownership({h: first[h][0] for h in first}, rf)}
        if waited_s >= timeout_s:
            return {"agreed": False, "waited_s": waited_s, "problems": problems}
        print(f"ring: {waited_s:.0f}s: {'; '.join(problems)}", file=sys.stderr, flush=True)
        time.sleep(2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("hosts", help="an address, or a comma list of a cluster's nodes")
    parser.add_argument("port", type=int)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("exec")
    run.add_argument("statements", nargs="+")
    sub.add_parser("version")
    wait = sub.add_parser("settle")
    wait.add_argument("--quiet-s", type=float, default=30)
    wait.add_argument("--poll-s", type=float, default=5)
    wait.add_argument("--timeout-s", type=float, default=3600)
    ring = sub.add_parser("ring")
    ring.add_argument("--rf", type=int, default=2)
    ring.add_argument("--timeout-s", type=float, default=600)
    args = parser.parse_args()
    hosts = args.hosts.split(",")

    if args.command in ("settle", "ring"):
        connections = [connect(host, args.port, only=True) for host in hosts]
        sessions = [session for _, session in connections]
        try:
            if args.command == "settle":
                print(json.dumps(settle(sessions, args.quiet_s, args.poll_s, args.timeout_s)))
            else:
                print(json.dumps(wait_ring(hosts, sessions, args.rf, args.timeout_s)))
        finally:
            for cluster, _ in connections:
                cluster.shutdown()
        return

    cluster, session = connect(hosts[0], args.port)
    try:
        if args.command == "exec":
            for statement in args.statements:
                # Schema statements can take longer than the default 10 s on a loaded machine.
                session.execute(statement, timeout=120)
        elif args.command == "version":
            print(session.execute("SELECT release_version FROM system.local").one().release_version)
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
