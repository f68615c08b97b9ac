//! Damage to a device file and to the index snapshot, and what the engine does about it: it opens,
//! it says where the damage is, it serves every row the damage did not touch, and it never serves
//! a damaged row as data (a read of one is `ReadError::Corrupt`).

mod common;

use std::fs::OpenOptions;
use std::ops::Bound;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use common::{capture_logs, Rng};
use hayate_storage::format::block::{BlockHeader, BLOCK_HEADER_BYTES};
use hayate_storage::format::record::{decode_record, RECORD_ALIGN_BYTES};
use hayate_storage::{
    Cell, Engine, NamespaceConfig, PartitionKey, ReadError, Row, RowKey, ScanFrom, WriteError,
};

const BLOCK_BYTES: usize = 128 << 10;
const BLOCKS: usize = 32;
const KEYS: u32 = 1_500;

fn config(dir: &Path) -> NamespaceConfig {
    let mut c = NamespaceConfig::with_file("damaged", dir, (BLOCKS * BLOCK_BYTES) as u64);
    c.block_size_bytes = BLOCK_BYTES as u32;
    c.post_write_cache_bytes = 2 * BLOCK_BYTES as u64;
    c.flush_interval_ms = 50;
    // Records stay where the test found them: nothing is below this low-water mark.
    c.defrag_lwm_pct = 1;
    c
}

fn device_path(dir: &Path) -> PathBuf {
    dir.join("damaged.dat")
}

fn snapshot_path(dir: &Path) -> PathBuf {
    dir.join("damaged.index")
}

fn key(k: u32) -> [u8; 4] {
    k.to_be_bytes()
}

fn row_key(k: &[u8; 4]) -> RowKey<'_> {
    RowKey::new(1, k, b"")
}

fn value(k: u32, version: u32) -> Vec<u8> {
    let mut v = format!("key {k} version {version} ").into_bytes();
    v.resize(200 + (k % 5) as usize * 40, b'=');
    v
}

fn write(e: &Engine, k: u32, version: u32) {
    e.write(
        row_key(&key(k)),
        Row {
            cells: vec![Cell::live(0, i64::from(version), value(k, version))],
            ..Row::default()
        },
    )
    .expect("write");
}

/// The version a key reads back as, checking that its value is the one written.
fn read(e: &Engine, k: u32) -> Result<Option<u32>, ReadError> {
    Ok(e.get(row_key(&key(k)))?.map(|r| {
        let c = &r.cells[0];
        let version = c.timestamp_us as u32;
        assert_eq!(
            c.value_at(0),
            Some(&value(k, version)[..]),
            "key {k} reads back a value it was never given"
        );
        version
    }))
}

/// One record as it sits in the device file.
#[derive(Clone, Copy, Debug)]
struct Placed {
    key: u32,
    /// Byte offset of the record in the file.
    at: usize,
    len: usize,
}

/// The blocks holding data, in block order, with their records, read with the crate's own
/// decoders.
fn layout(path: &Path) -> Vec<(usize, Vec<Placed>)> {
    let bytes = std::fs::read(path).expect("read the device file");
    let mut blocks = Vec::new();
    for (b, block) in bytes.chunks(BLOCK_BYTES).enumerate() {
        let Ok(h) = BlockHeader::decode(block) else {
            continue;
        };
        assert_eq!(h.block_index as usize, b);
        let mut records = Vec::new();
        let mut off = BLOCK_HEADER_BYTES;
        while off + RECORD_ALIGN_BYTES <= block.len() && block[off..off + RECORD_ALIGN_BYTES] != [0; 16] {
            let view = decode_record(&block[off..], h.sequence).expect("an undamaged block");
            let mut k = [0u8; 4];
            k.copy_from_slice(view.partition_key);
            records.push(Placed {
                key: u32::from_be_bytes(k),
                at: b * BLOCK_BYTES + off,
                len: view.record_bytes,
            });
            off += view.record_bytes;
        }
        blocks.push((b, records));
    }
    blocks
}

fn write_at(path: &Path, at: usize, bytes: &[u8]) {
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open the device file");
    f.write_all_at(bytes, at as u64).expect("damage the device file");
    // Direct reads of the engine see it: the kernel writes dirty pages back before them.
    f.sync_all().expect("sync the device file");
}

fn flip(path: &Path, at: usize) {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open the device file");
    let mut b = [0u8];
    f.read_exact_at(&mut b, at as u64).expect("read a byte");
    b[0] ^= 0x5a;
    f.write_all_at(&b, at as u64).expect("flip a byte");
    f.sync_all().expect("sync the device file");
}

/// Writes keys `0..KEYS` once each and closes cleanly.
fn populate(dir: &Path) {
    let e = Engine::open(config(dir)).expect("open");
    for k in 0..KEYS {
        write(&e, k, 1);
    }
    e.close().expect("close");
}

#[test]
fn damage_found_at_cold_start_is_skipped_and_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    populate(dir.path());
    std::fs::remove_file(snapshot_path(dir.path())).expect("no snapshot: the open must scan");
    let dev = device_path(dir.path());
    let blocks = layout(&dev);
    assert!(blocks.len() >= 4, "the data spans only {} blocks", blocks.len());
    let mut rng = Rng::new(99);

    // (a) A record in the middle of a block: it ends the walk of its block.
    let a = &blocks[0].1;
    let hit = a.len() / 2;
    flip(&dev, a[hit].at + 60);
    // (b) A block header: the whole block is skipped.
    let b = &blocks[1].1;
    flip(&dev, blocks[1].0 * BLOCK_BYTES + 9);
    // (c) A torn write: the tail of a block, from a sector boundary in its middle, never landed.
    let c = &blocks[2].1;
    let cut = blocks[2].0 * BLOCK_BYTES + BLOCK_BYTES / 2;
    write_at(&dev, cut, &vec![0u8; BLOCK_BYTES / 2]);
    // (d) Free blocks holding garbage: random bytes, a header with a bad checksum, and a valid
    // copy of another block's header and records.
    let free: Vec<usize> = (blocks.last().expect("blocks").0 + 2..BLOCKS).collect();
    write_at(&dev, free[0] * BLOCK_BYTES, &rng.bytes(BLOCK_BYTES));
    let mut bad_header = rng.bytes(BLOCK_BYTES);
    bad_header[..4].copy_from_slice(b"HYWB");
    bad_header[4..6].copy_from_slice(&1u16.to_le_bytes());
    write_at(&dev, free[1] * BLOCK_BYTES, &bad_header);
    let copy = std::fs::read(&dev).expect("read")[blocks[3].0 * BLOCK_BYTES..][..BLOCK_BYTES].to_vec();
    write_at(&dev, free[2] * BLOCK_BYTES, &copy);

    let (e, logs) =
        capture_logs(|| Engine::open(config(dir.path())).expect("the engine opens despite the damage"));
    let log = logs.lines().join("\n");
    assert!(
        logs.count("does not verify") >= 1,
        "the damaged record is not reported:\n{log}"
    );
    assert!(
        logs.count("damaged header") >= 2,
        "the damaged headers are not reported:\n{log}"
    );
    assert!(
        logs.count("header belongs to block") >= 1,
        "the misplaced block copy is not reported:\n{log}"
    );
    assert!(
        logs.count("cold start: reading the") == 1 && logs.count("cold start read the") == 1,
        "the cold start does not say what it reads and what it found:\n{log}"
    );

    let in_block = |records: &[Placed], k: u32| records.iter().position(|p| p.key == k);
    for k in 0..KEYS {
        let got = read(&e, k).unwrap_or_else(|err| panic!("key {k}: {err}"));
        let must_be_present = if let Some(i) = in_block(a, k) {
            if i == hit {
                assert_eq!(got, None, "key {k}: its record was damaged");
            }
            i < hit
        } else if in_block(b, k).is_some() {
            assert_eq!(got, None, "key {k}: its block's header was damaged");
            false
        } else if let Some(i) = in_block(c, k) {
            let p = c[i];
            if p.at + p.len > cut {
                assert_eq!(got, None, "key {k}: its record was cut off");
            }
            p.at + p.len <= cut
        } else {
            true
        };
        if must_be_present {
            assert_eq!(got, Some(1), "key {k}: untouched by the damage but missing");
        }
    }

    // The damaged and garbage blocks are reused safely: write everything again, then scan.
    for k in 0..KEYS {
        write(&e, k, 2);
    }
    drop(e);
    let e = Engine::open(config(dir.path())).expect("reopen");
    for k in 0..KEYS {
        assert_eq!(read(&e, k).expect("read"), Some(2), "key {k} after rewriting");
    }
}

/// Regression: `NamespaceConfig::with_file` inherited `data_in_memory = true`, so a file
/// namespace served every read from RAM and never noticed damage on the device; this test read
/// the flipped record back as good data.
#[test]
fn a_record_damaged_after_open_reads_as_corrupt_never_as_wrong_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    populate(dir.path());
    let dev = device_path(dir.path());
    let blocks = layout(&dev);
    // Opened from the snapshot: the post-write cache is empty, so every read goes to the device.
    // Updates read their row here (no deltas), so that the update below meets the damage; an
    // update written as a delta over a damaged row is `deltas.rs`'s test.
    let e = Engine::open(NamespaceConfig {
        delta_buffer_bytes: 0,
        ..config(dir.path())
    })
    .expect("open");
    let records: Vec<Placed> = blocks.iter().flat_map(|(_, r)| r.iter().copied()).collect();
    // Every field of the record header, the key, the body and the padding.
    let positions = [0, 2, 3, 5, 9, 13, 17, 27, 33, 41, 45, 47, 49, 52, 60, usize::MAX];
    for (i, &pos) in positions.iter().enumerate() {
        let victim = records[(i * 97 + 13) % records.len()];
        let at = victim.at + pos.min(victim.len - 1);
        flip(&dev, at);
        let k = victim.key;
        match read(&e, k) {
            Err(ReadError::Corrupt { block, .. }) => {
                assert_eq!(
                    block as usize,
                    victim.at / BLOCK_BYTES,
                    "key {k}: the error names the block"
                );
            }
            other => panic!("key {k}, byte {pos} of its record flipped: read gave {other:?}"),
        }
        assert!(
            matches!(
                e.write(
                    row_key(&key(k)),
                    Row {
                        cells: vec![Cell::live(1, 9, b"x".to_vec())],
                        ..Row::default()
                    }
                ),
                Err(WriteError::Read(ReadError::Corrupt { .. }))
            ),
            "key {k}: an update must not merge into nothing over a damaged row"
        );
        assert!(
            e.scan(1, ScanFrom::Token(i64::MIN), i64::MAX, usize::MAX)
                .is_err(),
            "a scan over the damaged row fails rather than skipping it"
        );
        assert!(
            e.read_partition(
                PartitionKey::new(1, &key(k)),
                Bound::Unbounded,
                Bound::Unbounded,
                false,
                10
            )
            .is_err(),
            "a partition read of the damaged row fails"
        );
        // Its neighbours, in the same block, still read.
        for other in records
            .iter()
            .filter(|p| p.key != k && p.at / BLOCK_BYTES == victim.at / BLOCK_BYTES)
        {
            assert_eq!(read(&e, other.key).expect("neighbour"), Some(1));
        }
        // Undo the damage: the row reads again (nothing remembered the failure).
        flip(&dev, at);
        assert_eq!(
            read(&e, k).expect("repaired"),
            Some(1),
            "key {k} after undoing the damage"
        );
    }
    assert!(e.stats().read_errors > 0);
}

#[test]
fn a_damaged_or_cut_snapshot_is_not_used() {
    for damage in ["flip", "truncate"] {
        let dir = tempfile::tempdir().expect("tempdir");
        populate(dir.path());
        let snap = snapshot_path(dir.path());
        let len = std::fs::metadata(&snap).expect("snapshot").len() as usize;
        match damage {
            "flip" => flip(&snap, len / 2),
            _ => OpenOptions::new()
                .write(true)
                .open(&snap)
                .expect("open the snapshot")
                .set_len((len / 3) as u64)
                .expect("truncate the snapshot"),
        }
        let (e, logs) = capture_logs(|| Engine::open(config(dir.path())).expect("open"));
        assert_eq!(
            logs.count("scanning the devices"),
            1,
            "{damage}: the damaged snapshot must be refused:\n{}",
            logs.lines().join("\n")
        );
        assert_eq!(logs.count("index loaded from snapshot"), 0, "{damage}");
        for k in 0..KEYS {
            assert_eq!(read(&e, k).expect("read"), Some(1), "{damage}: key {k}");
        }
        assert_eq!(e.stats().records, u64::from(KEYS), "{damage}");
    }
}

/// A snapshot saved before the devices were written again (restored from a backup, or left by
/// an operator's mistake) must be recognized as stale, whether the later run shut down cleanly
/// or crashed.
#[test]
fn a_stale_snapshot_is_detected_and_the_devices_scanned() {
    for later_run_closed in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        populate(dir.path());
        let snap = snapshot_path(dir.path());
        let aside = dir.path().join("old.index");
        std::fs::copy(&snap, &aside).expect("copy the snapshot aside");
        {
            let e = Engine::open(config(dir.path())).expect("open from the snapshot");
            for k in (0..KEYS).step_by(3) {
                write(&e, k, 2);
            }
            for k in (1..KEYS).step_by(3) {
                e.delete(row_key(&key(k)), 2).expect("delete");
            }
            for k in KEYS..KEYS + 100 {
                write(&e, k, 2);
            }
            if later_run_closed {
                e.close().expect("close");
            } else {
                e.sync().expect("sync");
                drop(e);
            }
        }
        std::fs::copy(&aside, &snap).expect("put the old snapshot back");
        let (e, logs) = capture_logs(|| Engine::open(config(dir.path())).expect("open"));
        assert_eq!(
            logs.count("the devices changed after it was written"),
            1,
            "closed {later_run_closed}: the stale snapshot must be refused:\n{}",
            logs.lines().join("\n")
        );
        for k in 0..KEYS + 100 {
            let want = match k % 3 {
                _ if k >= KEYS => Some(2),
                0 => Some(2),
                1 => None,
                _ => Some(1),
            };
            assert_eq!(
                read(&e, k).expect("read"),
                want,
                "closed {later_run_closed}: key {k}"
            );
        }
    }
}
