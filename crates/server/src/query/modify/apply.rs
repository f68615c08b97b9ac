//! Planned mutations handed to the coordinator: grouped by keyspace (each has its own
//! replication), through the batchlog for a logged batch, and with the current list read first
//! for a list operation by index or by value. Counter writes go their own way
//! ([`super::counter`]).

use std::sync::Arc;

use hayate_cluster::batchlog::Batchlog;
use hayate_cluster::consistency::ConsistencyLevel;
use hayate_cluster::coordinator::{Coordinator, ReadRequest, WriteType};
use hayate_cluster::replica::{self, MutationKind, PartitionRead, ReadCommand};
use hayate_storage::row::{Cell, Row};

use super::assign::{live_cell, tombstone_cell};
use super::{Mutation, ReadOp, ReadOpKind, Target, WriteTime};
use crate::error::{consistency_level, invalid, QueryResult};
use crate::query::Context;
use crate::schema::{Keyspace, Table};

/// Sends planned mutations to the coordinator: one write per keyspace (each has its own
/// replication), in the order planned. A logged batch of more than one write goes through
/// `batchlog` (when the node has one), so that a crash leaves all of it or none.
pub async fn apply(
    ctx: &Context<'_>,
    coordinator: &Coordinator,
    batchlog: Option<&Batchlog>,
    mutations: Vec<Mutation>,
    write_type: WriteType,
) -> QueryResult<()> {
    if write_type == WriteType::Counter {
        return super::counter::apply(ctx, coordinator, mutations).await;
    }
    let logged = write_type == WriteType::Batch && mutations.len() > 1;
    let consistency = consistency_level(ctx.consistency);
    let mut groups: Vec<(Arc<Keyspace>, Vec<replica::Mutation>)> = Vec::new();
    for m in mutations {
        let token = hayate_storage::token::token(&m.partition);
        // A list operation by index or by value reads the list first.
        let current = match &m.target {
            Target::Row {
                clustering, reads, ..
            } if !reads.is_empty() => {
                read_row(
                    ctx,
                    coordinator,
                    &m.keyspace,
                    &m.table,
                    token,
                    &m.partition,
                    clustering,
                )
                .await?
            }
            _ => None,
        };
        let keyspace = m.keyspace.clone();
        let mutation = replica_mutation(m, token, current.as_ref(), ctx.clock.now_s())?;
        match groups.last_mut() {
            Some((ks, group)) if Arc::ptr_eq(ks, &keyspace) => group.push(mutation),
            _ => groups.push((keyspace, vec![mutation])),
        }
    }
    if let Some(log) = batchlog.filter(|_| logged) {
        return crate::query::batchlog::apply_logged(log, coordinator, consistency, groups).await;
    }
    crate::query::batchlog::write_groups(coordinator, consistency, groups, write_type).await
}

/// A planned mutation as the replicas take it (its partition's token computed once by the
/// caller), its list operations (if any) done on `current`, the row's current version.
pub(super) fn replica_mutation(
    m: Mutation,
    token: i64,
    current: Option<&Row>,
    now_s: u32,
) -> QueryResult<replica::Mutation> {
    let kind = match m.target {
        Target::Row {
            clustering,
            mut update,
            reads,
        } => {
            if !reads.is_empty() {
                for op in reads {
                    list_read_op(&m.table, current, op, now_s, &mut update)?;
                }
                update.normalize();
            }
            MutationKind::Row { clustering, update }
        }
        Target::Range { range, deletion } => MutationKind::DeleteRange {
            start: range.start,
            end: range.end,
            deletion,
        },
    };
    Ok(replica::Mutation {
        table: m.table.storage_id,
        token,
        partition: m.partition,
        kind,
    })
}

/// The current version of one row (for list operations that need it), as a read at the
/// request's level sees it now.
async fn read_row(
    ctx: &Context<'_>,
    coordinator: &Coordinator,
    keyspace: &Keyspace,
    table: &Table,
    token: i64,
    partition: &[u8],
    clustering: &[u8],
) -> QueryResult<Option<Row>> {
    let command = ReadCommand::Partition(PartitionRead {
        table: table.storage_id,
        token,
        partition: partition.to_vec(),
        start: std::ops::Bound::Included(clustering.to_vec()),
        end: std::ops::Bound::Included(clustering.to_vec()),
        reverse: false,
        limit: 1,
    });
    let result = coordinator
        .read(ReadRequest {
            replication: keyspace.strategy(),
            // A write at ANY still reads the list it changes from a live replica.
            consistency: match consistency_level(ctx.consistency) {
                ConsistencyLevel::Any => ConsistencyLevel::One,
                level => level,
            },
            command,
            speculative_retry: table.speculative_retry(),
        })
        .await?;
    let now = ctx.clock.now_s();
    Ok(result.rows.into_iter().next().map(|r| r.row.into_visible(now)))
}

pub(super) fn list_read_op(
    table: &Table,
    current: Option<&Row>,
    op: ReadOp,
    now: u32,
    update: &mut Row,
) -> QueryResult<()> {
    let col = &table.columns[op.column];
    let wt = WriteTime {
        timestamp_us: op.timestamp_us,
        ttl_s: op.ttl_s,
        now_s: now,
    };
    let elements: Vec<&Cell> = current
        .map(|r| {
            r.cells
                .iter()
                .filter(|c| c.column == col.id && c.value_at(now).is_some())
                .collect()
        })
        .unwrap_or_default();
    match op.kind {
        ReadOpKind::SetIndex { index, value } => {
            let cell = usize::try_from(index)
                .ok()
                .and_then(|i| elements.get(i))
                .ok_or_else(|| {
                    invalid(format!(
                        "List index {index} out of bound, list has size {}",
                        elements.len()
                    ))
                })?;
            update.cells.push(match value {
                Some(v) => live_cell(col, cell.path.clone(), v, wt),
                None => tombstone_cell(col, cell.path.clone(), wt),
            });
        }
        ReadOpKind::RemoveValues(values) => {
            for cell in elements {
                if cell
                    .value_at(now)
                    .is_some_and(|v| values.iter().any(|x| x.as_slice() == v))
                {
                    update.cells.push(tombstone_cell(col, cell.path.clone(), wt));
                }
            }
        }
    }
    Ok(())
}
