//! From what chitchat knows to the events this module reports.
//!
//! Chitchat keys its state by `(node id, generation, gossip address)`: a node that restarts is a
//! new entry beside its old one, which its failure detector keeps (dead) for the grace period.
//! The tracker folds those entries into one state per host id: the newest generation whose keys
//! can be read wins, older generations are ignored, and a new generation is a restart (reported
//! as `Down` if the old one was still thought up, then `Up` when the new one is heard enough
//! for the failure detector to call it live).
//!
//! It is a pure function of the observations it is fed, so its rules are tested here without a
//! network.

use std::collections::HashMap;

use tracing::{debug, warn};

use crate::node::HostId;

use super::keys::BadKey;
use super::{MembershipEvent, NodeStatus, PeerState};

struct Tracked {
    peer: PeerState,
    /// Chitchat's version of the entry's key-values when `peer` was read from them: an entry
    /// whose version has not moved has nothing new to read.
    max_version: u64,
}

/// One chitchat entry as the tracker sees it.
pub(crate) struct Observation {
    pub host_id: HostId,
    pub generation: u64,
    pub max_version: u64,
    /// Chitchat's failure detector's verdict.
    pub live: bool,
}

#[derive(Default)]
pub(crate) struct Tracker {
    hosts: HashMap<HostId, Tracked>,
    /// The `(generation, max_version)` of each host's last entry that could not be read, so an
    /// unreadable entry is read (and complained about) once, not every tick.
    unreadable: HashMap<HostId, (u64, u64)>,
}

/// Whether a peer counts as up: live to the failure detector and not announcing a shutdown.
fn is_up(live: bool, status: NodeStatus) -> bool {
    live && status != NodeStatus::Shutdown
}

/// The state a node publishes, without what gossip measures (liveness).
fn same_published_state(a: &PeerState, b: &PeerState) -> bool {
    a.info == b.info
        && a.status == b.status
        && a.schema_version == b.schema_version
        && a.load_bytes == b.load_bytes
        && a.gossip_address == b.gossip_address
        && a.application == b.application
}

impl Tracker {
    pub(crate) fn get(&self, host: HostId) -> Option<&PeerState> {
        self.hosts.get(&host).map(|tracked| &tracked.peer)
    }

    /// Takes in one chitchat entry and appends the events it causes. `read` reads the entry's
    /// keys; it is called only when there may be something new in them. Entries of one host
    /// must come in increasing generation order (chitchat's own order), so that a restart is
    /// seen after the old generation's last state.
    pub(crate) fn observe(
        &mut self,
        seen: Observation,
        read: impl FnOnce() -> Result<PeerState, BadKey>,
        events: &mut Vec<MembershipEvent>,
    ) {
        let host = seen.host_id;
        if let Some(tracked) = self.hosts.get_mut(&host) {
            if seen.generation < tracked.peer.generation {
                // The dead body of an earlier life of the node.
                return;
            }
            if seen.generation == tracked.peer.generation && seen.max_version == tracked.max_version {
                let up = is_up(seen.live, tracked.peer.status);
                if up != tracked.peer.alive {
                    tracked.peer.alive = up;
                    events.push(if up {
                        MembershipEvent::Up(host)
                    } else {
                        MembershipEvent::Down(host)
                    });
                }
                return;
            }
        }
        if self.unreadable.get(&host) == Some(&(seen.generation, seen.max_version)) {
            self.observe_liveness_only(&seen, events);
            return;
        }
        let mut peer = match read() {
            Ok(peer) => peer,
            Err(bad) => {
                if bad.value.is_some() {
                    warn!(host_id = %host, generation = seen.generation, "{bad}; its gossip state is ignored");
                } else {
                    // A newcomer's heartbeat comes a round before its keys: nothing to worry about.
                    debug!(host_id = %host, generation = seen.generation, "{bad}");
                }
                self.unreadable.insert(host, (seen.generation, seen.max_version));
                self.observe_liveness_only(&seen, events);
                return;
            }
        };
        self.unreadable.remove(&host);
        peer.alive = is_up(seen.live, peer.status);
        let Some(tracked) = self.hosts.get_mut(&host) else {
            events.push(MembershipEvent::Joined(peer.clone()));
            if peer.alive {
                events.push(MembershipEvent::Up(host));
            }
            self.hosts.insert(
                host,
                Tracked {
                    peer,
                    max_version: seen.max_version,
                },
            );
            return;
        };
        let restarted = seen.generation > tracked.peer.generation;
        let mut was_up = tracked.peer.alive;
        if restarted && was_up {
            // The node restarted before its old life was found dead (a quick restart, or one
            // that outran the failure detector). Requests in flight to the old process are lost
            // and connections to it are gone: say so, as a down followed by an up, which is
            // what a driver needs to reconnect.
            events.push(MembershipEvent::Down(host));
            was_up = false;
        }
        if !same_published_state(&peer, &tracked.peer) {
            events.push(MembershipEvent::Changed(peer.clone()));
        }
        if peer.alive != was_up {
            events.push(if peer.alive {
                MembershipEvent::Up(host)
            } else {
                MembershipEvent::Down(host)
            });
        }
        tracked.peer = peer;
        tracked.max_version = seen.max_version;
    }

    /// An entry whose keys cannot be read still tells whether the tracked generation lives.
    fn observe_liveness_only(&mut self, seen: &Observation, events: &mut Vec<MembershipEvent>) {
        let Some(tracked) = self.hosts.get_mut(&seen.host_id) else {
            return;
        };
        if seen.generation != tracked.peer.generation {
            return;
        }
        let up = is_up(seen.live, tracked.peer.status);
        if up != tracked.peer.alive {
            tracked.peer.alive = up;
            events.push(if up {
                MembershipEvent::Up(seen.host_id)
            } else {
                MembershipEvent::Down(seen.host_id)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::node::{NodeInfo, Placement};

    const HOST: HostId = HostId([5; 16]);

    fn peer(generation: u64, status: NodeStatus) -> PeerState {
        PeerState {
            info: NodeInfo {
                host_id: HOST,
                placement: Placement {
                    data_center: "dc1".to_owned(),
                    rack: "r1".to_owned(),
                },
                listen_address: "127.0.0.2".parse().expect("an address"),
                storage_port: 7000,
                cql_address: "127.0.0.2:9042".parse().expect("an address"),
                release_version: "4.1.0".to_owned(),
            },
            alive: false,
            status,
            schema_version: None,
            load_bytes: None,
            generation,
            gossip_address: "127.0.0.2:7000".parse().expect("an address"),
            application: BTreeMap::new(),
        }
    }

    fn seen(generation: u64, max_version: u64, live: bool) -> Observation {
        Observation {
            host_id: HOST,
            generation,
            max_version,
            live,
        }
    }

    /// Feeds one observation whose keys read as `state` and returns the events it caused.
    fn feed(
        tracker: &mut Tracker,
        seen: Observation,
        state: Result<PeerState, BadKey>,
    ) -> Vec<MembershipEvent> {
        let mut events = Vec::new();
        tracker.observe(seen, || state, &mut events);
        events
    }

    fn names(events: &[MembershipEvent]) -> Vec<&'static str> {
        events
            .iter()
            .map(|event| match event {
                MembershipEvent::Up(_) => "up",
                MembershipEvent::Down(_) => "down",
                MembershipEvent::Joined(_) => "joined",
                MembershipEvent::Changed(_) => "changed",
            })
            .collect()
    }

    #[test]
    fn a_newcomer_joins_then_goes_up_and_down() {
        let mut tracker = Tracker::default();
        let missing = Err(BadKey {
            key: "dc",
            value: None,
        });
        assert!(
            feed(&mut tracker, seen(1, 0, false), missing).is_empty(),
            "no keys yet, nothing to say"
        );
        assert_eq!(
            names(&feed(
                &mut tracker,
                seen(1, 6, false),
                Ok(peer(1, NodeStatus::Normal))
            )),
            ["joined"]
        );
        let not_read = Err(BadKey {
            key: "unused",
            value: None,
        });
        assert_eq!(
            names(&feed(&mut tracker, seen(1, 6, true), not_read.clone())),
            ["up"]
        );
        assert!(tracker.get(HOST).expect("tracked").alive);
        assert!(feed(&mut tracker, seen(1, 6, true), not_read.clone()).is_empty());
        assert_eq!(names(&feed(&mut tracker, seen(1, 6, false), not_read)), ["down"]);
    }

    #[test]
    fn a_published_change_is_reported_once_and_a_shutdown_is_a_down() {
        let mut tracker = Tracker::default();
        assert_eq!(
            names(&feed(
                &mut tracker,
                seen(1, 6, true),
                Ok(peer(1, NodeStatus::Joining))
            )),
            ["joined", "up"]
        );
        assert_eq!(
            names(&feed(
                &mut tracker,
                seen(1, 7, true),
                Ok(peer(1, NodeStatus::Normal))
            )),
            ["changed"]
        );
        // A new version with the same published state (say, a key rewritten to its value).
        assert!(feed(&mut tracker, seen(1, 8, true), Ok(peer(1, NodeStatus::Normal))).is_empty());
        assert_eq!(
            names(&feed(
                &mut tracker,
                seen(1, 9, true),
                Ok(peer(1, NodeStatus::Shutdown))
            )),
            ["changed", "down"]
        );
        assert!(!tracker.get(HOST).expect("tracked").alive);
    }

    #[test]
    fn a_restart_is_a_down_then_an_up_and_the_old_life_is_ignored() {
        let mut tracker = Tracker::default();
        feed(&mut tracker, seen(1, 6, true), Ok(peer(1, NodeStatus::Normal)));
        // The new generation is heard before the old one was found dead.
        assert_eq!(
            names(&feed(
                &mut tracker,
                seen(2, 6, false),
                Ok(peer(2, NodeStatus::Normal))
            )),
            ["down"]
        );
        assert_eq!(tracker.get(HOST).expect("tracked").generation, 2);
        // The old generation's death, and any news of it, no longer matter.
        let old = Ok(peer(1, NodeStatus::Leaving));
        assert!(feed(&mut tracker, seen(1, 7, false), old).is_empty());
        let not_read = Err(BadKey {
            key: "unused",
            value: None,
        });
        assert_eq!(names(&feed(&mut tracker, seen(2, 6, true), not_read)), ["up"]);
        // A restart seen while the node was up and already live again: down, then up.
        assert_eq!(
            names(&feed(
                &mut tracker,
                seen(3, 6, true),
                Ok(peer(3, NodeStatus::Normal))
            )),
            ["down", "up"]
        );
    }

    #[test]
    fn an_unreadable_entry_is_read_once_and_its_liveness_still_counts() {
        let mut tracker = Tracker::default();
        feed(&mut tracker, seen(1, 6, true), Ok(peer(1, NodeStatus::Normal)));
        let bad = || {
            Err(BadKey {
                key: "status",
                value: Some("moving".to_owned()),
            })
        };
        assert!(feed(&mut tracker, seen(1, 7, true), bad()).is_empty());
        let mut events = Vec::new();
        tracker.observe(
            seen(1, 7, false),
            || panic!("an unreadable entry is not read twice"),
            &mut events,
        );
        assert_eq!(names(&events), ["down"]);
        assert_eq!(tracker.get(HOST).expect("tracked").status, NodeStatus::Normal);
    }
}
