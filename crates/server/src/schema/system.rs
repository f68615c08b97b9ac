//! The built-in keyspaces drivers read at connect: `system`, `system_schema` and
//! `system_virtual_schema`, with the columns Cassandra 5.0 gives them. Their rows are made on
//! demand from the node's state ([`crate::system`]); here they are only described, so that
//! SELECT, prepared statements and the schema tables treat them like any table.

use std::collections::BTreeMap;
use std::sync::Arc;

use hayate_cql::value::DataType;

use super::{Column, ColumnKind, Keyspace, Schema, Table, VirtualKind};

/// Storage ids below this are never used by user tables; built-in tables take theirs from here.
const SYSTEM_TABLE_ID_BASE: u32 = 1;

type ColumnDef = (&'static str, &'static str, ColumnKind);

const P: ColumnKind = ColumnKind::PartitionKey;
const C: ColumnKind = ColumnKind::Clustering;
const R: ColumnKind = ColumnKind::Regular;

const LOCAL: &[ColumnDef] = &[
    ("key", "text", P),
    ("bootstrapped", "text", R),
    ("broadcast_address", "inet", R),
    ("broadcast_port", "int", R),
    ("cluster_name", "text", R),
    ("cql_version", "text", R),
    ("data_center", "text", R),
    ("gossip_generation", "int", R),
    ("host_id", "uuid", R),
    ("listen_address", "inet", R),
    ("listen_port", "int", R),
    ("native_protocol_version", "text", R),
    ("partitioner", "text", R),
    ("rack", "text", R),
    ("release_version", "text", R),
    ("rpc_address", "inet", R),
    ("rpc_port", "int", R),
    ("schema_version", "uuid", R),
    ("tokens", "set<text>", R),
    ("truncated_at", "map<uuid, blob>", R),
];

const PEERS: &[ColumnDef] = &[
    ("peer", "inet", P),
    ("data_center", "text", R),
    ("host_id", "uuid", R),
    ("preferred_ip", "inet", R),
    ("rack", "text", R),
    ("release_version", "text", R),
    ("rpc_address", "inet", R),
    ("schema_version", "uuid", R),
    ("tokens", "set<text>", R),
];

const PEERS_V2: &[ColumnDef] = &[
    ("peer", "inet", P),
    ("peer_port", "int", C),
    ("data_center", "text", R),
    ("host_id", "uuid", R),
    ("native_address", "inet", R),
    ("native_port", "int", R),
    ("preferred_ip", "inet", R),
    ("preferred_port", "int", R),
    ("rack", "text", R),
    ("release_version", "text", R),
    ("schema_version", "uuid", R),
    ("tokens", "set<text>", R),
];

const KEYSPACES: &[ColumnDef] = &[
    ("keyspace_name", "text", P),
    ("durable_writes", "boolean", R),
    ("replication", "frozen<map<text, text>>", R),
];

const TABLES: &[ColumnDef] = &[
    ("keyspace_name", "text", P),
    ("table_name", "text", C),
    ("additional_write_policy", "text", R),
    ("allow_auto_snapshot", "boolean", R),
    ("bloom_filter_fp_chance", "double", R),
    ("caching", "frozen<map<text, text>>", R),
    ("cdc", "boolean", R),
    ("comment", "text", R),
    ("compaction", "frozen<map<text, text>>", R),
    ("compression", "frozen<map<text, text>>", R),
    ("crc_check_chance", "double", R),
    // Removed as options in Cassandra 4.0 but still columns in 5.0, always 0: the DataStax Java
    // driver 3.x reads them for every table and logs an error when they are missing.
    ("dclocal_read_repair_chance", "double", R),
    ("default_time_to_live", "int", R),
    ("extensions", "frozen<map<text, blob>>", R),
    ("flags", "frozen<set<text>>", R),
    ("gc_grace_seconds", "int", R),
    ("id", "uuid", R),
    ("incremental_backups", "boolean", R),
    ("max_index_interval", "int", R),
    ("memtable", "text", R),
    ("memtable_flush_period_in_ms", "int", R),
    ("min_index_interval", "int", R),
    ("read_repair", "text", R),
    ("read_repair_chance", "double", R),
    ("speculative_retry", "text", R),
];

const COLUMNS: &[ColumnDef] = &[
    ("keyspace_name", "text", P),
    ("table_name", "text", C),
    ("column_name", "text", C),
    ("clustering_order", "text", R),
    ("column_name_bytes", "blob", R),
    ("kind", "text", R),
    ("position", "int", R),
    ("type", "text", R),
];

const DROPPED_COLUMNS: &[ColumnDef] = &[
    ("keyspace_name", "text", P),
    ("table_name", "text", C),
    ("column_name", "text", C),
    ("dropped_time", "timestamp", R),
    ("kind", "text", R),
    ("type", "text", R),
];

const TYPES: &[ColumnDef] = &[
    ("keyspace_name", "text", P),
    ("type_name", "text", C),
    ("field_names", "frozen<list<text>>", R),
    ("field_types", "frozen<list<text>>", R),
];

const FUNCTIONS: &[ColumnDef] = &[
    ("keyspace_name", "text", P),
    ("function_name", "text", C),
    ("argument_types", "frozen<list<text>>", C),
    ("argument_names", "frozen<list<text>>", R),
    ("body", "text", R),
    ("called_on_null_input", "boolean", R),
    ("language", "text", R),
    ("return_type", "text", R),
];

const AGGREGATES: &[ColumnDef] = &[
    ("keyspace_name", "text", P),
    ("aggregate_name", "text", C),
    ("argument_types", "frozen<list<text>>", C),
    ("final_func", "text", R),
    ("initcond", "text", R),
    ("return_type", "text", R),
    ("state_func", "text", R),
    ("state_type", "text", R),
];

const VIEWS: &[ColumnDef] = &[
    ("keyspace_name", "text", P),
    ("view_name", "text", C),
    ("additional_write_policy", "text", R),
    ("allow_auto_snapshot", "boolean", R),
    ("base_table_id", "uuid", R),
    ("base_table_name", "text", R),
    ("bloom_filter_fp_chance", "double", R),
    ("caching", "frozen<map<text, text>>", R),
    ("cdc", "boolean", R),
    ("comment", "text", R),
    ("compaction", "frozen<map<text, text>>", R),
    ("compression", "frozen<map<text, text>>", R),
    ("crc_check_chance", "double", R),
    ("dclocal_read_repair_chance", "double", R),
    ("default_time_to_live", "int", R),
    ("extensions", "frozen<map<text, blob>>", R),
    ("gc_grace_seconds", "int", R),
    ("id", "uuid", R),
    ("include_all_columns", "boolean", R),
    ("incremental_backups", "boolean", R),
    ("max_index_interval", "int", R),
    ("memtable", "text", R),
    ("memtable_flush_period_in_ms", "int", R),
    ("min_index_interval", "int", R),
    ("read_repair", "text", R),
    ("read_repair_chance", "double", R),
    ("speculative_retry", "text", R),
    ("where_clause", "text", R),
];

const INDEXES: &[ColumnDef] = &[
    ("keyspace_name", "text", P),
    ("table_name", "text", C),
    ("index_name", "text", C),
    ("kind", "text", R),
    ("options", "frozen<map<text, text>>", R),
];

const TRIGGERS: &[ColumnDef] = &[
    ("keyspace_name", "text", P),
    ("table_name", "text", C),
    ("trigger_name", "text", C),
    ("options", "frozen<map<text, text>>", R),
];

const VIRTUAL_KEYSPACES: &[ColumnDef] = &[("keyspace_name", "text", P)];

const VIRTUAL_TABLES: &[ColumnDef] = &[
    ("keyspace_name", "text", P),
    ("table_name", "text", C),
    ("comment", "text", R),
];

const VIRTUAL_COLUMNS: &[ColumnDef] = &[
    ("keyspace_name", "text", P),
    ("table_name", "text", C),
    ("column_name", "text", C),
    ("clustering_order", "text", R),
    ("column_name_bytes", "blob", R),
    ("kind", "text", R),
    ("position", "int", R),
    ("type", "text", R),
];

/// `system_traces`, with Cassandra 5's columns: the sessions of traced requests and their
/// events, kept in memory by [`crate::trace`].
const TRACE_SESSIONS: &[ColumnDef] = &[
    ("session_id", "uuid", P),
    ("client", "inet", R),
    ("command", "text", R),
    ("coordinator", "inet", R),
    ("coordinator_port", "int", R),
    ("duration", "int", R),
    ("parameters", "map<text, text>", R),
    ("request", "text", R),
    ("started_at", "timestamp", R),
];

const TRACE_EVENTS: &[ColumnDef] = &[
    ("session_id", "uuid", P),
    ("event_id", "timeuuid", C),
    ("activity", "text", R),
    ("source", "inet", R),
    ("source_elapsed", "int", R),
    ("source_port", "int", R),
    ("thread", "text", R),
];

// `system_views`, with Cassandra 5.0's columns (its db/virtual/*Table.java); what hayate puts in
// them is said in crate::system::views.

const CLIENTS: &[ColumnDef] = &[
    ("address", "inet", P),
    ("port", "int", C),
    ("authentication_metadata", "frozen<map<text, text>>", R),
    ("authentication_mode", "text", R),
    ("client_options", "frozen<map<text, text>>", R),
    ("connection_stage", "text", R),
    ("driver_name", "text", R),
    ("driver_version", "text", R),
    ("hostname", "text", R),
    ("keyspace_name", "text", R),
    ("protocol_version", "int", R),
    ("request_count", "bigint", R),
    ("ssl_cipher_suite", "text", R),
    ("ssl_enabled", "boolean", R),
    ("ssl_protocol", "text", R),
    ("username", "text", R),
];

const SETTINGS: &[ColumnDef] = &[("name", "text", P), ("value", "text", R)];

const THREAD_POOLS: &[ColumnDef] = &[
    ("name", "text", P),
    ("active_tasks", "int", R),
    ("active_tasks_limit", "int", R),
    ("blocked_tasks", "bigint", R),
    ("blocked_tasks_all_time", "bigint", R),
    ("completed_tasks", "bigint", R),
    ("pending_tasks", "int", R),
];

const CACHES: &[ColumnDef] = &[
    ("name", "text", P),
    ("capacity_bytes", "bigint", R),
    ("entry_count", "int", R),
    ("hit_count", "bigint", R),
    ("hit_ratio", "double", R),
    ("recent_hit_rate_per_second", "bigint", R),
    ("recent_request_rate_per_second", "bigint", R),
    ("request_count", "bigint", R),
    ("size_bytes", "bigint", R),
];

const DISK_USAGE: &[ColumnDef] = &[
    ("keyspace_name", "text", P),
    ("table_name", "text", P),
    ("mebibytes", "bigint", R),
];

const LATENCY: &[ColumnDef] = &[
    ("keyspace_name", "text", P),
    ("table_name", "text", P),
    ("50th_ms", "double", R),
    ("99th_ms", "double", R),
    ("count", "bigint", R),
    ("max_ms", "double", R),
    ("per_second", "double", R),
];

/// A built-in keyspace: its name, where it is listed, and its tables.
type KeyspaceDef = (
    &'static str,
    VirtualKind,
    &'static [(&'static str, &'static [ColumnDef])],
);

/// Every built-in keyspace with its tables.
const SYSTEM_KEYSPACES: &[KeyspaceDef] = &[
    (
        "system",
        VirtualKind::System,
        &[("local", LOCAL), ("peers", PEERS), ("peers_v2", PEERS_V2)],
    ),
    (
        "system_schema",
        VirtualKind::System,
        &[
            ("keyspaces", KEYSPACES),
            ("tables", TABLES),
            ("columns", COLUMNS),
            ("dropped_columns", DROPPED_COLUMNS),
            ("types", TYPES),
            ("functions", FUNCTIONS),
            ("aggregates", AGGREGATES),
            ("views", VIEWS),
            ("indexes", INDEXES),
            ("triggers", TRIGGERS),
        ],
    ),
    // No tables: roles and permissions live in the role and permission files. cqlsh looks
    // the keyspace up to print LIST ROLES and LIST PERMISSIONS, whose results name
    // system_auth tables, and fails with "Keyspace 'system_auth' not found" without it.
    ("system_auth", VirtualKind::System, &[]),
    (
        "system_virtual_schema",
        VirtualKind::Virtual,
        &[
            ("keyspaces", VIRTUAL_KEYSPACES),
            ("tables", VIRTUAL_TABLES),
            ("columns", VIRTUAL_COLUMNS),
        ],
    ),
    // Last, so that the storage ids of the tables above stay as they were.
    (
        "system_traces",
        VirtualKind::System,
        &[("sessions", TRACE_SESSIONS), ("events", TRACE_EVENTS)],
    ),
    // After the others, for the same reason.
    (
        "system_views",
        VirtualKind::Virtual,
        &[
            ("caches", CACHES),
            ("clients", CLIENTS),
            ("disk_usage", DISK_USAGE),
            ("local_read_latency", LATENCY),
            ("local_write_latency", LATENCY),
            ("settings", SETTINGS),
            ("thread_pools", THREAD_POOLS),
        ],
    ),
];

/// Adds the built-in keyspaces to `schema`.
pub fn add_system_keyspaces(schema: &mut Schema) {
    let mut id = SYSTEM_TABLE_ID_BASE;
    for (ks_name, kind, tables) in SYSTEM_KEYSPACES {
        let mut replication = BTreeMap::new();
        replication.insert(
            "class".to_owned(),
            "org.apache.cassandra.locator.LocalStrategy".to_owned(),
        );
        let mut keyspace = Keyspace {
            name: (*ks_name).to_owned(),
            replication,
            durable_writes: true,
            types: BTreeMap::new(),
            tables: BTreeMap::new(),
            virtual_kind: Some(*kind),
            strategy: Default::default(),
        };
        for (table_name, columns) in *tables {
            let table = build_table(ks_name, table_name, columns, id);
            id += 1;
            keyspace.tables.insert((*table_name).to_owned(), Arc::new(table));
        }
        schema.keyspaces.insert((*ks_name).to_owned(), Arc::new(keyspace));
    }
}

fn build_table(keyspace: &str, name: &str, defs: &[ColumnDef], storage_id: u32) -> Table {
    let columns: Vec<Column> = defs
        .iter()
        .enumerate()
        .map(|(i, (col, ty, kind))| Column {
            name: (*col).to_owned(),
            id: i as u32,
            ty: DataType::parse(ty).unwrap_or_else(|e| panic!("built-in type {ty} of {col}: {e}")),
            kind: *kind,
            descending: false,
        })
        .collect();
    let partition_key = (0..columns.len())
        .filter(|&i| columns[i].kind == ColumnKind::PartitionKey)
        .collect();
    let clustering = (0..columns.len())
        .filter(|&i| columns[i].kind == ColumnKind::Clustering)
        .collect();
    // A stable id per built-in table, as Cassandra derives them from the name.
    let mut uuid = [0u8; 16];
    let digest = hayate_storage::token::token(format!("{keyspace}.{name}").as_bytes());
    uuid[..8].copy_from_slice(&digest.to_be_bytes());
    uuid[8..].copy_from_slice(&(!digest).to_be_bytes());
    uuid[6] = (uuid[6] & 0x0F) | 0x30;
    uuid[8] = (uuid[8] & 0x3F) | 0x80;
    Table {
        keyspace: keyspace.to_owned(),
        name: name.to_owned(),
        storage_id,
        uuid,
        next_column_id: columns.len() as u32,
        indexes: Vec::new(),
        next_index_id: 1,
        columns,
        partition_key,
        clustering,
        options: BTreeMap::new(),
        counter: false,
        is_virtual: true,
    }
}
