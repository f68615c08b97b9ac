//! DESCRIBE, executed on the server as Cassandra 4 does it (cqlsh 6 sends DESCRIBE as a query
//! to a 4.x server and prints the rows). An element's description is the CQL that recreates it.

use hayate_cql::response::result::{ColumnSpec, ColumnType, ResultBody, Rows, RowsMetadata, TableSpec};
use hayate_cql::statement::{Describe, DescribeTarget, QualifiedName};
use hayate_cql::value::UserType;

use crate::error::{invalid, QueryResult};
use crate::query::Context;
use crate::schema::{ddl, quote_identifier, ColumnKind, Keyspace, OptionValue, Table};

fn spec(name: &str) -> ColumnSpec {
    ColumnSpec {
        table: TableSpec {
            keyspace: String::new(),
            table: String::new(),
        },
        name: name.to_owned(),
        ty: ColumnType::Varchar,
    }
}

fn result(columns: &[&str], rows: Vec<Vec<String>>) -> ResultBody {
    let mut content = Vec::new();
    for row in &rows {
        for v in row {
            content.extend_from_slice(&(v.len() as i32).to_be_bytes());
            content.extend_from_slice(v.as_bytes());
        }
    }
    ResultBody::Rows(Rows {
        metadata: RowsMetadata::new(columns.iter().map(|c| spec(c)).collect::<Vec<_>>()),
        rows_count: rows.len(),
        rows_content: content,
    })
}

const ELEMENT: &[&str] = &["keyspace_name", "type", "name", "create_statement"];
const LISTING: &[&str] = &["keyspace_name", "type", "name"];

pub fn run(ctx: &Context<'_>, cluster_name: &str, d: &Describe) -> QueryResult<ResultBody> {
    let schema = &ctx.schema;
    let user = || schema.user_keyspaces();
    match &d.target {
        DescribeTarget::Keyspaces => Ok(result(
            LISTING,
            schema
                .keyspaces
                .values()
                .map(|k| vec![k.name.clone(), "keyspace".into(), k.name.clone()])
                .collect(),
        )),
        DescribeTarget::Tables => {
            // The current keyspace's tables, or every keyspace's when there is none.
            let mut rows = Vec::new();
            for k in schema
                .keyspaces
                .values()
                .filter(|k| ctx.keyspace.is_none_or(|current| current == k.name))
            {
                for t in k.tables.values() {
                    rows.push(vec![k.name.clone(), "table".into(), t.name.clone()]);
                }
            }
            Ok(result(LISTING, rows))
        }
        DescribeTarget::Types => {
            let mut rows = Vec::new();
            for k in schema
                .keyspaces
                .values()
                .filter(|k| ctx.keyspace.is_none_or(|current| current == k.name))
            {
                for t in k.types.values() {
                    rows.push(vec![k.name.clone(), "type".into(), t.name.clone()]);
                }
            }
            Ok(result(LISTING, rows))
        }
        DescribeTarget::Functions | DescribeTarget::Aggregates => Ok(result(LISTING, Vec::new())),
        DescribeTarget::Type(name) => {
            let t = user_type(ctx, name)?;
            Ok(result(ELEMENT, vec![type_row(&t)]))
        }
        DescribeTarget::Cluster => Ok(result(
            &["cluster", "partitioner", "snitch"],
            vec![vec![
                cluster_name.to_owned(),
                // Cassandra names both by their short class names here.
                "Murmur3Partitioner".into(),
                "SimpleSnitch".into(),
            ]],
        )),
        DescribeTarget::Schema { .. } => {
            let mut rows = Vec::new();
            for k in user() {
                keyspace_rows(k, false, &mut rows);
            }
            Ok(result(ELEMENT, rows))
        }
        DescribeTarget::Keyspace { keyspace, only } => {
            let name = keyspace
                .as_deref()
                .or(ctx.keyspace)
                .ok_or_else(|| invalid("No keyspace specified and no current keyspace"))?;
            let k = schema
                .keyspace(name)
                .ok_or_else(|| invalid(format!("'{name}' not found in keyspaces")))?;
            let mut rows = Vec::new();
            keyspace_rows(k, *only, &mut rows);
            Ok(result(ELEMENT, rows))
        }
        DescribeTarget::Table(name) => {
            let t = table(ctx, name)?;
            Ok(result(ELEMENT, vec![table_row(&t)]))
        }
        DescribeTarget::Name(name) => {
            if name.keyspace.is_none() {
                if let Some(k) = schema.keyspace(&name.name) {
                    let mut rows = Vec::new();
                    keyspace_rows(k, false, &mut rows);
                    return Ok(result(ELEMENT, rows));
                }
            }
            match table(ctx, name) {
                Ok(t) => Ok(result(ELEMENT, vec![table_row(&t)])),
                Err(e) => match user_type(ctx, name) {
                    Ok(t) => Ok(result(ELEMENT, vec![type_row(&t)])),
                    Err(_) => Err(e),
                },
            }
        }
        _ => Err(invalid(
            "hayate has no user types, functions, aggregates, indexes or views to describe",
        )),
    }
}

/// The keyspace a DESCRIBE of `name` looks in: the one it names, or the current one.
fn keyspace_of<'a>(ctx: &'a Context<'_>, name: &'a QualifiedName) -> QueryResult<(&'a str, &'a Keyspace)> {
    let ks = name
        .keyspace
        .as_deref()
        .or(ctx.keyspace)
        .ok_or_else(|| invalid("No keyspace specified and no current keyspace"))?;
    let k = ctx
        .schema
        .keyspace(ks)
        .ok_or_else(|| invalid(format!("'{ks}' not found in keyspaces")))?;
    Ok((ks, k))
}

fn table(ctx: &Context<'_>, name: &QualifiedName) -> QueryResult<std::sync::Arc<Table>> {
    let (ks, k) = keyspace_of(ctx, name)?;
    k.tables
        .get(&name.name)
        .cloned()
        .ok_or_else(|| invalid(format!("'{}' not found in keyspace '{ks}'", name.name)))
}

fn user_type(ctx: &Context<'_>, name: &QualifiedName) -> QueryResult<std::sync::Arc<UserType>> {
    let (ks, k) = keyspace_of(ctx, name)?;
    k.types
        .get(&name.name)
        .cloned()
        .ok_or_else(|| invalid(format!("User defined type '{}' not found in '{ks}'", name.name)))
}

fn type_row(t: &UserType) -> Vec<String> {
    vec![t.keyspace.clone(), "type".into(), t.name.clone(), create_type(t)]
}

/// The CQL that recreates a user-defined type, laid out as Cassandra lays it out.
pub fn create_type(t: &UserType) -> String {
    let fields: Vec<String> = t
        .field_names
        .iter()
        .zip(&t.field_types)
        .map(|(n, ty)| format!("    {} {ty}", quote_identifier(n)))
        .collect();
    format!(
        "CREATE TYPE {}.{} (\n{}\n);",
        quote_identifier(&t.keyspace),
        quote_identifier(&t.name),
        fields.join(",\n")
    )
}

/// The keyspace's types in an order that recreates them: each after the types it uses.
fn types_in_creation_order(k: &Keyspace) -> Vec<&std::sync::Arc<UserType>> {
    let mut out: Vec<&std::sync::Arc<UserType>> = Vec::new();
    let mut rest: Vec<&std::sync::Arc<UserType>> = k.types.values().collect();
    while !rest.is_empty() {
        let before = rest.len();
        rest.retain(|t| {
            let ready = k.types.values().all(|other| {
                other.name == t.name
                    || out.iter().any(|o| o.name == other.name)
                    || !t
                        .field_types
                        .iter()
                        .any(|f| f.uses_user_type(&k.name, &other.name))
            });
            if ready {
                out.push(t);
            }
            !ready
        });
        if rest.len() == before {
            // Unreachable for a schema DDL built; keep every type listed regardless.
            out.append(&mut rest);
        }
    }
    out
}

fn keyspace_rows(k: &Keyspace, only: bool, rows: &mut Vec<Vec<String>>) {
    rows.push(vec![
        k.name.clone(),
        "keyspace".into(),
        k.name.clone(),
        create_keyspace(k),
    ]);
    if !only {
        for t in types_in_creation_order(k) {
            rows.push(type_row(t));
        }
        for t in k.tables.values() {
            rows.push(table_row(t));
        }
    }
}

fn quote_string(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

pub fn create_keyspace(k: &Keyspace) -> String {
    let replication: Vec<String> = k
        .replication
        .iter()
        .map(|(a, b)| format!("{}: {}", quote_string(a), quote_string(b)))
        .collect();
    format!(
        "CREATE KEYSPACE {} WITH replication = {{{}}}  AND durable_writes = {};",
        quote_identifier(&k.name),
        replication.join(", "),
        k.durable_writes
    )
}

fn table_row(t: &Table) -> Vec<String> {
    vec![
        t.keyspace.clone(),
        "table".into(),
        t.name.clone(),
        create_table(t),
    ]
}

pub fn create_table(t: &Table) -> String {
    let mut s = format!(
        "CREATE TABLE {}.{} (\n",
        quote_identifier(&t.keyspace),
        quote_identifier(&t.name)
    );
    let single_key = t.partition_key.len() == 1 && t.clustering.is_empty();
    for c in &t.columns {
        s.push_str(&format!("    {} {}", quote_identifier(&c.name), c.ty));
        if c.kind == ColumnKind::Static {
            s.push_str(" static");
        }
        if single_key && c.kind == ColumnKind::PartitionKey {
            s.push_str(" PRIMARY KEY");
        }
        s.push_str(",\n");
    }
    if single_key {
        s.truncate(s.len() - 2);
        s.push('\n');
    } else {
        let pk: Vec<String> = t.partition_columns().map(|c| quote_identifier(&c.name)).collect();
        let pk = if pk.len() == 1 {
            pk[0].clone()
        } else {
            format!("({})", pk.join(", "))
        };
        let mut key = vec![pk];
        key.extend(t.clustering_columns().map(|c| quote_identifier(&c.name)));
        s.push_str(&format!("    PRIMARY KEY ({})\n", key.join(", ")));
    }
    s.push_str(") WITH ");
    let mut options = Vec::new();
    if !t.clustering.is_empty() {
        let order: Vec<String> = t
            .clustering_columns()
            .map(|c| {
                format!(
                    "{} {}",
                    quote_identifier(&c.name),
                    if c.descending { "DESC" } else { "ASC" }
                )
            })
            .collect();
        options.push(format!("CLUSTERING ORDER BY ({})", order.join(", ")));
    }
    for (name, _) in ddl::TABLE_OPTION_DEFAULTS {
        let value = match ddl::table_option(t, name) {
            OptionValue::Map(m) => {
                let entries: Vec<String> = m
                    .iter()
                    .map(|(a, b)| format!("{}: {}", quote_string(a), quote_string(b)))
                    .collect();
                format!("{{{}}}", entries.join(", "))
            }
            OptionValue::Text(v) => {
                let numeric = v.parse::<f64>().is_ok()
                    && !matches!(*name, "speculative_retry" | "additional_write_policy");
                if numeric || v == "true" || v == "false" {
                    v
                } else {
                    quote_string(&v)
                }
            }
        };
        options.push(format!("{name} = {value}"));
    }
    s.push_str(&options.join("\n    AND "));
    s.push(';');
    s
}
