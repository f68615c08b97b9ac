//! Writes to counter tables: each increment goes to the counter's leader replica, which adds it
//! to its own shard and replicates the shard's new state ([`hayate_cluster::counter`]); a
//! DELETE writes its tombstones as any write does.
//!
//! An increment that times out may have been added or not, and a retry may count it twice, as
//! in Cassandra: the error says so (a write timeout of type COUNTER).

use std::sync::Arc;

use hayate_cluster::coordinator::{Coordinator, WriteType};
use hayate_cluster::counter::{shard_count, CounterUpdate};
use hayate_cluster::replica;
use hayate_storage::row::Row;

use super::apply::replica_mutation;
use super::{Mutation, Target};
use crate::error::{consistency_level, QueryResult};
use crate::query::Context;
use crate::schema::Keyspace;

/// Sends the planned writes of a counter statement: deletions first (a BATCH that deletes a
/// counter and increments it counts from zero), then the increments, keyspace by keyspace.
pub async fn apply(
    ctx: &Context<'_>,
    coordinator: &Coordinator,
    mutations: Vec<Mutation>,
) -> QueryResult<()> {
    let consistency = consistency_level(ctx.consistency);
    let mut deletions: Vec<(Arc<Keyspace>, Vec<replica::Mutation>)> = Vec::new();
    let mut increments: Vec<(Arc<Keyspace>, Vec<CounterUpdate>)> = Vec::new();
    for mut m in mutations {
        let token = hayate_storage::token::token(&m.partition);
        if let Target::Row {
            clustering, update, ..
        } = &mut m.target
        {
            let updates = std::mem::take(&mut update.cells)
                .into_iter()
                .map(|cell| CounterUpdate {
                    table: m.table.storage_id,
                    token,
                    partition: m.partition.clone(),
                    clustering: clustering.clone(),
                    column: cell.column,
                    delta: shard_count(&cell).expect("an increment's cell holds its delta"),
                });
            push(&mut increments, &m.keyspace, updates);
            if *update == Row::default() {
                continue;
            }
        }
        let keyspace = m.keyspace.clone();
        let mutation = replica_mutation(m, token, None, ctx.clock.now_s())?;
        push(&mut deletions, &keyspace, [mutation]);
    }
    crate::query::batchlog::write_groups(coordinator, consistency, deletions, WriteType::Counter).await?;
    for (keyspace, updates) in increments {
        coordinator
            .counter_write(keyspace.strategy(), consistency, updates)
            .await?;
    }
    Ok(())
}

/// Adds `items` to the group of `keyspace`: the last group when it is that keyspace's.
fn push<T>(
    groups: &mut Vec<(Arc<Keyspace>, Vec<T>)>,
    keyspace: &Arc<Keyspace>,
    items: impl IntoIterator<Item = T>,
) {
    match groups.last_mut() {
        Some((ks, group)) if Arc::ptr_eq(ks, keyspace) => group.extend(items),
        _ => {
            let items: Vec<T> = items.into_iter().collect();
            if !items.is_empty() {
                groups.push((keyspace.clone(), items));
            }
        }
    }
}
