//! The engine's basic promises, on a real file with direct I/O: what is written reads back,
//! across a clean restart (index snapshot) and an unclean one (scan).

use std::ops::Bound;
use std::sync::Arc;

use hayate_storage::{
    Cell, Engine, ManualClock, NamespaceConfig, PartitionKey, Row, RowKey, RowsFrom, ScanFrom,
};

mod common;
use common::capture_logs;

const T: u32 = 1;

fn config(dir: &std::path::Path) -> NamespaceConfig {
    let mut c = NamespaceConfig::with_file("test", dir, 64 << 20);
    c.block_size_bytes = 128 << 10;
    c.post_write_cache_bytes = 1 << 20;
    c.flush_interval_ms = 50;
    c
}

fn key(k: &[u8]) -> RowKey<'_> {
    RowKey::new(T, k, b"")
}

/// A row of another table than `key`'s.
fn other(k: &[u8]) -> RowKey<'_> {
    RowKey::new(T + 1, k, b"")
}

fn row(ts: i64, v: &[u8]) -> Row {
    Row {
        cells: vec![Cell::live(0, ts, v.to_vec()), Cell::live(1, ts, vec![7; 200])],
        ..Row::default()
    }
}

fn value(r: &Row, column: u32, now_s: u32) -> Option<Vec<u8>> {
    r.cells
        .iter()
        .find(|c| c.column == column)
        .and_then(|c| c.value_at(now_s))
        .map(<[u8]>::to_vec)
}

#[test]
fn rows_survive_clean_and_unclean_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let n = 5_000u32;
    {
        let e = Engine::open(config(dir.path())).expect("open");
        for i in 0..n {
            e.write(key(&i.to_be_bytes()), row(10, &i.to_le_bytes()))
                .expect("write");
        }
        for i in 0..n {
            let r = e.get(key(&i.to_be_bytes())).expect("read").expect("present");
            assert_eq!(value(&r, 0, 0), Some(i.to_le_bytes().to_vec()));
        }
        e.close().expect("close");
    }
    assert!(
        dir.path().join("test.index").exists(),
        "clean shutdown leaves a snapshot"
    );
    {
        let e = Engine::open(config(dir.path())).expect("reopen from snapshot");
        assert!(
            !dir.path().join("test.index").exists(),
            "the snapshot is consumed at open"
        );
        for i in 0..n {
            assert!(e.get(key(&i.to_be_bytes())).expect("read").is_some(), "row {i}");
        }
        for i in 0..n / 2 {
            e.write(key(&i.to_be_bytes()), row(20, b"second"))
                .expect("update");
        }
        e.sync().expect("sync");
        drop(e); // no snapshot: the next open scans
    }
    let e = Engine::open(config(dir.path())).expect("reopen by scan");
    for i in 0..n {
        let r = e.get(key(&i.to_be_bytes())).expect("read").expect("present");
        let want = if i < n / 2 {
            b"second".to_vec()
        } else {
            i.to_le_bytes().to_vec()
        };
        assert_eq!(value(&r, 0, 0), Some(want), "row {i}");
    }
    assert_eq!(e.stats().records, u64::from(n));
}

#[test]
fn deletes_and_ttls_hide_rows_and_survive_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(1_000_000_000_000_000));
    let open = || Engine::open_with_clock(config(dir.path()), clock.clone()).expect("open");
    let e = open();
    e.write(key(b"a"), row(10, b"a")).expect("write");
    e.write(key(b"b"), row(10, b"b")).expect("write");
    e.delete(key(b"a"), 11).expect("delete");
    let now = hayate_storage::Clock::now_s(&*clock);
    e.write(
        key(b"c"),
        Row {
            cells: vec![Cell::expiring(0, 10, b"c".to_vec(), 5, now)],
            ..Row::default()
        },
    )
    .expect("write ttl");
    assert!(e.get(key(b"a")).expect("read").is_none());
    assert!(e.get(key(b"c")).expect("read").is_some());
    // A write with an older timestamp than the deletion does not bring the row back.
    e.write(key(b"a"), row(9, b"old")).expect("write");
    assert!(e.get(key(b"a")).expect("read").is_none());
    clock.advance_s(6);
    assert!(e.get(key(b"c")).expect("read").is_none(), "expired at once");
    e.sync().expect("sync");
    drop(e);
    let e = open();
    assert!(
        e.get(key(b"a")).expect("read").is_none(),
        "tombstone honoured at cold start"
    );
    assert!(e.get(key(b"c")).expect("read").is_none());
    assert!(e.get(key(b"b")).expect("read").is_some());
    assert_eq!(e.expire_now(), 1, "the expired row is reclaimed");
}

#[test]
fn partitions_read_in_clustering_order_and_scans_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(config(dir.path())).expect("open");
    for p in 0..20u32 {
        for c in 0..30u32 {
            let ck = (c * 7 % 30).to_be_bytes();
            e.write(RowKey::new(T, &p.to_be_bytes(), &ck), row(1, b"x"))
                .expect("write");
        }
    }
    let rows = e
        .read_partition(
            PartitionKey::new(T, &3u32.to_be_bytes()),
            Bound::Included(&5u32.to_be_bytes()),
            Bound::Excluded(&9u32.to_be_bytes()),
            false,
            100,
        )
        .expect("partition read");
    let cks: Vec<Vec<u8>> = rows.iter().map(|r| r.clustering_key.clone()).collect();
    assert_eq!(
        cks,
        (5..9u32).map(|c| c.to_be_bytes().to_vec()).collect::<Vec<_>>()
    );
    let rev = e
        .read_partition(
            PartitionKey::new(T, &3u32.to_be_bytes()),
            Bound::Unbounded,
            Bound::Unbounded,
            true,
            2,
        )
        .expect("partition read");
    assert_eq!(rev[0].clustering_key, 29u32.to_be_bytes().to_vec());
    // Page through the whole table 7 rows at a time.
    let mut seen = 0;
    let mut from = ScanFrom::Token(i64::MIN);
    let mut last_token = i64::MIN;
    loop {
        let page = e.scan(T, from, i64::MAX, 7).expect("scan");
        for r in &page {
            assert!(r.token >= last_token, "token order");
            last_token = r.token;
        }
        seen += page.len();
        match page.last() {
            Some(r) if page.len() == 7 => from = ScanFrom::After(r.position),
            _ => break,
        }
    }
    assert_eq!(seen, 600);
}

#[test]
fn data_in_memory_serves_reads_from_ram_and_persists_when_given_a_device() {
    // RAM only: no device at all.
    let e = Engine::open(NamespaceConfig::in_memory("ram", 8 << 20)).expect("open ram namespace");
    for i in 0..2_000u32 {
        e.write(key(&i.to_be_bytes()), row(1, b"v")).expect("write");
    }
    for i in 0..2_000u32 {
        assert!(e.get(key(&i.to_be_bytes())).expect("read").is_some());
    }
    drop(e);

    // In memory with a device behind it: every read is served from RAM, and a restart reads the
    // device back.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config(dir.path());
    c.data_in_memory = true;
    {
        let e = Engine::open(c.clone()).expect("open");
        for i in 0..2_000u32 {
            e.write(key(&i.to_be_bytes()), row(1, &i.to_le_bytes()))
                .expect("write");
        }
        e.sync().expect("sync");
    }
    std::fs::remove_file(dir.path().join("test.index")).ok();
    let e = Engine::open(c).expect("reopen");
    for i in 0..2_000u32 {
        let r = e.get(key(&i.to_be_bytes())).expect("read").expect("present");
        assert_eq!(value(&r, 0, 0), Some(i.to_le_bytes().to_vec()));
    }
    assert_eq!(
        e.stats().device_reads,
        0,
        "a data-in-memory namespace never reads the device for a row"
    );
}

/// Regression: when all of a row's live content expired, the expiry pass dropped the whole
/// entry, deletions inside it included, before their grace period; a late write carrying an
/// older timestamp than the deletion then brought the deleted cell back.
#[test]
fn deletions_inside_an_expired_row_outlive_it_until_grace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(1_000_000_000_000_000));
    let e = Engine::open_with_clock(config(dir.path()), clock.clone()).expect("open");
    let now = hayate_storage::Clock::now_s(&*clock);
    let k = key(b"session");
    e.write(
        k,
        Row {
            cells: vec![Cell::expiring(0, 10, b"a".to_vec(), 5, now)],
            ..Row::default()
        },
    )
    .expect("write");
    e.write(
        k,
        Row {
            cells: vec![Cell::tombstone(1, 20, now)],
            ..Row::default()
        },
    )
    .expect("delete a cell");
    clock.advance_s(6);
    e.expire_now();
    e.write(
        k,
        Row {
            cells: vec![Cell::live(1, 15, b"late".to_vec())],
            ..Row::default()
        },
    )
    .expect("late write");
    assert!(
        e.get(k).expect("read").is_none(),
        "a write older than the cell's deletion stays deleted"
    );
}

/// Regression: cold start picked the version with the newest timestamp, so a tombstone purged
/// after its grace period, but still on the device, came back over a later write that carried an
/// older timestamp. The last version written is the merge of all before it and must win.
#[test]
fn a_purged_tombstone_does_not_return_at_cold_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(1_000_000_000_000_000));
    let mut c = config(dir.path());
    c.tombstone_grace_s = 60;
    let open = || Engine::open_with_clock(c.clone(), clock.clone()).expect("open");
    let e = open();
    e.delete(key(b"k"), 100).expect("delete");
    clock.advance_s(61);
    assert_eq!(
        e.expire_now(),
        1,
        "the tombstone is purged after its grace period"
    );
    e.write(key(b"k"), row(50, b"after")).expect("write");
    assert!(e.get(key(b"k")).expect("read").is_some());
    e.sync().expect("sync");
    drop(e);
    let e = open();
    let r = e.get(key(b"k")).expect("read").expect("still there after a scan");
    assert_eq!(value(&r, 0, 0), Some(b"after".to_vec()));
}

/// A dropped table's rows are gone at once, their blocks count them dead (defrag reclaims
/// them), and other tables keep theirs. A cold start finds the dropped rows again (they are
/// still on the device until defragmented), which is why the server drops them after each open.
#[test]
fn a_dropped_table_frees_its_rows_and_spares_the_others() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = Engine::open(config(dir.path())).expect("open");
    for i in 0..2000u32 {
        let k = i.to_be_bytes();
        engine.write(key(&k), row(1, b"dropped")).expect("write");
        engine.write(other(&k), row(1, b"kept")).expect("write");
    }
    let live_before = engine.stats().records;
    assert_eq!(engine.table_ids(), vec![T, T + 1]);
    assert_eq!(engine.drop_table(T), 2000);
    assert_eq!(engine.table_ids(), vec![T + 1]);
    assert_eq!(engine.stats().records, live_before - 2000);
    assert!(engine.get(key(&7u32.to_be_bytes())).expect("read").is_none());
    assert!(engine
        .scan(T, ScanFrom::Token(i64::MIN), i64::MAX, 10)
        .expect("scan")
        .is_empty());
    let kept = engine
        .get(other(&7u32.to_be_bytes()))
        .expect("read")
        .expect("kept row");
    assert_eq!(value(&kept, 0, 0).as_deref(), Some(&b"kept"[..]));
    // Dropping it again, or a table that never existed, does nothing.
    assert_eq!(engine.drop_table(T), 0);
    assert_eq!(engine.drop_table(99), 0);
    engine.sync().expect("sync");
    drop(engine);

    let engine = Engine::open(config(dir.path())).expect("reopen");
    assert!(engine.table_ids().contains(&(T + 1)));
    let found_again = if engine.table_ids().contains(&T) { 2000 } else { 0 };
    assert_eq!(engine.drop_table(T), found_again);
    assert!(engine.get(key(&7u32.to_be_bytes())).expect("read").is_none());
    assert!(engine.get(other(&7u32.to_be_bytes())).expect("read").is_some());
}

/// A table's own grace period (Cassandra's `gc_grace_seconds`) overrides the namespace's: its
/// tombstones go after it, other tables' after theirs, and clearing it goes back to the default.
#[test]
fn each_table_keeps_tombstones_for_its_own_grace_period() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(1_000_000_000_000_000));
    let mut c = config(dir.path());
    c.tombstone_grace_s = 3_600;
    let e = Engine::open_with_clock(c, clock.clone()).expect("open");
    let short = |k: &'static [u8]| RowKey::new(T + 1, k, b"");
    e.set_tombstone_grace(T + 1, Some(60));
    e.delete(key(b"k"), 100).expect("delete");
    e.delete(short(b"k"), 100).expect("delete");
    clock.advance_s(61);
    assert_eq!(
        e.expire_now(),
        1,
        "only the table with a 60 s grace period purges"
    );
    assert!(e.get_with_tombstones(key(b"k")).expect("read").is_some());
    assert!(e.get_with_tombstones(short(b"k")).expect("read").is_none());
    // Back to the namespace's hour.
    e.set_tombstone_grace(T + 1, None);
    e.delete(short(b"j"), 100).expect("delete");
    clock.advance_s(61);
    assert_eq!(e.expire_now(), 0);
    clock.advance_s(3_600);
    assert_eq!(e.expire_now(), 2);
}

/// Blocks reuse the buffers of blocks that left the post-write cache, which still hold the old
/// block's records. Past its last record a block must still end clean, on the device and in
/// the cache: a scan that met an old record there would take the block for damaged. Rows of
/// different sizes make each block end at a different offset, and a large row sealing a block
/// of small ones leaves tens of kilobytes behind its last record.
#[test]
fn blocks_on_reused_buffers_end_clean() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config(dir.path());
    c.post_write_cache_bytes = 2 * u64::from(c.block_size_bytes);
    // Rewrites are whole rows, so the blocks they leave behind empty and are defragmented.
    c.delta_buffer_bytes = 0;
    let sized = |i: u32| -> Vec<u8> {
        let len = match i % 50 {
            0 => 40_000,
            n if n < 20 => 3_000,
            _ => 100,
        };
        let mut v = vec![(i % 251) as u8; len];
        v[..4].copy_from_slice(&i.to_le_bytes());
        v
    };
    let n = 3_000u32;
    {
        let e = Engine::open(c.clone()).expect("open");
        for i in 0..n {
            e.write(key(&i.to_be_bytes()), row(10, &sized(i))).expect("write");
        }
        // Two rows of three rewritten: the old blocks fall below the low-water mark.
        for i in (0..n).filter(|i| i % 3 != 0) {
            e.write(key(&i.to_be_bytes()), row(20, &sized(i + 1)))
                .expect("rewrite");
        }
        // By this call or by the background defragmenter, whichever came first.
        e.defrag_now();
        assert!(e.stats().defrag_blocks > 0, "defragmentation read blocks back");
        e.sync().expect("sync");
        drop(e); // no snapshot: the next open scans every block
    }
    let (e, logs) = capture_logs(|| Engine::open(c.clone()).expect("reopen by scan"));
    let complaints: Vec<_> = logs
        .lines()
        .into_iter()
        .filter(|l| l.starts_with("WARN") || l.starts_with("ERROR"))
        .collect();
    assert!(
        complaints.is_empty(),
        "the scan found every block clean: {complaints:?}"
    );
    for i in 0..n {
        let r = e.get(key(&i.to_be_bytes())).expect("read").expect("present");
        let want = if i % 3 == 0 { sized(i) } else { sized(i + 1) };
        assert_eq!(value(&r, 0, 0), Some(want), "row {i}");
    }
}

/// Regression: defragmentation that walked a block while `drop_table` was removing the
/// table's entries skipped the dropped table's records (the table was already gone) while
/// their live bytes were not yet taken off, called the block inconsistent ("the index points at
/// records the walk did not find") and left it in place for good: a block lost until the next
/// restart, for every block a DROP or TRUNCATE raced. Seen at a cold start after a TRUNCATE,
/// where the server drops the truncated table's rows as defragmentation begins.
#[test]
fn a_table_dropped_while_defragmentation_runs_leaves_no_block_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config(dir.path());
    c.defrag_sleep_us = 0;
    let engine = Arc::new(Engine::open(c).expect("open"));
    for round in 0..6i64 {
        // Small rows of T between larger rows of T + 1, which are then written again: the old
        // blocks keep only T's rows live, below the low-water mark.
        for i in 0..20_000u32 {
            let k = i.to_be_bytes();
            engine.write(key(&k), row(round * 2 + 1, b"t")).expect("write");
            engine
                .write(other(&k), row(round * 2 + 1, &[1; 300]))
                .expect("write");
        }
        for i in 0..20_000u32 {
            engine
                .write(other(&i.to_be_bytes()), row(round * 2 + 2, &[2; 300]))
                .expect("rewrite");
        }
        let dropper = {
            let engine = Arc::clone(&engine);
            std::thread::spawn(move || engine.drop_table(T))
        };
        let ((), logs) = capture_logs(|| {
            while !dropper.is_finished() {
                engine.defrag_now();
            }
            for _ in 0..20 {
                engine.sync().expect("sync");
                engine.defrag_now();
            }
        });
        assert_eq!(dropper.join().expect("drop thread"), 20_000);
        // The background defragmenter may be in the middle of a block: a block stuck stays.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while engine.defrag_status().defragging_blocks > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(
            engine.defrag_status().defragging_blocks,
            0,
            "round {round}: blocks left in place after a drop raced defragmentation: {:?}",
            logs.lines()
        );
    }
}

#[test]
fn ordered_scans_see_each_row_once_whatever_the_page_and_the_partition_widths() {
    // A scan takes index entries in batches of about the rows it wants and reads each token's
    // rows whole: a batch that ends inside a partition leaves that partition to the next
    // batch, and a partition wider than a batch is read alone. Paging through the table as a
    // paging state does, after the last row of each page, must see every row once, in order,
    // at every page size, including the sizes around the batch's.
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(1_000_000_000_000_000));
    let e = Engine::open_with_clock(config(dir.path()), clock.clone()).expect("open");
    let now_s = hayate_storage::Clock::now_s(&*clock);
    let mut written: Vec<(i64, Vec<u8>, Vec<u8>)> = Vec::new();
    let widths = (0..40u32).map(|p| match p {
        7 => 50u32,
        8 => 17,
        21 => 16,
        _ => 1,
    });
    for (p, width) in widths.enumerate() {
        let pk = (p as u32).to_be_bytes();
        for c in 0..width {
            // Written out of clustering order: the index orders them by digest past 8 bytes.
            let ck = [b"clustering-".as_slice(), &((c * 7) % width).to_be_bytes()].concat();
            let update = if c % 5 == 4 {
                Row::deleted(2, now_s)
            } else {
                row(1, b"x")
            };
            e.write(RowKey::new(T, &pk, &ck), update).expect("write");
            written.push((hayate_storage::token::token(&pk), pk.to_vec(), ck));
        }
    }
    written.sort();
    for live_limit in [1, 2, 3, 15, 16, 17, 18, 49, 50, 51, 2000] {
        let mut seen: Vec<(i64, Vec<u8>, Vec<u8>)> = Vec::new();
        loop {
            let from = match seen.last() {
                None => RowsFrom::Token(i64::MIN),
                Some((token, partition, clustering)) => RowsFrom::After {
                    token: *token,
                    partition,
                    clustering: Some(clustering),
                },
            };
            let page = e.scan_rows(T, from, i64::MAX, live_limit).expect("scan");
            let live = page.rows.iter().filter(|r| r.row.is_live(now_s)).count();
            assert!(live <= live_limit, "{live} live rows in a page of {live_limit}");
            seen.extend(
                (page.rows.iter()).map(|r| (r.token, r.partition_key.clone(), r.clustering_key.clone())),
            );
            if !page.more {
                break;
            }
        }
        assert_eq!(seen, written, "pages of {live_limit} live rows");
    }
    // After a whole partition: the next page starts with the next partition's first row.
    let (token, partition, _) = &written[0];
    let page = e
        .scan_rows(
            T,
            RowsFrom::After {
                token: *token,
                partition,
                clustering: None,
            },
            i64::MAX,
            1,
        )
        .expect("scan");
    let first_after = written
        .iter()
        .find(|w| w.1 != *partition)
        .expect("two partitions");
    assert_eq!(page.rows[0].partition_key, first_after.1);
    assert_eq!(page.rows[0].clustering_key, first_after.2);
}
