//! Consistency levels and the arithmetic Cassandra does with them: how many replicas must
//! answer (`blockFor`), which of them count (local data center or all), and whether enough are
//! alive to try at all.

use std::collections::BTreeMap;

use crate::node::HostId;

/// A request's consistency level, as the native protocol numbers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConsistencyLevel {
    Any,
    One,
    Two,
    Three,
    Quorum,
    All,
    LocalQuorum,
    EachQuorum,
    Serial,
    LocalSerial,
    LocalOne,
}

impl ConsistencyLevel {
    /// The level's name as Cassandra prints it in messages.
    pub fn name(self) -> &'static str {
        match self {
            ConsistencyLevel::Any => "ANY",
            ConsistencyLevel::One => "ONE",
            ConsistencyLevel::Two => "TWO",
            ConsistencyLevel::Three => "THREE",
            ConsistencyLevel::Quorum => "QUORUM",
            ConsistencyLevel::All => "ALL",
            ConsistencyLevel::LocalQuorum => "LOCAL_QUORUM",
            ConsistencyLevel::EachQuorum => "EACH_QUORUM",
            ConsistencyLevel::Serial => "SERIAL",
            ConsistencyLevel::LocalSerial => "LOCAL_SERIAL",
            ConsistencyLevel::LocalOne => "LOCAL_ONE",
        }
    }

    /// True for the levels that count only replicas in the coordinator's data center.
    pub fn is_datacenter_local(self) -> bool {
        matches!(
            self,
            ConsistencyLevel::LocalOne | ConsistencyLevel::LocalQuorum | ConsistencyLevel::LocalSerial
        )
    }
}

/// How a keyspace places its replicas: its replication strategy and factors.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Replication {
    /// `SimpleStrategy`: the next `factor` distinct nodes clockwise on the ring.
    Simple { factor: usize },
    /// `NetworkTopologyStrategy`: per data center, a factor, spread over racks.
    NetworkTopology { factors: BTreeMap<String, usize> },
    /// Cassandra's `LocalStrategy` (system keyspaces): the local node only.
    Local,
}

impl Replication {
    /// Replicas in every data center together.
    pub fn total_factor(&self) -> usize {
        match self {
            Replication::Simple { factor } => *factor,
            Replication::NetworkTopology { factors } => factors.values().sum(),
            Replication::Local => 1,
        }
    }

    /// Replicas in data center `dc` (SimpleStrategy ignores data centers: all of them).
    pub fn factor_in(&self, dc: &str) -> usize {
        match self {
            Replication::Simple { factor } => *factor,
            Replication::NetworkTopology { factors } => factors.get(dc).copied().unwrap_or(0),
            Replication::Local => 1,
        }
    }
}

/// Not enough replicas are alive to meet the level; nothing was sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable {
    pub consistency: ConsistencyLevel,
    pub required: usize,
    pub alive: usize,
}

/// `n / 2 + 1`.
pub fn quorum_for(n: usize) -> usize {
    n / 2 + 1
}

/// How many replica answers a request at `cl` waits for (Cassandra's `blockFor`), given the
/// keyspace's replication and the coordinator's data center. EACH_QUORUM counts the sum of
/// every data center's quorum; [`each_quorum_block_for`] gives them one by one.
pub fn block_for(cl: ConsistencyLevel, replication: &Replication, local_dc: &str) -> usize {
    match cl {
        ConsistencyLevel::Any | ConsistencyLevel::One | ConsistencyLevel::LocalOne => 1,
        ConsistencyLevel::Two => 2,
        ConsistencyLevel::Three => 3,
        ConsistencyLevel::Quorum | ConsistencyLevel::Serial => quorum_for(replication.total_factor()),
        ConsistencyLevel::All => replication.total_factor(),
        ConsistencyLevel::LocalQuorum | ConsistencyLevel::LocalSerial => {
            quorum_for(replication.factor_in(local_dc))
        }
        ConsistencyLevel::EachQuorum => match replication {
            Replication::NetworkTopology { factors } => factors.values().map(|&f| quorum_for(f)).sum(),
            // Cassandra treats EACH_QUORUM on a strategy without data centers as QUORUM.
            _ => quorum_for(replication.total_factor()),
        },
    }
}

/// EACH_QUORUM's requirement per data center.
pub fn each_quorum_block_for(replication: &Replication) -> BTreeMap<String, usize> {
    match replication {
        Replication::NetworkTopology { factors } => factors
            .iter()
            .map(|(dc, &f)| (dc.clone(), quorum_for(f)))
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// One replica of a token, as the coordinator sees it when it plans a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaState<'a> {
    pub host: HostId,
    pub data_center: &'a str,
    pub alive: bool,
}

/// Checks, before anything is sent, that enough of `replicas` are alive for `cl`; returns the
/// error Cassandra returns (with `required` and `alive` counted the way it counts them: local
/// replicas only for the LOCAL_ levels) if not. ANY needs nothing alive: a hint will do.
pub fn assure_sufficient_live(
    cl: ConsistencyLevel,
    replication: &Replication,
    local_dc: &str,
    replicas: &[ReplicaState<'_>],
) -> Result<(), Unavailable> {
    assure_sufficient_live_for_write(cl, replication, local_dc, replicas, &[])
}

/// How many acknowledgements a write at `cl` waits for while some of its replicas are pending
/// (a node joining, or taking over a leaving or dead node's range): Cassandra's
/// `blockForWrite`. Each pending replica adds one (for the LOCAL_ levels, each one in the local
/// data center), so that a write acknowledged during the move is on as many replicas of the
/// ring after it as the level promises: at QUORUM, on a quorum of the final replicas.
pub fn block_for_write(
    cl: ConsistencyLevel,
    replication: &Replication,
    local_dc: &str,
    pending: &[ReplicaState<'_>],
) -> usize {
    let base = block_for(cl, replication, local_dc);
    base + match cl {
        ConsistencyLevel::Any => 0,
        _ if cl.is_datacenter_local() => pending.iter().filter(|p| p.data_center == local_dc).count(),
        _ => pending.len(),
    }
}

/// EACH_QUORUM's requirement per data center for a write with `pending` replicas: each data
/// center's quorum plus its pending replicas.
pub fn each_quorum_block_for_write(
    replication: &Replication,
    pending: &[ReplicaState<'_>],
) -> BTreeMap<String, usize> {
    let mut need = each_quorum_block_for(replication);
    for p in pending {
        if let Some(n) = need.get_mut(p.data_center) {
            *n += 1;
        }
    }
    need
}

/// [`assure_sufficient_live`] for a write whose token has `pending` replicas besides its
/// `natural` ones: the live replicas of both must reach [`block_for_write`] (per data center
/// for EACH_QUORUM, local only for the LOCAL_ levels), as Cassandra's
/// `assureSufficientLiveReplicasForWrite` counts them.
pub fn assure_sufficient_live_for_write(
    cl: ConsistencyLevel,
    replication: &Replication,
    local_dc: &str,
    natural: &[ReplicaState<'_>],
    pending: &[ReplicaState<'_>],
) -> Result<(), Unavailable> {
    if cl == ConsistencyLevel::Any {
        return Ok(());
    }
    let live = |dc: Option<&str>| {
        natural
            .iter()
            .chain(pending)
            .filter(|r| r.alive && dc.is_none_or(|dc| r.data_center == dc))
            .count()
    };
    let unavailable = |required: usize, alive: usize| Unavailable {
        consistency: cl,
        required,
        alive,
    };
    match cl {
        ConsistencyLevel::EachQuorum if matches!(replication, Replication::NetworkTopology { .. }) => {
            for (dc, required) in each_quorum_block_for_write(replication, pending) {
                let alive = live(Some(&dc));
                if alive < required {
                    return Err(unavailable(required, alive));
                }
            }
            Ok(())
        }
        _ => {
            let required = block_for_write(cl, replication, local_dc, pending);
            let alive = live(cl.is_datacenter_local().then_some(local_dc));
            if alive < required {
                Err(unavailable(required, alive))
            } else {
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nts(factors: &[(&str, usize)]) -> Replication {
        Replication::NetworkTopology {
            factors: factors.iter().map(|(d, f)| (d.to_string(), *f)).collect(),
        }
    }

    #[test]
    fn block_for_follows_cassandra() {
        let rf3 = Replication::Simple { factor: 3 };
        assert_eq!(block_for(ConsistencyLevel::One, &rf3, "dc1"), 1);
        assert_eq!(block_for(ConsistencyLevel::Quorum, &rf3, "dc1"), 2);
        assert_eq!(block_for(ConsistencyLevel::All, &rf3, "dc1"), 3);
        let two_dcs = nts(&[("dc1", 3), ("dc2", 2)]);
        assert_eq!(block_for(ConsistencyLevel::Quorum, &two_dcs, "dc1"), 3);
        assert_eq!(block_for(ConsistencyLevel::LocalQuorum, &two_dcs, "dc1"), 2);
        assert_eq!(block_for(ConsistencyLevel::LocalQuorum, &two_dcs, "dc2"), 2);
        assert_eq!(block_for(ConsistencyLevel::EachQuorum, &two_dcs, "dc1"), 4);
        assert_eq!(block_for(ConsistencyLevel::All, &two_dcs, "dc1"), 5);
    }

    #[test]
    fn unavailable_counts_what_cassandra_counts() {
        let a = HostId([1; 16]);
        let b = HostId([2; 16]);
        let c = HostId([3; 16]);
        let rf3 = Replication::Simple { factor: 3 };
        let replicas = [
            ReplicaState {
                host: a,
                data_center: "dc1",
                alive: true,
            },
            ReplicaState {
                host: b,
                data_center: "dc1",
                alive: false,
            },
            ReplicaState {
                host: c,
                data_center: "dc1",
                alive: false,
            },
        ];
        assert!(assure_sufficient_live(ConsistencyLevel::One, &rf3, "dc1", &replicas).is_ok());
        assert!(assure_sufficient_live(ConsistencyLevel::Any, &rf3, "dc1", &replicas).is_ok());
        assert_eq!(
            assure_sufficient_live(ConsistencyLevel::Quorum, &rf3, "dc1", &replicas),
            Err(Unavailable {
                consistency: ConsistencyLevel::Quorum,
                required: 2,
                alive: 1
            })
        );
        let two_dcs = nts(&[("dc1", 1), ("dc2", 2)]);
        let spread = [
            ReplicaState {
                host: a,
                data_center: "dc1",
                alive: true,
            },
            ReplicaState {
                host: b,
                data_center: "dc2",
                alive: true,
            },
            ReplicaState {
                host: c,
                data_center: "dc2",
                alive: false,
            },
        ];
        assert!(assure_sufficient_live(ConsistencyLevel::LocalQuorum, &two_dcs, "dc1", &spread).is_ok());
        assert_eq!(
            assure_sufficient_live(ConsistencyLevel::LocalQuorum, &two_dcs, "dc2", &spread),
            Err(Unavailable {
                consistency: ConsistencyLevel::LocalQuorum,
                required: 2,
                alive: 1
            })
        );
        assert_eq!(
            assure_sufficient_live(ConsistencyLevel::EachQuorum, &two_dcs, "dc1", &spread),
            Err(Unavailable {
                consistency: ConsistencyLevel::EachQuorum,
                required: 2,
                alive: 1
            })
        );
    }

    fn state(host: u8, dc: &'static str, alive: bool) -> ReplicaState<'static> {
        ReplicaState {
            host: HostId([host; 16]),
            data_center: dc,
            alive,
        }
    }

    #[test]
    fn a_pending_replica_raises_block_for_as_cassandras_block_for_write() {
        let rf3 = Replication::Simple { factor: 3 };
        let pending = [state(4, "dc1", true)];
        assert_eq!(block_for_write(ConsistencyLevel::One, &rf3, "dc1", &pending), 2);
        assert_eq!(
            block_for_write(ConsistencyLevel::Quorum, &rf3, "dc1", &pending),
            3
        );
        assert_eq!(block_for_write(ConsistencyLevel::All, &rf3, "dc1", &pending), 4);
        assert_eq!(block_for_write(ConsistencyLevel::Any, &rf3, "dc1", &pending), 1);
        assert_eq!(block_for_write(ConsistencyLevel::Quorum, &rf3, "dc1", &[]), 2);
        let two_dcs = nts(&[("dc1", 3), ("dc2", 3)]);
        let in_dc2 = [state(7, "dc2", true)];
        assert_eq!(
            block_for_write(ConsistencyLevel::LocalQuorum, &two_dcs, "dc1", &in_dc2),
            2
        );
        assert_eq!(
            block_for_write(ConsistencyLevel::LocalQuorum, &two_dcs, "dc2", &in_dc2),
            3
        );
        let each = each_quorum_block_for_write(&two_dcs, &in_dc2);
        assert_eq!(each["dc1"], 2);
        assert_eq!(each["dc2"], 3);
    }

    #[test]
    fn a_write_with_a_pending_replica_counts_it_alive_or_down() {
        let rf3 = Replication::Simple { factor: 3 };
        // A replacement: one natural replica is dead, the new node is pending and alive.
        let natural = [
            state(1, "dc1", true),
            state(2, "dc1", true),
            state(3, "dc1", false),
        ];
        let pending = [state(4, "dc1", true)];
        assert!(
            assure_sufficient_live_for_write(ConsistencyLevel::Quorum, &rf3, "dc1", &natural, &pending)
                .is_ok()
        );
        let down = [state(4, "dc1", false)];
        assert_eq!(
            assure_sufficient_live_for_write(ConsistencyLevel::Quorum, &rf3, "dc1", &natural, &down),
            Err(Unavailable {
                consistency: ConsistencyLevel::Quorum,
                required: 3,
                alive: 2
            })
        );
        assert!(
            assure_sufficient_live_for_write(ConsistencyLevel::Any, &rf3, "dc1", &natural, &down).is_ok()
        );
    }
}
