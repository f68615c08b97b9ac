//! Streaming a token range to another node: what one engine exports, another imports, and the
//! second then holds every record exactly as the first stored it (deletions with their times,
//! TTLs, range and partition tombstones, a row larger than a block, a row with a pending
//! delta); resuming covers a range once; applying twice, or late, changes nothing; a damaged
//! chunk changes nothing at all; and the cleanup of a range forgets exactly that range.

mod common;

use std::collections::BTreeSet;
use std::error::Error as _;
use std::ops::Bound;
use std::sync::Arc;

use common::{device_config, open_on, FaultyDevice};
use hayate_storage::format::stream::{decode_chunk, Contents};
use hayate_storage::token::token;
use hayate_storage::{
    Cell, CellValue, Deletion, Engine, ExportedChunk, ImportError, Liveness, ManualClock, PartitionKey, Row,
    RowKey, RowsFrom, ScanFrom, StoredRow, WriteError,
};

const T: u32 = 3;
const BLOCK: u64 = 128 << 10;
const NOW_US: i64 = 1_700_000_000_000_000;
const NOW_S: u32 = (NOW_US / 1_000_000) as u32;

struct Node {
    engine: Engine,
    _device: Arc<FaultyDevice>,
}

/// An engine on a device in RAM with 4 blocks of post-write cache, so that most of what the
/// tests write is read back from the device.
fn node(clock: &Arc<ManualClock>, blocks: u64) -> Node {
    let device = Arc::new(FaultyDevice::new(blocks * BLOCK));
    let engine = open_on(&device_config(None), &device, clock);
    Node {
        engine,
        _device: device,
    }
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(NOW_US))
}

fn key<'a>(pk: &'a [u8], ck: &'a [u8]) -> RowKey<'a> {
    RowKey::new(T, pk, ck)
}

fn plain(ts: i64, value: Vec<u8>) -> Row {
    Row {
        liveness: Some(Liveness {
            timestamp_us: ts,
            ttl_s: 0,
            expires_at_s: 0,
        }),
        cells: vec![Cell::live(1, ts, value)],
        ..Row::default()
    }
}

/// `n` partitions of one row each, named `p00000`...
fn write_plain(e: &Engine, n: u32, ts: i64, value_bytes: usize) {
    for i in 0..n {
        let pk = format!("p{i:05}").into_bytes();
        e.write(key(&pk, b""), plain(ts, vec![i as u8; value_bytes]))
            .expect("write");
    }
}

/// Every chunk of `(start_exclusive, end]`, resumed with `next` until it is `None`.
fn export_all(e: &Engine, start_exclusive: i64, end: i64, max_bytes: usize) -> Vec<ExportedChunk> {
    let mut chunks = Vec::new();
    let mut from = ScanFrom::Token(start_exclusive.saturating_add(1));
    loop {
        let c = e.export_range(T, from, end, max_bytes).expect("export");
        let next = c.next;
        chunks.push(c);
        match next {
            Some(p) => from = ScanFrom::After(p),
            None => return chunks,
        }
        assert!(chunks.len() < 100_000, "the export never ends");
    }
}

fn import_all(e: &Engine, chunks: &[ExportedChunk]) {
    for c in chunks {
        let stats = e.import_chunk(&c.bytes).expect("import");
        assert_eq!(stats.records, c.records);
    }
}

/// Every row of the table as stored (dead ones too), with the tombstones covering it merged in.
fn dump(e: &Engine) -> Vec<StoredRow> {
    let page = e
        .scan_rows(T, RowsFrom::Token(i64::MIN), i64::MAX, usize::MAX)
        .expect("scan");
    assert!(!page.more);
    page.rows
}

/// The row as a replica write stores it now: what an import of the row makes of it (a cell
/// that expired becomes a tombstone dated by its expiry).
fn as_merged(mut row: Row, now_s: u32) -> Row {
    row.merge(Row::default(), now_s, 0);
    row
}

/// The keys in a stream of chunks, each chunk checked by the real decoder.
fn keys_in(chunks: &[ExportedChunk]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut keys = Vec::new();
    for c in chunks {
        let chunk = decode_chunk(&c.bytes).expect("a chunk the engine made decodes");
        assert_eq!(chunk.table, T);
        assert_eq!(chunk.records.len() as u64, c.records);
        for r in chunk.records {
            keys.push((r.partition_key.to_vec(), r.clustering_key.to_vec()));
        }
    }
    keys
}

/// The tokens of `n` plain rows, sorted.
fn sorted_tokens(n: u32) -> Vec<i64> {
    let mut tokens: Vec<i64> = (0..n).map(|i| token(format!("p{i:05}").as_bytes())).collect();
    tokens.sort_unstable();
    tokens
}

/// A source holding every kind of record, on the device and in memory.
fn rich_source(clock: &Arc<ManualClock>) -> Node {
    let src = node(clock, 256);
    let e = &src.engine;
    // Enough plain rows to fill blocks well past the post-write cache.
    write_plain(e, 3_000, 10, 400);
    // A row deletion, with its deletion time.
    e.delete(key(b"deleted", b""), 20).expect("delete");
    // TTLs: an expiring marker and cell, and a cell that will have expired when it is sent.
    let ttl_row = Row {
        liveness: Some(Liveness {
            timestamp_us: 30,
            ttl_s: 3_600,
            expires_at_s: NOW_S + 3_600,
        }),
        cells: vec![
            Cell::expiring(1, 30, b"lives an hour".to_vec(), 3_600, NOW_S),
            Cell::expiring(2, 30, b"gone in a minute".to_vec(), 60, NOW_S),
        ],
        ..Row::default()
    };
    e.write(key(b"ttl", b""), ttl_row).expect("ttl write");
    // A collection: a column deletion, elements with paths, and a cell tombstone.
    let mut collection = Row {
        column_deletions: vec![(
            5,
            Deletion {
                timestamp_us: 39,
                deleted_at_s: NOW_S,
            },
        )],
        cells: vec![
            Cell {
                column: 5,
                path: b"k1".to_vec(),
                timestamp_us: 40,
                value: CellValue::Live {
                    value: b"v1".to_vec(),
                    ttl_s: 0,
                    expires_at_s: 0,
                },
            },
            Cell::tombstone(6, 40, NOW_S - 5),
        ],
        ..Row::default()
    };
    collection.normalize();
    e.write(key(b"collection", b"c"), collection)
        .expect("collection write");
    // Range and partition tombstones, over rows older and newer than them.
    for ck in [b"a", b"b", b"c", b"d"] {
        e.write(key(b"ranged", ck), plain(50, ck.to_vec()))
            .expect("write");
    }
    e.write(key(b"ranged", b"z"), plain(70, b"newer".to_vec()))
        .expect("write");
    let deletion = |ts| Deletion {
        timestamp_us: ts,
        deleted_at_s: NOW_S - 10,
    };
    e.delete_range(
        PartitionKey::new(T, b"ranged"),
        Bound::Included(b"b"),
        Bound::Excluded(b"d"),
        deletion(60),
    )
    .expect("range delete");
    e.delete_range(
        PartitionKey::new(T, b"whole"),
        Bound::Unbounded,
        Bound::Unbounded,
        deletion(65),
    )
    .expect("partition delete");
    e.write(key(b"whole", b"after"), plain(80, b"newer".to_vec()))
        .expect("write");
    // A row larger than a block, written in chunks.
    e.write(key(b"large", b""), plain(90, vec![7; 300_000]))
        .expect("large write");
    e.sync().expect("sync");
    // A row with a pending delta: written whole, pushed out of the post-write cache, then
    // updated without being read.
    e.write(key(b"delta", b""), plain(100, b"base".to_vec()))
        .expect("base");
    write_plain_named(e, "filler", 1_500, 400);
    e.write(
        key(b"delta", b""),
        Row {
            cells: vec![Cell::live(2, 110, b"blind".to_vec())],
            ..Row::default()
        },
    )
    .expect("delta");
    assert!(e.stats().deltas >= 1, "the update was written as a delta");
    src
}

fn write_plain_named(e: &Engine, prefix: &str, n: u32, value_bytes: usize) {
    for i in 0..n {
        let pk = format!("{prefix}{i:05}").into_bytes();
        e.write(key(&pk, b""), plain(10, vec![1; value_bytes]))
            .expect("write");
    }
}

#[test]
fn a_round_trip_reproduces_every_record_as_stored() {
    let clock = clock();
    let src = rich_source(&clock);
    // The short TTL has run out: the cell goes as stored, still a live cell past its expiry.
    clock.advance_s(120);
    let now_s = NOW_S + 120;
    let reads_before = src.engine.stats().device_reads;
    let chunks = export_all(&src.engine, i64::MIN, i64::MAX, 64 << 10);
    assert!(chunks.len() > 10, "{} chunks", chunks.len());
    assert!(
        src.engine.stats().device_reads > reads_before + 10,
        "most of the source is read from its device, not its post-write cache"
    );
    let dst = node(&clock, 256);
    import_all(&dst.engine, &chunks);

    let (before, after) = (dump(&src.engine), dump(&dst.engine));
    assert_eq!(before.len(), after.len());
    for (s, d) in before.iter().zip(&after) {
        assert_eq!(
            (&s.partition_key, &s.clustering_key),
            (&d.partition_key, &d.clustering_key)
        );
        assert_eq!(
            d.row,
            as_merged(s.row.clone(), now_s),
            "row {:?}",
            s.partition_key
        );
    }
    let find = |pk: &[u8], ck: &[u8]| {
        after
            .iter()
            .find(|r| r.partition_key == pk && r.clustering_key == ck)
            .map(|r| r.row.clone())
            .unwrap_or_else(|| panic!("{pk:?}/{ck:?} missing"))
    };
    assert_eq!(
        find(b"deleted", b"").deletion.map(|d| d.deleted_at_s),
        Some(NOW_S)
    );
    let ttl = find(b"ttl", b"");
    assert_eq!(
        ttl.liveness.map(|l| (l.ttl_s, l.expires_at_s)),
        Some((3_600, NOW_S + 3_600))
    );
    assert_eq!(ttl.cells[0].value_at(now_s), Some(&b"lives an hour"[..]));
    assert_eq!(
        ttl.cells[1].value,
        CellValue::Tombstone {
            deleted_at_s: NOW_S + 60
        },
        "an expired cell arrives as the tombstone any merge makes of it, dated by its expiry"
    );
    let collection = find(b"collection", b"c");
    assert_eq!(collection.column_deletions.len(), 1);
    assert_eq!(collection.cells.len(), 2);
    assert_eq!(
        find(b"large", b"").cells[0].value_at(now_s).map(<[u8]>::len),
        Some(300_000)
    );
    let delta = find(b"delta", b"");
    assert_eq!(delta.cells.len(), 2, "the delta's cell came merged: {delta:?}");
    // Tombstones records, and what they shadow on the receiver.
    for pk in [&b"ranged"[..], b"whole"] {
        assert_eq!(
            dst.engine
                .partition_tombstones(PartitionKey::new(T, pk))
                .expect("read"),
            src.engine
                .partition_tombstones(PartitionKey::new(T, pk))
                .expect("read"),
        );
    }
    for (ck, live) in [
        (&b"a"[..], true),
        (b"b", false),
        (b"c", false),
        (b"d", true),
        (b"z", true),
    ] {
        assert_eq!(dst.engine.get(key(b"ranged", ck)).expect("get").is_some(), live);
    }
    assert!(dst.engine.get(key(b"whole", b"after")).expect("get").is_some());
    assert_eq!(
        dst.engine.range_size(T, i64::MIN, i64::MAX).records,
        src.engine.range_size(T, i64::MIN, i64::MAX).records
    );
}

#[test]
fn resuming_with_next_covers_the_range_with_nothing_missed_or_repeated() {
    let clock = clock();
    let src = node(&clock, 256);
    // Wide partitions too: a chunk boundary can fall between rows of one partition.
    write_plain(&src.engine, 1_500, 10, 200);
    for p in 0..5u8 {
        for c in 0..200u16 {
            src.engine
                .write(key(&[b'w', p], &c.to_be_bytes()), plain(10, vec![p; 100]))
                .expect("write");
        }
    }
    let tokens = sorted_tokens(1_500);
    let (start, end) = (tokens[200], tokens[1_200]);
    let expected: BTreeSet<(Vec<u8>, Vec<u8>)> = dump(&src.engine)
        .into_iter()
        .filter(|r| start < r.token && r.token <= end)
        .map(|r| (r.partition_key, r.clustering_key))
        .collect();
    for max_bytes in [1, 1_000, 16 << 10, 1 << 20, usize::MAX] {
        let chunks = export_all(&src.engine, start, end, max_bytes);
        let keys = keys_in(&chunks);
        let unique: BTreeSet<_> = keys.iter().cloned().collect();
        assert_eq!(
            unique.len(),
            keys.len(),
            "a record sent twice at {max_bytes} bytes"
        );
        assert_eq!(unique, expected, "chunks of {max_bytes} bytes");
        if max_bytes == 1 {
            assert!(
                chunks.iter().all(|c| c.records == 1),
                "at least one record a chunk"
            );
        }
    }
}

#[test]
fn an_empty_range_and_an_unknown_table_export_one_empty_chunk() {
    let clock = clock();
    let src = node(&clock, 64);
    write_plain(&src.engine, 100, 10, 100);
    let tokens = sorted_tokens(100);
    let dst = node(&clock, 64);
    let empty_ranges = [
        (tokens[10], tokens[10]),
        // Between two neighbours: no row's token.
        (tokens[10], tokens[11] - 1),
        (i64::MAX, i64::MAX),
    ];
    for (start, end) in empty_ranges {
        let chunks = export_all(&src.engine, start, end, 1 << 20);
        assert_eq!(chunks.len(), 1);
        assert_eq!(
            (chunks[0].records, chunks[0].data_bytes, chunks[0].next),
            (0, 0, None)
        );
        let stats = dst.engine.import_chunk(&chunks[0].bytes).expect("import");
        assert_eq!((stats.records, stats.data_bytes), (0, 0));
        assert_eq!(src.engine.range_size(T, start, end).records, 0);
        assert_eq!(src.engine.remove_range(T, start, end), 0);
    }
    let other = src
        .engine
        .export_range(T + 1, ScanFrom::Token(i64::MIN), i64::MAX, 1 << 20)
        .expect("export");
    assert_eq!((other.records, other.next), (0, None));
    assert_eq!(dst.engine.stats().records, 0);
}

#[test]
fn ranges_are_start_exclusive_and_end_inclusive_up_to_the_ring_s_ends() {
    let clock = clock();
    let src = node(&clock, 64);
    write_plain(&src.engine, 300, 10, 100);
    let tokens = sorted_tokens(300);
    let count = |start: i64, end: i64| tokens.iter().filter(|&&t| start < t && t <= end).count();
    let ranges = [
        (tokens[10], tokens[20]),
        (tokens[10] - 1, tokens[20] - 1),
        (i64::MIN, tokens[0]),
        (tokens[299] - 1, i64::MAX),
        (i64::MIN, i64::MAX),
        (i64::MIN + 1, i64::MAX),
    ];
    for (start, end) in ranges {
        let want = count(start, end);
        assert!(want > 0, "({start}, {end}] holds rows");
        let exported = keys_in(&export_all(&src.engine, start, end, 4 << 10));
        assert_eq!(exported.len(), want, "export of ({start}, {end}]");
        assert!(exported
            .iter()
            .all(|(pk, _)| { start < token(pk) && token(pk) <= end }));
        assert_eq!(src.engine.range_size(T, start, end).records as usize, want);
    }
    // Removal of (t10, t20] leaves t10 and t21 alone.
    assert_eq!(src.engine.remove_range(T, tokens[10], tokens[20]), 10);
    let left: Vec<i64> = dump(&src.engine).iter().map(|r| r.token).collect();
    assert!(left.contains(&tokens[10]) && left.contains(&tokens[21]));
    assert!(!left.contains(&tokens[11]) && !left.contains(&tokens[20]));
    assert_eq!(src.engine.remove_range(T, i64::MIN, i64::MAX), 290);
    assert_eq!(src.engine.range_size(T, i64::MIN, i64::MAX).records, 0);
}

#[test]
fn importing_twice_or_an_older_chunk_after_a_newer_changes_nothing() {
    let clock = clock();
    let src = node(&clock, 128);
    write_plain(&src.engine, 500, 10, 200);
    let old = export_all(&src.engine, i64::MIN, i64::MAX, 32 << 10);
    // Newer versions of half the rows, a deletion of some others.
    for i in (0..500u32).step_by(2) {
        let pk = format!("p{i:05}").into_bytes();
        src.engine
            .write(key(&pk, b""), plain(20, b"new".to_vec()))
            .expect("write");
    }
    for i in (1..500u32).step_by(10) {
        let pk = format!("p{i:05}").into_bytes();
        src.engine.delete(key(&pk, b""), 20).expect("delete");
    }
    let new = export_all(&src.engine, i64::MIN, i64::MAX, 32 << 10);
    let dst = node(&clock, 128);
    import_all(&dst.engine, &new);
    let once = dump(&dst.engine);
    import_all(&dst.engine, &new);
    assert_eq!(dump(&dst.engine), once, "the same chunks again");
    import_all(&dst.engine, &old);
    assert_eq!(dump(&dst.engine), once, "older chunks after newer");
    let src_rows: Vec<Row> = dump(&src.engine).into_iter().map(|r| r.row).collect();
    let dst_rows: Vec<Row> = once.into_iter().map(|r| r.row).collect();
    assert_eq!(dst_rows, src_rows);
}

#[test]
fn a_damaged_chunk_is_refused_and_nothing_of_it_applied() {
    let clock = clock();
    let src = node(&clock, 64);
    write_plain(&src.engine, 3, 10, 20);
    src.engine
        .delete_range(
            PartitionKey::new(T, b"p00001"),
            Bound::Unbounded,
            Bound::Unbounded,
            Deletion {
                timestamp_us: 5,
                deleted_at_s: NOW_S,
            },
        )
        .expect("partition delete");
    let chunk = src
        .engine
        .export_range(T, ScanFrom::Token(i64::MIN), i64::MAX, 1 << 20)
        .expect("export");
    assert_eq!((chunk.records, chunk.next), (4, None));
    let dst = node(&clock, 64);
    let refused = |bytes: &[u8], what: &str| {
        match dst.engine.import_chunk(bytes) {
            Err(ImportError::Decode { .. }) => {}
            other => panic!("{what}: {other:?}"),
        }
        assert_eq!(dst.engine.stats().records, 0, "{what}: something was applied");
    };
    for i in 0..chunk.bytes.len() {
        let mut damaged = chunk.bytes.clone();
        damaged[i] ^= 1 << (i % 8);
        refused(&damaged, &format!("bit flipped in byte {i}"));
    }
    for cut in 0..chunk.bytes.len() {
        refused(&chunk.bytes[..cut], &format!("cut at {cut}"));
    }
    let err = dst.engine.import_chunk(&chunk.bytes[..40]).expect_err("refused");
    assert!(err.to_string().contains("nothing of it applied"), "{err}");
    assert!(err.source().is_some());
    // The whole chunk still applies, and only to the table it names.
    let err = dst
        .engine
        .import_chunk_into(T + 1, &chunk.bytes)
        .expect_err("other table");
    assert!(matches!(err, ImportError::OtherTable { expected, found } if expected == T + 1 && found == T));
    assert_eq!(dst.engine.stats().records, 0);
    let stats = dst.engine.import_chunk_into(T, &chunk.bytes).expect("import");
    assert_eq!(stats.records, 4);
}

#[test]
fn a_chunk_on_a_full_device_fails_with_a_write_error() {
    let clock = clock();
    let src = node(&clock, 256);
    write_plain(&src.engine, 4_000, 10, 1_000);
    let chunk = src
        .engine
        .export_range(T, ScanFrom::Token(i64::MIN), i64::MAX, 64 << 20)
        .expect("export");
    assert_eq!(chunk.records, 4_000);
    // 16 blocks of 128 KiB hold about 2 000 such rows.
    let dst = node(&clock, 16);
    let err = dst
        .engine
        .import_chunk(&chunk.bytes)
        .expect_err("the device fills up");
    assert!(
        matches!(&err, ImportError::Write(WriteError::DeviceFull { .. })),
        "{err:?}"
    );
    assert!(err
        .source()
        .is_some_and(|s| s.to_string().contains("device full")));
    assert!(err.to_string().contains("send it again"), "{err}");
    let applied = dst.engine.stats().records;
    assert!(
        applied > 0 && applied < 4_000,
        "{applied} applied before the device filled"
    );
}

#[test]
fn remove_range_forgets_exactly_the_range_and_counts_its_space_dead() {
    let clock = clock();
    let src = rich_source(&clock);
    let e = &src.engine;
    let all = dump(e);
    // A range that holds the large row and the row with a delta.
    let (large, delta) = (token(b"large"), token(b"delta"));
    let (start, end) = (large.min(delta) - 1, large.max(delta));
    let size = e.range_size(T, start, end);
    let live_before = e.stats().live_bytes;
    let removed = e.remove_range(T, start, end);
    assert_eq!(removed as u64, size.records);
    assert_eq!(
        live_before - e.stats().live_bytes,
        size.bytes,
        "the range's bytes are dead"
    );
    assert!(e.get(key(b"large", b"")).expect("get").is_none());
    assert!(e.get(key(b"delta", b"")).expect("get").is_none());
    let left = dump(e);
    let in_range = |t: i64| start < t && t <= end;
    assert_eq!(
        left.len(),
        all.iter().filter(|r| !in_range(r.token)).count(),
        "everything outside the range stays"
    );
    assert!(left.iter().all(|r| !in_range(r.token)));
    assert_eq!(e.range_size(T, start, end).records, 0);
}

#[test]
fn range_size_agrees_with_what_export_sends() {
    let clock = clock();
    let src = rich_source(&clock);
    let e = &src.engine;
    let tokens = sorted_tokens(3_000);
    for (start, end) in [(i64::MIN, i64::MAX), (tokens[100], tokens[2_000]), (0, i64::MAX)] {
        let size = e.range_size(T, start, end);
        let chunks = export_all(e, start, end, 100 << 10);
        let records: u64 = chunks.iter().map(|c| c.records).sum();
        let bytes: u64 = chunks.iter().map(|c| c.data_bytes).sum();
        assert_eq!((records, bytes), (size.records, size.bytes), "({start}, {end}]");
    }
    // The whole ring holds the tombstones records, the large row's blocks and the delta.
    let whole = e.range_size(T, i64::MIN, i64::MAX);
    assert!(whole.bytes > 3 * BLOCK, "{whole:?}");
    let kinds: Vec<bool> = export_all(e, i64::MIN, i64::MAX, 1 << 20)
        .iter()
        .flat_map(|c| {
            decode_chunk(&c.bytes)
                .expect("decodes")
                .records
                .into_iter()
                .map(|r| matches!(r.contents, Contents::Tombstones(_)))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(kinds.iter().filter(|&&t| t).count(), 2, "two tombstones records");
}
