//! Measures the RAM the index costs per entry, apart from the rest of the engine: inserts N
//! entries with random tokens into one table's index and reports the growth of the process's
//! resident memory against the index's own heap figure.
//!
//! `cargo run --release -p hayate-storage --example index_ram -- 10000000`

use hayate_storage::index::{Entry, IndexKey, Location, TableIndex};

mod common;

use common::rss_bytes;

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let before = rss_bytes();
    let index = TableIndex::new();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        index.upsert(Entry {
            key: IndexKey {
                token: x as i64,
                clustering_prefix: 0,
                digest: x.rotate_left(17),
            },
            location: Location::new((i % 1000) as u32, 0, 1024),
            write_timestamp_us: i as i64,
            expiry_s: 0,
            flags: 0,
        });
    }
    let after = rss_bytes();
    println!(
        "{n} entries: RSS growth {:.1} B/entry, index heap {:.1} B/entry",
        (after - before) as f64 / n as f64,
        index.heap_bytes() as f64 / n as f64
    );
    let started = std::time::Instant::now();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut found = 0u64;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = IndexKey {
            token: x as i64,
            clustering_prefix: 0,
            digest: x.rotate_left(17),
        };
        found += u64::from(index.get(&key).is_some());
    }
    println!(
        "{found} lookups in {:.2} s ({:.0} ns each)",
        started.elapsed().as_secs_f64(),
        started.elapsed().as_nanos() as f64 / n as f64
    );
    // SAFETY: malloc_trim only returns free memory to the kernel.
    unsafe { libc::malloc_trim(0) };
    println!(
        "after malloc_trim: RSS growth {:.1} B/entry",
        (rss_bytes() - before) as f64 / n as f64
    );
}
