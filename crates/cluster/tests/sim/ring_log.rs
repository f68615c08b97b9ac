//! The simulation's metadata log: one sequence of applied [`ClusterMetadata`] states that every
//! node sees through its own `watch` channel, each entry a seeded lag after it was applied (and
//! not at all while the node is cut off), applied with the metadata's own state machine code
//! ([`ClusterMetadata::apply`]). Some proposals fail before they are applied (no quorum), some
//! after (the answer is lost), as a Raft log's do, so the topology code's retries run.
//!
//! It is the [`RingLog`] the real [`hayate_cluster::topology::TopologyService`] drives changes
//! through, as `crate::metadata::Metadata` is in a server.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hayate_cluster::metadata::{BoxFuture, ClusterMetadata, Command, CommandResult};
use hayate_cluster::node::HostId;
use hayate_cluster::topology::RingLog;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;
use tokio::time::sleep;

/// How long a proposer waits for its own node to apply what it proposed before it gives up.
const PROPOSE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a node cut off from the log looks again.
const CUT_POLL: Duration = Duration::from_millis(50);

/// How the log misbehaves in a run, drawn from its seed.
#[derive(Clone, Copy, Debug)]
pub struct LogFaults {
    /// Each node applies each entry up to this long after the leader did.
    pub lag_ms_max: u64,
    /// A proposal fails before it is applied with this probability.
    pub refuse_probability: f64,
    /// A proposal is applied but its answer lost with this probability.
    pub lose_answer_probability: f64,
}

impl LogFaults {
    pub const NONE: LogFaults = LogFaults {
        lag_ms_max: 0,
        refuse_probability: 0.0,
        lose_answer_probability: 0.0,
    };
}

struct Shared {
    /// One generator per node: nodes that see a new state at the same instant may draw in
    /// either order (tokio wakes a `watch` channel's waiters in an order it picks at random),
    /// and what each node draws must not depend on it.
    rngs: Vec<StdRng>,
    faults: LogFaults,
    /// Nodes that cannot reach the log (stopped or killed): they neither apply nor propose.
    cut: Vec<bool>,
}

/// The log every node shares.
pub struct SimLog {
    shared: Mutex<Shared>,
    /// The leader's state: every entry applied so far.
    applied: watch::Sender<Arc<ClusterMetadata>>,
    /// Each node's state, as far as it has applied the log.
    views: Vec<watch::Sender<Arc<ClusterMetadata>>>,
}

impl SimLog {
    /// A log whose first state is `initial`, for `nodes` nodes.
    pub fn new(initial: ClusterMetadata, nodes: usize, seed: u64) -> Arc<SimLog> {
        let initial = Arc::new(initial);
        Arc::new(SimLog {
            shared: Mutex::new(Shared {
                rngs: (0..nodes as u64)
                    .map(|n| StdRng::seed_from_u64(seed ^ (n + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)))
                    .collect(),
                faults: LogFaults::NONE,
                cut: vec![false; nodes],
            }),
            applied: watch::Sender::new(initial.clone()),
            views: (0..nodes).map(|_| watch::Sender::new(initial.clone())).collect(),
        })
    }

    fn shared(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().expect("log lock poisoned")
    }

    pub fn set_faults(&self, faults: LogFaults) {
        self.shared().faults = faults;
    }

    pub fn set_cut(&self, node: usize, cut: bool) {
        self.shared().cut[node] = cut;
    }

    fn is_cut(&self, node: usize) -> bool {
        self.shared().cut[node]
    }

    /// The leader's state.
    pub fn leader(&self) -> Arc<ClusterMetadata> {
        self.applied.borrow().clone()
    }

    /// Every state the leader applies.
    pub fn watch_leader(&self) -> watch::Receiver<Arc<ClusterMetadata>> {
        self.applied.subscribe()
    }

    /// Node `node`'s state.
    pub fn view(&self, node: usize) -> Arc<ClusterMetadata> {
        self.views[node].borrow().clone()
    }

    /// Node `node`'s own handle on the log.
    pub fn node(self: &Arc<Self>, node: usize) -> Arc<NodeLog> {
        Arc::new(NodeLog {
            log: self.clone(),
            node,
        })
    }

    /// Brings node `node`'s view up to the leader's, each state a seeded lag after the leader
    /// applied it, and never while the node is cut off. Runs for as long as the runtime does.
    pub async fn follow(self: Arc<Self>, node: usize) {
        let mut leader = self.applied.subscribe();
        loop {
            let target = leader.borrow_and_update().clone();
            if self.views[node].borrow().epoch < target.epoch {
                let lag = self.draw_lag(node);
                if !lag.is_zero() {
                    sleep(lag).await;
                }
                while self.is_cut(node) {
                    sleep(CUT_POLL).await;
                }
                self.views[node].send_if_modified(|view| {
                    let newer = view.epoch < target.epoch;
                    if newer {
                        *view = target.clone();
                    }
                    newer
                });
                continue;
            }
            if leader.changed().await.is_err() {
                return;
            }
        }
    }

    fn draw_lag(&self, node: usize) -> Duration {
        let mut s = self.shared();
        let max = s.faults.lag_ms_max;
        Duration::from_millis(if max == 0 {
            0
        } else {
            s.rngs[node].random_range(0..=max)
        })
    }

    /// Appends `command` for node `node`: Raft's round trip, with its failures.
    async fn propose(self: Arc<Self>, node: usize, command: Command) -> Result<CommandResult, String> {
        let (refuse, lose, lag) = {
            let mut s = self.shared();
            let f = s.faults;
            let rng = &mut s.rngs[node];
            let refuse = rng.random_bool(f.refuse_probability);
            let lose = rng.random_bool(f.lose_answer_probability);
            let lag = if f.lag_ms_max == 0 {
                0
            } else {
                rng.random_range(0..=f.lag_ms_max / 2)
            };
            (refuse, lose, Duration::from_millis(lag))
        };
        sleep(lag).await;
        if self.is_cut(node) {
            return Err(format!("n{node} cannot reach the metadata leader (simulated)"));
        }
        if refuse {
            return Err("no quorum for the proposal (simulated)".to_owned());
        }
        let mut index = 0;
        let mut result = CommandResult::Done;
        self.applied.send_modify(|state| {
            index = state.epoch + 1;
            let mut next = (**state).clone();
            result = next.apply(index, &command);
            *state = Arc::new(next);
        });
        if lose {
            return Err("the leader stepped down before it answered (simulated)".to_owned());
        }
        let mut own = self.views[node].subscribe();
        let applied = tokio::time::timeout(PROPOSE_TIMEOUT, own.wait_for(|m| m.epoch >= index))
            .await
            .is_ok_and(|r| r.is_ok());
        if applied {
            Ok(result)
        } else {
            Err(format!("n{node} did not apply entry {index} in time (simulated)"))
        }
    }
}

/// One node's handle on the shared log.
pub struct NodeLog {
    log: Arc<SimLog>,
    node: usize,
}

impl RingLog for NodeLog {
    fn current(&self) -> Arc<ClusterMetadata> {
        self.log.view(self.node)
    }

    fn watch(&self) -> watch::Receiver<Arc<ClusterMetadata>> {
        self.log.views[self.node].subscribe()
    }

    fn propose(&self, command: Command) -> BoxFuture<Result<CommandResult, String>> {
        Box::pin(self.log.clone().propose(self.node, command))
    }

    /// The simulated log has no voters to take `host` out of.
    fn propose_removing(&self, _host: HostId, command: Command) -> BoxFuture<Result<CommandResult, String>> {
        self.propose(command)
    }
}
