//! The engine: one namespace's public API. It opens the namespace and closes it (`open.rs`),
//! and serves reads and writes through the namespace core (`crate::namespace`).

use std::ops::Bound;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::config::NamespaceConfig;
use crate::device::ReadRing;
use crate::error::{ReadError, WriteError};
use crate::index::{IndexKey, TableIndex};
use crate::keys::{PartitionKey, RowKey, RowsFrom, RowsPage, ScanFrom, StoredRow, TableId, KEY_MAX_BYTES};
use crate::namespace::Namespace;
use crate::range_tombstones::PartitionTombstones;
use crate::read_ahead::ReadsAhead;
use crate::row::Row;
use crate::snapshots::{Snapshot, SnapshotError, SnapshotRecord, SnapshotSpace, SnapshotSummary};
use crate::stats::{DefragStatus, LatencyHistogram, StatsSnapshot, TableStats};

mod indexes;
mod open;

pub use indexes::{IndexReadError, IndexState};

/// A storage namespace. Cheap to share: clone the `Arc` it comes in.
pub struct Engine {
    pub(crate) inner: Arc<Namespace>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Held open for the engine's lifetime: the `flock` that keeps a second process out.
    _locks: Vec<std::fs::File>,
}

impl Engine {
    pub fn config(&self) -> &NamespaceConfig {
        self.inner.config()
    }

    /// Merges `update` into the row at `key` (read, merge, write the whole row to a new place;
    /// or, for an update that only sets cells, append it as the row's delta without reading the
    /// row: `deltas.rs`) and, with `commit_to_device`, returns once it is durable.
    pub fn write(&self, key: RowKey<'_>, update: Row) -> Result<(), WriteError> {
        let timer = Timer::start();
        self.inner.check_write(&key)?;
        // Looked up once, for the write and its latency.
        let index = self.inner.table(key.table);
        let pos = self.inner.write_row_in(&index, key, update)?;
        let written = self.durable_if_committing(pos);
        timer.stop(&index.figures().writes);
        written
    }

    /// With `commit_to_device`, waits until what was appended up to `pos` is durable.
    fn durable_if_committing(&self, pos: crate::writer::Position) -> Result<(), WriteError> {
        if self.inner.config().commit_to_device {
            self.inner.writer().wait_durable(pos)?;
        }
        Ok(())
    }

    /// Deletes every row of a partition whose clustering key lies between the bounds, as of
    /// `deletion`, with ONE range tombstone (both bounds open: a partition deletion). It
    /// shadows every row in its range with an older timestamp, including rows that arrive
    /// after it; see `range_tombstones.rs`.
    pub fn delete_range(
        &self,
        partition: PartitionKey<'_>,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        deletion: crate::row::Deletion,
    ) -> Result<(), WriteError> {
        for part in [start, end] {
            if let Bound::Included(b) | Bound::Excluded(b) = part {
                if b.len() > KEY_MAX_BYTES {
                    return Err(WriteError::KeyTooLarge {
                        bytes: b.len(),
                        max_bytes: KEY_MAX_BYTES,
                    });
                }
            }
        }
        let timer = Timer::start();
        let tombstones =
            PartitionTombstones::of(start.map(<[u8]>::to_vec), end.map(<[u8]>::to_vec), deletion);
        let pos = self.inner.write_tombstones(partition, tombstones)?;
        let written = self.durable_if_committing(pos);
        self.record_write(partition.table, timer);
        written
    }

    /// The range and partition tombstones a partition holds now (for tests and tools).
    pub fn partition_tombstones(
        &self,
        at: PartitionKey<'_>,
    ) -> Result<Option<PartitionTombstones>, ReadError> {
        let Some(index) = self.inner.existing_table(at.table) else {
            return Ok(None);
        };
        self.inner.tombstones_of(&index, at.checked_token(), at.key)
    }

    /// The engine's clock, in seconds since the Unix epoch: what expiry is judged by.
    pub fn now_s(&self) -> u32 {
        self.inner.now_s()
    }

    /// Deletes one row: a row tombstone at `timestamp_us`.
    pub fn delete(&self, key: RowKey<'_>, timestamp_us: i64) -> Result<(), WriteError> {
        let now_s = self.inner.now_s();
        self.write(key, Row::deleted(timestamp_us, now_s))
    }

    /// The row as a read sees it now: `None` if it does not exist, was deleted or expired.
    pub fn get(&self, key: RowKey<'_>) -> Result<Option<Row>, ReadError> {
        let Some(index) = self.inner.existing_table(key.table) else {
            return Ok(None);
        };
        let timer = Timer::start();
        let row = self.get_in(&index, key);
        timer.stop(&index.figures().reads);
        row
    }

    fn get_in(&self, index: &TableIndex, key: RowKey<'_>) -> Result<Option<Row>, ReadError> {
        let now_s = self.inner.now_s();
        let ikey = key.index_key();
        let Some(entry) = entry_for_read(index, key, &ikey) else {
            return Ok(None);
        };
        if !entry.is_visible(now_s) {
            return Ok(None);
        }
        let Some(found) = self.inner.read_entry(index, &entry)? else {
            return Ok(None);
        };
        if found.partition_key != key.partition || found.clustering_key != key.clustering {
            // Two keys with the same token and digest: astronomically rare, never served.
            tracing::warn!(
                table = key.table,
                "digest collision between two keys; the other key is stored"
            );
            return Ok(None);
        }
        self.inner.fold_after_read(key, ikey, index, &found);
        let mut row = found.row;
        if let Some(t) = self.inner.tombstones_of(index, ikey.token, key.partition)? {
            t.shadow(key.clustering, &mut row, now_s);
        }
        let row = row.into_visible(now_s);
        Ok(row.is_live(now_s).then_some(row))
    }

    /// The stored version of a row including its tombstones (and the range or partition
    /// tombstone that covers it, merged in as a row deletion), for replica merges and repair.
    pub fn get_with_tombstones(&self, key: RowKey<'_>) -> Result<Option<Row>, ReadError> {
        Ok(self.get_with_partition_tombstones(key)?.0)
    }

    /// [`Engine::get_with_tombstones`], and the tombstones of the row's partition that were
    /// merged into it: what a replica answers a one-row read with. The row is found with one
    /// index lookup, and the partition's tombstones are read once, for both.
    pub fn get_with_partition_tombstones(
        &self,
        key: RowKey<'_>,
    ) -> Result<(Option<Row>, Option<PartitionTombstones>), ReadError> {
        let Some(index) = self.inner.existing_table(key.table) else {
            return Ok((None, None));
        };
        let timer = Timer::start();
        let read = self.get_with_tombstones_in(&index, key);
        timer.stop(&index.figures().reads);
        read
    }

    fn get_with_tombstones_in(
        &self,
        index: &TableIndex,
        key: RowKey<'_>,
    ) -> Result<(Option<Row>, Option<PartitionTombstones>), ReadError> {
        let ikey = key.index_key();
        let tombstones = self.inner.tombstones_of(index, ikey.token, key.partition)?;
        let Some(entry) = entry_for_read(index, key, &ikey).filter(|e| !e.is_range_tombstones()) else {
            return Ok((None, tombstones));
        };
        let Some(found) = self
            .inner
            .read_entry(index, &entry)?
            .filter(|f| f.partition_key == key.partition && f.clustering_key == key.clustering)
        else {
            return Ok((None, tombstones));
        };
        self.inner.fold_after_read(key, ikey, index, &found);
        let mut row = found.row;
        if let Some(t) = &tombstones {
            t.shadow(key.clustering, &mut row, self.inner.now_s());
        }
        Ok((Some(row), tombstones))
    }

    /// Starts, without waiting, the device reads that a read or a write of these rows would
    /// make now (the row's current version, where it is neither in the open block nor in the
    /// post-write cache), with the index entries a read then takes instead of looking the row
    /// up again; `None` when there is nothing to read ahead, or no ring to start reads in. Await
    /// [`ReadsAhead::finish`], then make the call with [`crate::ReadsDone::install`] held: the
    /// call then does not block its thread on those reads.
    pub fn read_ahead<'a>(&self, keys: impl IntoIterator<Item = RowKey<'a>>) -> Option<ReadsAhead> {
        self.inner.start_reads(keys.into_iter().map(|k| (k, None)))
    }

    /// [`Engine::read_ahead`] for writes of these updates: a row whose update will be written as
    /// a delta (`deltas.rs`) is not read, so nothing is read ahead for it.
    pub fn read_ahead_for_writes<'a>(
        &self,
        writes: impl IntoIterator<Item = (RowKey<'a>, &'a Row)>,
    ) -> Option<ReadsAhead> {
        self.inner
            .start_reads(writes.into_iter().map(|(k, u)| (k, Some(u))))
    }

    /// The ring that [`Engine::read_ahead`] starts reads in, for the caller's runtime to drive
    /// ([`ReadRing::submit`] when reads are queued, [`ReadRing::reap`] when its descriptor is
    /// readable); `None` when reads are not read ahead.
    pub fn read_ring(&self) -> Option<&Arc<ReadRing>> {
        self.inner.ring()
    }

    /// Rows of a table in token order from `from` up to `to_token` (inclusive), at most `limit`
    /// live rows. Within one token, rows come in index order: by the first eight bytes of the
    /// clustering key, then by digest; [`Engine::read_partition`] gives exact clustering order.
    pub fn scan(
        &self,
        table: TableId,
        from: ScanFrom,
        to_token: i64,
        limit: usize,
    ) -> Result<Vec<StoredRow>, ReadError> {
        let Some(index) = self.inner.existing_table(table) else {
            return Ok(Vec::new());
        };
        let start = match from {
            ScanFrom::Token(t) => Bound::Included(IndexKey {
                token: t,
                ..IndexKey::MIN
            }),
            ScanFrom::After(p) => Bound::Excluded(p.0),
        };
        let end = Bound::Included(IndexKey {
            token: to_token,
            ..IndexKey::MAX
        });
        self.inner.read_range(&index, start, end, limit, |_| true)
    }

    /// The rows of one partition with clustering keys in `[start, end]` (bounds as given), in
    /// clustering order (reversed if asked), at most `limit`. A read reads about `limit` rows
    /// from its first bound, however large the partition (see
    /// [`Engine::read_partition_raw`]).
    pub fn read_partition(
        &self,
        partition: PartitionKey<'_>,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<StoredRow>, ReadError> {
        let Some(index) = self.inner.existing_table(partition.table) else {
            return Ok(Vec::new());
        };
        let timer = Timer::start();
        let now_s = self.inner.now_s();
        let (mut rows, _) = self
            .inner
            .partition_rows(&index, partition, start, end, reverse, limit, false)?;
        for r in &mut rows {
            r.row = std::mem::take(&mut r.row).into_visible(now_s);
        }
        rows.truncate(limit);
        timer.stop(&index.figures().reads);
        Ok(rows)
    }

    /// The rows of one partition as stored (deletions and expired cells included, for replica
    /// merges), with the partition's range and partition tombstones merged into the rows they
    /// cover, with clustering keys between the bounds, in clustering order (reversed if
    /// asked), until `live_limit` of them are live at the engine's clock. Rows that are not live
    /// come along and do not count. `more` is true when the read stopped at the limit; the
    /// page carries the partition's tombstones too, read once for the rows and the caller.
    ///
    /// A read starts at its start bound in the index (its end bound, reversed) and stops soon
    /// after `live_limit` live rows: paging through a wide partition costs each page its own
    /// rows, not the rows before it.
    pub fn read_partition_raw(
        &self,
        partition: PartitionKey<'_>,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        live_limit: usize,
    ) -> Result<RowsPage, ReadError> {
        let Some(index) = self.inner.existing_table(partition.table) else {
            return Ok(RowsPage::default());
        };
        let timer = Timer::start();
        let (rows, tombstones) = self
            .inner
            .partition_rows(&index, partition, start, end, reverse, live_limit, true)?;
        let mut page = self.inner.take_live(rows, live_limit);
        page.tombstones = tombstones;
        timer.stop(&index.figures().reads);
        Ok(page)
    }

    /// Rows of a table as stored (deletions included), in the order a client reads a table:
    /// by token, then partition key bytes, then clustering key bytes; from `from` up to
    /// `to_token` (inclusive), until `live_limit` rows are live. At most
    /// [`crate::TOMBSTONES_PER_READ_MAX`] rows that are not live come along; past that the page ends
    /// early with `more` set, and the caller continues after its last row.
    ///
    /// A token's rows are read together and sorted, since the index orders them by digest
    /// after the clustering key's first eight bytes: resuming inside a wide partition reads the
    /// whole partition again (a partition read, [`Engine::read_partition_raw`], does not).
    pub fn scan_rows(
        &self,
        table: TableId,
        from: RowsFrom<'_>,
        to_token: i64,
        live_limit: usize,
    ) -> Result<RowsPage, ReadError> {
        let Some(index) = self.inner.existing_table(table) else {
            return Ok(RowsPage::default());
        };
        self.inner.scan_rows(&index, from, to_token, live_limit)
    }

    /// Forgets every row of `table`: its index goes, and the blocks that held its records count
    /// them as dead, so defragmentation reclaims the space. The records stay on the device
    /// until then, and a cold start in between finds them again: the caller drops the table
    /// again after each open (see [`Engine::table_ids`]). Returns the rows forgotten.
    pub fn drop_table(&self, table: TableId) -> usize {
        self.inner.sindexes.clear_table(table);
        let Some(index) = self.inner.existing_table(table) else {
            return 0;
        };
        self.inner.remove_table(table);
        let mut dropped = 0;
        for p in 0..crate::index::PARTITIONS {
            for e in index.partition_select(p, |_| true) {
                if self.inner.remove_entry(table, &index, &e) {
                    dropped += 1;
                }
            }
        }
        dropped
    }

    /// Keeps `table`'s tombstones (and the deletions inside its rows) for `grace_s` after their
    /// deletion instead of the namespace's `tombstone_grace_s`; `None` goes back to that. This is
    /// Cassandra's per-table `gc_grace_seconds`: the caller sets it from the schema.
    pub fn set_tombstone_grace(&self, table: TableId, grace_s: Option<u32>) {
        let index = match grace_s {
            Some(_) => Some(self.inner.table(table)),
            // No index yet is the default already: none is made for it.
            None => self.inner.existing_table(table),
        };
        if let Some(index) = index {
            index.set_tombstone_grace_s(grace_s);
        }
    }

    /// The tables that hold rows (or tombstones).
    pub fn table_ids(&self) -> Vec<TableId> {
        self.inner.table_ids()
    }

    /// Counters and gauges for metrics.
    pub fn stats(&self) -> StatsSnapshot {
        self.inner.stats_snapshot()
    }

    /// Each table's figures (rows, tombstones, bytes, latencies), in table order. Counting the
    /// entries takes each index partition's lock for a moment; nothing is scanned.
    pub fn table_stats(&self) -> Vec<TableStats> {
        let mut tables = self.inner.tables();
        tables.sort_unstable_by_key(|(id, _)| *id);
        tables
            .into_iter()
            .map(|(id, index)| {
                index
                    .figures()
                    .snapshot(id, index.len() as u64, index.heap_bytes() as u64)
            })
            .collect()
    }

    /// Where defragmentation stands: blocks waiting for it, and what it has done.
    pub fn defrag_status(&self) -> DefragStatus {
        let config = self.inner.config();
        let block_size_bytes = u64::from(config.block_size_bytes);
        let lwm_bytes = block_size_bytes * u64::from(config.defrag_lwm_pct) / 100;
        let backlog = self.inner.blocks().defrag_backlog(lwm_bytes);
        let stats = self.inner.stats_snapshot();
        DefragStatus {
            lwm_pct: config.defrag_lwm_pct,
            pending_blocks: backlog.pending_blocks,
            pending_live_bytes: backlog.pending_live_bytes,
            defragging_blocks: backlog.defragging_blocks,
            blocks_defragged: stats.defrag_blocks,
            bytes_moved: stats.defrag_bytes_moved,
            free_blocks: stats.free_blocks,
            total_blocks: stats.total_blocks,
            block_size_bytes,
        }
    }

    /// Counts a write of `table` that took since `timer` started.
    fn record_write(&self, table: TableId, timer: Timer) {
        if let Some(index) = self.inner.existing_table(table) {
            timer.stop(&index.figures().writes);
        }
    }

    /// Runs one defragmentation pass now (tests and admin commands); returns blocks freed.
    pub fn defrag_now(&self) -> usize {
        crate::defrag::pass(&self.inner)
    }

    /// Runs one expiry pass now; returns the entries it removed.
    pub fn expire_now(&self) -> usize {
        crate::expiry::pass(&self.inner)
    }

    /// Takes snapshot `tag` of `tables` (`snapshots/`): their index entries saved, the blocks
    /// they point into pinned. Refused when the blocks it would newly pin exceed the free
    /// blocks beyond the stop-writes reserve, unless `force`.
    pub fn take_snapshot(
        &self,
        tag: &str,
        tables: &[TableId],
        force: bool,
    ) -> Result<SnapshotSummary, SnapshotError> {
        crate::snapshots::take(&self.inner, tag, tables, force)
    }

    /// The directory of snapshot `tag` (the caller may keep its own files there).
    pub fn snapshot_dir(&self, tag: &str) -> Result<std::path::PathBuf, SnapshotError> {
        crate::snapshots::dir_of(&self.inner, tag)
    }

    /// Where this namespace's snapshots live, if it keeps any.
    pub fn snapshots_root(&self) -> Option<&std::path::Path> {
        self.inner.config().snapshots_dir.as_deref()
    }

    /// Opens snapshot `tag` for reading ([`Engine::read_snapshot`]).
    pub fn open_snapshot(&self, tag: &str) -> Result<Snapshot, SnapshotError> {
        crate::snapshots::open(&self.inner, tag)
    }

    /// The records of `table` in `snapshot` among its entries `from..from + max`; and the next
    /// `from`. `since` (0 for all) keeps only what is in blocks of that sequence or later (see
    /// `snapshots::read`).
    pub fn read_snapshot(
        &self,
        snapshot: &Snapshot,
        table: TableId,
        from: usize,
        max: usize,
        since: u64,
    ) -> Result<(Vec<SnapshotRecord>, Option<usize>), SnapshotError> {
        crate::snapshots::read(&self.inner, snapshot, table, from, max, since)
    }

    /// Deletes snapshot `tag` and gives its blocks back.
    pub fn clear_snapshot(&self, tag: &str) -> Result<(), SnapshotError> {
        crate::snapshots::clear(&self.inner, tag)
    }

    /// Device space pinned and held for snapshots.
    pub fn snapshot_space(&self) -> SnapshotSpace {
        let block_bytes = u64::from(self.inner.config().block_size_bytes);
        let (pinned_blocks, held_bytes) = self.inner.blocks().pinned_and_held(block_bytes);
        SnapshotSpace {
            pinned_blocks,
            held_bytes,
            block_size_bytes: self.inner.config().block_size_bytes,
        }
    }

    /// Makes everything written so far durable (what `commit_to_device` does per write).
    pub fn sync(&self) -> Result<(), WriteError> {
        let pos = self.inner.writer().appended();
        self.inner.writer().wait_durable(pos)
    }
}

/// Times one read or write of a table, for its latency histogram.
struct Timer(std::time::Instant);

impl Timer {
    fn start() -> Timer {
        Timer(std::time::Instant::now())
    }

    fn stop(self, histogram: &LatencyHistogram) {
        histogram.record(self.0.elapsed().as_micros() as u64);
    }
}

/// A one-row read's index entry: the one its read ahead looked up (see `read_ahead.rs`), or a
/// lookup now.
fn entry_for_read(index: &TableIndex, key: RowKey<'_>, ikey: &IndexKey) -> Option<crate::index::Entry> {
    crate::read_ahead::take_entry(key.table, ikey).or_else(|| index.get(ikey))
}
