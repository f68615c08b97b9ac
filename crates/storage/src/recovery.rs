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
use std::sync::{Arc, RwLock};

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
    let (mut records, mut damaged_blocks) = (0u64, 0u64);
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
    // The last version written wins: every write merged the version before it, so the last
    // one holds everything the others did (and its timestamp is the newest, unless a tombstone
    // was purged after its grace period, when ordering by timestamp would wrongly bring it
    // back). Sequences are known for all blocks before any record is offered.
    let newer = |a: &Entry, b: &Entry| {
        (blocks.sequence(a.location.block()), a.location.offset())
            > (blocks.sequence(b.location.block()), b.location.offset())
    };
    let mut seen: HashMap<u32, Arc<TableIndex>> = HashMap::new();
    // Each row's newest delta record, kept if it turns out newer than the row's newest whole
    // version (`adopt_deltas`).
    let mut newest_deltas: HashMap<(u32, IndexKey), Delta> = HashMap::new();
    for (b, h) in headers {
        let (device, offset) = devices.locate(b);
        let mut buf = AlignedBuf::zeroed(block_size);
        if let Err(e) = device.read_at(&mut buf, offset) {
            tracing::error!(
                "block {b} on {} at offset {offset}: unreadable ({e}); its records are skipped",
                device.name()
            );
            damaged_blocks += 1;
            continue;
        }
        let end = walk_block(&buf, h.sequence, |off, view| {
            records += 1;
            let loc = Location::new(b, off as u32, view.record_bytes as u32);
            if view.meta.delta {
                let key = entry_for(view, loc).key;
                let later = |d: &Delta| order(blocks, loc) > order(blocks, d.location);
                if newest_deltas.get(&(view.meta.table, key)).is_none_or(later) {
                    newest_deltas.insert(
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
            // Looked up once per table, not once per record under the tables' write lock.
            let table = seen.entry(view.meta.table).or_insert_with(|| {
                let mut t = tables.write().expect("tables lock poisoned");
                Arc::clone(t.entry(view.meta.table).or_default())
            });
            match table.offer(entry_for(view, loc), newer) {
                Offer::Inserted => blocks.add_live(b, loc.len()),
                Offer::Replaced(old) => {
                    blocks.add_live(b, loc.len());
                    blocks.sub_live(old.location.block(), old.location.len());
                }
                Offer::Rejected => {}
            }
        });
        if let WalkEnd::Damaged { offset: at, detail } = end {
            damaged_blocks += 1;
            tracing::warn!(
                "block {b} (sequence {}) on {} at offset {}: record at block offset {at} does not \
                 verify ({detail}); the rest of this block is skipped. After a crash this is the \
                 unfinished tail of the last write; otherwise the device returned damaged data",
                h.sequence,
                device.name(),
                offset + at as u64
            );
        }
        if config.data_in_memory {
            cache.insert(b, h.sequence, Arc::new(buf), true);
        }
    }
    let adopted = adopt_deltas(blocks, tables, deltas, newest_deltas);
    tracing::info!(
        "cold start scanned {} blocks: {records} records, {damaged_blocks} damaged blocks, \
         {adopted} rows with a pending delta, in {:?}",
        blocks.len(),
        started.elapsed()
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
