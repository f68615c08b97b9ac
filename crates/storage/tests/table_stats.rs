//! Each table's figures (`Engine::table_stats`), which `hayate tablestats` prints: they are
//! counted as the index changes, so they must follow writes, deletions, a restart from the
//! index snapshot and one from a scan of the device, and a dropped table.

use hayate_storage::{Cell, Engine, NamespaceConfig, Row, RowKey, TableStats};

fn config(dir: &std::path::Path) -> NamespaceConfig {
    let mut c = NamespaceConfig::with_file("test", dir, 64 << 20);
    c.block_size_bytes = 128 << 10;
    c.post_write_cache_bytes = 1 << 20;
    c.flush_interval_ms = 50;
    c
}

fn key(table: u32, k: &[u8]) -> RowKey<'_> {
    RowKey::new(table, k, b"")
}

fn row(v: &[u8]) -> Row {
    Row {
        cells: vec![Cell::live(0, 10, v.to_vec())],
        ..Row::default()
    }
}

fn stats_of(e: &Engine, table: u32) -> TableStats {
    e.table_stats()
        .into_iter()
        .find(|t| t.table == table)
        .unwrap_or_else(|| panic!("no figures for table {table}"))
}

/// Rows, tombstones and record bytes of both tables, for comparing across restarts.
fn counts(e: &Engine) -> Vec<(u32, u64, u64, u64)> {
    e.table_stats()
        .iter()
        .map(|t| (t.table, t.rows(), t.tombstones, t.record_bytes))
        .collect()
}

#[test]
fn figures_follow_writes_deletions_restarts_and_drops() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(config(dir.path())).expect("open");
    for i in 0..100u32 {
        e.write(key(1, &i.to_be_bytes()), row(&[7; 100])).expect("write");
    }
    for i in 0..10u32 {
        e.write(key(2, &i.to_be_bytes()), row(&[1; 10])).expect("write");
    }
    for i in 0..5u32 {
        e.delete(key(1, &i.to_be_bytes()), 20).expect("delete");
    }
    for i in 0..30u32 {
        e.get(key(1, &i.to_be_bytes())).expect("read");
    }
    let one = stats_of(&e, 1);
    assert_eq!((one.rows(), one.tombstones, one.entries), (95, 5, 100));
    assert!(one.record_bytes >= 95 * 100, "{one:?}");
    assert!(one.record_bytes <= e.stats().live_bytes, "{one:?}");
    assert!(one.index_bytes > 0);
    assert_eq!(one.writes.count(), 105);
    assert_eq!(one.reads.count(), 30);
    assert!(one.reads.quantile_us(0.99).is_some());
    let two = stats_of(&e, 2);
    assert_eq!((two.rows(), two.tombstones), (10, 0));
    assert!(two.record_bytes < one.record_bytes);

    // Overwriting a row changes neither count; its old record's bytes leave with it.
    let before = counts(&e);
    for i in 50..60u32 {
        e.write(key(1, &i.to_be_bytes()), row(&[8; 100])).expect("write");
    }
    assert_eq!(stats_of(&e, 1).rows(), 95);
    assert_eq!(stats_of(&e, 1).tombstones, 5);

    // A clean restart loads the index snapshot, an unclean one scans the device: the same
    // figures either way (latencies start again).
    let expected = counts(&e);
    assert_eq!(expected.len(), before.len());
    e.close().expect("close");
    let e = Engine::open(config(dir.path())).expect("reopen");
    assert_eq!(counts(&e), expected, "after the index snapshot");
    assert_eq!(stats_of(&e, 1).writes.count(), 0);
    e.sync().expect("sync");
    drop(e);
    let e = Engine::open(config(dir.path())).expect("reopen after a crash");
    let scanned = counts(&e);
    assert_eq!(
        scanned.iter().map(|c| (c.0, c.1, c.2)).collect::<Vec<_>>(),
        expected.iter().map(|c| (c.0, c.1, c.2)).collect::<Vec<_>>(),
        "after a scan"
    );

    assert_eq!(e.drop_table(2), 10);
    assert!(e.table_stats().iter().all(|t| t.table != 2));
}

#[test]
fn defrag_status_counts_what_is_waiting_and_done() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The background defragmenter may take blocks at any moment: the checks allow for it.
    let e = Engine::open(config(dir.path())).expect("open");
    // Fill several blocks, then delete most of it: their live data falls below the mark.
    for i in 0..4_000u32 {
        e.write(key(1, &i.to_be_bytes()), row(&[3; 200])).expect("write");
    }
    for i in 0..4_000u32 {
        if i % 10 != 0 {
            e.write(key(1, &i.to_be_bytes()), row(&[4; 200]))
                .expect("overwrite");
        }
    }
    e.sync().expect("sync");
    let status = e.defrag_status();
    assert_eq!(status.lwm_pct, 50);
    assert!(status.total_blocks > 0 && status.block_size_bytes == 128 << 10);
    let done_before = status.blocks_defragged;
    e.defrag_now();
    let after = e.defrag_status();
    assert!(
        after.blocks_defragged > done_before || status.pending_blocks == 0,
        "{status:?} then {after:?}"
    );
    assert!(
        after.pending_blocks <= status.pending_blocks,
        "{status:?} then {after:?}"
    );
}
