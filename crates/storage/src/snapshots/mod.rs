//! Table snapshots, as Cassandra's `nodetool snapshot`: the rows of some tables as they were
//! at one moment, kept on this node until cleared, to restore from or export.
//!
//! Write blocks are never changed in place, so a snapshot copies no record: it saves the index
//! entries of its tables (`file.rs`: 48 bytes a row, plus any pending delta's cells) and pins
//! the blocks those entries point into. A pinned block is never freed until every snapshot that
//! pins it is cleared: defragmentation leaves it alone however little of it is still live (its
//! rows rewritten, deleted, or their table dropped), and one that was already on its way to be
//! freed (a chunk block whose row went, a block defragmented just before) is Held (`blocks.rs`)
//! rather than wiped and reused. Taking one is one pass over the tables' index entries in RAM,
//! with no device I/O but its own file.
//!
//! Each row is as it was at some instant during that pass: a write acknowledged before the
//! snapshot started is in it, a write acknowledged after it ended is not, and a write during
//! it may or may not be (a row is never half of each). While a snapshot is being taken no
//! block is freed (blocks that would be are Held, and those it did not pin go back to
//! defragmentation as it ends), so no entry it copied can point at a block reused under it.
//!
//! **What it costs.** Nothing at first: it pins blocks that hold live data anyway. As the data
//! changes, the pinned blocks can no longer be reclaimed, up to all of them: a snapshot holds
//! at most its pinned bytes (block count × block size). So a snapshot is refused when the
//! blocks it would newly pin exceed the free blocks beyond the stop-writes reserve (else
//! rewriting its data could stop writes); [`Engine::take_snapshot`]'s `force` takes it anyway
//! (an automatic snapshot before a DROP, whose blocks hold dead data from then on). And while
//! a pinned block is on the device, a tombstone whose row has older versions in blocks at
//! least as old is not purged (`expiry.rs` counts Held blocks as in use): the pinned blocks
//! are read at a cold start, so the tombstone must stay to hide what they hold.
//!
//! At open, the pinned blocks of every snapshot under the namespace's `snapshots_dir` are read
//! from the front of each file and pinned before the index is rebuilt, so that recovery frees
//! none of them; a pinned block whose sequence is no longer the one saved makes its snapshot
//! damaged, which is logged and refused when read.

mod file;

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::blocks::{BlockState, BlockTable};
use crate::error::ReadError;
use crate::format::record::{decode_body, decode_tombstones_body};
use crate::format::DecodeError;
use crate::index::{Entry, PARTITIONS};
use crate::keys::{ScanPosition, StoredRow, TableId};
use crate::namespace::{decode_found, Namespace};
use crate::range_tombstones::PartitionTombstones;

use file::{Contents, SavedDelta, SavedTable};

/// The storage engine's file in a snapshot's directory.
pub const FILE_NAME: &str = "rows.index";

/// What taking a snapshot did.
#[derive(Clone, Debug)]
pub struct SnapshotSummary {
    /// Each table and the entries (rows, tombstones, partition tombstones) it saved.
    pub tables: Vec<(TableId, u64)>,
    /// Blocks the snapshot pins, and of them those no other snapshot pinned.
    pub pinned_blocks: u64,
    pub newly_pinned_blocks: u64,
    pub block_size_bytes: u32,
    /// How long the copy of the index took.
    pub took: std::time::Duration,
}

impl SnapshotSummary {
    /// The most device space the snapshot can hold (all its pinned blocks).
    pub fn pinned_bytes(&self) -> u64 {
        self.pinned_blocks * u64::from(self.block_size_bytes)
    }
}

/// Device space held for snapshots.
#[derive(Clone, Copy, Debug, Default)]
pub struct SnapshotSpace {
    /// Blocks some snapshot pins (the most the snapshots can hold).
    pub pinned_blocks: u64,
    /// The bytes of those blocks that hold no live data: the space only the snapshots keep now
    /// (it grows as their rows are rewritten or deleted, up to all of the pinned blocks).
    pub held_bytes: u64,
    pub block_size_bytes: u32,
}

/// Why a snapshot operation failed.
#[derive(Debug)]
pub enum SnapshotError {
    /// The namespace has no `snapshots_dir`.
    Disabled,
    /// A tag that is not a plain name (letters, digits, `.`, `_`, `-`).
    BadTag(String),
    Exists(String),
    NotFound(String),
    /// Refused: pinning this many more blocks could stop writes.
    WouldStopWrites {
        newly_pinned_bytes: u64,
        free_bytes: u64,
    },
    Io {
        path: PathBuf,
        source: io::Error,
    },
    /// The snapshot's file does not verify, or its blocks no longer hold what it saved.
    Damaged {
        tag: String,
        detail: String,
    },
    Read(ReadError),
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::Disabled => write!(f, "this namespace keeps no snapshots (no snapshots_dir)"),
            SnapshotError::BadTag(t) => write!(
                f,
                "snapshot tag {t:?} is not a plain name: use letters, digits, '.', '_' and '-' (not \
                 starting with '.'), at most 200 characters"
            ),
            SnapshotError::Exists(t) => write!(f, "a snapshot tagged {t} already exists"),
            SnapshotError::NotFound(t) => write!(f, "no snapshot tagged {t}"),
            SnapshotError::WouldStopWrites {
                newly_pinned_bytes,
                free_bytes,
            } => write!(
                f,
                "refused: the snapshot would pin {} MiB more of the device, and only {} MiB are \
                 free beyond the stop-writes reserve, so rewriting its data could stop writes; \
                 clear old snapshots (hayate clearsnapshot) or snapshot fewer tables",
                newly_pinned_bytes >> 20,
                free_bytes >> 20
            ),
            SnapshotError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            SnapshotError::Damaged { tag, detail } => {
                write!(
                    f,
                    "snapshot {tag} is damaged ({detail}); clear it with hayate clearsnapshot"
                )
            }
            SnapshotError::Read(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SnapshotError {}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> SnapshotError + '_ {
    move |source| SnapshotError::Io {
        path: path.to_owned(),
        source,
    }
}

/// True for a tag that is safe as one directory name.
pub fn valid_tag(tag: &str) -> bool {
    !tag.is_empty()
        && tag.len() <= 200
        && !tag.starts_with('.')
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// The directory of snapshot `tag`.
pub(crate) fn dir_of(inner: &Namespace, tag: &str) -> Result<PathBuf, SnapshotError> {
    let root = inner
        .config()
        .snapshots_dir
        .as_ref()
        .ok_or(SnapshotError::Disabled)?;
    if !valid_tag(tag) {
        return Err(SnapshotError::BadTag(tag.to_owned()));
    }
    Ok(root.join(tag))
}

/// Ends a snapshot's copy however it leaves.
struct Taking<'a>(&'a BlockTable);

impl Drop for Taking<'_> {
    fn drop(&mut self) {
        self.0.end_taking();
    }
}

/// Takes snapshot `tag` of `tables` (see the module's doc).
pub(crate) fn take(
    inner: &Namespace,
    tag: &str,
    tables: &[TableId],
    force: bool,
) -> Result<SnapshotSummary, SnapshotError> {
    let dir = dir_of(inner, tag)?;
    let path = dir.join(FILE_NAME);
    if path.exists() {
        return Err(SnapshotError::Exists(tag.to_owned()));
    }
    std::fs::create_dir_all(&dir).map_err(io_error(&dir))?;
    let started = Instant::now();
    let blocks = inner.blocks();
    blocks.begin_taking();
    let taking = Taking(blocks);
    let mut contents = Contents {
        block_size_bytes: inner.config().block_size_bytes,
        taken_at_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        ..Contents::default()
    };
    // Block -> sequence, of every block an entry copied points into.
    let mut pinned: BTreeMap<u32, u64> = BTreeMap::new();
    let mut summary_tables = Vec::new();
    for &table in tables {
        let mut saved = SavedTable::default();
        if let Some(index) = inner.existing_table(table) {
            for p in 0..PARTITIONS {
                for e in index.partition_select(p, |_| true) {
                    if !(e.has_delta() || e.is_chunked()) {
                        saved.entries.push(e);
                        continue;
                    }
                    // A delta and a chunked row's blocks change hands only under the row's
                    // lock: read them with the entry they belong to.
                    let _row = inner.row_lock(table, &e.key);
                    let Some(e) = index.get(&e.key) else { continue };
                    if e.has_delta() {
                        if let Some(d) = inner.deltas().get(table, &e.key).filter(|d| d.base == e.location) {
                            saved.deltas.insert(
                                e.key,
                                SavedDelta {
                                    write_timestamp_us: d.write_timestamp_us,
                                    body: d.body,
                                },
                            );
                        }
                    }
                    if e.is_chunked() {
                        for &b in inner.lock_chunks().get(&(table, e.key)).into_iter().flatten() {
                            pinned.insert(b, blocks.sequence(b));
                        }
                    }
                    saved.entries.push(e);
                }
            }
        }
        for e in &saved.entries {
            let b = e.location.block();
            pinned.insert(b, blocks.sequence(b));
        }
        summary_tables.push((table, saved.entries.len() as u64));
        contents.tables.push((table, saved));
    }
    let newly_pinned = pinned
        .keys()
        .filter(|&&b| !blocks.pinned_by_a_snapshot(b))
        .count() as u64;
    let block_bytes = u64::from(contents.block_size_bytes);
    let free = blocks.free_beyond_reserve();
    if newly_pinned > free && !force {
        return Err(SnapshotError::WouldStopWrites {
            newly_pinned_bytes: newly_pinned * block_bytes,
            free_bytes: free * block_bytes,
        });
    }
    for &b in pinned.keys() {
        blocks.pin(b);
    }
    drop(taking);
    let took = started.elapsed();
    contents.pinned = pinned.into_iter().collect();
    if let Err(source) = file::write(&path, &contents) {
        blocks.unpin(contents.pinned.iter().map(|&(b, _)| b));
        return Err(SnapshotError::Io { path, source });
    }
    if newly_pinned > free {
        tracing::warn!(
            "snapshot {tag} pins {} MiB more of the device than is free beyond the stop-writes \
             reserve ({} MiB): taken anyway (automatic); clear it once it is no longer needed",
            (newly_pinned * block_bytes) >> 20,
            (free * block_bytes) >> 20
        );
    }
    Ok(SnapshotSummary {
        tables: summary_tables,
        pinned_blocks: contents.pinned.len() as u64,
        newly_pinned_blocks: newly_pinned,
        block_size_bytes: contents.block_size_bytes,
        took,
    })
}

/// Clears snapshot `tag`: its directory goes, then its blocks are unpinned.
pub(crate) fn clear(inner: &Namespace, tag: &str) -> Result<(), SnapshotError> {
    let dir = dir_of(inner, tag)?;
    let path = dir.join(FILE_NAME);
    if !dir.exists() {
        return Err(SnapshotError::NotFound(tag.to_owned()));
    }
    // A damaged file's pins cannot be read: they last until the next start, which skips them.
    let pins = file::read_pins(&path).ok();
    std::fs::remove_dir_all(&dir).map_err(io_error(&dir))?;
    let _ = crate::files::sync_dir(&dir);
    if let Some(contents) = pins {
        inner.blocks().unpin(contents.pinned.iter().map(|&(b, _)| b));
    }
    Ok(())
}

/// Pins the blocks of every snapshot under `root` (at open, before recovery). Returns each
/// snapshot's tag and pins, to check once the blocks' sequences are known ([`check_pins`]).
pub(crate) fn pin_all(root: &Path, blocks: &BlockTable) -> Vec<(String, Vec<(u32, u64)>)> {
    let Ok(dirs) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for d in dirs.flatten() {
        let path = d.path().join(FILE_NAME);
        if !path.exists() {
            continue;
        }
        let tag = d.file_name().to_string_lossy().into_owned();
        match file::read_pins(&path) {
            Ok(contents) => {
                let pins: Vec<(u32, u64)> = contents
                    .pinned
                    .into_iter()
                    .filter(|&(b, _)| b < blocks.len())
                    .collect();
                for &(b, _) in &pins {
                    blocks.pin(b);
                }
                found.push((tag, pins));
            }
            Err(why) => tracing::error!(
                "snapshot {tag} ({}) is damaged ({why}): its blocks are not kept for it; clear \
                 it with hayate clearsnapshot",
                path.display()
            ),
        }
    }
    found
}

/// Logs each snapshot whose pinned blocks no longer hold what it saved.
pub(crate) fn check_pins(found: &[(String, Vec<(u32, u64)>)], blocks: &BlockTable) {
    for (tag, pins) in found {
        let lost = pins
            .iter()
            .filter(|&&(b, seq)| blocks.state(b) == BlockState::Free || blocks.sequence(b) != seq)
            .count();
        if lost > 0 {
            tracing::error!(
                "snapshot {tag}: {lost} of its {} blocks no longer hold its data; restoring from \
                 it will fail: clear it with hayate clearsnapshot",
                pins.len()
            );
        } else {
            tracing::info!("snapshot {tag} keeps {} blocks", pins.len());
        }
    }
}

/// One record of a snapshot, as a restore writes it back.
#[derive(Clone, Debug)]
pub enum SnapshotRecord {
    /// A row (or a row's tombstone), with its cells' timestamps, TTLs and deletions.
    Row(StoredRow),
    /// A partition's deletion and range tombstones.
    Tombstones {
        token: i64,
        partition_key: Vec<u8>,
        tombstones: PartitionTombstones,
    },
}

/// A snapshot opened for reading.
pub struct Snapshot {
    tag: String,
    contents: Contents,
}

impl Snapshot {
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The tables it holds, each with its entry count.
    pub fn tables(&self) -> Vec<(TableId, u64)> {
        self.contents
            .tables
            .iter()
            .map(|(id, t)| (*id, t.entries.len() as u64))
            .collect()
    }

    pub fn taken_at_ms(&self) -> u64 {
        self.contents.taken_at_ms
    }

    pub fn pinned_blocks(&self) -> u64 {
        self.contents.pinned.len() as u64
    }

    /// The newest block sequence its rows are in: a later snapshot's rows in blocks newer than
    /// this are what changed since (an incremental backup's rows).
    pub fn max_sequence(&self) -> u64 {
        self.contents
            .pinned
            .iter()
            .map(|&(_, seq)| seq)
            .max()
            .unwrap_or(0)
    }
}

/// Opens snapshot `tag`, checking its file whole and that its blocks still hold its data.
pub(crate) fn open(inner: &Namespace, tag: &str) -> Result<Snapshot, SnapshotError> {
    let dir = dir_of(inner, tag)?;
    let path = dir.join(FILE_NAME);
    if !path.exists() {
        return Err(SnapshotError::NotFound(tag.to_owned()));
    }
    let damaged = |detail: String| SnapshotError::Damaged {
        tag: tag.to_owned(),
        detail,
    };
    let contents = file::read(&path).map_err(|e| damaged(e.to_string()))?;
    let blocks = inner.blocks();
    for &(b, seq) in &contents.pinned {
        if b >= blocks.len() || !blocks.pinned_by_a_snapshot(b) || blocks.sequence(b) != seq {
            return Err(damaged(format!("block {b} no longer holds its data")));
        }
    }
    if contents.block_size_bytes != inner.config().block_size_bytes {
        return Err(damaged("taken with another block size".to_owned()));
    }
    Ok(Snapshot {
        tag: tag.to_owned(),
        contents,
    })
}

/// Reads the records of `table` in `snapshot` from the `from`th entry on, looking at up to
/// `max` entries; with them, where the next read starts (`None` at the end). With `since`,
/// only the records in blocks of that sequence or later (and every row with a pending delta,
/// whose cells may be newer than its block) are read: given an earlier snapshot's
/// [`Snapshot::max_sequence`], what was written since it (the block then open kept filling,
/// so it is read again), and rows defragmentation moved since.
pub(crate) fn read(
    inner: &Namespace,
    snapshot: &Snapshot,
    table: TableId,
    from: usize,
    max: usize,
    since: u64,
) -> Result<(Vec<SnapshotRecord>, Option<usize>), SnapshotError> {
    let Some((_, saved)) = snapshot.contents.tables.iter().find(|(id, _)| *id == table) else {
        return Ok((Vec::new(), None));
    };
    let sequence_of = |b: u32| {
        snapshot
            .contents
            .pinned
            .binary_search_by_key(&b, |&(pb, _)| pb)
            .map(|i| snapshot.contents.pinned[i].1)
    };
    let end = saved.entries.len().min(from.saturating_add(max));
    let mut out = Vec::with_capacity(end.saturating_sub(from));
    for e in saved.entries.get(from..end).unwrap_or_default() {
        let Ok(sequence) = sequence_of(e.location.block()) else {
            return Err(SnapshotError::Damaged {
                tag: snapshot.tag.clone(),
                detail: format!(
                    "an entry points into block {}, which it does not pin",
                    e.location.block()
                ),
            });
        };
        if sequence < since && !saved.deltas.contains_key(&e.key) {
            continue;
        }
        out.push(read_one(inner, saved, e, sequence).map_err(SnapshotError::Read)?);
    }
    Ok((out, (end < saved.entries.len()).then_some(end)))
}

fn read_one(
    inner: &Namespace,
    saved: &SavedTable,
    e: &Entry,
    sequence: u64,
) -> Result<SnapshotRecord, ReadError> {
    if e.is_range_tombstones() {
        let (token, partition_key, tombstones) = inner.decode_at(e, sequence, false, |view| {
            let t = decode_tombstones_body(view.body, view.meta.write_timestamp_us)?;
            Ok((view.meta.token, view.partition_key.to_vec(), t))
        })?;
        return Ok(SnapshotRecord::Tombstones {
            token,
            partition_key,
            tombstones,
        });
    }
    let mut found = inner.decode_at(e, sequence, false, |view| {
        if view.meta.range_tombstones {
            return Err(DecodeError::OtherKey);
        }
        decode_found(view)
    })?;
    if let Some(d) = saved.deltas.get(&e.key) {
        let cells =
            decode_body(&d.body, d.write_timestamp_us).map_err(|detail| inner.corrupt(e.location, detail))?;
        found.row.merge(cells, inner.now_s(), 0);
    }
    Ok(SnapshotRecord::Row(StoredRow {
        token: found.token,
        partition_key: found.partition_key,
        clustering_key: found.clustering_key,
        row: found.row,
        position: ScanPosition(e.key),
    }))
}
