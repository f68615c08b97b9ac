//! A namespace that runs out of blocks: client writes stop with `DeviceFull` while reads keep
//! serving everything acknowledged; deletes still go through (a full device must be emptiable);
//! defragmentation turns their space into free blocks and writes work again; tombstones past
//! their grace period give their space back too; and nothing is damaged across reopens.

mod common;

use std::sync::Arc;

use hayate_storage::{Cell, Engine, ManualClock, NamespaceConfig, Row, RowKey, StatsSnapshot, WriteError};

const BLOCK_BYTES: u64 = 128 << 10;
const BLOCKS: u64 = 32;
const GRACE_S: u32 = 60;

fn config(dir: &std::path::Path) -> NamespaceConfig {
    let mut c = NamespaceConfig::with_file("full", dir, BLOCKS * BLOCK_BYTES);
    c.block_size_bytes = BLOCK_BYTES as u32;
    c.post_write_cache_bytes = 2 * BLOCK_BYTES;
    c.flush_interval_ms = 50;
    c.defrag_sleep_us = 0;
    c.tombstone_grace_s = GRACE_S;
    // Passes run when the test asks, so that what it sees is what it caused.
    c.expiry_period_ms = 3_600_000;
    c
}

fn key(k: u32) -> [u8; 4] {
    k.to_be_bytes()
}

fn value(k: u32, version: u32) -> Vec<u8> {
    let mut v = format!("key {k} version {version} ").into_bytes();
    v.resize(1_000, b'#');
    v
}

fn write(e: &Engine, k: u32, version: u32) -> Result<(), WriteError> {
    e.write(
        RowKey::new(1, &key(k), b""),
        Row {
            cells: vec![Cell::live(0, i64::from(version), value(k, version))],
            ..Row::default()
        },
    )
}

fn delete(e: &Engine, k: u32, version: u32) -> Result<(), WriteError> {
    e.delete(RowKey::new(1, &key(k), b""), i64::from(version))
}

/// Every key in `0..keys` reads back as `expected` says: `Some(version)` or absent.
fn check(e: &Engine, keys: u32, expected: impl Fn(u32) -> Option<u32>, when: &str) {
    for k in 0..keys {
        let got = e
            .get(RowKey::new(1, &key(k), b""))
            .unwrap_or_else(|err| panic!("{when}: key {k}: {err}"))
            .map(|r| r.cells[0].value_at(0).expect("live").to_vec());
        assert_eq!(
            got,
            expected(k).map(|v| value(k, v)),
            "{when}: key {k} (expected version {:?})",
            expected(k)
        );
    }
}

/// Writes keys from `from` at `version` until the device is full; returns the first key not
/// written.
fn fill(e: &Engine, from: u32, version: u32) -> u32 {
    let mut k = from;
    loop {
        match write(e, k, version) {
            Ok(()) => k += 1,
            Err(WriteError::DeviceFull { .. }) => return k,
            Err(err) => panic!("key {k}: {err}"),
        }
        assert!(k < from + 1_000_000, "the device never filled up");
    }
}

/// Runs expiry and defragmentation passes until `goal` holds; panics (with the stats) if it
/// does not within a bounded number of rounds. A freed block returns to the free list on the
/// flusher thread once what replaced its contents is durable, a little after `sync` returns, so
/// the rounds poll rather than count.
fn reclaim(e: &Engine, what: &str, goal: impl Fn(&StatsSnapshot) -> bool) -> StatsSnapshot {
    for _ in 0..2_000 {
        e.expire_now();
        e.defrag_now();
        e.sync().expect("sync");
        let stats = e.stats();
        if goal(&stats) {
            return stats;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    panic!("{what}: never reached; stats {:?}", e.stats());
}

#[test]
fn a_full_device_serves_reads_takes_deletes_and_recovers_its_space() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(1_700_000_000_000_000));
    let open = || Engine::open_with_clock(config(dir.path()), clock.clone()).expect("open");
    let e = open();

    // Fill the device with distinct keys.
    let n = fill(&e, 0, 1);
    assert!(n > 1_000, "only {n} keys fit");
    let stats = e.stats();
    // The stop-writes reserve, 5% of the blocks rounded up, is all that is left.
    assert!(
        stats.free_blocks <= (stats.total_blocks * 5).div_ceil(100),
        "writes stopped with {} of {} blocks free",
        stats.free_blocks,
        stats.total_blocks
    );
    check(&e, n, |_| Some(1), "full");
    assert!(
        matches!(write(&e, 0, 2), Err(WriteError::DeviceFull { .. })),
        "an overwrite needs space too"
    );

    // Regression: deletes failed with DeviceFull too, since a tombstone is a write, so a full
    // namespace could not be emptied by its users. Deletes may now use part of the reserve.
    // Defragmentation, which the deletes set off, may hold the rest of the reserve for a moment
    // (while it moves a block's records; a write waits for blocks it has already emptied), so a
    // delete may have to be retried, as a client would; what must not happen is that deletes
    // never get through.
    for k in (0..n).step_by(2) {
        let mut tries = 0;
        while let Err(err) = delete(&e, k, 2) {
            assert!(
                matches!(err, WriteError::DeviceFull { .. }) && tries < 1_000,
                "delete of key {k} on a full device, try {tries}: {err}"
            );
            tries += 1;
            e.sync().expect("sync");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    let deleted = |k: u32| k.is_multiple_of(2);
    check(&e, n, |k| (!deleted(k)).then_some(1), "after the deletes");

    // Defragmentation turns the deleted rows' space into free blocks; writes work again.
    reclaim(
        &e,
        "a third of the blocks free after deleting half the data",
        |s| s.free_blocks >= BLOCKS / 3,
    );
    for k in (1..n).step_by(2).take(200) {
        write(&e, k, 3).expect("overwrite after defragmentation");
    }
    let version = |k: u32| match k {
        _ if deleted(k) => None,
        _ if k < 400 => Some(3),
        _ => Some(1),
    };
    let m = n + 500;
    for k in n..m {
        write(&e, k, 1).expect("new key after defragmentation");
    }
    let expected = |k: u32| if k >= n { Some(1) } else { version(k) };
    check(&e, m, expected, "after writing again");

    // Nothing is damaged across a clean restart (snapshot) and an unclean one (scan).
    e.close().expect("close");
    let e = open();
    check(&e, m, expected, "after a clean restart");
    drop(e);
    let e = open();
    check(&e, m, expected, "after an unclean restart");
    let records_before = e.stats().records;

    // Delete everything, let the grace period pass: the tombstones go and their space with
    // them, so the device takes as much as at first. Regression: the expiry pass kept the
    // tombstone of every overwritten row forever (its "older versions gone" test compared
    // block sequences with `>`, which the entry's own block always fails), so none went.
    for k in 0..m {
        delete(&e, k, 4).expect("delete all");
    }
    clock.advance_s(GRACE_S + 1);
    reclaim(
        &e,
        &format!("every tombstone ({records_before} rows) dropped and all but two blocks free"),
        |s| s.records == 0 && s.free_blocks + 2 >= BLOCKS,
    );
    // Newer timestamps than the tombstones: a tombstone record can outlive its index entry on
    // the device, and a cold start would let it shadow older writes again.
    let refill = fill(&e, 0, 5);
    assert!(
        u64::from(refill) * 10 >= u64::from(n) * 9,
        "the emptied device took {refill} keys, the new one {n}"
    );
    check(&e, refill, |_| Some(5), "refilled");
    drop(e);
    let e = open();
    check(&e, refill, |_| Some(5), "refilled, after an unclean restart");
}
