//! Planning a statement: CQL in, mutations and reads for the coordinator out.
//!
//! A statement is compiled once against its tables into a plan (`select::Plan`,
//! `modify::Plan`, each with its WHERE clause compiled into a [`restrictions::WherePlan`]); a
//! prepared statement keeps its plans in its [`Memo`], so an EXECUTE only binds its values and
//! runs. A plan is used only while its tables are the ones the statement resolves to: a schema
//! change makes new tables, and the next EXECUTE compiles again ([`plans_compiled`] counts).
//!
//! A SELECT's WHERE clause becomes key ranges ([`restrictions`]) and then partition reads or a
//! token-range read ([`select`]); INSERT, UPDATE, DELETE and BATCH become mutations
//! ([`modify`]). Bind values are checked against the type of the column that receives them
//! ([`bind`]); primary keys become storage keys in [`keys`], rows become cells and back in
//! [`cells`]. Statements are checked against the node's [`guardrails`], whose warnings go back
//! with the response ([`warnings`]). Nothing here calls the storage engine: reads and writes go to
//! [`hayate_cluster::coordinator::Coordinator`], which the caller hands in.

pub mod batchlog;
pub mod bind;
pub mod cells;
pub mod functions;
pub mod guardrails;
pub mod keys;
pub mod modify;
pub mod prepare;
pub mod restrictions;
pub mod select;
pub mod warnings;

use std::sync::Arc;

use hayate_cql::statement::QualifiedName;
use hayate_cql::wire::Consistency;
use hayate_storage::Clock;

use crate::error::{invalid, QueryResult};
use crate::schema::{Keyspace, Schema, Table};

pub use bind::Binds;
pub use guardrails::Guard;
pub use warnings::Warnings;

pub use crate::schema::TTL_MAX_S;
/// Rows a page may hold when the client sets no page size, or asks for a larger one.
pub const PAGE_ROWS_MAX: usize = 100_000;

/// What a request carries besides its statement.
#[derive(Clone)]
pub struct Context<'a> {
    pub schema: Arc<Schema>,
    /// The connection's keyspace (USE).
    pub keyspace: Option<&'a str>,
    pub role: Option<&'a crate::auth::AuthenticatedRole>,
    pub consistency: Consistency,
    /// The level of the Paxos round of a conditional write (SERIAL unless the request says
    /// LOCAL_SERIAL).
    pub serial_consistency: Consistency,
    pub page_size: Option<usize>,
    pub paging_state: Option<&'a [u8]>,
    pub default_timestamp_us: Option<i64>,
    pub skip_metadata: bool,
    /// Write timestamps and expiry are judged by this clock.
    pub clock: &'a dyn Clock,
    /// The prepared statement's memo, when the request is an EXECUTE.
    pub memo: Option<&'a Memo>,
    /// The node's guardrails, and the request's warnings for its client.
    pub guard: Guard<'a>,
}

/// What planning a prepared statement learned from its text and tables alone, kept with the
/// statement so that each EXECUTE of it skips that work. Each plan names the tables it was made
/// for and is used only while each is still the one the statement resolves to: a schema change
/// makes a new table, and the statement is planned again.
#[derive(Default)]
pub struct Memo {
    select: std::sync::OnceLock<Arc<select::Plan>>,
    modify: std::sync::OnceLock<Arc<modify::Plan>>,
}

/// Plans made since the node started (see [`plans_compiled`]).
static PLANS_COMPILED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many plans this node has made since it started, of every kind (SELECT, and INSERT,
/// UPDATE, DELETE and BATCH): one per statement text and table, none per EXECUTE of a prepared
/// statement that has its plan (shown by `/tablestats` as `node.plans_compiled`). Plans of
/// reads of the built-in tables (`system.local`, `system_schema.*`: drivers query them on
/// their own) are not counted.
pub fn plans_compiled() -> u64 {
    PLANS_COMPILED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Counts one plan made (see [`plans_compiled`]).
fn plan_compiled() {
    PLANS_COMPILED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// The rows of built-in tables (`system.local`, `system_schema.*`), which are made from the
/// node's state when read rather than stored.
pub trait VirtualTables: Sync {
    /// Every row of `table`, in column order.
    fn rows(&self, schema: &Schema, table: &Table) -> QueryResult<Vec<Vec<Option<Vec<u8>>>>>;
}

/// The keyspace a statement names, or the connection's.
pub fn keyspace_of<'a>(ctx: &'a Context<'_>, name: &'a QualifiedName) -> QueryResult<&'a str> {
    crate::schema::keyspace_in(ctx.keyspace, name)
}

/// The table a statement names.
pub fn resolve_table(ctx: &Context<'_>, name: &QualifiedName) -> QueryResult<(Arc<Keyspace>, Arc<Table>)> {
    let ks_name = keyspace_of(ctx, name)?;
    let ks = ctx
        .schema
        .keyspace(ks_name)
        .ok_or_else(|| invalid(format!("Keyspace {ks_name} does not exist")))?;
    let table = ks
        .tables
        .get(&name.name)
        .ok_or_else(|| invalid(format!("table {} does not exist", name.name)))?;
    Ok((ks.clone(), table.clone()))
}

#[cfg(test)]
mod tests;
