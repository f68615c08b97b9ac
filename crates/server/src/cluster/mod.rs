//! The node's part in the cluster: the internode transport, gossip, the metadata log and the
//! replica service, wired together ([`ClusterNode::start`]); joining ([`join`]); and what the
//! node tells drivers about the others ([`view`]). The tasks that keep the coordinator's ring,
//! the transport's addresses and the drivers' events in step with the cluster are the node's
//! (`crate::node::tasks`).

pub mod join;
mod liveness;
pub mod operations;
pub mod rpc;
mod tables;
pub mod view;

use std::sync::Arc;

use hayate_cluster::coordinator::messaging::Messaging;
use hayate_cluster::coordinator::service::ReplicaService;
use hayate_cluster::membership::{generation_now, Membership, MembershipConfig, NodeStatus};
use hayate_cluster::metadata::{Metadata, MetadataConfig};
use hayate_cluster::node::{HostId, NodeInfo, Placement};
use hayate_cluster::replica::Replica;
use hayate_cluster::topology::{TopologyConfig, TopologyParts, TopologyService};
use hayate_cluster::transport::{TcpConfig, TcpTransport};

pub use liveness::GossipLiveness;

use crate::config::Config;
use crate::schema::machine::SchemaMachine;

/// The cluster pieces of one node.
pub struct ClusterNode {
    pub info: NodeInfo,
    /// `cluster_name`: a join request from a node of another name is refused.
    pub cluster_name: String,
    pub messaging: Arc<Messaging>,
    pub transport: Arc<TcpTransport>,
    pub membership: Membership,
    pub metadata: Metadata,
    pub service: Arc<ReplicaService>,
    pub liveness: Arc<GossipLiveness>,
    /// Joins, decommissions, replacements and removals: their streams and cleanups.
    pub topology: Arc<TopologyService>,
    /// The CQL address of every member this node has known, so that drivers can be told the
    /// address of one that left the ring.
    cql_addresses: std::sync::Mutex<std::collections::HashMap<HostId, std::net::SocketAddr>>,
}

/// This node as the others know it.
pub fn node_info(config: &Config, host_id: HostId) -> NodeInfo {
    NodeInfo {
        host_id,
        placement: Placement {
            data_center: config.cluster.data_center.clone(),
            rack: config.cluster.rack.clone(),
        },
        listen_address: config.listen_address,
        storage_port: config.cluster.storage_port,
        cql_address: config.cql_address(),
        release_version: crate::system::RELEASE_VERSION.to_owned(),
    }
}

impl ClusterNode {
    /// Opens the transport and gossip on the node's storage address, and the metadata log in
    /// `<data_dir>/metadata` (which replays the schema into `schema`).
    pub async fn start(
        config: &Config,
        info: NodeInfo,
        generation: u64,
        replica: Arc<dyn Replica>,
        schema: Arc<SchemaMachine>,
    ) -> Result<ClusterNode, String> {
        let local = info.host_id;
        let messaging = Messaging::new(local);
        let service = ReplicaService::new(
            replica.clone(),
            messaging.clone(),
            config.storage.commit_to_device,
        );
        messaging.set_handler(service.clone());
        let storage_address = info.storage_address();
        let transport = TcpTransport::start(
            TcpConfig::new(local, storage_address, config.cluster_name.clone()),
            messaging.clone(),
        )
        .await
        .map_err(|e| {
            format!(
                "cannot listen for other nodes on {storage_address}: {e} (is another node running there? \
                 give each node its own listen_address or storage_port)"
            )
        })?;
        let transport = Arc::new(transport);
        messaging.set_transport(transport.clone());
        let seeds = config.cluster.seed_addresses(storage_address)?;
        let mut gossip = MembershipConfig::new(&config.cluster_name, info.clone(), generation, seeds);
        gossip.status = NodeStatus::Joining;
        let membership = Membership::start(gossip).map_err(|e| e.to_string())?;
        let liveness = GossipLiveness::start(membership.clone());
        let metadata = Metadata::open(
            MetadataConfig::new(info.clone(), config.data_dir.join("metadata")),
            Arc::new(rpc::Rpc {
                messaging: messaging.clone(),
                membership: membership.clone(),
            }),
            schema.clone(),
        )
        .await
        .map_err(|e| format!("cannot open the cluster metadata log: {e}"))?;
        service
            .streams()
            .throttle
            .set_rate(config.cluster.stream_throughput_bytes.0);
        let topology = TopologyService::new(TopologyParts {
            local,
            log: Arc::new(metadata.clone()),
            tables: Arc::new(tables::SchemaTables(schema.store().clone())),
            messaging: messaging.clone(),
            replica,
            streams: service.streams().clone(),
            liveness: liveness.clone(),
            config: TopologyConfig {
                state_dir: Some(config.data_dir.join("streams")),
                cleanup_delay: config.cluster.cleanup_delay(),
                ..TopologyConfig::default()
            },
        });
        service.set_topology_handler(topology.handler());
        let handler_metadata = metadata.clone();
        let handler_schema = schema.store().clone();
        let handler_membership = membership.clone();
        let handler_cluster_name = config.cluster_name.clone();
        service.set_metadata_handler(Arc::new(move |from: HostId, payload: Vec<u8>| {
            let metadata = handler_metadata.clone();
            let schema = handler_schema.clone();
            let membership = handler_membership.clone();
            let cluster_name = handler_cluster_name.clone();
            Box::pin(async move {
                match payload.split_first() {
                    Some((&rpc::TAG_RAFT, rest)) => metadata.handle(from, rest).await,
                    Some((&rpc::TAG_JOIN, rest)) => {
                        join::handle_join(&metadata, &schema, &membership, &cluster_name, rest).await
                    }
                    _ => Vec::new(),
                }
            })
        }));
        Ok(ClusterNode {
            info,
            cluster_name: config.cluster_name.clone(),
            messaging,
            transport,
            membership,
            metadata,
            service,
            liveness,
            topology,
            cql_addresses: Default::default(),
        })
    }

    /// The ranges this node is a pending replica of (see `TopologyService::pending_ranges`).
    pub fn pending_ranges(&self) -> u64 {
        self.topology.pending_ranges()
    }

    /// Remembers the CQL address of every member of `metadata`.
    pub fn remember_addresses(&self, metadata: &hayate_cluster::metadata::ClusterMetadata) {
        let mut known = self.cql_addresses.lock().expect("addresses lock poisoned");
        for r in metadata.members.values() {
            known.insert(r.info.host_id, r.info.cql_address);
        }
    }

    /// The CQL address a member had, for a member that left the ring.
    pub fn removed_address(&self, host: HostId) -> Option<std::net::SocketAddr> {
        self.cql_addresses
            .lock()
            .expect("addresses lock poisoned")
            .get(&host)
            .copied()
    }

    /// Leaves cleanly: tells the others this node is going (they mark it down at once), and
    /// closes the metadata log and the transport.
    pub async fn shutdown(&self) {
        let membership = self.membership.clone();
        // The gossip thread's goodbye and join take a few hundred milliseconds.
        let _ = tokio::task::spawn_blocking(move || membership.shutdown()).await;
        self.metadata.clone().shutdown().await;
        self.transport.shutdown().await;
    }
}

/// The gossip generation for this start: larger than any before it on this node, even within
/// the same second (peers ignore a generation that does not grow).
pub fn next_generation(last: u64) -> u64 {
    generation_now().max(last + 1)
}

impl crate::admin::SchemaLog for Metadata {
    fn propose(&self, command: Vec<u8>) -> crate::admin::BoxFuture<'_, crate::error::QueryResult<Vec<u8>>> {
        use hayate_cluster::metadata::{Command, CommandResult, MetadataError};
        Box::pin(async move {
            match Metadata::propose(self, Command::App(command)).await {
                Ok(CommandResult::App(answer)) => Ok(answer),
                Ok(other) => Err(crate::error::server_error(format!(
                    "the cluster metadata log answered {other:?} to a schema change"
                ))),
                Err(MetadataError::NoQuorum { reachable, members }) => {
                    Err(crate::error::server_error(format!(
                        "Cannot change the schema: {reachable} of the {members} voting nodes of the cluster \
                     metadata log answer, and a schema change needs a majority of them. Nothing was changed; \
                     bring the other nodes back, then retry."
                    )))
                }
                Err(e) => Err(crate::error::server_error(format!(
                    "Cannot change the schema: {e}"
                ))),
            }
        })
    }

    fn data_centers(&self) -> Vec<String> {
        let mut dcs: Vec<String> = self
            .current()
            .members
            .values()
            .map(|r| r.info.placement.data_center.clone())
            .collect();
        dcs.sort();
        dcs.dedup();
        dcs
    }
}
