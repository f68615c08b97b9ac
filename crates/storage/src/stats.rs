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

/// Sub-buckets per power of two in a [`LatencyHistogram`]: a percentile is read as the upper
/// bound of its bucket, at most 25% above the true figure (Cassandra's tablestats histogram
/// steps by 20%).
const LATENCY_SUB_BUCKETS: usize = 4;
/// Powers of two covered: 1 µs up to 2^27 µs (134 s); slower calls count in the last bucket.
const LATENCY_OCTAVES: usize = 27;
const LATENCY_BUCKETS: usize = LATENCY_SUB_BUCKETS * LATENCY_OCTAVES;

/// How long calls took, in buckets that grow by a quarter of a power of two, each an atomic: a
/// recording is two relaxed additions and takes no lock (it runs on every read and write).
pub struct LatencyHistogram {
    buckets: [AtomicU64; LATENCY_BUCKETS],
    sum_us: AtomicU64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_us: AtomicU64::new(0),
        }
    }
}

/// The bucket of a latency: values 0 to 3 have a bucket each, then four per power of two.
fn latency_bucket(latency_us: u64) -> usize {
    if latency_us < LATENCY_SUB_BUCKETS as u64 {
        return latency_us as usize;
    }
    let octave = 63 - latency_us.leading_zeros() as usize; // >= 2
    let sub = ((latency_us >> (octave - 2)) & 3) as usize;
    (LATENCY_SUB_BUCKETS * (octave - 1) + sub).min(LATENCY_BUCKETS - 1)
}

/// The largest latency that falls in `bucket`.
fn latency_bucket_upper_us(bucket: usize) -> u64 {
    if bucket < LATENCY_SUB_BUCKETS {
        return bucket as u64;
    }
    let octave = bucket / LATENCY_SUB_BUCKETS + 1;
    let sub = (bucket % LATENCY_SUB_BUCKETS) as u64;
    let step = 1u64 << (octave - 2);
    (4 + sub) * step + step - 1
}

impl LatencyHistogram {
    pub fn record(&self, latency_us: u64) {
        self.buckets[latency_bucket(latency_us)].fetch_add(1, Relaxed);
        self.sum_us.fetch_add(latency_us, Relaxed);
    }

    pub fn snapshot(&self) -> LatencySnapshot {
        LatencySnapshot {
            buckets: self.buckets.iter().map(|b| b.load(Relaxed)).collect(),
            sum_us: self.sum_us.load(Relaxed),
        }
    }
}

/// A copy of a [`LatencyHistogram`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatencySnapshot {
    buckets: Vec<u64>,
    pub sum_us: u64,
}

impl LatencySnapshot {
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    pub fn mean_us(&self) -> Option<f64> {
        let n = self.count();
        (n > 0).then(|| self.sum_us as f64 / n as f64)
    }

    /// The latency `quantile` (0.5, 0.99, ...) of the calls stay within, as its bucket's upper
    /// bound; `None` before the first call.
    pub fn quantile_us(&self, quantile: f64) -> Option<u64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = ((quantile.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bucket, count) in self.buckets.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(latency_bucket_upper_us(bucket));
            }
        }
        Some(latency_bucket_upper_us(LATENCY_BUCKETS - 1))
    }
}

/// One table's figures, kept beside its index: what its entries hold, counted as entries change
/// (so that reading them costs no scan of the index), and how long this node's reads and writes
/// of the table took in the engine.
#[derive(Default)]
pub struct TableFigures {
    /// Row tombstones (entries of deleted rows), not range or partition tombstones.
    tombstones: AtomicU64,
    /// Entries that hold a partition's range and partition tombstones.
    range_tombstone_entries: AtomicU64,
    /// Bytes of the records the entries point at (a chunked row's head record only).
    record_bytes: AtomicU64,
    /// Lookups of one key in the table's index, by reads, writes and background work alike:
    /// a one-row read makes one (two when its device read is started ahead).
    lookups: AtomicU64,
    pub(crate) reads: LatencyHistogram,
    pub(crate) writes: LatencyHistogram,
}

impl TableFigures {
    /// Counts an entry that joined the index (`added`) or left it.
    pub(crate) fn count_entry(
        &self,
        tombstone: bool,
        range_tombstones: bool,
        record_bytes: u32,
        added: bool,
    ) {
        let change = |counter: &AtomicU64, n: u64| {
            if added {
                counter.fetch_add(n, Relaxed);
            } else {
                counter.fetch_sub(n, Relaxed);
            }
        };
        if range_tombstones {
            change(&self.range_tombstone_entries, 1);
        } else if tombstone {
            change(&self.tombstones, 1);
        }
        change(&self.record_bytes, u64::from(record_bytes));
    }

    /// Counts one lookup of a key in the table's index.
    pub(crate) fn count_lookup(&self) {
        self.lookups.fetch_add(1, Relaxed);
    }

    /// The table's figures now; `entries` and `index_bytes` come from its index.
    pub(crate) fn snapshot(&self, table: u32, entries: u64, index_bytes: u64) -> TableStats {
        TableStats {
            table,
            entries,
            // Each counter moves under the lock of the entry's index partition, so it never
            // passes below zero; a wrap would be a bug in the counting, shown as 0, not 2^64.
            tombstones: sane(self.tombstones.load(Relaxed)),
            range_tombstone_entries: sane(self.range_tombstone_entries.load(Relaxed)),
            record_bytes: sane(self.record_bytes.load(Relaxed)),
            index_bytes,
            index_lookups: self.lookups.load(Relaxed),
            reads: self.reads.snapshot(),
            writes: self.writes.snapshot(),
        }
    }
}

fn sane(counter: u64) -> u64 {
    if counter > u64::MAX / 2 {
        0
    } else {
        counter
    }
}

/// One table's figures on this node (see [`crate::Engine::table_stats`]).
#[derive(Clone, Debug, Default)]
pub struct TableStats {
    pub table: u32,
    /// Index entries: rows, row tombstones and partitions' range tombstone entries.
    pub entries: u64,
    pub tombstones: u64,
    pub range_tombstone_entries: u64,
    /// Bytes of the current records of the table's rows on the device (deltas not counted).
    pub record_bytes: u64,
    /// Bytes the table's RAM index holds.
    pub index_bytes: u64,
    /// Lookups of one key in the table's index since the engine opened.
    pub index_lookups: u64,
    /// Reads of rows and partitions (scans of token ranges are not counted).
    pub reads: LatencySnapshot,
    /// Writes and deletions, each until the engine accepted it (and, with `commit_to_device`,
    /// until it was durable).
    pub writes: LatencySnapshot,
}

impl TableStats {
    /// Rows the index holds that are not tombstones; rows whose TTL ran out count until the
    /// expiry pass finds them.
    pub fn rows(&self) -> u64 {
        self.entries
            .saturating_sub(self.tombstones)
            .saturating_sub(self.range_tombstone_entries)
    }
}

/// Where defragmentation stands (see [`crate::Engine::defrag_status`]).
#[derive(Clone, Debug, Default)]
pub struct DefragStatus {
    /// Blocks whose live data fell below this share of a block are defragmented.
    pub lwm_pct: u32,
    /// Sealed blocks below the low-water mark, waiting for the defragmenter.
    pub pending_blocks: u64,
    /// The live bytes those blocks hold, which defragmentation will move.
    pub pending_live_bytes: u64,
    /// Blocks being defragmented now (or left so when some of their live data could not be
    /// reached).
    pub defragging_blocks: u64,
    /// Since the engine opened: blocks defragmented and freed, and the bytes moved.
    pub blocks_defragged: u64,
    pub bytes_moved: u64,
    pub free_blocks: u64,
    pub total_blocks: u64,
    pub block_size_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_bound_their_values() {
        let mut last = 0;
        for v in 0..100_000u64 {
            let b = latency_bucket(v);
            assert!(
                b == last || b == last + 1,
                "bucket of {v} jumps from {last} to {b}"
            );
            assert!(v <= latency_bucket_upper_us(b), "{v} above its bucket's bound");
            if b > 0 {
                assert!(
                    v > latency_bucket_upper_us(b - 1),
                    "{v} belongs to an earlier bucket"
                );
            }
            // The bound overstates a value by at most a quarter.
            assert!(
                latency_bucket_upper_us(b) as f64 <= (v as f64 * 1.25).max(3.0),
                "{v}"
            );
            last = b;
        }
        assert_eq!(latency_bucket(u64::MAX), LATENCY_BUCKETS - 1);
    }

    #[test]
    fn quantiles_read_the_buckets() {
        let h = LatencyHistogram::default();
        assert_eq!(h.snapshot().quantile_us(0.5), None);
        for _ in 0..99 {
            h.record(100);
        }
        h.record(10_000);
        let s = h.snapshot();
        assert_eq!(s.count(), 100);
        assert_eq!(
            s.quantile_us(0.5),
            Some(latency_bucket_upper_us(latency_bucket(100)))
        );
        assert!((100..=125).contains(&s.quantile_us(0.99).unwrap_or(0)));
        assert!((10_000..=12_500).contains(&s.quantile_us(1.0).unwrap_or(0)));
        assert_eq!(s.mean_us(), Some(199.0));
    }
}
