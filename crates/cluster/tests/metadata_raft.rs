//! The metadata log in-process: several `Metadata` nodes, each on its own runtime and temp
//! directory, wired by an in-memory router that can cut any node off (both directions). The
//! server's state machine is a list of the commands applied, with their indexes.
//!
//! Openraft runs on real time (heartbeats, election timeouts), so these tests wait for
//! conditions rather than for fixed times, with generous limits. What they choose (which node to
//! cut off, where to tear the log) is drawn from a seed, printed on failure; replay with
//! `HAYATE_SEED=<seed> cargo test -p hayate-cluster --test metadata_raft`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hayate_cluster::metadata::{
    AppStateMachine, BoxFuture, ClusterMetadata, Command, CommandResult, MemberRecord, MemberStatus,
    Metadata, MetadataConfig, MetadataError, MetadataRpc, RaftRole, RpcError,
};
use hayate_cluster::node::{HostId, NodeInfo, Placement};
use tokio::runtime::{Handle, Runtime};
use tokio::time::Instant;

const HEARTBEAT: Duration = Duration::from_millis(50);
const PROPOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// Longer than two election timeouts (300 to 600 ms in these tests).
const ELECTIONS: Duration = Duration::from_millis(1500);
/// How long a test waits for a condition that should hold within a few heartbeats.
const SETTLE: Duration = Duration::from_secs(15);

// ---------------------------------------------------------------------------------------------
// The server's state machine, as a test sees it.

/// Appends every command to a list, answers with the list's length, snapshots the list.
#[derive(Default)]
struct ListApp {
    applied: Mutex<Vec<(u64, String)>>,
    restores: AtomicUsize,
}

impl ListApp {
    fn list(&self) -> Vec<(u64, String)> {
        self.applied.lock().expect("not poisoned").clone()
    }
}

impl AppStateMachine for ListApp {
    fn apply(&self, index: u64, command: &[u8]) -> Vec<u8> {
        let mut applied = self.applied.lock().expect("not poisoned");
        applied.push((index, String::from_utf8_lossy(command).into_owned()));
        applied.len().to_string().into_bytes()
    }

    fn snapshot(&self) -> Vec<u8> {
        serde_json::to_vec(&*self.applied.lock().expect("not poisoned")).expect("a list serializes")
    }

    fn restore(&self, _index: u64, snapshot: &[u8]) -> Result<(), String> {
        let list = serde_json::from_slice(snapshot).map_err(|e| e.to_string())?;
        *self.applied.lock().expect("not poisoned") = list;
        self.restores.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// The in-memory network.

#[derive(Default)]
struct Router {
    /// Running nodes, with the runtime their side of a call runs on.
    nodes: Mutex<HashMap<HostId, (Metadata, Handle)>>,
    cut: Mutex<HashSet<HostId>>,
}

impl Router {
    fn is_cut(&self, a: HostId, b: HostId) -> bool {
        let cut = self.cut.lock().expect("not poisoned");
        cut.contains(&a) || cut.contains(&b)
    }

    fn cut_off(&self, host: HostId) {
        self.cut.lock().expect("not poisoned").insert(host);
    }

    fn heal(&self, host: HostId) {
        self.cut.lock().expect("not poisoned").remove(&host);
    }
}

struct RouterRpc {
    router: Arc<Router>,
    from: HostId,
}

impl MetadataRpc for RouterRpc {
    fn call(&self, to: HostId, payload: Vec<u8>, timeout: Duration) -> BoxFuture<Result<Vec<u8>, RpcError>> {
        let router = self.router.clone();
        let from = self.from;
        Box::pin(async move {
            if router.is_cut(from, to) {
                return Err(RpcError::Unreachable {
                    host: to,
                    reason: "cut off".to_owned(),
                });
            }
            let target = router.nodes.lock().expect("not poisoned").get(&to).cloned();
            let Some((target, handle)) = target else {
                return Err(RpcError::Unreachable {
                    host: to,
                    reason: "not running".to_owned(),
                });
            };
            // The callee's side runs on the callee's runtime, and goes on if the caller gives up.
            let served = handle.spawn(async move { target.handle(from, &payload).await });
            let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
            match tokio::time::timeout(timeout, served).await {
                Ok(Ok(reply)) if !router.is_cut(from, to) => Ok(reply),
                Ok(Ok(_)) | Err(_) => Err(RpcError::Timeout { host: to, timeout_ms }),
                Ok(Err(e)) => Err(RpcError::Failed {
                    host: to,
                    reason: e.to_string(),
                }),
            }
        })
    }
}

// ---------------------------------------------------------------------------------------------
// A cluster of test nodes.

struct TestNode {
    record: MemberRecord,
    dir: PathBuf,
    runtime: Option<Runtime>,
    metadata: Metadata,
    app: Arc<ListApp>,
}

impl TestNode {
    fn host(&self) -> HostId {
        self.record.info.host_id
    }
}

struct Cluster {
    router: Arc<Router>,
    nodes: Vec<TestNode>,
    _root: tempfile::TempDir,
    tune: fn(&mut MetadataConfig),
}

fn record(i: u8) -> MemberRecord {
    let mut id = [0x5au8; 16];
    id[0] = i;
    let ip = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 10 + i));
    MemberRecord {
        info: NodeInfo {
            host_id: HostId(id),
            placement: Placement {
                data_center: "dc1".to_owned(),
                rack: format!("r{}", i % 2),
            },
            listen_address: ip,
            storage_port: 7000,
            cql_address: SocketAddr::new(ip, 9042),
            release_version: "4.1.0".to_owned(),
        },
        tokens: vec![i64::from(i) * 1000, i64::from(i) * 1000 + 1],
        status: MemberStatus::Normal,
    }
}

fn no_tuning(_: &mut MetadataConfig) {}

/// Starts `runtime` (one worker thread: the machine has two cores for every test at once).
fn node_runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime starts")
}

/// Runs `future` on `runtime` and waits for it from the test's own runtime.
async fn on<F>(runtime: &Runtime, future: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    runtime.spawn(future).await.expect("the task does not panic")
}

impl Cluster {
    /// Opens `n` nodes (not yet a cluster).
    async fn open(n: u8, tune: fn(&mut MetadataConfig)) -> Cluster {
        let mut cluster = Cluster {
            router: Arc::new(Router::default()),
            nodes: Vec::new(),
            _root: tempfile::tempdir().expect("temp dir"),
            tune,
        };
        for i in 0..n {
            cluster.add_node(i).await;
        }
        cluster
    }

    /// Opens `n` nodes and initializes them as a cluster from the first.
    async fn start(n: u8, tune: fn(&mut MetadataConfig)) -> Cluster {
        let cluster = Cluster::open(n, tune).await;
        let members = cluster.nodes.iter().map(|node| node.record.clone()).collect();
        cluster.nodes[0]
            .metadata
            .initialize(members)
            .await
            .expect("the cluster initializes");
        cluster
    }

    async fn add_node(&mut self, i: u8) {
        let record = record(i);
        let dir = self._root.path().join(format!("node{i}"));
        let (runtime, metadata, app) = self.open_node(&record, &dir).await;
        self.nodes.push(TestNode {
            record,
            dir,
            runtime: Some(runtime),
            metadata,
            app,
        });
    }

    async fn open_node(
        &self,
        record: &MemberRecord,
        dir: &std::path::Path,
    ) -> (Runtime, Metadata, Arc<ListApp>) {
        let mut config = MetadataConfig::new(record.info.clone(), dir.to_owned());
        config.heartbeat_interval = HEARTBEAT;
        config.election_timeout_min = Duration::from_millis(300);
        config.election_timeout_max = Duration::from_millis(600);
        config.propose_timeout = PROPOSE_TIMEOUT;
        config.catch_up_timeout = Duration::from_secs(10);
        (self.tune)(&mut config);
        let app = Arc::new(ListApp::default());
        let rpc = Arc::new(RouterRpc {
            router: self.router.clone(),
            from: record.info.host_id,
        });
        let runtime = node_runtime();
        let metadata = on(&runtime, Metadata::open(config, rpc, app.clone()))
            .await
            .expect("the node opens");
        self.router
            .nodes
            .lock()
            .expect("not poisoned")
            .insert(record.info.host_id, (metadata.clone(), runtime.handle().clone()));
        (runtime, metadata, app)
    }

    /// Takes node `i` off the network; returns its runtime, still running.
    fn detach(&mut self, i: usize) -> Runtime {
        let node = &mut self.nodes[i];
        self.router
            .nodes
            .lock()
            .expect("not poisoned")
            .remove(&node.host());
        node.runtime.take().expect("running")
    }

    /// Stops node `i` cleanly.
    async fn shut_down(&mut self, i: usize) {
        let runtime = self.detach(i);
        on(&runtime, self.nodes[i].metadata.clone().shutdown()).await;
        runtime.shutdown_background();
    }

    /// Stops node `i` as a crash would: its runtime goes, wherever its tasks are.
    async fn crash(&mut self, i: usize) {
        let runtime = self.detach(i);
        // Blocking file writes already under way finish (a process would be killed mid-write;
        // the torn record that leaves is made by hand below).
        tokio::task::spawn_blocking(move || runtime.shutdown_timeout(Duration::from_secs(2)))
            .await
            .expect("the runtime stops");
    }

    /// Opens node `i` again from its directory, with a fresh state machine.
    async fn reopen(&mut self, i: usize) {
        let record = self.nodes[i].record.clone();
        let dir = self.nodes[i].dir.clone();
        let (runtime, metadata, app) = self.open_node(&record, &dir).await;
        let node = &mut self.nodes[i];
        node.runtime = Some(runtime);
        node.metadata = metadata;
        node.app = app;
    }

    fn leader(&self) -> Option<usize> {
        self.nodes
            .iter()
            .position(|n| n.runtime.is_some() && n.metadata.status().role == RaftRole::Leader)
    }

    async fn wait_for_leader(&self) -> usize {
        wait_until("a leader is elected", SETTLE, || self.leader()).await
    }

    fn running(&self) -> impl Iterator<Item = &TestNode> {
        self.nodes.iter().filter(|n| n.runtime.is_some())
    }

    /// Waits until every running node in `which` has applied the same commands.
    async fn wait_converged(&self, which: &[usize]) -> Vec<(u64, String)> {
        wait_until("the nodes apply the same commands", SETTLE, || {
            let lists: Vec<_> = which.iter().map(|&i| self.nodes[i].app.list()).collect();
            let epochs: BTreeSet<u64> = which
                .iter()
                .map(|&i| self.nodes[i].metadata.current().epoch)
                .collect();
            (lists.windows(2).all(|w| w[0] == w[1]) && epochs.len() == 1).then(|| lists[0].clone())
        })
        .await
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(runtime) = node.runtime.take() {
                runtime.shutdown_background();
            }
        }
    }
}

/// Polls `check` until it returns something, or panics after `limit`.
async fn wait_until<T>(what: &str, limit: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            start.elapsed() < limit,
            "gave up after {limit:?} waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn app(command: &str) -> Command {
    Command::App(command.as_bytes().to_vec())
}

/// Proposes, retrying only the failures that say nothing was appended (an election under way
/// after a partition heals).
async fn propose_until_accepted(metadata: &Metadata, command: Command) -> CommandResult {
    let start = Instant::now();
    loop {
        match metadata.propose(command.clone()).await {
            Ok(result) => return result,
            Err(e @ (MetadataError::NoLeader { .. } | MetadataError::NoQuorum { .. })) => {
                assert!(start.elapsed() < SETTLE, "still failing after {SETTLE:?}: {e}");
                tokio::time::sleep(HEARTBEAT).await;
            }
            Err(e) => panic!("propose failed: {e}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Seeds.

fn seed() -> u64 {
    match std::env::var("HAYATE_SEED") {
        Ok(s) => s.trim().parse().expect("HAYATE_SEED must be an unsigned integer"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
    }
}

/// A small deterministic generator (splitmix64), enough to choose nodes and cut points.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

/// Runs a test body on a runtime of its own, printing the seed if it fails.
fn run(name: &str, body: impl FnOnce(u64) -> BoxFuture<()>) {
    let seed = seed();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime starts");
    let result = runtime.block_on(async move { tokio::spawn(body(seed)).await });
    if let Err(e) = result {
        panic!("{name} failed with seed {seed}; replay with HAYATE_SEED={seed}: {e}");
    }
}

// ---------------------------------------------------------------------------------------------
// The tests.

#[test]
fn proposals_from_every_node_apply_once_in_the_same_order_everywhere() {
    run("proposals_from_every_node", |_seed| {
        Box::pin(async {
            let cluster = Cluster::start(3, no_tuning).await;
            // Every member's record was applied by initialize.
            let members = &cluster.nodes[0].metadata.current().members;
            assert_eq!(members.len(), 3);
            assert_eq!(members[&cluster.nodes[2].host()].tokens, vec![2000, 2001]);

            for round in 0..3 {
                for (i, node) in cluster.nodes.iter().enumerate() {
                    let command = format!("r{round}-n{i}");
                    let result = node.metadata.propose(app(&command)).await.expect("proposed");
                    // The answer is the proposer's: the length of the list once this command
                    // is in it, on this node too (it returns once applied here).
                    let CommandResult::App(answer) = result else {
                        panic!("an app command answers with the app's answer: {result:?}")
                    };
                    let count: usize = String::from_utf8(answer)
                        .expect("utf-8")
                        .parse()
                        .expect("a count");
                    assert_eq!(node.app.list()[count - 1].1, command);

                    // Every node has the same epoch within a second of the answer.
                    let answered = Instant::now();
                    let epoch = node.metadata.current().epoch;
                    wait_until(
                        "every node reaches the proposer's epoch",
                        Duration::from_secs(1),
                        || {
                            cluster
                                .nodes
                                .iter()
                                .all(|n| n.metadata.current().epoch == epoch)
                                .then_some(())
                        },
                    )
                    .await;
                    assert!(answered.elapsed() < Duration::from_secs(1));
                }
            }

            let lists: Vec<_> = cluster.nodes.iter().map(|n| n.app.list()).collect();
            assert_eq!(lists[0].len(), 9);
            assert!(
                lists.iter().all(|l| *l == lists[0]),
                "same commands, order and indexes: {lists:?}"
            );
            let distinct: BTreeSet<_> = lists[0].iter().map(|(_, c)| c.clone()).collect();
            assert_eq!(distinct.len(), 9, "each command exactly once");
            let status = cluster.nodes[1].metadata.status();
            assert_eq!(status.voters.len(), 3);
            assert!(status.leader.is_some());
        })
    });
}

#[test]
fn a_node_restarts_with_its_state_and_catches_up_even_after_a_torn_write() {
    run("restart", |seed| {
        Box::pin(async move {
            let mut rng = Rng(seed);
            let mut cluster = Cluster::start(3, no_tuning).await;
            for k in 0..5 {
                cluster.nodes[k % 3]
                    .metadata
                    .propose(app(&format!("before-{k}")))
                    .await
                    .expect("proposed");
            }
            let leader = cluster.wait_for_leader().await;
            let follower = (leader + 1 + rng.below(2) as usize) % 3;
            cluster.wait_converged(&[0, 1, 2]).await;

            // A clean stop: the node comes back with what it had, then catches up.
            let had = cluster.nodes[follower].app.list();
            let had_members = cluster.nodes[follower].metadata.current().members.clone();
            cluster.shut_down(follower).await;
            for k in 0..5 {
                cluster.nodes[leader]
                    .metadata
                    .propose(app(&format!("while-down-{k}")))
                    .await
                    .expect("proposed");
            }
            cluster.reopen(follower).await;
            let reopened = cluster.nodes[follower].app.list();
            assert!(
                reopened.starts_with(&had),
                "reopened with {reopened:?}, had {had:?}"
            );
            assert_eq!(cluster.nodes[follower].metadata.current().members, had_members);
            let all = cluster.wait_converged(&[0, 1, 2]).await;
            assert_eq!(all.len(), 10);

            // A crash: the runtime goes without a shutdown, and the log's last record is torn.
            let victim = (cluster.wait_for_leader().await + 1) % 3;
            cluster.crash(victim).await;
            let log = cluster.nodes[victim].dir.join("log");
            let len = std::fs::metadata(&log).expect("the log exists").len();
            let cut = 1 + rng.below(20);
            let file = std::fs::OpenOptions::new().write(true).open(&log).expect("opens");
            file.set_len(len - cut).expect("cuts the last record");
            drop(file);
            let others: Vec<usize> = (0..3).filter(|&i| i != victim).collect();
            cluster.nodes[others[0]]
                .metadata
                .propose(app("while-crashed"))
                .await
                .expect("proposed");
            cluster.reopen(victim).await;
            let all = cluster.wait_converged(&[0, 1, 2]).await;
            assert_eq!(all.len(), 11);
            assert_eq!(all.last().map(|(_, c)| c.as_str()), Some("while-crashed"));
        })
    });
}

#[test]
fn without_a_quorum_a_change_fails_and_nothing_is_applied() {
    run("no_quorum", |seed| {
        Box::pin(async move {
            let mut rng = Rng(seed);
            let cluster = Cluster::start(3, no_tuning).await;
            cluster.nodes[0]
                .metadata
                .propose(app("first"))
                .await
                .expect("proposed");
            cluster.wait_converged(&[0, 1, 2]).await;

            let keep = rng.below(3) as usize;
            let cut: Vec<usize> = (0..3).filter(|&i| i != keep).collect();
            for &i in &cut {
                cluster.router.cut_off(cluster.nodes[i].host());
            }
            // Long enough for the cut-off nodes to lose their leader and run elections.
            tokio::time::sleep(ELECTIONS).await;

            let started = Instant::now();
            let err = cluster.nodes[keep]
                .metadata
                .propose(app("lost-a"))
                .await
                .expect_err("no quorum");
            assert!(
                started.elapsed() < PROPOSE_TIMEOUT,
                "took {:?}",
                started.elapsed()
            );
            let MetadataError::NoQuorum { reachable, members } = err else {
                panic!("expected NoQuorum, got {err}")
            };
            assert_eq!((reachable, members), (1, 3));
            assert!(err.to_string().contains("bring the missing nodes back"), "{err}");

            let started = Instant::now();
            let err = cluster.nodes[cut[0]]
                .metadata
                .propose(app("lost-b"))
                .await
                .expect_err("no quorum");
            assert!(
                started.elapsed() < PROPOSE_TIMEOUT,
                "took {:?}",
                started.elapsed()
            );
            assert!(
                matches!(
                    err,
                    MetadataError::NoQuorum {
                        reachable: 1,
                        members: 3
                    }
                ),
                "{err}"
            );

            for &i in &cut {
                cluster.router.heal(cluster.nodes[i].host());
            }
            propose_until_accepted(&cluster.nodes[keep].metadata, app("after")).await;
            propose_until_accepted(&cluster.nodes[cut[1]].metadata, app("after-2")).await;
            let all = cluster.wait_converged(&[0, 1, 2]).await;
            let commands: Vec<&str> = all.iter().map(|(_, c)| c.as_str()).collect();
            assert_eq!(commands, vec!["first", "after", "after-2"]);
        })
    });
}

#[test]
fn a_node_added_at_runtime_becomes_a_voter_and_applies_everything() {
    run("add_member", |_seed| {
        Box::pin(async {
            let mut cluster = Cluster::start(3, no_tuning).await;
            for k in 0..4 {
                cluster.nodes[k % 3]
                    .metadata
                    .propose(app(&format!("early-{k}")))
                    .await
                    .expect("proposed");
            }
            cluster.add_node(3).await;
            let newcomer = cluster.nodes[3].host();
            assert!(!cluster.nodes[3].metadata.is_member());
            assert!(matches!(
                cluster.nodes[3].metadata.propose(app("too-soon")).await,
                Err(MetadataError::NotMember)
            ));

            // Asked of a follower, which forwards it.
            let leader = cluster.wait_for_leader().await;
            let asker = (leader + 1) % 3;
            let mut joining = cluster.nodes[3].record.clone();
            joining.status = MemberStatus::Joining;
            let result = cluster.nodes[asker]
                .metadata
                .add_member(joining)
                .await
                .expect("added");
            assert_eq!(result, CommandResult::Done);
            let status = cluster.nodes[leader].metadata.status();
            assert!(status.voters.contains(&newcomer), "{status:?}");
            assert!(cluster.nodes[3].metadata.is_member());
            let all = cluster.wait_converged(&[0, 1, 2, 3]).await;
            assert_eq!(all.len(), 4);
            assert_eq!(cluster.nodes[3].metadata.status().role, RaftRole::Follower);

            // A token that is taken.
            let mut clash = record(4);
            clash.tokens.push(1000);
            let result = cluster.nodes[3]
                .metadata
                .add_member(clash)
                .await
                .expect("answered");
            let CommandResult::Refused(reason) = result else {
                panic!("a taken token is refused: {result:?}")
            };
            assert!(
                reason.contains("token 1000") && reason.contains("already owned"),
                "{reason}"
            );
            let status = cluster.nodes[leader].metadata.status();
            assert_eq!(status.voters.len() + status.learners.len(), 4, "{status:?}");

            // The newcomer's status changes, proposed on the newcomer.
            let set = Command::SetStatus {
                host: newcomer,
                status: MemberStatus::Normal,
            };
            assert_eq!(
                cluster.nodes[3].metadata.propose(set).await.expect("proposed"),
                CommandResult::Done
            );
            cluster.nodes[3]
                .metadata
                .propose(app("late"))
                .await
                .expect("proposed");
            cluster.wait_converged(&[0, 1, 2, 3]).await;
            for node in cluster.running() {
                let current: Arc<ClusterMetadata> = node.metadata.current();
                assert_eq!(current.members[&newcomer].status, MemberStatus::Normal);
                assert_eq!(current.token_owner(3001), Some(newcomer));
            }

            // And it leaves again.
            let result = cluster.nodes[0]
                .metadata
                .remove_member(newcomer)
                .await
                .expect("removed");
            assert_eq!(result, CommandResult::Done);
            let status = cluster.nodes[cluster.wait_for_leader().await].metadata.status();
            assert_eq!(status.voters.len(), 3, "{status:?}");
            assert!(!status.voters.contains(&newcomer) && !status.learners.contains(&newcomer));
            assert!(!cluster.nodes[0]
                .metadata
                .current()
                .members
                .contains_key(&newcomer));

            // Even the leader can be removed: it leads until the change is committed, then the
            // others elect one of their own.
            let leader = cluster.wait_for_leader().await;
            let gone = cluster.nodes[leader].host();
            let asker = (leader + 1) % 3;
            let result = cluster.nodes[asker]
                .metadata
                .remove_member(gone)
                .await
                .expect("removed");
            assert_eq!(result, CommandResult::Done);
            let rest: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
            let new_leader = wait_until("the others elect a leader", SETTLE, || {
                rest.iter()
                    .copied()
                    .find(|&i| cluster.nodes[i].metadata.status().role == RaftRole::Leader)
            })
            .await;
            let status = cluster.nodes[new_leader].metadata.status();
            assert_eq!(status.voters.len(), 2, "{status:?}");
            propose_until_accepted(&cluster.nodes[rest[0]].metadata, app("after-leader-left")).await;
            let all = cluster.wait_converged(&rest).await;
            assert_eq!(all.last().map(|(_, c)| c.as_str()), Some("after-leader-left"));
            assert_eq!(cluster.nodes[rest[1]].metadata.current().members.len(), 2);
        })
    });
}

fn snapshot_often(config: &mut MetadataConfig) {
    config.snapshot_every_entries = 10;
    config.log_kept_after_snapshot_entries = 0;
}

#[test]
fn a_node_cut_off_past_a_snapshot_catches_up_from_it() {
    run("snapshot", |seed| {
        Box::pin(async move {
            let mut rng = Rng(seed);
            let cluster = Cluster::start(3, snapshot_often).await;
            let leader = cluster.wait_for_leader().await;
            let lagging = (leader + 1 + rng.below(2) as usize) % 3;
            let proposer = 3 - leader - lagging;
            cluster.router.cut_off(cluster.nodes[lagging].host());

            for k in 0..35 {
                cluster.nodes[proposer]
                    .metadata
                    .propose(app(&format!("c{k}")))
                    .await
                    .expect("proposed");
            }
            let status = wait_until("the leader purges its log", SETTLE, || {
                let status = cluster.nodes[leader].metadata.status();
                status.purged_index.is_some_and(|p| p >= 30).then_some(status)
            })
            .await;
            assert!(status.snapshot_index >= status.purged_index, "{status:?}");
            assert_eq!(cluster.nodes[lagging].app.restores.load(Ordering::SeqCst), 0);
            assert!(cluster.nodes[leader].dir.join("snapshot").exists());
            // The cut-off node runs elections meanwhile, and disrupts the leader once back.
            tokio::time::sleep(ELECTIONS).await;

            cluster.router.heal(cluster.nodes[lagging].host());
            let all = cluster.wait_converged(&[0, 1, 2]).await;
            assert_eq!(all.len(), 35);
            assert!(
                cluster.nodes[lagging].app.restores.load(Ordering::SeqCst) >= 1,
                "the lagging node was sent a snapshot"
            );
            assert_eq!(cluster.nodes[lagging].metadata.current().members.len(), 3);
        })
    });
}

fn short_proposals(config: &mut MetadataConfig) {
    config.propose_timeout = Duration::from_secs(1);
}

#[test]
fn initialize_before_the_peers_are_up_fails_and_can_be_called_again() {
    run("initialize", |_seed| {
        Box::pin(async {
            let mut cluster = Cluster::open(1, short_proposals).await;
            let members: Vec<MemberRecord> = (0..3).map(record).collect();
            let started = Instant::now();
            let err = cluster.nodes[0]
                .metadata
                .initialize(members.clone())
                .await
                .expect_err("peers are down");
            assert!(matches!(err, MetadataError::NoLeader { .. }), "{err}");
            assert!(
                started.elapsed() < Duration::from_secs(3),
                "took {:?}",
                started.elapsed()
            );
            // Raft is initialized all the same: the node keeps trying to be elected.
            assert!(cluster.nodes[0].metadata.is_member());
            assert_ne!(cluster.nodes[0].metadata.status().role, RaftRole::Leader);

            cluster.add_node(1).await;
            cluster.add_node(2).await;
            cluster.nodes[0]
                .metadata
                .initialize(members.clone())
                .await
                .expect("initializes once peers are up");
            cluster.wait_converged(&[0, 1, 2]).await;
            assert_eq!(cluster.nodes[2].metadata.current().members.len(), 3);

            let other: Vec<MemberRecord> = vec![record(0), record(1)];
            let err = cluster.nodes[0]
                .metadata
                .initialize(other)
                .await
                .expect_err("already a cluster");
            assert!(
                matches!(err, MetadataError::AlreadyInitialized { ref voters } if voters.len() == 3),
                "{err}"
            );
        })
    });
}
