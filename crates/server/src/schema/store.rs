//! Holding the current schema, changing it, and saving it.
//!
//! Changes are serialized by one lock and each builds a whole new [`Schema`]; readers take an
//! `Arc` of the current one without waiting. The user keyspaces are written to
//! `<data_dir>/schema.json` before a change is visible: the file is written to a temporary
//! name, synced, renamed over the old one, and the directory synced, so a crash leaves either
//! the old schema or the new one, never half of each.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use hayate_storage::TableId;
use serde::{Deserialize, Serialize};

use super::{random_uuid, system, Keyspace, Schema, Table, USER_TABLE_ID_MIN};

/// The schema file's layout version; bump it when the layout changes.
const SCHEMA_FILE_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct SchemaFile {
    version: u32,
    next_table_id: TableId,
    keyspaces: Vec<KeyspaceFile>,
}

#[derive(Serialize, Deserialize)]
struct KeyspaceFile {
    #[serde(flatten)]
    keyspace: Keyspace,
    tables: Vec<Table>,
}

pub struct SchemaStore {
    current: RwLock<Arc<Schema>>,
    /// Held while a change is built and saved.
    change: Mutex<ChangeState>,
    path: PathBuf,
}

struct ChangeState {
    next_table_id: TableId,
}

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

impl SchemaStore {
    /// Loads `<data_dir>/schema.json`, or starts empty if there is none.
    pub fn open(data_dir: &Path) -> Result<SchemaStore, SchemaLoadError> {
        let path = data_dir.join("schema.json");
        let fail = |reason: String| SchemaLoadError {
            path: path.clone(),
            reason,
        };
        let mut schema = Schema::default();
        let mut next_table_id = USER_TABLE_ID_MIN;
        match std::fs::read(&path) {
            Ok(bytes) => {
                let file: SchemaFile = serde_json::from_slice(&bytes).map_err(|e| fail(e.to_string()))?;
                if file.version != SCHEMA_FILE_VERSION {
                    return Err(fail(format!(
                        "layout version {} is not the {} this build reads",
                        file.version, SCHEMA_FILE_VERSION
                    )));
                }
                next_table_id = file.next_table_id.max(USER_TABLE_ID_MIN);
                for ks in file.keyspaces {
                    let mut keyspace = ks.keyspace;
                    keyspace.tables = ks
                        .tables
                        .into_iter()
                        .map(|t| (t.name.clone(), Arc::new(t)))
                        .collect();
                    schema.keyspaces.insert(keyspace.name.clone(), Arc::new(keyspace));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(fail(e.to_string())),
        }
        system::add_system_keyspaces(&mut schema);
        schema.version = random_uuid();
        Ok(SchemaStore {
            current: RwLock::new(Arc::new(schema)),
            change: Mutex::new(ChangeState { next_table_id }),
            path,
        })
    }

    pub fn current(&self) -> Arc<Schema> {
        self.current.read().expect("schema lock poisoned").clone()
    }

    /// Applies `change` to a copy of the schema, saves it, and makes it current. The closure
    /// gets a way to number new tables; whatever it returns is handed back. If it fails,
    /// nothing changes.
    pub fn update<T, E>(
        &self,
        change: impl FnOnce(&mut Schema, &mut dyn FnMut() -> TableId) -> Result<T, E>,
        save_failed: impl FnOnce(String) -> E,
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
        schema.version = random_uuid();
        if let Err(e) = self.save(&schema, next) {
            return Err(save_failed(format!(
                "could not save the schema to {}: {e}; the change was not applied (check the data \
                 directory's free space and permissions)",
                self.path.display()
            )));
        }
        state.next_table_id = next;
        *self.current.write().expect("schema lock poisoned") = Arc::new(schema);
        Ok(out)
    }

    /// Storage ids of every user table: whatever else the engine holds was dropped.
    pub fn live_table_ids(&self) -> Vec<TableId> {
        self.current()
            .user_keyspaces()
            .flat_map(|k| k.tables.values().map(|t| t.storage_id))
            .collect()
    }

    fn save(&self, schema: &Schema, next_table_id: TableId) -> std::io::Result<()> {
        let file = SchemaFile {
            version: SCHEMA_FILE_VERSION,
            next_table_id,
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
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
        let tmp = self.path.with_extension("json.tmp");
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &self.path)?;
        if let Some(dir) = self.path.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}
