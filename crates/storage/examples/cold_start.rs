//! Measures a cold start after a crash: how long rebuilding the index from the device takes per
//! GiB of data, against the device's own sequential read rate measured the same way (1 MiB
//! direct reads of the same file, as the scan reads blocks).
//!
//! Fills a file namespace with GIB gibibytes of 1 KiB rows, drops it without a clean close (no
//! index file: the next open must scan, as after SIGKILL), drops the page cache's copy by
//! reading with O_DIRECT, then times the reopen, and reads the file sequentially.
//!
//! `cargo run --release -p hayate-storage --example cold_start -- DIR [GIB]` (run it again on
//! the same DIR and GIB to time the scan alone, e.g. under `perf record`).

use std::os::unix::fs::OpenOptionsExt;
use std::time::Instant;

use hayate_storage::device::AlignedBuf;
use hayate_storage::{Cell, Engine, NamespaceConfig, Row, RowKey};

const ROW_BYTES: usize = 1000;

fn config(dir: &std::path::Path, gib: u64) -> NamespaceConfig {
    // Room for the data at the default defragmentation fill, and then some.
    let mut c = NamespaceConfig::with_file("cold", dir, (gib * 2 + 1) << 30);
    c.index_snapshot_path = None;
    c.write_buffer_dir = None;
    c
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().expect("usage: cold_start DIR [GIB]"));
    let gib: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    std::fs::create_dir_all(&dir).expect("create DIR");
    let rows = (gib << 30) / ROW_BYTES as u64;
    // A DIR filled by an earlier run is scanned again as it is (to profile the scan alone).
    if !dir.join("cold.dat").exists() {
        let e = Engine::open(config(&dir, gib)).expect("open");
        let value = vec![7u8; ROW_BYTES - 60];
        let started = Instant::now();
        for i in 0..rows {
            let key = i.to_be_bytes();
            let row = Row {
                cells: vec![Cell::live(1, 1, value.clone())],
                ..Row::default()
            };
            e.write(RowKey::new(1, &key, b""), row).expect("write");
        }
        e.sync().expect("sync");
        println!(
            "wrote {rows} rows ({gib} GiB) in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        // Dropped without `close`: no index file, as after a crash.
    }
    let started = Instant::now();
    let e = Engine::open(config(&dir, gib)).expect("reopen");
    let took = started.elapsed().as_secs_f64();
    let stats = e.stats();
    let used = stats.total_blocks - stats.free_blocks;
    let data_gib = (used * stats.block_size_bytes) as f64 / f64::from(1 << 30);
    assert_eq!(stats.records, rows, "the cold start found every row");
    drop(e);

    // The device's sequential rate: 1 MiB direct reads of the blocks in use, in order.
    let path = dir.join("cold.dat");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_o_direct())
        .open(&path)
        .expect("open the device file");
    let mut buf = AlignedBuf::zeroed(1 << 20);
    let started = Instant::now();
    let mut read = 0u64;
    while read < used * stats.block_size_bytes {
        use std::os::unix::fs::FileExt;
        file.read_exact_at(&mut buf, read).expect("read");
        read += 1 << 20;
    }
    let seq_s = started.elapsed().as_secs_f64();
    let seq_mib_s = read as f64 / f64::from(1 << 20) / seq_s;
    let scan_mib_s = data_gib * 1024.0 / took;
    println!(
        "cold start: {data_gib:.2} GiB in {used} blocks scanned in {took:.2} s = {:.2} s/GiB, {scan_mib_s:.0} MiB/s; \
         sequential read of the same blocks {seq_mib_s:.0} MiB/s; the scan ran at {:.0}% of it",
        took / data_gib,
        100.0 * scan_mib_s / seq_mib_s
    );
}

/// O_DIRECT on Linux (x86-64 and aarch64).
fn libc_o_direct() -> i32 {
    if cfg!(target_arch = "aarch64") {
        0o200000
    } else {
        0o40000
    }
}
