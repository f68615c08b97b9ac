//! What the coordinator knows of the cluster when it plans a request: the ring (who holds
//! which tokens, where each node sits) and who is alive.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::consistency::{ReplicaState, Replication};
use crate::node::{HostId, Placement};
use crate::ring::{ReplicaMap, RingNode, TokenRing};

/// Who is alive, as the failure detector sees it.
pub trait Liveness: Send + Sync + 'static {
    fn is_alive(&self, host: HostId) -> bool;

    /// How long a node has been down, if it is (hints stop after `max_hint_window`).
    fn down_for(&self, host: HostId) -> Option<Duration>;
}

/// Everyone is alive: a node that is the whole cluster, or a test without failures.
pub struct AllAlive;

impl Liveness for AllAlive {
    fn is_alive(&self, _: HostId) -> bool {
        true
    }

    fn down_for(&self, _: HostId) -> Option<Duration> {
        None
    }
}

/// One version of the ring, with the replica maps requests have asked for so far.
pub struct Topology {
    ring: TokenRing,
    data_centers: HashMap<HostId, Arc<str>>,
    /// Made on first use for each replication: a keyspace's first request after a ring change
    /// builds its map (microseconds), every later one does a binary search.
    maps: RwLock<HashMap<Replication, Arc<ReplicaMap>>>,
}

impl Topology {
    pub fn new(ring: TokenRing) -> Topology {
        let data_centers = ring
            .nodes()
            .iter()
            .map(|n| (n.host, Arc::from(n.placement.data_center.as_str())))
            .collect();
        Topology {
            ring,
            data_centers,
            maps: RwLock::new(HashMap::new()),
        }
    }

    /// A one-node ring: `local` owns every token.
    pub fn single(local: HostId, placement: Placement) -> Topology {
        let ring = TokenRing::new(vec![RingNode {
            host: local,
            placement,
            tokens: vec![0],
        }])
        .expect("a one-node ring with one token is valid");
        Topology::new(ring)
    }

    pub fn ring(&self) -> &TokenRing {
        &self.ring
    }

    /// The replica map of one replication on this ring.
    pub fn map(&self, replication: &Replication) -> Arc<ReplicaMap> {
        if let Some(m) = self
            .maps
            .read()
            .expect("replica maps lock poisoned")
            .get(replication)
        {
            return m.clone();
        }
        let map = Arc::new(self.ring.replica_map(replication));
        self.maps
            .write()
            .expect("replica maps lock poisoned")
            .entry(replication.clone())
            .or_insert(map)
            .clone()
    }

    /// The data center of a node of the ring ("" for a node it does not know).
    pub fn data_center(&self, host: HostId) -> &str {
        self.data_centers.get(&host).map_or("", |dc| dc)
    }

    /// The replicas with their data centers and liveness, as consistency checks take them.
    pub fn states<'a>(
        &'a self,
        replicas: &[HostId],
        local: HostId,
        liveness: &dyn Liveness,
    ) -> Vec<ReplicaState<'a>> {
        replicas
            .iter()
            .map(|&host| ReplicaState {
                host,
                data_center: self.data_center(host),
                alive: host == local || liveness.is_alive(host),
            })
            .collect()
    }
}
