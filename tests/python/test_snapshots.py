"""Snapshots (`hayate snapshot`, `listsnapshots`, `clearsnapshot`, `restore --snapshot`) and
`auto_snapshot`, on a real 3-node cluster (RF 3) through the real tools and driver.

A table is dropped by mistake: every node took an automatic snapshot first, with the same tag,
and `hayate restore --snapshot TAG --all-nodes` makes the table again and puts every row back
as it was at the DROP (rows deleted before it stay deleted), read at ALL. A snapshot taken by
hand earlier restores into another table (`--to-table`) as it was then. Bad requests (an unknown
tag, an unknown keyspace) exit non-zero with a message that names what is wrong.
"""

from __future__ import annotations

import re

from cassandra import ConsistencyLevel

from topology import (KEYSPACE, TABLE, create_table, hayate, hayate_ok, load, logged_since, on, output,
                      scan, topology_cluster, value_of)

ROWS = 3_000
DELETED = range(0, 100)
CHANGED = range(100, 200)


def test_a_dropped_table_comes_back_from_its_automatic_snapshot_on_every_node():
    with topology_cluster("snapshots") as cluster:
        cluster.start()
        session = cluster.session()
        create_table(session)
        load(session, range(ROWS))
        node1 = on(cluster.node(1))

        # A snapshot by hand of the keyspace, on every node, before anything changes: one
        # metadata log entry that every node applies (each logs the entry's position).
        out = hayate_ok("snapshot", KEYSPACE, "-t", "before", "--all-nodes", *node1)
        assert out.count("snapshot before of 1 tables") == 3, out
        positions = {n: re.findall(r"took snapshot before of 1 tables at metadata log entry (\d+)",
                                   logged_since(cluster.node(n), 0)) for n in (1, 2, 3)}
        assert len({tuple(p) for p in positions.values()}) == 1 and positions[1], positions

        for k in DELETED:
            session.execute(f"DELETE FROM {TABLE} WHERE k = {k}")
        changed = session.prepare(f"UPDATE {TABLE} SET v = ? WHERE k = ?")
        for k in CHANGED:
            session.execute(changed, (f"changed {k}", k))
        at_drop = {k: value_of(k) for k in range(ROWS) if k not in DELETED}
        at_drop.update({k: f"changed {k}" for k in CHANGED})

        session.execute(f"DROP TABLE {TABLE}")
        listing = hayate_ok("listsnapshots", "--all-nodes", *node1)
        tags = set(re.findall(r"dropped-\d+-topo\.t", listing))
        assert len(tags) == 1, f"every node takes the automatic snapshot under one tag:\n{listing}"
        dropped = tags.pop()
        assert listing.count(dropped) == 3, listing
        assert listing.count("before") >= 3, listing

        out = hayate_ok("restore", "--snapshot", dropped, "--all-nodes", *node1)
        assert "(table created)" in out, out
        back = scan(session, ConsistencyLevel.ALL, TABLE)
        assert back == at_drop, (
            f"after the restore, {len(at_drop.keys() - back.keys())} rows are missing, "
            f"{len(back.keys() - at_drop.keys())} came back that were deleted, "
            f"{sum(1 for k in back.keys() & at_drop.keys() if back[k] != at_drop[k])} have another value\n"
            f"{out}\n{cluster.logs(20)}")

        # The snapshot by hand, as it was then, into a table of its own.
        out = hayate_ok("restore", "--snapshot", "before", KEYSPACE, "t", "--to-table", f"{KEYSPACE}.copy",
                     "--all-nodes", *node1)
        copy = scan(session, ConsistencyLevel.ALL, f"{KEYSPACE}.copy")
        assert copy == {k: value_of(k) for k in range(ROWS)}, f"the copy holds {len(copy)} rows\n{out}"

        # Restoring again changes nothing; a newer write wins over a restored row.
        session.execute(f"UPDATE {TABLE} SET v = 'newest' WHERE k = 500")
        hayate_ok("restore", "--snapshot", dropped, "--all-nodes", *node1)
        again = scan(session, ConsistencyLevel.ALL, TABLE)
        assert again[500] == "newest" and len(again) == len(at_drop)

        # Bad requests are refused by name.
        for args, says in [
            (("restore", "--snapshot", "no-such-tag"), "no snapshot tagged no-such-tag"),
            (("snapshot", "no_such_keyspace"), "keyspace no_such_keyspace does not exist"),
            (("snapshot", "-t", "../escape"), "not a plain name"),
            (("snapshot", KEYSPACE, "-t", "before"), "already exists"),
            (("snapshot", KEYSPACE, "no_such_table", "--all-nodes"), "table topo.no_such_table does not exist"),
            (("snapshot", "-t", "../escape", "--all-nodes"), "not a plain name"),
        ]:
            result = hayate(*args, *node1)
            assert result.returncode != 0 and says in result.stderr, output(result)

        # A node down when a table is dropped takes its automatic snapshot when it learns of
        # the DROP, as it starts again: its replicas are kept, as on the others.
        session.execute(f"CREATE TABLE {KEYSPACE}.gone (k bigint PRIMARY KEY, v text)")
        insert = session.prepare(f"INSERT INTO {KEYSPACE}.gone (k, v) VALUES (?, ?)")
        for k in range(200):
            session.execute(insert, (k, value_of(k)))
        cluster.stop(3)
        session.execute(f"DROP TABLE {KEYSPACE}.gone")
        cluster.start_node(3)
        listing = hayate_ok("listsnapshots", "--all-nodes", *node1)
        gone = set(re.findall(r"dropped-\d+-topo\.gone", listing))
        assert len(gone) == 1 and listing.count(gone.pop()) == 3, (
            f"the node that was down has no automatic snapshot of the dropped table:\n{listing}")
        # Cleared, it is not taken again when the node restarts (and replays the DROP).
        hayate_ok("clearsnapshot", "--all", "--all-nodes", *node1)
        cluster.stop(3)
        cluster.start_node(3)
        listing = hayate_ok("listsnapshots", "--all-nodes", *node1)
        assert listing.count("There are no snapshots") == 3, listing

        hayate_ok("clearsnapshot", "--all", "--all-nodes", *node1)
        listing = hayate_ok("listsnapshots", "--all-nodes", *node1)
        assert listing.count("There are no snapshots") == 3, listing
        cluster.check_alive()
