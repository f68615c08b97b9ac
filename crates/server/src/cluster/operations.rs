//! The topology operations an operator runs on a node (`hayate decommission`, `removenode`,
//! `cleanup`, `netstats`, through the node's HTTP endpoint), and what a node resumes or tidies
//! by itself when it starts.

use std::sync::Arc;
use std::time::Duration;

use hayate_cluster::consistency::Replication;
use hayate_cluster::metadata::MemberStatus;
use hayate_cluster::node::HostId;
use hayate_cluster::streaming::StreamStatus;
use serde_json::{json, Value};

use super::ClusterNode;
use crate::node::Node;

/// How long a node waits after it starts before it drops records of ranges it does not hold
/// (what a cold start found again of ranges cleaned up before): long enough for its metadata
/// log to catch up with the leader.
const START_CLEANUP_DELAY: Duration = Duration::from_secs(15);

/// What a node does by itself once it serves: follows topology changes to clean up after
/// them, resumes the decommission it was driving, and drops what a cold start found of ranges
/// it no longer holds.
pub fn resume(node: &Arc<Node>) {
    let topology = node.cluster.topology.clone();
    topology.spawn_follower();
    let me = node.cluster.info.host_id;
    let leaving = node
        .cluster
        .metadata
        .current()
        .change
        .as_ref()
        .is_some_and(|c| c.kind == hayate_cluster::metadata::ChangeKind::Leave { node: me });
    if leaving {
        tracing::info!("this node was decommissioning when it stopped: resuming");
        spawn_decommission(node);
    }
    let weak = Arc::downgrade(node);
    tokio::spawn(async move {
        tokio::time::sleep(START_CLEANUP_DELAY).await;
        let Some(node) = weak.upgrade() else { return };
        let topology = node.cluster.topology.clone();
        drop(node);
        if let Err(e) = topology.drain_and_cleanup().await {
            tracing::info!("no cleanup at start: {e}");
        }
    });
}

/// Checks that every keyspace keeps as many nodes as its replication factor (in each data
/// center) without this one, starts this node's decommission, and drives it in the background;
/// the node stops once it has left the ring. Returns what was started.
pub async fn decommission(node: &Arc<Node>) -> Result<String, String> {
    check_replication_without(node, node.cluster.info.host_id)?;
    let change = node
        .cluster
        .topology
        .begin_decommission()
        .await
        .map_err(|e| e.to_string())?;
    spawn_decommission(node);
    Ok(format!(
        "{change}: streaming this node's ranges to their next owners"
    ))
}

fn spawn_decommission(node: &Arc<Node>) {
    let weak = Arc::downgrade(node);
    let topology = node.cluster.topology.clone();
    tokio::spawn(async move {
        match topology.decommission().await {
            Ok(()) => {
                if let Some(node) = weak.upgrade() {
                    tracing::info!("decommissioned: stopping the node");
                    node.stopping.notify_one();
                }
            }
            Err(e) => tracing::error!("the decommission did not finish: {e}"),
        }
    });
}

/// The refusal a decommission of `leaving` gets when a keyspace would keep fewer nodes (in a
/// data center) than its replication factor, as Cassandra refuses it.
fn check_replication_without(node: &Node, leaving: HostId) -> Result<(), String> {
    let m = node.cluster.metadata.current();
    let remaining: Vec<&str> = m
        .members
        .values()
        .filter(|r| r.info.host_id != leaving && r.status == MemberStatus::Normal)
        .map(|r| r.info.placement.data_center.as_str())
        .collect();
    let leaving_dc = m
        .members
        .get(&leaving)
        .map(|r| r.info.placement.data_center.clone())
        .unwrap_or_default();
    for ks in node.schema.current().user_keyspaces() {
        match ks.strategy() {
            Replication::Simple { factor } if remaining.len() < *factor => {
                return Err(format!(
                    "refused: keyspace {} has replication factor {factor}, and only {} nodes would remain \
                     without this one; lower its replication factor first (ALTER KEYSPACE), or add a node",
                    ks.name,
                    remaining.len()
                ))
            }
            Replication::NetworkTopology { factors } => {
                if let Some(&factor) = factors.get(&leaving_dc) {
                    let left = remaining.iter().filter(|dc| **dc == leaving_dc).count();
                    if left < factor {
                        return Err(format!(
                            "refused: keyspace {} has replication factor {factor} in data center {leaving_dc}, \
                             and only {left} nodes would remain there without this one; lower its replication \
                             factor first (ALTER KEYSPACE), or add a node to {leaving_dc}",
                            ks.name
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Starts the removal of the dead node `host` (refusals at once), and drives it in the
/// background.
pub async fn removenode(node: &Arc<Node>, host: HostId) -> Result<String, String> {
    let topology = node.cluster.topology.clone();
    match topology.begin_removal(host).await.map_err(|e| e.to_string())? {
        Err(done) => Ok(done),
        Ok(change) => {
            tokio::spawn(async move {
                match topology.remove(host).await {
                    Ok(done) => tracing::info!("{done}"),
                    Err(e) => tracing::error!("the removal of {host} did not finish: {e}"),
                }
            });
            Ok(format!(
                "{change}: the other replicas stream its ranges to their next owners"
            ))
        }
    }
}

/// Drains and drops the ranges this node does not hold (`hayate cleanup`).
pub async fn cleanup(node: &Arc<Node>) -> Result<String, String> {
    let report = node
        .cluster
        .topology
        .drain_and_cleanup()
        .await
        .map_err(|e| e.to_string())?;
    Ok(format!(
        "cleanup dropped {} records of ranges this node does not hold",
        report.records
    ))
}

/// What `hayate netstats` prints (and `hayate removenode status`): this node's mode, the
/// change in progress, the nodes taking ranges over in a change this node drives, and every
/// stream in and out with its progress.
pub fn netstats(cluster: &ClusterNode) -> Value {
    let m = cluster.metadata.current();
    let address = |host: HostId| -> String {
        m.members
            .get(&host)
            .map(|r| r.info.listen_address.to_string())
            .or_else(|| cluster.removed_address(host).map(|a| a.ip().to_string()))
            .unwrap_or_else(|| host.to_string())
    };
    let stream = |s: &StreamStatus| {
        json!({
            "peer": s.peer.to_string(),
            "peer_address": address(s.peer),
            "direction": s.direction,
            "purpose": s.purpose,
            "ranges_done": s.ranges_done,
            "ranges_total": s.ranges_total,
            "records_done": s.records_done,
            "records_total": s.records_total,
            "bytes_done": s.bytes_done,
            "bytes_total": s.bytes_total,
            "rate_bytes_per_s": s.rate_bytes_per_s,
            "elapsed_s": s.elapsed_s,
            "eta_s": s.eta_s(),
            "state": s.state,
        })
    };
    let topology = &cluster.topology;
    let (active, finished) = topology.streams().progress.snapshot();
    let change = m.change.as_ref().map(|c| {
        json!({
            "id": c.id,
            "kind": c.kind.name(),
            "subject": c.kind.subject().to_string(),
            "subject_address": address(c.kind.subject()),
            "description": c.to_string(),
        })
    });
    let handover: serde_json::Map<String, Value> = topology
        .handover()
        .into_iter()
        .map(|(host, state)| (address(host), Value::String(state)))
        .collect();
    json!({
        "mode": topology.mode().as_str(),
        "change": change,
        "handover": handover,
        "stream_throughput_bytes_per_s": topology.streams().throttle.rate(),
        "streams": active.iter().map(stream).collect::<Vec<_>>(),
        "finished": finished.iter().map(stream).collect::<Vec<_>>(),
    })
}
