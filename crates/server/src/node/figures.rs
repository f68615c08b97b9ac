//! What the node's HTTP endpoint (the metrics port) reads from it: the figures a scrape
//! renders, the status `hayate status` prints, and the operator's endpoints (`/netstats`,
//! `/decommission`, `/removenode`, `/cleanup`; the others, for `hayate info`, `tablestats`,
//! `ring`, `drain`, ..., are in [`super::operator`]).
//!
//! The endpoint starts before the node has joined its cluster, so that a join that streams for
//! minutes can be followed: until the node serves, it answers from the cluster parts alone
//! (status and netstats), and refuses the operations.

use std::sync::{Arc, RwLock, Weak};

use hayate_cluster::coordinator::MetricsSnapshot;
use hayate_cluster::node::HostId;
use hayate_storage::{Engine, StatsSnapshot};

use crate::cluster::{operations, ClusterNode};
use crate::metrics::NodeFigures;
use crate::node::{operator, Node};
use crate::schema::SchemaStore;

/// The node's parts, weakly: the endpoint's thread outlives the node.
pub struct Figures {
    cluster: Weak<ClusterNode>,
    engine: Weak<Engine>,
    schema: Arc<SchemaStore>,
    cluster_name: String,
    node: RwLock<Option<Weak<Node>>>,
}

impl Figures {
    /// Figures of a node that is still joining.
    pub fn joining(
        cluster: &Arc<ClusterNode>,
        engine: &Arc<Engine>,
        schema: Arc<SchemaStore>,
        cluster_name: String,
    ) -> Figures {
        Figures {
            cluster: Arc::downgrade(cluster),
            engine: Arc::downgrade(engine),
            schema,
            cluster_name,
            node: RwLock::new(None),
        }
    }

    /// The node serves: the coordinator's figures and the operations are there too.
    pub fn serving(&self, node: &Arc<Node>) {
        *self.node.write().expect("figures lock poisoned") = Some(Arc::downgrade(node));
    }

    /// The `/status` document.
    fn status_doc(&self) -> serde_json::Value {
        match (self.cluster.upgrade(), self.engine.upgrade()) {
            (Some(cluster), Some(engine)) => {
                let mut doc = cluster.status(
                    &self.cluster_name,
                    self.schema.current().version,
                    engine.stats().live_bytes,
                );
                // False while the node joins: `hayate local` waits for true.
                doc["serving"] = self.node().is_some().into();
                doc
            }
            _ => serde_json::json!({"nodes": []}),
        }
    }

    fn node(&self) -> Option<Arc<Node>> {
        self.node
            .read()
            .expect("figures lock poisoned")
            .as_ref()
            .and_then(Weak::upgrade)
    }
}

impl NodeFigures for Figures {
    fn storage(&self) -> StatsSnapshot {
        self.engine.upgrade().map(|e| e.stats()).unwrap_or_default()
    }

    fn coordinator(&self) -> MetricsSnapshot {
        self.node().map(|n| n.coordinator.metrics()).unwrap_or_default()
    }

    fn streams(&self) -> Option<crate::metrics::StreamFigures> {
        let cluster = self.cluster.upgrade()?;
        let progress = &cluster.topology.streams().progress;
        let (active, _) = progress.snapshot();
        let rate = |inbound: bool| {
            active
                .iter()
                .filter(|s| (s.direction == hayate_cluster::streaming::Direction::In) == inbound)
                .map(|s| s.rate_bytes_per_s)
                .sum::<f64>()
        };
        Some(crate::metrics::StreamFigures {
            counters: progress.counters(),
            rate_in_bytes_per_s: rate(true),
            rate_out_bytes_per_s: rate(false),
            pending_ranges: cluster.pending_ranges(),
        })
    }

    fn snapshots(&self) -> Option<hayate_storage::SnapshotSpace> {
        self.engine.upgrade().map(|e| e.snapshot_space())
    }

    fn indexes(&self) -> Vec<crate::metrics::IndexFigures> {
        let Some(engine) = self.engine.upgrade() else {
            return Vec::new();
        };
        let schema = self.schema.current();
        schema
            .user_keyspaces()
            .flat_map(|k| k.tables.values())
            .flat_map(|t| t.indexes.iter().map(move |i| (t, i)))
            .filter_map(|(t, i)| {
                Some(crate::metrics::IndexFigures {
                    keyspace: t.keyspace.clone(),
                    table: t.name.clone(),
                    index: i.name.clone(),
                    state: engine.index_state(t.storage_id, i.id)?,
                })
            })
            .collect()
    }

    fn status(&self) -> String {
        self.status_doc().to_string()
    }

    fn admin(&self, method: &str, path: &str, query: &str, from_loopback: bool) -> Option<(String, String)> {
        let cluster = self.cluster.upgrade()?;
        let engine = self.engine.upgrade()?;
        let node = self.node();
        if let Some(answer) =
            crate::snapshots::endpoint::answer(node.clone(), method, path, query, from_loopback)
        {
            return Some(answer);
        }
        let parts = operator::Parts {
            cluster: &cluster,
            engine: &engine,
            schema: &self.schema,
            node: node.clone(),
            status: &|| self.status_doc(),
        };
        if let Some(answered) = operator::answer(&parts, method, path, query, from_loopback) {
            return Some(answered);
        }
        admin(&cluster, node, method, path, query, from_loopback)
    }
}

/// The operator's endpoints. The ones that change the cluster are taken only from this
/// machine, as `nodetool` reaches Cassandra over local JMX.
fn admin(
    cluster: &ClusterNode,
    node: Option<Arc<Node>>,
    method: &str,
    path: &str,
    query: &str,
    from_loopback: bool,
) -> Option<(String, String)> {
    const OK: &str = "200 OK";
    const STARTED: &str = "202 Accepted";
    const REFUSED: &str = "409 Conflict";
    let answer = |started: bool, result: Result<String, String>| match result {
        Ok(body) => ((if started { STARTED } else { OK }).to_owned(), body + "\n"),
        Err(e) => (REFUSED.to_owned(), e + "\n"),
    };
    let changes = matches!(path, "/decommission" | "/removenode" | "/cleanup");
    if !changes && path != "/netstats" {
        return None;
    }
    if method == "GET" && matches!(path, "/netstats" | "/removenode") {
        return Some((OK.to_owned(), operations::netstats(cluster).to_string()));
    }
    let allowed = if changes { "POST" } else { "GET" };
    if let Some(refused) = refuse(
        method,
        allowed,
        from_loopback,
        "decommission, removenode and cleanup",
    ) {
        return Some(refused);
    }
    let Some(node) = node else {
        return Some((
            REFUSED.to_owned(),
            "refused: this node is still joining the cluster; wait until it is normal\n".to_owned(),
        ));
    };
    Some(match path {
        "/decommission" => answer(true, node.runtime.block_on(operations::decommission(&node))),
        "/removenode" => {
            let host = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("host="))
                .unwrap_or_default();
            match host.parse::<HostId>() {
                Ok(host) => answer(true, node.runtime.block_on(operations::removenode(&node, host))),
                Err(e) => ("400 Bad Request".to_owned(), format!("{e}\n")),
            }
        }
        _ => answer(false, node.runtime.block_on(operations::cleanup(&node))),
    })
}

/// The refusal of a request by the wrong method (`allowed` is the right one), or, for one that
/// changes something (a POST), from another machine: `what` names the operations, as nodetool
/// reaches Cassandra only over local JMX. `None` if it may go on.
pub fn refuse(method: &str, allowed: &str, from_loopback: bool, what: &str) -> Option<(String, String)> {
    if method != allowed {
        return Some(("405 Method Not Allowed".to_owned(), format!("use {allowed}\n")));
    }
    if method == "POST" && !from_loopback {
        return Some((
            "403 Forbidden".to_owned(),
            format!("{what} are taken only from the node's own machine: run hayate there (or through ssh)\n"),
        ));
    }
    None
}
