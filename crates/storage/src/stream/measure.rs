//! How fast an export reads a range from a real file device, by read order: the figures
//! `export.rs` keeps, and how to make them again.
//!
//! ```sh
//! HAYATE_STREAM_MEASURE_DIR=/work/tmp cargo test --release -p hayate-storage --lib \
//!     stream::measure -- --ignored --nocapture
//! ```
//!
//! The directory must be on a real disk (not tmpfs: the device is opened with `O_DIRECT`, so
//! the page cache serves nothing and every read reaches the disk). `HAYATE_STREAM_MEASURE_ROWS`
//! sets the row count (1 M by default).

use std::time::Instant;

use super::export::{export, ReadOrder};
use crate::{Cell, Engine, NamespaceConfig, Row, RowKey, ScanFrom};

const TABLE: u32 = 1;

#[test]
#[ignore = "writes a 2 GiB device file and runs for minutes; run by hand (module doc)"]
fn export_read_orders() {
    let base = std::env::var_os("HAYATE_STREAM_MEASURE_DIR").map_or_else(std::env::temp_dir, Into::into);
    let rows: u32 = std::env::var("HAYATE_STREAM_MEASURE_ROWS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir_in(base).expect("temp dir");
    let mut config = NamespaceConfig::with_file("measure", dir.path(), 2 << 30);
    // Far less than the data, so that the range is read from the device.
    config.post_write_cache_bytes = 8 << 20;
    config.write_buffer_dir = None;

    let engine = Engine::open(config.clone()).expect("open");
    let started = Instant::now();
    let value = vec![b'v'; 1_000];
    for i in 0..rows {
        let row = Row {
            cells: vec![Cell::live(0, 1, value.clone())],
            ..Row::default()
        };
        let partition = i.to_be_bytes();
        let key = RowKey::new(TABLE, &partition, b"");
        engine.write(key, row).expect("write");
    }
    engine.close().expect("close");
    println!("wrote {rows} rows in {:.1} s", started.elapsed().as_secs_f64());
    // Reopened from the snapshot: nothing of the data is in the post-write cache.
    let engine = Engine::open(config).expect("reopen");

    // A quarter of the ring.
    let (start, end) = (0, i64::MAX / 2);
    let size = engine.range_size(TABLE, start, end);
    println!(
        "range: {} records, {:.1} MB on the device",
        size.records,
        size.bytes as f64 / 1e6
    );
    let device = |gap_bytes, readers| ReadOrder::Device { gap_bytes, readers };
    let all_sizes: &[usize] = &[4 << 20, 16 << 20, 64 << 20];
    let cases = [
        (
            "index order, one read per record",
            ReadOrder::Index,
            &[16 << 20][..],
        ),
        ("device order, one read per record", device(0, 1), all_sizes),
        (
            "device order, joined within 128 KiB",
            device(128 << 10, 1),
            all_sizes,
        ),
        (
            "device order, one read per record, 4 in flight",
            device(0, 4),
            all_sizes,
        ),
        (
            "device order, joined within 32 KiB, 4 in flight",
            device(32 << 10, 4),
            all_sizes,
        ),
        (
            "device order, joined within 128 KiB, 4 in flight",
            device(128 << 10, 4),
            all_sizes,
        ),
        (
            "device order, one read per record, 8 in flight",
            device(0, 8),
            all_sizes,
        ),
        (
            "device order, joined within 32 KiB, 8 in flight",
            device(32 << 10, 8),
            all_sizes,
        ),
        ("the engine's choice", ReadOrder::DEFAULT, all_sizes),
    ];
    for (name, order, chunk_sizes) in cases {
        for &chunk_bytes in chunk_sizes {
            let reads_before = engine.stats().device_reads;
            let started = Instant::now();
            let (mut records, mut bytes, mut chunks) = (0u64, 0u64, 0u64);
            let mut from = ScanFrom::Token(start + 1);
            loop {
                let c = export(&engine.inner, TABLE, from, end, chunk_bytes, order).expect("export");
                records += c.records;
                bytes += c.data_bytes;
                chunks += 1;
                match c.next {
                    Some(p) => from = ScanFrom::After(p),
                    None => break,
                }
            }
            let secs = started.elapsed().as_secs_f64();
            assert_eq!(records, size.records, "{name}: every record of the range, once");
            println!(
                "{name:<50} chunks of {:>2} MiB ({chunks:>3}): {:>8.0} records/s {:>6.1} MB/s, {} device reads",
                chunk_bytes >> 20,
                records as f64 / secs,
                bytes as f64 / secs / 1e6,
                engine.stats().device_reads - reads_before,
            );
        }
    }
}
