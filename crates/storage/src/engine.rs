//! The engine: one namespace's devices, RAM index, writer and background threads, and the
//! operations a CQL node needs on them.

use std::collections::HashMap;
use std::ops::Bound;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::blocks::{BlockTable, Claim, DeviceSet};
use crate::cache::PostWriteCache;
use crate::clock::{Clock, SystemClock};
use crate::config::NamespaceConfig;
use crate::deltas::{Delta, Deltas, Pending, DELTA_OVERHEAD_BYTES};
use crate::device::{align_up, AlignedBuf, Device, FileDevice, NullDevice, ReadRing};
use crate::error::{OpenError, ReadError, WriteError};
use crate::format::block::{BlockHeader, BLOCK_HEADER_BYTES};
use crate::format::chunks::ChunkList;
use crate::format::record::{
    body_bytes, decode_body, decode_record, decode_tombstones_body, encode_body, encode_record,
    encode_tombstones_body, RecordMeta, RecordView,
};
use crate::format::DecodeError;
use crate::index::{
    Entry, IndexKey, Location, TableIndex, FLAG_CHUNKED, FLAG_DELTA, FLAG_HAS_DELETIONS, FLAG_HAS_OLDER,
    FLAG_RANGE_TOMBSTONES, FLAG_TOMBSTONE,
};
use crate::range_tombstones::{PartitionTombstones, RANGE_TOMBSTONES_PER_PARTITION_MAX};
use crate::read_ahead::{ReadsAhead, Span};
use crate::row::Row;
use crate::token::{clustering_prefix, digest, token, tombstones_digest};
use crate::write_buffer::WriteBuffer;
use crate::writer::{spawn_flusher, Position, Writer};
use crate::{Stats, StatsSnapshot};

/// Cassandra's limit on a partition key, and ours on a clustering key.
pub const KEY_MAX_BYTES: usize = u16::MAX as usize;
/// The most one row may hold, encoded. A row larger than a write block is written in chunks;
/// this is twice Cassandra's 16 MiB limit on one mutation, so that a row built up by several
/// writes still fits, and well within one internode message.
pub const ROW_MAX_BYTES: usize = 32 << 20;
/// Striped locks that serialize read-merge-write on one row.
const ROW_LOCK_STRIPES: usize = 1024;
/// The largest delta record: a row whose pending cells grow past this is written whole.
const DELTA_RECORD_MAX_BYTES: usize = 16 << 10;
/// A read retries this often when the block it was sent to was reused under it.
const READ_ATTEMPTS_MAX: usize = 4;
/// Index entries a raw read takes from the index at once.
const STORED_BATCH_ENTRIES: usize = 1024;

/// A table, as the schema numbers it.
pub type TableId = u32;

/// The primary key of one row: table, serialized partition key (the bytes Cassandra hashes for
/// the token) and clustering key (an order-preserving encoding; empty for tables without
/// clustering columns).
#[derive(Clone, Copy, Debug)]
pub struct RowKey<'a> {
    pub table: TableId,
    pub partition: &'a [u8],
    pub clustering: &'a [u8],
}

impl RowKey<'_> {
    fn index_key(&self) -> IndexKey {
        IndexKey {
            token: token(self.partition),
            clustering_prefix: clustering_prefix(self.clustering),
            digest: digest(self.partition, self.clustering),
        }
    }
}

/// A row returned by a read or scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRow {
    pub token: i64,
    pub partition_key: Vec<u8>,
    pub clustering_key: Vec<u8>,
    pub row: Row,
    /// Where a scan that stopped here resumes (pass it to [`Engine::scan`]).
    pub position: ScanPosition,
}

/// A place in a table's index order, for paging through a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ScanPosition(pub(crate) IndexKey);

impl ScanPosition {
    pub const BYTES: usize = 24;

    pub fn to_bytes(self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        b[..8].copy_from_slice(&self.0.token.to_be_bytes());
        b[8..16].copy_from_slice(&self.0.clustering_prefix.to_be_bytes());
        b[16..].copy_from_slice(&self.0.digest.to_be_bytes());
        b
    }

    pub fn from_bytes(b: &[u8]) -> Option<ScanPosition> {
        if b.len() != Self::BYTES {
            return None;
        }
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            w
        };
        Some(ScanPosition(IndexKey {
            token: i64::from_be_bytes(word(0)),
            clustering_prefix: u64::from_be_bytes(word(8)),
            digest: u64::from_be_bytes(word(16)),
        }))
    }
}

/// Rows that are not live (deleted or expired) one raw read returns at most, besides its live
/// rows: Cassandra's `tombstone_failure_threshold` bounds the same thing.
pub const TOMBSTONES_PER_READ_MAX: usize = 100_000;

/// Where an ordered scan ([`Engine::scan_rows`]) begins.
#[derive(Clone, Copy, Debug)]
pub enum RowsFrom<'a> {
    /// At the first row whose token is at least this.
    Token(i64),
    /// Just after a row (`clustering: Some`), or after every row of a partition (`None`).
    After {
        token: i64,
        partition: &'a [u8],
        clustering: Option<&'a [u8]>,
    },
}

/// Rows as stored, from a raw read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RowsPage {
    pub rows: Vec<StoredRow>,
    /// The read stopped at its limit: there may be more rows after the last one.
    pub more: bool,
}

/// True if `row` (of the same token) comes after the position (partition, clustering).
fn is_after(row: &StoredRow, partition: &[u8], clustering: Option<&[u8]>) -> bool {
    match row.partition_key.as_slice().cmp(partition) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Equal => clustering.is_some_and(|c| row.clustering_key.as_slice() > c),
    }
}

fn in_bounds(ck: &[u8], start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
    let after_start = match start {
        Bound::Included(s) => ck >= s,
        Bound::Excluded(s) => ck > s,
        Bound::Unbounded => true,
    };
    let before_end = match end {
        Bound::Included(e) => ck <= e,
        Bound::Excluded(e) => ck < e,
        Bound::Unbounded => true,
    };
    after_start && before_end
}

/// Where a scan starts.
#[derive(Clone, Copy, Debug)]
pub enum ScanFrom {
    /// At the first row whose token is at least this.
    Token(i64),
    /// Just after a row a previous scan returned.
    After(ScanPosition),
}

pub(crate) struct Inner {
    pub config: NamespaceConfig,
    pub clock: Arc<dyn Clock>,
    pub devices: Arc<DeviceSet>,
    pub blocks: Arc<BlockTable>,
    pub cache: Arc<PostWriteCache>,
    pub writer: Arc<Writer>,
    pub tables: RwLock<HashMap<TableId, Arc<TableIndex>>>,
    row_locks: Box<[Mutex<()>]>,
    pub stats: Arc<Stats>,
    pub stop: AtomicBool,
    /// Wakes the background threads early (shutdown, or a test asking for a pass).
    pub wake: (Mutex<u64>, Condvar),
    /// The chunk blocks of each row written in chunks, to free with the row. Changed only under
    /// the row's lock.
    pub chunks: Mutex<ChunkOwners>,
    /// Updates written without reading their row, until the row is folded (`deltas.rs`).
    /// Changed only under the row's lock.
    pub deltas: Deltas,
    /// Device reads started ahead of a call (`read_ahead.rs`); `None` where there is no device
    /// to read, io_uring is off, or the kernel refused it.
    ring: Option<Arc<ReadRing>>,
}

/// Which chunk blocks each chunked row's current version holds.
pub(crate) type ChunkOwners = HashMap<(TableId, IndexKey), Vec<u32>>;

/// Where a file namespace's write buffer lives, and the device it belongs to.
struct BufferAt {
    dir: std::path::PathBuf,
    file: std::path::PathBuf,
    device: std::path::PathBuf,
}

/// A storage namespace. Cheap to share: clone the `Arc` it comes in.
pub struct Engine {
    pub(crate) inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Held open for the engine's lifetime: the `flock` that keeps a second process out.
    _locks: Vec<std::fs::File>,
}

impl Engine {
    /// Opens a namespace with the system clock.
    pub fn open(config: NamespaceConfig) -> Result<Engine, OpenError> {
        Engine::open_with_clock(config, Arc::new(SystemClock))
    }

    /// Opens a namespace: opens (or creates) its devices, rebuilds the index from the index
    /// snapshot if a clean shutdown left a current one, otherwise by scanning every block, and
    /// starts the flusher, defragmenter and expiry threads.
    pub fn open_with_clock(config: NamespaceConfig, clock: Arc<dyn Clock>) -> Result<Engine, OpenError> {
        config.validate().map_err(OpenError::Config)?;
        let mut devices: Vec<Arc<dyn Device>> = Vec::new();
        let mut locks = Vec::new();
        // A device file made now is a new device: whatever write buffer names its path was left
        // by a process whose device is gone (its data directory deleted, a disk lost), and must
        // not be written into this one.
        let new_device = config.devices.first().is_some_and(|d| !d.path.exists());
        for d in &config.devices {
            locks.push(lock_device(&d.path)?);
            let dev = FileDevice::open(&d.path, d.size_bytes, config.direct_io, config.read_page_cache)
                .map_err(|source| OpenError::Device {
                    path: d.path.clone(),
                    source,
                })?;
            devices.push(Arc::new(dev));
        }
        let in_ram_only = devices.is_empty();
        if in_ram_only {
            devices.push(Arc::new(NullDevice::new(config.memory_size_bytes)));
        }
        // A group commit makes every acknowledged write durable already: no buffer needed.
        let buffer = match (&config.write_buffer_dir, config.devices.first()) {
            (Some(dir), Some(first)) if !config.commit_to_device => {
                // Named after the device's canonical path, so that a restart naming the device
                // another way finds the same buffer.
                let device = first.path.canonicalize().map_err(|source| OpenError::Device {
                    path: first.path.clone(),
                    source,
                })?;
                Some(BufferAt {
                    dir: dir.clone(),
                    file: crate::write_buffer::path_for(dir, &device),
                    device,
                })
            }
            _ => None,
        };
        Engine::open_on(config, devices, clock, locks, in_ram_only, buffer, new_device)
    }

    /// Opens a namespace on devices the caller made (tests put fault-injecting devices here).
    /// `config.devices` is ignored (it may be empty): the devices given are the namespace's, and
    /// the index is rebuilt from them as from files.
    pub fn open_on_devices(
        config: NamespaceConfig,
        devices: Vec<Arc<dyn Device>>,
        clock: Arc<dyn Clock>,
    ) -> Result<Engine, OpenError> {
        // Bug fixed here: this used to run the full `validate()` and then decide "RAM only, skip
        // recovery" from `config.devices.is_empty()`. A config without device paths was refused
        // unless `data_in_memory`, and with one the engine never recovered what the given
        // devices held, so a crash test on a fault-injecting device could not reopen its data.
        config.validate_settings().map_err(OpenError::Config)?;
        if devices.is_empty() {
            return Err(OpenError::Config("open_on_devices: no devices given".into()));
        }
        Engine::open_on(config, devices, clock, Vec::new(), false, None, false)
    }

    fn open_on(
        config: NamespaceConfig,
        devices: Vec<Arc<dyn Device>>,
        clock: Arc<dyn Clock>,
        locks: Vec<std::fs::File>,
        in_ram_only: bool,
        buffer_at: Option<BufferAt>,
        new_device: bool,
    ) -> Result<Engine, OpenError> {
        let devices = Arc::new(DeviceSet::new(devices, config.block_size_bytes));
        if devices.blocks() < 4 {
            return Err(OpenError::Config(format!(
                "the devices hold {} write blocks of {} bytes; at least 4 are needed",
                devices.blocks(),
                config.block_size_bytes
            )));
        }
        let blocks = Arc::new(BlockTable::new(devices.blocks(), config.stop_writes_free_pct));
        let cache = Arc::new(PostWriteCache::new(
            config.post_write_cache_bytes,
            !config.data_in_memory,
        ));
        let stats = Arc::new(Stats::default());
        let tables = RwLock::new(HashMap::new());
        let deltas = Deltas::new(config.delta_buffer_bytes);

        // What a crashed process left in its write buffer goes to the devices before the scan.
        if let Some(at) = buffer_at.as_ref().filter(|_| new_device) {
            if at.file.exists() {
                tracing::warn!(
                    "discarding the write buffer {}: it was left by a process whose device {} no longer \
                     exists (this device file is new), so its blocks belong to no device here",
                    at.file.display(),
                    at.device.display()
                );
                let _ = std::fs::remove_file(&at.file);
            }
        }
        if let Some(at) = &buffer_at {
            crate::write_buffer::remove_orphans(&at.dir);
            let replayed = crate::write_buffer::replay(&at.file, &at.device, &devices)
                .map_err(OpenError::WriteBuffer)?;
            if replayed.blocks > 0 || replayed.skipped > 0 {
                tracing::info!(
                    blocks = replayed.blocks,
                    skipped = replayed.skipped,
                    "replayed the write buffer {} left by a process that did not shut down cleanly",
                    at.file.display()
                );
            }
            if replayed.blocks > 0 {
                // The devices changed under any snapshot (a clean shutdown leaves none to
                // replay, so this is defence only).
                if let Some(snapshot) = &config.index_snapshot_path {
                    let _ = std::fs::remove_file(snapshot);
                }
            }
        }
        let recovered = if in_ram_only {
            for b in 0..devices.blocks() {
                blocks.release(b);
            }
            crate::recovery::Recovered {
                next_sequence: 1,
                chunks: HashMap::new(),
            }
        } else {
            crate::recovery::recover(&config, &devices, &blocks, &cache, &tables, &deltas)
        };

        let buffer = match &buffer_at {
            None => None,
            Some(at) => Some(
                WriteBuffer::create(
                    &at.file,
                    &at.device,
                    config.block_size_bytes as usize,
                    config.write_buffer_blocks,
                )
                .map_err(|e| {
                    OpenError::WriteBuffer(format!(
                        "cannot create {} ({e}): write_buffer_dir must be a writable directory on \
                         a RAM file system with room for write_buffer_blocks blocks; set it to \
                         \"\" to go without (a process crash may then lose up to \
                         flush_interval_ms of acknowledged writes)",
                        at.file.display()
                    ))
                })?,
            ),
        };
        let writer = Arc::new(Writer::new(
            Arc::clone(&devices),
            Arc::clone(&blocks),
            Arc::clone(&cache),
            recovered.next_sequence,
            Duration::from_millis(config.flush_interval_ms.max(1)),
            Arc::clone(&stats),
            buffer,
        ));
        let ring = read_ring(&config, &devices);
        let inner = Arc::new(Inner {
            ring,
            config,
            clock,
            devices,
            blocks,
            cache,
            writer: Arc::clone(&writer),
            tables,
            row_locks: (0..ROW_LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            stats,
            stop: AtomicBool::new(false),
            wake: (Mutex::new(0), Condvar::new()),
            chunks: Mutex::new(recovered.chunks),
            deltas,
        });
        let threads = vec![
            spawn_flusher(writer),
            crate::defrag::spawn(Arc::clone(&inner)),
            crate::expiry::spawn(Arc::clone(&inner)),
        ];
        Ok(Engine {
            inner,
            threads: Mutex::new(threads),
            _locks: locks,
        })
    }

    pub fn config(&self) -> &NamespaceConfig {
        &self.inner.config
    }

    /// Merges `update` into the row at `key` (read, merge, write the whole row to a new place;
    /// or, for an update that only sets cells, append it as the row's delta without reading the
    /// row: `deltas.rs`) and, with `commit_to_device`, returns once it is durable.
    pub fn write(&self, key: RowKey<'_>, update: Row) -> Result<(), WriteError> {
        let pos = self.inner.write_row(key, update)?;
        if self.inner.config.commit_to_device {
            self.inner.writer.wait_durable(pos)?;
        }
        Ok(())
    }

    /// Deletes every row of a partition whose clustering key lies between the bounds, as of
    /// `deletion`, with ONE range tombstone (both bounds open: a partition deletion). It
    /// shadows every row in its range with an older timestamp, including rows that arrive
    /// after it; see `range_tombstones.rs`.
    pub fn delete_range(
        &self,
        table: TableId,
        partition: &[u8],
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
        let tombstones =
            PartitionTombstones::of(start.map(<[u8]>::to_vec), end.map(<[u8]>::to_vec), deletion);
        let pos = self.inner.write_tombstones(table, partition, tombstones)?;
        if self.inner.config.commit_to_device {
            self.inner.writer.wait_durable(pos)?;
        }
        Ok(())
    }

    /// The range and partition tombstones a partition holds now (for tests and tools).
    pub fn partition_tombstones(
        &self,
        table: TableId,
        partition: &[u8],
    ) -> Result<Option<PartitionTombstones>, ReadError> {
        let Some(index) = self.inner.existing_table(table) else {
            return Ok(None);
        };
        self.inner.tombstones_of(&index, token(partition), partition)
    }

    /// Deletes one row: a row tombstone at `timestamp_us`.
    pub fn delete(&self, key: RowKey<'_>, timestamp_us: i64) -> Result<(), WriteError> {
        let now_s = self.inner.clock.now_s();
        self.write(key, Row::deleted(timestamp_us, now_s))
    }

    /// The row as a read sees it now: `None` if it does not exist, was deleted or expired.
    pub fn get(&self, key: RowKey<'_>) -> Result<Option<Row>, ReadError> {
        let now_s = self.inner.clock.now_s();
        let Some(index) = self.inner.existing_table(key.table) else {
            return Ok(None);
        };
        let ikey = key.index_key();
        let Some(entry) = index.get(&ikey) else {
            return Ok(None);
        };
        if !entry.is_visible(now_s) {
            return Ok(None);
        }
        let Some(found) = self.inner.read_entry(&index, &entry)? else {
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
        self.inner.fold_after_read(key, ikey, &index, &found);
        let mut row = found.row;
        if let Some(t) = self.inner.tombstones_of(&index, ikey.token, key.partition)? {
            t.shadow(key.clustering, &mut row, now_s);
        }
        let row = row.into_visible(now_s);
        Ok(row.is_live(now_s).then_some(row))
    }

    /// The stored version of a row including its tombstones (and the range or partition
    /// tombstone that covers it, merged in as a row deletion), for replica merges and repair.
    pub fn get_with_tombstones(&self, key: RowKey<'_>) -> Result<Option<Row>, ReadError> {
        let Some(index) = self.inner.existing_table(key.table) else {
            return Ok(None);
        };
        let ikey = key.index_key();
        let Some(entry) = index.get(&ikey).filter(|e| !e.is_range_tombstones()) else {
            return Ok(None);
        };
        let Some(found) = self
            .inner
            .read_entry(&index, &entry)?
            .filter(|f| f.partition_key == key.partition && f.clustering_key == key.clustering)
        else {
            return Ok(None);
        };
        self.inner.fold_after_read(key, ikey, &index, &found);
        let mut row = found.row;
        if let Some(t) = self.inner.tombstones_of(&index, ikey.token, key.partition)? {
            t.shadow(key.clustering, &mut row, self.inner.clock.now_s());
        }
        Ok(Some(row))
    }

    /// Starts, without waiting, the device reads that a read or a write of these rows would
    /// make now (the row's current version, where it is neither in the open block nor in the
    /// post-write cache); `None` when there are none, or no ring to start them in. Await
    /// [`ReadsAhead::finish`], then make the call with [`crate::ReadsDone::install`] held: the
    /// call then does not block its thread on those reads.
    pub fn read_ahead<'a>(&self, keys: impl IntoIterator<Item = RowKey<'a>>) -> Option<ReadsAhead> {
        self.start_reads(keys.into_iter().map(|k| (k, None)))
    }

    /// [`Engine::read_ahead`] for writes of these updates: a row whose update will be written as
    /// a delta (`deltas.rs`) is not read, so nothing is read ahead for it.
    pub fn read_ahead_for_writes<'a>(
        &self,
        writes: impl IntoIterator<Item = (RowKey<'a>, &'a Row)>,
    ) -> Option<ReadsAhead> {
        self.start_reads(writes.into_iter().map(|(k, u)| (k, Some(u))))
    }

    fn start_reads<'a>(
        &self,
        calls: impl Iterator<Item = (RowKey<'a>, Option<&'a Row>)>,
    ) -> Option<ReadsAhead> {
        let inner = &*self.inner;
        let ring = inner.ring.as_ref().filter(|r| r.is_driven())?;
        let mut reads = Vec::new();
        for (key, update) in calls {
            let Some(index) = inner.existing_table(key.table) else {
                continue;
            };
            let Some(entry) = index.get(&key.index_key()) else {
                continue;
            };
            if entry.is_range_tombstones() || entry.is_chunked() {
                continue;
            }
            if update.is_some_and(|u| inner.may_write_delta(&entry, u) && inner.delta_may_fit(&entry, u)) {
                continue;
            }
            let loc = entry.location;
            let sequence = inner.blocks.sequence(loc.block());
            if inner.writer.is_open(sequence) || inner.cache.contains(loc.block(), sequence) {
                continue;
            }
            let (device, block_offset) = inner.devices.locate(loc.block());
            let Some(fd) = device.record_fd() else {
                continue;
            };
            let span = Span::of(loc, sequence);
            if reads.iter().any(|(s, _)| *s == span) {
                continue;
            }
            let Some(read) = ring.start(fd, block_offset + span.start as u64, span.len) else {
                break;
            };
            reads.push((span, read));
        }
        (!reads.is_empty()).then(|| ReadsAhead {
            reads,
            stats: Arc::clone(&inner.stats),
        })
    }

    /// The ring that [`Engine::read_ahead`] starts reads in, for the caller's runtime to drive
    /// ([`ReadRing::submit`] when reads are queued, [`ReadRing::reap`] when its descriptor is
    /// readable); `None` when reads are not read ahead.
    pub fn read_ring(&self) -> Option<&Arc<ReadRing>> {
        self.inner.ring.as_ref()
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
        table: TableId,
        partition: &[u8],
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<StoredRow>, ReadError> {
        let Some(index) = self.inner.existing_table(table) else {
            return Ok(Vec::new());
        };
        let now_s = self.inner.clock.now_s();
        let mut rows = self
            .inner
            .partition_rows(&index, partition, start, end, reverse, limit, false)?;
        for r in &mut rows {
            r.row = std::mem::take(&mut r.row).into_visible(now_s);
        }
        rows.truncate(limit);
        Ok(rows)
    }

    /// The rows of one partition as stored (deletions and expired cells included, for replica
    /// merges), with the partition's range and partition tombstones merged into the rows they
    /// cover, with clustering keys between the bounds, in clustering order (reversed if
    /// asked), until `live_limit` of them are live at the engine's clock. Rows that are not live
    /// come along and do not count. `more` is true when the read stopped at the limit.
    ///
    /// A read starts at its start bound in the index (its end bound, reversed) and stops soon
    /// after `live_limit` live rows: paging through a wide partition costs each page its own
    /// rows, not the rows before it.
    pub fn read_partition_raw(
        &self,
        table: TableId,
        partition: &[u8],
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        live_limit: usize,
    ) -> Result<RowsPage, ReadError> {
        let Some(index) = self.inner.existing_table(table) else {
            return Ok(RowsPage::default());
        };
        let rows = self
            .inner
            .partition_rows(&index, partition, start, end, reverse, live_limit, true)?;
        Ok(self.inner.take_live(rows, live_limit))
    }

    /// Rows of a table as stored (deletions included), in the order a client reads a table:
    /// by token, then partition key bytes, then clustering key bytes; from `from` up to
    /// `to_token` (inclusive), until `live_limit` rows are live. At most
    /// [`TOMBSTONES_PER_READ_MAX`] rows that are not live come along; past that the page ends
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
        let now_s = self.inner.clock.now_s();
        let start_token = match from {
            RowsFrom::Token(t) => t,
            RowsFrom::After { token, .. } => token,
        };
        let mut page = RowsPage::default();
        if start_token > to_token || live_limit == 0 {
            page.more = live_limit == 0;
            return Ok(page);
        }
        let end = Bound::Included(IndexKey {
            token: to_token,
            ..IndexKey::MAX
        });
        let mut cursor = Bound::Included(IndexKey {
            token: start_token,
            ..IndexKey::MIN
        });
        let (mut live, mut dead) = (0usize, 0usize);
        loop {
            // One token at a time: every entry of the next token, read and sorted.
            let Some(first) = index.range(cursor, end, 1).into_iter().next() else {
                return Ok(page);
            };
            let t = first.key.token;
            let group_end = IndexKey {
                token: t,
                ..IndexKey::MAX
            };
            let mut rows = self.inner.read_stored(
                &index,
                Bound::Included(first.key),
                Bound::Included(group_end),
                |_| true,
            )?;
            rows.sort_by(|a, b| {
                (&a.partition_key, &a.clustering_key).cmp(&(&b.partition_key, &b.clustering_key))
            });
            for row in rows {
                if let RowsFrom::After {
                    token,
                    partition,
                    clustering,
                } = from
                {
                    if t == token && !is_after(&row, partition, clustering) {
                        continue;
                    }
                }
                let is_live = row.row.visible(now_s).is_live(now_s);
                if (is_live && live == live_limit) || (!is_live && dead == TOMBSTONES_PER_READ_MAX) {
                    page.more = true;
                    return Ok(page);
                }
                if is_live {
                    live += 1;
                } else {
                    dead += 1;
                }
                page.rows.push(row);
            }
            if t == to_token {
                return Ok(page);
            }
            cursor = Bound::Excluded(group_end);
        }
    }

    /// Forgets every row of `table`: its index goes, and the blocks that held its records count
    /// them as dead, so defragmentation reclaims the space. The records stay on the device
    /// until then, and a cold start in between finds them again: the caller drops the table
    /// again after each open (see [`Engine::table_ids`]). Returns the rows forgotten.
    pub fn drop_table(&self, table: TableId) -> usize {
        let Some(index) = self.inner.existing_table(table) else {
            return 0;
        };
        self.inner
            .tables
            .write()
            .expect("tables lock poisoned")
            .remove(&table);
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
        let mut ids: Vec<TableId> = self
            .inner
            .tables
            .read()
            .expect("tables lock poisoned")
            .keys()
            .copied()
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Counters and gauges for metrics.
    pub fn stats(&self) -> StatsSnapshot {
        let inner = &self.inner;
        let tables = inner.tables.read().expect("tables lock poisoned");
        let (mut records, mut index_bytes) = (0u64, 0u64);
        for t in tables.values() {
            records += t.len() as u64;
            index_bytes += t.heap_bytes() as u64;
        }
        inner.stats.snapshot(
            records,
            index_bytes,
            inner.blocks.free_blocks(),
            u64::from(inner.blocks.len()),
            u64::from(inner.config.block_size_bytes),
            inner.blocks.total_live_bytes(),
            inner.cache.bytes(),
            inner.deltas.usage(),
        )
    }

    /// Runs one defragmentation pass now (tests and admin commands); returns blocks freed.
    pub fn defrag_now(&self) -> usize {
        crate::defrag::pass(&self.inner)
    }

    /// Runs one expiry pass now; returns the entries it removed.
    pub fn expire_now(&self) -> usize {
        crate::expiry::pass(&self.inner)
    }

    /// Makes everything written so far durable (what `commit_to_device` does per write).
    pub fn sync(&self) -> Result<(), WriteError> {
        let pos = self.inner.writer.appended();
        self.inner.writer.wait_durable(pos)
    }

    /// Clean shutdown: stops the background threads, writes the open block, syncs, and saves
    /// the index snapshot for a fast restart.
    pub fn close(self) -> Result<(), WriteError> {
        self.shutdown_threads();
        if let Some(path) = &self.inner.config.index_snapshot_path {
            if let Err(e) = crate::snapshot::save(&self.inner, path) {
                tracing::warn!(
                    "could not save the index snapshot to {}: {e}; the next start will scan the devices",
                    path.display()
                );
            }
        }
        Ok(())
    }

    /// Stops the background threads, writes the open block, syncs and removes the write buffer,
    /// without an index snapshot: for a node that will not serve after all (its start failed)
    /// while parts of it may still hold the engine. The engine must take no write after it.
    pub fn shutdown(&self) {
        self.shutdown_threads();
    }

    fn shutdown_threads(&self) {
        let inner = &self.inner;
        if inner.stop.swap(true, Ordering::SeqCst) {
            return;
        }
        inner.wake_background();
        // A write holds its row lock from reading the old version until it has appended the
        // new one; once every stripe has been taken, no write is still appending.
        for stripe in inner.row_locks.iter() {
            drop(stripe.lock().expect("row lock poisoned"));
        }
        let mut threads = std::mem::take(&mut *self.threads.lock().expect("threads lock poisoned"));
        let flusher = threads.remove(0);
        // Defragmentation appends too: stop it before the flusher's last round.
        for t in threads {
            let _ = t.join();
        }
        inner.writer.shutdown();
        let _ = flusher.join();
        inner.writer.remove_buffer();
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Without `close`, the open block is still written and synced, but no snapshot is saved.
        self.shutdown_threads();
    }
}

/// The ring for a namespace whose records are read from devices that allow it, if io_uring is
/// on and the kernel allows it.
fn read_ring(config: &NamespaceConfig, devices: &DeviceSet) -> Option<Arc<ReadRing>> {
    if !config.io_uring || config.data_in_memory || devices.devices().iter().all(|d| d.record_fd().is_none())
    {
        return None;
    }
    match ReadRing::new() {
        Ok(ring) => Some(Arc::new(ring)),
        Err(e) => {
            tracing::info!(
                "device reads block their thread: io_uring is not available ({e}); \
                 allow the io_uring system calls to the process to read ahead"
            );
            None
        }
    }
}

thread_local! {
    /// An aligned buffer for device reads, reused across reads on the same thread.
    static READ_BUF: std::cell::RefCell<Option<AlignedBuf>> = const { std::cell::RefCell::new(None) };
    static SCRATCH: std::cell::RefCell<(Vec<u8>, Vec<u8>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// Encodes a row (or a row's delta) as a record into `record`, leaving its body in `body`;
/// returns its metadata.
fn encode_row(
    record: &mut Vec<u8>,
    body: &mut Vec<u8>,
    key: RowKey<'_>,
    ikey: IndexKey,
    row: &Row,
    now_s: u32,
    delta: bool,
) -> RecordMeta {
    let write_timestamp_us = row.max_timestamp_us();
    // A row with nothing live left (only deletions, or content already expired) is stored as a
    // tombstone, dated by its latest deletion or expiry.
    let (tombstone, expiry_s) = match row.live_until_s() {
        None => (false, 0),
        Some(until) if until > now_s => (false, until),
        Some(until) => (true, row.latest_deletion_s().max(until).max(1)),
    };
    let meta = RecordMeta {
        table: key.table,
        token: ikey.token,
        digest: ikey.digest,
        write_timestamp_us,
        expiry_s,
        tombstone,
        has_deletions: row.has_deletions(),
        range_tombstones: false,
        chunked: false,
        delta,
    };
    body.clear();
    encode_body(body, row, write_timestamp_us);
    record.clear();
    encode_record(record, 0, &meta, key.partition, key.clustering, body);
    meta
}

/// Where a partition's tombstones record sits in the index: first among the partition's
/// entries (clustering prefix 0), under a digest no row has.
pub(crate) fn tombstones_key(token: i64, partition: &[u8]) -> IndexKey {
    IndexKey {
        token,
        clustering_prefix: 0,
        digest: tombstones_digest(partition),
    }
}

fn lock_device(path: &std::path::Path) -> Result<std::fs::File, OpenError> {
    use std::os::unix::io::AsRawFd;
    let lock_path = PathBuf::from(format!("{}.lock", path.display()));
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|source| OpenError::Device {
            path: lock_path.clone(),
            source,
        })?;
    // SAFETY: a valid descriptor; flock has no memory effects.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(OpenError::DeviceInUse {
            path: path.to_path_buf(),
        });
    }
    Ok(f)
}

/// A decoded record, owned.
pub(crate) struct Found {
    pub token: i64,
    pub partition_key: Vec<u8>,
    pub clustering_key: Vec<u8>,
    pub row: Row,
    /// The row had a delta, merged into `row`: the whole version read, and the delta's record.
    pub delta: Option<(Location, Location)>,
}

impl Inner {
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

    /// Merges `update` into the row at `key` and appends the new version; returns the write
    /// position to wait on for durability. An update that only sets cells of a row that is
    /// whole on the device is appended as a delta instead, without reading the row.
    pub(crate) fn write_row(&self, key: RowKey<'_>, update: Row) -> Result<Position, WriteError> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(WriteError::Closed);
        }
        for part in [key.partition, key.clustering] {
            if part.len() > KEY_MAX_BYTES {
                return Err(WriteError::KeyTooLarge {
                    bytes: part.len(),
                    max_bytes: KEY_MAX_BYTES,
                });
            }
        }
        let ikey = key.index_key();
        let index = self.table(key.table);
        let now_s = self.clock.now_s();
        let purge_before_s = now_s.saturating_sub(self.tombstone_grace_s(&index));

        let _row = self.row_lock(key.table, &ikey);
        let previous = index.get(&ikey).filter(|e| !e.is_range_tombstones());
        let mut update = update;
        if let Some(e) = previous.filter(|e| self.may_write_delta(e, &update)) {
            match self.write_delta(key, ikey, &index, &e, update, now_s)? {
                Ok(pos) => return Ok(pos),
                // No room: written whole below (the cells include the old delta's, which the
                // read below merges in too; merging twice changes nothing).
                Err(cells) => update = cells,
            }
        }
        let mut row = match &previous {
            Some(e) => match self.read_entry(&index, e).map_err(WriteError::Read)? {
                Some(view) => view.row,
                None => Row::default(),
            },
            None => Row::default(),
        };
        row.merge(update, now_s, purge_before_s);
        self.write_whole(key, ikey, &index, previous.as_ref(), &row, now_s, None)
    }

    /// True if an update of the row `e` points at may be written as a delta: the update only
    /// sets cells, and the row is whole on the device, live, with nothing that expires and no
    /// deletions (so the index entry's metadata stays true without reading it).
    fn may_write_delta(&self, e: &Entry, update: &Row) -> bool {
        self.deltas.enabled()
            && !e.is_tombstone()
            && !e.is_chunked()
            && !e.has_deletions()
            && e.expiry_s == 0
            && update.sets_only()
    }

    /// Whether an update of the row `e` points at would find room as a delta, judged before it
    /// is written. Reads ahead use it: an update that finds no room reads its row, and that read
    /// must have been started ahead, or it blocks a service thread. A first delta is exactly the
    /// update's cells; a merged one is about the old delta plus them (its timestamps are
    /// encoded against a new base, so it may take a few bytes more: then the write, rarely,
    /// reads its row without a read ahead).
    fn delta_may_fit(&self, e: &Entry, update: &Row) -> bool {
        let bytes = body_bytes(update, update.max_timestamp_us()) as u64;
        match e.has_delta() {
            true => self.deltas.has_room(bytes, Some(0)),
            false => self.deltas.has_room(bytes + DELTA_OVERHEAD_BYTES, None),
        }
    }

    /// Appends `update` (merged into the row's pending delta) as the row's delta; `Err` gives
    /// the merged cells back when the delta buffer has no room for them. The caller holds the
    /// row's lock.
    fn write_delta(
        &self,
        key: RowKey<'_>,
        ikey: IndexKey,
        index: &TableIndex,
        e: &Entry,
        update: Row,
        now_s: u32,
    ) -> Result<Result<Position, Row>, WriteError> {
        let old = match e.has_delta() {
            true => self
                .delta_cells(key.table, &ikey, None)
                .map_err(WriteError::Read)?,
            false => None,
        };
        let (mut cells, replacing) = old.map_or((Row::default(), None), |d| (d.cells, Some(d.ram_bytes)));
        cells.merge(update, now_s, 0);
        let written = SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let (record, body) = &mut *scratch;
            let meta = encode_row(record, body, key, ikey, &cells, now_s, true);
            // The row folded from the two must still fit in a block: a row is refused past
            // ROW_MAX_BYTES when it is written whole, and a fold must never be.
            let folded = e.location.len() as usize + record.len();
            let bytes = body.len() as u64 + DELTA_OVERHEAD_BYTES;
            let fits = record.len() <= DELTA_RECORD_MAX_BYTES
                && folded <= self.writer.record_max_bytes()
                && self.deltas.has_room(bytes, replacing);
            if !fits {
                return Ok(None);
            }
            let (loc, pos) = self.writer.append(record, Claim::Write)?;
            Ok::<_, WriteError>(Some((loc, pos, meta, body.clone().into_boxed_slice())))
        })?;
        let Some((loc, pos, meta, body)) = written else {
            return Ok(Err(cells));
        };
        self.stats.add_user_bytes_written(loc.len() as u64);
        self.stats.add_blind_write();
        let delta = Delta {
            base: e.location,
            location: loc,
            write_timestamp_us: meta.write_timestamp_us,
            body,
        };
        if let Some(replaced) = self.deltas.insert(key.table, ikey, delta) {
            self.blocks
                .sub_live(replaced.location.block(), replaced.location.len());
        }
        // The whole version stays where it is, and live: only the entry's flags and newest
        // timestamp change.
        index.upsert(Entry {
            write_timestamp_us: e.write_timestamp_us.max(meta.write_timestamp_us),
            flags: e.flags | FLAG_DELTA | FLAG_HAS_OLDER,
            ..*e
        });
        Ok(Ok(pos))
    }

    /// Appends `row` whole as the row's new version, replacing `previous` (and its delta, if it
    /// had one: `row` must hold the delta's cells). `claim` is defragmentation's when it folds a
    /// delta. The caller holds the row's lock.
    #[expect(clippy::too_many_arguments, reason = "the write's parts, from three callers")]
    fn write_whole(
        &self,
        key: RowKey<'_>,
        ikey: IndexKey,
        index: &TableIndex,
        previous: Option<&Entry>,
        row: &Row,
        now_s: u32,
        claim: Option<Claim>,
    ) -> Result<Position, WriteError> {
        let (loc, pos, meta, chunks) = SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let (record, body) = &mut *scratch;
            let mut meta = encode_row(record, body, key, ikey, row, now_s, false);
            // A write that leaves the row without live data is a delete: it may dip into
            // the reserve, so that a full namespace can be emptied.
            let claim = claim.unwrap_or(if meta.tombstone {
                Claim::Delete
            } else {
                Claim::Write
            });
            let mut chunks = None;
            if record.len() > self.writer.record_max_bytes() {
                if record.len() > ROW_MAX_BYTES {
                    return Err(WriteError::RecordTooLarge {
                        bytes: record.len(),
                        max_bytes: ROW_MAX_BYTES,
                    });
                }
                let list = self.writer.write_chunks(body, claim)?;
                body.clear();
                list.encode(body);
                meta.chunked = true;
                record.clear();
                encode_record(record, 0, &meta, key.partition, key.clustering, body);
                chunks = Some(list.chunks.iter().map(|c| c.block).collect::<Vec<_>>());
            }
            match self.writer.append(record, claim) {
                Ok((loc, pos)) => Ok((loc, pos, meta, chunks)),
                Err(e) => {
                    // Named by no head: they go straight back.
                    for &b in chunks.iter().flatten() {
                        self.cache.remove(b);
                        self.blocks.release(b);
                    }
                    Err(e)
                }
            }
        })?;
        if claim.is_none() {
            self.stats.add_user_bytes_written(loc.len() as u64);
        }
        let entry = Entry {
            key: ikey,
            location: loc,
            write_timestamp_us: meta.write_timestamp_us,
            expiry_s: meta.expiry_s,
            flags: if meta.tombstone { FLAG_TOMBSTONE } else { 0 }
                | if meta.has_deletions { FLAG_HAS_DELETIONS } else { 0 }
                | if previous.is_some() { FLAG_HAS_OLDER } else { 0 }
                | if chunks.is_some() { FLAG_CHUNKED } else { 0 },
        };
        if let Some(replaced) = index.upsert(entry) {
            self.blocks
                .sub_live(replaced.location.block(), replaced.location.len());
            if replaced.is_chunked() {
                self.forget_chunks(key.table, &ikey);
            }
            if replaced.has_delta() {
                self.forget_delta(key.table, &ikey);
                self.stats.add_delta_fold();
            }
        }
        if let Some(blocks) = chunks {
            self.lock_chunks().insert((key.table, ikey), blocks);
        }
        Ok(pos)
    }

    /// The row's delta, decoded, if it has one (over `base`, when given).
    pub(crate) fn delta_cells(
        &self,
        table: TableId,
        key: &IndexKey,
        base: Option<Location>,
    ) -> Result<Option<Pending>, ReadError> {
        self.deltas
            .pending(table, key, base)
            .transpose()
            .map_err(|(loc, detail)| self.corrupt(loc, detail))
    }

    /// Drops the delta of a row whose whole version now holds its cells (or that is gone);
    /// its record is dead. The caller holds the row's lock.
    fn forget_delta(&self, table: TableId, key: &IndexKey) {
        if let Some(d) = self.deltas.remove(table, key) {
            self.blocks.sub_live(d.location.block(), d.location.len());
        }
    }

    /// Writes a row just read whole over its delta, if it still has exactly the delta the read
    /// merged (`found.delta`): the next read then costs one device read and no merge, and the
    /// delta's RAM is free. Best effort: a failure leaves the delta as it was.
    pub(crate) fn fold_after_read(&self, key: RowKey<'_>, ikey: IndexKey, index: &TableIndex, found: &Found) {
        let Some((base, delta_at)) = found.delta else {
            return;
        };
        let _row = self.row_lock(key.table, &ikey);
        let Some(e) = index.get(&ikey) else {
            return;
        };
        if e.location != base || !e.has_delta() || self.deltas.location(key.table, &ikey) != Some(delta_at) {
            return;
        }
        let now_s = self.clock.now_s();
        if let Err(err) = self.write_whole(key, ikey, index, Some(&e), &found.row, now_s, Some(Claim::Write))
        {
            tracing::debug!("a row read with its delta was not folded: {err}");
        }
    }

    /// Defragmentation met the whole version `e` of a row with a delta: the row is written
    /// whole from `base` (the record, decoded from the block in memory) and the delta, and
    /// both old records die. The caller holds the row's lock.
    pub(crate) fn fold_in_defrag(
        &self,
        table: TableId,
        index: &TableIndex,
        e: &Entry,
        mut base: Found,
    ) -> Result<bool, WriteError> {
        let Some(delta) = self
            .delta_cells(table, &e.key, Some(e.location))
            .map_err(WriteError::Read)?
        else {
            return Ok(false);
        };
        let now_s = self.clock.now_s();
        base.row.merge(delta.cells, now_s, 0);
        let key = RowKey {
            table,
            partition: &base.partition_key,
            clustering: &base.clustering_key,
        };
        self.write_whole(key, e.key, index, Some(e), &base.row, now_s, Some(Claim::Defrag))?;
        Ok(true)
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

    /// Joins `added` into the partition's tombstones record (read, merge, write, as a row);
    /// returns the write position to wait on for durability.
    pub(crate) fn write_tombstones(
        &self,
        table: TableId,
        partition: &[u8],
        added: PartitionTombstones,
    ) -> Result<Position, WriteError> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(WriteError::Closed);
        }
        if partition.len() > KEY_MAX_BYTES {
            return Err(WriteError::KeyTooLarge {
                bytes: partition.len(),
                max_bytes: KEY_MAX_BYTES,
            });
        }
        let ikey = tombstones_key(token(partition), partition);
        let index = self.table(table);
        let _row = self.row_lock(table, &ikey);
        let previous = index.get(&ikey).filter(Entry::is_range_tombstones);
        let mut tombstones = match &previous {
            Some(e) => self
                .read_tombstones_entry(&index, e)
                .map_err(WriteError::Read)?
                .map(|(_, t)| t)
                .unwrap_or_default(),
            None => PartitionTombstones::default(),
        };
        tombstones.merge(added);
        if tombstones.ranges.len() > RANGE_TOMBSTONES_PER_PARTITION_MAX {
            return Err(WriteError::TooManyRangeTombstones {
                ranges: tombstones.ranges.len(),
                max: RANGE_TOMBSTONES_PER_PARTITION_MAX,
            });
        }
        let write_timestamp_us = tombstones.max_timestamp_us();
        // Dated by its latest deletion, as a row tombstone is: the grace period runs from there.
        let meta = RecordMeta {
            table,
            token: ikey.token,
            digest: ikey.digest,
            write_timestamp_us,
            expiry_s: tombstones.latest_deleted_at_s().max(1),
            tombstone: true,
            has_deletions: true,
            range_tombstones: true,
            chunked: false,
            delta: false,
        };
        let (loc, pos) = SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let (record, body) = &mut *scratch;
            body.clear();
            encode_tombstones_body(body, &tombstones, write_timestamp_us);
            record.clear();
            encode_record(record, 0, &meta, partition, &[], body);
            self.writer.append(record, Claim::Delete)
        })?;
        self.stats.add_user_bytes_written(loc.len() as u64);
        let entry = Entry {
            key: ikey,
            location: loc,
            write_timestamp_us,
            expiry_s: meta.expiry_s,
            flags: FLAG_TOMBSTONE
                | FLAG_HAS_DELETIONS
                | FLAG_RANGE_TOMBSTONES
                | if previous.is_some() { FLAG_HAS_OLDER } else { 0 },
        };
        if let Some(replaced) = index.upsert(entry) {
            self.blocks
                .sub_live(replaced.location.block(), replaced.location.len());
        }
        Ok(pos)
    }

    /// The tombstones of one partition, if it has any.
    pub(crate) fn tombstones_of(
        &self,
        index: &TableIndex,
        token: i64,
        partition: &[u8],
    ) -> Result<Option<PartitionTombstones>, ReadError> {
        if !index.may_have_range_tombstones() {
            return Ok(None);
        }
        let Some(entry) = index.get(&tombstones_key(token, partition)) else {
            return Ok(None);
        };
        if !entry.is_range_tombstones() {
            return Ok(None);
        }
        Ok(self
            .read_tombstones_entry(index, &entry)?
            .filter(|(pk, _)| pk == partition)
            .map(|(_, t)| t))
    }

    /// Reads a tombstones record: its partition key and tombstones.
    pub(crate) fn read_tombstones_entry(
        &self,
        index: &TableIndex,
        entry: &Entry,
    ) -> Result<Option<(Vec<u8>, PartitionTombstones)>, ReadError> {
        Ok(self
            .read_entry_with(index, entry, |view| {
                if !view.meta.range_tombstones {
                    return Err(DecodeError::OtherKey);
                }
                let t = decode_tombstones_body(view.body, view.meta.write_timestamp_us)?;
                Ok((view.partition_key.to_vec(), t))
            })?
            .map(|(_, t)| t))
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

    /// Reads and decodes the record an index entry points to. `None` if the entry moved while
    /// we read (the caller's view is stale and the row is being rewritten).
    ///
    /// A row with a delta comes back with the delta merged in, as long as the delta is still
    /// the one over the version read; if it was folded meanwhile the row is read again where
    /// the fold put it.
    pub(crate) fn read_entry(&self, index: &TableIndex, entry: &Entry) -> Result<Option<Found>, ReadError> {
        let mut entry = *entry;
        let mut _still = None;
        for attempt in 1.. {
            let read = self.read_entry_with(index, &entry, |view| {
                if view.meta.range_tombstones {
                    return Err(DecodeError::OtherKey);
                }
                decode_found(view).map(|found| (view.meta.table, found))
            })?;
            let Some((read, (table, mut found))) = read else {
                return Ok(None);
            };
            if !read.has_delta() {
                return Ok(Some(found));
            }
            if let Some(delta) = self.delta_cells(table, &read.key, Some(read.location))? {
                found.row.merge(delta.cells, self.clock.now_s(), 0);
                found.delta = Some((read.location, delta.location));
                return Ok(Some(found));
            }
            // Folded since the index was read: the row is whole somewhere else now.
            match index.get(&read.key) {
                Some(now) if now != read => entry = now,
                _ => return Ok(Some(found)),
            }
            if attempt == READ_ATTEMPTS_MAX {
                // Folded and written again on every try: the last holds the row still. (A
                // caller holding the row's lock never gets here: its row cannot change.)
                _still = Some(self.row_lock(table, &read.key));
            }
        }
        unreachable!("the loop returns")
    }

    /// Reads the record an index entry points to and decodes it with `decode`; with it, the
    /// entry as it was when read (the row may have moved since `entry` was looked up).
    fn read_entry_with<T>(
        &self,
        index: &TableIndex,
        entry: &Entry,
        decode: impl Fn(&RecordView<'_>) -> Result<T, DecodeError>,
    ) -> Result<Option<(Entry, T)>, ReadError> {
        let mut entry = *entry;
        let mut last_err = None;
        // Past the page cache, once a read through it failed its checks.
        let mut direct = false;
        for _ in 0..READ_ATTEMPTS_MAX {
            let loc = entry.location;
            let sequence = self.blocks.sequence(loc.block());
            // Decoded straight from where the bytes are (the cache or the read buffer).
            let key = entry.key;
            // A chunked row's head comes back as bytes, to be read on once the buffer it sits
            // in is let go.
            let decoded = self.with_record_bytes(loc, sequence, direct, |bytes| {
                let view = decode_record(bytes, sequence)?;
                if view.meta.digest != key.digest || view.meta.token != key.token {
                    return Err(DecodeError::OtherKey);
                }
                if view.meta.chunked {
                    return Ok(Err(bytes[..view.record_bytes].to_vec()));
                }
                decode(&view).map(Ok)
            });
            let decoded = match decoded {
                Ok(Ok(Err(head))) => self.read_chunked(loc, &head, sequence, &decode),
                Ok(Ok(Ok(found))) => Ok(found),
                Ok(Err(detail)) => Err(self.corrupt(loc, detail)),
                Err(e) => Err(e),
            };
            match decoded {
                Ok(found) => {
                    self.stats.add_record_read(u64::from(loc.len()));
                    return Ok(Some((entry, found)));
                }
                Err(e) => last_err = Some(e),
            }
            // The block may have been defragmented and reused between the index lookup and the
            // read: look again, and retry if the row moved.
            match index.get(&entry.key) {
                Some(now) if now.location != loc => entry = now,
                // The row did not move: the page cache may hold a page the device has since
                // overwritten. Read the device itself once before calling the record damaged.
                Some(_) if !direct && self.forget_cached(loc, sequence) => {
                    direct = true;
                    self.stats.add_cached_reread();
                }
                Some(_) => break,
                None => return Ok(None),
            }
        }
        let err = last_err.expect("at least one attempt");
        self.stats.add_read_error();
        tracing::error!("{err}");
        Err(err)
    }

    /// Reads the chunks a chunked row's head names and decodes the row they make up.
    fn read_chunked<T>(
        &self,
        loc: Location,
        head: &[u8],
        sequence: u64,
        decode: impl Fn(&RecordView<'_>) -> Result<T, DecodeError>,
    ) -> Result<T, ReadError> {
        let view = decode_record(head, sequence).map_err(|d| self.corrupt(loc, d))?;
        let list = ChunkList::decode(view.body).map_err(|d| self.corrupt(loc, d))?;
        let body = self.read_chunks(loc, &list)?;
        decode(&RecordView { body: &body, ..view }).map_err(|d| self.corrupt(loc, d))
    }

    /// A chunked row's body: one device read per chunk, each checked to still be the chunk
    /// the head names, and the whole checked against the head's checksum.
    fn read_chunks(&self, head: Location, list: &ChunkList) -> Result<Vec<u8>, ReadError> {
        let block_size = self.config.block_size_bytes as usize;
        // The list is checked against its chunks, not yet against anything in RAM: reserve no
        // more than a row may hold.
        let mut body = Vec::with_capacity((list.body_bytes as usize).min(ROW_MAX_BYTES));
        let mut buf = AlignedBuf::zeroed(block_size);
        for c in &list.chunks {
            let end = BLOCK_HEADER_BYTES + c.bytes as usize;
            if c.block >= self.blocks.len() || end > block_size {
                return Err(self.corrupt(head, DecodeError::ChunkGone { block: c.block }));
            }
            if let Some(cached) = self.cache.get(c.block, c.sequence) {
                self.stats.add_cache_hit();
                body.extend_from_slice(&cached[BLOCK_HEADER_BYTES..end]);
                continue;
            }
            let (device, offset) = self.devices.locate(c.block);
            let len = align_up(end);
            device
                .read_at(&mut buf[..len], offset)
                .map_err(|source| ReadError::Io {
                    device: device.name(),
                    source,
                })?;
            self.stats.add_device_read();
            match BlockHeader::decode(&buf) {
                Ok(h) if h.chunk && !h.free && h.sequence == c.sequence && h.block_index == c.block => {}
                _ => return Err(self.corrupt(head, DecodeError::ChunkGone { block: c.block })),
            }
            body.extend_from_slice(&buf[BLOCK_HEADER_BYTES..end]);
        }
        let computed = crc32c::crc32c(&body);
        if computed != list.crc32c {
            return Err(self.corrupt(
                head,
                DecodeError::BadChecksum {
                    stored: list.crc32c,
                    computed,
                },
            ));
        }
        Ok(body)
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

    /// Drops the page cache's copy of the span a record read covers; false when its device
    /// reads records past the page cache, so a direct read would see the same bytes.
    fn forget_cached(&self, loc: Location, sequence: u64) -> bool {
        let (device, block_offset) = self.devices.locate(loc.block());
        let span = Span::of(loc, sequence);
        device.forget_cached(block_offset + span.start as u64, span.len)
    }

    /// Runs `f` on the bytes of one record: from the open block, the post-write cache, a read
    /// ahead, or one device read into this thread's aligned buffer (`direct`: past the page
    /// cache and any read ahead, which may have come through it).
    fn with_record_bytes<R>(
        &self,
        loc: Location,
        sequence: u64,
        direct: bool,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, ReadError> {
        if let Some(bytes) = self.writer.read_open(loc, sequence) {
            return Ok(f(&bytes));
        }
        let (start, len) = (loc.offset() as usize, loc.len() as usize);
        if let Some(buf) = self.cache.get(loc.block(), sequence) {
            self.stats.add_cache_hit();
            return Ok(f(&buf[start..start + len]));
        }
        let (device, block_offset) = self.devices.locate(loc.block());
        let span = Span::of(loc, sequence);
        let (aligned_start, aligned_len) = (span.start, span.len);
        if let Some(buf) = crate::read_ahead::take(span).filter(|_| !direct) {
            let from = start - aligned_start;
            return Ok(f(&buf[from..from + len]));
        }
        READ_BUF.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.as_ref().is_none_or(|b| b.len() < aligned_len) {
                *slot = Some(AlignedBuf::zeroed(aligned_len));
            }
            let buf = &mut slot.as_mut().expect("just filled")[..aligned_len];
            let offset = block_offset + aligned_start as u64;
            let read = if direct {
                device.read_at(buf, offset)
            } else {
                device.read_record_at(buf, offset)
            };
            read.map_err(|source| ReadError::Io {
                device: device.name(),
                source,
            })?;
            self.stats.add_device_read();
            let from = start - aligned_start;
            Ok(f(&buf[from..from + len]))
        })
    }

    /// Reads every row among the index entries in a range as stored, deleted and expired ones
    /// included, keeping those `keep` accepts.
    pub(crate) fn read_stored(
        &self,
        index: &TableIndex,
        start: Bound<IndexKey>,
        end: Bound<IndexKey>,
        keep: impl Fn(&Found) -> bool,
    ) -> Result<Vec<StoredRow>, ReadError> {
        let now_s = self.clock.now_s();
        let mut shadows = Shadows::new(self, index);
        let mut out = Vec::new();
        let mut cursor = start;
        loop {
            let entries = index.range(cursor, end, STORED_BATCH_ENTRIES);
            for e in &entries {
                if e.is_range_tombstones() {
                    continue;
                }
                let Some(mut found) = self.read_entry(index, e)? else {
                    continue;
                };
                if keep(&found) {
                    shadows.apply(&mut found, now_s)?;
                    out.push(StoredRow {
                        token: found.token,
                        partition_key: found.partition_key,
                        clustering_key: found.clustering_key,
                        row: found.row,
                        position: ScanPosition(e.key),
                    });
                }
            }
            match entries.last() {
                Some(last) if entries.len() == STORED_BATCH_ENTRIES => cursor = Bound::Excluded(last.key),
                _ => return Ok(out),
            }
        }
    }

    /// Keeps rows in order until `live_limit` of them are live now.
    fn take_live(&self, rows: Vec<StoredRow>, live_limit: usize) -> RowsPage {
        let now_s = self.clock.now_s();
        let mut page = RowsPage::default();
        let mut live = 0;
        for row in rows {
            let is_live = row.row.visible(now_s).is_live(now_s);
            if is_live && live == live_limit {
                page.more = true;
                break;
            }
            live += usize::from(is_live);
            page.rows.push(row);
        }
        page
    }

    /// Reads the live rows among the index entries in a range, keeping those `keep` accepts.
    pub(crate) fn read_range(
        &self,
        index: &TableIndex,
        mut start: Bound<IndexKey>,
        end: Bound<IndexKey>,
        limit: usize,
        keep: impl Fn(&Found) -> bool,
    ) -> Result<Vec<StoredRow>, ReadError> {
        let now_s = self.clock.now_s();
        let mut shadows = Shadows::new(self, index);
        let mut out = Vec::new();
        let batch = limit.clamp(16, 4096);
        loop {
            let entries = index.range(start, end, batch);
            let exhausted = entries.len() < batch;
            for e in &entries {
                if out.len() >= limit {
                    return Ok(out);
                }
                if !e.is_visible(now_s) {
                    continue;
                }
                let Some(mut found) = self.read_entry(index, e)? else {
                    continue;
                };
                if !keep(&found) {
                    continue;
                }
                shadows.apply(&mut found, now_s)?;
                let row = found.row.into_visible(now_s);
                if row.is_live(now_s) {
                    out.push(StoredRow {
                        token: found.token,
                        partition_key: found.partition_key,
                        clustering_key: found.clustering_key,
                        row,
                        position: ScanPosition(e.key),
                    });
                }
            }
            match entries.last() {
                Some(last) if !exhausted && out.len() < limit => start = Bound::Excluded(last.key),
                _ => return Ok(out),
            }
        }
    }
}

impl Inner {
    /// The rows of one partition between the bounds, in clustering order (reversed if asked),
    /// as stored, with the partition's tombstones merged in; with `keep_dead` false, only rows
    /// live now (still as stored: the caller makes them visible).
    ///
    /// The index orders a partition's rows by the first eight bytes of the clustering key, then
    /// by digest: rows sharing those eight bytes are read whole as a group and sorted. A read
    /// walks the index from its start bound (forward) or its end bound (reversed) and stops at
    /// the first group boundary once it holds more than `live_limit` live rows, since every row
    /// past the boundary sorts after every row before it in the read's order; the one row too
    /// many tells [`Inner::take_live`] that there is more.
    #[expect(
        clippy::too_many_arguments,
        reason = "the read's shape, passed through from two public reads"
    )]
    fn partition_rows(
        &self,
        index: &TableIndex,
        partition: &[u8],
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        live_limit: usize,
        keep_dead: bool,
    ) -> Result<Vec<StoredRow>, ReadError> {
        let now_s = self.clock.now_s();
        let t = token(partition);
        let prefix = |b: Bound<&[u8]>, open: u64| match b {
            Bound::Included(c) | Bound::Excluded(c) => clustering_prefix(c),
            Bound::Unbounded => open,
        };
        let low = IndexKey {
            token: t,
            clustering_prefix: prefix(start, 0),
            digest: 0,
        };
        let high = IndexKey {
            token: t,
            clustering_prefix: prefix(end, u64::MAX),
            digest: u64::MAX,
        };
        // A forward read walks up from the start bound, a reversed one down from the end bound.
        let mut cursor = if reverse { high } else { low };
        let mut first = true;
        let tombstones = self.tombstones_of(index, t, partition)?;
        let stop_early = live_limit < usize::MAX;
        let batch = if stop_early {
            live_limit.saturating_add(1).clamp(16, STORED_BATCH_ENTRIES)
        } else {
            STORED_BATCH_ENTRIES
        };
        let mut rows = Vec::new();
        let mut live = 0usize;
        let mut group: Option<u64> = None;
        'walk: loop {
            let (from, to) = match (reverse, first) {
                (false, true) => (Bound::Included(cursor), Bound::Included(high)),
                (false, false) => (Bound::Excluded(cursor), Bound::Included(high)),
                (true, true) => (Bound::Included(low), Bound::Included(cursor)),
                (true, false) => (Bound::Included(low), Bound::Excluded(cursor)),
            };
            let entries = if reverse {
                index.range_rev(from, to, batch)
            } else {
                index.range(from, to, batch)
            };
            first = false;
            for e in &entries {
                if group != Some(e.key.clustering_prefix) {
                    if stop_early && live > live_limit {
                        break 'walk;
                    }
                    group = Some(e.key.clustering_prefix);
                }
                if e.is_range_tombstones() || (!keep_dead && !e.is_visible(now_s)) {
                    continue;
                }
                let Some(found) = self.read_entry(index, e)? else {
                    continue;
                };
                if found.partition_key != partition || !in_bounds(&found.clustering_key, start, end) {
                    continue;
                }
                let mut row = found.row;
                if let Some(t) = &tombstones {
                    t.shadow(&found.clustering_key, &mut row, now_s);
                }
                let is_live = row.is_live(now_s);
                if !is_live && !keep_dead {
                    continue;
                }
                live += usize::from(is_live);
                rows.push(StoredRow {
                    token: found.token,
                    partition_key: found.partition_key,
                    clustering_key: found.clustering_key,
                    row,
                    position: ScanPosition(e.key),
                });
            }
            match entries.last() {
                Some(last) if entries.len() == batch => cursor = last.key,
                _ => break,
            }
        }
        rows.sort_by(|a, b| a.clustering_key.cmp(&b.clustering_key));
        if reverse {
            rows.reverse();
        }
        Ok(rows)
    }
}

/// Merges a table's range and partition tombstones into the rows a read meets, looking each
/// partition's up once (rows of a partition come together).
struct Shadows<'a> {
    inner: &'a Inner,
    index: &'a TableIndex,
    last: Option<(i64, Vec<u8>, Option<PartitionTombstones>)>,
}

impl<'a> Shadows<'a> {
    fn new(inner: &'a Inner, index: &'a TableIndex) -> Shadows<'a> {
        Shadows {
            inner,
            index,
            last: None,
        }
    }

    fn apply(&mut self, found: &mut Found, now_s: u32) -> Result<(), ReadError> {
        if !self.index.may_have_range_tombstones() {
            return Ok(());
        }
        let same = matches!(&self.last, Some((t, p, _)) if *t == found.token && *p == found.partition_key);
        if !same {
            let t = self
                .inner
                .tombstones_of(self.index, found.token, &found.partition_key)?;
            self.last = Some((found.token, found.partition_key.clone(), t));
        }
        if let Some((_, _, Some(t))) = &self.last {
            t.shadow(&found.clustering_key, &mut found.row, now_s);
        }
        Ok(())
    }
}

pub(crate) fn decode_found(view: &RecordView<'_>) -> Result<Found, DecodeError> {
    Ok(Found {
        token: view.meta.token,
        partition_key: view.partition_key.to_vec(),
        clustering_key: view.clustering_key.to_vec(),
        row: decode_body(view.body, view.meta.write_timestamp_us)?,
        delta: None,
    })
}
