//! Streaming: the engine's side of moving a token range to another node (join, decommission,
//! replace). The sender exports the range's records chunk by chunk, as stored
//! ([`Engine::export_range`], reading in `export.rs`); the receiver applies each chunk as replica
//! writes ([`Engine::import_chunk`]); once the range has moved, the node that no longer owns it
//! forgets it ([`Engine::remove_range`]). [`Engine::range_size`] gives the total a stream's
//! progress is measured against. The chunk format is `format/stream.rs`.
//!
//! Token ranges follow Cassandra's: `(start, end]`, start exclusive, end inclusive. A range that
//! wraps around the ring is the caller's to split in two.

mod export;
#[cfg(test)]
mod measure;

use std::fmt;
use std::ops::RangeInclusive;

use crate::error::{ReadError, WriteError};
use crate::format::stream::{decode_chunk, Contents, CHUNK_HEADER_BYTES};
use crate::format::DecodeError;
use crate::index::{partition_of, Entry, TableIndex};
use crate::keys::{PartitionKey, RowKey, ScanFrom, ScanPosition, TableId};
use crate::namespace::Namespace;
use crate::writer::Position;
use crate::Engine;

/// An entry that changed under `remove_range` is looked up again this often before it is left.
const REMOVE_ATTEMPTS_MAX: usize = 4;

/// One chunk of an exported range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportedChunk {
    /// One stream chunk (`format/stream.rs`), ready to send as is.
    pub bytes: Vec<u8>,
    /// Records in the chunk.
    pub records: u64,
    /// The bytes those records take on this node's device: the measure of
    /// [`RangeSize::bytes`], so that summed over a range's chunks it reaches that total (less
    /// what was written or removed meanwhile).
    pub data_bytes: u64,
    /// Where the next chunk of the same range starts; `None` once the range is exhausted.
    pub next: Option<ScanPosition>,
}

/// What [`Engine::import_chunk`] applied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImportStats {
    pub records: u64,
    /// The bytes of the records' keys and encoded bodies as received (the chunk less its
    /// framing).
    pub data_bytes: u64,
}

/// How much of a table's index lies in a token range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RangeSize {
    pub records: u64,
    /// The bytes those records take on the device: each record, a row's pending delta, and the
    /// whole blocks a row larger than a block is written in.
    pub bytes: u64,
}

/// Why a chunk was not applied, or not wholly.
#[derive(Debug)]
#[non_exhaustive]
pub enum ImportError {
    /// The chunk does not decode: nothing of it was applied.
    Decode { detail: DecodeError },
    /// The chunk holds another table's records than the caller expected: nothing of it was
    /// applied.
    OtherTable { expected: TableId, found: TableId },
    /// A record could not be written: the records before it are applied, the rest are not.
    Write(WriteError),
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImportError::Decode { detail } => write!(
                f,
                "stream chunk refused, nothing of it applied: {detail}; it was damaged on the \
                 way or by the sender: request it again from the position it started at"
            ),
            ImportError::OtherTable { expected, found } => write!(
                f,
                "stream chunk of table {found} where table {expected} was expected, nothing of it \
                 applied: the two nodes disagree on the table's id; settle the schema first"
            ),
            ImportError::Write(e) => write!(
                f,
                "stream chunk applied only in part: {e}; applying a chunk again changes nothing \
                 already applied, so send it again once the cause is fixed"
            ),
        }
    }
}

impl std::error::Error for ImportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ImportError::Decode { detail } => Some(detail),
            ImportError::Write(e) => Some(e),
            ImportError::OtherTable { .. } => None,
        }
    }
}

impl Engine {
    /// Every record of `table` whose token lies in the range, from `from` (`ScanFrom::Token(t)`:
    /// the first entry with token >= t; `ScanFrom::After(pos)`: just after a position a previous
    /// chunk returned in `next`) up to `end_token` inclusive, as stored: live rows, row
    /// tombstones, expired cells, TTLs, a partition's range and partition tombstones, a row with
    /// a pending delta (sent merged with it), a row written in chunks (sent whole).
    ///
    /// Stops after about `max_bytes` of encoded records (at most
    /// [`crate::format::stream::CHUNK_DATA_BYTES_MAX`], and always at least one record, so one
    /// 32 MiB row still goes). Reads only what the index names in the range, in device order
    /// (`export.rs` says why).
    pub fn export_range(
        &self,
        table: TableId,
        from: ScanFrom,
        end_token: i64,
        max_bytes: usize,
    ) -> Result<ExportedChunk, ReadError> {
        export::export(
            &self.inner,
            table,
            from,
            end_token,
            max_bytes,
            export::ReadOrder::DEFAULT,
        )
    }

    /// Verifies a whole chunk (magic, version, checksum, every record decodes, every record's
    /// token is the Murmur3 token of its partition key) before applying anything, then merges
    /// each record as a replica write would: rows through the same read-merge-write (last write
    /// wins per cell, deletions kept with their deletion times, TTLs as they are; a cell that
    /// expired before it arrives becomes a tombstone dated by its expiry, as any merge makes
    /// it), a partition's tombstones through the same merge as [`Engine::delete_range`].
    /// Applying a chunk twice, or an older one after a newer, changes nothing a read sees. With
    /// `commit_to_device` it returns once the chunk is durable, like [`Engine::write`].
    pub fn import_chunk(&self, chunk: &[u8]) -> Result<ImportStats, ImportError> {
        import(&self.inner, None, chunk)
    }

    /// [`Engine::import_chunk`], refusing a chunk of any table but `table` before applying
    /// anything.
    pub fn import_chunk_into(&self, table: TableId, chunk: &[u8]) -> Result<ImportStats, ImportError> {
        import(&self.inner, Some(table), chunk)
    }

    /// Forgets every record of `table` with `start_exclusive < token <= end_inclusive` (the
    /// cleanup of a range this node no longer owns), as [`Engine::drop_table`] does for a whole
    /// table; returns how many. Their space counts as dead at once, for defragmentation to
    /// reclaim; the records stay on the device until then, and a cold start that scans the
    /// device in between finds them again: the caller removes the ranges it does not own again
    /// after each open. A record rewritten while this runs is looked up again and removed too.
    pub fn remove_range(&self, table: TableId, start_exclusive: i64, end_inclusive: i64) -> usize {
        let inner = &*self.inner;
        let Some(index) = inner.existing_table(table) else {
            return 0;
        };
        let mut removed = 0;
        for_each_in_range(&index, start_exclusive, end_inclusive, |e| {
            if remove_current(inner, table, &index, e) {
                removed += 1;
            }
        });
        removed
    }

    /// How many records, and bytes on the device, the index holds in the range
    /// (`start_exclusive < token <= end_inclusive`), from the RAM index alone: the total a
    /// stream's progress is measured against (see [`ExportedChunk::data_bytes`]).
    pub fn range_size(&self, table: TableId, start_exclusive: i64, end_inclusive: i64) -> RangeSize {
        let inner = &*self.inner;
        let mut size = RangeSize::default();
        if let Some(index) = inner.existing_table(table) {
            for_each_in_range(&index, start_exclusive, end_inclusive, |e| {
                size.records += 1;
                size.bytes += stored_bytes(inner, table, &e);
            });
        }
        size
    }
}

fn import(inner: &Namespace, expected: Option<TableId>, chunk: &[u8]) -> Result<ImportStats, ImportError> {
    let decoded = decode_chunk(chunk).map_err(|detail| ImportError::Decode { detail })?;
    let table = decoded.table;
    if let Some(expected) = expected.filter(|&t| t != table) {
        return Err(ImportError::OtherTable {
            expected,
            found: table,
        });
    }
    let records = decoded.records.len() as u64;
    let mut last: Option<Position> = None;
    for r in decoded.records {
        let written = match r.contents {
            Contents::Row(row) => inner.write_row(
                RowKey {
                    table,
                    token: r.token,
                    partition: r.partition_key,
                    clustering: r.clustering_key,
                },
                row,
            ),
            // Nothing to merge; the engine never stores such a record, but a write of it
            // would leave one behind.
            Contents::Tombstones(t) if t.is_empty() => continue,
            Contents::Tombstones(t) => inner.write_tombstones(
                PartitionKey {
                    table,
                    token: r.token,
                    key: r.partition_key,
                },
                t,
            ),
        };
        let pos = written.map_err(ImportError::Write)?;
        last = last.max(Some(pos));
    }
    // One group commit for the whole chunk: every write of it ends at or before the last.
    if let Some(pos) = last.filter(|_| inner.config().commit_to_device) {
        inner.writer().wait_durable(pos).map_err(ImportError::Write)?;
    }
    Ok(ImportStats {
        records,
        data_bytes: (chunk.len() - CHUNK_HEADER_BYTES) as u64,
    })
}

/// The index partitions a token range `(start_exclusive, end_inclusive]` touches; `None` for
/// an empty range.
fn partitions_of(start_exclusive: i64, end_inclusive: i64) -> Option<RangeInclusive<usize>> {
    // start < end <= i64::MAX, so start + 1 does not overflow.
    (start_exclusive < end_inclusive).then(|| partition_of(start_exclusive + 1)..=partition_of(end_inclusive))
}

/// Calls `f` on every entry in the token range, one index partition's entries at a time (copied
/// out under the partition's lock, so `f` may take other locks).
fn for_each_in_range(index: &TableIndex, start_exclusive: i64, end_inclusive: i64, mut f: impl FnMut(Entry)) {
    let Some(partitions) = partitions_of(start_exclusive, end_inclusive) else {
        return;
    };
    let in_range = |e: &Entry| start_exclusive < e.key.token && e.key.token <= end_inclusive;
    for p in partitions {
        for e in index.partition_select(p, in_range) {
            f(e);
        }
    }
}

/// Removes the row `e` names, in whatever version the index holds now; false if it is gone.
fn remove_current(inner: &Namespace, table: TableId, index: &TableIndex, mut e: Entry) -> bool {
    for _ in 0..REMOVE_ATTEMPTS_MAX {
        if inner.remove_entry(table, index, &e) {
            return true;
        }
        match index.get(&e.key) {
            Some(now) => e = now,
            None => return false,
        }
    }
    false
}

/// The bytes an entry's row takes on the device, as `remove_entry` counts them dead: its
/// record, its pending delta's record, and the whole blocks of a row written in chunks.
pub(crate) fn stored_bytes(inner: &Namespace, table: TableId, e: &Entry) -> u64 {
    let mut bytes = u64::from(e.location.len());
    if e.has_delta() {
        bytes += inner
            .deltas()
            .location(table, &e.key)
            .map_or(0, |d| u64::from(d.len()));
    }
    if e.is_chunked() {
        let blocks = inner.lock_chunks().get(&(table, e.key)).map_or(0, Vec::len);
        bytes += blocks as u64 * u64::from(inner.config().block_size_bytes);
    }
    bytes
}
