//! CREATE, ALTER and DROP of keyspaces and tables, applied to a copy of the schema.
//!
//! Each function checks the statement the way Cassandra does and answers with the same error
//! codes and, as near as we can, the same messages. It returns the schema change to announce,
//! or `None` when `IF [NOT] EXISTS` made the statement a no-op (Cassandra then answers VOID
//! and sends no event).

use std::collections::BTreeMap;
use std::sync::Arc;

use hayate_cql::response::event::{ChangeType, SchemaTarget};
use hayate_cql::response::SchemaChange;
use hayate_cql::statement::{
    AlterTableAction, AlterTypeAction, ColumnDefinition, CreateTable, Property, PropertyValue,
};
use hayate_cql::value::{DataType, Literal, TypeError, UserType, UDT_FIELDS_MAX};
use hayate_storage::TableId;

use super::{Column, ColumnKind, Keyspace, OptionValue, Schema, Table};
use crate::error::{already_exists, invalid, QueryError, QueryResult};

/// Cassandra's limit on keyspace and table names.
pub const NAME_LENGTH_MAX: usize = 48;
/// A bound on the columns of one table.
pub const TABLE_COLUMNS_MAX: usize = 4096;

/// The table options Cassandra 5.0 knows, with the defaults `system_schema.tables` and
/// DESCRIBE show for a table that did not set them, in the order DESCRIBE lists them. Map
/// defaults are written as `k=v` pairs.
pub const TABLE_OPTION_DEFAULTS: &[(&str, &str)] = &[
    ("additional_write_policy", "99p"),
    ("allow_auto_snapshot", "true"),
    ("bloom_filter_fp_chance", "0.01"),
    ("caching", "keys=ALL,rows_per_partition=NONE"),
    ("cdc", "false"),
    ("comment", ""),
    (
        "compaction",
        "class=org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy,max_threshold=32,min_threshold=4",
    ),
    (
        "compression",
        "chunk_length_in_kb=16,class=org.apache.cassandra.io.compress.LZ4Compressor",
    ),
    ("memtable", "default"),
    ("crc_check_chance", "1.0"),
    ("default_time_to_live", "0"),
    ("extensions", ""),
    ("gc_grace_seconds", "864000"),
    ("incremental_backups", "true"),
    ("max_index_interval", "2048"),
    ("memtable_flush_period_in_ms", "0"),
    ("min_index_interval", "128"),
    ("read_repair", "BLOCKING"),
    ("speculative_retry", "99p"),
];

const MAP_OPTIONS: &[&str] = &["caching", "compaction", "compression", "extensions"];

/// An option's value, as set or by default.
pub fn table_option(table: &Table, name: &str) -> OptionValue {
    if let Some(v) = table.options.get(name) {
        return v.clone();
    }
    let text = TABLE_OPTION_DEFAULTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .unwrap_or("");
    if MAP_OPTIONS.contains(&name) {
        OptionValue::Map(
            text.split(',')
                .filter(|p| !p.is_empty())
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        )
    } else {
        OptionValue::Text(text.to_owned())
    }
}

pub(super) fn check_name(what: &str, name: &str) -> QueryResult<()> {
    let ok = !name.is_empty()
        && name.len() <= NAME_LENGTH_MAX
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "{what} name must not be empty, more than {NAME_LENGTH_MAX} characters long, or contain \
             non-alphanumeric-underscore characters (got \"{name}\")"
        )))
    }
}

fn is_system_keyspace(name: &str) -> bool {
    name.starts_with("system")
}

pub(super) fn literal_text(l: &Literal) -> String {
    match l {
        Literal::Str(s) | Literal::Int(s) | Literal::Float(s) | Literal::Uuid(s) | Literal::Duration(s) => {
            s.clone()
        }
        Literal::Bool(b) => b.to_string(),
        Literal::Hex(h) => format!("0x{}", h.iter().map(|b| format!("{b:02x}")).collect::<String>()),
        Literal::Null => "null".to_owned(),
    }
}

fn property_map(p: &Property) -> QueryResult<BTreeMap<String, String>> {
    match &p.value {
        PropertyValue::Map(entries) => Ok(entries
            .iter()
            .map(|(k, v)| (literal_text(k), literal_text(v)))
            .collect()),
        _ => Err(invalid(format!(
            "Invalid value for property '{}': expected a map",
            p.name
        ))),
    }
}

fn property_text(p: &Property) -> QueryResult<String> {
    match &p.value {
        PropertyValue::Constant(l) => Ok(literal_text(l)),
        PropertyValue::Identifier(i) => Ok(i.clone()),
        PropertyValue::Map(_) => Err(invalid(format!(
            "Invalid value for property '{}': expected a constant, not a map",
            p.name
        ))),
    }
}

/// Checks and normalizes a replication map as Cassandra does: the class takes its full Java
/// name, SimpleStrategy needs `replication_factor`, NetworkTopologyStrategy takes data centers.
fn replication(
    properties: &[Property],
    keyspace: &str,
    data_centers: &[String],
) -> QueryResult<Option<BTreeMap<String, String>>> {
    let Some(p) = properties.iter().find(|p| p.name == "replication") else {
        return Ok(None);
    };
    let mut map = property_map(p)?;
    let class = map
        .remove("class")
        .ok_or_else(|| invalid("Missing replication strategy class"))?;
    let short = class.rsplit('.').next().unwrap_or(&class).to_owned();
    let check_factor = |k: &str, v: &str| -> QueryResult<()> {
        let n = v.split('/').next().unwrap_or("");
        match n.trim().parse::<i64>() {
            Ok(n) if n >= 0 => Ok(()),
            _ => Err(invalid(format!(
                "Replication factor must be non-negative integer; found {v} (option {k})"
            ))),
        }
    };
    match short.as_str() {
        "SimpleStrategy" => {
            let rf = map
                .get("replication_factor")
                .ok_or_else(|| invalid("SimpleStrategy requires a replication_factor strategy option."))?;
            check_factor("replication_factor", rf)?;
            if let Some(other) = map.keys().find(|k| k.as_str() != "replication_factor") {
                return Err(invalid(format!(
                    "Unrecognized strategy option {{{other}}} passed to SimpleStrategy for keyspace {keyspace}"
                )));
            }
        }
        "NetworkTopologyStrategy" => {
            if let Some(rf) = map.remove("replication_factor") {
                // Cassandra expands a bare replication_factor to every known data center.
                check_factor("replication_factor", &rf)?;
                for dc in data_centers {
                    map.entry(dc.clone()).or_insert_with(|| rf.clone());
                }
            }
            for (k, v) in &map {
                check_factor(k, v)?;
            }
        }
        "LocalStrategy" | "EverywhereStrategy" => {
            return Err(invalid(format!(
                "Unable to use given strategy class: LocalStrategy is reserved for internal use. ({class})"
            )))
        }
        _ => {
            return Err(invalid(format!(
                "Unable to find replication strategy class '{class}'"
            )))
        }
    }
    map.insert(
        "class".to_owned(),
        format!("org.apache.cassandra.locator.{short}"),
    );
    Ok(Some(map))
}

fn durable_writes(properties: &[Property]) -> QueryResult<Option<bool>> {
    let Some(p) = properties.iter().find(|p| p.name == "durable_writes") else {
        return Ok(None);
    };
    match property_text(p)?.to_ascii_lowercase().as_str() {
        "true" => Ok(Some(true)),
        "false" => Ok(Some(false)),
        other => Err(invalid(format!(
            "Invalid boolean value {other} for 'durable_writes'"
        ))),
    }
}

fn check_keyspace_properties(properties: &[Property]) -> QueryResult<()> {
    match properties
        .iter()
        .find(|p| p.name != "replication" && p.name != "durable_writes")
    {
        Some(p) => Err(invalid(format!("Unknown property '{}'", p.name))),
        None => Ok(()),
    }
}

fn keyspace_change(change_type: ChangeType, keyspace: &str) -> SchemaChange {
    SchemaChange {
        change_type,
        target: SchemaTarget::Keyspace {
            keyspace: keyspace.to_owned(),
        },
    }
}

fn table_change(change_type: ChangeType, keyspace: &str, table: &str) -> SchemaChange {
    SchemaChange {
        change_type,
        target: SchemaTarget::Table {
            keyspace: keyspace.to_owned(),
            table: table.to_owned(),
        },
    }
}

/// `data_centers`: the cluster's data centers, for NetworkTopologyStrategy's bare
/// `replication_factor`.
pub fn create_keyspace(
    schema: &mut Schema,
    name: &str,
    if_not_exists: bool,
    properties: &[Property],
    data_centers: &[String],
) -> QueryResult<Option<SchemaChange>> {
    check_name("Keyspace", name)?;
    check_keyspace_properties(properties)?;
    if schema.keyspaces.contains_key(name) {
        return if if_not_exists {
            Ok(None)
        } else {
            Err(already_exists(name, ""))
        };
    }
    let replication = replication(properties, name, data_centers)?
        .ok_or_else(|| invalid("Missing mandatory option 'replication'"))?;
    let keyspace = Keyspace {
        name: name.to_owned(),
        replication,
        durable_writes: durable_writes(properties)?.unwrap_or(true),
        types: BTreeMap::new(),
        tables: BTreeMap::new(),
        virtual_kind: None,
        strategy: Default::default(),
    };
    schema.keyspaces.insert(name.to_owned(), Arc::new(keyspace));
    Ok(Some(keyspace_change(ChangeType::Created, name)))
}

pub fn alter_keyspace(
    schema: &mut Schema,
    name: &str,
    if_exists: bool,
    properties: &[Property],
    data_centers: &[String],
) -> QueryResult<Option<SchemaChange>> {
    check_keyspace_properties(properties)?;
    let Some(existing) = schema.keyspaces.get(name) else {
        return if if_exists {
            Ok(None)
        } else {
            Err(invalid(format!("Keyspace '{name}' does not exist")))
        };
    };
    if existing.virtual_kind.is_some() {
        return Err(crate::error::unauthorized(format!(
            "Cannot alter system keyspace {name}"
        )));
    }
    let mut keyspace = (**existing).clone();
    if let Some(r) = replication(properties, name, data_centers)? {
        keyspace.replication = r;
        keyspace.strategy = Default::default();
    }
    if let Some(d) = durable_writes(properties)? {
        keyspace.durable_writes = d;
    }
    schema.keyspaces.insert(name.to_owned(), Arc::new(keyspace));
    Ok(Some(keyspace_change(ChangeType::Updated, name)))
}

/// Returns the change and the storage ids of the tables dropped with the keyspace.
pub fn drop_keyspace(
    schema: &mut Schema,
    name: &str,
    if_exists: bool,
) -> QueryResult<Option<(SchemaChange, Vec<TableId>)>> {
    let Some(existing) = schema.keyspaces.get(name) else {
        return if if_exists {
            Ok(None)
        } else {
            Err(invalid(format!("Keyspace '{name}' doesn't exist")))
        };
    };
    if existing.virtual_kind.is_some() || is_system_keyspace(name) {
        return Err(crate::error::unauthorized(format!(
            "Cannot DROP <keyspace {name}>"
        )));
    }
    let ids = existing.tables.values().map(|t| t.storage_id).collect();
    schema.keyspaces.remove(name);
    Ok(Some((keyspace_change(ChangeType::Dropped, name), ids)))
}

pub(super) fn user_keyspace<'a>(schema: &'a Schema, keyspace: &str) -> QueryResult<&'a Arc<Keyspace>> {
    let ks = schema
        .keyspaces
        .get(keyspace)
        .ok_or_else(|| invalid(format!("Keyspace '{keyspace}' does not exist")))?;
    if ks.virtual_kind.is_some() {
        return Err(crate::error::unauthorized(format!(
            "{keyspace} keyspace is not user-modifiable."
        )));
    }
    Ok(ks)
}

/// Parses a type text used in keyspace `ks`, whose user-defined types it may name.
fn parse_type(ks: &Keyspace, text: &str) -> QueryResult<DataType> {
    DataType::parse_with(text, &|name| ks.user_type(name)).map_err(|e| match e {
        TypeError::Unknown { name } => invalid(format!("Unknown type {}.{name}", ks.name)),
        other => invalid(other.to_string()),
    })
}

fn parse_column_type(ks: &Keyspace, def: &ColumnDefinition) -> QueryResult<DataType> {
    parse_type(ks, &def.type_text)
}

/// Refuses a default TTL on a counter table: an increment cannot expire (Cassandra's rule).
fn check_counter_ttl(table: &Table) -> QueryResult<()> {
    if table.is_counter() && table.default_ttl_s() > 0 {
        return Err(invalid(
            "Cannot set default_time_to_live on a table with counters",
        ));
    }
    Ok(())
}

/// A boolean table option as Cassandra's PropertyDefinitions reads it, stored as true or false.
fn table_boolean(name: &str, text: &str) -> QueryResult<bool> {
    match text.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" => Ok(true),
        "0" | "false" | "no" => Ok(false),
        _ => Err(invalid(format!(
            "Invalid boolean value {text} for '{name}'. Positive values can be '1', 'true' or 'yes'. \
             Negative values can be '0', 'false' or 'no'."
        ))),
    }
}

/// The kind a new column definition has before the PRIMARY KEY is read.
fn defined_kind(def: &ColumnDefinition) -> ColumnKind {
    if def.is_static {
        ColumnKind::Static
    } else {
        ColumnKind::Regular
    }
}

/// Cassandra's message for a static column in a table without clustering columns, which has
/// one row per partition and so nothing to share a value between.
fn statics_need_clustering() -> QueryError {
    invalid(
        "Static columns are only useful (and thus allowed) if the table has at least one clustering column",
    )
}

/// Checks table options and turns them into what the table stores.
fn table_options(properties: &[Property], into: &mut BTreeMap<String, OptionValue>) -> QueryResult<()> {
    for p in properties {
        let name = p.name.as_str();
        if !TABLE_OPTION_DEFAULTS.iter().any(|(n, _)| *n == name) {
            return Err(invalid(format!("Unknown property '{name}'")));
        }
        let value = if MAP_OPTIONS.contains(&name) {
            OptionValue::Map(property_map(p)?)
        } else {
            let text = property_text(p)?;
            let numeric = [
                "default_time_to_live",
                "gc_grace_seconds",
                "max_index_interval",
                "min_index_interval",
                "memtable_flush_period_in_ms",
            ];
            if numeric.contains(&name) && text.parse::<u32>().is_err() {
                return Err(invalid(format!(
                    "Invalid value for property '{name}': {text} is not a non-negative integer"
                )));
            }
            let text = if ["cdc", "allow_auto_snapshot", "incremental_backups"].contains(&name) {
                table_boolean(name, &text)?.to_string()
            } else {
                text
            };
            if name == "default_time_to_live" && text.parse::<u32>().unwrap_or(0) > super::TTL_MAX_S {
                return Err(invalid(format!(
                    "default_time_to_live must be less than or equal to {} (got {text})",
                    super::TTL_MAX_S
                )));
            }
            OptionValue::Text(text)
        };
        into.insert(name.to_owned(), value);
    }
    Ok(())
}

pub fn create_table(
    schema: &mut Schema,
    keyspace: &str,
    stmt: &CreateTable,
    allocate_id: &mut dyn FnMut() -> TableId,
) -> QueryResult<Option<SchemaChange>> {
    let name = stmt.table.name.as_str();
    let ks = user_keyspace(schema, keyspace)?;
    check_name("Table", name)?;
    if ks.tables.contains_key(name) {
        return if stmt.if_not_exists {
            Ok(None)
        } else {
            Err(already_exists(keyspace, name))
        };
    }
    if stmt.compact_storage {
        return Err(invalid(
            "COMPACT STORAGE tables are not supported (Cassandra 4.0 removed them too)",
        ));
    }
    if stmt.columns.len() > TABLE_COLUMNS_MAX {
        return Err(invalid(format!(
            "A table may have at most {TABLE_COLUMNS_MAX} columns"
        )));
    }
    let mut columns: Vec<Column> = Vec::with_capacity(stmt.columns.len());
    for def in &stmt.columns {
        if columns.iter().any(|c| c.name == def.name) {
            return Err(invalid(format!("Duplicate column name {}", def.name)));
        }
        columns.push(Column {
            name: def.name.clone(),
            id: columns.len() as u32,
            ty: parse_column_type(ks, def)?,
            kind: defined_kind(def),
            descending: false,
        });
    }
    if stmt.partition_key.is_empty() {
        return Err(invalid(
            "No PRIMARY KEY specifed for table '{name}' (exactly one required)".replace("{name}", name),
        ));
    }
    let mut key_index = |key: &str, what: &str| -> QueryResult<usize> {
        let i = columns
            .iter()
            .position(|c| c.name == key)
            .ok_or_else(|| invalid(format!("Unknown definition {key} referenced in PRIMARY KEY")))?;
        if columns[i].kind == ColumnKind::Static {
            return Err(invalid(format!(
                "Static column {key} cannot be part of the PRIMARY KEY"
            )));
        }
        if columns[i].kind != ColumnKind::Regular {
            return Err(invalid(format!("Duplicate definition {key} in PRIMARY KEY")));
        }
        let ty = &columns[i].ty;
        if let DataType::Udt { def, frozen: false } = ty {
            return Err(invalid(format!(
                "Invalid non-frozen user-defined type \"{}\" for PRIMARY KEY column '{key}'",
                def.name
            )));
        }
        if ty.is_multi_cell() {
            return Err(invalid(format!(
                "Invalid non-frozen collection type {ty} for PRIMARY KEY component {key}"
            )));
        }
        if matches!(ty, DataType::Duration) {
            return Err(invalid(format!(
                "duration type is not supported for PRIMARY KEY column '{key}'"
            )));
        }
        if ty.is_counter() {
            return Err(invalid(format!(
                "counter type is not supported for PRIMARY KEY column '{key}'"
            )));
        }
        columns[i].kind = if what == "partition" {
            ColumnKind::PartitionKey
        } else {
            ColumnKind::Clustering
        };
        Ok(i)
    };
    let partition_key = stmt
        .partition_key
        .iter()
        .map(|k| key_index(k, "partition"))
        .collect::<QueryResult<Vec<_>>>()?;
    let clustering = stmt
        .clustering_columns
        .iter()
        .map(|k| key_index(k, "clustering"))
        .collect::<QueryResult<Vec<_>>>()?;
    if !stmt.clustering_order.is_empty() {
        if stmt.clustering_order.len() > clustering.len() {
            return Err(invalid(
                "Only clustering key columns can be defined in CLUSTERING ORDER directive",
            ));
        }
        for (i, order) in stmt.clustering_order.iter().enumerate() {
            let expected = &columns[clustering[i]].name;
            if &order.column != expected {
                return Err(invalid(format!(
                    "The order of columns in the CLUSTERING ORDER directive must match that of the \
                     clustering columns ({} must appear before {})",
                    expected, order.column
                )));
            }
            columns[clustering[i]].descending = order.descending;
        }
    }
    if clustering.is_empty() && columns.iter().any(|c| c.kind == ColumnKind::Static) {
        return Err(statics_need_clustering());
    }
    let mut values = columns.iter().filter(|c| !c.kind.is_primary_key());
    let values_are_counters = values.clone().any(|c| c.ty.is_counter());
    if values_are_counters && values.any(|c| !c.ty.is_counter()) {
        return Err(invalid(
            "Cannot mix counter and non counter columns in the same table",
        ));
    }
    let mut options = BTreeMap::new();
    table_options(&stmt.properties, &mut options)?;
    let storage_id = allocate_id();
    let table = Table {
        keyspace: keyspace.to_owned(),
        name: name.to_owned(),
        storage_id,
        uuid: super::store::table_uuid(storage_id),
        next_column_id: columns.len() as u32,
        indexes: Vec::new(),
        next_index_id: 1,
        columns,
        partition_key,
        clustering,
        options,
        counter: values_are_counters,
        is_virtual: false,
    };
    check_counter_ttl(&table)?;
    let mut ks = (**ks).clone();
    ks.tables.insert(name.to_owned(), Arc::new(table));
    schema.keyspaces.insert(keyspace.to_owned(), Arc::new(ks));
    Ok(Some(table_change(ChangeType::Created, keyspace, name)))
}

pub fn alter_table(
    schema: &mut Schema,
    keyspace: &str,
    name: &str,
    if_exists: bool,
    action: &AlterTableAction,
) -> QueryResult<Option<SchemaChange>> {
    let ks = user_keyspace(schema, keyspace)?;
    let Some(existing) = ks.tables.get(name) else {
        return if if_exists {
            Ok(None)
        } else {
            Err(invalid(format!("Table '{keyspace}.{name}' doesn't exist")))
        };
    };
    let mut table = (**existing).clone();
    match action {
        AlterTableAction::Add(defs) => {
            for def in defs {
                if table.column(&def.name).is_some() {
                    return Err(invalid(format!("Column with name '{}' already exists", def.name)));
                }
                let ty = parse_column_type(ks, def)?;
                if def.is_static && table.clustering.is_empty() {
                    return Err(statics_need_clustering());
                }
                // A table of keys alone is not a counter table: it takes no counter either.
                if ty.is_counter() != table.is_counter() {
                    let (this, that) = if ty.is_counter() {
                        ("a counter", "non counter")
                    } else {
                        ("a non counter", "counter")
                    };
                    return Err(QueryError::Config(format!(
                        "{keyspace}.{name}: Cannot have {this} column (\"{}\") in a {that} table",
                        def.name
                    )));
                }
                table.columns.push(Column {
                    name: def.name.clone(),
                    id: table.next_column_id,
                    ty,
                    kind: defined_kind(def),
                    descending: false,
                });
                table.next_column_id += 1;
            }
        }
        AlterTableAction::Drop(names) => {
            for col in names {
                let i = table
                    .column_index(col)
                    .ok_or_else(|| invalid(format!("Column {col} was not found in table {name}")))?;
                if table.columns[i].kind.is_primary_key() {
                    return Err(invalid(format!("Cannot drop PRIMARY KEY column {col}")));
                }
                let id = table.columns[i].id;
                let dependent: Vec<&str> = table
                    .indexes
                    .iter()
                    .filter(|x| x.column == id)
                    .map(|x| x.name.as_str())
                    .collect();
                if !dependent.is_empty() {
                    return Err(invalid(format!(
                        "Cannot drop column {col} because it has dependent secondary indexes ({})",
                        dependent.join(", ")
                    )));
                }
                table.columns.remove(i);
                let fix = |v: &mut Vec<usize>| v.iter_mut().filter(|j| **j > i).for_each(|j| *j -= 1);
                fix(&mut table.partition_key);
                fix(&mut table.clustering);
            }
        }
        AlterTableAction::Rename(pairs) => {
            for (from, to) in pairs {
                let i = table
                    .column_index(from)
                    .ok_or_else(|| invalid(format!("Column {from} was not found in table {name}")))?;
                if !table.columns[i].kind.is_primary_key() {
                    return Err(invalid(format!("Cannot rename non PRIMARY KEY column {from}")));
                }
                if table.column(to).is_some() {
                    return Err(invalid(format!(
                        "Cannot rename column {from} to {to} in table {name}; another column with that name already exists"
                    )));
                }
                table.columns[i].name = to.clone();
            }
        }
        AlterTableAction::AlterType { .. } => {
            return Err(invalid("Altering column types is no longer supported"));
        }
        AlterTableAction::With(properties) => {
            table_options(properties, &mut table.options)?;
            check_counter_ttl(&table)?;
        }
    }
    let mut ks = (**ks).clone();
    ks.tables.insert(name.to_owned(), Arc::new(table));
    schema.keyspaces.insert(keyspace.to_owned(), Arc::new(ks));
    Ok(Some(table_change(ChangeType::Updated, keyspace, name)))
}

/// Returns the change and the dropped table's storage id.
pub fn drop_table(
    schema: &mut Schema,
    keyspace: &str,
    name: &str,
    if_exists: bool,
) -> QueryResult<Option<(SchemaChange, TableId)>> {
    let ks = user_keyspace(schema, keyspace)?;
    let Some(existing) = ks.tables.get(name) else {
        return if if_exists {
            Ok(None)
        } else {
            Err(invalid(format!("Table '{keyspace}.{name}' doesn't exist")))
        };
    };
    let id = existing.storage_id;
    let mut ks = (**ks).clone();
    ks.tables.remove(name);
    schema.keyspaces.insert(keyspace.to_owned(), Arc::new(ks));
    Ok(Some((table_change(ChangeType::Dropped, keyspace, name), id)))
}

/// TRUNCATE gives the table a new storage id, so that it is empty at once whatever its size;
/// returns the old id, whose rows each node forgets.
pub fn truncate(
    schema: &mut Schema,
    keyspace: &str,
    name: &str,
    allocate_id: &mut dyn FnMut() -> TableId,
) -> QueryResult<TableId> {
    let ks = schema
        .keyspaces
        .get(keyspace)
        .ok_or_else(|| invalid(format!("Keyspace '{keyspace}' does not exist")))?;
    let table = ks
        .tables
        .get(name)
        .ok_or_else(|| invalid(format!("table {name} does not exist")))?;
    if table.is_virtual {
        return Err(crate::error::unauthorized(format!(
            "Cannot TRUNCATE system table {keyspace}.{name}"
        )));
    }
    let mut t = (**table).clone();
    let old = t.storage_id;
    t.storage_id = allocate_id();
    let mut k = (**ks).clone();
    k.tables.insert(name.to_owned(), Arc::new(t));
    schema.keyspaces.insert(keyspace.to_owned(), Arc::new(k));
    Ok(old)
}

fn type_change(change_type: ChangeType, keyspace: &str, name: &str) -> SchemaChange {
    SchemaChange {
        change_type,
        target: SchemaTarget::Type {
            keyspace: keyspace.to_owned(),
            type_name: name.to_owned(),
        },
    }
}

fn no_such_type(keyspace: &str, name: &str) -> crate::error::QueryError {
    invalid(format!("Type '{keyspace}.{name}' doesn't exist"))
}

/// A field's type: any type the keyspace knows, but a user-defined type only frozen (a
/// non-frozen one is stored cell per field, which only a column's own type can be).
fn field_type(ks: &Keyspace, text: &str) -> QueryResult<DataType> {
    let ty = parse_type(ks, text)?;
    if matches!(ty, DataType::Udt { frozen: false, .. }) {
        return Err(invalid("A user type cannot contain non-frozen UDTs"));
    }
    if ty.is_counter() {
        return Err(invalid("A user type cannot contain counters"));
    }
    Ok(ty)
}

pub fn create_type(
    schema: &mut Schema,
    keyspace: &str,
    name: &str,
    if_not_exists: bool,
    fields: &[(String, String)],
) -> QueryResult<Option<SchemaChange>> {
    let ks = user_keyspace(schema, keyspace)?;
    check_name("Type", name)?;
    if ks.types.contains_key(name) {
        return if if_not_exists {
            Ok(None)
        } else {
            Err(invalid(format!("A user type with name '{name}' already exists")))
        };
    }
    if fields.len() > UDT_FIELDS_MAX {
        return Err(invalid(format!(
            "A user type may have at most {UDT_FIELDS_MAX} fields"
        )));
    }
    let mut def = UserType {
        keyspace: keyspace.to_owned(),
        name: name.to_owned(),
        field_names: Vec::with_capacity(fields.len()),
        field_types: Vec::with_capacity(fields.len()),
    };
    for (field, text) in fields {
        if def.field_names.contains(field) {
            return Err(invalid(format!("Duplicate field name {field} in type {name}")));
        }
        def.field_names.push(field.clone());
        def.field_types.push(field_type(ks, text)?);
    }
    let mut ks = (**ks).clone();
    ks.types.insert(name.to_owned(), Arc::new(def));
    schema.keyspaces.insert(keyspace.to_owned(), Arc::new(ks));
    Ok(Some(type_change(ChangeType::Created, keyspace, name)))
}

pub fn alter_type(
    schema: &mut Schema,
    keyspace: &str,
    name: &str,
    action: &AlterTypeAction,
) -> QueryResult<Option<SchemaChange>> {
    let ks = user_keyspace(schema, keyspace)?;
    let existing = ks.types.get(name).ok_or_else(|| no_such_type(keyspace, name))?;
    let mut def = (**existing).clone();
    match action {
        AlterTypeAction::Add { field, type_text } => {
            if def.field_names.contains(field) {
                return Err(invalid(format!(
                    "Cannot add field {field} to type {keyspace}.{name}: a field with name {field} already exists"
                )));
            }
            if def.field_names.len() >= UDT_FIELDS_MAX {
                return Err(invalid(format!(
                    "A user type may have at most {UDT_FIELDS_MAX} fields"
                )));
            }
            let ty = field_type(ks, type_text)?;
            if ty.uses_user_type(keyspace, name) {
                return Err(invalid(format!(
                    "Cannot add new field to type {keyspace}.{name} that references itself"
                )));
            }
            def.field_names.push(field.clone());
            def.field_types.push(ty);
        }
        AlterTypeAction::Rename(pairs) => {
            for (from, to) in pairs {
                let i = def
                    .field_index(from)
                    .ok_or_else(|| invalid(format!("Unkown field {from} in user type {keyspace}.{name}")))?;
                if def.field_index(to).is_some() {
                    return Err(invalid(format!(
                        "Duplicate field name {to} in type {keyspace}.{name}"
                    )));
                }
                def.field_names[i] = to.clone();
            }
        }
    }
    let def = Arc::new(def);
    let mut ks = (**ks).clone();
    // Every copy of the old definition, in other types and in columns, becomes the new one.
    for t in ks.types.values_mut() {
        let wrapped = DataType::Udt {
            def: t.clone(),
            frozen: true,
        };
        if let DataType::Udt { def: updated, .. } = wrapped.with_user_type(&def) {
            *t = updated;
        }
    }
    for table in ks.tables.values_mut() {
        if table.columns.iter().any(|c| c.ty.uses_user_type(keyspace, name)) {
            let t = Arc::make_mut(table);
            for c in &mut t.columns {
                c.ty = c.ty.with_user_type(&def);
            }
        }
    }
    schema.keyspaces.insert(keyspace.to_owned(), Arc::new(ks));
    Ok(Some(type_change(ChangeType::Updated, keyspace, name)))
}

pub fn drop_type(
    schema: &mut Schema,
    keyspace: &str,
    name: &str,
    if_exists: bool,
) -> QueryResult<Option<SchemaChange>> {
    let ks = user_keyspace(schema, keyspace)?;
    if !ks.types.contains_key(name) {
        return if if_exists {
            Ok(None)
        } else {
            Err(no_such_type(keyspace, name))
        };
    }
    let users: Vec<&str> = ks
        .types
        .values()
        .filter(|t| t.name != name && t.field_types.iter().any(|f| f.uses_user_type(keyspace, name)))
        .map(|t| t.name.as_str())
        .collect();
    if !users.is_empty() {
        return Err(invalid(format!(
            "Cannot drop user type '{keyspace}.{name}' as it is still used by user types {}",
            users.join(", ")
        )));
    }
    let tables: Vec<&str> = ks
        .tables
        .values()
        .filter(|t| t.columns.iter().any(|c| c.ty.uses_user_type(keyspace, name)))
        .map(|t| t.name.as_str())
        .collect();
    if !tables.is_empty() {
        return Err(invalid(format!(
            "Cannot drop user type '{keyspace}.{name}' as it is still used by tables {}",
            tables.join(", ")
        )));
    }
    let mut ks = (**ks).clone();
    ks.types.remove(name);
    schema.keyspaces.insert(keyspace.to_owned(), Arc::new(ks));
    Ok(Some(type_change(ChangeType::Dropped, keyspace, name)))
}

/// For tests: keyspace `ks` (SimpleStrategy, replication factor `rf`) and each CREATE TABLE of
/// `tables` in it, added to `schema`; table ids count up from [`super::USER_TABLE_ID_MIN`].
#[cfg(test)]
pub fn add_test_keyspace(schema: &mut Schema, rf: usize, tables: &[&str]) {
    use hayate_cql::statement::{parse, Statement};

    let ks = parse(&format!(
        "CREATE KEYSPACE ks WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': {rf}}}"
    ))
    .expect("parses");
    let Statement::CreateKeyspace { properties, .. } = &ks.statement else {
        panic!("not a CREATE KEYSPACE")
    };
    create_keyspace(schema, "ks", false, properties, &[]).expect("keyspace");
    let mut next_id = super::USER_TABLE_ID_MIN;
    for t in tables {
        let Statement::CreateTable(t) = parse(t).expect("parses").statement else {
            panic!("not a CREATE TABLE")
        };
        create_table(schema, "ks", &t, &mut || {
            next_id += 1;
            next_id
        })
        .expect("table");
    }
}
