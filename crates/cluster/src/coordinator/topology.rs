//! What the coordinator knows of the cluster when it plans a request: the ring (who holds
//! which tokens, where each node sits), the ring a topology change in progress leads to (whose
//! extra replicas are pending: they receive writes, not reads), and who is alive.

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
    /// The metadata epoch this ring is of (0 where there is no metadata log: tests, a node
    /// alone). A coordinator waits for requests planned on rings older than an epoch to end
    /// before a topology change streams or cleans up (`Coordinator::drained`).
    epoch: u64,
    ring: TokenRing,
    /// The ring the change in progress leads to, if there is one.
    pending: Option<TokenRing>,
    data_centers: HashMap<HostId, Arc<str>>,
    /// Made on first use for each replication: a keyspace's first request after a ring change
    /// builds its map (microseconds), every later one does a binary search.
    maps: RwLock<HashMap<Replication, Arc<ReplicaMap>>>,
    pending_maps: RwLock<HashMap<Replication, Arc<ReplicaMap>>>,
}

impl Topology {
    pub fn new(ring: TokenRing) -> Topology {
        Topology::at_epoch(0, ring, None)
    }

    /// The ring of metadata epoch `epoch`, and the ring `pending` that a change in progress
    /// leads to: writes go to the replicas of both, reads to the replicas of `ring`.
    pub fn at_epoch(epoch: u64, ring: TokenRing, pending: Option<TokenRing>) -> Topology {
        let data_centers = ring
            .nodes()
            .iter()
            .chain(pending.iter().flat_map(|p| p.nodes()))
            .map(|n| (n.host, Arc::from(n.placement.data_center.as_str())))
            .collect();
        Topology {
            epoch,
            ring,
            pending,
            data_centers,
            maps: RwLock::new(HashMap::new()),
            pending_maps: RwLock::new(HashMap::new()),
        }
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The ring the change in progress leads to, if one is in progress.
    pub fn pending_ring(&self) -> Option<&TokenRing> {
        self.pending.as_ref()
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
        map_of(&self.maps, &self.ring, replication)
    }

    /// The replica map of one replication on the ring the change in progress leads to; `None`
    /// when no change is in progress.
    pub fn pending_map(&self, replication: &Replication) -> Option<Arc<ReplicaMap>> {
        let pending = self.pending.as_ref()?;
        Some(map_of(&self.pending_maps, pending, replication))
    }

    /// The replicas of `token` that are pending (in the ring the change leads to, not in this
    /// one) under `replication`, appended to `out`: none when no change is in progress.
    pub fn pending_replicas(
        &self,
        replication: &Replication,
        token: i64,
        natural: &[HostId],
        out: &mut Vec<HostId>,
    ) {
        if let Some(map) = self.pending_map(replication) {
            out.extend(map.replicas(token).iter().filter(|h| !natural.contains(h)));
        }
    }

    /// The data center of a node of either ring ("" for a node it does not know).
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

fn map_of(
    maps: &RwLock<HashMap<Replication, Arc<ReplicaMap>>>,
    ring: &TokenRing,
    replication: &Replication,
) -> Arc<ReplicaMap> {
    if let Some(m) = maps.read().expect("replica maps lock poisoned").get(replication) {
        return m.clone();
    }
    let map = Arc::new(ring.replica_map(replication));
    maps.write()
        .expect("replica maps lock poisoned")
        .entry(replication.clone())
        .or_insert(map)
        .clone()
}
