//! Logged batches through the batchlog ([`hayate_cluster::batchlog`]): what a logged batch
//! writes there, and how a node applies, at start, the batches a crash interrupted.
//!
//! A batch record's payload is the batch's writes grouped by keyspace, each group the internode
//! mutation message its replicas would receive:
//!
//! ```text
//! groups: u32, then per group:
//!   keyspace name length: u16 | keyspace name (UTF-8) | message length: u32 | message
//! ```
//! The keyspace is kept by name so that replay finds its replication strategy in the schema of
//! the day; a group whose keyspace was dropped meanwhile is skipped.

use hayate_cluster::batchlog::{Batchlog, LoggedBatch};
use hayate_cluster::consistency::ConsistencyLevel;
use hayate_cluster::coordinator::{Coordinator, WriteRequest, WriteType};
use hayate_cluster::message::{self, Message};
use hayate_cluster::replica;

use crate::error::{QueryError, QueryResult};
use crate::schema::{Keyspace, Schema};

/// Encodes the groups of a batch as a batch record's payload. Each group's mutations move into
/// the message for its encoding and back out, rather than being copied.
pub fn encode(groups: &mut [(std::sync::Arc<Keyspace>, Vec<replica::Mutation>)]) -> QueryResult<Vec<u8>> {
    let mut out = Vec::new();
    out.extend_from_slice(&(groups.len() as u32).to_be_bytes());
    for (keyspace, mutations) in groups.iter_mut() {
        let name = keyspace.name.as_bytes();
        out.extend_from_slice(&(name.len() as u16).to_be_bytes());
        out.extend_from_slice(name);
        let request = Message::MutationRequest {
            id: 0,
            mutations: std::sync::Arc::new(std::mem::take(mutations)),
        };
        let mut encoded = Vec::new();
        let result = message::encode(&request, message::VERSION, &mut encoded);
        if let Message::MutationRequest { mutations: back, .. } = request {
            *mutations = std::sync::Arc::unwrap_or_clone(back);
        }
        result.map_err(|e| QueryError::Server(format!("cannot log the batch: {e}")))?;
        out.extend_from_slice(&(encoded.len() as u32).to_be_bytes());
        out.extend_from_slice(&encoded);
    }
    Ok(out)
}

/// The groups of a batch record: (keyspace name, mutations), or None if the payload is not one
/// this node wrote (its checksum held, so that would be a bug or a foreign file).
fn decode(mut b: &[u8]) -> Option<Vec<(String, Vec<replica::Mutation>)>> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (b.get(..n)?, b.get(n..)?);
        *b = rest;
        Some(head)
    }
    let count = u32::from_be_bytes(take(&mut b, 4)?.try_into().ok()?);
    let mut groups = Vec::new();
    for _ in 0..count {
        let name_len = u16::from_be_bytes(take(&mut b, 2)?.try_into().ok()?) as usize;
        let name = std::str::from_utf8(take(&mut b, name_len)?).ok()?.to_owned();
        let len = u32::from_be_bytes(take(&mut b, 4)?.try_into().ok()?) as usize;
        match message::decode(take(&mut b, len)?).ok()? {
            Message::MutationRequest { mutations, .. } => {
                groups.push((name, std::sync::Arc::unwrap_or_clone(mutations)))
            }
            _ => return None,
        }
    }
    b.is_empty().then_some(groups)
}

/// Applies, whole, the batches a previous run logged and did not finish, then lets the
/// batchlog forget them. Returns how many were applied; a batch that cannot be applied now
/// (its replicas unreachable) keeps its segment for the next start, and says so.
pub async fn replay(
    log: &Batchlog,
    unfinished: Vec<LoggedBatch>,
    coordinator: &Coordinator,
    schema: &Schema,
) -> usize {
    let mut applied = 0;
    let mut all = true;
    for batch in unfinished {
        let Some(groups) = decode(&batch.payload) else {
            tracing::error!(batch = batch.id, "a batchlog record does not decode; skipping it");
            continue;
        };
        let mut ok = true;
        for (keyspace, mutations) in groups {
            let Some(ks) = schema.keyspace(&keyspace) else {
                tracing::info!(batch = batch.id, %keyspace, "skipping a logged batch's writes to a dropped keyspace");
                continue;
            };
            let request = WriteRequest {
                replication: ks.strategy(),
                // As Cassandra's batchlog replay: every live replica, and hints for the rest.
                consistency: ConsistencyLevel::Any,
                mutations,
                write_type: WriteType::Batch,
            };
            if let Err(e) = coordinator.write(request).await {
                tracing::warn!(batch = batch.id, %keyspace, "cannot apply a logged batch again now: {e}");
                ok = false;
            }
        }
        if ok {
            applied += 1;
        } else {
            all = false;
        }
    }
    if all {
        log.forget_recovered();
    } else {
        tracing::warn!(
            "some logged batches could not be applied; they are kept and tried again at the next start"
        );
    }
    applied
}

/// Applies a logged batch's groups: logs them, writes them, and marks them done once every
/// write was answered. A batch whose write failed stays in the log and is applied again, whole,
/// at the next start (Cassandra's batchlog replays it from another node sooner).
pub async fn apply_logged(
    log: &Batchlog,
    coordinator: &Coordinator,
    consistency: ConsistencyLevel,
    mut groups: Vec<(std::sync::Arc<Keyspace>, Vec<replica::Mutation>)>,
) -> QueryResult<()> {
    let payload = encode(&mut groups)?;
    let ticket = log
        .append(&payload)
        .map_err(|e| QueryError::Server(e.to_string()))?;
    write_groups(coordinator, consistency, groups, WriteType::Batch).await?;
    log.done(ticket);
    Ok(())
}

/// Writes each keyspace's group of mutations through the coordinator, one group after another.
pub async fn write_groups(
    coordinator: &Coordinator,
    consistency: ConsistencyLevel,
    groups: Vec<(std::sync::Arc<Keyspace>, Vec<replica::Mutation>)>,
    write_type: WriteType,
) -> QueryResult<()> {
    for (keyspace, mutations) in groups {
        coordinator
            .write(WriteRequest {
                replication: keyspace.strategy(),
                consistency,
                mutations,
                write_type,
            })
            .await?;
    }
    Ok(())
}
