//! The coordinator's view of who is alive: gossip's failure detector, plus since when each
//! node has been down (hints stop after `max_hint_window`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hayate_cluster::coordinator::Liveness;
use hayate_cluster::membership::{Membership, MembershipEvent};
use hayate_cluster::node::HostId;
use tokio::sync::broadcast::error::RecvError;

pub struct GossipLiveness {
    membership: Membership,
    down_since: Mutex<HashMap<HostId, Instant>>,
}

impl GossipLiveness {
    /// Follows `membership`'s events to know since when nodes are down.
    pub fn start(membership: Membership) -> Arc<GossipLiveness> {
        let liveness = Arc::new(GossipLiveness {
            membership: membership.clone(),
            down_since: Mutex::new(HashMap::new()),
        });
        let weak = Arc::downgrade(&liveness);
        let mut events = membership.subscribe();
        tokio::spawn(async move {
            loop {
                let event = match events.recv().await {
                    Ok(e) => e,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return,
                };
                let Some(liveness) = weak.upgrade() else { return };
                let mut down = liveness.down_since.lock().expect("liveness lock poisoned");
                match event {
                    MembershipEvent::Down(h) => {
                        down.entry(h).or_insert_with(Instant::now);
                    }
                    MembershipEvent::Up(h) => {
                        down.remove(&h);
                    }
                    _ => {}
                }
            }
        });
        liveness
    }
}

impl Liveness for GossipLiveness {
    fn is_alive(&self, host: HostId) -> bool {
        self.membership.is_alive(host)
    }

    fn down_for(&self, host: HostId) -> Option<Duration> {
        if self.membership.is_alive(host) {
            return None;
        }
        self.down_since
            .lock()
            .expect("liveness lock poisoned")
            .get(&host)
            .map(Instant::elapsed)
    }
}
