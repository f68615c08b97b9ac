//! Executing a parsed statement against the schema and the storage engine.
//!
//! The path of a statement: [`execute`] resolves its table, checks the consistency level
//! against the keyspace's replication, turns its WHERE clause into key ranges
//! ([`restrictions`]), and hands over to [`select`] or [`modify`] (DDL goes to
//! [`crate::schema::ddl`]; roles to [`crate::auth`]). Bind values are checked against the type
//! of the column that receives them ([`bind`]); primary keys become storage keys in [`keys`],
//! rows become cells and back in [`cells`].

pub mod bind;
pub mod cells;
pub mod functions;
pub mod keys;
pub mod modify;
pub mod prepare;
pub mod restrictions;
pub mod select;

use std::sync::Arc;

use hayate_cql::error::WireError;
use hayate_cql::response::result::ResultBody;
use hayate_cql::statement::{QualifiedName, Statement};
use hayate_cql::wire::Consistency;
use hayate_storage::{ReadError, WriteError};

use crate::error::{invalid, server_error, unavailable, QueryResult};
use crate::node::Node;
use crate::schema::{Keyspace, Schema, Table};

pub use bind::Binds;

/// Cassandra's largest TTL: 20 years.
pub const TTL_MAX_S: u32 = 630_720_000;
/// Rows a page may hold when the client sets no page size, or asks for a larger one.
pub const PAGE_ROWS_MAX: usize = 100_000;

/// What a request carries besides its statement.
pub struct Context<'a> {
    pub node: &'a Node,
    pub schema: Arc<Schema>,
    /// The connection's keyspace (USE).
    pub keyspace: Option<&'a str>,
    pub role: Option<&'a crate::auth::AuthenticatedRole>,
    pub consistency: Consistency,
    pub page_size: Option<usize>,
    pub paging_state: Option<&'a [u8]>,
    pub default_timestamp_us: Option<i64>,
    pub skip_metadata: bool,
}

/// What a statement leaves behind besides its result.
#[derive(Default)]
pub struct Effects {
    /// USE switched the connection's keyspace.
    pub keyspace: Option<String>,
}

/// Runs one statement.
pub fn execute(
    ctx: &Context<'_>,
    stmt: &Statement,
    binds: &Binds<'_>,
    effects: &mut Effects,
) -> QueryResult<ResultBody> {
    match stmt {
        Statement::Select(s) => select::run(ctx, s, binds),
        Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) | Statement::Batch(_) => {
            modify::run(ctx, stmt, binds)
        }
        Statement::Use { keyspace } => {
            if ctx.schema.keyspace(keyspace).is_none() {
                return Err(invalid(format!("Keyspace '{keyspace}' does not exist")));
            }
            effects.keyspace = Some(keyspace.clone());
            Ok(ResultBody::SetKeyspace(keyspace.clone()))
        }
        Statement::Unsupported { what } => Err(invalid(format!("hayate does not support {what} yet"))),
        Statement::Describe(d) => crate::system::describe::run(ctx, d),
        _ => crate::admin::run(ctx, stmt),
    }
}

/// The keyspace a statement names, or the connection's.
pub fn keyspace_of<'a>(ctx: &'a Context<'_>, name: &'a QualifiedName) -> QueryResult<&'a str> {
    name.keyspace.as_deref().or(ctx.keyspace).ok_or_else(|| {
        invalid("No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename")
    })
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

/// Refuses a level that needs more replicas than this node can be: with one node, there is
/// one live replica of everything, and a keyspace places `replication_factor` of them.
pub fn check_consistency(ks: &Keyspace, cl: Consistency, write: bool) -> QueryResult<()> {
    if ks.virtual_kind.is_some() {
        return Ok(());
    }
    let rf = ks.replication_factor();
    let local_rf = ks.replication_factor_in(crate::node::DATA_CENTER);
    let required = match cl {
        Consistency::Any => {
            if !write {
                return Err(invalid("ANY ConsistencyLevel is only supported for writes"));
            }
            1
        }
        Consistency::One | Consistency::LocalOne => 1,
        Consistency::Two => 2,
        Consistency::Three => 3,
        Consistency::Quorum => rf / 2 + 1,
        Consistency::All => rf,
        Consistency::LocalQuorum | Consistency::EachQuorum => local_rf / 2 + 1,
        Consistency::Serial | Consistency::LocalSerial => {
            if write {
                return Err(invalid(
                    "You must use conditional updates for serializable writes",
                ));
            }
            rf / 2 + 1
        }
    };
    // One node: at most one replica is alive, and none if the keyspace places no replica here.
    let alive = usize::from(local_rf > 0 || rf > 0).min(1);
    if required > alive {
        return Err(unavailable(cl, required, alive));
    }
    Ok(())
}

/// The seconds since the epoch, as the storage engine counts them.
pub fn now_s() -> u32 {
    (bind::now_us() / 1_000_000) as u32
}

pub fn read_failed(e: ReadError) -> WireError {
    tracing::error!("read failed: {e}");
    server_error(format!("read failed: {e}"))
}

pub fn write_failed(e: WriteError) -> WireError {
    match e {
        WriteError::DeviceFull { .. } => {
            tracing::warn!("write refused: {e}");
            crate::error::config_error(e.to_string())
        }
        WriteError::KeyTooLarge { .. } | WriteError::RecordTooLarge { .. } => invalid(e.to_string()),
        other => {
            tracing::error!("write failed: {other}");
            server_error(other.to_string())
        }
    }
}
