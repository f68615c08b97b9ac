//! INSERT, UPDATE, DELETE and BATCH: a statement is compiled against its tables once
//! ([`plan`]: a prepared statement keeps the result), each request's values are bound into row
//! updates ([`rows`], with the cells of each assignment in [`assign`]), and the updates go to
//! the coordinator as mutations ([`apply`]), which sends them to the replicas; each replica
//! merges them with the stored row (last write wins per cell).
//!
//! An INSERT writes the row marker (the row exists even with every column null); an UPDATE
//! writes only cells, so a row whose cells are all deleted disappears, as in Cassandra.
//! Setting a whole non-frozen collection first deletes the column (at the write's timestamp
//! minus one) and then writes the elements. Deleting a range of rows, or a partition of a table
//! with clustering columns, writes one range (or partition) tombstone on each replica, which
//! also shadows rows written later with an older timestamp. A list operation by index or by
//! value reads the list first, at the request's consistency level.

mod apply;
mod assign;
mod cas;
mod condition;
mod counter;
mod plan;
mod rows;

use std::sync::Arc;

use hayate_cluster::batchlog::Batchlog;
use hayate_cluster::coordinator::{Coordinator, WriteType};
use hayate_cql::response::result::ResultBody;
use hayate_cql::statement::{BatchKind, Statement};
use hayate_storage::row::{Deletion, Row};

use super::bind::Binds;
use super::keys::ClusteringRange;
use super::Context;
use crate::error::QueryResult;
use crate::schema::{Keyspace, Table};

pub use apply::apply;
pub use cas::{run as run_conditional, CasStatement};
pub use plan::{check_counter_batch, Plan};

/// Statements one BATCH may hold.
pub const BATCH_STATEMENTS_MAX: usize = 65_535;

/// One change to one row, or to every row of a clustering range, as planned from a statement.
pub struct Mutation {
    keyspace: Arc<Keyspace>,
    table: Arc<Table>,
    partition: Vec<u8>,
    target: Target,
}

enum Target {
    /// A row, and the update merged into it.
    Row {
        clustering: Vec<u8>,
        update: Row,
        reads: Vec<ReadOp>,
    },
    /// Every row in a clustering range of the partition.
    Range {
        range: ClusteringRange,
        deletion: Deletion,
    },
}

impl Mutation {
    /// The table the mutation writes.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// The partition key, serialized.
    pub fn partition(&self) -> &[u8] {
        &self.partition
    }

    /// The data the mutation writes, as the batch size thresholds count it.
    pub fn data_size_bytes(&self) -> u64 {
        match &self.target {
            Target::Row {
                clustering, update, ..
            } => super::guardrails::row_data_size_bytes(clustering, update),
            Target::Range { range, .. } => super::guardrails::range_data_size_bytes(range),
        }
    }
}

/// A list operation that needs the current list: by index, or removal by value.
#[derive(Clone)]
struct ReadOp {
    column: usize,
    kind: ReadOpKind,
    timestamp_us: i64,
    ttl_s: u32,
}

#[derive(Clone)]
enum ReadOpKind {
    SetIndex { index: i32, value: Option<Vec<u8>> },
    RemoveValues(Vec<Vec<u8>>),
}

/// Timestamp and TTL of a write.
#[derive(Clone, Copy)]
struct WriteTime {
    timestamp_us: i64,
    ttl_s: u32,
    now_s: u32,
}

pub async fn run(
    ctx: &Context<'_>,
    coordinator: &Coordinator,
    batchlog: Option<&Batchlog>,
    stmt: &Statement,
    binds: &Binds<'_>,
) -> QueryResult<ResultBody> {
    let (plan, keyspaces) = Plan::for_statement(ctx, stmt)?;
    if plan.is_conditional() {
        let statement = CasStatement {
            plan,
            keyspaces,
            binds,
        };
        let is_batch = matches!(stmt, Statement::Batch(_));
        return cas::run(ctx, coordinator, &[statement], is_batch).await;
    }
    let mut mutations = Vec::new();
    plan.bind(ctx, &keyspaces, binds, &mut mutations)?;
    if let Statement::Batch(_) = stmt {
        super::guardrails::check_batch_size(ctx.guard, &mutations)?;
    }
    let write_type = match stmt {
        _ if plan.is_counter() => WriteType::Counter,
        Statement::Batch(b) if b.kind == BatchKind::Unlogged => WriteType::UnloggedBatch,
        Statement::Batch(_) => WriteType::Batch,
        _ => WriteType::Simple,
    };
    apply(ctx, coordinator, batchlog, mutations, write_type).await?;
    Ok(ResultBody::Void)
}

/// Checks a statement and turns it into row updates, without applying them: with the plan
/// `ctx`'s memo keeps for it when that plan is still good, or a new one.
#[cfg(test)]
pub fn plan(
    ctx: &Context<'_>,
    stmt: &Statement,
    binds: &Binds<'_>,
    mutations: &mut Vec<Mutation>,
) -> QueryResult<()> {
    let (plan, keyspaces) = Plan::for_statement(ctx, stmt)?;
    plan.bind(ctx, &keyspaces, binds, mutations)
}

/// The plan of a statement and the keyspace of each of its writes (see [`plan`]), for a
/// caller that decides how to run it: a BATCH message with a conditional statement runs as one
/// lightweight transaction.
pub fn compile(ctx: &Context<'_>, stmt: &Statement) -> QueryResult<(Arc<Plan>, Vec<Arc<Keyspace>>)> {
    Plan::for_statement(ctx, stmt)
}

#[cfg(test)]
mod tests;
