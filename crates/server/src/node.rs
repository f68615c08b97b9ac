//! The node: everything a request may need, shared by every connection. Only the request
//! layer (`requests/`) sees the whole node; it hands each statement the narrow handles it
//! needs (the coordinator, the schema, the role store).

use std::path::Path;
use std::sync::Arc;

use hayate_cluster::coordinator::Coordinator;
use hayate_cql::response::Event;
use hayate_storage::Engine;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::auth::Authenticator;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::prepared::PreparedCache;
use crate::schema::SchemaStore;

/// The data center and rack a single node reports, as Cassandra's defaults name them.
pub const DATA_CENTER: &str = "datacenter1";
pub const RACK: &str = "rack1";
/// The Cassandra version drivers see: 4.x makes them read `system_schema` and
/// `system_virtual_schema` (their modern schema parsers) and cqlsh describe on the server.
pub const RELEASE_VERSION: &str = "4.1.5";
/// Virtual nodes this node owns on the token ring.
pub const NUM_TOKENS: usize = 16;
/// EVENT frames a slow client may fall behind by before it misses some.
const EVENT_QUEUE_MAX: usize = 1024;

pub struct Node {
    pub config: Config,
    /// The storage engine, for its statistics and its clean close; requests reach it only
    /// through the coordinator.
    pub engine: Arc<Engine>,
    pub coordinator: Coordinator,
    pub schema: SchemaStore,
    pub prepared: PreparedCache,
    pub auth: Authenticator,
    pub roles: Arc<crate::auth::RoleStore>,
    pub metrics: Arc<Metrics>,
    pub events: broadcast::Sender<Event>,
    pub local: LocalNode,
}

/// What this node says about itself in `system.local`, kept across restarts.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LocalNode {
    pub host_id: [u8; 16],
    pub tokens: Vec<i64>,
    /// Counts restarts, as Cassandra's gossip generation does.
    pub generation: i32,
}

impl LocalNode {
    /// Loads `<data_dir>/node.json`, or makes a new identity: a host id and evenly spaced
    /// tokens offset by a random amount.
    pub fn load_or_create(data_dir: &Path) -> std::io::Result<LocalNode> {
        let path = data_dir.join("node.json");
        let mut local = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(std::io::Error::other)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let host_id = crate::schema::random_uuid();
                let offset = i64::from_be_bytes(host_id[..8].try_into().unwrap_or([0; 8]));
                let step = (u64::MAX / NUM_TOKENS as u64) as i64;
                let tokens = (0..NUM_TOKENS as i64)
                    .map(|i| offset.wrapping_add(i.wrapping_mul(step)))
                    .collect();
                LocalNode {
                    host_id,
                    tokens,
                    generation: 0,
                }
            }
            Err(e) => return Err(e),
        };
        local.generation = local.generation.max(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i32)
                .unwrap_or(1),
        );
        let tmp = path.with_extension("json.tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec_pretty(&local).map_err(std::io::Error::other)?,
        )?;
        std::fs::File::open(&tmp)?.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        Ok(local)
    }
}

pub fn event_channel() -> broadcast::Sender<Event> {
    broadcast::channel(EVENT_QUEUE_MAX).0
}

impl crate::system::ClusterView for Node {
    fn cluster_name(&self) -> &str {
        &self.config.cluster_name
    }

    fn local(&self) -> crate::system::NodeRow {
        let ip = crate::system::rpc_address(self.config.listen_address);
        crate::system::NodeRow {
            host_id: self.local.host_id,
            data_center: DATA_CENTER.to_owned(),
            rack: RACK.to_owned(),
            release_version: RELEASE_VERSION.to_owned(),
            listen_address: ip,
            storage_port: 7000,
            rpc_address: ip,
            cql_port: self.config.cql_port,
            tokens: self.local.tokens.clone(),
            schema_version: None,
        }
    }

    fn generation(&self) -> i32 {
        self.local.generation
    }

    fn peers(&self) -> Vec<crate::system::NodeRow> {
        Vec::new()
    }
}
