//! The namespace core: the state of one namespace (devices, block table, post-write cache,
//! writer, each table's RAM index, row locks, chunk owners, deltas, read ring) and the
//! operations on it that the layers above share: the write path ([`write`]), the read path
//! ([`read`]) and range reads ([`scan`]).
//!
//! The engine ([`crate::Engine`]) builds it at open, from what recovery rebuilt, and calls it;
//! defragmentation, expiry, the index snapshot and streaming call it too. It calls none of
//! them.

mod read;
mod scan;
mod write;

pub(crate) use read::{decode_found, Found};
pub(crate) use write::tombstones_key;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

use crate::blocks::{BlockTable, DeviceSet};
use crate::cache::PostWriteCache;
use crate::clock::Clock;
use crate::config::NamespaceConfig;
use crate::deltas::Deltas;
use crate::device::ReadRing;
use crate::error::ReadError;
use crate::format::DecodeError;
use crate::index::{Entry, IndexKey, Location, TableIndex};
use crate::keys::TableId;
use crate::sindex::SecondaryIndexes;
use crate::stats::{Stats, StatsSnapshot};
use crate::writer::Writer;

/// Striped locks that serialize read-merge-write on one row.
const ROW_LOCK_STRIPES: usize = 1024;

/// The namespace core: one namespace's state, shared by the engine's calls, its background
/// threads, the index snapshot and streaming. Its fields are its own: the layers above call
/// its methods.
pub(crate) struct Namespace {
    config: NamespaceConfig,
    clock: Arc<dyn Clock>,
    devices: Arc<DeviceSet>,
    blocks: Arc<BlockTable>,
    cache: Arc<PostWriteCache>,
    writer: Arc<Writer>,
    tables: Tables,
    row_locks: Box<[Mutex<()>]>,
    stats: Arc<Stats>,
    stop: AtomicBool,
    /// Wakes the background threads early (shutdown, or a test asking for a pass).
    wake: (Mutex<u64>, Condvar),
    /// The chunk blocks of each row written in chunks, to free with the row. Changed only under
    /// the row's lock.
    chunks: Mutex<ChunkOwners>,
    /// Updates written without reading their row, until the row is folded (`deltas.rs`).
    /// Changed only under the row's lock.
    deltas: Deltas,
    /// Device reads started ahead of a call (`read_ahead.rs`); `None` where there is no device
    /// to read, io_uring is off, or the kernel refused it.
    ring: Option<Arc<ReadRing>>,
    /// The tables' secondary indexes (`sindex.rs`).
    pub(crate) sindexes: SecondaryIndexes,
}

/// Which chunk blocks each chunked row's current version holds.
pub(crate) type ChunkOwners = HashMap<(TableId, IndexKey), Vec<u32>>;

/// Each table's RAM index.
pub(crate) type Tables = RwLock<HashMap<TableId, Arc<TableIndex>>>;

/// What recovery (or the index snapshot) rebuilt besides the index, for the core to start from.
pub(crate) struct Recovered {
    pub next_sequence: u64,
    pub chunks: ChunkOwners,
}

impl Namespace {
    /// The core over the parts the engine opened and recovery filled in.
    #[expect(
        clippy::too_many_arguments,
        reason = "the parts open builds, in the order it builds them"
    )]
    pub(crate) fn new(
        config: NamespaceConfig,
        clock: Arc<dyn Clock>,
        devices: Arc<DeviceSet>,
        blocks: Arc<BlockTable>,
        cache: Arc<PostWriteCache>,
        writer: Arc<Writer>,
        tables: Tables,
        stats: Arc<Stats>,
        chunks: ChunkOwners,
        deltas: Deltas,
        ring: Option<Arc<ReadRing>>,
    ) -> Namespace {
        Namespace {
            ring,
            config,
            clock,
            devices,
            blocks,
            cache,
            writer,
            tables,
            row_locks: (0..ROW_LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            stats,
            stop: AtomicBool::new(false),
            wake: (Mutex::new(0), Condvar::new()),
            chunks: Mutex::new(chunks),
            deltas,
            sindexes: SecondaryIndexes::default(),
        }
    }

    #[inline]
    pub(crate) fn config(&self) -> &NamespaceConfig {
        &self.config
    }

    #[inline]
    pub(crate) fn now_s(&self) -> u32 {
        self.clock.now_s()
    }

    #[inline]
    pub(crate) fn devices(&self) -> &DeviceSet {
        &self.devices
    }

    #[inline]
    pub(crate) fn blocks(&self) -> &BlockTable {
        &self.blocks
    }

    #[inline]
    pub(crate) fn cache(&self) -> &PostWriteCache {
        &self.cache
    }

    #[inline]
    pub(crate) fn writer(&self) -> &Writer {
        &self.writer
    }

    #[inline]
    pub(crate) fn stats(&self) -> &Stats {
        &self.stats
    }

    #[inline]
    pub(crate) fn deltas(&self) -> &Deltas {
        &self.deltas
    }

    /// The ring reads ahead are started in; `None` when reads are not read ahead.
    #[inline]
    pub(crate) fn ring(&self) -> Option<&Arc<ReadRing>> {
        self.ring.as_ref()
    }

    /// True once the engine is closing: background passes stop early.
    #[inline]
    pub(crate) fn is_stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Stops writes and wakes the background threads; once it returns, no write is still
    /// appending. False if the namespace was stopped already.
    pub(crate) fn begin_shutdown(&self) -> bool {
        if self.stop.swap(true, Ordering::SeqCst) {
            return false;
        }
        self.wake_background();
        // A write holds its row lock from reading the old version until it has appended the
        // new one; once every stripe has been taken, no write is still appending.
        for stripe in self.row_locks.iter() {
            drop(stripe.lock().expect("row lock poisoned"));
        }
        true
    }

    /// Every table's index, as of now.
    pub(crate) fn tables(&self) -> Vec<(TableId, Arc<TableIndex>)> {
        self.tables
            .read()
            .expect("tables lock poisoned")
            .iter()
            .map(|(id, index)| (*id, Arc::clone(index)))
            .collect()
    }

    /// The tables that hold rows (or tombstones), in order.
    pub(crate) fn table_ids(&self) -> Vec<TableId> {
        let mut ids: Vec<TableId> = self
            .tables
            .read()
            .expect("tables lock poisoned")
            .keys()
            .copied()
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Forgets a table's index (its entries' records are not counted dead here).
    pub(crate) fn remove_table(&self, table: TableId) {
        self.tables.write().expect("tables lock poisoned").remove(&table);
    }

    /// Counters and gauges for metrics.
    pub(crate) fn stats_snapshot(&self) -> StatsSnapshot {
        let tables = self.tables.read().expect("tables lock poisoned");
        let (mut records, mut index_bytes) = (0u64, 0u64);
        for t in tables.values() {
            records += t.len() as u64;
            index_bytes += t.heap_bytes() as u64;
        }
        self.stats.snapshot(
            records,
            index_bytes,
            self.blocks.free_blocks(),
            u64::from(self.blocks.len()),
            u64::from(self.config.block_size_bytes),
            self.blocks.total_live_bytes(),
            self.cache.bytes(),
            self.deltas.usage(),
        )
    }
}

impl Namespace {
    pub(crate) fn table(&self, table: TableId) -> Arc<TableIndex> {
        if let Some(t) = self.existing_table(table) {
            return t;
        }
        let mut tables = self.tables.write().expect("tables lock poisoned");
        Arc::clone(tables.entry(table).or_insert_with(|| Arc::new(TableIndex::new())))
    }

    pub(crate) fn existing_table(&self, table: TableId) -> Option<Arc<TableIndex>> {
        self.tables
            .read()
            .expect("tables lock poisoned")
            .get(&table)
            .cloned()
    }

    pub(crate) fn row_lock(&self, table: TableId, key: &IndexKey) -> std::sync::MutexGuard<'_, ()> {
        let stripe =
            (key.digest ^ u64::from(table).wrapping_mul(0x9e37_79b9_7f4a_7c15)) as usize % ROW_LOCK_STRIPES;
        self.row_locks[stripe].lock().expect("row lock poisoned")
    }

    /// How long a table's tombstones are kept after their deletion.
    pub(crate) fn tombstone_grace_s(&self, index: &TableIndex) -> u32 {
        index.tombstone_grace_s().unwrap_or(self.config.tombstone_grace_s)
    }

    pub(crate) fn lock_chunks(&self) -> std::sync::MutexGuard<'_, ChunkOwners> {
        self.chunks.lock().expect("chunk owners lock poisoned")
    }

    /// Removes `e` from the index if it is still there as it was, and counts its record (and a
    /// chunked row's blocks) as dead; false if the entry had changed meanwhile.
    pub(crate) fn remove_entry(&self, table: TableId, index: &TableIndex, e: &Entry) -> bool {
        // A chunked row's blocks, and a row's delta, change hands only under its lock.
        let _row = (e.is_chunked() || e.has_delta()).then(|| self.row_lock(table, &e.key));
        if !index.update_if(e, |_| None) {
            return false;
        }
        self.blocks.sub_live(e.location.block(), e.location.len());
        if e.is_chunked() {
            self.forget_chunks(table, &e.key);
        }
        if e.has_delta() {
            self.forget_delta(table, &e.key);
        }
        true
    }

    /// Frees the chunk blocks of a chunked row whose entry was just replaced or removed, once
    /// what replaced it is durable. The caller holds the row's lock.
    fn forget_chunks(&self, table: TableId, key: &IndexKey) {
        let Some(blocks) = self.lock_chunks().remove(&(table, *key)) else {
            return;
        };
        for b in blocks {
            self.blocks.sub_live(b, self.config.block_size_bytes);
            self.writer.free_when_durable(b);
        }
    }

    /// Drops the delta of a row whose whole version now holds its cells (or that is gone);
    /// its record is dead. The caller holds the row's lock.
    fn forget_delta(&self, table: TableId, key: &IndexKey) {
        if let Some(d) = self.deltas.remove(table, key) {
            self.blocks.sub_live(d.location.block(), d.location.len());
        }
    }

    pub(crate) fn wake_background(&self) {
        let (lock, cv) = &self.wake;
        *lock.lock().expect("wake lock poisoned") += 1;
        cv.notify_all();
    }

    /// Sleeps up to `d`, returning early if woken; true if the engine is stopping.
    pub(crate) fn sleep(&self, d: Duration) -> bool {
        let (lock, cv) = &self.wake;
        let guard = lock.lock().expect("wake lock poisoned");
        if self.stop.load(Ordering::SeqCst) {
            return true;
        }
        let _ = cv.wait_timeout(guard, d).expect("wake lock poisoned");
        self.stop.load(Ordering::SeqCst)
    }

    pub(crate) fn corrupt(&self, loc: Location, detail: DecodeError) -> ReadError {
        let (device, _) = self.devices.locate(loc.block());
        ReadError::Corrupt {
            device: device.name(),
            block: loc.block(),
            offset: loc.offset(),
            detail,
        }
    }
}
