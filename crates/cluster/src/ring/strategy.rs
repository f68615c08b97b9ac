//! Replica placement: Cassandra 5.0's `SimpleStrategy` and `NetworkTopologyStrategy`, to the
//! order of the replicas.
//!
//! Both walk the ring clockwise from the range that holds the token, that is from the first
//! ring token at or above it.
//!
//! `SimpleStrategy` takes each node the first time the walk meets it, until it has `factor`
//! nodes or has met them all.
//!
//! `NetworkTopologyStrategy` fills every data center of its map in the same single walk
//! (`calculateNaturalReplicas` in Cassandra's `NetworkTopologyStrategy.java`). A data center
//! with factor `rf`, `nodes` nodes and `racks` racks needs `min(rf, nodes)` replicas and may
//! take at most `rf - racks` nodes from a rack it already has a replica in (a "rack repeat").
//! Walking on, a node of that data center is taken if it is new and either its rack is new to
//! the data center or a rack repeat is still allowed; the walk ends when every data center has
//! its replicas. The replicas come out in the order the walk took them, data centers
//! interleaved: the first is the owner of the range when its data center replicates, and the
//! coordinator reads from the first live ones.
//!
//! Older Cassandra (2.x) and the Python driver's `TokenMap` instead set aside the nodes of
//! racks already seen and append them only once every rack has a replica. That chooses the same
//! set of nodes (the first node of each rack, then the earliest others), but in another order;
//! the driver also lists replicas data center by data center. `tests/python/test_ring_placement.py`
//! checks both facts against the driver for many rings.
//!
//! A data center whose factor is 0 or that has no nodes takes no part; nodes of data centers
//! absent from the map are passed over.

use std::collections::BTreeMap;

use super::{RingNode, TokenRing};
use crate::consistency::Replication;

/// The ring's data centers and racks as dense indexes, so that a walk marks racks and nodes in
/// flat arrays instead of hashing names.
#[derive(Clone, Debug)]
pub(crate) struct Topology {
    /// Data center names, sorted.
    dc_names: Vec<String>,
    /// Per node (in the ring's node order): its data center's index in `dc_names`.
    node_dc: Vec<u32>,
    /// Per node: its rack's index among every (data center, rack) pair of the ring.
    node_rack: Vec<u32>,
    /// Per data center: how many nodes and how many racks it has.
    dc_nodes: Vec<usize>,
    dc_racks: Vec<usize>,
    rack_count: usize,
}

impl Topology {
    pub(crate) fn new(nodes: &[RingNode]) -> Topology {
        let mut racks: BTreeMap<(&str, &str), u32> = BTreeMap::new();
        let mut dcs: BTreeMap<&str, u32> = BTreeMap::new();
        for node in nodes {
            racks.insert((&node.placement.data_center, &node.placement.rack), 0);
            dcs.insert(&node.placement.data_center, 0);
        }
        for (i, index) in racks.values_mut().enumerate() {
            *index = u32::try_from(i).expect("racks are bounded by RING_NODES_MAX");
        }
        for (i, index) in dcs.values_mut().enumerate() {
            *index = u32::try_from(i).expect("data centers are bounded by RING_NODES_MAX");
        }
        let mut dc_nodes = vec![0; dcs.len()];
        let mut dc_racks = vec![0; dcs.len()];
        for &(dc, _) in racks.keys() {
            dc_racks[dcs[dc] as usize] += 1;
        }
        let mut node_dc = Vec::with_capacity(nodes.len());
        let mut node_rack = Vec::with_capacity(nodes.len());
        for node in nodes {
            let dc = dcs[node.placement.data_center.as_str()];
            dc_nodes[dc as usize] += 1;
            node_dc.push(dc);
            node_rack.push(racks[&(node.placement.data_center.as_str(), node.placement.rack.as_str())]);
        }
        Topology {
            dc_names: dcs.keys().map(|&dc| dc.to_owned()).collect(),
            node_dc,
            node_rack,
            dc_nodes,
            dc_racks,
            rack_count: racks.len(),
        }
    }
}

/// What a data center still needs during one walk.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DcNeeds {
    /// Replicas still to take; 0 for a data center that takes no part (or is done).
    replicas_left: usize,
    /// Nodes still allowed from racks that already hold a replica; can start below zero.
    rack_repeats_left: isize,
}

/// A replication resolved against one ring's topology, once per replica map.
#[derive(Clone, Debug)]
pub(crate) enum Plan {
    Simple {
        factor: usize,
    },
    NetworkTopology {
        /// By data center index.
        needs: Vec<DcNeeds>,
        /// Data centers with `replicas_left > 0`.
        dcs_to_fill: usize,
    },
    /// `Local`: the ring places nothing (the caller answers from the local node).
    Nothing,
}

impl Plan {
    pub(crate) fn new(topology: &Topology, replication: &Replication) -> Plan {
        match replication {
            Replication::Simple { factor } => Plan::Simple { factor: *factor },
            Replication::NetworkTopology { factors } => {
                let mut needs = vec![DcNeeds::default(); topology.dc_names.len()];
                let mut dcs_to_fill = 0;
                for (dc, name) in topology.dc_names.iter().enumerate() {
                    let rf = factors.get(name).copied().unwrap_or(0);
                    if rf == 0 {
                        continue;
                    }
                    // Cassandra: with fewer nodes than the factor, every node is a replica; with
                    // fewer racks, each rack gets one and the rest go to the first nodes met.
                    let racks = isize::try_from(topology.dc_racks[dc]).expect("racks fit in isize");
                    needs[dc] = DcNeeds {
                        replicas_left: rf.min(topology.dc_nodes[dc]),
                        rack_repeats_left: isize::try_from(rf).unwrap_or(isize::MAX).saturating_sub(racks),
                    };
                    dcs_to_fill += 1;
                }
                Plan::NetworkTopology { needs, dcs_to_fill }
            }
            Replication::Local => Plan::Nothing,
        }
    }

    /// Whether a walk that has taken `taken` (in the order it took them, all from the walk
    /// so far) would take `node` if it met it next: the rule [`Walker::walk_sequence`] applies,
    /// worked out from the replicas alone. The token allocator asks it to skip ranges whose
    /// replicas a new token cannot change.
    pub(crate) fn accepts(&self, topology: &Topology, taken: &[u32], node: u32) -> bool {
        if taken.contains(&node) {
            return false;
        }
        match self {
            Plan::Nothing => false,
            Plan::Simple { factor } => taken.len() < (*factor).min(topology.node_dc.len()),
            Plan::NetworkTopology { needs, .. } => {
                let dc = topology.node_dc[node as usize];
                let rack = topology.node_rack[node as usize];
                let same_dc = |n: &&u32| topology.node_dc[**n as usize] == dc;
                let (mut in_dc, mut racks, mut rack_used) = (0usize, 0usize, false);
                for (i, &n) in taken.iter().enumerate().filter(|(_, n)| same_dc(n)) {
                    in_dc += 1;
                    let r = topology.node_rack[n as usize];
                    rack_used |= r == rack;
                    // The first replica from its rack: the walk stamped a new rack then.
                    if !taken[..i]
                        .iter()
                        .filter(same_dc)
                        .any(|&m| topology.node_rack[m as usize] == r)
                    {
                        racks += 1;
                    }
                }
                let need = needs[dc as usize];
                if in_dc >= need.replicas_left {
                    return false;
                }
                // Each replica taken from a rack already used spent one rack repeat.
                let repeats_spent = isize::try_from(in_dc - racks).expect("bounded by nodes");
                !rack_used || need.rack_repeats_left - repeats_spent > 0
            }
        }
    }
}

/// The scratch space of placement walks, reused from one walk to the next: a node or rack has
/// been taken in the current walk if its stamp equals the walk's epoch, so starting a walk
/// clears nothing.
pub(crate) struct Walker {
    node_stamp: Vec<u32>,
    rack_stamp: Vec<u32>,
    epoch: u32,
    needs: Vec<DcNeeds>,
}

impl Walker {
    pub(crate) fn new(ring: &TokenRing) -> Walker {
        Walker::for_topology(&ring.topology)
    }

    pub(crate) fn for_topology(topology: &Topology) -> Walker {
        Walker {
            node_stamp: vec![0; topology.node_dc.len()],
            rack_stamp: vec![0; topology.rack_count],
            epoch: 0,
            needs: Vec::with_capacity(topology.dc_names.len()),
        }
    }

    fn next_epoch(&mut self) -> u32 {
        if self.epoch == u32::MAX {
            self.node_stamp.fill(0);
            self.rack_stamp.fill(0);
            self.epoch = 0;
        }
        self.epoch += 1;
        self.epoch
    }

    /// Appends to `out` the indexes (in `ring.nodes`) of the replicas of the range ending at
    /// ring token `start`, in placement order.
    pub(crate) fn walk(&mut self, ring: &TokenRing, plan: &Plan, start: usize, out: &mut Vec<u32>) {
        let owners = &ring.owners;
        let clockwise = owners[start..].iter().chain(&owners[..start]).copied();
        self.walk_sequence(&ring.topology, plan, clockwise, out);
    }

    /// Appends to `out` the replicas that `plan` takes from `clockwise`, the owners (node indexes
    /// in `topology`) of the ring tokens met walking clockwise from a range's end, once round.
    /// The token allocator walks rings that do not exist yet this way, with a joining node's
    /// token inserted.
    ///
    /// Returns how many owners of `clockwise` the walk read before it had every replica it
    /// needs, or `None` if `clockwise` ended first (a ring with too few nodes or racks).
    pub(crate) fn walk_sequence(
        &mut self,
        topology: &Topology,
        plan: &Plan,
        clockwise: impl Iterator<Item = u32>,
        out: &mut Vec<u32>,
    ) -> Option<usize> {
        let first = out.len();
        let epoch = self.next_epoch();
        match plan {
            Plan::Nothing => Some(0),
            Plan::Simple { factor } => {
                let wanted = (*factor).min(topology.node_dc.len());
                if wanted == 0 {
                    return Some(0);
                }
                for (read, node) in clockwise.enumerate() {
                    let stamp = &mut self.node_stamp[node as usize];
                    if *stamp == epoch {
                        continue;
                    }
                    *stamp = epoch;
                    out.push(node);
                    if out.len() - first == wanted {
                        return Some(read + 1);
                    }
                }
                None
            }
            Plan::NetworkTopology { needs, dcs_to_fill } => {
                let mut dcs_to_fill = *dcs_to_fill;
                if dcs_to_fill == 0 {
                    return Some(0);
                }
                self.needs.clear();
                self.needs.extend_from_slice(needs);
                for (read, node) in clockwise.enumerate() {
                    let dc = &mut self.needs[topology.node_dc[node as usize] as usize];
                    if dc.replicas_left == 0 || self.node_stamp[node as usize] == epoch {
                        continue;
                    }
                    let rack = &mut self.rack_stamp[topology.node_rack[node as usize] as usize];
                    if *rack != epoch {
                        *rack = epoch;
                    } else if dc.rack_repeats_left > 0 {
                        dc.rack_repeats_left -= 1;
                    } else {
                        // Every replica still needed must come from a rack not yet used.
                        continue;
                    }
                    self.node_stamp[node as usize] = epoch;
                    out.push(node);
                    dc.replicas_left -= 1;
                    if dc.replicas_left == 0 {
                        dcs_to_fill -= 1;
                        if dcs_to_fill == 0 {
                            return Some(read + 1);
                        }
                    }
                }
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::{HostId, Placement};
    use crate::ring::{RingNode, Token, TokenRing};

    fn host(n: u8) -> HostId {
        HostId([n; 16])
    }

    fn node(n: u8, dc: &str, rack: &str, tokens: &[Token]) -> RingNode {
        RingNode {
            host: host(n),
            placement: Placement {
                data_center: dc.to_owned(),
                rack: rack.to_owned(),
            },
            tokens: tokens.to_vec(),
        }
    }

    fn nts(factors: &[(&str, usize)]) -> Replication {
        Replication::NetworkTopology {
            factors: factors.iter().map(|&(dc, f)| (dc.to_owned(), f)).collect(),
        }
    }

    #[test]
    fn simple_strategy_takes_the_next_distinct_nodes_clockwise() {
        let ring = TokenRing::new(vec![
            node(1, "dc1", "r1", &[0, 300]),
            node(2, "dc1", "r1", &[100]),
            node(3, "dc1", "r1", &[200]),
        ])
        .expect("valid ring");
        let rf2 = Replication::Simple { factor: 2 };
        assert_eq!(ring.replicas_for(&rf2, 50), vec![host(2), host(3)]);
        assert_eq!(ring.replicas_for(&rf2, 250), vec![host(1), host(2)]);
        // Node 1 owns two tokens in a row past 250: it counts once.
        assert_eq!(
            ring.replicas_for(&Replication::Simple { factor: 5 }, 250),
            vec![host(1), host(2), host(3)]
        );
        assert!(ring
            .replicas_for(&Replication::Simple { factor: 0 }, 250)
            .is_empty());
    }

    /// `Plan::accepts` must decide as the walk does: at every owner a walk meets, it accepts
    /// exactly the owners the walk takes.
    #[test]
    fn accepts_decides_as_the_walk_does() {
        let racks = ["a", "b", "c"];
        let mut nodes = Vec::new();
        // Eight nodes over three racks and two data centers, tokens interleaved irregularly.
        for n in 0..8u8 {
            let tokens: Vec<Token> = (0..3)
                .map(|k| i64::from(n) * 7 + i64::from(k) * 1000 + i64::from(n % 3) * 131)
                .collect();
            let dc = if n % 4 == 3 { "dc2" } else { "dc1" };
            let rack = racks[[0, 0, 1, 2, 0, 1, 0, 2][usize::from(n)]];
            nodes.push(node(n, dc, rack, &tokens));
        }
        let ring = TokenRing::new(nodes).expect("valid ring");
        for replication in [
            Replication::Simple { factor: 3 },
            nts(&[("dc1", 2)]),
            nts(&[("dc1", 3), ("dc2", 1)]),
            nts(&[("dc1", 4), ("dc2", 2)]),
            nts(&[("dc1", 5)]),
        ] {
            let plan = Plan::new(&ring.topology, &replication);
            let mut walker = Walker::new(&ring);
            for start in 0..ring.tokens.len() {
                let mut replicas = Vec::new();
                walker.walk(&ring, &plan, start, &mut replicas);
                // Replay the walk with `accepts`, to where the walk stopped.
                let mut taken = Vec::new();
                let clockwise = ring.owners[start..].iter().chain(&ring.owners[..start]);
                for &owner in clockwise {
                    if taken.len() == replicas.len() {
                        break;
                    }
                    if plan.accepts(&ring.topology, &taken, owner) {
                        taken.push(owner);
                    }
                }
                assert_eq!(taken, replicas, "{replication:?} from token {start}");
            }
        }
    }

    /// Cassandra 5.0 takes a node of an already used rack as soon as the walk meets it while
    /// rack repeats are allowed; Cassandra 2.x (and the Python driver) would have put node 2
    /// after node 3.
    #[test]
    fn rack_repeats_are_taken_in_walk_order() {
        let ring = TokenRing::new(vec![
            node(1, "dc1", "a", &[100]),
            node(2, "dc1", "a", &[200]),
            node(3, "dc1", "b", &[300]),
            node(4, "dc1", "b", &[400]),
        ])
        .expect("valid ring");
        assert_eq!(
            ring.replicas_for(&nts(&[("dc1", 3)]), 100),
            vec![host(1), host(2), host(3)]
        );
        // With as many racks as replicas, the second node of rack a is passed over.
        assert_eq!(
            ring.replicas_for(&nts(&[("dc1", 2)]), 100),
            vec![host(1), host(3)]
        );
    }

    #[test]
    fn data_centers_fill_in_one_interleaved_walk() {
        let ring = TokenRing::new(vec![
            node(1, "dc1", "r1", &[100]),
            node(2, "dc2", "r1", &[200]),
            node(3, "dc1", "r2", &[300]),
            node(4, "dc2", "r1", &[400]),
            node(5, "dc3", "r1", &[500]),
        ])
        .expect("valid ring");
        let replication = nts(&[("dc1", 2), ("dc2", 5), ("dc3", 0), ("dc9", 3)]);
        // dc2 has two nodes for a factor of 5: both; dc3 (factor 0) and dc9 (no nodes) none.
        assert_eq!(
            ring.replicas_for(&replication, 150),
            vec![host(2), host(3), host(4), host(1)]
        );
        assert!(ring.replicas_for(&nts(&[]), 150).is_empty());
        assert!(ring.replicas_for(&Replication::Local, 150).is_empty());
    }
}
