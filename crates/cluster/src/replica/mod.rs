//! What one replica does for the coordinator: apply mutations and answer reads, with the
//! tombstones a merge across replicas needs. The storage engine implements [`Replica`]
//! (`local.rs`); a test can put several in-process replicas behind a simulated transport.
//!
//! Reads come in two shapes, the two the query layer plans a SELECT into: a slice of one
//! partition ([`PartitionRead`]) and a run of the table in token order ([`RangeRead`]). Both
//! return rows in the order a client sees them: by token, then partition key bytes, then
//! clustering key bytes (reversed within a partition for a reversed slice). A position in that
//! order ([`RowPosition`]) is what a paging state names, so any coordinator can resume a page.

use std::ops::Bound;
use std::sync::Arc;

mod local;
mod read_ring;

pub use read_ring::drive_read_ring;

use hayate_storage::{
    Deletion, PartitionKey, PartitionTombstones, ReadsAhead, ReadsDone, Row, TableId, TermRange,
};

use crate::ring::TokenRange;

/// One change to one partition: a row update merged by last-write-wins, or a deletion of every
/// row in a clustering range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mutation {
    pub table: TableId,
    /// The partition key's Murmur3 token, computed once by the planner.
    pub token: i64,
    pub partition: Vec<u8>,
    pub kind: MutationKind,
}

impl Mutation {
    /// The partition's address in the storage engine, with the token the planner computed.
    pub fn partition_key(&self) -> PartitionKey<'_> {
        PartitionKey {
            table: self.table,
            token: self.token,
            key: &self.partition,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MutationKind {
    /// Merge `update` into the row at `clustering` (empty for tables without clustering
    /// columns).
    Row { clustering: Vec<u8>, update: Row },
    /// Delete every row of the partition whose clustering key lies between the bounds (both
    /// open: the whole partition), as of `deletion.timestamp_us`: each replica stores one range
    /// (or partition) tombstone, which shadows every older row in the range, those it holds now
    /// and those that reach it later. A replica's reads merge it into the rows it covers as a
    /// row deletion, so the coordinator's merge lets it win over a replica that missed it.
    DeleteRange {
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        deletion: Deletion,
    },
}

/// The rows of one partition with clustering keys between two bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionRead {
    pub table: TableId,
    pub token: i64,
    pub partition: Vec<u8>,
    pub start: Bound<Vec<u8>>,
    pub end: Bound<Vec<u8>>,
    /// Descending clustering order.
    pub reverse: bool,
    /// Live rows to return at most; tombstones met on the way come too and do not count.
    pub limit: usize,
}

impl PartitionRead {
    /// The partition's address in the storage engine, with the token the planner computed.
    pub fn partition_key(&self) -> PartitionKey<'_> {
        PartitionKey {
            table: self.table,
            token: self.token,
            key: &self.partition,
        }
    }

    /// The clustering key of the one row this read names by its full primary key, if it does.
    pub fn one_row(&self) -> Option<&[u8]> {
        match (&self.start, &self.end) {
            (Bound::Included(a), Bound::Included(b)) if a == b => Some(a),
            _ => None,
        }
    }
}

/// Rows of a table in token order, from `start` up to `end_token` (inclusive).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeRead {
    pub table: TableId,
    pub start: RangeStart,
    pub end_token: i64,
    /// Live rows to return at most; tombstones met on the way come too and do not count.
    pub limit: usize,
    /// Only the rows a secondary index names (see [`IndexRead`]); `None` reads every row.
    pub index: Option<IndexRead>,
}

/// A range read by a secondary index of the table: the rows whose index `index` holds a term in
/// `terms`. The replica also returns the rows its index named that no longer match (a newer
/// version of a row that another replica still has matching), so the coordinator's merge lets
/// the newest win; the coordinator filters the merged rows again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexRead {
    /// The index's number in its table (its storage id).
    pub index: u32,
    pub terms: TermRange,
}

/// Where a range read begins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RangeStart {
    /// At the first row whose token is at least this.
    Token(i64),
    /// Just after this position.
    After(RowPosition),
}

/// A place in a table's read order: a row, or the end of a whole partition.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RowPosition {
    pub token: i64,
    pub partition: Vec<u8>,
    /// `None`: after every row of the partition.
    pub clustering: Option<Vec<u8>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadCommand {
    Partition(PartitionRead),
    Range(RangeRead),
}

impl ReadCommand {
    /// One row by its full primary key.
    pub fn is_one_row(&self) -> bool {
        matches!(self, ReadCommand::Partition(p) if p.one_row().is_some())
    }

    pub fn table(&self) -> TableId {
        match self {
            ReadCommand::Partition(p) => p.table,
            ReadCommand::Range(r) => r.table,
        }
    }

    pub fn limit(&self) -> usize {
        match self {
            ReadCommand::Partition(p) => p.limit,
            ReadCommand::Range(r) => r.limit,
        }
    }
}

/// One row as a replica stores it: deletions and expired cells included, so that the
/// coordinator can merge versions from several replicas and let a tombstone win.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaRow {
    pub token: i64,
    pub partition: Vec<u8>,
    pub clustering: Vec<u8>,
    pub row: Row,
}

impl ReplicaRow {
    pub fn position(&self) -> RowPosition {
        RowPosition {
            token: self.token,
            partition: self.partition.clone(),
            clustering: Some(self.clustering.clone()),
        }
    }
}

/// A replica's answer to a read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadResponse {
    /// In read order (see the module comment).
    pub rows: Vec<ReplicaRow>,
    /// True when the replica stopped at the command's limit: it may hold more rows past the
    /// last one. False means it has nothing more in the requested range.
    pub more: bool,
    /// The range and partition tombstones of the partition a partition read names (empty for
    /// range reads), so that the coordinator lets them shadow rows another replica returns
    /// which this one never had, and repairs a replica that missed them.
    pub tombstones: Vec<ReplicaTombstones>,
}

/// One partition's range and partition tombstones, as a replica holds them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaTombstones {
    pub token: i64,
    pub partition: Vec<u8>,
    pub tombstones: PartitionTombstones,
}

/// Why a replica could not do what it was asked. It travels between nodes, so it carries a
/// kind the coordinator acts on and a message for the client, not a source error.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplicaError {
    pub kind: ReplicaErrorKind,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaErrorKind {
    /// The write was refused by configuration (device full): Cassandra's config error.
    Refused,
    /// The request cannot be done (a key or record too large).
    Invalid,
    /// Something failed on the replica (I/O error, corrupt record); the log says what.
    Failed,
    /// The replica went down (its failure detector convicted it) before it answered. The
    /// coordinator makes this answer itself; the request may or may not have been applied.
    Unreachable,
}

impl ReplicaError {
    pub fn new(kind: ReplicaErrorKind, message: impl Into<String>) -> ReplicaError {
        ReplicaError {
            kind,
            message: message.into(),
        }
    }

    /// A refusal the client must hear as it is (the device is full, a key is too large),
    /// rather than as a read or write failure of the level.
    pub fn is_refusal(&self) -> bool {
        matches!(self.kind, ReplicaErrorKind::Refused | ReplicaErrorKind::Invalid)
    }
}

impl std::fmt::Display for ReplicaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ReplicaError {}

/// A piece of a token range's records to stream: what a node joining (or taking over a range)
/// asks a replica for, chunk by chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamRequest {
    pub table: TableId,
    pub range: TokenRange,
    /// Resume just after this position (the `next` of the previous chunk); `None` from the
    /// range's start.
    pub after: Option<[u8; STREAM_POSITION_BYTES]>,
    /// About how many bytes of records the chunk may hold (one record always goes).
    pub max_bytes: u32,
}

/// The bytes of a stream position: the storage engine's scan position.
pub const STREAM_POSITION_BYTES: usize = hayate_storage::ScanPosition::BYTES;

/// The largest chunk a replica sends: [`STREAM_REQUEST_BYTES_MAX`] of records plus one row of
/// the engine's largest size. Checked before a decoder allocates.
pub const STREAM_CHUNK_BYTES_MAX: usize =
    STREAM_REQUEST_BYTES_MAX + hayate_storage::ROW_MAX_BYTES + (1 << 20);

/// The most bytes of records one [`StreamRequest`] may ask for.
pub const STREAM_REQUEST_BYTES_MAX: usize = 16 << 20;

/// One chunk of a stream: records in the storage engine's stream format (versioned and
/// checksummed; `docs/storage-format.md`), as the receiver imports them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamChunk {
    pub bytes: Vec<u8>,
    pub records: u64,
    /// The bytes of the records in it, as stored (what a stream's rate counts).
    pub data_bytes: u64,
    /// Where the range goes on; `None` once this chunk ends it.
    pub next: Option<[u8; STREAM_POSITION_BYTES]>,
    /// With the first chunk of a range: the records and bytes the range holds on the sender,
    /// from its index (the total a stream's progress is measured against).
    pub total: Option<RangeSize>,
}

/// Records and bytes in a range, from a replica's index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RangeSize {
    pub records: u64,
    pub bytes: u64,
}

/// One replica's data: what the local storage engine is to the coordinator. Calls are
/// synchronous and may read the device; the coordinator calls them through [`read_local`] and
/// [`apply_local`], which read ahead what they can so that the call does not block its service
/// thread, and never while holding a lock another request needs.
pub trait Replica: Send + Sync + 'static {
    /// Applies mutations in order; each is atomic for its row (or rows, for a range delete).
    /// Takes them by value: the engine keeps the row update it is given.
    fn apply(&self, mutations: Vec<Mutation>) -> Result<(), ReplicaError>;

    /// Answers a read with rows as stored (tombstones included).
    fn read(&self, command: &ReadCommand) -> Result<ReadResponse, ReplicaError>;

    /// Forgets every row of a table (DROP TABLE, TRUNCATE); returns how many.
    fn drop_table(&self, table: TableId) -> usize;

    /// The replica's clock, in seconds since the Unix epoch: the time its writes' TTLs count
    /// from and its reads judge expiry by.
    fn now_s(&self) -> u32 {
        hayate_storage::Clock::now_s(&hayate_storage::SystemClock)
    }

    /// Starts the device reads that `read(command)` would block its thread on, for the caller
    /// to await before the call ([`read_ahead`]); `None` (the default) when there are none.
    fn read_ahead_read(&self, _command: &ReadCommand) -> Option<ReadsAhead> {
        None
    }

    /// The same for `apply(mutations)`: the current versions of the rows the writes merge into.
    fn read_ahead_apply(&self, _mutations: &[Mutation]) -> Option<ReadsAhead> {
        None
    }

    /// The records of one piece of a range, for a node that takes the range over. Reads the
    /// device: called on a blocking thread.
    fn export(&self, request: &StreamRequest) -> Result<StreamChunk, ReplicaError> {
        let _ = request;
        Err(ReplicaError::new(
            ReplicaErrorKind::Invalid,
            "this replica cannot stream",
        ))
    }

    /// Merges a chunk of `table` another replica exported, as replica writes merge: a record
    /// that arrives twice, or older than what is here, changes nothing. A chunk that does not
    /// verify, or holds another table, is refused whole. Returns the records and bytes imported.
    fn import(&self, table: TableId, chunk: &[u8]) -> Result<RangeSize, ReplicaError> {
        let _ = (table, chunk);
        Err(ReplicaError::new(
            ReplicaErrorKind::Invalid,
            "this replica cannot import streams",
        ))
    }

    /// Forgets the records of `table` in `range` (a range this node no longer replicates);
    /// returns how many.
    fn remove_range(&self, table: TableId, range: TokenRange) -> u64 {
        let _ = (table, range);
        0
    }

    /// The records and bytes of `table` in `range`, from the index alone.
    fn range_size(&self, table: TableId, range: TokenRange) -> RangeSize {
        let _ = (table, range);
        RangeSize::default()
    }

    /// The tables this replica holds records of.
    fn table_ids(&self) -> Vec<TableId> {
        Vec::new()
    }

    /// Makes every write so far durable (a stream checkpoint is written only after what it
    /// counts as received is).
    fn sync(&self) -> Result<(), ReplicaError> {
        Ok(())
    }

    /// True if this replica reads ahead, so that the node runs one service thread per core:
    /// a read that cannot read ahead (a partition or range walk) must then leave the service
    /// threads to block on the device ([`read_local`]).
    fn reads_ahead(&self) -> bool {
        false
    }
}

/// Reads from the local replica without blocking a service thread on the device: a one-row
/// read awaits its device read ahead, and a partition or range read, which reads row by row as
/// it walks, runs on the blocking pool when the replica reads ahead (and so has few threads).
pub async fn read_local(
    replica: &Arc<dyn Replica>,
    command: &ReadCommand,
) -> Result<ReadResponse, ReplicaError> {
    if let Some(done) = read_ahead(replica.read_ahead_read(command)).await {
        let _installed = done.install();
        return replica.read(command);
    }
    if replica.reads_ahead() && !command.is_one_row() {
        let (replica, command) = (replica.clone(), command.clone());
        return tokio::task::spawn_blocking(move || replica.read(&command))
            .await
            .unwrap_or_else(|e| {
                Err(ReplicaError::new(
                    ReplicaErrorKind::Failed,
                    format!("read failed: {e}"),
                ))
            });
    }
    replica.read(command)
}

/// Applies mutations to the local replica, with the device reads their merges need done ahead.
pub async fn apply_local(replica: &dyn Replica, mutations: Vec<Mutation>) -> Result<(), ReplicaError> {
    let ahead = read_ahead(replica.read_ahead_apply(&mutations)).await;
    let _installed = ahead.map(ReadsDone::install);
    replica.apply(mutations)
}

/// Awaits reads started ahead of a replica call; install what this gives on the thread that
/// makes the call (`.map(ReadsDone::install)`), with no `.await` between.
async fn read_ahead(started: Option<ReadsAhead>) -> Option<ReadsDone> {
    match started {
        Some(reads) => Some(reads.finish().await),
        None => None,
    }
}
