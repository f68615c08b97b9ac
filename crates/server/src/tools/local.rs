//! `hayate local start|stop`: a cluster of several nodes on one machine, one per loopback
//! address, as `ccm` runs Cassandra clusters for their users.
//!
//! ```text
//! DIR/cluster.json        how many nodes, and the settings passed to each
//! DIR/nodeK/data/         node K's data directory
//! DIR/nodeK/node.log      its log
//! DIR/nodeK/hayate.pid    its process id while it runs
//! ```
//!
//! Node K listens on 127.0.0.K with every port at its default (CQL 9042, internode 7000,
//! metrics 9180), and all the nodes are each other's seeds, so they form one ring with evenly
//! spread tokens when started together.

use std::fs;
use std::io::IsTerminal;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::LocalAction;

/// Nodes a local cluster may have (one loopback address each, 127.0.0.1 to 127.0.0.N).
pub const LOCAL_NODES_MAX: usize = 32;
/// How long `start` waits for every node to be up with one schema.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long `stop` waits for a node to exit after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);
const POLL_INTERVAL: Duration = Duration::from_millis(200);
const CQL_PORT: u16 = 9042;
const METRICS_PORT: u16 = 9180;

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
}

impl LocalCluster {
    /// The nodes that are members: every one but the decommissioned.
    fn members(&self) -> Vec<usize> {
        (1..=self.nodes)
            .filter(|k| !self.decommissioned.contains(k))
            .collect()
    }
}

fn address(k: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, k as u8))
}

fn node_dir(dir: &Path, k: usize) -> PathBuf {
    dir.join(format!("node{k}"))
}

pub fn run(action: &LocalAction) -> Result<(), String> {
    match action {
        LocalAction::Start {
            nodes,
            dir,
            node,
            replace,
            data_centers,
            extra,
        } => start(dir, *nodes, *node, *replace, *data_centers, extra),
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

fn start(
    dir: &Path,
    nodes: Option<usize>,
    only: Option<usize>,
    replace: bool,
    data_centers: Option<usize>,
    extra: &[String],
) -> Result<(), String> {
    let file = dir.join("cluster.json");
    let cluster = match fs::read(&file) {
        Ok(bytes) => {
            let c: LocalCluster = serde_json::from_slice(&bytes)
                .map_err(|e| format!("{} does not read: {e}", file.display()))?;
            if nodes.is_some_and(|n| n != c.nodes) {
                return Err(format!(
                    "{} holds a cluster of {} nodes; leave out --nodes, or use another --dir",
                    dir.display(),
                    c.nodes
                ));
            }
            if data_centers.is_some() {
                return Err(format!(
                    "{} holds a cluster already; --data-centers is for its first start",
                    dir.display()
                ));
            }
            if !extra.is_empty() && extra != c.extra.as_slice() {
                return Err(format!(
                    "{} was started with the node settings {:?}; give the same, or none",
                    dir.display(),
                    c.extra
                ));
            }
            c
        }
        Err(_) => {
            let n = nodes.ok_or("give --nodes N for a new cluster")?;
            if !(1..=LOCAL_NODES_MAX).contains(&n) {
                return Err(format!("--nodes must be from 1 to {LOCAL_NODES_MAX}"));
            }
            fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            let data_centers = match data_centers {
                None => Vec::new(),
                Some(d) if (1..=n).contains(&d) => (0..n).map(|i| format!("dc{}", i * d / n + 1)).collect(),
                Some(_) => {
                    return Err(format!(
                        "--data-centers must be from 1 to the number of nodes ({n})"
                    ))
                }
            };
            let c = LocalCluster {
                nodes: n,
                extra: extra.to_vec(),
                decommissioned: Vec::new(),
                data_centers,
            };
            save(dir, &c)?;
            c
        }
    };
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
        let k = which[0];
        if let Some(pid) = running_pid(dir, k) {
            return Err(format!(
                "node{k} is running (pid {pid}): only a dead node can be replaced; stop it first"
            ));
        }
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
        println!(
            "node{k}: its data is deleted; a fresh node replaces it on {}",
            address(k)
        );
    }
    let replace_address = replace.then(|| address(which[0]));
    spawn_nodes(dir, &cluster, &which, replace_address)?;
    wait_ready(dir, &which, &cluster)?;
    let doc = super::status::fetch(SocketAddr::new(address(which[0]), METRICS_PORT))?;
    print!("{}", super::status::render(&doc));
    Ok(())
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
    save(dir, &cluster)?;
    spawn_nodes(dir, &cluster, &[k], None)?;
    wait_ready(dir, &[k], &cluster)?;
    let doc = super::status::fetch(SocketAddr::new(address(k), METRICS_PORT))?;
    print!("{}", super::status::render(&doc));
    Ok(())
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
    super::ops::decommission(SocketAddr::new(address(k), METRICS_PORT))?;
    let deadline = Instant::now() + STOP_TIMEOUT;
    while running_pid(dir, k).is_some() && Instant::now() < deadline {
        std::thread::sleep(POLL_INTERVAL);
    }
    cluster.decommissioned.push(k);
    save(dir, &cluster)?;
    let _ = fs::remove_file(node_dir(dir, k).join("hayate.pid"));
    Ok(())
}

/// Starts nodes `which` of `cluster` (those not running), the members as their seeds.
fn spawn_nodes(
    dir: &Path,
    cluster: &LocalCluster,
    which: &[usize],
    replace_address: Option<IpAddr>,
) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the hayate binary: {e}"))?;
    let seeds: Vec<String> = cluster
        .members()
        .iter()
        .map(|&k| address(k).to_string())
        .collect();
    for &k in which {
        if let Some(pid) = running_pid(dir, k) {
            println!("node{k} ({}) is already running (pid {pid})", address(k));
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
            .arg(address(k).to_string())
            .arg("--seeds")
            .arg(seeds.join(","))
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
        fs::write(nd.join("hayate.pid"), child.id().to_string())
            .map_err(|e| format!("cannot write node{k}'s pid file: {e}"))?;
        println!(
            "node{k}: started on {} (pid {}), log in {}",
            address(k),
            child.id(),
            nd.join("node.log").display()
        );
    }
    Ok(())
}

/// Waits until the nodes started answer CQL (a node joining or replacing another streams its
/// data first: its streams are shown meanwhile, and it may take as long as they do) and every
/// member reports all members up with one schema version.
fn wait_ready(dir: &Path, started: &[usize], cluster: &LocalCluster) -> Result<(), String> {
    let mut deadline = Instant::now() + START_TIMEOUT;
    let terminal = std::io::stdout().is_terminal();
    let mut screen = super::netstats::Screen::default();
    let mut last_plain = None::<Instant>;
    for &k in started {
        let addr = SocketAddr::new(address(k), CQL_PORT);
        loop {
            if TcpStream::connect_timeout(&addr, POLL_INTERVAL).is_ok() {
                break;
            }
            // A node that streams is making progress: the deadline moves with it.
            if let Ok(doc) = super::netstats::fetch(SocketAddr::new(address(k), METRICS_PORT)) {
                if super::netstats::is_busy(&doc) {
                    deadline = Instant::now() + START_TIMEOUT;
                    if terminal {
                        screen.draw(&super::netstats::render(&doc, true));
                    } else if last_plain.is_none_or(|t: Instant| t.elapsed() >= Duration::from_secs(10)) {
                        print!("{}", super::netstats::render(&doc, false));
                        last_plain = Some(Instant::now());
                    }
                }
            }
            if running_pid(dir, k).is_none() {
                return Err(format!(
                    "node{k} exited before it opened CQL on {addr}:\n{}",
                    log_tail(dir, k)
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "node{k} did not open CQL on {addr} in time:\n{}",
                    log_tail(dir, k)
                ));
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }
    let mut last = String::new();
    let members = cluster.members();
    while Instant::now() < deadline {
        match agreement(&members) {
            Ok(()) => return Ok(()),
            Err(why) => last = why,
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    Err(format!("the nodes did not agree in time: {last}"))
}

/// Every member sees every member up and normal, and all report one schema version.
fn agreement(members: &[usize]) -> Result<(), String> {
    let mut versions = std::collections::BTreeSet::new();
    let nodes = members.len();
    for &k in members {
        let doc = super::status::fetch(SocketAddr::new(address(k), METRICS_PORT))?;
        let list = doc["nodes"].as_array().cloned().unwrap_or_default();
        if list.len() != nodes {
            return Err(format!("node{k} knows {} of the {nodes} nodes", list.len()));
        }
        for n in &list {
            if n["state"] != "up" {
                return Err(format!("node{k} sees {} down", n["address"]));
            }
            if n["status"] != "normal" {
                return Err(format!("node{k} sees {} {}", n["address"], n["status"]));
            }
            versions.insert(n["schema_version"].to_string());
        }
    }
    if versions.len() > 1 {
        return Err(format!("schema versions differ: {versions:?}"));
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
            println!("node{k} is not running");
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
        println!("node{k}: stopped");
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("; "))
    }
}

/// The pid of node K if its pid file names a live process.
fn running_pid(dir: &Path, k: usize) -> Option<i32> {
    let pid: i32 = fs::read_to_string(node_dir(dir, k).join("hayate.pid"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    alive(pid).then_some(pid)
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
    lines[lines.len().saturating_sub(20)..].join("\n")
}
