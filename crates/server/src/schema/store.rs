//! Holding the current schema and changing it, deterministically.
//!
//! The schema is the state of a machine that every node feeds the same changes, in the same
//! order, from the cluster metadata log ([`super::machine`]): a change is applied at a log
//! index, and everything it makes (table ids, table UUIDs, the schema version) is derived from
//! the state and that index, never from the clock or a random source, so every node ends with
//! the same schema and the same `schema_version`.
//!
//! Changes are serialized by one lock and each builds a whole new [`Schema`]; readers take an
//! `Arc` of the current one without waiting. The durable copy is the metadata log and its
//! snapshots ([`SchemaStore::snapshot`]); `schema.json`, which nodes before the cluster kept,
//! is read once and imported ([`SchemaStore::legacy_file`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use hayate_storage::TableId;
use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};

use super::{system, Keyspace, Schema, Table, USER_TABLE_ID_MIN};

/// The snapshot's layout version; bump it when the layout changes.
const SCHEMA_FILE_VERSION: u32 = 1;
/// Where nodes before the cluster kept their schema.
pub const LEGACY_SCHEMA_FILE: &str = "schema.json";

#[derive(Serialize, Deserialize)]
struct SchemaFile {
    version: u32,
    next_table_id: TableId,
    keyspaces: Vec<KeyspaceFile>,
    /// The schema version the snapshot was taken at (absent in `schema.json` files).
    #[serde(default)]
    schema_version: Option<[u8; 16]>,
}

#[derive(Serialize, Deserialize)]
struct KeyspaceFile {
    #[serde(flatten)]
    keyspace: Keyspace,
    tables: Vec<Table>,
}

pub struct SchemaStore {
    current: RwLock<Arc<Schema>>,
    /// Held while a change is built.
    change: Mutex<ChangeState>,
}

struct ChangeState {
    next_table_id: TableId,
}

/// A schema snapshot or file that does not read.
#[derive(Debug)]
pub struct SchemaLoadError {
    pub path: PathBuf,
    pub reason: String,
}

impl std::fmt::Display for SchemaLoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot load the schema from {}: {}; restore the file from a backup, or move it away \
             to start with no user keyspaces (the data of their tables stays on the device)",
            self.path.display(),
            self.reason
        )
    }
}

impl std::error::Error for SchemaLoadError {}

/// The schema version after the change at log `index`: the same on every node.
pub fn version_at(index: u64) -> [u8; 16] {
    uuid_of(&[b"hayate schema version ".as_slice(), &index.to_be_bytes()])
}

/// A table's UUID, from its storage id (which is never reused within a cluster).
pub fn table_uuid(storage_id: TableId) -> [u8; 16] {
    uuid_of(&[b"hayate table ".as_slice(), &storage_id.to_be_bytes()])
}

/// A version 4 UUID made of the MD5 of some bytes.
fn uuid_of(parts: &[&[u8]]) -> [u8; 16] {
    let mut h = Md5::new();
    for p in parts {
        h.update(p);
    }
    let mut b: [u8; 16] = h.finalize().into();
    b[6] = (b[6] & 0x0F) | 0x40;
    b[8] = (b[8] & 0x3F) | 0x80;
    b
}

impl Default for SchemaStore {
    fn default() -> SchemaStore {
        SchemaStore::new()
    }
}

impl SchemaStore {
    /// The schema of a new cluster: the built-in keyspaces only.
    pub fn new() -> SchemaStore {
        let mut schema = Schema::default();
        system::add_system_keyspaces(&mut schema);
        schema.version = version_at(0);
        SchemaStore {
            current: RwLock::new(Arc::new(schema)),
            change: Mutex::new(ChangeState {
                next_table_id: USER_TABLE_ID_MIN,
            }),
        }
    }

    pub fn current(&self) -> Arc<Schema> {
        self.current.read().expect("schema lock poisoned").clone()
    }

    /// Applies `change`, the entry at log `index`, to a copy of the schema and makes it
    /// current. The closure gets a way to number new tables; whatever it returns is handed
    /// back. If it fails, nothing changes.
    pub fn apply<T, E>(
        &self,
        index: u64,
        change: impl FnOnce(&mut Schema, &mut dyn FnMut() -> TableId) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut state = self.change.lock().expect("schema change lock poisoned");
        let mut schema = (*self.current()).clone();
        let mut next = state.next_table_id;
        let mut allocate = || {
            let id = next;
            next += 1;
            id
        };
        let out = change(&mut schema, &mut allocate)?;
        schema.version = version_at(index);
        state.next_table_id = next;
        *self.current.write().expect("schema lock poisoned") = Arc::new(schema);
        Ok(out)
    }

    /// Storage ids of every user table: whatever else the engine holds was dropped.
    /// Every user table's storage id and its `gc_grace_seconds`, if it sets one.
    pub fn table_grace_periods(&self) -> Vec<(TableId, Option<u32>)> {
        self.current()
            .user_keyspaces()
            .flat_map(|k| k.tables.values().map(|t| (t.storage_id, t.gc_grace_s())))
            .collect()
    }

    /// Every table's secondary indexes, as the storage engine defines them.
    pub fn index_specs(&self) -> Vec<(TableId, Vec<hayate_storage::IndexSpec>)> {
        self.current()
            .user_keyspaces()
            .flat_map(|k| {
                k.tables
                    .values()
                    .map(|t| (t.storage_id, t.indexes.iter().filter_map(|i| i.spec(t)).collect()))
            })
            .collect()
    }

    pub fn live_table_ids(&self) -> Vec<TableId> {
        self.current()
            .user_keyspaces()
            .flat_map(|k| k.tables.values().map(|t| t.storage_id))
            .collect()
    }

    /// The whole schema, to be given back to [`SchemaStore::restore`].
    pub fn snapshot(&self) -> Vec<u8> {
        let state = self.change.lock().expect("schema change lock poisoned");
        let schema = self.current();
        let file = SchemaFile {
            version: SCHEMA_FILE_VERSION,
            next_table_id: state.next_table_id,
            keyspaces: schema
                .user_keyspaces()
                .map(|k| KeyspaceFile {
                    keyspace: Keyspace {
                        tables: BTreeMap::new(),
                        ..(**k).clone()
                    },
                    tables: k.tables.values().map(|t| (**t).clone()).collect(),
                })
                .collect(),
            schema_version: Some(schema.version),
        };
        serde_json::to_vec_pretty(&file).expect("a schema always serializes")
    }

    /// Replaces the whole schema with a snapshot (or an imported `schema.json`); `version` is
    /// the schema version to take when the bytes carry none.
    pub fn restore(&self, bytes: &[u8], version: [u8; 16]) -> Result<(), String> {
        let file: SchemaFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if file.version != SCHEMA_FILE_VERSION {
            return Err(format!(
                "layout version {} is not the {} this build reads",
                file.version, SCHEMA_FILE_VERSION
            ));
        }
        let mut schema = Schema::default();
        for ks in file.keyspaces {
            let mut keyspace = ks.keyspace;
            keyspace.tables = ks
                .tables
                .into_iter()
                .map(|t| (t.name.clone(), Arc::new(t)))
                .collect();
            keyspace.resolve()?;
            schema.keyspaces.insert(keyspace.name.clone(), Arc::new(keyspace));
        }
        system::add_system_keyspaces(&mut schema);
        schema.version = file.schema_version.unwrap_or(version);
        let mut state = self.change.lock().expect("schema change lock poisoned");
        state.next_table_id = file.next_table_id.max(USER_TABLE_ID_MIN);
        *self.current.write().expect("schema lock poisoned") = Arc::new(schema);
        Ok(())
    }

    /// The schema a node kept in `<data_dir>/schema.json` before it was part of a cluster, if
    /// there is one (checked, so a damaged file stops the node with a message).
    pub fn legacy_file(data_dir: &Path) -> Result<Option<Vec<u8>>, SchemaLoadError> {
        let path = data_dir.join(LEGACY_SCHEMA_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => {
                SchemaStore::new()
                    .restore(&bytes, version_at(0))
                    .map_err(|reason| SchemaLoadError {
                        path: path.clone(),
                        reason,
                    })?;
                Ok(Some(bytes))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(SchemaLoadError {
                path,
                reason: e.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A column's user-defined type is saved as its name and read back as the keyspace's
    /// definition, nested types included; a file whose column names a type the keyspace does
    /// not define is refused rather than read with an empty type.
    #[test]
    fn user_types_survive_a_snapshot_and_a_missing_one_is_refused() {
        use hayate_cql::statement::{parse, Statement};

        let store = SchemaStore::new();
        let statements = [
            "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            "CREATE TYPE ks.address (street text, zip int)",
            "CREATE TYPE ks.person (name text, home frozen<address>)",
            "CREATE TABLE ks.t (k int PRIMARY KEY, a address, p list<frozen<person>>)",
        ];
        for (i, cql) in statements.iter().enumerate() {
            let parsed = parse(cql).expect("parses");
            store
                .apply(i as u64 + 1, |s, allocate| match &parsed.statement {
                    Statement::CreateKeyspace { properties, .. } => {
                        super::super::ddl::create_keyspace(s, "ks", false, properties, &[])
                    }
                    Statement::CreateType { name, fields, .. } => {
                        super::super::ddl::create_type(s, "ks", &name.name, false, fields)
                    }
                    Statement::CreateTable(t) => super::super::ddl::create_table(s, "ks", t, allocate),
                    other => panic!("unexpected {other:?}"),
                })
                .expect("applies");
        }
        let snapshot = store.snapshot();
        let restored = SchemaStore::new();
        restored.restore(&snapshot, version_at(0)).expect("restores");
        let before = store.current();
        let after = restored.current();
        let (b, a) = (&before.keyspaces["ks"], &after.keyspaces["ks"]);
        assert_eq!(a.types, b.types);
        assert_eq!(a.tables["t"].columns[1].ty, b.tables["t"].columns[1].ty);
        assert_eq!(a.tables["t"].columns[2].ty, b.tables["t"].columns[2].ty);
        assert_eq!(a.tables["t"].columns[2].ty.to_string(), "list<frozen<person>>");

        let text = String::from_utf8(snapshot).expect("json");
        let damaged = text.replace("\"name\": \"person\"", "\"name\": \"someone\"");
        assert_ne!(damaged, text, "the test edits the type's name");
        let err = SchemaStore::new()
            .restore(damaged.as_bytes(), version_at(0))
            .expect_err("a column naming an undefined type");
        assert!(err.contains("person"), "{err}");
    }

    #[test]
    fn every_node_derives_the_same_ids_and_version_from_the_same_changes() {
        let a = SchemaStore::new();
        let b = SchemaStore::new();
        for store in [&a, &b] {
            store
                .apply::<_, ()>(7, |_, allocate| {
                    assert_eq!(allocate(), USER_TABLE_ID_MIN);
                    Ok(())
                })
                .expect("applies");
        }
        assert_eq!(a.current().version, b.current().version);
        assert_eq!(a.current().version, version_at(7));
        assert_ne!(version_at(7), version_at(8));
        let restored = SchemaStore::new();
        restored.restore(&a.snapshot(), version_at(0)).expect("restores");
        assert_eq!(restored.current().version, version_at(7));
        restored
            .apply::<_, ()>(8, |_, allocate| {
                assert_eq!(allocate(), USER_TABLE_ID_MIN + 1, "ids continue after a restore");
                Ok(())
            })
            .expect("applies");
    }
}
