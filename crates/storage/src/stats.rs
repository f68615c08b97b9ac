//! Counters the engine keeps for metrics and benchmarks.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Default)]
pub struct Stats {
    device_bytes_written: AtomicU64,
    user_bytes_written: AtomicU64,
    device_reads: AtomicU64,
    cache_hits: AtomicU64,
    read_errors: AtomicU64,
    cached_rereads: AtomicU64,
    defrag_blocks: AtomicU64,
    defrag_bytes_moved: AtomicU64,
    expired_entries: AtomicU64,
    records_read: AtomicU64,
    record_bytes_read: AtomicU64,
    blind_writes: AtomicU64,
    delta_folds: AtomicU64,
}

impl Stats {
    pub(crate) fn add_device_bytes_written(&self, n: u64) {
        self.device_bytes_written.fetch_add(n, Relaxed);
    }
    pub(crate) fn add_user_bytes_written(&self, n: u64) {
        self.user_bytes_written.fetch_add(n, Relaxed);
    }
    pub(crate) fn add_device_read(&self) {
        self.device_reads.fetch_add(1, Relaxed);
    }
    pub(crate) fn add_cache_hit(&self) {
        self.cache_hits.fetch_add(1, Relaxed);
    }
    pub(crate) fn add_read_error(&self) {
        self.read_errors.fetch_add(1, Relaxed);
    }
    pub(crate) fn add_cached_reread(&self) {
        self.cached_rereads.fetch_add(1, Relaxed);
    }
    pub(crate) fn add_defrag_block(&self) {
        self.defrag_blocks.fetch_add(1, Relaxed);
    }
    pub(crate) fn add_defrag_bytes(&self, n: u64) {
        self.defrag_bytes_moved.fetch_add(n, Relaxed);
    }
    pub(crate) fn add_record_read(&self, bytes: u64) {
        self.records_read.fetch_add(1, Relaxed);
        self.record_bytes_read.fetch_add(bytes, Relaxed);
    }
    pub(crate) fn add_blind_write(&self) {
        self.blind_writes.fetch_add(1, Relaxed);
    }
    pub(crate) fn add_delta_fold(&self) {
        self.delta_folds.fetch_add(1, Relaxed);
    }
    pub(crate) fn add_expired(&self) {
        self.expired_entries.fetch_add(1, Relaxed);
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn snapshot(
        &self,
        records: u64,
        index_bytes: u64,
        free_blocks: u64,
        total_blocks: u64,
        block_size_bytes: u64,
        live_bytes: u64,
        cache_bytes: u64,
        (deltas, delta_bytes): (u64, u64),
    ) -> StatsSnapshot {
        StatsSnapshot {
            records,
            index_bytes,
            free_blocks,
            total_blocks,
            block_size_bytes,
            live_bytes,
            cache_bytes,
            device_bytes_written: self.device_bytes_written.load(Relaxed),
            user_bytes_written: self.user_bytes_written.load(Relaxed),
            device_reads: self.device_reads.load(Relaxed),
            cache_hits: self.cache_hits.load(Relaxed),
            read_errors: self.read_errors.load(Relaxed),
            cached_rereads: self.cached_rereads.load(Relaxed),
            defrag_blocks: self.defrag_blocks.load(Relaxed),
            defrag_bytes_moved: self.defrag_bytes_moved.load(Relaxed),
            expired_entries: self.expired_entries.load(Relaxed),
            records_read: self.records_read.load(Relaxed),
            record_bytes_read: self.record_bytes_read.load(Relaxed),
            blind_writes: self.blind_writes.load(Relaxed),
            delta_folds: self.delta_folds.load(Relaxed),
            deltas,
            delta_bytes,
        }
    }
}

/// A point-in-time copy of the engine's figures.
#[derive(Clone, Debug, Default)]
pub struct StatsSnapshot {
    /// Index entries, tombstones included.
    pub records: u64,
    /// Bytes held by the index's entry arrays.
    pub index_bytes: u64,
    pub free_blocks: u64,
    pub total_blocks: u64,
    pub block_size_bytes: u64,
    /// Bytes of current record versions on the devices.
    pub live_bytes: u64,
    pub cache_bytes: u64,
    /// Everything the engine wrote to its devices: blocks, rewrites of partly filled blocks,
    /// defragmentation, header wipes.
    pub device_bytes_written: u64,
    /// The encoded size of the records clients wrote.
    pub user_bytes_written: u64,
    pub device_reads: u64,
    pub cache_hits: u64,
    pub read_errors: u64,
    /// Record reads through the page cache (`read_page_cache`) that failed the record checks
    /// and were read again straight from the device: a stale page, or a damaged record.
    pub cached_rereads: u64,
    pub defrag_blocks: u64,
    pub defrag_bytes_moved: u64,
    pub expired_entries: u64,
    /// Records read and decoded for reads and writes (from the device, the cache or the open
    /// block), and their bytes: what a read cost, whatever served it.
    pub records_read: u64,
    pub record_bytes_read: u64,
    /// Updates written as deltas, without reading their row.
    pub blind_writes: u64,
    /// Rows written whole again over their delta: by a read, a write or defragmentation.
    pub delta_folds: u64,
    /// Rows with a pending delta, and the RAM the deltas hold.
    pub deltas: u64,
    pub delta_bytes: u64,
}

impl StatsSnapshot {
    pub fn free_pct(&self) -> f64 {
        100.0 * self.free_blocks as f64 / self.total_blocks.max(1) as f64
    }

    /// Device bytes written per byte of user data.
    pub fn write_amplification(&self) -> f64 {
        self.device_bytes_written as f64 / self.user_bytes_written.max(1) as f64
    }
}
