//! Gossip between nodes of different clusters, said out loud on both sides.
//!
//! Chitchat already refuses a digest addressed to another cluster (it answers `BadCluster` and
//! merges nothing), as Cassandra refuses gossip with another `cluster_name`. But it says so only
//! in warnings of its own, at every round and without the peer's address, which the node's log
//! filter keeps out (`chitchat=error`). This transport wraps chitchat's UDP transport and looks
//! at what arrives: a digest of another cluster is logged on the side that refuses it, and the
//! refusal on the side refused, each naming the peer and the two cluster names, at most once a
//! minute per peer, so that two clusters seeded at each other by mistake are found in either
//! log without filling it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chitchat::transport::{RecvOutcome, SendOutcome, Socket, Transport, UdpTransport};
use chitchat::{ChitchatEnvelope, ChitchatMessage};

/// How often one peer's refusals are logged again.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(60);
/// Peers whose last refusal is remembered; past this the memory starts again (and the next
/// refusal of each is logged once more).
const REFUSAL_PEERS_MAX: usize = 1024;

/// Chitchat's UDP transport, which logs gossip refused for another cluster name.
pub(super) struct NamedTransport {
    pub cluster_name: String,
}

struct NamedSocket {
    inner: Box<dyn Socket>,
    cluster_name: String,
    logged: Arc<Mutex<HashMap<SocketAddr, Instant>>>,
}

#[async_trait::async_trait]
impl Transport for NamedTransport {
    async fn open(&self, listen_addr: SocketAddr) -> anyhow::Result<Box<dyn Socket>> {
        let inner = UdpTransport.open(listen_addr).await?;
        Ok(Box::new(NamedSocket {
            inner,
            cluster_name: self.cluster_name.clone(),
            logged: Arc::default(),
        }))
    }
}

/// What a gossip message received says about the sender's cluster.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refusal<'a> {
    /// A digest from a node of the cluster named: this node refuses it.
    Theirs(&'a str),
    /// The peer refused this node's digest: it is of another cluster.
    Ours,
}

/// Whether `message`, from a peer, is gossip across cluster names.
pub(super) fn refusal<'a>(message: &'a ChitchatMessage, ours: &str) -> Option<Refusal<'a>> {
    match message {
        ChitchatMessage::Syn { cluster_id, .. } if cluster_id != ours => Some(Refusal::Theirs(cluster_id)),
        ChitchatMessage::BadCluster => Some(Refusal::Ours),
        _ => None,
    }
}

impl NamedSocket {
    /// Logs a refusal with `from`, unless one was logged within the interval.
    fn log(&self, from: SocketAddr, refusal: &Refusal<'_>) {
        let now = Instant::now();
        {
            let mut logged = self.logged.lock().expect("refusal log lock poisoned");
            if logged
                .get(&from)
                .is_some_and(|at| now.duration_since(*at) < REFUSAL_LOG_INTERVAL)
            {
                return;
            }
            if logged.len() >= REFUSAL_PEERS_MAX {
                logged.clear();
            }
            logged.insert(from, now);
        }
        let ours = &self.cluster_name;
        match refusal {
            Refusal::Theirs(theirs) => tracing::warn!(
                peer = %from,
                theirs,
                ours = %ours,
                "refusing gossip from {from}: it is a node of cluster '{theirs}', this node of '{ours}'; \
                 nodes of different cluster names never merge (check cluster_name and the seeds of both)"
            ),
            Refusal::Ours => tracing::warn!(
                peer = %from,
                ours = %ours,
                "{from} refused this node's gossip: it is a node of another cluster than '{ours}'; nodes \
                 of different cluster names never merge (check cluster_name and the seeds of both)"
            ),
        }
    }
}

#[async_trait::async_trait]
impl Socket for NamedSocket {
    fn local_addr(&self) -> anyhow::Result<SocketAddr> {
        self.inner.local_addr()
    }

    async fn send(&mut self, to: SocketAddr, envelope: ChitchatEnvelope) -> anyhow::Result<SendOutcome> {
        self.inner.send(to, envelope).await
    }

    async fn recv(&mut self) -> anyhow::Result<RecvOutcome> {
        let outcome = self.inner.recv().await?;
        if let Some(r) = refusal(&outcome.envelope.message, &self.cluster_name) {
            self.log(outcome.from_addr, &r);
        }
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gossip_across_cluster_names_is_recognised_on_both_sides() {
        let syn = |name: &str| ChitchatMessage::Syn {
            cluster_id: name.to_owned(),
            digest: Default::default(),
        };
        assert_eq!(refusal(&syn("hayate"), "hayate"), None);
        assert_eq!(
            refusal(&syn("local-c3"), "hayate"),
            Some(Refusal::Theirs("local-c3"))
        );
        assert_eq!(
            refusal(&ChitchatMessage::BadCluster, "hayate"),
            Some(Refusal::Ours)
        );
    }
}
