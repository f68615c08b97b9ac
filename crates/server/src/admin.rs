//! Schema statements (CREATE, ALTER and DROP of keyspaces and tables) and TRUNCATE: proposed to
//! the cluster metadata log, and answered once this node has applied them.
//!
//! Applying happens on every node, in log order ([`crate::schema::machine`]): that is where the
//! schema changes, dropped tables' rows are forgotten and connections registered for events
//! are told. Here the node only proposes and waits: without a quorum of the metadata group the
//! statement fails with a message saying so, and changes nothing.

use std::future::Future;
use std::pin::Pin;

use hayate_cql::response::result::ResultBody;
use hayate_cql::statement::Statement;

use crate::error::QueryResult;
use crate::query::Context;
use crate::schema::machine::{decode_answer, statement_command};

/// A boxed future, as [`SchemaLog::propose`] returns it.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where schema statements go to be agreed.
pub trait SchemaLog: Send + Sync {
    /// Appends a schema command and returns what applying it on this node answered.
    fn propose(&self, command: Vec<u8>) -> BoxFuture<'_, QueryResult<Vec<u8>>>;

    /// The cluster's data centers (NetworkTopologyStrategy's bare `replication_factor` goes to
    /// each of them).
    fn data_centers(&self) -> Vec<String>;
}

/// True for the statements that change the schema (and so go through the metadata log).
pub fn is_schema_statement(stmt: &Statement) -> bool {
    matches!(
        stmt,
        Statement::CreateKeyspace { .. }
            | Statement::AlterKeyspace { .. }
            | Statement::DropKeyspace { .. }
            | Statement::CreateTable(_)
            | Statement::AlterTable { .. }
            | Statement::DropTable { .. }
            | Statement::CreateType { .. }
            | Statement::AlterType { .. }
            | Statement::DropType { .. }
            | Statement::CreateIndex(_)
            | Statement::DropIndex { .. }
            | Statement::Truncate { .. }
    )
}

/// Runs the schema statement whose text is `cql` (the caller checked it is one with
/// [`is_schema_statement`]): the log carries the text, and every node parses and applies it.
pub async fn run(ctx: &Context<'_>, log: &dyn SchemaLog, cql: &str) -> QueryResult<ResultBody> {
    let command = statement_command(cql, ctx.keyspace, &log.data_centers());
    let answer = log.propose(command).await?;
    Ok(match decode_answer(&answer)? {
        Some(change) => ResultBody::SchemaChange(change),
        None => ResultBody::Void,
    })
}
