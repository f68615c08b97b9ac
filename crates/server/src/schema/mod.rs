//! The schema: keyspaces, tables and columns, as the executor and the system tables see them.
//!
//! A [`Schema`] is immutable once built; a change builds a new one and swaps it in
//! ([`store::SchemaStore`]), so a request holds one consistent `Arc<Schema>` from start to end.
//! User keyspaces are saved to `<data_dir>/schema.json` on every change; the system keyspaces
//! are built in ([`system`]) and never saved.
//!
//! Every table gets a storage table id that is never reused, and every column a number that is
//! never reused within its table, so data written under a dropped table or column can never be
//! read as a new one's.

pub mod ddl;
pub mod index;
pub mod machine;
pub mod store;
pub mod system;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use hayate_cluster::consistency::Replication;
use hayate_cql::statement::QualifiedName;
use hayate_cql::value::{DataType, UserType};
use hayate_storage::TableId;
use serde::{Deserialize, Serialize};

use crate::error::{invalid, QueryResult};

pub use store::SchemaStore;

/// Cassandra's largest TTL: 20 years.
pub const TTL_MAX_S: u32 = 630_720_000;

/// The first storage table id given to a user table; ids below are reserved.
pub const USER_TABLE_ID_MIN: TableId = 1024;

#[derive(Clone, Debug, Default)]
pub struct Schema {
    pub keyspaces: BTreeMap<String, Arc<Keyspace>>,
    /// Changes whenever the schema does; drivers compare it across nodes (schema agreement).
    pub version: [u8; 16],
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Keyspace {
    pub name: String,
    /// The replication map as given, `class` included (`SimpleStrategy`,
    /// `NetworkTopologyStrategy`), with the class name in its full Java form as Cassandra shows.
    pub replication: BTreeMap<String, String>,
    pub durable_writes: bool,
    /// The keyspace's user-defined types, by name. A type's definition is copied into every
    /// type that uses it (columns and other types), and `ALTER TYPE` rewrites those copies.
    #[serde(default, with = "user_types")]
    pub types: BTreeMap<String, Arc<UserType>>,
    #[serde(skip)]
    pub tables: BTreeMap<String, Arc<Table>>,
    /// Built-in keyspaces are served from memory, not storage, and cannot be changed.
    #[serde(skip)]
    pub virtual_kind: Option<VirtualKind>,
    /// `replication` as the coordinator takes it, made once on first use.
    #[serde(skip)]
    pub strategy: OnceLock<Replication>,
}

/// Where a built-in keyspace is listed: `system_schema` for Cassandra's local system
/// keyspaces, `system_virtual_schema` for its virtual ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VirtualKind {
    System,
    Virtual,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Table {
    pub keyspace: String,
    pub name: String,
    /// The storage engine's number for this table.
    pub storage_id: TableId,
    /// The table's UUID, as `system_schema.tables.id` shows it.
    pub uuid: [u8; 16],
    pub columns: Vec<Column>,
    /// Indexes into `columns`, in key order.
    pub partition_key: Vec<usize>,
    pub clustering: Vec<usize>,
    /// Table options the user set (`comment`, `default_time_to_live`, `compaction`, ...);
    /// the rest take Cassandra's defaults ([`ddl::TABLE_OPTION_DEFAULTS`]).
    pub options: BTreeMap<String, OptionValue>,
    pub next_column_id: u32,
    /// A counter table: created with counter columns, it stays one when they are dropped
    /// (Cassandra's `counter` flag).
    #[serde(default)]
    pub counter: bool,
    /// The table's secondary indexes (`index.rs`).
    #[serde(default)]
    pub indexes: Vec<index::IndexDef>,
    /// The storage number the next index gets (numbers are not reused).
    #[serde(default)]
    pub next_index_id: u32,
    #[serde(skip)]
    pub is_virtual: bool,
}

/// A table option's value: text (numbers are kept as their text) or a map of text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum OptionValue {
    Text(String),
    Map(BTreeMap<String, String>),
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    /// The cell column number in storage.
    pub id: u32,
    #[serde(with = "type_text")]
    pub ty: DataType,
    pub kind: ColumnKind,
    pub descending: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ColumnKind {
    PartitionKey,
    Clustering,
    Regular,
    Static,
}

impl ColumnKind {
    /// The `kind` column of `system_schema.columns`.
    pub fn as_str(self) -> &'static str {
        match self {
            ColumnKind::PartitionKey => "partition_key",
            ColumnKind::Clustering => "clustering",
            ColumnKind::Regular => "regular",
            ColumnKind::Static => "static",
        }
    }

    /// True for partition key and clustering columns.
    pub fn is_primary_key(self) -> bool {
        matches!(self, ColumnKind::PartitionKey | ColumnKind::Clustering)
    }
}

/// A column's type in the schema file is its CQL text. A user-defined type in it is read as a
/// placeholder of that name (an empty keyspace and no fields), which the store replaces with
/// the keyspace's definition once the whole keyspace is read ([`Keyspace::resolve`]).
mod type_text {
    use std::sync::Arc;

    use hayate_cql::value::{DataType, UserType};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(ty: &DataType, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&ty.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DataType, D::Error> {
        let text = String::deserialize(d)?;
        DataType::parse_with(&text, &placeholder).map_err(serde::de::Error::custom)
    }

    pub fn placeholder(name: &str) -> Option<Arc<UserType>> {
        Some(Arc::new(UserType {
            keyspace: String::new(),
            name: name.to_owned(),
            field_names: Vec::new(),
            field_types: Vec::new(),
        }))
    }
}

/// User-defined types in the schema file: each with its fields' names and type texts, read
/// back in an order where a type comes after the types its fields use.
mod user_types {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use hayate_cql::value::{DataType, UserType};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Stored {
        keyspace: String,
        name: String,
        fields: Vec<(String, String)>,
    }

    pub fn serialize<S: Serializer>(
        types: &BTreeMap<String, Arc<UserType>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let stored: Vec<Stored> = types
            .values()
            .map(|t| Stored {
                keyspace: t.keyspace.clone(),
                name: t.name.clone(),
                fields: t
                    .field_names
                    .iter()
                    .zip(&t.field_types)
                    .map(|(n, ty)| (n.clone(), ty.to_string()))
                    .collect(),
            })
            .collect();
        stored.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, Arc<UserType>>, D::Error> {
        let mut pending: Vec<Stored> = Vec::deserialize(d)?;
        let mut done: BTreeMap<String, Arc<UserType>> = BTreeMap::new();
        // Each pass defines the types whose fields use only types already defined; a pass that
        // defines none means a type names one that is not in the file.
        while !pending.is_empty() {
            let before = pending.len();
            let mut rest = Vec::new();
            for t in pending {
                let lookup = |n: &str| done.get(n).cloned();
                let types: Result<Vec<DataType>, _> = t
                    .fields
                    .iter()
                    .map(|(_, text)| DataType::parse_with(text, &lookup))
                    .collect();
                match types {
                    Ok(field_types) => {
                        let def = UserType {
                            keyspace: t.keyspace.clone(),
                            name: t.name.clone(),
                            field_names: t.fields.iter().map(|(n, _)| n.clone()).collect(),
                            field_types,
                        };
                        done.insert(t.name.clone(), Arc::new(def));
                    }
                    Err(_) => rest.push(t),
                }
            }
            if rest.len() == before {
                let names: Vec<&str> = rest.iter().map(|t| t.name.as_str()).collect();
                return Err(serde::de::Error::custom(format!(
                    "user-defined types {} use types that are not defined",
                    names.join(", ")
                )));
            }
            pending = rest;
        }
        Ok(done)
    }
}

impl Schema {
    pub fn keyspace(&self, name: &str) -> Option<&Arc<Keyspace>> {
        self.keyspaces.get(name)
    }

    /// User keyspaces, in name order.
    pub fn user_keyspaces(&self) -> impl Iterator<Item = &Arc<Keyspace>> {
        self.keyspaces.values().filter(|k| k.virtual_kind.is_none())
    }
}

impl Keyspace {
    /// Replaces the placeholders a schema file's column types were read with by the
    /// keyspace's type definitions; a column naming a type the keyspace does not define is a
    /// damaged file.
    pub fn resolve(&mut self) -> Result<(), String> {
        for table in self.tables.values_mut() {
            let t = Arc::make_mut(table);
            for c in &mut t.columns {
                for def in self.types.values() {
                    c.ty = c.ty.with_user_type(def);
                }
                if let Some(name) = placeholder_in(&c.ty) {
                    return Err(format!(
                        "column {}.{}.{} uses the type {name}, which the keyspace does not define",
                        self.name, t.name, c.name
                    ));
                }
            }
        }
        Ok(())
    }

    /// The keyspace's type named `name`, for parsing a type text used in it.
    pub fn user_type(&self, name: &str) -> Option<Arc<UserType>> {
        self.types.get(name).cloned()
    }

    /// The replication strategy and factors, for the coordinator.
    pub fn strategy(&self) -> &Replication {
        self.strategy.get_or_init(|| {
            if self.virtual_kind.is_some() {
                return Replication::Local;
            }
            let class = self.replication.get("class").map(String::as_str).unwrap_or("");
            if class.ends_with("NetworkTopologyStrategy") {
                Replication::NetworkTopology {
                    factors: self
                        .replication
                        .iter()
                        .filter(|(k, _)| k.as_str() != "class")
                        .filter_map(|(dc, v)| Some((dc.clone(), parse_replicas(v)?)))
                        .collect(),
                }
            } else {
                Replication::Simple {
                    factor: self.replication_factor(),
                }
            }
        })
    }

    /// How many replicas the keyspace asks for in total (summed over data centers for
    /// NetworkTopologyStrategy).
    pub fn replication_factor(&self) -> usize {
        let class = self.replication.get("class").map(String::as_str).unwrap_or("");
        if class.ends_with("NetworkTopologyStrategy") {
            self.replication
                .iter()
                .filter(|(k, _)| k.as_str() != "class")
                .filter_map(|(_, v)| parse_replicas(v))
                .sum()
        } else {
            self.replication
                .get("replication_factor")
                .and_then(|v| parse_replicas(v))
                .unwrap_or(1)
        }
    }
}

/// The name of a user-defined type placeholder (read from a schema file, not yet resolved)
/// inside `ty`, if one is left.
fn placeholder_in(ty: &DataType) -> Option<&str> {
    match ty {
        DataType::Udt { def, .. } if def.keyspace.is_empty() => Some(&def.name),
        DataType::Udt { def, .. } => def.field_types.iter().find_map(placeholder_in),
        DataType::List { element, .. } | DataType::Set { element, .. } => placeholder_in(element),
        DataType::Map { key, value, .. } => placeholder_in(key).or_else(|| placeholder_in(value)),
        DataType::Tuple(types) => types.iter().find_map(placeholder_in),
        _ => None,
    }
}

/// `"3"` or Cassandra's transient form `"3/1"` (full replicas first).
fn parse_replicas(v: &str) -> Option<usize> {
    v.split('/').next()?.trim().parse().ok()
}

impl Table {
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    pub fn partition_columns(&self) -> impl Iterator<Item = &Column> {
        self.partition_key.iter().map(|&i| &self.columns[i])
    }

    pub fn clustering_columns(&self) -> impl Iterator<Item = &Column> {
        self.clustering.iter().map(|&i| &self.columns[i])
    }

    /// Columns in the order `SELECT *` returns them, as Cassandra does: partition key, then
    /// clustering columns, then the static columns by name, then the regular ones by name
    /// (Cassandra's `RegularAndStaticColumns.selectOrderIterator`).
    pub fn select_star_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = self.partition_key.clone();
        order.extend(&self.clustering);
        let mut rest: Vec<usize> = (0..self.columns.len()).filter(|i| !order.contains(i)).collect();
        rest.sort_by(|a, b| {
            let (a, b) = (&self.columns[*a], &self.columns[*b]);
            (a.kind != ColumnKind::Static, &a.name).cmp(&(b.kind != ColumnKind::Static, &b.name))
        });
        order.extend(rest);
        order
    }

    /// The position of a key column within its key (partition or clustering).
    pub fn key_position(&self, column_index: usize) -> Option<usize> {
        self.partition_key
            .iter()
            .position(|&i| i == column_index)
            .or_else(|| self.clustering.iter().position(|&i| i == column_index))
    }

    /// The table's `speculative_retry` option, as the coordinator takes it.
    pub fn speculative_retry(&self) -> hayate_cluster::coordinator::SpeculativeRetry {
        match self.options.get("speculative_retry") {
            Some(OptionValue::Text(v)) => hayate_cluster::coordinator::SpeculativeRetry::parse(v),
            _ => hayate_cluster::coordinator::SpeculativeRetry::default(),
        }
    }

    /// True if the table is a counter table: its columns besides the primary key are counters
    /// (Cassandra allows no mix), written only by increments ([`hayate_cluster::counter`]).
    pub fn is_counter(&self) -> bool {
        self.counter
    }

    /// True if the table has a static column: then every partition may hold a static row,
    /// stored under the empty clustering key (see `query::cells`).
    pub fn has_statics(&self) -> bool {
        self.columns.iter().any(|c| c.kind == ColumnKind::Static)
    }

    /// `gc_grace_seconds` if the table sets it; otherwise the storage namespace's
    /// `tombstone_grace_s` applies (864000 by default, Cassandra's default too).
    pub fn gc_grace_s(&self) -> Option<u32> {
        match self.options.get("gc_grace_seconds") {
            Some(OptionValue::Text(v)) => v.parse().ok(),
            _ => None,
        }
    }

    pub fn default_ttl_s(&self) -> u32 {
        match self.options.get("default_time_to_live") {
            Some(OptionValue::Text(v)) => v.parse().unwrap_or(0),
            _ => 0,
        }
    }
}

/// Quotes an identifier for CQL text when it needs it, as Cassandra's `ColumnIdentifier` does.
pub fn quote_identifier(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !RESERVED_KEYWORDS.contains(&name);
    if plain {
        name.to_owned()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// CQL's reserved words, which must be quoted to be used as names.
const RESERVED_KEYWORDS: &[&str] = &[
    "add",
    "allow",
    "alter",
    "and",
    "apply",
    "asc",
    "authorize",
    "batch",
    "begin",
    "by",
    "columnfamily",
    "create",
    "default",
    "delete",
    "desc",
    "describe",
    "drop",
    "entries",
    "execute",
    "from",
    "full",
    "grant",
    "if",
    "in",
    "index",
    "infinity",
    "insert",
    "into",
    "is",
    "keyspace",
    "limit",
    "mbean",
    "mbeans",
    "modify",
    "nan",
    "norecursive",
    "not",
    "null",
    "of",
    "on",
    "or",
    "order",
    "primary",
    "rename",
    "replace",
    "revoke",
    "schema",
    "select",
    "set",
    "table",
    "to",
    "token",
    "truncate",
    "unlogged",
    "unset",
    "update",
    "use",
    "using",
    "view",
    "where",
    "with",
];

/// A random version 4 UUID (schema versions, table ids, host ids).
pub fn random_uuid() -> [u8; 16] {
    let mut b = [0u8; 16];
    fill_random(&mut b);
    b[6] = (b[6] & 0x0F) | 0x40;
    b[8] = (b[8] & 0x3F) | 0x80;
    b
}

fn fill_random(buf: &mut [u8]) {
    use std::io::Read;
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        if f.read_exact(buf).is_ok() {
            return;
        }
    }
    // Unreachable on Linux; a time-seeded fallback keeps ids distinct enough.
    let mut x = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x9E37_79B9_7F4A_7C15);
    for b in buf {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
}

/// The keyspace `name` names, or `session`'s (the keyspace the connection has `USE`d).
pub fn keyspace_in<'a>(session: Option<&'a str>, name: &'a QualifiedName) -> QueryResult<&'a str> {
    name.keyspace.as_deref().or(session).ok_or_else(|| {
        invalid("No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename")
    })
}
