//! How a node becomes part of a cluster: it forms one with the nodes started beside it, asks a
//! member of an existing one to add it, or takes the place of a dead member.
//!
//! A node that has never been a member publishes status `joining` in gossip and looks around:
//! - if a live node publishes `normal`, a cluster exists: the node asks it to be added; the
//!   member allocates tokens for it (evening out the load of its data center for the largest
//!   replication factor there) and starts its join in the metadata log. The node then streams
//!   the data of the ranges it takes over and finishes the join (`TopologyService::join`)
//!   before it serves clients. With `replace_address`, it asks instead to take the place of
//!   the dead member at that address, with its tokens;
//! - otherwise the first seed (by address) that is alive forms a cluster, once it sees every
//!   seed alive (or after `formation_wait_ms`), with itself and every `joining` node it sees,
//!   their tokens evenly interleaved on the ring. A node alone with its own address as seed
//!   (the default) forms its own cluster at once.
//!
//! A node that restarts in the middle of its join (or replacement) resumes it: its streams go
//! on from their checkpoint.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hayate_cluster::consistency::Replication;
use hayate_cluster::membership::{Membership, NodeStatus};
use hayate_cluster::metadata::{Command, CommandResult, MemberRecord, MemberStatus, Metadata};
use hayate_cluster::node::{HostId, NodeInfo};
use hayate_cluster::ring::{allocate_tokens_for_replication, initial_tokens};
use serde::{Deserialize, Serialize};

use super::rpc::{self, TAG_JOIN};
use super::ClusterNode;
use crate::schema::machine::import_command;
use crate::schema::SchemaStore;

/// How long one join request may take (the member waits for the metadata log, which adds the
/// node to Raft and waits for it to catch up with the log).
const JOIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a restarted member waits for the metadata leader to tell it what it missed.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a restarted member waits to find itself in the log it replays before it concludes
/// it was removed.
const REMOVED_AFTER: Duration = Duration::from_secs(30);
/// How often a node that is not yet a member looks around again.
const LOOK_INTERVAL: Duration = Duration::from_millis(200);
/// How often it says what it is waiting for.
const WAITING_LOG_INTERVAL: Duration = Duration::from_secs(10);

#[derive(Serialize, Deserialize)]
struct JoinRequest {
    info: NodeInfo,
    num_tokens: usize,
    /// Take the place of the dead member at this address, with its tokens.
    #[serde(default)]
    replace: Option<IpAddr>,
    /// The joining node's `cluster_name`: a member of another name refuses it, as Cassandra
    /// does. (The internode handshake refuses another name before a request is ever sent;
    /// this keeps the join honest whatever carries it.) `None` from a node before this field.
    #[serde(default)]
    cluster_name: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum JoinAnswer {
    Added {
        tokens: Vec<i64>,
    },
    /// The cluster will not take this node (the reason says why); retrying will not help.
    Refused {
        reason: String,
    },
    /// Not now (no metadata quorum, a concurrent join took the same tokens): try again.
    Retry {
        reason: String,
    },
}

/// Becomes a member, or stays one; returns once this node is in the agreed membership and owns
/// its ranges (its join or replacement, if it was in one, finished). `legacy_schema` is the
/// `schema.json` of a node that ran before clusters, imported if this node forms the cluster.
pub async fn join(
    node: &ClusterNode,
    seeds: &[SocketAddr],
    num_tokens: usize,
    formation_wait: Duration,
    legacy_schema: Option<Vec<u8>>,
    replace: Option<IpAddr>,
) -> Result<(), String> {
    if node.metadata.is_member() {
        // A restart: the ring comes back from this node's own log (openraft replays it in the
        // background), and the node must know it before it serves a request; then what the
        // others agreed while it was down, so that it plans no request on an older ring.
        wait_for_self(node, true).await?;
        // The transport learns the members' addresses from the metadata once the node serves
        // (`node::tasks`), but a restarted member talks to them before that: to catch up with
        // the leader, and to resume its join's drain and streams. Without the addresses every
        // call went unanswered: each restart waited out the catch-up, and a joining node
        // restarted mid-stream never finished its join.
        for r in node.metadata.current().members.values() {
            if r.info.host_id != node.info.host_id {
                node.transport.set_peer(r.info.host_id, r.info.storage_address());
            }
        }
        match node.metadata.catch_up(CATCH_UP_TIMEOUT).await {
            Ok(epoch) => tracing::info!(epoch, "caught up with the cluster metadata log"),
            Err(e) => tracing::warn!(
                "serving with the cluster metadata as of epoch {}, which may be behind the cluster's: {e}",
                node.metadata.current().epoch
            ),
        }
        return finish_own_change(node).await;
    }
    if replace == Some(node.info.listen_address) && seeds.iter().all(|s| s.ip() == node.info.listen_address) {
        return Err(format!(
            "--replace-address {} names this node's own address and it is its only seed: give it the \
             other nodes as seeds, so that it can find the cluster",
            node.info.listen_address
        ));
    }
    node.membership.set_status(NodeStatus::Joining);
    let me = node.info.storage_address();
    let started = Instant::now();
    let mut last_log = started;
    loop {
        let peers = node.membership.peers();
        for p in &peers {
            node.transport.set_peer(p.info.host_id, p.info.storage_address());
        }
        if let Some(member) = peers.iter().find(|p| p.alive && p.status == NodeStatus::Normal) {
            match request_join(node, member.info.host_id, num_tokens, replace).await {
                Ok(JoinAnswer::Added { tokens }) => {
                    tracing::info!(via = %member.info.listen_address, tokens = tokens.len(), "joining the cluster");
                    if legacy_schema.is_some() {
                        tracing::warn!(
                            "this node's schema.json (from before it was part of a cluster) is ignored: it joined \
                             a cluster that has its own schema"
                        );
                    }
                    wait_for_self(node, false).await?;
                    return finish_own_change(node).await;
                }
                Ok(JoinAnswer::Refused { reason }) => return Err(reason),
                Ok(JoinAnswer::Retry { reason }) => {
                    tracing::info!("joining via {}: {reason}", member.info.listen_address)
                }
                Err(e) => tracing::info!("joining via {}: {e}", member.info.listen_address),
            }
        } else {
            let live_seeds: Vec<SocketAddr> = seeds
                .iter()
                .copied()
                .filter(|s| *s == me || peers.iter().any(|p| p.alive && p.gossip_address == *s))
                .collect();
            let first = live_seeds.iter().min().copied();
            let waited_enough = live_seeds.len() == seeds.len() || started.elapsed() >= formation_wait;
            // A replacement never forms a cluster: it needs the one its dead node was in.
            if first == Some(me) && waited_enough && replace.is_none() {
                let mut founders: Vec<NodeInfo> = vec![node.info.clone()];
                founders.extend(
                    peers
                        .iter()
                        .filter(|p| p.alive && p.status == NodeStatus::Joining)
                        .map(|p| p.info.clone()),
                );
                founders.sort_by_key(|i| i.host_id);
                match form(node, founders, num_tokens).await {
                    Ok(()) => {
                        if let Some(file) = legacy_schema {
                            import(node, &file).await?;
                        }
                        return wait_for_self(node, false).await;
                    }
                    Err(e) => tracing::warn!("forming the cluster: {e}; trying again"),
                }
            }
        }
        if node.metadata.is_member() {
            // Another node formed the cluster with this one in it.
            wait_for_self(node, false).await?;
            return finish_own_change(node).await;
        }
        if last_log.elapsed() >= WAITING_LOG_INTERVAL {
            last_log = Instant::now();
            tracing::info!(
                seeds = ?seeds,
                "not part of a cluster yet: waiting for a seed or a member to answer (check --seeds and that \
                 the seeds are up)"
            );
        }
        tokio::time::sleep(LOOK_INTERVAL).await;
    }
}

/// Starts a cluster of `founders`, their tokens interleaved evenly on the ring.
async fn form(node: &ClusterNode, founders: Vec<NodeInfo>, num_tokens: usize) -> Result<(), String> {
    let offset = i64::from_be_bytes(node.info.host_id.0[8..].try_into().expect("8 bytes"));
    let tokens = initial_tokens(founders.len(), num_tokens, offset);
    let records: Vec<MemberRecord> = founders
        .into_iter()
        .zip(tokens)
        .map(|(info, tokens)| MemberRecord {
            info,
            tokens,
            status: MemberStatus::Normal,
        })
        .collect();
    let names: Vec<String> = records
        .iter()
        .map(|r| r.info.listen_address.to_string())
        .collect();
    tracing::info!(nodes = ?names, "forming a new cluster");
    for r in &records {
        node.transport.set_peer(r.info.host_id, r.info.storage_address());
    }
    node.metadata.initialize(records).await.map_err(|e| e.to_string())
}

/// Takes over the schema this node kept before clusters existed.
async fn import(node: &ClusterNode, file: &[u8]) -> Result<(), String> {
    let result = node
        .metadata
        .propose(hayate_cluster::metadata::Command::App(import_command(file)))
        .await
        .map_err(|e| format!("importing this node's schema.json into the new cluster failed: {e}"))?;
    if let CommandResult::Refused(r) = result {
        return Err(format!("importing this node's schema.json was refused: {r}"));
    }
    Ok(())
}

/// Waits until the agreed membership, as this node has applied it, holds this node. A
/// restarted member (`restart`) that still finds a ring without itself after
/// [`REMOVED_AFTER`] was decommissioned or removed: it says so and stops.
async fn wait_for_self(node: &ClusterNode, restart: bool) -> Result<(), String> {
    let mut watch = node.metadata.watch();
    let me = node.info.host_id;
    let started = Instant::now();
    loop {
        {
            let m = watch.borrow_and_update();
            if m.members.contains_key(&me) {
                return Ok(());
            }
            if restart && !m.members.is_empty() && started.elapsed() >= REMOVED_AFTER {
                return Err(format!(
                    "this node ({me}) is no longer a member of the cluster: it was decommissioned or removed. \
                     To add this machine again, stop it, delete its data directory and start it as a new node"
                ));
            }
        }
        match tokio::time::timeout(WAITING_LOG_INTERVAL.min(REMOVED_AFTER), watch.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err("the metadata log stopped before this node was in it".into()),
            Err(_) => tracing::info!(
                "waiting for the cluster metadata log to list this node (it needs a majority of the \
                 metadata voters to be up)"
            ),
        }
    }
}

/// Finishes this node's join or replacement if one is in progress: streams what it takes over
/// (resuming from a checkpoint), then finishes the change.
async fn finish_own_change(node: &ClusterNode) -> Result<(), String> {
    let me = node.info.host_id;
    let in_progress = node
        .metadata
        .current()
        .change
        .clone()
        .filter(|c| c.kind.arriving() == Some(me));
    let Some(change) = in_progress else {
        return Ok(());
    };
    node.membership.set_status(NodeStatus::Joining);
    node.topology
        .join()
        .await
        .map_err(|e| format!("{change} did not finish: {e}"))
}

async fn request_join(
    node: &ClusterNode,
    member: HostId,
    num_tokens: usize,
    replace: Option<IpAddr>,
) -> Result<JoinAnswer, String> {
    let request = serde_json::to_vec(&JoinRequest {
        info: node.info.clone(),
        num_tokens,
        replace,
        cluster_name: Some(node.cluster_name.clone()),
    })
    .map_err(|e| e.to_string())?;
    let answer = rpc::call(&node.messaging, member, TAG_JOIN, &request, JOIN_REQUEST_TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    serde_json::from_slice(&answer).map_err(|e| format!("an answer to a join this node cannot read: {e}"))
}

/// A member's side of a join: allocate tokens for the new node (or take the dead node's it
/// replaces) and start its join in the metadata log.
pub async fn handle_join(
    metadata: &Metadata,
    schema: &Arc<SchemaStore>,
    membership: &Membership,
    cluster_name: &str,
    payload: &[u8],
) -> Vec<u8> {
    let answer = match serde_json::from_slice::<JoinRequest>(payload) {
        Ok(request) => match other_cluster(&request, cluster_name) {
            Some(reason) => {
                tracing::warn!(node = %request.info.listen_address, "refusing a join: {reason}");
                JoinAnswer::Refused { reason }
            }
            None => add(metadata, schema, membership, request).await,
        },
        Err(e) => JoinAnswer::Refused {
            reason: format!(
                "a join request this node cannot read (are the two nodes different releases?): {e}"
            ),
        },
    };
    serde_json::to_vec(&answer).expect("an answer always serializes")
}

/// Why a join request from a node of another cluster name is refused; `None` for ours.
fn other_cluster(request: &JoinRequest, ours: &str) -> Option<String> {
    let theirs = request.cluster_name.as_deref()?;
    (theirs != ours).then(|| {
        format!(
            "the node at {} is of cluster '{theirs}', this cluster is '{ours}': nodes of different cluster \
             names never merge (check cluster_name and the seeds of both)",
            request.info.listen_address
        )
    })
}

async fn add(
    metadata: &Metadata,
    schema: &Arc<SchemaStore>,
    membership: &Membership,
    request: JoinRequest,
) -> JoinAnswer {
    let current = metadata.current();
    let host = request.info.host_id;
    if let Some(existing) = current.members.get(&host) {
        return JoinAnswer::Added {
            tokens: existing.tokens.clone(),
        };
    }
    let (command, tokens) = match request.replace {
        Some(address) => {
            let Some(old) = current
                .members
                .values()
                .find(|r| r.info.listen_address == address)
            else {
                return JoinAnswer::Refused {
                    reason: format!(
                        "no member of the ring has the address {address}: there is nothing to replace (start \
                         the node without --replace-address to join as a new node)"
                    ),
                };
            };
            let old_host = old.info.host_id;
            if membership.is_alive(old_host) {
                return JoinAnswer::Refused {
                    reason: format!(
                        "the node at {address} ({old_host}) is alive: only a dead node can be replaced; \
                         decommission it instead, or stop it for good first"
                    ),
                };
            }
            let record = MemberRecord {
                info: request.info,
                tokens: old.tokens.clone(),
                status: MemberStatus::Joining,
            };
            (
                Command::StartReplace {
                    old: old_host,
                    new: record,
                },
                old.tokens.clone(),
            )
        }
        None => {
            let ring = match current.ring() {
                Ok(r) => r,
                Err(e) => {
                    return JoinAnswer::Retry {
                        reason: format!("the ring does not build: {e}"),
                    }
                }
            };
            let tokens = allocate(&ring, &schema.current(), &request.info, request.num_tokens);
            let record = MemberRecord {
                info: request.info,
                tokens: tokens.clone(),
                status: MemberStatus::Joining,
            };
            (Command::StartJoin(record), tokens)
        }
    };
    match metadata.add_node(host, command).await {
        // Another change in progress, a clash: the node is told why, and stops.
        Ok(CommandResult::Refused(reason)) => JoinAnswer::Refused { reason },
        Ok(_) => JoinAnswer::Added { tokens },
        Err(e) => JoinAnswer::Retry {
            reason: e.to_string(),
        },
    }
}

/// Tokens for a node joining `ring`: those that even out the load of its data center for the
/// keyspace with the largest replication factor there (Cassandra's
/// `allocate_tokens_for_local_replication_factor`), or its token ownership where no keyspace
/// has replicas there yet.
fn allocate(
    ring: &hayate_cluster::ring::TokenRing,
    schema: &crate::schema::Schema,
    info: &NodeInfo,
    num_tokens: usize,
) -> Vec<i64> {
    let dc = &info.placement.data_center;
    let replication = schema
        .user_keyspaces()
        .map(|k| k.strategy().clone())
        .filter(|r| r.factor_in(dc) > 0 && !matches!(r, Replication::Local))
        .max_by_key(|r| r.factor_in(dc))
        .unwrap_or(Replication::Simple { factor: 1 });
    allocate_tokens_for_replication(ring, &info.placement, num_tokens, &replication)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hayate_cluster::node::Placement;

    fn request(cluster_name: Option<&str>) -> JoinRequest {
        JoinRequest {
            info: NodeInfo {
                host_id: HostId([7; 16]),
                placement: Placement {
                    data_center: "datacenter1".to_owned(),
                    rack: "rack1".to_owned(),
                },
                listen_address: "127.0.1.2".parse().expect("an address"),
                storage_port: 7000,
                cql_address: "127.0.1.2:9042".parse().expect("an address"),
                release_version: "4.1.0".to_owned(),
            },
            num_tokens: 16,
            replace: None,
            cluster_name: cluster_name.map(str::to_owned),
        }
    }

    #[test]
    fn a_join_from_another_cluster_name_is_refused_with_both_names() {
        // Regression: two nodes of a local cluster joined a standalone node seeded at by
        // mistake, which then could never run DDL again (1 of 3 voters).
        let reason = other_cluster(&request(Some("local-c3")), "hayate").expect("refused");
        assert!(reason.contains("'local-c3'") && reason.contains("'hayate'") && reason.contains("127.0.1.2"));
        assert_eq!(other_cluster(&request(Some("hayate")), "hayate"), None);
        // A node of a release before the field says nothing: the handshake checked its name.
        assert_eq!(other_cluster(&request(None), "hayate"), None);
    }
}
