//! Statements that change the schema or the roles, and TRUNCATE.
//!
//! A schema change is saved before it is visible ([`crate::schema::store`]), announced to
//! connections that registered for SCHEMA_CHANGE events, and answered with a SCHEMA_CHANGE
//! result. Data of a dropped or truncated table is forgotten by the engine at once and its
//! space reclaimed by defragmentation.

use hayate_cluster::coordinator::Coordinator;
use hayate_cql::response::event::{ChangeType, SchemaTarget};
use hayate_cql::response::result::ResultBody;
use hayate_cql::response::{Event, SchemaChange};
use hayate_cql::statement::Statement;
use hayate_storage::TableId;
use tokio::sync::broadcast;

use crate::error::{invalid, QueryResult};
use crate::prepared::PreparedCache;
use crate::query::{keyspace_of, Context};
use crate::schema::{ddl, SchemaStore};

/// What schema statements change or tell: the schema, the prepared statements made against
/// it, the connections registered for events, and the local rows of dropped tables.
pub struct SchemaAdmin<'a> {
    pub schema: &'a SchemaStore,
    pub prepared: &'a PreparedCache,
    pub events: &'a broadcast::Sender<Event>,
    pub coordinator: &'a Coordinator,
    /// The cluster's data centers (NetworkTopologyStrategy's bare `replication_factor` goes to
    /// each of them).
    pub data_centers: &'a [String],
}

/// Runs a schema statement (CREATE, ALTER, DROP of keyspaces and tables) or TRUNCATE.
pub async fn run(ctx: &Context<'_>, admin: &SchemaAdmin<'_>, stmt: &Statement) -> QueryResult<ResultBody> {
    let mut dropped: Vec<TableId> = Vec::new();
    let change: Option<SchemaChange> = match stmt {
        Statement::CreateKeyspace {
            keyspace,
            if_not_exists,
            properties,
        } => admin.schema.update(
            |s, _| ddl::create_keyspace(s, keyspace, *if_not_exists, properties, admin.data_centers),
            ddl::save_failed,
        )?,
        Statement::AlterKeyspace {
            keyspace,
            if_exists,
            properties,
        } => admin.schema.update(
            |s, _| ddl::alter_keyspace(s, keyspace, *if_exists, properties, admin.data_centers),
            ddl::save_failed,
        )?,
        Statement::DropKeyspace { keyspace, if_exists } => admin
            .schema
            .update(
                |s, _| ddl::drop_keyspace(s, keyspace, *if_exists),
                ddl::save_failed,
            )?
            .map(|(change, ids)| {
                dropped = ids;
                change
            }),
        Statement::CreateTable(t) => {
            let ks = keyspace_of(ctx, &t.table)?.to_owned();
            admin.schema.update(
                |s, allocate| ddl::create_table(s, &ks, t, allocate),
                ddl::save_failed,
            )?
        }
        Statement::AlterTable {
            table,
            if_exists,
            action,
        } => {
            let ks = keyspace_of(ctx, table)?.to_owned();
            admin.schema.update(
                |s, _| ddl::alter_table(s, &ks, &table.name, *if_exists, action),
                ddl::save_failed,
            )?
        }
        Statement::DropTable { table, if_exists } => {
            let ks = keyspace_of(ctx, table)?.to_owned();
            admin
                .schema
                .update(
                    |s, _| ddl::drop_table(s, &ks, &table.name, *if_exists),
                    ddl::save_failed,
                )?
                .map(|(change, id)| {
                    dropped.push(id);
                    change
                })
        }
        Statement::Truncate { table } => {
            truncate(ctx, admin, table)?;
            return Ok(ResultBody::Void);
        }
        other => return Err(invalid(format!("{} is not a schema statement", other.kind()))),
    };
    for id in dropped {
        let rows = admin.coordinator.drop_local_table(id);
        tracing::info!(table_id = id, rows, "dropped table data");
    }
    let Some(change) = change else {
        return Ok(ResultBody::Void);
    };
    announce(admin, &change);
    Ok(ResultBody::SchemaChange(change))
}

fn announce(admin: &SchemaAdmin<'_>, change: &SchemaChange) {
    let keyspace = match &change.target {
        SchemaTarget::Keyspace { keyspace } | SchemaTarget::Table { keyspace, .. } => keyspace.clone(),
        _ => String::new(),
    };
    if matches!(change.change_type, ChangeType::Updated | ChangeType::Dropped) {
        admin.prepared.invalidate(&keyspace);
    }
    tracing::info!(?change, "schema changed");
    // No receivers is fine: nobody registered.
    let _ = admin.events.send(Event::SchemaChange(change.clone()));
}

/// TRUNCATE gives the table a new storage id and forgets the old one's rows: the table is
/// empty at once, whatever its size.
fn truncate(
    ctx: &Context<'_>,
    admin: &SchemaAdmin<'_>,
    name: &hayate_cql::statement::QualifiedName,
) -> QueryResult<()> {
    let ks = keyspace_of(ctx, name)?.to_owned();
    let old = admin.schema.update(
        |s, allocate| {
            let keyspace = s
                .keyspaces
                .get(&ks)
                .ok_or_else(|| invalid(format!("Keyspace '{ks}' does not exist")))?;
            let table = keyspace
                .tables
                .get(&name.name)
                .ok_or_else(|| invalid(format!("table {} does not exist", name.name)))?;
            if table.is_virtual {
                return Err(crate::error::unauthorized(format!(
                    "Cannot TRUNCATE system table {ks}.{}",
                    name.name
                )));
            }
            let mut t = (**table).clone();
            let old = t.storage_id;
            t.storage_id = allocate();
            let mut k = (**keyspace).clone();
            k.tables.insert(name.name.clone(), std::sync::Arc::new(t));
            s.keyspaces.insert(ks.clone(), std::sync::Arc::new(k));
            Ok(old)
        },
        ddl::save_failed,
    )?;
    let rows = admin.coordinator.drop_local_table(old);
    tracing::info!(table = %format!("{ks}.{}", name.name), rows, "truncated");
    Ok(())
}
