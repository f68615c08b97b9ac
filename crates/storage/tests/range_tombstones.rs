//! Range and partition tombstones: one record per delete that shadows every older row in its
//! range, whenever that row arrives, across restarts, defragmentation and until its grace
//! period ends; and a page read of a wide partition that reads only about its own rows.
//!
//! The bug these guard against: a range delete used to write a row tombstone over each row
//! that existed at that moment, so a row written afterwards with an older `USING TIMESTAMP`
//! (or arriving late from a replica, a hint or a repair) came back.

use std::ops::Bound;
use std::sync::Arc;

use hayate_storage::{Cell, Deletion, Engine, ManualClock, NamespaceConfig, PartitionKey, Row, RowKey};

const T: u32 = 7;
const START_US: i64 = 1_000_000_000_000_000;

fn config(dir: &std::path::Path) -> NamespaceConfig {
    let mut c = NamespaceConfig::with_file("rt", dir, 64 << 20);
    c.block_size_bytes = 128 << 10;
    c.post_write_cache_bytes = 1 << 20;
    c.flush_interval_ms = 50;
    c.tombstone_grace_s = 60;
    c
}

fn open(dir: &std::path::Path, clock: &Arc<ManualClock>) -> Engine {
    Engine::open_with_clock(config(dir), Arc::clone(clock) as Arc<dyn hayate_storage::Clock>).expect("open")
}

fn put(e: &Engine, pk: &[u8], ck: u8, ts: i64) {
    let clustering = [ck];
    let key = RowKey::new(T, pk, &clustering);
    let row = Row {
        cells: vec![Cell::live(1, ts, vec![ck; 8])],
        ..Row::default()
    };
    e.write(key, row).expect("write");
}

/// The clustering keys a full read of the partition returns, in order.
fn visible(e: &Engine, pk: &[u8]) -> Vec<u8> {
    let rows = e
        .read_partition(
            PartitionKey::new(T, pk),
            Bound::Unbounded,
            Bound::Unbounded,
            false,
            usize::MAX,
        )
        .expect("read");
    rows.iter().map(|r| r.clustering_key[0]).collect()
}

fn del(ts: i64, at_s: u32) -> Deletion {
    Deletion {
        timestamp_us: ts,
        deleted_at_s: at_s,
    }
}

fn now_s(clock: &ManualClock) -> u32 {
    use hayate_storage::Clock;
    clock.now_s()
}

#[test]
fn a_range_tombstone_shadows_older_rows_whenever_they_arrive() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(START_US));
    let e = open(dir.path(), &clock);
    for ck in 0..8 {
        put(&e, b"p", ck, 100);
    }
    put(&e, b"q", 3, 100);
    // DELETE ... WHERE k = 'p' AND c >= 2 AND c < 5, at timestamp 200.
    e.delete_range(
        PartitionKey::new(T, b"p"),
        Bound::Included(&[2]),
        Bound::Excluded(&[5]),
        del(200, now_s(&clock)),
    )
    .expect("delete range");
    assert_eq!(visible(&e, b"p"), [0, 1, 5, 6, 7]);
    assert_eq!(visible(&e, b"q"), [3], "another partition is untouched");
    // Written after the delete with an older timestamp: still hidden. Newer: shown.
    put(&e, b"p", 3, 150);
    put(&e, b"p", 4, 250);
    assert_eq!(visible(&e, b"p"), [0, 1, 4, 5, 6, 7]);
    let one = |ck: u8| e.get(RowKey::new(T, b"p", &[ck])).expect("get");
    assert!(one(3).is_none());
    assert!(one(4).is_some());
    // A raw read (what a replica answers) carries the deletion in the rows it shadows.
    let raw = e
        .read_partition_raw(
            PartitionKey::new(T, b"p"),
            Bound::Unbounded,
            Bound::Unbounded,
            false,
            100,
        )
        .expect("raw");
    let shadowed = raw
        .rows
        .iter()
        .find(|r| r.clustering_key == [2])
        .expect("row 2 comes along");
    assert_eq!(shadowed.row.deletion, Some(del(200, now_s(&clock))));
    assert!(!shadowed.row.is_live(now_s(&clock)));
    // Scans honour it too.
    let scanned = e
        .scan(T, hayate_storage::ScanFrom::Token(i64::MIN), i64::MAX, usize::MAX)
        .expect("scan");
    assert_eq!(scanned.len(), 7, "p: 0 1 4 5 6 7 and q: 3");
    // A partition deletion hides everything older, and a later newer row shows alone.
    e.delete_range(
        PartitionKey::new(T, b"p"),
        Bound::Unbounded,
        Bound::Unbounded,
        del(300, now_s(&clock)),
    )
    .expect("delete partition");
    put(&e, b"p", 1, 299);
    assert!(visible(&e, b"p").is_empty());
    put(&e, b"p", 6, 301);
    assert_eq!(visible(&e, b"p"), [6]);
    let t = e
        .partition_tombstones(PartitionKey::new(T, b"p"))
        .expect("read")
        .expect("present");
    assert!(
        t.ranges.is_empty(),
        "the older range is folded into the partition deletion"
    );
}

#[test]
fn tombstones_survive_clean_and_unclean_restarts_and_defrag() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(START_US));
    {
        let e = open(dir.path(), &clock);
        for ck in 0..10 {
            put(&e, b"p", ck, 100);
        }
        e.delete_range(
            PartitionKey::new(T, b"p"),
            Bound::Excluded(&[6]),
            Bound::Unbounded,
            del(200, now_s(&clock)),
        )
        .expect("delete range");
        e.delete_range(
            PartitionKey::new(T, b"r"),
            Bound::Unbounded,
            Bound::Unbounded,
            del(200, now_s(&clock)),
        )
        .expect("delete a partition that holds nothing yet");
        e.close().expect("close");
    }
    {
        let e = open(dir.path(), &clock);
        assert_eq!(
            visible(&e, b"p"),
            [0, 1, 2, 3, 4, 5, 6],
            "after a snapshot restart"
        );
        put(&e, b"r", 1, 150);
        assert!(
            visible(&e, b"r").is_empty(),
            "the partition deletion came back from the snapshot"
        );
        // Churn other rows so that the blocks holding the tombstones are defragmented.
        for round in 0..6i64 {
            for i in 0..400u32 {
                let partition = i.to_be_bytes();
                let key = RowKey::new(T, &partition, b"");
                let row = Row {
                    cells: vec![Cell::live(1, 1_000 + round, vec![9; 400])],
                    ..Row::default()
                };
                e.write(key, row).expect("churn");
            }
        }
        e.sync().expect("sync");
        e.defrag_now();
        assert!(e.stats().defrag_blocks > 0, "blocks were defragmented");
        e.sync().expect("sync");
        drop(e); // no snapshot: the next open scans
    }
    let e = open(dir.path(), &clock);
    assert_eq!(visible(&e, b"p"), [0, 1, 2, 3, 4, 5, 6], "after a scan restart");
    assert!(visible(&e, b"r").is_empty());
    put(&e, b"p", 8, 199);
    put(&e, b"p", 9, 201);
    assert_eq!(visible(&e, b"p"), [0, 1, 2, 3, 4, 5, 6, 9]);
}

#[test]
fn tombstones_are_purged_after_grace_with_the_rows_they_shadow() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(START_US));
    let e = open(dir.path(), &clock);
    for ck in 0..6 {
        put(&e, b"p", ck, 100);
    }
    e.delete_range(
        PartitionKey::new(T, b"p"),
        Bound::Included(&[1]),
        Bound::Included(&[3]),
        del(200, now_s(&clock)),
    )
    .expect("delete range");
    put(&e, b"p", 2, 300); // newer than the tombstone: survives the purge
    let before = e.stats().records;
    e.expire_now();
    assert!(
        e.partition_tombstones(PartitionKey::new(T, b"p"))
            .expect("read")
            .is_some(),
        "kept within its grace"
    );
    clock.advance_s(61);
    // The first pass folds the deletion into rows 1 and 3 and drops the record once no older
    // version of it can come back; rows 1 and 3 then go as ordinary tombstones.
    for _ in 0..3 {
        e.expire_now();
    }
    assert!(
        e.partition_tombstones(PartitionKey::new(T, b"p"))
            .expect("read")
            .is_none(),
        "purged after its grace"
    );
    assert_eq!(
        visible(&e, b"p"),
        [0, 2, 4, 5],
        "the shadowed rows did not come back"
    );
    assert!(e.stats().records < before, "the shadowed rows' entries went too");
}

/// A page of a wide partition reads about the page's rows, not the rows before it: paging
/// through a partition used to cost each page the whole partition.
#[test]
fn a_page_of_a_wide_partition_reads_only_its_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(START_US));
    let mut c = config(dir.path());
    c.post_write_cache_bytes = 8 << 20;
    let e = Engine::open_with_clock(c, Arc::clone(&clock) as Arc<dyn hayate_storage::Clock>).expect("open");
    let rows = 20_000u32;
    for i in 0..rows {
        let clustering = i.to_be_bytes();
        let key = RowKey::new(T, b"wide", &clustering);
        let row = Row {
            cells: vec![Cell::live(1, 100, vec![1; 16])],
            ..Row::default()
        };
        e.write(key, row).expect("write");
    }
    let page = 100usize;
    let mut after: Option<Vec<u8>> = None;
    let mut seen = 0u32;
    let mut worst = 0u64;
    for _ in 0..5 {
        let before = e.stats().records_read;
        let start = match &after {
            Some(k) => Bound::Excluded(k.as_slice()),
            None => Bound::Unbounded,
        };
        let got = e
            .read_partition_raw(
                PartitionKey::new(T, b"wide"),
                start,
                Bound::Unbounded,
                false,
                page,
            )
            .expect("page");
        let read = e.stats().records_read - before;
        worst = worst.max(read);
        assert_eq!(got.rows.len(), page);
        assert!(got.more);
        for r in &got.rows {
            assert_eq!(
                r.clustering_key,
                seen.to_be_bytes(),
                "rows in order, none skipped"
            );
            seen += 1;
        }
        after = got.rows.last().map(|r| r.clustering_key.clone());
    }
    // A page from the middle of the partition, too.
    let mid = (rows / 2).to_be_bytes();
    let before = e.stats().records_read;
    let got = e
        .read_partition(
            PartitionKey::new(T, b"wide"),
            Bound::Included(&mid),
            Bound::Unbounded,
            false,
            page,
        )
        .expect("page");
    worst = worst.max(e.stats().records_read - before);
    assert_eq!(got.len(), page);
    assert_eq!(got[0].clustering_key, mid);
    // Reversed (ORDER BY c DESC), paging down from the end.
    let mut before_key: Option<Vec<u8>> = None;
    let mut next = rows;
    for _ in 0..5 {
        let before = e.stats().records_read;
        let end = match &before_key {
            Some(k) => Bound::Excluded(k.as_slice()),
            None => Bound::Unbounded,
        };
        let got = e
            .read_partition_raw(PartitionKey::new(T, b"wide"), Bound::Unbounded, end, true, page)
            .expect("page");
        worst = worst.max(e.stats().records_read - before);
        assert_eq!(got.rows.len(), page);
        assert!(got.more);
        for r in &got.rows {
            next -= 1;
            assert_eq!(
                r.clustering_key,
                next.to_be_bytes(),
                "rows in reverse order, none skipped"
            );
        }
        before_key = got.rows.last().map(|r| r.clustering_key.clone());
    }
    // Each page reads its rows and at most one batch more: nothing like the 20 000 rows.
    assert!(worst <= 2 * page as u64 + 16, "a page read {worst} records");
}
