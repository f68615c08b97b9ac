//! What the node says about the cluster: the rows of `system.local` and `system.peers`
//! (membership and tokens from the metadata log, liveness and schema versions from gossip), and
//! the status document `hayate status` prints (`/status` on the metrics port).

use hayate_cluster::membership::NodeStatus;
use hayate_cluster::metadata::MemberStatus;
use hayate_cluster::node::HostId;
use serde_json::{json, Value};

use super::ClusterNode;
use crate::system::{rpc_address, NodeRow};

fn uuid_text(b: &[u8; 16]) -> String {
    HostId(*b).to_string()
}

impl ClusterNode {
    /// This node as `system.local` shows it.
    pub fn local_row(&self) -> NodeRow {
        let metadata = self.metadata.current();
        let tokens = metadata
            .members
            .get(&self.info.host_id)
            .map(|r| r.tokens.clone())
            .unwrap_or_default();
        NodeRow {
            host_id: self.info.host_id.0,
            data_center: self.info.placement.data_center.clone(),
            rack: self.info.placement.rack.clone(),
            release_version: self.info.release_version.clone(),
            listen_address: self.info.listen_address,
            storage_port: self.info.storage_port,
            rpc_address: rpc_address(self.info.cql_address.ip()),
            cql_port: self.info.cql_address.port(),
            tokens,
            schema_version: None,
        }
    }

    /// The other members, as `system.peers` shows them: those that serve (a joining node
    /// appears once it is normal, as in Cassandra, so that drivers do not route to it early).
    pub fn peer_rows(&self) -> Vec<NodeRow> {
        let metadata = self.metadata.current();
        metadata
            .members
            .values()
            .filter(|r| r.info.host_id != self.info.host_id && r.status != MemberStatus::Joining)
            .map(|r| {
                let gossip = self.membership.peer(r.info.host_id);
                let info = gossip.as_ref().map_or(&r.info, |g| &g.info);
                NodeRow {
                    host_id: r.info.host_id.0,
                    data_center: info.placement.data_center.clone(),
                    rack: info.placement.rack.clone(),
                    release_version: info.release_version.clone(),
                    listen_address: info.listen_address,
                    storage_port: info.storage_port,
                    rpc_address: rpc_address(info.cql_address.ip()),
                    cql_port: info.cql_address.port(),
                    tokens: r.tokens.clone(),
                    schema_version: gossip.and_then(|g| g.schema_version),
                }
            })
            .collect()
    }

    /// The document `hayate status` prints: every member, its state (up or down, from gossip)
    /// and status (joining, normal or leaving, from the metadata log), load, tokens and
    /// ownership, the change in progress, and this node's view of the metadata log.
    pub fn status(&self, cluster_name: &str, schema_version: [u8; 16], load_bytes: u64) -> Value {
        let metadata = self.metadata.current();
        let ownership = metadata.ring().map(|r| r.ownership(None)).unwrap_or_default();
        let nodes: Vec<Value> = metadata
            .members
            .values()
            .map(|r| {
                let host = r.info.host_id;
                let me = host == self.info.host_id;
                let gossip = if me {
                    Some(self.membership.local())
                } else {
                    self.membership.peer(host)
                };
                let up = me || gossip.as_ref().is_some_and(|g| g.alive);
                let status = match r.status {
                    MemberStatus::Joining => NodeStatus::Joining,
                    MemberStatus::Normal => NodeStatus::Normal,
                    MemberStatus::Leaving => NodeStatus::Leaving,
                };
                let load = if me {
                    Some(load_bytes)
                } else {
                    gossip.as_ref().and_then(|g| g.load_bytes)
                };
                let version = if me {
                    Some(schema_version)
                } else {
                    gossip.as_ref().and_then(|g| g.schema_version)
                };
                json!({
                    "host_id": host.to_string(),
                    "address": r.info.listen_address.to_string(),
                    "cql_address": r.info.cql_address.to_string(),
                    "data_center": r.info.placement.data_center,
                    "rack": r.info.placement.rack,
                    "state": if up { "up" } else { "down" },
                    "status": status.as_str(),
                    "load_bytes": load,
                    "tokens": r.tokens.len(),
                    "owns": ownership.get(&host).copied().unwrap_or(0.0),
                    "schema_version": version.map(|v| uuid_text(&v)),
                })
            })
            .collect();
        let m = self.metadata.status();
        json!({
            "cluster_name": cluster_name,
            "local": self.info.host_id.to_string(),
            // With `local`, how `hayate local` tells the node it started from whatever else
            // answers on the address.
            "pid": std::process::id(),
            "nodes": nodes,
            "change": metadata.change.as_ref().map(|c| c.to_string()),
            "metadata": {
                "role": format!("{:?}", m.role).to_lowercase(),
                "leader": m.leader.map(|h| h.to_string()),
                "term": m.term,
                "last_applied_index": m.last_applied_index,
                "voters": m.voters.iter().map(|h| h.to_string()).collect::<Vec<_>>(),
                "learners": m.learners.iter().map(|h| h.to_string()).collect::<Vec<_>>(),
            },
        })
    }
}
