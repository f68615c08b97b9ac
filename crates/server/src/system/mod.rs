//! The rows of the built-in tables, made from the node's state when they are read: what
//! drivers read at connect (`system.local`, `system.peers`), and the schema tables they build
//! their metadata from.

pub mod describe;

use std::net::IpAddr;

use hayate_cql::value::{encode_map, encode_set, DataType};

use crate::error::QueryResult;
use crate::node::{Node, CQL_VERSION, DATA_CENTER, RACK, RELEASE_VERSION};
use crate::query::Context;
use crate::schema::{ddl, ColumnKind, OptionValue, Schema, Table, VirtualKind};

/// One row being filled in by column name.
struct RowBuilder<'t> {
    table: &'t Table,
    values: Vec<Option<Vec<u8>>>,
}

impl<'t> RowBuilder<'t> {
    fn new(table: &'t Table) -> RowBuilder<'t> {
        RowBuilder {
            table,
            values: vec![None; table.columns.len()],
        }
    }

    fn set(mut self, column: &str, value: Vec<u8>) -> Self {
        let i = self
            .table
            .column_index(column)
            .unwrap_or_else(|| panic!("built-in table {} has no column {column}", self.table.name));
        self.values[i] = Some(value);
        self
    }

    fn text(self, column: &str, v: &str) -> Self {
        self.set(column, v.as_bytes().to_vec())
    }

    fn int(self, column: &str, v: i32) -> Self {
        self.set(column, v.to_be_bytes().to_vec())
    }

    fn boolean(self, column: &str, v: bool) -> Self {
        self.set(column, vec![u8::from(v)])
    }

    fn done(self) -> Vec<Option<Vec<u8>>> {
        self.values
    }
}

fn inet(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

fn text_set<'a>(items: impl IntoIterator<Item = &'a str>) -> Vec<u8> {
    let mut out = Vec::new();
    encode_set(
        &DataType::Text,
        items.into_iter().map(|s| s.as_bytes().to_vec()).collect(),
        &mut out,
    );
    out
}

fn text_map<'a>(items: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<u8> {
    let mut out = Vec::new();
    encode_map(
        &DataType::Text,
        items
            .into_iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect(),
        &mut out,
    );
    out
}

/// The address drivers should connect to: the listen address, or loopback when the node
/// listens on every interface.
pub fn rpc_address(node: &Node) -> IpAddr {
    let ip = node.config.listen_address;
    if ip.is_unspecified() {
        IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)
    } else {
        ip
    }
}

/// Every row of built-in `table`, in column order.
pub fn rows(ctx: &Context<'_>, table: &Table) -> QueryResult<Vec<Vec<Option<Vec<u8>>>>> {
    let node = ctx.node;
    let schema = &ctx.schema;
    let rows = match (table.keyspace.as_str(), table.name.as_str()) {
        ("system", "local") => vec![local(node, schema, table)],
        ("system", "peers") | ("system", "peers_v2") => Vec::new(),
        ("system_schema", "keyspaces") => schema
            .keyspaces
            .values()
            .filter(|k| k.virtual_kind != Some(VirtualKind::Virtual))
            .map(|k| {
                RowBuilder::new(table)
                    .text("keyspace_name", &k.name)
                    .boolean("durable_writes", k.durable_writes)
                    .set(
                        "replication",
                        text_map(k.replication.iter().map(|(a, b)| (a.as_str(), b.as_str()))),
                    )
                    .done()
            })
            .collect(),
        ("system_schema", "tables") => schema_tables_rows(schema, table, false),
        ("system_schema", "columns") => schema_columns(schema, table, false),
        ("system_virtual_schema", "keyspaces") => schema
            .keyspaces
            .values()
            .filter(|k| k.virtual_kind == Some(VirtualKind::Virtual))
            .map(|k| RowBuilder::new(table).text("keyspace_name", &k.name).done())
            .collect(),
        ("system_virtual_schema", "tables") => schema_tables_rows(schema, table, true),
        ("system_virtual_schema", "columns") => schema_columns(schema, table, true),
        _ => Vec::new(),
    };
    Ok(rows)
}

fn local(node: &Node, schema: &Schema, table: &Table) -> Vec<Option<Vec<u8>>> {
    let ip = rpc_address(node);
    let tokens: Vec<String> = node.local.tokens.iter().map(i64::to_string).collect();
    RowBuilder::new(table)
        .text("key", "local")
        .text("bootstrapped", "COMPLETED")
        .set("broadcast_address", inet(ip))
        .int("broadcast_port", 7000)
        .text("cluster_name", &node.config.cluster_name)
        .text("cql_version", CQL_VERSION)
        .text("data_center", DATA_CENTER)
        .int("gossip_generation", node.local.generation)
        .set("host_id", node.local.host_id.to_vec())
        .set("listen_address", inet(ip))
        .int("listen_port", 7000)
        .text("native_protocol_version", "4")
        .text("partitioner", "org.apache.cassandra.dht.Murmur3Partitioner")
        .text("rack", RACK)
        .text("release_version", RELEASE_VERSION)
        .set("rpc_address", inet(ip))
        .int("rpc_port", i32::from(node.config.cql_port))
        .set("schema_version", schema.version.to_vec())
        .set("tokens", text_set(tokens.iter().map(String::as_str)))
        .done()
}

fn listed(schema: &Schema, virtual_schema: bool) -> impl Iterator<Item = &std::sync::Arc<Table>> {
    schema
        .keyspaces
        .values()
        .filter(move |k| (k.virtual_kind == Some(VirtualKind::Virtual)) == virtual_schema)
        .flat_map(|k| k.tables.values())
}

fn option_bytes(t: &Table, name: &str, ty: &DataType) -> Vec<u8> {
    match ddl::table_option(t, name) {
        OptionValue::Map(m) => text_map(m.iter().map(|(a, b)| (a.as_str(), b.as_str()))),
        OptionValue::Text(v) => match ty {
            DataType::Int => v.parse::<i32>().unwrap_or(0).to_be_bytes().to_vec(),
            DataType::Double => v.parse::<f64>().unwrap_or(0.0).to_be_bytes().to_vec(),
            DataType::Boolean => vec![u8::from(v == "true")],
            _ => v.into_bytes(),
        },
    }
}

fn schema_tables_rows(schema: &Schema, table: &Table, virtual_schema: bool) -> Vec<Vec<Option<Vec<u8>>>> {
    listed(schema, virtual_schema)
        .map(|t| {
            let mut row = RowBuilder::new(table)
                .text("keyspace_name", &t.keyspace)
                .text("table_name", &t.name);
            if virtual_schema {
                return row.text("comment", "").done();
            }
            for c in &table.columns {
                if c.kind != ColumnKind::Regular {
                    continue;
                }
                let name = c.name.as_str();
                row = match name {
                    "id" => row.set("id", t.uuid.to_vec()),
                    // Every CQL table is "compound" in Cassandra's terms.
                    "flags" => row.set("flags", text_set(["compound"])),
                    "extensions" => {
                        let mut out = Vec::new();
                        encode_map(&DataType::Text, Vec::new(), &mut out);
                        row.set("extensions", out)
                    }
                    _ => {
                        let bytes = option_bytes(t, name, &c.ty);
                        row.set(name, bytes)
                    }
                };
            }
            row.done()
        })
        .collect()
}

fn schema_columns(schema: &Schema, table: &Table, virtual_schema: bool) -> Vec<Vec<Option<Vec<u8>>>> {
    let mut rows = Vec::new();
    for t in listed(schema, virtual_schema) {
        for (i, c) in t.columns.iter().enumerate() {
            let position = t.key_position(i).map_or(-1, |p| p as i32);
            let order = match c.kind {
                ColumnKind::Clustering if c.descending => "desc",
                ColumnKind::Clustering => "asc",
                _ => "none",
            };
            rows.push(
                RowBuilder::new(table)
                    .text("keyspace_name", &t.keyspace)
                    .text("table_name", &t.name)
                    .text("column_name", &c.name)
                    .text("clustering_order", order)
                    .set("column_name_bytes", c.name.as_bytes().to_vec())
                    .text("kind", c.kind.as_str())
                    .int("position", position)
                    .text("type", &c.ty.to_string())
                    .done(),
            );
        }
    }
    rows
}
