//! The schema as the state machine of the cluster metadata log.
//!
//! A schema statement is not applied where it arrives: the node proposes it to the log
//! ([`SchemaCommand::Statement`], the statement's text with the context it needs), and every
//! node applies it when the log commits it, in the same order everywhere, through
//! [`SchemaMachine::apply`]. Applying is deterministic ([`super::store`]), so every node reaches
//! the same schema and the same version. Each node then does its own part: forgets the rows of
//! dropped tables, forgets prepared statements on what changed, and tells the connections
//! registered for events ([`SchemaEffects`]). The proposer answers its client with the change
//! the log's apply returned ([`decode_answer`]).

use std::sync::{Arc, OnceLock};

use hayate_cql::response::event::{ChangeType, SchemaTarget};
use hayate_cql::response::SchemaChange;
use hayate_cql::statement::{parse, QualifiedName, Statement};
use hayate_storage::TableId;
use serde::{Deserialize, Serialize};

use super::ddl;
use super::store::{version_at, SchemaStore};
use super::{Keyspace, Table};
use crate::error::{invalid, syntax, QueryError, QueryResult};

/// One entry of the schema's log.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchemaCommand {
    /// A schema statement as the client sent it (CREATE, ALTER or DROP of a keyspace or table,
    /// or TRUNCATE), run in the proposer's keyspace (USE), with the cluster's data centers as
    /// the proposer knew them (NetworkTopologyStrategy's bare `replication_factor`).
    Statement {
        cql: String,
        keyspace: Option<String>,
        data_centers: Vec<String>,
    },
    /// The whole schema of a node that ran before it was part of a cluster (its `schema.json`),
    /// taken over as the cluster's.
    Import { file: String },
    /// `hayate snapshot --all-nodes`: every node takes snapshot `tag` of the tables chosen (as
    /// [`crate::snapshots::select`] chooses them) when it applies this entry, so every node's
    /// snapshot holds the same schema: no DDL falls between one node's and another's.
    Snapshot {
        tag: String,
        keyspace: Option<String>,
        tables: Vec<String>,
    },
}

/// What applying a command answered.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum SchemaAnswer {
    /// Applied; `None` when `IF [NOT] EXISTS` made it a no-op.
    Changed {
        change: Option<ChangeRecord>,
    },
    Failed {
        error: ErrorRecord,
    },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct ChangeRecord {
    change_type: String,
    keyspace: String,
    /// Empty for a keyspace or a type.
    table: String,
    /// The user-defined type changed; absent (empty) in records of older nodes, which
    /// changed no types.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    type_name: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ErrorRecord {
    Syntax(String),
    Invalid(String),
    Unauthorized(String),
    AlreadyExists { keyspace: String, table: String },
    Config(String),
    Server(String),
}

/// What a node does when the schema changes, besides changing it.
pub trait SchemaEffects: Send + Sync {
    /// A table was dropped or truncated (`truncated`) by the log's entry `index`: forget its
    /// rows on this node. `was` is the table and its keyspace as they were just before.
    fn table_dropped(
        &self,
        table: TableId,
        was: Option<(&Arc<Keyspace>, &Arc<Table>)>,
        truncated: bool,
        index: u64,
    );
    /// Every node takes snapshot `tag` of `tables` at the log's entry `index` (`hayate
    /// snapshot --all-nodes`). Not called for entries replayed at startup.
    fn snapshot(&self, tag: &str, tables: &[crate::snapshots::Chosen<'_>], index: u64);
    /// The schema changed: tell prepared statements, registered connections and gossip.
    fn schema_changed(&self, change: &SchemaChange, version: [u8; 16]);
    /// The set of tables or their options may have changed (any applied change, TRUNCATE and a
    /// restored snapshot included): bring what the node derives from them up to date.
    fn tables_changed(&self);
}

/// The schema store, fed by the log.
pub struct SchemaMachine {
    store: Arc<SchemaStore>,
    effects: OnceLock<Arc<dyn SchemaEffects>>,
    /// Tables dropped or truncated by entries applied before the effects were set (replayed at
    /// startup, or caught up from the leader while the node joined): the node forgets their
    /// rows once at startup, and takes their automatic snapshot first ([`Self::take_early_drops`]).
    early_drops: std::sync::Mutex<Vec<EarlyDrop>>,
}

/// A table dropped or truncated by the log's entry `index` before the node's effects were set.
pub struct EarlyDrop {
    pub table: TableId,
    pub keyspace: Arc<Keyspace>,
    pub was: Arc<Table>,
    pub truncated: bool,
    pub index: u64,
}

impl SchemaMachine {
    pub fn new(store: Arc<SchemaStore>) -> SchemaMachine {
        SchemaMachine {
            store,
            effects: OnceLock::new(),
            early_drops: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The tables dropped or truncated before the effects were set, once.
    pub fn take_early_drops(&self) -> Vec<EarlyDrop> {
        std::mem::take(&mut *self.early_drops.lock().expect("early drops lock poisoned"))
    }

    /// Sets what happens on this node when the schema changes (once the node is built; the
    /// changes applied before, at startup, need none: the node reconciles once instead).
    pub fn set_effects(&self, effects: Arc<dyn SchemaEffects>) {
        if self.effects.set(effects).is_err() {
            panic!("schema effects are set once");
        }
    }

    pub fn store(&self) -> &Arc<SchemaStore> {
        &self.store
    }

    /// Applies the command at log `index`; the answer goes back to the proposer.
    pub fn apply(&self, index: u64, command: &[u8]) -> Vec<u8> {
        let answer = match serde_json::from_slice::<SchemaCommand>(command) {
            Ok(SchemaCommand::Statement {
                cql,
                keyspace,
                data_centers,
            }) => match self.statement(index, &cql, keyspace.as_deref(), &data_centers) {
                Ok(change) => SchemaAnswer::Changed {
                    change: change.map(|c| record(&c)),
                },
                Err(e) => SchemaAnswer::Failed {
                    error: error_record(&e),
                },
            },
            Ok(SchemaCommand::Import { file }) => {
                match self.store.restore(file.as_bytes(), version_at(index)) {
                    Ok(()) => {
                        tracing::info!(
                            index,
                            "took over the schema this node kept before it joined a cluster"
                        );
                        SchemaAnswer::Changed { change: None }
                    }
                    Err(e) => SchemaAnswer::Failed {
                        error: ErrorRecord::Server(format!("the schema to import does not read: {e}")),
                    },
                }
            }
            Ok(SchemaCommand::Snapshot {
                tag,
                keyspace,
                tables,
            }) => {
                let schema = self.store.current();
                match crate::snapshots::select(&schema, keyspace.as_deref(), &tables) {
                    Ok(chosen) if !chosen.is_empty() => {
                        if let Some(effects) = self.effects.get() {
                            effects.snapshot(&tag, &chosen, index);
                        }
                        SchemaAnswer::Changed { change: None }
                    }
                    Ok(_) => SchemaAnswer::Failed {
                        error: ErrorRecord::Invalid("no table to snapshot".to_owned()),
                    },
                    Err(e) => SchemaAnswer::Failed {
                        error: ErrorRecord::Invalid(e),
                    },
                }
            }
            Err(e) => SchemaAnswer::Failed {
                error: ErrorRecord::Server(format!(
                    "a schema command this node does not understand (is it older than the others?): {e}"
                )),
            },
        };
        serde_json::to_vec(&answer).expect("an answer always serializes")
    }

    pub fn snapshot(&self) -> Vec<u8> {
        self.store.snapshot()
    }

    pub fn restore(&self, index: u64, snapshot: &[u8]) -> Result<(), String> {
        self.store.restore(snapshot, version_at(index))?;
        if let Some(effects) = self.effects.get() {
            effects.tables_changed();
        }
        Ok(())
    }

    fn statement(
        &self,
        index: u64,
        cql: &str,
        session_keyspace: Option<&str>,
        data_centers: &[String],
    ) -> QueryResult<Option<SchemaChange>> {
        let parsed = parse(cql).map_err(|e| syntax(e.to_string()))?;
        let keyspace_of =
            |name: &QualifiedName| super::keyspace_in(session_keyspace, name).map(str::to_owned);
        let store = &self.store;
        let before = store.current();
        let mut dropped: Vec<TableId> = Vec::new();
        let change = match &parsed.statement {
            Statement::CreateKeyspace {
                keyspace,
                if_not_exists,
                properties,
            } => store.apply(index, |s, _| {
                ddl::create_keyspace(s, keyspace, *if_not_exists, properties, data_centers)
            })?,
            Statement::AlterKeyspace {
                keyspace,
                if_exists,
                properties,
            } => store.apply(index, |s, _| {
                ddl::alter_keyspace(s, keyspace, *if_exists, properties, data_centers)
            })?,
            Statement::DropKeyspace { keyspace, if_exists } => store
                .apply(index, |s, _| ddl::drop_keyspace(s, keyspace, *if_exists))?
                .map(|(change, ids)| {
                    dropped = ids;
                    change
                }),
            Statement::CreateTable(t) => {
                let ks = keyspace_of(&t.table)?;
                store.apply(index, |s, allocate| ddl::create_table(s, &ks, t, allocate))?
            }
            Statement::AlterTable {
                table,
                if_exists,
                action,
            } => {
                let ks = keyspace_of(table)?;
                store.apply(index, |s, _| {
                    ddl::alter_table(s, &ks, &table.name, *if_exists, action)
                })?
            }
            Statement::DropTable { table, if_exists } => {
                let ks = keyspace_of(table)?;
                store
                    .apply(index, |s, _| ddl::drop_table(s, &ks, &table.name, *if_exists))?
                    .map(|(change, id)| {
                        dropped.push(id);
                        change
                    })
            }
            Statement::CreateType {
                name,
                if_not_exists,
                fields,
            } => {
                let ks = keyspace_of(name)?;
                store.apply(index, |s, _| {
                    ddl::create_type(s, &ks, &name.name, *if_not_exists, fields)
                })?
            }
            Statement::AlterType { name, action } => {
                let ks = keyspace_of(name)?;
                store.apply(index, |s, _| ddl::alter_type(s, &ks, &name.name, action))?
            }
            Statement::DropType { name, if_exists } => {
                let ks = keyspace_of(name)?;
                store.apply(index, |s, _| ddl::drop_type(s, &ks, &name.name, *if_exists))?
            }
            Statement::CreateIndex(c) => {
                let ks = keyspace_of(&c.table)?;
                store.apply(index, |s, _| super::index::create_index(s, &ks, c))?
            }
            Statement::DropIndex { name, if_exists } => {
                let ks = keyspace_of(name)?;
                store.apply(index, |s, _| {
                    super::index::drop_index(s, &ks, &name.name, *if_exists)
                })?
            }
            Statement::Truncate { table } => {
                let ks = keyspace_of(table)?;
                dropped.push(store.apply(index, |s, allocate| ddl::truncate(s, &ks, &table.name, allocate))?);
                None
            }
            other => return Err(invalid(format!("{} is not a schema statement", other.kind()))),
        };
        let truncated = matches!(parsed.statement, Statement::Truncate { .. });
        let was = |id: TableId| {
            before
                .user_keyspaces()
                .find_map(|ks| ks.tables.values().find(|t| t.storage_id == id).map(|t| (ks, t)))
        };
        let Some(effects) = self.effects.get() else {
            let mut early = self.early_drops.lock().expect("early drops lock poisoned");
            for id in dropped {
                if let Some((keyspace, table)) = was(id) {
                    early.push(EarlyDrop {
                        table: id,
                        keyspace: Arc::clone(keyspace),
                        was: Arc::clone(table),
                        truncated,
                        index,
                    });
                }
            }
            return Ok(change);
        };
        for id in dropped {
            effects.table_dropped(id, was(id), truncated, index);
        }
        if let Some(change) = &change {
            effects.schema_changed(change, store.current().version);
        }
        effects.tables_changed();
        Ok(change)
    }
}

impl hayate_cluster::metadata::AppStateMachine for SchemaMachine {
    fn apply(&self, index: u64, command: &[u8]) -> Vec<u8> {
        SchemaMachine::apply(self, index, command)
    }

    fn snapshot(&self) -> Vec<u8> {
        SchemaMachine::snapshot(self)
    }

    fn restore(&self, index: u64, snapshot: &[u8]) -> Result<(), String> {
        SchemaMachine::restore(self, index, snapshot)
    }
}

fn record(change: &SchemaChange) -> ChangeRecord {
    let (keyspace, table, type_name) = match &change.target {
        SchemaTarget::Keyspace { keyspace } => (keyspace.clone(), String::new(), String::new()),
        SchemaTarget::Table { keyspace, table } => (keyspace.clone(), table.clone(), String::new()),
        SchemaTarget::Type { keyspace, type_name } => (keyspace.clone(), String::new(), type_name.clone()),
        other => unreachable!("the schema has no {other:?} yet"),
    };
    ChangeRecord {
        change_type: change.change_type.as_str().to_owned(),
        keyspace,
        table,
        type_name,
    }
}

fn error_record(e: &QueryError) -> ErrorRecord {
    match e {
        QueryError::Syntax(m) => ErrorRecord::Syntax(m.clone()),
        QueryError::Invalid(m) => ErrorRecord::Invalid(m.clone()),
        QueryError::Unauthorized(m) => ErrorRecord::Unauthorized(m.clone()),
        QueryError::AlreadyExists { keyspace, table } => ErrorRecord::AlreadyExists {
            keyspace: keyspace.clone(),
            table: table.clone(),
        },
        QueryError::Config(m) => ErrorRecord::Config(m.clone()),
        other => ErrorRecord::Server(other.to_string()),
    }
}

/// The proposer's view of what the log's apply answered.
pub fn decode_answer(answer: &[u8]) -> QueryResult<Option<SchemaChange>> {
    let answer: SchemaAnswer = serde_json::from_slice(answer).map_err(|e| {
        QueryError::Server(format!(
            "the schema log answered something this node cannot read: {e}"
        ))
    })?;
    match answer {
        SchemaAnswer::Changed { change: None } => Ok(None),
        SchemaAnswer::Changed { change: Some(c) } => {
            let change_type = ChangeType::parse(&c.change_type).map_err(|e| {
                QueryError::Server(format!(
                    "the schema log answered a change this node cannot read: {e}"
                ))
            })?;
            let target = if !c.type_name.is_empty() {
                SchemaTarget::Type {
                    keyspace: c.keyspace,
                    type_name: c.type_name,
                }
            } else if c.table.is_empty() {
                SchemaTarget::Keyspace { keyspace: c.keyspace }
            } else {
                SchemaTarget::Table {
                    keyspace: c.keyspace,
                    table: c.table,
                }
            };
            Ok(Some(SchemaChange { change_type, target }))
        }
        SchemaAnswer::Failed { error } => Err(match error {
            ErrorRecord::Syntax(m) => QueryError::Syntax(m),
            ErrorRecord::Invalid(m) => QueryError::Invalid(m),
            ErrorRecord::Unauthorized(m) => QueryError::Unauthorized(m),
            ErrorRecord::AlreadyExists { keyspace, table } => QueryError::AlreadyExists { keyspace, table },
            ErrorRecord::Config(m) => QueryError::Config(m),
            ErrorRecord::Server(m) => QueryError::Server(m),
        }),
    }
}

/// The command for a schema statement.
pub fn statement_command(cql: &str, keyspace: Option<&str>, data_centers: &[String]) -> Vec<u8> {
    serde_json::to_vec(&SchemaCommand::Statement {
        cql: cql.to_owned(),
        keyspace: keyspace.map(str::to_owned),
        data_centers: data_centers.to_vec(),
    })
    .expect("a command always serializes")
}

/// The command that has every node take snapshot `tag` at one log position.
pub fn snapshot_command(tag: &str, keyspace: Option<&str>, tables: &[String]) -> Vec<u8> {
    serde_json::to_vec(&SchemaCommand::Snapshot {
        tag: tag.to_owned(),
        keyspace: keyspace.map(str::to_owned),
        tables: tables.to_vec(),
    })
    .expect("a command always serializes")
}

/// The command that takes over a pre-cluster node's `schema.json`.
pub fn import_command(file: &[u8]) -> Vec<u8> {
    serde_json::to_vec(&SchemaCommand::Import {
        file: String::from_utf8_lossy(file).into_owned(),
    })
    .expect("a command always serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_nodes_applying_the_same_log_agree() {
        let log = [
            statement_command(
                "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
                None,
                &[],
            ),
            statement_command("CREATE TABLE t (k int PRIMARY KEY, v int)", Some("ks"), &[]),
            statement_command("CREATE TABLE t (k int PRIMARY KEY, v int)", Some("ks"), &[]),
            statement_command("TRUNCATE t", Some("ks"), &[]),
        ];
        let a = SchemaMachine::new(Arc::new(SchemaStore::new()));
        let b = SchemaMachine::new(Arc::new(SchemaStore::new()));
        let mut answers = Vec::new();
        for (i, command) in log.iter().enumerate() {
            let index = i as u64 + 1;
            let answer = a.apply(index, command);
            assert_eq!(answer, b.apply(index, command));
            answers.push(decode_answer(&answer));
        }
        assert!(matches!(answers[1], Ok(Some(_))));
        assert!(
            matches!(answers[2], Err(QueryError::AlreadyExists { .. })),
            "{:?}",
            answers[2]
        );
        let (sa, sb) = (a.store().current(), b.store().current());
        assert_eq!(sa.version, sb.version);
        let ta = &sa.keyspaces["ks"].tables["t"];
        let tb = &sb.keyspaces["ks"].tables["t"];
        assert_eq!((ta.storage_id, ta.uuid), (tb.storage_id, tb.uuid));
    }

    /// What a node was asked to do, in the order the log asked.
    #[derive(Default)]
    struct Recorded(std::sync::Mutex<Vec<String>>);

    impl SchemaEffects for Recorded {
        fn table_dropped(
            &self,
            table: TableId,
            _: Option<(&Arc<Keyspace>, &Arc<Table>)>,
            _: bool,
            index: u64,
        ) {
            self.0
                .lock()
                .expect("lock")
                .push(format!("{index}: drop {table}"));
        }
        fn snapshot(&self, tag: &str, tables: &[crate::snapshots::Chosen<'_>], index: u64) {
            let names: Vec<&str> = tables.iter().map(|(_, t)| t.name.as_str()).collect();
            self.0
                .lock()
                .expect("lock")
                .push(format!("{index}: snapshot {tag} of {}", names.join(",")));
        }
        fn schema_changed(&self, _: &SchemaChange, _: [u8; 16]) {}
        fn tables_changed(&self) {}
    }

    /// `hayate snapshot --all-nodes` is a log entry: each node snapshots the tables as they are
    /// at that entry (a table created after it is not in it, one dropped after it is), and a
    /// snapshot of a table that does not exist there is refused the same way on every node.
    #[test]
    fn a_snapshot_entry_takes_the_tables_of_its_log_position() {
        let log = [
            statement_command(
                "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
                None,
                &[],
            ),
            statement_command("CREATE TABLE a (k int PRIMARY KEY)", Some("ks"), &[]),
            snapshot_command("s1", Some("ks"), &[]),
            snapshot_command("s2", Some("ks"), &["b".to_owned()]),
            statement_command("CREATE TABLE b (k int PRIMARY KEY)", Some("ks"), &[]),
            snapshot_command("s3", None, &[]),
            statement_command("DROP TABLE a", Some("ks"), &[]),
        ];
        let m = SchemaMachine::new(Arc::new(SchemaStore::new()));
        let seen = Arc::new(Recorded::default());
        m.set_effects(Arc::clone(&seen) as Arc<dyn SchemaEffects>);
        let answers: Vec<_> = log
            .iter()
            .enumerate()
            .map(|(i, c)| decode_answer(&m.apply(i as u64 + 1, c)))
            .collect();
        assert!(matches!(answers[2], Ok(None)), "{:?}", answers[2]);
        match &answers[3] {
            Err(QueryError::Invalid(m)) => assert!(m.contains("ks.b does not exist"), "{m}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        let now = m.store().current();
        assert!(!now.keyspaces["ks"].tables.contains_key("a"));
        let seen = seen.0.lock().expect("lock").clone();
        assert_eq!(seen[0], "3: snapshot s1 of a");
        assert_eq!(seen[1], "6: snapshot s3 of a,b");
        assert!(seen[2].starts_with("7: drop "), "{seen:?}");
        assert_eq!(seen.len(), 3, "{seen:?}");
    }
}
