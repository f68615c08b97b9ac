//! Rows larger than a write block: written in chunk blocks of their own under a head record
//! (`format/chunks.rs`), read back whole, freed with their row, and found again by both kinds
//! of restart and after a power failure.

mod common;

use std::sync::Arc;

use common::{key, value, Crash, FaultyDevice, Rng};
use hayate_storage::{Cell, Engine, ManualClock, NamespaceConfig, ReadError, Row, WriteError, ROW_MAX_BYTES};

const T: u32 = common::TABLE;
const BLOCK: usize = 128 << 10;

fn config(dir: &std::path::Path) -> NamespaceConfig {
    let mut c = NamespaceConfig::with_file("test", dir, 64 << 20);
    c.block_size_bytes = BLOCK as u32;
    c.post_write_cache_bytes = 1 << 20;
    c.flush_interval_ms = 50;
    c.defrag_sleep_us = 0;
    c
}

fn row(ts: i64, v: Vec<u8>) -> Row {
    Row {
        cells: vec![Cell::live(0, ts, v)],
        ..Row::default()
    }
}

fn used_blocks(e: &Engine) -> u64 {
    e.sync().expect("sync");
    let s = e.stats();
    s.total_blocks - s.free_blocks
}

/// Blocks in use, once it reaches `want` or 30 s have passed: replaced chunk blocks are freed
/// by the flusher just after the sync that makes their replacement durable (10 s was not
/// always enough with both cores busy).
fn settled_used_blocks(e: &Engine, want: u64) -> u64 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let used = used_blocks(e);
        if used == want || std::time::Instant::now() > deadline {
            return used;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn rows_larger_than_a_block_read_back_across_both_kinds_of_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = Rng::new(1);
    // Smaller than a block, just over one, and many blocks (16 chunks at 128 KiB).
    let values: Vec<Vec<u8>> = [1_000, BLOCK + 1, 2 << 20, 5 << 20]
        .iter()
        .map(|&n| rng.bytes(n))
        .collect();
    {
        let e = Engine::open(config(dir.path())).expect("open");
        for (i, v) in values.iter().enumerate() {
            e.write(key(&[i as u8]), row(10, v.clone())).expect("write");
        }
        for (i, v) in values.iter().enumerate() {
            assert_eq!(value(&e, &[i as u8]).as_ref(), Some(v), "row {i} before restart");
        }
        e.close().expect("close");
    }
    {
        let e = Engine::open(config(dir.path())).expect("reopen from snapshot");
        for (i, v) in values.iter().enumerate() {
            assert_eq!(
                value(&e, &[i as u8]).as_ref(),
                Some(v),
                "row {i} after a clean restart"
            );
        }
        // One more version of the largest, then an unclean stop: the next open scans.
        e.write(key(&[3]), row(20, values[2].clone())).expect("rewrite");
        e.sync().expect("sync");
        drop(e);
    }
    let e = Engine::open(config(dir.path())).expect("reopen by scan");
    for (i, v) in values.iter().enumerate() {
        let want = if i == 3 { &values[2] } else { v };
        assert_eq!(value(&e, &[i as u8]).as_ref(), Some(want), "row {i} after a scan");
    }
    assert_eq!(e.stats().records, values.len() as u64);
    assert_eq!(e.stats().read_errors, 0);
}

#[test]
fn rewriting_deleting_or_dropping_a_chunked_row_frees_its_blocks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(config(dir.path())).expect("open");
    e.write(key(b"small"), row(1, vec![1; 100])).expect("write");
    let base = used_blocks(&e);
    let big = vec![9u8; 3 << 20];
    // 3 MiB in 128 KiB blocks less their header: 25 chunk blocks.
    let chunks = (3u64 << 20).div_ceil(BLOCK as u64 - 64);

    e.write(key(b"big"), row(1, big.clone())).expect("write");
    assert_eq!(settled_used_blocks(&e, base + chunks), base + chunks);
    // A new version takes new blocks and gives the old ones back.
    e.write(key(b"big"), row(2, big.clone())).expect("rewrite");
    assert_eq!(settled_used_blocks(&e, base + chunks), base + chunks);
    assert_eq!(value(&e, b"big"), Some(big.clone()));
    // Shrunk to a row that fits in a record.
    e.write(key(b"big"), row(3, vec![1; 10])).expect("shrink");
    assert_eq!(settled_used_blocks(&e, base), base);
    // Grown again, then deleted.
    e.write(key(b"big"), row(4, big.clone())).expect("grow");
    assert_eq!(settled_used_blocks(&e, base + chunks), base + chunks);
    e.delete(key(b"big"), 5).expect("delete");
    assert_eq!(settled_used_blocks(&e, base), base);
    assert_eq!(value(&e, b"big"), None);
    // A dropped table's chunked rows go with it.
    e.write(key(b"big"), row(6, big)).expect("write again");
    assert_eq!(settled_used_blocks(&e, base + chunks), base + chunks);
    e.drop_table(T);
    assert_eq!(settled_used_blocks(&e, base), base);
}

#[test]
fn a_chunked_row_outlives_its_ttl_only_until_expiry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(1_000_000_000));
    let mut c = config(dir.path());
    c.tombstone_grace_s = 0;
    let e = Engine::open_with_clock(c, Arc::clone(&clock) as _).expect("open");
    e.write(key(b"small"), row(1, vec![1; 100])).expect("write");
    let base = used_blocks(&e);
    let expiring = Row {
        cells: vec![Cell::expiring(0, 1, vec![3; 1 << 20], 10, 1_000)],
        ..Row::default()
    };
    e.write(key(b"big"), expiring).expect("write");
    assert!(used_blocks(&e) > base);
    clock.set_us(1_100_000_000);
    assert_eq!(value(&e, b"big"), None);
    e.expire_now();
    e.expire_now();
    assert_eq!(settled_used_blocks(&e, base), base);
}

#[test]
fn defragmentation_leaves_chunk_blocks_alone_and_moves_heads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(config(dir.path())).expect("open");
    let big = Rng::new(7).bytes(1 << 20);
    e.write(key(b"big"), row(1, big.clone())).expect("write");
    // Churn small rows around the head so that its block empties and is defragmented.
    for round in 0..4i64 {
        for i in 0..2_000u32 {
            e.write(key(&i.to_be_bytes()), row(round, vec![round as u8; 200]))
                .expect("write");
        }
        e.sync().expect("sync");
        e.defrag_now();
    }
    assert!(e.stats().defrag_blocks > 0, "the churn made defragmentation run");
    assert_eq!(value(&e, b"big"), Some(big.clone()));
    e.sync().expect("sync");
    drop(e);
    let e = Engine::open(config(dir.path())).expect("reopen by scan");
    assert_eq!(value(&e, b"big"), Some(big));
}

#[test]
fn a_row_over_the_limit_is_refused_and_takes_no_space() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = NamespaceConfig::with_file("test", dir.path(), 128 << 20);
    c.block_size_bytes = 1 << 20;
    let e = Engine::open(c).expect("open");
    let before = used_blocks(&e);
    match e.write(key(b"huge"), row(1, vec![0; ROW_MAX_BYTES])) {
        Err(WriteError::RecordTooLarge { max_bytes, .. }) => assert_eq!(max_bytes, ROW_MAX_BYTES),
        other => panic!("expected RecordTooLarge, got {other:?}"),
    }
    assert_eq!(settled_used_blocks(&e, before), before);
    // Just under the limit is taken.
    e.write(key(b"large"), row(1, vec![5; ROW_MAX_BYTES - 4096]))
        .expect("a row under the limit");
    assert_eq!(value(&e, b"large").map(|v| v.len()), Some(ROW_MAX_BYTES - 4096));
}

/// A write that runs out of free blocks midway leaves nothing behind and the engine serving.
#[test]
fn a_chunked_write_that_finds_the_device_full_gives_its_blocks_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = NamespaceConfig::with_file("test", dir.path(), 4 << 20);
    c.block_size_bytes = BLOCK as u32;
    let e = Engine::open(c).expect("open");
    let before = used_blocks(&e);
    match e.write(key(b"big"), row(1, vec![1; 8 << 20])) {
        Err(WriteError::DeviceFull { .. }) => {}
        other => panic!("expected DeviceFull, got {other:?}"),
    }
    assert_eq!(settled_used_blocks(&e, before), before);
    e.write(key(b"small"), row(1, vec![2; 1 << 20]))
        .expect("a row that fits");
    assert_eq!(value(&e, b"small"), Some(vec![2; 1 << 20]));
}

/// A chunk block damaged on the device is reported as corruption of that row; other rows read on.
#[test]
fn a_damaged_chunk_fails_its_row_only() {
    let device = Arc::new(FaultyDevice::new(16 << 20));
    let clock = Arc::new(ManualClock::new(1_000));
    let mut c = common::device_config(None);
    // Nothing cached: the chunks are read from the device.
    c.post_write_cache_bytes = 0;
    let e = common::open_on(&c, &device, &clock);
    e.write(key(b"big"), row(1, vec![4; 600 << 10])).expect("write");
    e.write(key(b"small"), row(1, vec![5; 100])).expect("write");
    e.sync().expect("sync");
    // Flip a byte in every chunk block's data area (blocks whose header has the chunk flag).
    let image = device.durable_image();
    let mut flipped = 0;
    for b in 0..image.len() / BLOCK {
        let at = b * BLOCK;
        let h = hayate_storage::format::block::BlockHeader::decode(&image[at..at + 64]);
        if matches!(h, Ok(h) if h.chunk && !h.free) {
            use hayate_storage::device::Device;
            let mut sector = hayate_storage::device::AlignedBuf::zeroed(4096);
            device.read_at(&mut sector, at as u64).expect("read");
            sector[1000] ^= 0xff;
            device.write_at(&sector, at as u64).expect("write");
            flipped += 1;
        }
    }
    assert_eq!(flipped, 5, "600 KiB takes five 128 KiB chunk blocks");
    match e.get(key(b"big")) {
        Err(ReadError::Corrupt { .. }) => {}
        other => panic!("expected a corrupt read, got {other:?}"),
    }
    assert_eq!(value(&e, b"small"), Some(vec![5; 100]));
}

/// After a power failure, a chunked row is whole at its last synced version: chunk blocks of a
/// version whose head never became durable are freed, never half-read.
#[test]
fn a_power_failure_keeps_the_last_synced_version_whole() {
    for seed in common::seeds(&[1, 2, 3, 4]) {
        let device = Arc::new(FaultyDevice::new(32 << 20));
        let clock = Arc::new(ManualClock::new(1_000));
        let c = common::device_config(None);
        let mut rng = Rng::new(seed);
        let synced = rng.bytes(700 << 10);
        let e = common::open_on(&c, &device, &clock);
        e.write(key(b"big"), row(1, synced.clone())).expect("write");
        e.sync().expect("sync");
        // Later versions, never synced: their chunk blocks are synced (they always are before
        // the head is appended), their heads are not.
        for ts in 2..5 {
            e.write(key(b"big"), row(ts, rng.bytes(500 << 10)))
                .expect("rewrite");
        }
        let crash = match seed % 3 {
            0 => Crash::LoseUnsynced,
            1 => Crash::TornTail(seed),
            _ => Crash::Scrambled(seed),
        };
        let after = Arc::new(device.crash(crash));
        drop(e); // it runs on the old device: nothing more reaches `after`
        let e = common::open_on(&c, &after, &clock);
        assert_eq!(value(&e, b"big").as_ref(), Some(&synced), "seed {seed}");
        // The synced version's six chunk blocks and the block of its head, nothing more (the
        // defragmenter may be moving the head to a block of its own meanwhile).
        assert_eq!(settled_used_blocks(&e, 7), 7, "seed {seed}: blocks in use");
        assert_eq!(
            value(&e, b"big"),
            Some(synced),
            "seed {seed}, after defragmentation"
        );
    }
}

/// A RAM-only namespace has no device to read chunks back from: they stay in RAM with the rest.
#[test]
fn a_ram_only_namespace_keeps_chunked_rows() {
    let mut c = NamespaceConfig::in_memory("ram", 16 << 20);
    c.block_size_bytes = BLOCK as u32;
    let e = Engine::open(c).expect("open");
    let big = Rng::new(3).bytes(1 << 20);
    e.write(key(b"big"), row(1, big.clone())).expect("write");
    assert_eq!(value(&e, b"big"), Some(big.clone()));
    e.write(key(b"big"), row(2, big[..300_000].to_vec()))
        .expect("rewrite");
    assert_eq!(value(&e, b"big"), Some(big[..300_000].to_vec()));
    assert_eq!(e.stats().read_errors, 0);
}

/// A data-in-memory namespace with a device finds its chunked rows in RAM after a scan.
#[test]
fn data_in_memory_reads_chunks_from_ram_after_a_scan() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config(dir.path());
    c.data_in_memory = true;
    let big = Rng::new(5).bytes(700 << 10);
    {
        let e = Engine::open(c.clone()).expect("open");
        e.write(key(b"big"), row(1, big.clone())).expect("write");
        e.sync().expect("sync");
        drop(e); // no snapshot: the next open scans
    }
    let e = Engine::open(c).expect("reopen by scan");
    let reads = e.stats().device_reads;
    assert_eq!(value(&e, b"big"), Some(big));
    assert_eq!(
        e.stats().device_reads,
        reads,
        "no device read for a data-in-memory row"
    );
}
