//! hayate's storage engine, in the Aerospike mould.
//!
//! The index lives in RAM; records live on SSD in large log-structured write blocks written and
//! read with direct I/O; a background defragmenter reclaims blocks whose data has mostly been
//! rewritten elsewhere; there is no compaction. A read costs at most one device read, and none
//! for a recently written record (the post-write cache). A cold start rebuilds the index by
//! reading the blocks.
//!
//! The path of a write: [`Engine::write`] -> read the current version (index, then cache or
//! device) -> merge ([`row`]) -> encode ([`format::record`]) -> append to the open write block
//! ([`writer`]) -> point the index at it ([`index`]); an update that only sets cells skips the
//! read and is appended as a delta (`deltas.rs`). The flusher writes blocks to the
//! [`device`]; [`defrag`] and [`expiry`] run beside it; [`recovery`] and [`snapshot`] rebuild the
//! index at open. [`stream`] moves a token range's records to another node, in chunks
//! ([`format::stream`]).
//!
//! This crate knows nothing of CQL or the network: keys and values are bytes, columns are
//! numbers, and the API is synchronous (callers keep device I/O off their network threads).
//!
//! # Crate map
//!
//! Each module, and the modules of this crate it uses. Every module leans only on modules below
//! it: there is no import circle. The namespace core (`namespace/`) holds one namespace's state
//! behind methods; the engine above it opens, serves and closes, and the background work,
//! recovery, the index snapshot and streaming call the core without the core knowing them.
//!
//! ```text
//! engine/           Engine: open and close (open.rs), the public reads and writes (mod.rs),
//!                   secondary index builds and lookups (indexes.rs)
//!                     -> defrag, expiry, recovery, snapshot, namespace, keys, and below
//! defrag            moves live records out of emptying blocks  -> namespace, blocks, format
//! expiry            drops expired rows and old tombstones      -> namespace, keys, index
//! recovery          rebuilds the index at open                 -> snapshot, namespace, blocks,
//!                                                                 cache, deltas, format
//! snapshot          saves and loads the RAM index              -> namespace, blocks, deltas,
//!                                                                 format, files
//! snapshots/        table snapshots: index entries saved,      -> snapshot, namespace, blocks,
//!                   blocks pinned (Cassandra's snapshots)         format, files
//! stream/           export and import of a token range         -> namespace, keys, writer, format
//! namespace/        the core: one namespace's state and its    -> writer, read_ahead, deltas,
//!                   read (read.rs), write (write.rs) and range    cache, blocks, index, keys,
//!                   (scan.rs) paths                               format, range_tombstones, sindex
//! keys              row keys, scan positions, pages, limits    -> index, row, token
//! writer            the open write block, sealing, flushing    -> write_buffer, cache, blocks
//! write_buffer      blocks not yet on the device, in a RAM file -> blocks, format
//! config            a namespace's settings                     -> write_buffer (SLOTS_MAX)
//! read_ahead        device reads started ahead                 -> device, index, stats
//! deltas            updates written without reading the row   -> format, index, row
//! blocks            the block table and the device set         -> device, format, index
//! cache             the post-write cache                       -> device
//! error             the error of each operation                -> format
//! format/           blocks (and their walk), records, chunks,  -> range_tombstones, row, token
//!                   stream chunks; the crate's byte cursor
//! range_tombstones  a partition's range tombstones             -> row
//! sindex            secondary indexes: terms to rows, in RAM   -> keys, row
//! index/            the RAM index                              -> (nothing)
//! device/           files, memory, aligned buffers, io_uring   -> (nothing)
//! row, token, clock, files, stats                              -> (nothing)
//! ```
//!
//! The public API is what the crate root re-exports, and the modules other crates, the tests,
//! the examples and the fuzz targets name: `config`, `device`, `files`, `format`, `index`,
//! `range_tombstones`, `row`, `token` and `write_buffer` (for its path, in a crash test). The
//! rest is `pub(crate)` or private, but for the hidden `fuzzing` module, which hands the fuzz
//! targets the code they fuzz (cold start's block walk) without making it API.

pub(crate) mod blocks;
pub(crate) mod cache;
pub(crate) mod clock;
pub mod config;
pub(crate) mod defrag;
pub(crate) mod deltas;
pub mod device;
mod engine;
pub(crate) mod error;
pub(crate) mod expiry;
pub mod files;
pub mod format;
pub mod index;
mod keys;
pub(crate) mod namespace;
pub mod range_tombstones;
pub(crate) mod read_ahead;
pub(crate) mod recovery;
pub mod row;
pub(crate) mod sindex;
pub(crate) mod snapshot;
mod snapshots;
mod stats;
mod stream;
pub mod token;
pub mod write_buffer;
pub(crate) mod writer;

/// For the fuzz targets in `fuzz/` alone: not part of the API, hidden from its documentation, and
/// free to change with what it exposes.
#[doc(hidden)]
pub mod fuzzing {
    use crate::format::block::{walk_block as walk, WalkEnd};
    use crate::format::DecodeError;

    /// Where a walk stopped at bytes that are not a valid record of the block, and why.
    pub type Damage = (usize, DecodeError);

    /// Cold start's walk of a block's records ([`crate::format::block`]), the real one: each
    /// record it accepts, as `(offset, length)` in the block, and, if it stopped at bytes that
    /// are not a valid record of this block's `sequence`, where and why.
    pub fn walk_block(block: &[u8], sequence: u64) -> (Vec<(usize, usize)>, Option<Damage>) {
        let mut records = Vec::new();
        let end = walk(block, sequence, |offset, view| {
            records.push((offset, view.record_bytes))
        });
        match end {
            WalkEnd::Clean => (records, None),
            WalkEnd::Damaged { offset, detail } => (records, Some((offset, detail))),
        }
    }

    /// The row as an encoder of it can express it, for round-trip checks of the record body
    /// and of the internode row format: an expiry time without a TTL is not written (only a
    /// TTL's expiry is), so it reads back as 0. Nothing reads an expiry whose TTL is 0, so the
    /// two rows mean the same.
    pub fn canonical_row(mut row: crate::Row) -> crate::Row {
        if let Some(l) = &mut row.liveness {
            if l.ttl_s == 0 {
                l.expires_at_s = 0;
            }
        }
        for c in &mut row.cells {
            if let crate::CellValue::Live {
                ttl_s: 0,
                expires_at_s,
                ..
            } = &mut c.value
            {
                *expires_at_s = 0;
            }
        }
        row
    }
}

pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{DeviceConfig, NamespaceConfig};
pub use engine::{Engine, IndexReadError, IndexState};
pub use error::{OpenError, ReadError, WriteError};
pub use keys::{
    PartitionKey, RowKey, RowsFrom, RowsPage, ScanFrom, ScanPosition, StoredRow, TableId, KEY_MAX_BYTES,
    ROW_MAX_BYTES, TOMBSTONES_PER_READ_MAX,
};
pub use range_tombstones::{PartitionTombstones, RangeTombstone, RANGE_TOMBSTONES_PER_PARTITION_MAX};
pub use read_ahead::{Installed, ReadsAhead, ReadsDone};
pub use row::{Cell, CellValue, Deletion, Liveness, Row};
pub use sindex::{entry_term, IndexSpec, IndexTarget, TermOrder, TermRange};
pub use snapshots::{
    valid_tag as valid_snapshot_tag, Snapshot, SnapshotError, SnapshotRecord, SnapshotSpace, SnapshotSummary,
};
pub use stats::{DefragStatus, LatencySnapshot, Stats, StatsSnapshot, TableStats};
pub use stream::{ExportedChunk, ImportError, ImportStats, RangeSize};
