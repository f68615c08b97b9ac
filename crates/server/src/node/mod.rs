//! The node: everything a request may need, shared by every connection. Only the request
//! layer (`requests/`) sees the whole node; it hands each statement the narrow handles it
//! needs (the coordinator, the schema log, the role store). [`tasks`] keeps the node in step
//! with its cluster.

pub mod figures;
pub mod operator;
pub mod tasks;
mod views;

use std::path::Path;
use std::sync::{Arc, Weak};

use hayate_cluster::batchlog::Batchlog;
use hayate_cluster::coordinator::Coordinator;
use hayate_cluster::hints::HintStore;
use hayate_cql::response::event::{ChangeType, SchemaTarget};
use hayate_cql::response::{Event, SchemaChange};
use hayate_storage::files::write_atomically;
use hayate_storage::{Engine, TableId};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::admin::SchemaLog;
use crate::auth::Authenticator;
use crate::cluster::ClusterNode;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::prepared::PreparedCache;
use crate::schema::machine::SchemaEffects;
use crate::schema::SchemaStore;

/// EVENT frames a slow client may fall behind by before it misses some.
const EVENT_QUEUE_MAX: usize = 1024;

pub struct Node {
    pub config: Config,
    /// The storage engine, for its statistics and its clean close; requests reach it only
    /// through the coordinator.
    pub engine: Arc<Engine>,
    pub coordinator: Arc<Coordinator>,
    pub cluster: Arc<ClusterNode>,
    pub hints: Arc<HintStore>,
    /// Logged batches being applied, replayed whole at the next start after a crash.
    pub batchlog: Arc<Batchlog>,
    pub schema: Arc<SchemaStore>,
    pub schema_log: Arc<dyn SchemaLog>,
    pub prepared: PreparedCache,
    pub auth: Authenticator,
    /// What logged-in roles may do; holds the role store and the granted permissions.
    pub authorizer: crate::auth::Authorizer,
    pub metrics: Arc<Metrics>,
    pub events: broadcast::Sender<Event>,
    /// Recent traced requests (`system_traces`).
    pub traces: crate::trace::TraceStore,
    /// The client connections open now (`system_views.clients`).
    pub connected: crate::connection::registry::ClientRegistry,
    pub local: LocalNode,
    /// Stops the node as SIGTERM does (a decommissioned node stops by itself).
    pub stopping: tokio::sync::Notify,
    /// The runtime the node runs on, for the HTTP endpoint's thread to start operations on.
    pub runtime: tokio::runtime::Handle,
    /// Set by `hayate drain`: the node answers no more requests until it is restarted.
    pub drained: std::sync::atomic::AtomicBool,
}

/// What a drained node answers every request with.
pub const DRAINED_MESSAGE: &str = "this node is drained (hayate drain): it takes no requests and \
     has left the cluster until it is restarted";

/// What this node keeps about itself across restarts (`<data_dir>/node.json`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LocalNode {
    pub host_id: [u8; 16],
    /// Counts restarts, as Cassandra's gossip generation does: larger at every start.
    pub generation: i32,
}

impl LocalNode {
    /// Loads `<data_dir>/node.json`, or makes a new identity, and moves the generation on.
    pub fn load_or_create(data_dir: &Path) -> std::io::Result<LocalNode> {
        let path = data_dir.join("node.json");
        let mut local = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(std::io::Error::other)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => LocalNode {
                host_id: crate::schema::random_uuid(),
                generation: 0,
            },
            Err(e) => return Err(e),
        };
        let last = u64::try_from(local.generation).unwrap_or(0);
        local.generation = i32::try_from(crate::cluster::next_generation(last)).unwrap_or(i32::MAX);
        write_atomically(
            &path,
            &serde_json::to_vec_pretty(&local).map_err(std::io::Error::other)?,
        )?;
        Ok(local)
    }
}

pub fn event_channel() -> broadcast::Sender<Event> {
    broadcast::channel(EVENT_QUEUE_MAX).0
}

impl Node {
    /// True once `hayate drain` ran: requests are refused.
    pub fn is_drained(&self) -> bool {
        self.drained.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Gives the engine each table's `gc_grace_seconds` (or the namespace default where a table
    /// sets none) and secondary indexes: at start, and whenever a table changes.
    pub fn apply_table_settings(&self) {
        for (table, grace_s) in self.schema.table_grace_periods() {
            self.engine.set_tombstone_grace(table, grace_s);
        }
        self.engine.set_all_indexes(&self.schema.index_specs());
    }
}

impl crate::system::ClusterView for Node {
    fn cluster_name(&self) -> &str {
        &self.config.cluster_name
    }

    fn local(&self) -> crate::system::NodeRow {
        self.cluster.local_row()
    }

    fn generation(&self) -> i32 {
        self.local.generation
    }

    fn peers(&self) -> Vec<crate::system::NodeRow> {
        self.cluster.peer_rows()
    }

    fn trace_sessions(&self) -> Vec<std::sync::Arc<crate::trace::TraceSession>> {
        self.traces.sessions(crate::query::bind::now_us() / 1000)
    }

    fn views(&self) -> Option<&dyn crate::system::views::NodeViews> {
        Some(self)
    }
}

/// What this node does when the schema changes (see [`SchemaEffects`]); weak, because the
/// node owns the schema machine that calls it.
pub struct NodeSchemaEffects(pub Weak<Node>);

impl SchemaEffects for NodeSchemaEffects {
    fn table_dropped(
        &self,
        table: TableId,
        was: Option<(&Arc<crate::schema::Keyspace>, &Arc<crate::schema::Table>)>,
        truncated: bool,
        index: u64,
    ) {
        if let Some(node) = self.0.upgrade() {
            if let (Some((keyspace, t)), true) = (was, node.config.storage.auto_snapshot) {
                crate::snapshots::before_drop(&node.engine, keyspace, t, truncated, index);
            }
            let rows = node.coordinator.drop_local_table(table);
            tracing::info!(
                table_id = table,
                rows,
                "forgot the rows of a dropped or truncated table"
            );
        }
    }

    fn snapshot(&self, tag: &str, tables: &[crate::snapshots::Chosen<'_>], index: u64) {
        if let Some(node) = self.0.upgrade() {
            crate::snapshots::by_log(&node.engine, tag, tables, index);
        }
    }

    fn tables_changed(&self) {
        if let Some(node) = self.0.upgrade() {
            node.apply_table_settings();
        }
    }

    fn schema_changed(&self, change: &SchemaChange, version: [u8; 16]) {
        let Some(node) = self.0.upgrade() else { return };
        let keyspace = match &change.target {
            SchemaTarget::Keyspace { keyspace }
            | SchemaTarget::Table { keyspace, .. }
            | SchemaTarget::Type { keyspace, .. } => keyspace.clone(),
            _ => String::new(),
        };
        if matches!(change.change_type, ChangeType::Updated | ChangeType::Dropped) {
            node.prepared.invalidate(&keyspace);
        }
        tracing::info!(?change, "schema changed");
        node.cluster.membership.set_schema_version(version);
        // No receivers is fine: nobody registered.
        let _ = node.events.send(Event::SchemaChange(change.clone()));
    }
}
