//! RocksDB's side of the benchmark, configured to be a fair peer: direct I/O for reads, flush
//! and compaction; an LRU block cache as large as hayate's post-write cache; the WAL on without
//! sync (hayate's `commit_to_device = false` is the matching durability); otherwise the usual
//! leveled-compaction settings.
//!
//! An update is a read-modify-write, as hayate's is: Get the record, replace one field, Put the
//! whole record, under a striped lock so that two updates of one key do not lose a field.

use std::path::Path;
use std::sync::Mutex;

use rocksdb::{BlockBasedOptions, Cache, DBCompactionStyle, DBCompressionType, Options, DB};

use crate::measure::{GIB, MIB};
use crate::workload::{BenchResult, Store, FIELDS, FIELD_BYTES, RECORD_VALUE_BYTES};
use crate::Subject;

/// The library linked: the one librocksdb-sys bundles, or the system's when built with
/// `ROCKSDB_LIB_DIR` (set `STORAGE_BENCH_ROCKSDB_VERSION` then, to name it in the results).
const ROCKSDB_LIBRARY: &str = match option_env!("STORAGE_BENCH_ROCKSDB_VERSION") {
    Some(v) => v,
    None => "10.4.2 (bundled with librocksdb-sys 0.17.3)",
};
const WRITE_BUFFER_BYTES: usize = 64 << 20;
const BLOOM_BITS_PER_KEY: f64 = 10.0;
const BACKGROUND_JOBS: i32 = 2;
/// Stripes of the lock that serializes read-modify-write on one key (hayate has 1024).
const LOCK_STRIPES: usize = 1024;

pub struct Rocks {
    db: DB,
    options: Options,
    cache: Cache,
    cache_bytes: u64,
    locks: Box<[Mutex<()>]>,
}

impl Rocks {
    pub fn open(dir: &Path, cache_bytes: u64) -> BenchResult<Rocks> {
        let cache = Cache::new_lru_cache(usize::try_from(cache_bytes)?);
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&cache);
        table.set_bloom_filter(BLOOM_BITS_PER_KEY, false);

        let mut options = Options::default();
        options.create_if_missing(true);
        options.set_use_direct_reads(true);
        options.set_use_direct_io_for_flush_and_compaction(true);
        options.set_block_based_table_factory(&table);
        options.set_compaction_style(DBCompactionStyle::Level);
        options.set_level_compaction_dynamic_level_bytes(true);
        options.set_write_buffer_size(WRITE_BUFFER_BYTES);
        options.set_max_background_jobs(BACKGROUND_JOBS);
        // The values are random bytes: compression would cost CPU and save nothing.
        options.set_compression_type(DBCompressionType::None);
        options.enable_statistics();

        let db = DB::open(&options, dir)?;
        Ok(Rocks {
            db,
            options,
            cache,
            cache_bytes,
            locks: (0..LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
        })
    }

    fn stripe(&self, key: &[u8]) -> &Mutex<()> {
        let h = key.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        &self.locks[(h % LOCK_STRIPES as u64) as usize]
    }

    fn property(&self, name: &str) -> u64 {
        self.db.property_int_value(name).ok().flatten().unwrap_or(0)
    }
}

impl Store for Rocks {
    fn insert(&self, key: &[u8], fields: &[[u8; FIELD_BYTES]; FIELDS]) -> BenchResult<()> {
        let mut value = [0u8; RECORD_VALUE_BYTES];
        for (slot, field) in value.chunks_mut(FIELD_BYTES).zip(fields) {
            slot.copy_from_slice(field);
        }
        self.db.put(key, value)?;
        Ok(())
    }

    fn read(&self, key: &[u8]) -> BenchResult<bool> {
        Ok(self.db.get_pinned(key)?.is_some())
    }

    fn update(&self, key: &[u8], field: usize, value: &[u8; FIELD_BYTES]) -> BenchResult<()> {
        let _row = self.stripe(key).lock().expect("row lock poisoned");
        let Some(current) = self.db.get_pinned(key)? else {
            return Err(format!(
                "update of a key that was never loaded: {}",
                String::from_utf8_lossy(key)
            )
            .into());
        };
        let mut record = current.to_vec();
        drop(current);
        let at = field * FIELD_BYTES;
        record
            .get_mut(at..at + FIELD_BYTES)
            .ok_or("stored record shorter than its fields")?
            .copy_from_slice(value);
        self.db.put(key, record)?;
        Ok(())
    }
}

impl Subject for Rocks {
    fn name(&self) -> &'static str {
        "rocksdb"
    }

    fn settings(&self) -> Vec<String> {
        vec![
            format!("RocksDB {ROCKSDB_LIBRARY} through rust-rocksdb 0.24"),
            "use_direct_reads = true, use_direct_io_for_flush_and_compaction = true".into(),
            format!(
                "LRU block cache {:.0} MiB (= hayate's post-write cache), 4 KiB blocks, full bloom filter {BLOOM_BITS_PER_KEY} bits/key",
                self.cache_bytes as f64 / MIB
            ),
            format!(
                "leveled compaction, dynamic level bytes, write buffer {} MiB x 2, {BACKGROUND_JOBS} background jobs, no compression (values are random)",
                WRITE_BUFFER_BYTES >> 20
            ),
            "WAL on, not synced per write (sync = false), as hayate's commit_to_device = false".into(),
            "update = Get + Put of the whole 1000-byte record with one field replaced, under a striped key lock".into(),
        ]
    }

    fn cache(&self) -> (&'static str, u64) {
        ("block cache", self.cache.get_usage() as u64)
    }

    fn own_counters(&self) -> Vec<String> {
        let stats = self.options.get_statistics().unwrap_or_default();
        let t = |name| ticker(&stats, name);
        let (wal, flush, compact) = (
            t("rocksdb.wal.bytes"),
            t("rocksdb.flush.write.bytes"),
            t("rocksdb.compact.write.bytes"),
        );
        vec![
            format!(
                "statistics: WAL {:.2} GiB + flush {:.2} GiB + compaction {:.2} GiB = {:.2} GiB written; user bytes (rocksdb.bytes.written) {:.2} GiB",
                wal as f64 / GIB,
                flush as f64 / GIB,
                compact as f64 / GIB,
                (wal + flush + compact) as f64 / GIB,
                t("rocksdb.bytes.written") as f64 / GIB
            ),
            format!(
                "memtables {:.1} MiB, table readers (index + filter) {:.1} MiB, block cache {:.1} MiB, live SST {:.2} GiB",
                self.property("rocksdb.cur-size-all-mem-tables") as f64 / MIB,
                self.property("rocksdb.estimate-table-readers-mem") as f64 / MIB,
                self.cache.get_usage() as f64 / MIB,
                self.property("rocksdb.live-sst-files-size") as f64 / GIB
            ),
            format!(
                "pending compaction {:.2} GiB, SST files per level L0..L6: {}",
                self.property("rocksdb.estimate-pending-compaction-bytes") as f64 / GIB,
                (0..7)
                    .map(|l| self.property(&format!("rocksdb.num-files-at-level{l}")).to_string())
                    .collect::<Vec<_>>()
                    .join("/")
            ),
        ]
    }
}

/// A counter from the statistics dump, by name: the text form is the same in every RocksDB
/// version, where the numbering of the ticker enum is not.
fn ticker(stats: &str, name: &str) -> u64 {
    stats
        .lines()
        .find_map(|l| l.strip_prefix(name)?.trim_start().strip_prefix("COUNT :"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Built against the system's RocksDB 7.8 (`ROCKSDB_LIB_DIR`, with `--cfg
/// storage_bench_system_rocksdb`), rust-rocksdb 0.24 still references
/// `rocksdb_write_buffer_manager_destroy`, which 7.8's C API lacks. Only the destructor of a
/// write buffer manager calls it, and the benchmark never creates one: this stub lets the binary
/// link and is never called.
#[cfg(storage_bench_system_rocksdb)]
#[no_mangle]
extern "C" fn rocksdb_write_buffer_manager_destroy(_manager: *mut std::ffi::c_void) {
    unreachable!("the benchmark creates no RocksDB write buffer manager");
}
