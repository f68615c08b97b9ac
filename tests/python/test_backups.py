"""Backups (`hayate backup --to DIR`, `--incremental`, `hayate restore --from DIR/TAG`) between
two real clusters, through the real tools and driver.

A 3-node cluster (RF 3) writes a full backup and then an incremental one of its keyspace; a
5-node cluster whose keyspace has RF 2 loads the incremental one (which brings its base with
it) from one node, and every row reads back at ALL as it was at the second backup: rows deleted
before stay deleted, rows changed between the backups have their new values. A backup with one
flipped byte, and one with a file cut short, are refused with the file's name, and nothing of
them is loaded.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from cassandra import ConsistencyLevel

from topology import (KEYSPACE, TABLE, create_table, hayate, hayate_ok, load, on, output, scan,
                      topology_cluster, value_of)

ROWS = 4_000
DELETED = range(0, 50)
CHANGED = range(50, 100)
ADDED = range(ROWS, ROWS + 300)


def records_written(out: str) -> int:
    return sum(int(line.split(" records")[0].rsplit(" ", 1)[1]) for line in out.splitlines() if " records," in line)


def test_a_backup_of_three_nodes_loads_into_five_with_another_replication_factor(tmp_path: Path):
    backups = tmp_path / "backups"
    # Small write blocks, so that the data spans blocks and an incremental backup can leave most
    # of them out.
    with topology_cluster("backup_source", write_block_size="128KiB") as source:
        source.start()
        session = source.session()
        create_table(session)
        load(session, range(ROWS))
        for k in DELETED:
            session.execute(f"DELETE FROM {TABLE} WHERE k = {k}")
        node1 = on(source.node(1))
        full = hayate_ok("backup", "--to", str(backups), "-t", "full", KEYSPACE, "--all-nodes", *node1)
        assert full.count("backup full of 1 tables") == 3, full

        changed = session.prepare(f"UPDATE {TABLE} SET v = ? WHERE k = ?")
        for k in CHANGED:
            session.execute(changed, (f"changed {k}", k))
        load(session, ADDED)
        incremental = hayate_ok("backup", "--to", str(backups), "-t", "incr", "--incremental", KEYSPACE,
                             "--all-nodes", *node1)
        assert incremental.count("(incremental over full)") == 3, incremental
        assert records_written(incremental) < records_written(full) / 2, (
            f"the incremental backup wrote nearly as much as the full one:\n{full}\n{incremental}")
        expected = scan(session, ConsistencyLevel.ALL, TABLE)
        assert len(expected) == ROWS - len(DELETED) + len(ADDED)

    with topology_cluster("backup_target", nodes=5) as target:
        target.start()
        session = target.session()
        session.execute(f"CREATE KEYSPACE {KEYSPACE} WITH replication = "
                        "{'class': 'SimpleStrategy', 'replication_factor': 2}")
        node1 = on(target.node(1))

        # Damaged copies first: refused by file name, and nothing of them loaded.
        for damage in ("flip", "cut"):
            copy = tmp_path / f"damaged-{damage}"
            shutil.copytree(backups, copy)
            victim = sorted((copy / "full").glob("*/topo.t.hyb"))[1]
            data = bytearray(victim.read_bytes())
            if damage == "flip":
                data[len(data) // 2] ^= 0x01
            else:
                del data[len(data) - 100:]
            victim.write_bytes(bytes(data))
            result = hayate("restore", "--from", str(copy / "incr"), *node1)
            assert result.returncode != 0, output(result)
            assert "topo.t.hyb" in result.stderr and "nothing was restored" in result.stderr, output(result)
            tables = session.execute(
                "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (KEYSPACE,))
            assert not list(tables), "a damaged backup created its table"

        restore_and_check(target, session, str(backups / "incr"), expected)


def restore_and_check(target, session, source: str, expected: dict[int, str]) -> None:
    """Loads the incremental backup at `source` into `target` (its table made by the restore)
    and checks every row at ALL against `expected`, as it was at the second backup."""
    node1 = on(target.node(1))
    out = hayate_ok("restore", "--from", source, *node1)
    assert "(table created)" in out, out
    back = scan(session, ConsistencyLevel.ALL, TABLE)
    assert back == expected, (
        f"{len(expected.keys() - back.keys())} rows missing, {len(back.keys() - expected.keys())} "
        f"that should not be there, "
        f"{sum(1 for k in back.keys() & expected.keys() if back[k] != expected[k])} with another value\n"
        f"{out}\n{target.logs(20)}")
    assert all(back[k] == f"changed {k}" for k in CHANGED)
    assert all(back[k] == value_of(k) for k in ADDED)
    target.check_alive()
