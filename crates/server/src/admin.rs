//! Statements that change the schema or the roles, and TRUNCATE.
//!
//! A schema change is saved before it is visible ([`crate::schema::store`]), announced to
//! connections that registered for SCHEMA_CHANGE events, and answered with a SCHEMA_CHANGE
//! result. Data of a dropped or truncated table is forgotten by the engine at once and its
//! space reclaimed by defragmentation.

use hayate_cql::response::event::{ChangeType, SchemaTarget};
use hayate_cql::response::result::ResultBody;
use hayate_cql::response::{Event, SchemaChange};
use hayate_cql::statement::Statement;
use hayate_storage::TableId;

use crate::error::{invalid, QueryResult};
use crate::query::{keyspace_of, Context};
use crate::schema::ddl;

pub fn run(ctx: &Context<'_>, stmt: &Statement) -> QueryResult<ResultBody> {
    let node = ctx.node;
    let mut dropped: Vec<TableId> = Vec::new();
    let change: Option<SchemaChange> = match stmt {
        Statement::CreateKeyspace {
            keyspace,
            if_not_exists,
            properties,
        } => node.schema.update(
            |s, _| ddl::create_keyspace(s, keyspace, *if_not_exists, properties),
            ddl::save_failed,
        )?,
        Statement::AlterKeyspace {
            keyspace,
            if_exists,
            properties,
        } => node.schema.update(
            |s, _| ddl::alter_keyspace(s, keyspace, *if_exists, properties),
            ddl::save_failed,
        )?,
        Statement::DropKeyspace { keyspace, if_exists } => node
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
            node.schema.update(
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
            node.schema.update(
                |s, _| ddl::alter_table(s, &ks, &table.name, *if_exists, action),
                ddl::save_failed,
            )?
        }
        Statement::DropTable { table, if_exists } => {
            let ks = keyspace_of(ctx, table)?.to_owned();
            node.schema
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
            truncate(ctx, table)?;
            return Ok(ResultBody::Void);
        }
        other => return crate::roles::run(ctx, other),
    };
    for id in dropped {
        let rows = node.engine.drop_table(id);
        tracing::info!(table_id = id, rows, "dropped table data");
    }
    let Some(change) = change else {
        return Ok(ResultBody::Void);
    };
    announce(ctx, &change);
    Ok(ResultBody::SchemaChange(change))
}

fn announce(ctx: &Context<'_>, change: &SchemaChange) {
    let keyspace = match &change.target {
        SchemaTarget::Keyspace { keyspace } | SchemaTarget::Table { keyspace, .. } => keyspace.clone(),
        _ => String::new(),
    };
    if matches!(change.change_type, ChangeType::Updated | ChangeType::Dropped) {
        ctx.node.prepared.invalidate(&keyspace);
    }
    tracing::info!(?change, "schema changed");
    // No receivers is fine: nobody registered.
    let _ = ctx.node.events.send(Event::SchemaChange(change.clone()));
}

/// TRUNCATE gives the table a new storage id and forgets the old one's rows: the table is
/// empty at once, whatever its size.
fn truncate(ctx: &Context<'_>, name: &hayate_cql::statement::QualifiedName) -> QueryResult<()> {
    let ks = keyspace_of(ctx, name)?.to_owned();
    let old = ctx.node.schema.update(
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
    let rows = ctx.node.engine.drop_table(old);
    tracing::info!(table = %format!("{ks}.{}", name.name), rows, "truncated");
    Ok(())
}
