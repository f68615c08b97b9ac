//! `hayate local start|stop`: a cluster of several nodes on one machine, one per loopback
//! address, as `ccm` runs Cassandra clusters for their users.
//!
//! ```text
//! DIR/cluster.json        how many nodes, their addresses and cluster name, the settings
//!                         passed to each
//! DIR/nodeK/data/         node K's data directory
//! DIR/nodeK/node.log      its log
//! DIR/nodeK/hayate.pid    its process id while it runs
//! ```
//!
//! Node K listens on 127.0.0.K (PREFIX.K with `--address-prefix`) with every port at its
//! default (CQL 9042, internode 7000 TCP and UDP, metrics 9180), and all the nodes are each
//! other's seeds, so they form one ring with evenly spread tokens when started together. Each
//! cluster has a name of its own, made from DIR (`local-c3-1f2e3d4c`): its nodes refuse gossip,
//! connections and joins from any other cluster, so that two local clusters, or a local
//! cluster and a single node, never merge.
//!
//! `start` never reports a node up that is not: ports are checked free before anything starts
//! (a taken one is refused, naming the process that holds it), and a node is up only once the
//! node answering on its address says it is the process started (its pid) with the host id of
//! its data directory, and serves.

use std::collections::BTreeSet;
use std::fs;
use std::io::IsTerminal;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hayate_cluster::node::HostId;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ports::{Port, Proto};
use super::{say, LocalAction};

/// Nodes a local cluster may have (one loopback address each, 127.0.0.1 to 127.0.0.N).
pub const LOCAL_NODES_MAX: usize = 32;
/// How long `start` waits for every node to be up with one schema.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long `stop` waits for a node to exit after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);
const POLL_INTERVAL: Duration = Duration::from_millis(200);
const METRICS_PORT: u16 = 9180;
/// The ports every node binds on its address, all at their defaults.
const NODE_PORTS: [Port; 4] = [
    Port {
        number: 9042,
        proto: Proto::Tcp,
        purpose: "CQL",
    },
    Port {
        number: 7000,
        proto: Proto::Tcp,
        purpose: "internode",
    },
    Port {
        number: 7000,
        proto: Proto::Udp,
        purpose: "gossip",
    },
    Port {
        number: METRICS_PORT,
        proto: Proto::Tcp,
        purpose: "metrics",
    },
];
/// The nodes' addresses unless `--address-prefix` says otherwise.
const ADDRESS_PREFIX_DEFAULT: [u8; 3] = [127, 0, 0];
/// Lines of a node's log shown when it did not come up.
const LOG_TAIL_LINES: usize = 20;
/// A cluster name made from a directory keeps this much of the directory's name.
const CLUSTER_NAME_DIR_CHARS_MAX: usize = 40;

#[derive(Serialize, Deserialize)]
struct LocalCluster {
    nodes: usize,
    extra: Vec<String>,
    /// Nodes that left the ring (`local decommission`): never started again.
    #[serde(default)]
    decommissioned: Vec<usize>,
    /// Each node's data center, by node number - 1 (empty: the nodes' default).
    #[serde(default)]
    data_centers: Vec<String>,
    /// The first three bytes of the nodes' addresses: node K is on PREFIX.K.
    #[serde(default = "address_prefix_default")]
    address_prefix: [u8; 3],
    /// The nodes' `cluster_name`. `None` for a cluster made before local clusters had names
    /// of their own: its nodes keep the default, which their metadata already carries.
    #[serde(default)]
    cluster_name: Option<String>,
}

fn address_prefix_default() -> [u8; 3] {
    ADDRESS_PREFIX_DEFAULT
}

impl LocalCluster {
    fn address(&self, k: usize) -> IpAddr {
        let [a, b, c] = self.address_prefix;
        let k = u8::try_from(k).expect("node numbers are at most LOCAL_NODES_MAX");
        IpAddr::V4(Ipv4Addr::new(a, b, c, k))
    }

    fn metrics(&self, k: usize) -> SocketAddr {
        SocketAddr::new(self.address(k), METRICS_PORT)
    }

    /// The nodes that are members: every one but the decommissioned.
    fn members(&self) -> Vec<usize> {
        (1..=self.nodes)
            .filter(|k| !self.decommissioned.contains(k))
            .collect()
    }
}

/// `127.0.1.` (or `127.0.1`): the first three bytes of a loopback address.
fn parse_address_prefix(text: &str) -> Result<[u8; 3], String> {
    let bad = || {
        format!(
            "--address-prefix {text}: give the first three parts of a loopback address, such as 127.0.1. \
             (node K then listens on 127.0.1.K)"
        )
    };
    let parts: Vec<&str> = text.strip_suffix('.').unwrap_or(text).split('.').collect();
    let [a, b, c] = parts.as_slice() else {
        return Err(bad());
    };
    let bytes = [
        a.parse().map_err(|_| bad())?,
        b.parse().map_err(|_| bad())?,
        c.parse().map_err(|_| bad())?,
    ];
    if bytes[0] != 127 {
        return Err(bad());
    }
    Ok(bytes)
}

/// The cluster name of a new local cluster in `dir` (an absolute path): the directory's name,
/// for the reader, and a hash of its path, so that `/a/c3` and `/b/c3` differ too.
fn cluster_name_for(dir: &Path) -> String {
    // FNV-1a: stable across builds (the name is written once, in cluster.json, anyway).
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in dir.as_os_str().as_encoded_bytes() {
        hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    let base: String = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(CLUSTER_NAME_DIR_CHARS_MAX)
        .collect();
    format!("local-{base}-{:08x}", hash as u32)
}

fn node_dir(dir: &Path, k: usize) -> PathBuf {
    dir.join(format!("node{k}"))
}

pub fn run(action: &LocalAction) -> Result<(), String> {
    match action {
        LocalAction::Start {
            nodes,
            address_prefix,
            dir,
            node,
            replace,
            data_centers,
            extra,
        } => start(
            dir,
            &Shape {
                nodes: *nodes,
                address_prefix: address_prefix.as_deref(),
                data_centers: *data_centers,
                extra,
            },
            *node,
            *replace,
        ),
        LocalAction::Add { dir, data_center } => add(dir, data_center.as_deref()),
        LocalAction::Decommission { dir, node } => decommission(dir, *node),
        LocalAction::Stop { dir, node } => stop(dir, *node),
    }
}

fn load(dir: &Path) -> Result<LocalCluster, String> {
    let file = dir.join("cluster.json");
    serde_json::from_slice(
        &fs::read(&file).map_err(|e| format!("{} is not a local cluster: {e}", dir.display()))?,
    )
    .map_err(|e| format!("{} does not read: {e}", file.display()))
}

fn save(dir: &Path, cluster: &LocalCluster) -> Result<(), String> {
    let file = dir.join("cluster.json");
    fs::write(&file, serde_json::to_vec_pretty(cluster).expect("serializes"))
        .map_err(|e| format!("cannot write {}: {e}", file.display()))
}

/// What `start` was asked for the cluster's first start.
struct Shape<'a> {
    nodes: Option<usize>,
    address_prefix: Option<&'a str>,
    data_centers: Option<usize>,
    extra: &'a [String],
}

/// The cluster in `dir`, checked against `shape`, or a new one made from it (not yet saved:
/// `true` with it).
fn open_or_new(dir: &Path, shape: &Shape<'_>) -> Result<(LocalCluster, bool), String> {
    let file = dir.join("cluster.json");
    if let Ok(bytes) = fs::read(&file) {
        let c: LocalCluster =
            serde_json::from_slice(&bytes).map_err(|e| format!("{} does not read: {e}", file.display()))?;
        if shape.nodes.is_some_and(|n| n != c.nodes) {
            return Err(format!(
                "{} holds a cluster of {} nodes; leave out --nodes, or use another --dir",
                dir.display(),
                c.nodes
            ));
        }
        if shape.data_centers.is_some() {
            return Err(format!(
                "{} holds a cluster already; --data-centers is for its first start",
                dir.display()
            ));
        }
        if let Some(prefix) = shape.address_prefix {
            if parse_address_prefix(prefix)? != c.address_prefix {
                let [a, b, p] = c.address_prefix;
                return Err(format!(
                    "{} holds a cluster on {a}.{b}.{p}.*; leave out --address-prefix, or use another --dir",
                    dir.display()
                ));
            }
        }
        if !shape.extra.is_empty() && shape.extra != c.extra.as_slice() {
            return Err(format!(
                "{} was started with the node settings {:?}; give the same, or none",
                dir.display(),
                c.extra
            ));
        }
        return Ok((c, false));
    }
    let n = shape.nodes.ok_or("give --nodes N for a new cluster")?;
    if !(1..=LOCAL_NODES_MAX).contains(&n) {
        return Err(format!("--nodes must be from 1 to {LOCAL_NODES_MAX}"));
    }
    let data_centers = match shape.data_centers {
        None => Vec::new(),
        Some(d) if (1..=n).contains(&d) => (0..n).map(|i| format!("dc{}", i * d / n + 1)).collect(),
        Some(_) => {
            return Err(format!(
                "--data-centers must be from 1 to the number of nodes ({n})"
            ))
        }
    };
    let address_prefix = shape
        .address_prefix
        .map(parse_address_prefix)
        .transpose()?
        .unwrap_or(ADDRESS_PREFIX_DEFAULT);
    let absolute = std::path::absolute(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok((
        LocalCluster {
            nodes: n,
            extra: shape.extra.to_vec(),
            decommissioned: Vec::new(),
            data_centers,
            address_prefix,
            cluster_name: Some(cluster_name_for(&absolute)),
        },
        true,
    ))
}

fn start(dir: &Path, shape: &Shape<'_>, only: Option<usize>, replace: bool) -> Result<(), String> {
    let (cluster, new) = open_or_new(dir, shape)?;
    let which: Vec<usize> = match only {
        Some(k) if cluster.decommissioned.contains(&k) => {
            return Err(format!(
                "node{k} was decommissioned: it is no longer part of the cluster"
            ))
        }
        Some(k) if (1..=cluster.nodes).contains(&k) => vec![k],
        Some(k) => {
            return Err(format!(
                "--node {k}: the cluster has nodes 1 to {}",
                cluster.nodes
            ))
        }
        None => cluster.members(),
    };
    if replace {
        if let Some(pid) = running_pid(dir, which[0]) {
            return Err(format!(
                "node{} is running (pid {pid}): only a dead node can be replaced; stop it first",
                which[0]
            ));
        }
    }
    // Before anything starts, or is deleted, or saved: a cluster refused here can be started
    // again at once with other addresses.
    refuse_taken_ports(dir, &cluster, &which, new)?;
    if new {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        save(dir, &cluster)?;
    }
    if replace {
        let k = which[0];
        let data = node_dir(dir, k).join("data");
        fs::remove_dir_all(&data)
            .or_else(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    Ok(())
                } else {
                    Err(e)
                }
            })
            .map_err(|e| format!("cannot delete {}: {e}", data.display()))?;
        say!(
            "node{k}: its data is deleted; a fresh node replaces it on {}\n",
            cluster.address(k)
        );
    }
    let replace_address = replace.then(|| cluster.address(which[0]));
    let started = spawn_nodes(dir, &cluster, &which, replace_address)?;
    bring_up(dir, &cluster, &started, which[0])
}

/// Refuses to start nodes `which` (those not running) if any port of theirs is taken, naming
/// each taken port and the process that holds it.
fn refuse_taken_ports(dir: &Path, cluster: &LocalCluster, which: &[usize], new: bool) -> Result<(), String> {
    let mut taken = Vec::new();
    for &k in which {
        if running_pid(dir, k).is_some() {
            continue;
        }
        for why in super::ports::taken(cluster.address(k), &NODE_PORTS) {
            taken.push(format!("node{k}: {why}"));
        }
    }
    if taken.is_empty() {
        return Ok(());
    }
    let advice = if new {
        "stop what holds them, or run this cluster on other addresses (--address-prefix 127.0.1.)"
    } else {
        "stop what holds them, then start again"
    };
    Err(format!(
        "not starting: ports of this cluster's nodes are taken, and a node started there would die or \
         answer for another\n  {}\n{advice}",
        taken.join("\n  ")
    ))
}

/// Adds node N+1 (in `data_center`, or that of the last node) and waits until it is normal.
fn add(dir: &Path, data_center: Option<&str>) -> Result<(), String> {
    let mut cluster = load(dir)?;
    if cluster.nodes >= LOCAL_NODES_MAX {
        return Err(format!("a local cluster has at most {LOCAL_NODES_MAX} nodes"));
    }
    let k = cluster.nodes + 1;
    match (data_center, cluster.data_centers.last().cloned()) {
        (Some(dc), _) => {
            // Nodes before had the default data center: write it down for them.
            while cluster.data_centers.len() < cluster.nodes {
                cluster.data_centers.push("datacenter1".to_owned());
            }
            cluster.data_centers.push(dc.to_owned());
        }
        (None, Some(last)) => cluster.data_centers.push(last),
        (None, None) => {}
    }
    cluster.nodes = k;
    refuse_taken_ports(dir, &cluster, &[k], false)?;
    save(dir, &cluster)?;
    let started = spawn_nodes(dir, &cluster, &[k], None)?;
    bring_up(dir, &cluster, &started, k)
}

/// Decommissions node K and waits until it has left and stopped.
fn decommission(dir: &Path, k: usize) -> Result<(), String> {
    let mut cluster = load(dir)?;
    if !cluster.members().contains(&k) {
        return Err(format!(
            "node{k} is not a member of the local cluster in {}",
            dir.display()
        ));
    }
    if running_pid(dir, k).is_none() {
        return Err(format!(
            "node{k} is not running: start it first, or remove it (hayate removenode)"
        ));
    }
    super::ops::decommission(cluster.metrics(k))?;
    let deadline = Instant::now() + STOP_TIMEOUT;
    while running_pid(dir, k).is_some() && Instant::now() < deadline {
        std::thread::sleep(POLL_INTERVAL);
    }
    cluster.decommissioned.push(k);
    save(dir, &cluster)?;
    let _ = fs::remove_file(node_dir(dir, k).join("hayate.pid"));
    Ok(())
}

/// A node this command started: its number and process id.
#[derive(Clone, Copy)]
struct Started {
    k: usize,
    pid: i32,
}

/// Starts nodes `which` of `cluster` (those not running), the members as their seeds.
fn spawn_nodes(
    dir: &Path,
    cluster: &LocalCluster,
    which: &[usize],
    replace_address: Option<IpAddr>,
) -> Result<Vec<Started>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the hayate binary: {e}"))?;
    let seeds: Vec<String> = cluster
        .members()
        .iter()
        .map(|&k| cluster.address(k).to_string())
        .collect();
    let mut started = Vec::new();
    for &k in which {
        if let Some(pid) = running_pid(dir, k) {
            say!(
                "node{k} ({}) is already running (pid {pid})\n",
                cluster.address(k)
            );
            continue;
        }
        let nd = node_dir(dir, k);
        fs::create_dir_all(nd.join("data")).map_err(|e| format!("cannot create {}: {e}", nd.display()))?;
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(nd.join("node.log"))
            .map_err(|e| format!("cannot open {}/node.log: {e}", nd.display()))?;
        let log_err = log.try_clone().map_err(|e| e.to_string())?;
        let mut command = Command::new(&exe);
        command
            .arg("--data-dir")
            .arg(nd.join("data"))
            .arg("--listen-address")
            .arg(cluster.address(k).to_string())
            .arg("--seeds")
            .arg(seeds.join(","))
            .args(
                cluster
                    .cluster_name
                    .as_ref()
                    .map(|name| vec!["--cluster-name".to_owned(), name.clone()])
                    .unwrap_or_default(),
            )
            .args(
                replace_address
                    .map(|ip| vec!["--replace-address".to_owned(), ip.to_string()])
                    .unwrap_or_default(),
            )
            .args(
                cluster
                    .data_centers
                    .get(k - 1)
                    .map(|dc| vec!["--data-center".to_owned(), dc.clone()])
                    .unwrap_or_default(),
            )
            .args(&cluster.extra)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        // Its own process group: a Ctrl-C meant for this command does not reach the nodes.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start node{k}: {e}"))?;
        let pid = i32::try_from(child.id()).expect("a pid fits an i32");
        fs::write(nd.join("hayate.pid"), pid.to_string())
            .map_err(|e| format!("cannot write node{k}'s pid file: {e}"))?;
        say!(
            "node{k}: started on {} (pid {pid}), log in {}\n",
            cluster.address(k),
            nd.join("node.log").display()
        );
        started.push(Started { k, pid });
    }
    Ok(started)
}

/// Waits until every node `started` is up and the nodes that are up agree, then prints the
/// status (as node `shown` sees it) and the members that are down. Any node started that is
/// not up is an error, with the end of its own log.
fn bring_up(dir: &Path, cluster: &LocalCluster, started: &[Started], shown: usize) -> Result<(), String> {
    let mut deadline = Instant::now() + START_TIMEOUT;
    let mut progress = Progress::default();
    let failed: Vec<String> = started
        .iter()
        .filter_map(|s| wait_up(dir, cluster, *s, &mut deadline, &mut progress).err())
        .collect();
    if !failed.is_empty() {
        return Err(failed.join("\n\n"));
    }
    let members = cluster.members();
    let up: Vec<usize> = members
        .iter()
        .copied()
        .filter(|&k| running_pid(dir, k).is_some())
        .collect();
    loop {
        let why = match agreement(dir, cluster, &up) {
            Ok(()) => break,
            Err(Disagreement::Wrong(why)) => return Err(why),
            Err(Disagreement::Wait(why)) => why,
        };
        if Instant::now() > deadline {
            return Err(format!("the nodes that are up did not agree in time: {why}"));
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    let shown = if up.contains(&shown) {
        Some(shown)
    } else {
        up.first().copied()
    };
    let shown = shown.ok_or("no node of the cluster is running")?;
    let doc = super::status::fetch_fresh(cluster.metrics(shown))?;
    say!("{}", super::status::render(&doc));
    // A node stopped on purpose (`local stop`, decommission) has no pid file: it is reported and
    // not waited for, as in a rolling restart. One whose pid file outlived its process died
    // on its own: that is not up, and the exit code says so.
    let mut crashed = Vec::new();
    for &k in members.iter().filter(|k| !up.contains(k)) {
        match recorded_pid(dir, k) {
            None => say!(
                "node{k} ({}) is down (stopped): not waited for; start it with \
                 `hayate local start --dir {} --node {k}`\n",
                cluster.address(k),
                dir.display()
            ),
            Some(pid) => crashed.push(format!(
                "node{k} ({}) is down: its process (pid {pid}) exited without `hayate local stop`; the \
                 end of its log:\n{}",
                cluster.address(k),
                log_tail(dir, k)
            )),
        }
    }
    if crashed.is_empty() {
        Ok(())
    } else {
        Err(crashed.join("\n\n"))
    }
}

/// What a starting node shows while it streams (a join or a replacement can take minutes).
#[derive(Default)]
struct Progress {
    screen: super::netstats::Screen,
    last_plain: Option<Instant>,
}

impl Progress {
    /// Shows node K's streams if it has any; true if it is streaming.
    fn show(&mut self, addr: SocketAddr) -> bool {
        let Ok(doc) = super::netstats::fetch(addr) else {
            return false;
        };
        if !super::netstats::is_busy(&doc) {
            return false;
        }
        if std::io::stdout().is_terminal() {
            self.screen.draw(&super::netstats::render(&doc, true));
        } else if self
            .last_plain
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(10))
        {
            say!("{}", super::netstats::render(&doc, false));
            self.last_plain = Some(Instant::now());
        }
        true
    }
}

/// Waits until node `s.k` is up: the node answering on its metrics address is process `s.pid`
/// with the host id of node K's data directory, and it serves (a node joining or replacing
/// another streams its data first: the deadline moves while it does).
fn wait_up(
    dir: &Path,
    cluster: &LocalCluster,
    s: Started,
    deadline: &mut Instant,
    progress: &mut Progress,
) -> Result<(), String> {
    let Started { k, pid } = s;
    let addr = cluster.metrics(k);
    loop {
        if !alive(pid) {
            return Err(format!(
                "node{k} (pid {pid}) exited before it was up; the end of its log:\n{}",
                log_tail(dir, k)
            ));
        }
        if let Ok(doc) = super::status::fetch(addr) {
            match identity(dir, k, pid, &doc) {
                Ok(()) if doc["serving"] == true => return Ok(()),
                Ok(()) => {}
                Err(why) => return Err(format!("{why}; the end of node{k}'s log:\n{}", log_tail(dir, k))),
            }
        }
        if progress.show(addr) {
            *deadline = Instant::now() + START_TIMEOUT;
        }
        if Instant::now() > *deadline {
            return Err(format!(
                "node{k} (pid {pid}) did not come up in {START_TIMEOUT:?}; the end of its log:\n{}",
                log_tail(dir, k)
            ));
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Whether the status document `doc`, from node K's address, is node K's own: process `pid`,
/// with the host id its data directory holds.
fn identity(dir: &Path, k: usize, pid: i32, doc: &Value) -> Result<(), String> {
    let answered = doc["pid"].as_i64();
    if answered != Some(i64::from(pid)) {
        let who = answered.map_or("a process that does not say its pid".to_owned(), |p| {
            format!("pid {p}")
        });
        return Err(format!(
            "node{k}'s address is answered by {who}, not by node{k} (pid {pid}): another process holds \
             its metrics port"
        ));
    }
    if let Some(host) = host_id(dir, k) {
        if doc["local"].as_str() != Some(host.as_str()) {
            return Err(format!(
                "node{k} (pid {pid}) reports host id {}, but its data directory holds {host}",
                doc["local"]
            ));
        }
    }
    Ok(())
}

/// Node K's host id, from the `node.json` its data directory holds once it has started.
fn host_id(dir: &Path, k: usize) -> Option<String> {
    #[derive(Deserialize)]
    struct NodeFile {
        host_id: [u8; 16],
    }
    let bytes = fs::read(node_dir(dir, k).join("data").join("node.json")).ok()?;
    let file: NodeFile = serde_json::from_slice(&bytes).ok()?;
    Some(HostId(file.host_id).to_string())
}

enum Disagreement {
    /// Not yet: worth waiting for.
    Wait(String),
    /// Waiting will not mend it.
    Wrong(String),
}

/// The nodes `up` are each the process of its pid file, of this cluster, see each other up and
/// normal with one schema version, and have no node in their ring that is not of this cluster.
fn agreement(dir: &Path, cluster: &LocalCluster, up: &[usize]) -> Result<(), Disagreement> {
    let ours: BTreeSet<String> = (1..=cluster.nodes)
        .map(|k| cluster.address(k).to_string())
        .collect();
    let mut versions = BTreeSet::new();
    for &k in up {
        let pid = running_pid(dir, k).ok_or_else(|| {
            Disagreement::Wrong(format!(
                "node{k} exited while the nodes were agreeing; the end of its log:\n{}",
                log_tail(dir, k)
            ))
        })?;
        let doc = super::status::fetch(cluster.metrics(k)).map_err(Disagreement::Wait)?;
        identity(dir, k, pid, &doc).map_err(Disagreement::Wrong)?;
        if let Some(name) = &cluster.cluster_name {
            if doc["cluster_name"].as_str() != Some(name) {
                return Err(Disagreement::Wrong(format!(
                    "node{k} is of cluster {}, not {name}",
                    doc["cluster_name"]
                )));
            }
        }
        let list = doc["nodes"].as_array().cloned().unwrap_or_default();
        for n in &list {
            let address = n["address"].as_str().unwrap_or_default();
            if !ours.contains(address) {
                return Err(Disagreement::Wrong(format!(
                    "node{k} has {address} in its ring, which is no node of this local cluster"
                )));
            }
        }
        for &j in up {
            let address = cluster.address(j).to_string();
            let Some(n) = list.iter().find(|n| n["address"] == address.as_str()) else {
                return Err(Disagreement::Wait(format!(
                    "node{k} does not know node{j} ({address}) yet"
                )));
            };
            if n["state"] != "up" {
                return Err(Disagreement::Wait(format!(
                    "node{k} sees node{j} ({address}) down"
                )));
            }
            if n["status"] != "normal" {
                return Err(Disagreement::Wait(format!(
                    "node{k} sees node{j} ({address}) {}",
                    n["status"]
                )));
            }
            versions.insert(n["schema_version"].to_string());
        }
    }
    if versions.len() > 1 {
        return Err(Disagreement::Wait(format!(
            "schema versions differ: {versions:?}"
        )));
    }
    Ok(())
}

fn stop(dir: &Path, only: Option<usize>) -> Result<(), String> {
    let cluster = load(dir)?;
    let which: Vec<usize> = match only {
        Some(k) => vec![k],
        None => (1..=cluster.nodes).collect(),
    };
    let mut failed = Vec::new();
    for k in which {
        let Some(pid) = running_pid(dir, k) else {
            say!("node{k} is not running\n");
            continue;
        };
        // SAFETY: kill(2) with a pid we started; no memory is touched.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + STOP_TIMEOUT;
        while alive(pid) && Instant::now() < deadline {
            std::thread::sleep(POLL_INTERVAL);
        }
        if alive(pid) {
            failed.push(format!(
                "node{k} (pid {pid}) did not exit within {STOP_TIMEOUT:?} of SIGTERM"
            ));
            continue;
        }
        let _ = fs::remove_file(node_dir(dir, k).join("hayate.pid"));
        say!("node{k}: stopped\n");
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("; "))
    }
}

/// The pid of node K if its pid file names a live process.
fn running_pid(dir: &Path, k: usize) -> Option<i32> {
    recorded_pid(dir, k).filter(|&pid| alive(pid))
}

/// The pid in node K's pid file, alive or not (`stop` removes the file).
fn recorded_pid(dir: &Path, k: usize) -> Option<i32> {
    fs::read_to_string(node_dir(dir, k).join("hayate.pid"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn alive(pid: i32) -> bool {
    // A zombie (exited, not yet reaped: our own child) counts as gone.
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
    matches!(state, Some(s) if s != 'Z' && s != 'X')
}

fn log_tail(dir: &Path, k: usize) -> String {
    let text = fs::read_to_string(node_dir(dir, k).join("node.log")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_up_only_as_the_process_started_with_its_own_host_id() {
        // Regression: `hayate local start` reported three healthy nodes when every one had died
        // on `Address already in use`: whatever answered on 127.0.0.K passed for node K.
        let dir = tempfile::tempdir().expect("a temporary directory");
        let data = node_dir(dir.path(), 2).join("data");
        fs::create_dir_all(&data).expect("created");
        fs::write(
            data.join("node.json"),
            r#"{"host_id": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1], "generation": 3}"#,
        )
        .expect("written");
        let ours = HostId([1; 16]).to_string();
        let doc = |pid: i64, local: &str| serde_json::json!({"pid": pid, "local": local});
        assert_eq!(identity(dir.path(), 2, 4242, &doc(4242, &ours)), Ok(()));
        let impostor = identity(dir.path(), 2, 4242, &doc(777, &ours)).expect_err("another process");
        assert!(
            impostor.contains("pid 777") && impostor.contains("node2 (pid 4242)"),
            "{impostor}"
        );
        let other = HostId([2; 16]).to_string();
        let stranger = identity(dir.path(), 2, 4242, &doc(4242, &other)).expect_err("another data dir");
        assert!(
            stranger.contains(&other) && stranger.contains(&ours),
            "{stranger}"
        );
        let silent = identity(dir.path(), 2, 4242, &serde_json::json!({"local": ours})).expect_err("no pid");
        assert!(silent.contains("does not say its pid"), "{silent}");
    }

    #[test]
    fn address_prefixes_are_loopback_and_three_parts() {
        assert_eq!(parse_address_prefix("127.0.1."), Ok([127, 0, 1]));
        assert_eq!(parse_address_prefix("127.5.6"), Ok([127, 5, 6]));
        for bad in ["10.0.0.", "127.0.", "127.0.0.1.", "127.0.256.", "x"] {
            assert!(parse_address_prefix(bad).is_err(), "{bad}");
        }
        let cluster = LocalCluster {
            nodes: 3,
            extra: Vec::new(),
            decommissioned: Vec::new(),
            data_centers: Vec::new(),
            address_prefix: [127, 0, 1],
            cluster_name: None,
        };
        assert_eq!(cluster.address(3).to_string(), "127.0.1.3");
    }

    #[test]
    fn each_directory_names_its_own_cluster() {
        let a = cluster_name_for(Path::new("/tmp/a/c3"));
        let b = cluster_name_for(Path::new("/tmp/b/c3"));
        assert!(
            a.starts_with("local-c3-") && b.starts_with("local-c3-"),
            "{a} {b}"
        );
        assert_ne!(a, b);
        assert_eq!(a, cluster_name_for(Path::new("/tmp/a/c3")));
        assert_eq!(
            cluster_name_for(Path::new("/tmp/my cluster!")).split('-').nth(1),
            Some("my_cluster_")
        );
    }

    #[test]
    fn a_cluster_file_from_before_names_and_prefixes_reads_with_the_old_defaults() {
        let old: LocalCluster =
            serde_json::from_str(r#"{"nodes": 3, "extra": []}"#).expect("an old cluster.json reads");
        assert_eq!(old.address_prefix, [127, 0, 0]);
        assert_eq!(old.cluster_name, None);
    }
}
