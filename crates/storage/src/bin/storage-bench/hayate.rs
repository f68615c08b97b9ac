//! hayate's side of the benchmark: the engine with its default settings on one device file.

use std::path::Path;

use hayate_storage::{Cell, Engine, Liveness, NamespaceConfig, Row, RowKey, TableId};

use crate::measure::{GIB, MIB};
use crate::workload::{now_us, BenchResult, Store, FIELDS, FIELD_BYTES, KEY_BYTES_MAX, RECORD_VALUE_BYTES};
use crate::Subject;

const TABLE: TableId = 1;
/// The device file holds about three times the data, so defragmentation is never short of room.
const DEVICE_DATA_MULTIPLE: u64 = 3;
const DEVICE_MIN_BYTES: u64 = 1 << 30;

pub struct Hayate {
    engine: Engine,
}

impl Hayate {
    pub fn open(dir: &Path, records: u64) -> BenchResult<Hayate> {
        let data_bytes = records * (KEY_BYTES_MAX + RECORD_VALUE_BYTES) as u64;
        let block = 1u64 << 20;
        let size_bytes = (DEVICE_DATA_MULTIPLE * data_bytes)
            .max(DEVICE_MIN_BYTES)
            .div_ceil(block)
            * block;
        let mut config = NamespaceConfig::with_file("bench", dir, size_bytes);
        // `with_file` inherits `data_in_memory = true` from `in_memory`, which keeps every block
        // in RAM and never evicts the post-write cache: the whole data set would be resident
        // and reads would never reach the device. The benchmark measures the hybrid-memory
        // engine (index in RAM, data on the device), so turn it off explicitly.
        config.data_in_memory = false;
        let engine = Engine::open(config)?;
        Ok(Hayate { engine })
    }

    fn key(key: &[u8]) -> RowKey<'_> {
        RowKey::new(TABLE, key, &[])
    }
}

impl Store for Hayate {
    fn insert(&self, key: &[u8], fields: &[[u8; FIELD_BYTES]; FIELDS]) -> BenchResult<()> {
        let ts = now_us();
        // What a CQL INSERT writes: the row marker and every column.
        let row = Row {
            liveness: Some(Liveness {
                timestamp_us: ts,
                ttl_s: 0,
                expires_at_s: 0,
            }),
            cells: (0..FIELDS)
                .map(|c| Cell::live(c as u32, ts, fields[c].to_vec()))
                .collect(),
            ..Row::default()
        };
        self.engine.write(Hayate::key(key), row)?;
        Ok(())
    }

    fn read(&self, key: &[u8]) -> BenchResult<bool> {
        Ok(self.engine.get(Hayate::key(key))?.is_some())
    }

    fn update(&self, key: &[u8], field: usize, value: &[u8; FIELD_BYTES]) -> BenchResult<()> {
        // One cell, as `UPDATE t SET field = ? WHERE key = ?` writes; the engine reads the row,
        // merges and writes the whole row to a new place.
        let row = Row {
            cells: vec![Cell::live(field as u32, now_us(), value.to_vec())],
            ..Row::default()
        };
        self.engine.write(Hayate::key(key), row)?;
        Ok(())
    }
}

impl Subject for Hayate {
    fn name(&self) -> &'static str {
        "hayate"
    }

    fn settings(&self) -> Vec<String> {
        let c = self.engine.config();
        let device = c.devices.first().map_or(String::from("none"), |d| {
            format!("{} ({:.1} GiB)", d.path.display(), d.size_bytes as f64 / GIB)
        });
        vec![
            format!(
                "device file {device}, O_DIRECT = {}, data_in_memory = {}",
                c.direct_io, c.data_in_memory
            ),
            format!(
                "write blocks {} KiB, flush of a partly filled block after {} ms",
                c.block_size_bytes >> 10,
                c.flush_interval_ms
            ),
            format!(
                "post-write cache {:.0} MiB, defrag below {}% live (sleep {} us per block)",
                c.post_write_cache_bytes as f64 / MIB,
                c.defrag_lwm_pct,
                c.defrag_sleep_us
            ),
            format!(
                "commit_to_device = {} (a write is acknowledged once in the write block; the flusher writes it within {} ms or when the block fills)",
                c.commit_to_device, c.flush_interval_ms
            ),
            "update = Engine::write of a row holding one 100-byte cell (the engine reads, merges and rewrites the row)".into(),
        ]
    }

    fn cache(&self) -> (&'static str, u64) {
        ("post-write cache", self.engine.stats().cache_bytes)
    }

    fn own_counters(&self) -> Vec<String> {
        let s = self.engine.stats();
        vec![
            format!(
                "records {}, index {:.1} MiB ({:.1} B/record), live {:.2} GiB, free blocks {} of {} ({:.1}%)",
                s.records,
                s.index_bytes as f64 / MIB,
                s.index_bytes as f64 / s.records.max(1) as f64,
                s.live_bytes as f64 / GIB,
                s.free_blocks,
                s.total_blocks,
                s.free_pct()
            ),
            format!(
                "engine counters: device bytes written {:.2} GiB, encoded record bytes {:.2} GiB (engine's own write amplification {:.2})",
                s.device_bytes_written as f64 / GIB,
                s.user_bytes_written as f64 / GIB,
                s.write_amplification()
            ),
            format!(
                "device reads {}, post-write cache hits {}, read errors {}, defragmented blocks {} ({:.2} GiB moved)",
                s.device_reads,
                s.cache_hits,
                s.read_errors,
                s.defrag_blocks,
                s.defrag_bytes_moved as f64 / GIB
            ),
        ]
    }
}
