//! The storage engine as the local replica.

use std::ops::Bound;

use hayate_storage::{
    Engine, ImportError, IndexReadError, PartitionKey, PartitionTombstones, ReadError, ReadsAhead, RowsFrom,
    RowsPage, ScanFrom, ScanPosition, StoredRow, TableId, WriteError,
};

use super::{
    Mutation, MutationKind, PartitionRead, RangeSize, RangeStart, ReadCommand, ReadResponse, Replica,
    ReplicaError, ReplicaErrorKind, ReplicaRow, ReplicaTombstones, StreamChunk, StreamRequest,
};
use crate::ring::TokenRange;

impl Replica for Engine {
    fn apply(&self, mutations: Vec<Mutation>) -> Result<(), ReplicaError> {
        for Mutation {
            table,
            token,
            partition,
            kind,
        } in mutations
        {
            let at = PartitionKey {
                table,
                token,
                key: &partition,
            };
            match kind {
                MutationKind::Row { clustering, update } => {
                    self.write(at.row(&clustering), update).map_err(write_failed)?;
                }
                MutationKind::DeleteRange { start, end, deletion } => {
                    // One range (or partition) tombstone, which also shadows rows that reach
                    // this replica after it.
                    self.delete_range(at, as_ref(&start), as_ref(&end), deletion)
                        .map_err(write_failed)?;
                }
            }
        }
        Ok(())
    }

    fn read(&self, command: &ReadCommand) -> Result<ReadResponse, ReplicaError> {
        let page = match command {
            ReadCommand::Partition(p) => {
                if let Some(clustering) = p.one_row() {
                    // One row by its full primary key: one index lookup, no range walk, and
                    // the partition's tombstones read once for the row and the answer.
                    let (row, tombstones) = self
                        .get_with_partition_tombstones(p.partition_key().row(clustering))
                        .map_err(read_failed)?;
                    let rows = row
                        .filter(|_| p.limit > 0)
                        .map(|row| ReplicaRow {
                            token: p.token,
                            partition: p.partition.clone(),
                            clustering: clustering.to_vec(),
                            row,
                        })
                        .into_iter()
                        .collect();
                    return Ok(ReadResponse {
                        rows,
                        more: false,
                        tombstones: replica_tombstones(p, tombstones),
                    });
                }
                let mut page = self
                    .read_partition_raw(
                        p.partition_key(),
                        as_ref(&p.start),
                        as_ref(&p.end),
                        p.reverse,
                        p.limit,
                    )
                    .map_err(read_failed)?;
                let tombstones = replica_tombstones(p, page.tombstones.take());
                let mut response = response(page);
                response.tombstones = tombstones;
                return Ok(response);
            }
            ReadCommand::Range(r) => {
                let from = match &r.start {
                    RangeStart::Token(t) => RowsFrom::Token(*t),
                    RangeStart::After(p) => RowsFrom::After {
                        token: p.token,
                        partition: &p.partition,
                        clustering: p.clustering.as_deref(),
                    },
                };
                match &r.index {
                    None => self
                        .scan_rows(r.table, from, r.end_token, r.limit)
                        .map_err(read_failed)?,
                    Some(i) => self
                        .index_read(r.table, i.index, &i.terms, from, r.end_token, r.limit)
                        .map_err(|e| match e {
                            IndexReadError::Read(e) => read_failed(e),
                            // Cassandra's INDEX_NOT_AVAILABLE: a read failure of the level.
                            e => ReplicaError::new(ReplicaErrorKind::Failed, e.to_string()),
                        })?,
                }
            }
        };
        Ok(response(page))
    }

    fn drop_table(&self, table: TableId) -> usize {
        Engine::drop_table(self, table)
    }

    fn now_s(&self) -> u32 {
        Engine::now_s(self)
    }

    fn read_ahead_read(&self, command: &ReadCommand) -> Option<ReadsAhead> {
        // The one-row read only: a partition or range read walks rows the index names as it
        // goes, and reads them itself.
        let ReadCommand::Partition(p) = command else {
            return None;
        };
        let clustering = p.one_row()?;
        self.read_ahead([p.partition_key().row(clustering)])
    }

    fn reads_ahead(&self) -> bool {
        self.read_ring().is_some_and(|ring| ring.is_driven())
    }

    fn export(&self, request: &StreamRequest) -> Result<StreamChunk, ReplicaError> {
        let range = request.range;
        let from = match request.after {
            Some(p) => ScanFrom::After(ScanPosition::from_bytes(&p).ok_or_else(|| {
                ReplicaError::new(ReplicaErrorKind::Invalid, "a stream position of the wrong size")
            })?),
            // A range's start is exclusive, and below its end: one more is in it.
            None => ScanFrom::Token(range.start_exclusive + 1),
        };
        let chunk = self
            .export_range(
                request.table,
                from,
                range.end_inclusive,
                request.max_bytes as usize,
            )
            .map_err(read_failed)?;
        let total = request
            .after
            .is_none()
            .then(|| Replica::range_size(self, request.table, range));
        Ok(StreamChunk {
            bytes: chunk.bytes,
            records: chunk.records,
            data_bytes: chunk.data_bytes,
            next: chunk.next.map(ScanPosition::to_bytes),
            total,
        })
    }

    fn import(&self, table: TableId, chunk: &[u8]) -> Result<RangeSize, ReplicaError> {
        match self.import_chunk_into(table, chunk) {
            Ok(stats) => Ok(RangeSize {
                records: stats.records,
                bytes: stats.data_bytes,
            }),
            Err(ImportError::Write(e)) => Err(write_failed(e)),
            Err(e) => Err(ReplicaError::new(ReplicaErrorKind::Failed, e.to_string())),
        }
    }

    fn remove_range(&self, table: TableId, range: TokenRange) -> u64 {
        Engine::remove_range(self, table, range.start_exclusive, range.end_inclusive) as u64
    }

    fn range_size(&self, table: TableId, range: TokenRange) -> RangeSize {
        let size = Engine::range_size(self, table, range.start_exclusive, range.end_inclusive);
        RangeSize {
            records: size.records,
            bytes: size.bytes,
        }
    }

    fn table_ids(&self) -> Vec<TableId> {
        Engine::table_ids(self)
    }

    fn sync(&self) -> Result<(), ReplicaError> {
        Engine::sync(self).map_err(write_failed)
    }

    fn read_ahead_apply(&self, mutations: &[Mutation]) -> Option<ReadsAhead> {
        self.read_ahead_for_writes(mutations.iter().filter_map(|m| match &m.kind {
            MutationKind::Row { clustering, update } => Some((m.partition_key().row(clustering), update)),
            MutationKind::DeleteRange { .. } => None,
        }))
    }
}

fn response(page: RowsPage) -> ReadResponse {
    ReadResponse {
        rows: page.rows.into_iter().map(replica_row).collect(),
        more: page.more,
        tombstones: Vec::new(),
    }
}

/// The partition's tombstones, for the coordinator's merge.
fn replica_tombstones(p: &PartitionRead, tombstones: Option<PartitionTombstones>) -> Vec<ReplicaTombstones> {
    tombstones
        .map(|tombstones| ReplicaTombstones {
            token: p.token,
            partition: p.partition.clone(),
            tombstones,
        })
        .into_iter()
        .collect()
}

fn replica_row(r: StoredRow) -> ReplicaRow {
    ReplicaRow {
        token: r.token,
        partition: r.partition_key,
        clustering: r.clustering_key,
        row: r.row,
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(v) => Bound::Included(v),
        Bound::Excluded(v) => Bound::Excluded(v),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn write_failed(e: WriteError) -> ReplicaError {
    match e {
        WriteError::DeviceFull { .. } => {
            tracing::warn!("write refused: {e}");
            ReplicaError::new(ReplicaErrorKind::Refused, e.to_string())
        }
        WriteError::KeyTooLarge { .. }
        | WriteError::RecordTooLarge { .. }
        | WriteError::TooManyRangeTombstones { .. } => {
            ReplicaError::new(ReplicaErrorKind::Invalid, e.to_string())
        }
        other => {
            tracing::error!("write failed: {other}");
            ReplicaError::new(ReplicaErrorKind::Failed, other.to_string())
        }
    }
}

fn read_failed(e: ReadError) -> ReplicaError {
    tracing::error!("read failed: {e}");
    ReplicaError::new(ReplicaErrorKind::Failed, format!("read failed: {e}"))
}
