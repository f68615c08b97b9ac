//! Cold start: rebuild the RAM index by reading every block.
//!
//! Each block with a valid header is read whole and its records walked in order. For a key
//! found more than once, the last version written wins: the later block sequence, then the
//! later offset. Every stored version is the merge of all before it, so the last written is the
//! whole truth, and its write timestamp is the newest. Tombstones are loaded like rows, so a deleted row
//! stays deleted. A block whose header fails its checksum is logged with its place and treated
//! as free; a record that fails its checksum ends the walk of its block, logged likewise. The
//! engine opens either way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use crate::blocks::{read_header, BlockState, BlockTable, DeviceSet};
use crate::cache::PostWriteCache;
use crate::config::NamespaceConfig;
use crate::deltas::{Delta, Deltas};
use crate::device::AlignedBuf;
use crate::format::block::{walk_block, WalkEnd};
use crate::format::chunks::ChunkList;
use crate::format::record::{decode_record, RecordView};
use crate::index::{
    Entry, IndexKey, Location, Offer, TableIndex, FLAG_DELTA, FLAG_HAS_DELETIONS, FLAG_HAS_OLDER,
    FLAG_RANGE_TOMBSTONES, FLAG_TOMBSTONE,
};
use crate::index::{FLAG_CHUNKED, PARTITIONS};
use crate::namespace::{ChunkOwners, Recovered};
use crate::token::clustering_prefix;

type Tables = RwLock<HashMap<u32, Arc<TableIndex>>>;

pub(crate) fn entry_for(view: &RecordView<'_>, location: Location) -> Entry {
    Entry {
        key: IndexKey {
            token: view.meta.token,
            clustering_prefix: clustering_prefix(view.clustering_key),
            digest: view.meta.digest,
        },
        location,
        write_timestamp_us: view.meta.write_timestamp_us,
        expiry_s: view.meta.expiry_s,
        flags: if view.meta.tombstone { FLAG_TOMBSTONE } else { 0 }
            | if view.meta.has_deletions {
                FLAG_HAS_DELETIONS
            } else {
                0
            }
            | if view.meta.range_tombstones {
                FLAG_RANGE_TOMBSTONES
            } else {
                0
            }
            | if view.meta.chunked { FLAG_CHUNKED } else { 0 },
    }
}

pub(crate) fn recover(
    config: &NamespaceConfig,
    devices: &DeviceSet,
    blocks: &BlockTable,
    cache: &PostWriteCache,
    tables: &Tables,
    deltas: &Deltas,
) -> Recovered {
    let mut chunk_blocks = Vec::new();
    let mut recovered = None;
    if let Some(path) = &config.index_snapshot_path {
        if let Some(r) = crate::snapshot::load(path, devices, blocks, tables, deltas, &mut chunk_blocks) {
            if config.data_in_memory {
                load_blocks_into_cache(devices, blocks, cache);
            }
            recovered = Some(r);
        }
    }
    let from_snapshot = recovered.is_some();
    let mut recovered = recovered.unwrap_or_else(|| {
        chunk_blocks.clear();
        scan(config, devices, blocks, cache, tables, deltas, &mut chunk_blocks)
    });
    recovered.chunks = adopt_chunks(devices, blocks, tables, &chunk_blocks);
    if config.data_in_memory && !from_snapshot {
        // The scan cached the blocks it walked; chunk blocks are not walked.
        for &b in recovered.chunks.values().flatten() {
            load_block_into_cache(devices, blocks, cache, b);
        }
    }
    recovered
}

/// Gives each chunked row found in the index the chunk blocks its head names, and frees every
/// other chunk block: those of rows since rewritten, or of a write cut short before its head.
/// `chunk_blocks` are the blocks whose header has the chunk flag (marked holding until now).
fn adopt_chunks(
    devices: &DeviceSet,
    blocks: &BlockTable,
    tables: &Tables,
    chunk_blocks: &[u32],
) -> ChunkOwners {
    let mut owners = ChunkOwners::new();
    let mut unclaimed: std::collections::HashSet<u32> = chunk_blocks.iter().copied().collect();
    let mut lost = 0u64;
    let tables: Vec<(u32, Arc<TableIndex>)> = tables
        .read()
        .expect("tables lock poisoned")
        .iter()
        .map(|(id, t)| (*id, Arc::clone(t)))
        .collect();
    for (table, index) in tables {
        for p in 0..PARTITIONS {
            for e in index.partition_select(p, Entry::is_chunked) {
                let list = match read_chunk_list(devices, blocks, &e) {
                    Ok(list) => list,
                    Err(why) => {
                        lost += 1;
                        tracing::error!(
                            "table {table}: the head of a chunked row at block {} offset {} \
                             cannot be read ({why}); reads of that row fail until it is written again",
                            e.location.block(),
                            e.location.offset()
                        );
                        continue;
                    }
                };
                let present = |c: &crate::format::chunks::Chunk| {
                    unclaimed.contains(&c.block) && blocks.sequence(c.block) == c.sequence
                };
                if !list.chunks.iter().all(present) {
                    lost += 1;
                    tracing::error!(
                        "table {table}: a chunked row at block {} offset {} names chunk blocks that \
                         no longer hold its chunks; reads of that row fail until it is written again",
                        e.location.block(),
                        e.location.offset()
                    );
                    continue;
                }
                for c in &list.chunks {
                    unclaimed.remove(&c.block);
                    blocks.set_state(c.block, BlockState::Chunk);
                    blocks.add_live(c.block, devices.block_size_bytes());
                }
                owners.insert((table, e.key), list.chunks.iter().map(|c| c.block).collect());
            }
        }
    }
    for &b in &unclaimed {
        blocks.release(b);
    }
    if !chunk_blocks.is_empty() {
        tracing::info!(
            "{} chunked rows hold {} chunk blocks; {} chunk blocks freed, {lost} rows lost chunks",
            owners.len(),
            chunk_blocks.len() - unclaimed.len(),
            unclaimed.len()
        );
    }
    owners
}

/// Reads the head record an entry points at and the chunk list in its body.
fn read_chunk_list(devices: &DeviceSet, blocks: &BlockTable, e: &Entry) -> Result<ChunkList, String> {
    let loc = e.location;
    let (device, block_offset) = devices.locate(loc.block());
    let start = crate::device::align_down(loc.offset() as usize);
    let len = crate::device::align_up((loc.offset() + loc.len()) as usize) - start;
    let mut buf = AlignedBuf::zeroed(len);
    device
        .read_at(&mut buf, block_offset + start as u64)
        .map_err(|e| format!("unreadable: {e}"))?;
    let from = loc.offset() as usize - start;
    let view = decode_record(&buf[from..], blocks.sequence(loc.block())).map_err(|d| d.to_string())?;
    ChunkList::decode(view.body).map_err(|d| d.to_string())
}

fn scan(
    config: &NamespaceConfig,
    devices: &DeviceSet,
    blocks: &BlockTable,
    cache: &PostWriteCache,
    tables: &Tables,
    deltas: &Deltas,
    chunk_blocks: &mut Vec<u32>,
) -> Recovered {
    let started = std::time::Instant::now();
    let mut max_sequence = 0u64;
    let block_size = devices.block_size_bytes() as usize;
    let mut headers = Vec::with_capacity(blocks.len() as usize);
    for b in 0..blocks.len() {
        match read_header(devices, b) {
            Some(h) if !h.free => {
                // Counted even if the body turns out unreadable: that sequence was used.
                max_sequence = max_sequence.max(h.sequence);
                blocks.mark_holding(b, h.sequence);
                if h.chunk {
                    // No records: reached through a head, or freed (`adopt_chunks`).
                    chunk_blocks.push(b);
                } else {
                    headers.push((b, h));
                }
            }
            Some(h) => {
                max_sequence = max_sequence.max(h.sequence);
                blocks.release(b);
            }
            None => blocks.release(b),
        }
    }
    // The blocks are read and walked by a few threads at once, each taking the next block in
    // device order: walking a block (checksums, index inserts) costs more CPU than reading it
    // costs the device, so one thread alone leaves the device idle half the time. Records are
    // offered in any order: the newest version wins whatever order they come in (`newer`).
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, SCAN_THREADS_MAX)
        .min(headers.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let progress = Mutex::new(Progress::new(headers.len(), block_size, blocks.len()));
    let scan = Scan {
        config,
        devices,
        blocks,
        cache,
        tables,
    };
    // The threads log where this one does (a test's capture, say).
    let dispatch = tracing::dispatcher::get_default(|d| d.clone());
    let walked: Vec<Walked> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    tracing::dispatcher::with_default(&dispatch, || {
                        let mut mine = Walked::default();
                        // One buffer for every block, unless each is kept in RAM (data in memory).
                        let mut reused = None;
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(&(b, h)) = headers.get(i) else { break };
                            progress.lock().expect("progress lock poisoned").block_done(i);
                            reused = scan.block(b, h.sequence, reused.take(), &mut mine);
                        }
                        mine
                    })
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("cold start scan thread panicked"))
            .collect()
    });
    let mut records = 0u64;
    let mut damaged_blocks = 0u64;
    let mut newest_deltas: HashMap<(u32, IndexKey), Delta> = HashMap::new();
    for w in walked {
        records += w.records;
        damaged_blocks += w.damaged_blocks;
        for (key, d) in w.newest_deltas {
            let later = |old: &Delta| order(blocks, d.location) > order(blocks, old.location);
            if newest_deltas.get(&key).is_none_or(later) {
                newest_deltas.insert(key, d);
            }
        }
    }
    let progress = progress.into_inner().expect("progress lock poisoned");
    count_live(blocks, tables);
    let adopted = adopt_deltas(blocks, tables, deltas, newest_deltas);
    let took = started.elapsed();
    let read_mib = progress.total as f64 * block_size as f64 / f64::from(1 << 20);
    tracing::info!(
        "cold start read the {} of {} blocks that hold data ({read_mib:.0} MiB): {records} records, \
         {damaged_blocks} damaged blocks, {adopted} rows with a pending delta, in {took:?} ({:.0} MiB/s)",
        progress.total,
        blocks.len(),
        read_mib / took.as_secs_f64().max(1e-9)
    );
    Recovered {
        next_sequence: max_sequence + 1,
        chunks: ChunkOwners::new(),
    }
}

/// Where a record stands in the order records were written: its block's sequence, then its
/// offset.
fn order(blocks: &BlockTable, loc: Location) -> (u64, u32) {
    (blocks.sequence(loc.block()), loc.offset())
}

/// Keeps each row's newest delta if it was written after the row's newest whole version (the
/// delta's base); an older one was folded into that version, or the row was deleted or written
/// whole since. Returns the deltas kept.
fn adopt_deltas(
    blocks: &BlockTable,
    tables: &Tables,
    deltas: &Deltas,
    newest: HashMap<(u32, IndexKey), Delta>,
) -> usize {
    let tables = tables.read().expect("tables lock poisoned");
    let mut adopted = 0;
    for ((table, key), mut delta) in newest {
        let Some(index) = tables.get(&table) else {
            continue;
        };
        let Some(mut e) = index.get(&key) else {
            continue; // no whole version: nothing to apply it over
        };
        e.flags |= FLAG_HAS_OLDER;
        let over = !e.is_tombstone() && !e.is_chunked() && !e.is_range_tombstones();
        if over && order(blocks, delta.location) > order(blocks, e.location) {
            e.flags |= FLAG_DELTA;
            e.write_timestamp_us = e.write_timestamp_us.max(delta.write_timestamp_us);
            delta.base = e.location;
            blocks.add_live(delta.location.block(), delta.location.len());
            deltas.insert(table, key, delta);
            adopted += 1;
        }
        index.upsert(e);
    }
    adopted
}

fn load_blocks_into_cache(devices: &DeviceSet, blocks: &BlockTable, cache: &PostWriteCache) {
    for b in 0..blocks.len() {
        if blocks.state(b) != BlockState::Free {
            load_block_into_cache(devices, blocks, cache, b);
        }
    }
}

fn load_block_into_cache(devices: &DeviceSet, blocks: &BlockTable, cache: &PostWriteCache, b: u32) {
    let (device, offset) = devices.locate(b);
    let mut buf = AlignedBuf::zeroed(devices.block_size_bytes() as usize);
    match device.read_at(&mut buf, offset) {
        Ok(()) => cache.insert(b, blocks.sequence(b), Arc::new(buf), true),
        Err(e) => tracing::error!("block {b} on {}: unreadable ({e})", device.name()),
    }
}

/// How often a cold start logs how far it is.
const PROGRESS_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// A cold start's progress through the blocks that hold data, logged every
/// [`PROGRESS_INTERVAL`] with its rate and the time left, so that an operator waiting on a
/// large device sees it move.
struct Progress {
    total: usize,
    done: usize,
    block_bytes: usize,
    started: std::time::Instant,
    last: std::time::Instant,
}

impl Progress {
    fn new(total: usize, block_bytes: usize, all_blocks: u32) -> Progress {
        let now = std::time::Instant::now();
        tracing::info!(
            "cold start: reading the {total} of {all_blocks} blocks that hold data ({} MiB) to \
             rebuild the index",
            (total * block_bytes) >> 20
        );
        Progress {
            total,
            done: 0,
            block_bytes,
            started: now,
            last: now,
        }
    }

    /// Called before the `done`th block is read.
    fn block_done(&mut self, done: usize) {
        self.done = done;
        let now = std::time::Instant::now();
        if now.duration_since(self.last) >= PROGRESS_INTERVAL && self.done > 0 {
            self.last = now;
            let secs = now.duration_since(self.started).as_secs_f64();
            let per_s = self.done as f64 / secs;
            let left_s = (self.total - self.done) as f64 / per_s.max(1e-9);
            tracing::info!(
                "cold start: {} of {} blocks read ({:.0}%), {:.0} MiB/s, about {left_s:.0} s left",
                self.done,
                self.total,
                100.0 * self.done as f64 / self.total.max(1) as f64,
                per_s * self.block_bytes as f64 / f64::from(1 << 20)
            );
        }
    }
}

/// Threads a cold start walks blocks on, at most.
const SCAN_THREADS_MAX: usize = 8;

/// What every thread of a cold start's scan shares.
struct Scan<'a> {
    config: &'a NamespaceConfig,
    devices: &'a DeviceSet,
    blocks: &'a BlockTable,
    cache: &'a PostWriteCache,
    tables: &'a Tables,
}

/// What one thread of the scan found.
#[derive(Default)]
struct Walked {
    records: u64,
    damaged_blocks: u64,
    /// Each row's newest delta record this thread saw.
    newest_deltas: HashMap<(u32, IndexKey), Delta>,
    /// Each table's index, looked up once per thread, not once per record.
    seen: HashMap<u32, Arc<TableIndex>>,
}

impl Scan<'_> {
    /// Reads block `b` (written at `sequence`) into `buf` (or a new buffer) and offers each of
    /// its records to the index; the buffer, to read the next block into, unless the block is
    /// kept in RAM.
    fn block(&self, b: u32, sequence: u64, buf: Option<AlignedBuf>, w: &mut Walked) -> Option<AlignedBuf> {
        let blocks = self.blocks;
        // The last version written wins: every write merged the version before it, so the last
        // one holds everything the others did (and its timestamp is the newest, unless a
        // tombstone was purged after its grace period, when ordering by timestamp would wrongly
        // bring it back). Sequences are known for all blocks before any record is offered.
        let newer = |a: &Entry, b: &Entry| {
            (blocks.sequence(a.location.block()), a.location.offset())
                > (blocks.sequence(b.location.block()), b.location.offset())
        };
        let (device, offset) = self.devices.locate(b);
        let mut buf = buf.unwrap_or_else(|| AlignedBuf::zeroed(self.devices.block_size_bytes() as usize));
        if let Err(e) = device.read_at(&mut buf, offset) {
            tracing::error!(
                "block {b} on {} at offset {offset}: unreadable ({e}); its records are skipped",
                device.name()
            );
            w.damaged_blocks += 1;
            return Some(buf);
        }
        let end = walk_block(&buf, sequence, |off, view| {
            w.records += 1;
            let loc = Location::new(b, off as u32, view.record_bytes as u32);
            if view.meta.delta {
                let key = entry_for(view, loc).key;
                let later = |d: &Delta| order(blocks, loc) > order(blocks, d.location);
                if w.newest_deltas.get(&(view.meta.table, key)).is_none_or(later) {
                    w.newest_deltas.insert(
                        (view.meta.table, key),
                        Delta {
                            base: loc,
                            location: loc,
                            write_timestamp_us: view.meta.write_timestamp_us,
                            body: view.body.into(),
                        },
                    );
                }
                return;
            }
            let table = w.seen.entry(view.meta.table).or_insert_with(|| {
                let mut t = self.tables.write().expect("tables lock poisoned");
                Arc::clone(t.entry(view.meta.table).or_default())
            });
            // Live bytes are counted once every record is in (`count_live`): counted here, a
            // version could be replaced by another thread before its own count was added.
            let _: Offer = table.offer(entry_for(view, loc), newer);
        });
        if let WalkEnd::Damaged { offset: at, detail } = end {
            w.damaged_blocks += 1;
            tracing::warn!(
                "block {b} (sequence {sequence}) on {} at offset {}: record at block offset {at} does \
                 not verify ({detail}); the rest of this block is skipped. After a crash this is the \
                 unfinished tail of the last write; otherwise the device returned damaged data",
                device.name(),
                offset + at as u64
            );
        }
        if self.config.data_in_memory {
            self.cache.insert(b, sequence, Arc::new(buf), true);
            return None;
        }
        Some(buf)
    }
}

/// Counts the live bytes of every block from the index entries that point into it.
fn count_live(blocks: &BlockTable, tables: &Tables) {
    for index in tables.read().expect("tables lock poisoned").values() {
        for p in 0..PARTITIONS {
            index.partition_select(p, |e| {
                blocks.add_live(e.location.block(), e.location.len());
                false
            });
        }
    }
}
