//! Updates written without reading the row (`deltas.rs`): an update that only sets cells of a
//! row on the device costs no device read; the read after it costs one and folds the row; a
//! deletion, a TTL or a full buffer reads the row as before; the deltas survive a clean restart
//! (the index snapshot) and a crash (the scan); defragmentation folds a row whose whole version
//! it moves.

mod common;

use std::sync::Arc;

use common::{column, device_config, key, open_on, row, value, FaultyDevice};
use hayate_storage::{Cell, Engine, ManualClock, NamespaceConfig, Row};

const ROWS: u32 = 2_000;
const BLOCK: u64 = 128 << 10;

fn name(k: u32) -> Vec<u8> {
    format!("row-{k:05}").into_bytes()
}

/// A row with column 0 and column 1 set, at `ts`.
fn two_cells(ts: i64, v: &[u8]) -> Row {
    Row {
        cells: vec![Cell::live(0, ts, v.to_vec()), Cell::live(1, ts, b"one".to_vec())],
        ..Row::default()
    }
}

/// `ROWS` rows written whole, then the engine reopened from its snapshot, so that nothing is in
/// the post-write cache and every row is on the device.
fn loaded(config: &NamespaceConfig, device: &Arc<FaultyDevice>, clock: &Arc<ManualClock>) -> Engine {
    let e = open_on(config, device, clock);
    for k in 0..ROWS {
        e.write(key(&name(k)), two_cells(10, &vec![b'a'; 300]))
            .expect("write");
    }
    e.close().expect("close");
    open_on(config, device, clock)
}

fn setup(
    delta_buffer_bytes: u64,
) -> (
    tempfile::TempDir,
    NamespaceConfig,
    Arc<FaultyDevice>,
    Arc<ManualClock>,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = device_config(Some(dir.path().join("deltas.index")));
    config.delta_buffer_bytes = delta_buffer_bytes;
    let device = Arc::new(FaultyDevice::new(256 * BLOCK));
    let clock = Arc::new(ManualClock::new(1_700_000_000_000_000));
    (dir, config, device, clock)
}

#[test]
fn an_update_that_only_sets_cells_reads_nothing_and_the_next_read_folds_the_row() {
    let (_dir, config, device, clock) = setup(64 << 20);
    let e = loaded(&config, &device, &clock);
    let before = e.stats();
    for k in 0..100 {
        e.write(key(&name(k)), row(20, b"new")).expect("update");
    }
    let after = e.stats();
    assert_eq!(
        after.device_reads, before.device_reads,
        "a blind update reads nothing"
    );
    assert_eq!(after.blind_writes - before.blind_writes, 100);
    assert_eq!(after.deltas, 100);
    assert!(after.delta_bytes > 0);

    // The read: the whole version from the device, the delta from RAM, merged.
    let k = name(7);
    assert_eq!(
        value(&e, &k).as_deref(),
        Some(&b"new"[..]),
        "the delta's cell wins"
    );
    assert_eq!(
        column(&e, &k, 1).as_deref(),
        Some(&b"one"[..]),
        "the base's other cell stays"
    );
    let read = e.stats();
    assert_eq!(
        read.device_reads - after.device_reads,
        1,
        "one device read for the read"
    );
    assert_eq!(read.delta_folds - after.delta_folds, 1, "the read folded the row");
    assert_eq!(read.deltas, 99);
    // Folded: the row is whole again in the open block, so the next read needs no device.
    assert_eq!(value(&e, &k).as_deref(), Some(&b"new"[..]));
    assert_eq!(e.stats().device_reads, read.device_reads);

    // A second update of a row with a delta merges into it, still without a read.
    let k = name(8);
    e.write(
        key(&k),
        Row {
            cells: vec![Cell::live(2, 30, b"two".to_vec())],
            ..Row::default()
        },
    )
    .expect("second update");
    assert_eq!(e.stats().device_reads, read.device_reads);
    assert_eq!(e.stats().deltas, 99, "still one delta for the row");
    assert_eq!(value(&e, &k).as_deref(), Some(&b"new"[..]));
    assert_eq!(column(&e, &k, 2).as_deref(), Some(&b"two"[..]));

    // An older timestamp loses to the base, as any write would.
    let k = name(9);
    e.write(key(&k), row(5, b"stale")).expect("older update");
    assert_eq!(value(&e, &k).as_deref(), Some(&b"new"[..]));
}

#[test]
fn deletions_ttls_and_a_full_buffer_read_the_row_first() {
    let (_dir, config, device, clock) = setup(4 << 10);
    let e = loaded(&config, &device, &clock);
    let reads = |e: &Engine| e.stats().device_reads;

    let r0 = reads(&e);
    e.write(
        key(&name(1)),
        Row {
            cells: vec![Cell::tombstone(1, 20, 1_700_000_000)],
            ..Row::default()
        },
    )
    .expect("cell deletion");
    assert_eq!(reads(&e) - r0, 1, "a deletion reads the row");
    assert_eq!(column(&e, &name(1), 1), None);

    let r1 = reads(&e);
    e.write(
        key(&name(2)),
        Row {
            cells: vec![Cell::expiring(0, 20, b"ttl".to_vec(), 60, 1_700_000_000)],
            ..Row::default()
        },
    )
    .expect("update with a TTL");
    assert_eq!(reads(&e) - r1, 1, "an update with a TTL reads the row");

    // A 4 KiB buffer holds a few deltas; the updates after them read their rows.
    let r2 = reads(&e);
    for k in 10..60 {
        e.write(key(&name(k)), row(20, &[b'b'; 200])).expect("update");
    }
    let s = e.stats();
    assert!(
        s.blind_writes > 0 && s.blind_writes < 50,
        "{} blind writes",
        s.blind_writes
    );
    assert!(
        s.delta_bytes <= 4 << 10,
        "the buffer keeps to its size: {}",
        s.delta_bytes
    );
    assert_eq!(reads(&e) - r2, 50 - s.blind_writes, "the rest read their row");
    for k in 10..60 {
        assert_eq!(value(&e, &name(k)), Some(vec![b'b'; 200]), "row {k}");
    }

    // Off, every update reads its row.
    drop(e);
    let config = NamespaceConfig {
        delta_buffer_bytes: 0,
        ..config
    };
    let e = open_on(&config, &device, &clock);
    let r3 = reads(&e);
    e.write(key(&name(100)), row(30, b"read first")).expect("update");
    assert_eq!(reads(&e) - r3, 1);
    assert_eq!(e.stats().blind_writes, 0);
}

#[test]
fn deltas_survive_a_clean_restart_and_a_crash() {
    let (_dir, config, device, clock) = setup(64 << 20);
    let e = loaded(&config, &device, &clock);
    for k in 0..ROWS {
        if k % 3 == 0 {
            e.write(key(&name(k)), row(20, b"delta")).expect("update");
        }
    }
    let pending = e.stats().deltas;
    assert_eq!(pending, u64::from(ROWS.div_ceil(3)));

    // Clean: the snapshot carries the deltas.
    e.close().expect("close");
    let e = open_on(&config, &device, &clock);
    assert_eq!(e.stats().deltas, pending, "the snapshot kept every delta");
    let check = |e: &Engine| {
        for k in (0..ROWS).step_by(7) {
            let want: &[u8] = if k % 3 == 0 { b"delta" } else { &[b'a'; 300] };
            assert_eq!(value(e, &name(k)).as_deref(), Some(want), "row {k}");
            assert_eq!(column(e, &name(k), 1).as_deref(), Some(&b"one"[..]), "row {k}");
        }
    };
    check(&e);

    // A crash after a sync: the scan finds the newest delta of each row that is newer than
    // its whole version (the reads above folded some rows; they come back whole).
    e.sync().expect("sync");
    let survivor = Arc::new(device.crash(common::Crash::LoseUnsynced));
    drop(e);
    let e = open_on(&config, &survivor, &clock);
    let found = e.stats().deltas;
    assert!(found > 0 && found <= pending, "{found} deltas found by the scan");
    check(&e);
}

#[test]
fn defragmentation_folds_the_rows_whose_whole_version_it_moves() {
    let (_dir, mut config, device, clock) = setup(64 << 20);
    config.defrag_lwm_pct = 60;
    let e = loaded(&config, &device, &clock);
    // Every row gets a delta; then two rows in three are deleted (a deletion reads the row and
    // writes a tombstone), so the blocks holding the loaded rows fall below the low-water mark.
    for k in 0..ROWS {
        e.write(key(&name(k)), row(20, b"delta")).expect("update");
    }
    let before = e.stats();
    let mut deleted = 0;
    for k in 0..ROWS {
        if k % 3 != 0 {
            e.write(key(&name(k)), Row::deleted(15, 1_700_000_000))
                .expect("delete");
            deleted += 1;
        }
    }
    // The background defragmenter may get there first: the counters tell, not the return.
    e.defrag_now();
    let after = e.stats();
    assert!(
        after.defrag_blocks > before.defrag_blocks,
        "defragmentation freed nothing"
    );
    // Each deletion folds its row's delta too; the rows left folded only if defragmentation
    // folded them.
    assert!(
        after.delta_folds > before.delta_folds + deleted,
        "defragmentation moved whole versions with deltas without folding them"
    );
    assert!(after.deltas < before.deltas - deleted);
    for k in (0..ROWS).step_by(3) {
        assert_eq!(value(&e, &name(k)).as_deref(), Some(&b"delta"[..]), "row {k}");
        assert_eq!(column(&e, &name(k), 1).as_deref(), Some(&b"one"[..]), "row {k}");
    }
    e.close().expect("close");
    let e = open_on(&config, &device, &clock);
    for k in (0..ROWS).step_by(3) {
        assert_eq!(
            value(&e, &name(k)).as_deref(),
            Some(&b"delta"[..]),
            "row {k} after reopening"
        );
    }
}

#[test]
fn a_row_that_would_not_fit_a_block_once_folded_is_read_and_written_whole() {
    let (_dir, config, device, clock) = setup(64 << 20);
    let e = loaded(&config, &device, &clock);
    // Close to a whole 128 KiB block, on the device.
    let big = key(b"big");
    e.write(big, row(10, &vec![b'x'; 120 << 10])).expect("large row");
    e.close().expect("close");
    let e = open_on(&config, &device, &clock);
    let before = e.stats();
    let update = Row {
        cells: vec![Cell::live(1, 20, vec![b'y'; 12 << 10])],
        ..Row::default()
    };
    e.write(big, update).expect("update");
    let after = e.stats();
    assert_eq!(
        after.blind_writes, before.blind_writes,
        "the row and its delta would not fit a block"
    );
    assert_eq!(
        after.device_reads - before.device_reads,
        1,
        "the update read the row"
    );
    assert_eq!(column(&e, b"big", 1), Some(vec![b'y'; 12 << 10]));
}
