//! Secondary indexes in the schema: what `CREATE INDEX` defines, with Cassandra 5.0's names and
//! refusals, and how each index maps onto the storage engine's (`hayate_storage::IndexSpec`).
//!
//! Two kinds, as Cassandra 5.0 has: the legacy index (`CREATE INDEX`, kind `COMPOSITES`), which
//! answers equality, and the storage-attached index (`USING 'sai'`, kind `CUSTOM`), which
//! answers equality and, on numeric and time columns, ranges, and several of which combine with
//! AND. Both are served by the same RAM index on each node (`hayate_storage::sindex`).

use std::collections::BTreeMap;
use std::sync::Arc;

use hayate_cql::response::event::ChangeType;
use hayate_cql::response::SchemaChange;
use hayate_cql::statement::{CompareOp, CreateIndex, IndexTargetKind, PropertyValue};
use hayate_cql::value::DataType;
use hayate_storage::{IndexSpec, IndexTarget, TermOrder};
use serde::{Deserialize, Serialize};

use super::{ColumnKind, Schema, Table};
use crate::error::{invalid, QueryError, QueryResult};

/// The custom index classes that name Cassandra 5.0's storage-attached index.
const SAI_CLASSES: &[&str] = &[
    "sai",
    "storageattachedindex",
    "org.apache.cassandra.index.sai.storageattachedindex",
];

const SASI_CLASS: &str = "org.apache.cassandra.index.sasi.sasiindex";

/// One secondary index of a table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexDef {
    pub name: String,
    /// The storage engine's number for this index, unique in its table for the table's life.
    pub id: u32,
    /// The indexed column's cell number (stable across the table's other changes).
    pub column: u32,
    pub target: Target,
    /// The class a custom index was created with, as written (`'sai'`, ...); `None` for a
    /// legacy index.
    pub class: Option<String>,
    /// A custom index's options (`WITH OPTIONS = {...}`).
    #[serde(default)]
    pub options: BTreeMap<String, String>,
}

/// What of its column an index holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// A column's value, or a non-frozen collection's values.
    Values,
    Keys,
    Entries,
    Full,
}

impl IndexDef {
    pub fn is_sai(&self) -> bool {
        self.class.is_some()
    }

    /// `system_schema.indexes.kind`.
    pub fn kind(&self) -> &'static str {
        if self.is_sai() {
            "CUSTOM"
        } else {
            "COMPOSITES"
        }
    }

    /// `target` as Cassandra writes it in `system_schema.indexes.options`: `v`, `keys(m)`,
    /// `values(m)`, `entries(m)`, `full(f)`.
    pub fn target_text(&self, table: &Table) -> String {
        let Some(column) = table.columns.iter().find(|c| c.id == self.column) else {
            return String::new();
        };
        let name = super::quote_identifier(&column.name);
        match self.target {
            Target::Values if is_multicell(&column.ty) => format!("values({name})"),
            Target::Values => name,
            Target::Keys => format!("keys({name})"),
            Target::Entries => format!("entries({name})"),
            Target::Full => format!("full({name})"),
        }
    }

    /// `system_schema.indexes.options`.
    pub fn options_map(&self, table: &Table) -> BTreeMap<String, String> {
        let mut options = self.options.clone();
        if let Some(class) = &self.class {
            options.insert("class_name".into(), class.clone());
        }
        options.insert("target".into(), self.target_text(table));
        options
    }

    /// The storage engine's definition of this index.
    pub fn spec(&self, table: &Table) -> Option<IndexSpec> {
        let column = table.columns.iter().find(|c| c.id == self.column)?;
        let target = match (self.target, &column.ty) {
            (Target::Keys, _) => IndexTarget::Path,
            (Target::Entries, _) => IndexTarget::Entry,
            (Target::Values, DataType::Set { frozen: false, .. }) => IndexTarget::Path,
            (Target::Values | Target::Full, _) => IndexTarget::Value,
        };
        let order = match target {
            IndexTarget::Value if !is_multicell(&column.ty) => term_order(&column.ty),
            _ => TermOrder::Bytes,
        };
        Some(IndexSpec {
            id: self.id,
            column: self.column,
            target,
            order,
        })
    }

    /// True if this index answers `column op value` for the column it indexes: equality for
    /// every index on a value, ranges for a storage-attached index on a numeric or time column,
    /// CONTAINS for one on a collection's values, CONTAINS KEY for one on a map's keys. (A map's
    /// entries answer `m[key] = value`, which the planner asks about directly.)
    pub fn serves(&self, ty: &DataType, op: CompareOp) -> bool {
        match op {
            CompareOp::Eq => matches!(self.target, Target::Values | Target::Full) && !is_multicell(ty),
            CompareOp::Contains => self.target == Target::Values && is_multicell(ty),
            CompareOp::ContainsKey => self.target == Target::Keys,
            CompareOp::Lt | CompareOp::Lte | CompareOp::Gt | CompareOp::Gte => {
                self.is_sai() && self.target == Target::Values && is_ordered(ty)
            }
            _ => false,
        }
    }
}

/// True for the types whose index terms order as their values do: the types a storage-attached
/// index answers ranges on.
fn is_ordered(ty: &DataType) -> bool {
    term_order(ty) != TermOrder::Bytes || matches!(ty, DataType::Date)
}

/// How a column's values order as index terms; [`TermOrder::Bytes`] for types an index looks
/// up by equality only (and for `date`, whose bytes order as its values do).
pub fn term_order(ty: &DataType) -> TermOrder {
    match ty {
        DataType::TinyInt
        | DataType::SmallInt
        | DataType::Int
        | DataType::BigInt
        | DataType::Timestamp
        | DataType::Time => TermOrder::Signed,
        DataType::Float | DataType::Double => TermOrder::Float,
        _ => TermOrder::Bytes,
    }
}

fn is_multicell(ty: &DataType) -> bool {
    ty.is_collection() && ty.is_multi_cell()
}

fn is_sai_class(class: &str) -> bool {
    SAI_CLASSES.contains(&class.to_ascii_lowercase().as_str())
}

/// Cassandra's default index name: `<table>_<column>_idx`, without non-word characters.
fn default_name(table: &str, column: &str) -> String {
    format!("{table}_{column}_idx")
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The table of `keyspace` that has an index called `name`.
pub fn table_of_index<'a>(schema: &'a Schema, keyspace: &str, name: &str) -> Option<&'a Arc<Table>> {
    schema
        .keyspaces
        .get(keyspace)?
        .tables
        .values()
        .find(|t| t.indexes.iter().any(|i| i.name == name))
}

fn updated(keyspace: &str, table: &str) -> SchemaChange {
    SchemaChange {
        change_type: ChangeType::Updated,
        target: hayate_cql::response::event::SchemaTarget::Table {
            keyspace: keyspace.to_owned(),
            table: table.to_owned(),
        },
    }
}

/// `CREATE INDEX`: answers `UPDATED TABLE`, as Cassandra does.
pub fn create_index(
    schema: &mut Schema,
    keyspace: &str,
    c: &CreateIndex,
) -> QueryResult<Option<SchemaChange>> {
    let ks = super::ddl::user_keyspace(schema, keyspace)?;
    let Some(existing) = ks.tables.get(&c.table.name) else {
        return Err(invalid(format!("Table '{}' doesn't exist", c.table.name)));
    };
    let mut table = (**existing).clone();
    let class = match &c.using {
        Some(class) if is_sai_class(class) => Some(class.clone()),
        Some(class) if class.eq_ignore_ascii_case(SASI_CLASS) => {
            return Err(invalid(
                "SASI indexes are disabled. Enable in cassandra.yaml to use.",
            ));
        }
        Some(class) => {
            return Err(QueryError::Config(format!(
                "Unable to find custom indexer class '{class}'"
            )));
        }
        None => None,
    };
    let custom = c.custom || class.is_some();
    if table.is_counter() {
        return Err(invalid("Secondary indexes on counter tables aren't supported"));
    }
    let options = index_options(c, custom)?;
    if c.targets.is_empty() && !custom {
        return Err(invalid(
            "Only CUSTOM indexes can be created without specifying a target column",
        ));
    }
    if c.targets.len() > 1 {
        if !custom {
            return Err(invalid("Only CUSTOM indexes support multiple columns"));
        }
        let names: Vec<&str> = c.targets.iter().map(|t| t.column.as_str()).collect();
        return Err(invalid(format!(
            "A storage-attached index cannot be created over multiple columns: {}",
            names.join(", ")
        )));
    }
    let Some(target) = c.targets.first() else {
        return Err(invalid(
            "hayate supports only storage-attached (USING 'sai') custom indexes, which need a target column",
        ));
    };
    let column = table.column(&target.column).cloned().ok_or_else(|| {
        invalid(format!(
            "Undefined column name {} in table {keyspace}.{}",
            target.column, table.name
        ))
    })?;
    let name_of_column = &column.name;
    let kind = match target.kind {
        IndexTargetKind::Simple | IndexTargetKind::Values => Target::Values,
        IndexTargetKind::Keys => Target::Keys,
        IndexTargetKind::Entries => Target::Entries,
        IndexTargetKind::Full => Target::Full,
    };
    match kind {
        Target::Keys | Target::Entries if !matches!(column.ty, DataType::Map { .. }) => {
            let what = if kind == Target::Keys { "keys" } else { "entries" };
            return Err(invalid(format!(
                "Cannot create index on {what} of column {name_of_column} with non-map type"
            )));
        }
        Target::Full if !(column.ty.is_collection() && column.ty.is_frozen()) => {
            return Err(invalid(
                "full() indexes can only be created on frozen collections",
            ));
        }
        Target::Values if column.ty.is_collection() && column.ty.is_frozen() => {
            return Err(invalid(format!(
                "Cannot create values() index on frozen column {name_of_column}. Frozen collections are immutable and \
                 must be fully indexed by using the 'full({name_of_column})' modifier"
            )));
        }
        _ => {}
    }
    if column.kind == ColumnKind::PartitionKey && table.partition_key.len() == 1 {
        return Err(invalid(format!(
            "Cannot create secondary index on the only partition key column {name_of_column}"
        )));
    }
    if column.kind == ColumnKind::Static {
        return Err(invalid(format!(
            "hayate does not support indexes on static columns yet ({name_of_column}); a query by it can use \
             ALLOW FILTERING"
        )));
    }
    if column.kind.is_primary_key() {
        return Err(invalid(format!(
            "hayate does not support indexes on primary key columns yet ({name_of_column}); a query by it can \
             use ALLOW FILTERING"
        )));
    }
    if class.is_some() && is_multicell(&column.ty) {
        return Err(invalid(format!(
            "hayate does not support storage-attached indexes on non-frozen collections yet ({name_of_column})"
        )));
    }
    let taken = |name: &str| {
        ks.tables
            .values()
            .any(|t| t.indexes.iter().any(|i| i.name == name))
    };
    let name = match &c.name {
        Some(name) => {
            super::ddl::check_name("Index", name)?;
            name.clone()
        }
        None => {
            let base = default_name(&table.name, name_of_column);
            let mut name = base.clone();
            let mut n = 0;
            while taken(&name) {
                n += 1;
                name = format!("{base}_{n}");
            }
            name
        }
    };
    if taken(&name) {
        return if c.if_not_exists {
            Ok(None)
        } else {
            Err(invalid(format!("Index '{name}' already exists")))
        };
    }
    let def = IndexDef {
        name,
        id: table.next_index_id.max(1),
        column: column.id,
        target: kind,
        class,
        options,
    };
    if let Some(same) = table.indexes.iter().find(|i| {
        i.column == def.column
            && i.target == def.target
            && i.class.is_some() == def.class.is_some()
            && i.options == def.options
    }) {
        return if c.if_not_exists {
            Ok(None)
        } else {
            Err(invalid(format!(
                "Index {} is a duplicate of existing index {}",
                def.name, same.name
            )))
        };
    }
    if def.is_sai() && table.indexes.iter().any(|i| i.is_sai() && i.column == def.column) {
        return Err(invalid(format!(
            "Cannot create more than one storage-attached index on the same column: {name_of_column}"
        )));
    }
    table.next_index_id = def.id + 1;
    table.indexes.push(def);
    let table_name = table.name.clone();
    let mut ks = (**ks).clone();
    ks.tables.insert(table_name.clone(), Arc::new(table));
    schema.keyspaces.insert(keyspace.to_owned(), Arc::new(ks));
    Ok(Some(updated(keyspace, &table_name)))
}

fn index_options(c: &CreateIndex, custom: bool) -> QueryResult<BTreeMap<String, String>> {
    let mut options = BTreeMap::new();
    for p in &c.properties {
        if p.name != "options" {
            return Err(invalid(format!("Unknown property '{}'", p.name)));
        }
        if !custom {
            return Err(invalid("Cannot specify options for a non-CUSTOM index"));
        }
        let PropertyValue::Map(entries) = &p.value else {
            return Err(invalid(
                "Invalid value for property 'options'. It should be a map.",
            ));
        };
        for (k, v) in entries {
            options.insert(super::ddl::literal_text(k), super::ddl::literal_text(v));
        }
    }
    Ok(options)
}

/// `DROP INDEX`: answers `UPDATED TABLE`, as Cassandra does.
pub fn drop_index(
    schema: &mut Schema,
    keyspace: &str,
    name: &str,
    if_exists: bool,
) -> QueryResult<Option<SchemaChange>> {
    let Some(existing) = table_of_index(schema, keyspace, name) else {
        return if if_exists {
            Ok(None)
        } else {
            Err(invalid(format!("Index '{keyspace}.{name}' doesn't exist'")))
        };
    };
    let mut table = (**existing).clone();
    table.indexes.retain(|i| i.name != name);
    let table_name = table.name.clone();
    let mut ks = (*schema.keyspaces[keyspace]).clone();
    ks.tables.insert(table_name.clone(), Arc::new(table));
    schema.keyspaces.insert(keyspace.to_owned(), Arc::new(ks));
    Ok(Some(updated(keyspace, &table_name)))
}
