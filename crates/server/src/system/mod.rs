//! The rows of the built-in tables, made from the node's state when they are read: what
//! drivers read at connect (`system.local`, `system.peers`), and the schema tables they build
//! their metadata from, and Cassandra 5.0's `system_views` of the node's own state ([`views`]).

pub mod describe;
pub mod views;

use std::net::IpAddr;

use hayate_cql::value::{encode_list, encode_map, encode_set, DataType};

use crate::error::QueryResult;
use crate::query::VirtualTables;
use crate::schema::{ddl, ColumnKind, OptionValue, Schema, Table, VirtualKind};

/// The CQL version drivers see: Cassandra 5.0's.
pub const CQL_VERSION: &str = "3.4.7";
/// The Cassandra version drivers see: the release line whose protocol, schema tables and CQL
/// hayate speaks and its driver suites are checked against (`HAYATE_REFERENCE`, Cassandra 5.0).
/// 4.0 or later makes drivers read `system_schema` and `system_virtual_schema` with their
/// modern parsers and cqlsh describe on the server; 5.0.0 is also what cqlsh 6.2 was built
/// against, and it warns on any other version. What 5.0 has and hayate does not (vector search,
/// SAI, triggers, materialized views) is refused with a clear error, not claimed.
pub const RELEASE_VERSION: &str = "5.0.0";

/// A node as `system.local` and `system.peers(_v2)` describe it.
#[derive(Clone, Debug)]
pub struct NodeRow {
    pub host_id: [u8; 16],
    pub data_center: String,
    pub rack: String,
    pub release_version: String,
    /// The internode address and port.
    pub listen_address: IpAddr,
    pub storage_port: u16,
    /// Where drivers connect.
    pub rpc_address: IpAddr,
    pub cql_port: u16,
    pub tokens: Vec<i64>,
    /// The schema version the node last announced (peers); the local one is the schema's.
    pub schema_version: Option<[u8; 16]>,
}

/// What the built-in tables show of the cluster: this node and the others.
pub trait ClusterView: Send + Sync {
    fn cluster_name(&self) -> &str;
    fn local(&self) -> NodeRow;
    /// Counts restarts, as Cassandra's gossip generation.
    fn generation(&self) -> i32;
    fn peers(&self) -> Vec<NodeRow>;
    /// Recent traced requests, for `system_traces`.
    fn trace_sessions(&self) -> Vec<std::sync::Arc<crate::trace::TraceSession>> {
        Vec::new()
    }
    /// The node's own state, for `system_views`; `None` shows those tables empty.
    fn views(&self) -> Option<&dyn views::NodeViews> {
        None
    }
}

/// The built-in tables, answering from the schema and a view of the cluster.
pub struct SystemTables<'a> {
    pub cluster: &'a dyn ClusterView,
}

impl VirtualTables for SystemTables<'_> {
    fn rows(&self, schema: &Schema, table: &Table) -> QueryResult<Vec<Vec<Option<Vec<u8>>>>> {
        rows(self.cluster, schema, table)
    }
}

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

fn text_list<'a>(items: impl IntoIterator<Item = &'a str>) -> Vec<u8> {
    let mut out = Vec::new();
    encode_list(items.into_iter().map(str::as_bytes), &mut out);
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

/// Every row of built-in `table`, in column order.
fn rows(cluster: &dyn ClusterView, schema: &Schema, table: &Table) -> QueryResult<Vec<Vec<Option<Vec<u8>>>>> {
    let rows = match (table.keyspace.as_str(), table.name.as_str()) {
        ("system", "local") => vec![local(cluster, schema, table)],
        ("system", "peers") | ("system", "peers_v2") => {
            cluster.peers().iter().map(|p| peer(p, table)).collect()
        }
        ("system_traces", "sessions") => cluster
            .trace_sessions()
            .iter()
            .map(|s| {
                RowBuilder::new(table)
                    .set("session_id", s.session_id.to_vec())
                    .set("client", inet(s.client))
                    .text("command", &s.command)
                    .set("coordinator", inet(s.coordinator))
                    .int("coordinator_port", s.coordinator_port)
                    .int("duration", s.duration_us)
                    .set(
                        "parameters",
                        text_map(s.parameters.iter().map(|(a, b)| (a.as_str(), b.as_str()))),
                    )
                    .text("request", &s.request)
                    .set("started_at", s.started_at_ms.to_be_bytes().to_vec())
                    .done()
            })
            .collect(),
        ("system_traces", "events") => cluster
            .trace_sessions()
            .iter()
            .flat_map(|s| {
                s.events.iter().map(move |e| {
                    RowBuilder::new(table)
                        .set("session_id", s.session_id.to_vec())
                        .set("event_id", e.event_id.to_vec())
                        .text("activity", &e.activity)
                        .set("source", inet(s.coordinator))
                        .int("source_elapsed", e.source_elapsed_us)
                        .int("source_port", s.coordinator_port)
                        .text("thread", &e.thread)
                        .done()
                })
            })
            .collect(),
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
        ("system_schema", "types") => schema
            .user_keyspaces()
            .flat_map(|k| k.types.values())
            .map(|t| {
                let types: Vec<String> = t.field_types.iter().map(ToString::to_string).collect();
                RowBuilder::new(table)
                    .text("keyspace_name", &t.keyspace)
                    .text("type_name", &t.name)
                    .set("field_names", text_list(t.field_names.iter().map(String::as_str)))
                    .set("field_types", text_list(types.iter().map(String::as_str)))
                    .done()
            })
            .collect(),
        ("system_schema", "columns") => schema_columns(schema, table, false),
        ("system_schema", "indexes") => schema
            .user_keyspaces()
            .flat_map(|k| {
                // In clustering order: by table, then index name, as bytes.
                let mut indexes: Vec<_> = k
                    .tables
                    .values()
                    .flat_map(|t| t.indexes.iter().map(move |i| (t, i)))
                    .collect();
                indexes.sort_by(|a, b| (&a.0.name, &a.1.name).cmp(&(&b.0.name, &b.1.name)));
                indexes
            })
            .map(|(t, i)| {
                let options = i.options_map(t);
                RowBuilder::new(table)
                    .text("keyspace_name", &t.keyspace)
                    .text("table_name", &t.name)
                    .text("index_name", &i.name)
                    .text("kind", i.kind())
                    .set(
                        "options",
                        text_map(options.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
                    )
                    .done()
            })
            .collect(),
        ("system_virtual_schema", "keyspaces") => schema
            .keyspaces
            .values()
            .filter(|k| k.virtual_kind == Some(VirtualKind::Virtual))
            .map(|k| RowBuilder::new(table).text("keyspace_name", &k.name).done())
            .collect(),
        ("system_virtual_schema", "tables") => schema_tables_rows(schema, table, true),
        ("system_virtual_schema", "columns") => schema_columns(schema, table, true),
        ("system_views", _) => cluster
            .views()
            .map(|v| views::rows(v, schema, table))
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    Ok(rows)
}

/// The address drivers should connect to: the listen address, or loopback when the node
/// listens on every interface.
pub fn rpc_address(listen: IpAddr) -> IpAddr {
    if listen.is_unspecified() {
        IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)
    } else {
        listen
    }
}

fn token_set(tokens: &[i64]) -> Vec<u8> {
    let tokens: Vec<String> = tokens.iter().map(i64::to_string).collect();
    text_set(tokens.iter().map(String::as_str))
}

fn local(cluster: &dyn ClusterView, schema: &Schema, table: &Table) -> Vec<Option<Vec<u8>>> {
    let me = cluster.local();
    RowBuilder::new(table)
        .text("key", "local")
        .text("bootstrapped", "COMPLETED")
        .set("broadcast_address", inet(me.listen_address))
        .int("broadcast_port", i32::from(me.storage_port))
        .text("cluster_name", cluster.cluster_name())
        .text("cql_version", CQL_VERSION)
        .text("data_center", &me.data_center)
        .int("gossip_generation", cluster.generation())
        .set("host_id", me.host_id.to_vec())
        .set("listen_address", inet(me.listen_address))
        .int("listen_port", i32::from(me.storage_port))
        .text("native_protocol_version", "4")
        .text("partitioner", "org.apache.cassandra.dht.Murmur3Partitioner")
        .text("rack", &me.rack)
        .text("release_version", &me.release_version)
        .set("rpc_address", inet(me.rpc_address))
        .int("rpc_port", i32::from(me.cql_port))
        .set("schema_version", schema.version.to_vec())
        .set("tokens", token_set(&me.tokens))
        .done()
}

/// One row of `system.peers` or `system.peers_v2`: the same columns where they share names,
/// and the ports and native address only `peers_v2` has.
fn peer(p: &NodeRow, table: &Table) -> Vec<Option<Vec<u8>>> {
    let v2 = table.name == "peers_v2";
    let mut row = RowBuilder::new(table)
        .set("peer", inet(p.listen_address))
        .text("data_center", &p.data_center)
        .set("host_id", p.host_id.to_vec())
        .text("rack", &p.rack)
        .text("release_version", &p.release_version)
        .set("tokens", token_set(&p.tokens));
    if let Some(v) = p.schema_version {
        row = row.set("schema_version", v.to_vec());
    }
    if v2 {
        row.int("peer_port", i32::from(p.storage_port))
            .set("native_address", inet(p.rpc_address))
            .int("native_port", i32::from(p.cql_port))
            .set("preferred_ip", inet(p.listen_address))
            .int("preferred_port", i32::from(p.storage_port))
            .done()
    } else {
        row.set("rpc_address", inet(p.rpc_address))
            .set("preferred_ip", inet(p.listen_address))
            .done()
    }
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
                    "flags" if t.is_counter() => row.set("flags", text_set(["compound", "counter"])),
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
