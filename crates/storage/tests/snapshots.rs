//! Table snapshots (`snapshots/`): a snapshot reads back every row as it was when taken, after
//! the rows were rewritten, deleted, defragmented away and their table dropped, across both
//! kinds of restart; its blocks come back when it is cleared; one that could stop writes is
//! refused.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;

use common::{key, Rng};
use hayate_storage::{
    Cell, Deletion, Engine, NamespaceConfig, PartitionKey, Row, RowKey, SnapshotError, SnapshotRecord,
};

const T: u32 = common::TABLE;
const OTHER: u32 = 2;
const BLOCK: usize = 128 << 10;

fn config(dir: &std::path::Path, index_file: bool) -> NamespaceConfig {
    let mut c = NamespaceConfig::with_file("test", dir, 32 << 20);
    c.block_size_bytes = BLOCK as u32;
    c.post_write_cache_bytes = 1 << 20;
    c.flush_interval_ms = 20;
    c.defrag_sleep_us = 0;
    c.write_buffer_dir = None;
    if !index_file {
        c.index_snapshot_path = None;
    }
    c
}

fn row(ts: i64, v: Vec<u8>) -> Row {
    Row {
        cells: vec![Cell::live(0, ts, v)],
        ..Row::default()
    }
}

/// Every row (by partition key) and partition tombstone record a snapshot of `table` holds.
fn read_all(e: &Engine, tag: &str, table: u32) -> (BTreeMap<Vec<u8>, Row>, usize) {
    let snapshot = e.open_snapshot(tag).expect("open snapshot");
    let (mut rows, mut tombstones) = (BTreeMap::new(), 0);
    let mut from = Some(0);
    while let Some(at) = from {
        let (page, next) = e
            .read_snapshot(&snapshot, table, at, 100, 0)
            .expect("read snapshot");
        for r in page {
            match r {
                SnapshotRecord::Row(r) => {
                    rows.insert(r.partition_key, r.row);
                }
                SnapshotRecord::Tombstones { .. } => tombstones += 1,
            }
        }
        from = next;
    }
    (rows, tombstones)
}

fn value_of(r: &Row) -> Option<Vec<u8>> {
    r.cells
        .iter()
        .find(|c| c.column == 0)
        .and_then(|c| c.value_at(0))
        .map(<[u8]>::to_vec)
}

fn churn_away(e: &Engine) {
    for _ in 0..20 {
        e.sync().expect("sync");
        e.defrag_now();
        std::thread::sleep(std::time::Duration::from_millis(30));
    }
}

#[test]
fn a_snapshot_keeps_its_rows_through_rewrites_a_drop_and_both_kinds_of_restart() {
    let mut rng = Rng::new(7);
    for index_file in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut want: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        {
            let e = Engine::open(config(dir.path(), index_file)).expect("open");
            for i in 0..600u32 {
                let k = format!("k{i:04}").into_bytes();
                // Mostly small rows, a few larger than a block (chunked).
                let len = if i % 150 == 0 {
                    BLOCK + 5_000
                } else {
                    100 + rng.below(2_000) as usize
                };
                let v = rng.bytes(len);
                e.write(key(&k), row(1_000 + i64::from(i), v.clone()))
                    .expect("write");
                want.insert(k, v);
            }
            e.sync().expect("sync");
            // Updates that only set a cell of a row on the device: written as deltas.
            for i in (0..600u32).step_by(7) {
                let k = format!("k{i:04}").into_bytes();
                let v = rng.bytes(50);
                e.write(key(&k), row(5_000, v.clone())).expect("update");
                want.insert(k, v);
            }
            e.delete(key(b"k0001"), 9_000).expect("delete");
            want.remove(b"k0001".as_slice());
            e.delete_range(
                PartitionKey::new(T, b"k0002"),
                Bound::Unbounded,
                Bound::Unbounded,
                Deletion {
                    timestamp_us: 9_000,
                    deleted_at_s: 1,
                },
            )
            .expect("partition delete");
            e.write(
                RowKey::new(OTHER, b"o", b""),
                row(1, b"not in the snapshot".to_vec()),
            )
            .expect("write other");

            let summary = e.take_snapshot("before", &[T], false).expect("snapshot");
            assert_eq!(summary.tables[0].0, T);
            assert!(summary.pinned_blocks > 10, "{summary:?}");
            let used_at_snapshot = e.stats().total_blocks - e.stats().free_blocks;

            // Everything moves on: rewritten twice, then the table is dropped.
            for round in 0..2 {
                for k in want.keys() {
                    e.write(key(k), row(20_000 + round, vec![round as u8; 1_500]))
                        .expect("rewrite");
                }
            }
            e.drop_table(T);
            churn_away(&e);
            let space = e.snapshot_space();
            assert!(
                space.held_bytes > (space.pinned_blocks * BLOCK as u64) / 2,
                "the rows were rewritten and dropped, yet little is held: {space:?}"
            );
            assert!(
                e.stats().total_blocks - e.stats().free_blocks >= used_at_snapshot.min(summary.pinned_blocks),
                "pinned blocks were freed"
            );
            e.close().expect("close");
        }
        let e = Engine::open(config(dir.path(), index_file)).expect("reopen");
        // The node drops a dropped table again after each open.
        e.drop_table(T);
        churn_away(&e);
        let (rows, tombstones) = read_all(&e, "before", T);
        assert_eq!(tombstones, 1, "the partition tombstone of k0002");
        let live: BTreeMap<Vec<u8>, Vec<u8>> = rows
            .iter()
            .filter_map(|(k, r)| value_of(r).map(|v| (k.clone(), v)))
            .filter(|(k, _)| k.as_slice() != b"k0002")
            .collect();
        assert_eq!(live.len(), want.len() - 1, "index_file {index_file}");
        for (k, v) in &live {
            assert_eq!(Some(v), want.get(k), "row {}", String::from_utf8_lossy(k));
        }
        assert!(
            rows.get(b"k0001".as_slice())
                .is_some_and(|r| value_of(r).is_none()),
            "the tombstone travels"
        );
        let (other, _) = read_all(&e, "before", OTHER);
        assert!(other.is_empty(), "a table not asked for is not in the snapshot");

        // Cleared: its blocks come back once defragmentation has run.
        let free_before = e.stats().free_blocks;
        e.clear_snapshot("before").expect("clear");
        assert!(matches!(
            e.open_snapshot("before"),
            Err(SnapshotError::NotFound(_))
        ));
        churn_away(&e);
        assert_eq!(e.snapshot_space().pinned_blocks, 0);
        assert_eq!(e.snapshot_space().held_bytes, 0);
        assert!(e.stats().free_blocks > free_before, "no block came back");
        e.close().expect("close");
    }
}

#[test]
fn a_snapshot_that_could_stop_writes_is_refused_unless_forced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(config(dir.path(), true)).expect("open");
    let mut rng = Rng::new(3);
    // 32 MiB of 128 KiB blocks: fill about 60% of it.
    for i in 0..150u32 {
        e.write(key(format!("k{i}").as_bytes()), row(1, rng.bytes(100_000)))
            .expect("write");
    }
    e.sync().expect("sync");
    match e.take_snapshot("big", &[T], false) {
        Err(e @ SnapshotError::WouldStopWrites { .. }) => {
            assert!(e.to_string().contains("could stop writes"), "{e}");
        }
        other => panic!("not refused: {other:?}"),
    }
    assert!(matches!(e.open_snapshot("big"), Err(SnapshotError::NotFound(_))));
    assert_eq!(
        e.snapshot_space().pinned_blocks,
        0,
        "a refused snapshot pins nothing"
    );
    e.take_snapshot("big", &[T], true).expect("forced");
    assert!(matches!(
        e.take_snapshot("big", &[T], true),
        Err(SnapshotError::Exists(_))
    ));
    for bad in ["", "../x", ".hidden", "a/b", "a b"] {
        assert!(
            matches!(e.take_snapshot(bad, &[T], true), Err(SnapshotError::BadTag(_))),
            "{bad:?}"
        );
    }
}

#[test]
fn a_damaged_snapshot_file_is_refused_with_its_name_and_the_node_keeps_serving() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let e = Engine::open(config(dir.path(), true)).expect("open");
        e.write(key(b"a"), row(1, b"x".to_vec())).expect("write");
        e.take_snapshot("s1", &[T], false).expect("snapshot");
        e.close().expect("close");
    }
    let path = dir.path().join("snapshots/s1/rows.index");
    let mut bytes = std::fs::read(&path).expect("read the snapshot file");
    let last = bytes.len() - 10;
    bytes[last] ^= 1;
    std::fs::write(&path, bytes).expect("damage the snapshot file");
    let e = Engine::open(config(dir.path(), true)).expect("reopen");
    match e.open_snapshot("s1") {
        Err(err @ SnapshotError::Damaged { .. }) => assert!(err.to_string().contains("s1"), "{err}"),
        other => panic!("read a damaged snapshot: {:?}", other.map(|s| s.tables())),
    }
    assert_eq!(common::value(&e, b"a"), Some(b"x".to_vec()));
    e.clear_snapshot("s1").expect("a damaged snapshot can be cleared");
}

#[test]
fn reading_since_an_earlier_snapshot_gives_every_row_written_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(config(dir.path(), true)).expect("open");
    let mut rng = Rng::new(11);
    for i in 0..400u32 {
        e.write(key(format!("k{i:04}").as_bytes()), row(1, rng.bytes(900)))
            .expect("write");
    }
    e.take_snapshot("base", &[T], false).expect("base");
    let base = e.open_snapshot("base").expect("open base").max_sequence();
    let mut changed = std::collections::BTreeSet::new();
    for i in (0..400u32).step_by(9).chain(400..430) {
        let k = format!("k{i:04}").into_bytes();
        e.write(key(&k), row(2, rng.bytes(900))).expect("write");
        changed.insert(k);
    }
    e.take_snapshot("next", &[T], false).expect("next");
    let next = e.open_snapshot("next").expect("open next");
    let (mut since, mut from) = (std::collections::BTreeSet::new(), Some(0));
    while let Some(at) = from {
        let (page, more) = e.read_snapshot(&next, T, at, 64, base).expect("read since");
        for r in page {
            if let SnapshotRecord::Row(r) = r {
                since.insert(r.partition_key);
            }
        }
        from = more;
    }
    assert!(
        changed.is_subset(&since),
        "missed {:?}",
        changed.difference(&since).take(5).collect::<Vec<_>>()
    );
    assert!(
        since.len() < 300,
        "read {} rows: nearly all, not what changed",
        since.len()
    );
}
