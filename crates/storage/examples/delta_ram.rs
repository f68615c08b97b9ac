//! Measures the RAM a pending delta costs (`deltas.rs`) against what the delta buffer counts for
//! it: loads N rows of YCSB's shape (ten 100-byte columns) into a file namespace, reopens it so
//! the rows are on the device, then updates one column of each row without reading it, and
//! reports the growth of the process's resident memory per delta beside the buffer's own figure.
//!
//! `cargo run --release -p hayate-storage --example delta_ram -- 1000000 /tmp/delta-ram`

use hayate_storage::{Cell, Engine, NamespaceConfig, Row, RowKey};

mod common;

use common::rss_bytes;

fn key(name: &[u8]) -> RowKey<'_> {
    RowKey::new(1, name, b"")
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let dir = std::path::PathBuf::from(args.next().unwrap_or_else(|| "/tmp/delta-ram".into()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("data folder");
    let mut config = NamespaceConfig::with_file("delta-ram", &dir, (n * 1300 * 3).max(64 << 20));
    config.write_buffer_dir = None;
    config.post_write_cache_bytes = 8 << 20;
    config.delta_buffer_bytes = 4 << 30;
    let name = |i: u64| format!("user{:019}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 1).into_bytes();
    let e = Engine::open(config.clone()).expect("open");
    for i in 0..n {
        let cells = (0..10).map(|c| Cell::live(c, 1, vec![b'a'; 100])).collect();
        e.write(
            key(&name(i)),
            Row {
                cells,
                ..Row::default()
            },
        )
        .expect("load");
    }
    e.close().expect("close");
    let e = Engine::open(config).expect("reopen");
    // SAFETY: malloc_trim only returns free memory to the kernel.
    unsafe { libc::malloc_trim(0) };
    let before = rss_bytes();
    for i in 0..n {
        let update = Row {
            cells: vec![Cell::live((i % 10) as u32, 2, vec![b'b'; 100])],
            ..Row::default()
        };
        e.write(key(&name(i)), update).expect("update");
    }
    let after = rss_bytes();
    let s = e.stats();
    println!(
        "{} deltas: RSS growth {:.0} B/delta, counted by the buffer {:.0} B/delta ({} blind of {n} updates)",
        s.deltas,
        (after - before) as f64 / s.deltas.max(1) as f64,
        s.delta_bytes as f64 / s.deltas.max(1) as f64,
        s.blind_writes
    );
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}
