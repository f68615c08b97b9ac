//! `hayate snapshot`, `listsnapshots`, `clearsnapshot` and `restore --snapshot`: Cassandra's
//! `nodetool snapshot`, `listsnapshots` and `clearsnapshot`, and a restore that puts a
//! snapshot's rows back into the cluster (`sstableloader`'s job). Each asks a node's HTTP
//! endpoint (`snapshots/endpoint.rs`); `--all-nodes` asks every node the first one lists as up.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::say;
use super::{http, status};
use crate::snapshots::endpoint::percent_encode;

/// A backup location that names an S3-compatible bucket rather than a directory.
const S3_SCHEME: &str = "s3://";

const TIMEOUT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(500);

/// The node at `addr`, or every node it sees up (on the same port) with `all_nodes`.
fn nodes(addr: SocketAddr, all_nodes: bool) -> Result<Vec<SocketAddr>, String> {
    if !all_nodes {
        return Ok(vec![addr]);
    }
    let doc = status::fetch(addr)?;
    let mut out = Vec::new();
    for n in doc["nodes"].as_array().into_iter().flatten() {
        let ip = n["address"].as_str().and_then(|a| a.parse::<IpAddr>().ok());
        match (ip, n["state"].as_str()) {
            (Some(ip), Some("up")) => out.push(SocketAddr::new(ip, addr.port())),
            _ => {
                return Err(format!(
                    "node {} is not up: every node must be for --all-nodes",
                    n["address"]
                ))
            }
        }
    }
    Ok(out)
}

fn post(addr: SocketAddr, path: &str) -> Result<Value, String> {
    match http::request(addr, "POST", path, TIMEOUT)? {
        (200, body) => serde_json::from_str(&body).map_err(|e| format!("{addr} answered {body:?}: {e}")),
        (_, body) => Err(format!("{addr}: {}", body.trim())),
    }
}

/// Asks `node`'s `path` how a background operation (`what`) goes, showing each answer to
/// `each`, until it says done (that answer) or failed (its error).
fn wait_done(
    node: SocketAddr,
    path: &str,
    what: &str,
    mut each: impl FnMut(&Value),
) -> Result<Value, String> {
    loop {
        std::thread::sleep(POLL);
        let doc = http::get_json(node, path, TIMEOUT)?;
        each(&doc);
        match doc["state"].as_str() {
            Some("done") => return Ok(doc),
            Some("failed") => {
                let why = doc["error"]
                    .as_str()
                    .map_or_else(|| format!("the {what} failed"), str::to_owned);
                return Err(format!("{}: {why}", node.ip()));
            }
            _ => {}
        }
    }
}

fn query(pairs: &[(&str, Option<String>)]) -> String {
    let q: Vec<String> = pairs
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={}", percent_encode(v))))
        .collect();
    q.join("&")
}

fn mib(bytes: &Value) -> String {
    format!("{:.1} MiB", bytes.as_f64().unwrap_or(0.0) / f64::from(1 << 20))
}

pub fn snapshot(
    addr: SocketAddr,
    keyspace: Option<&str>,
    tables: &[String],
    tag: Option<&str>,
    all_nodes: bool,
) -> Result<(), String> {
    let targets = nodes(addr, all_nodes)?;
    // One tag for every node (Cassandra's default: the time in milliseconds).
    let tag = tag.map(str::to_owned).unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
            .to_string()
    });
    say!(
        "Requested creating snapshot(s) for [{}] with snapshot name [{tag}]\n",
        keyspace.unwrap_or("all keyspaces")
    );
    let q = query(&[
        ("tag", Some(tag.clone())),
        ("keyspace", keyspace.map(str::to_owned)),
        ("tables", (!tables.is_empty()).then(|| tables.join(","))),
    ]);
    if !all_nodes {
        let doc = post(addr, &format!("/snapshot?{q}"))?;
        say_taken(addr, &tag, &doc);
        return Ok(());
    }
    // One metadata log entry: every node takes it as it applies that entry, at the same
    // position relative to schema changes.
    post(addr, &format!("/snapshot?{q}&all_nodes=1"))?;
    let mut failed = Vec::new();
    for node in targets {
        let deadline = Instant::now() + TIMEOUT;
        let path = format!("/snapshot?{}", query(&[("tag", Some(tag.clone()))]));
        loop {
            let doc: Value =
                serde_json::from_str(&http::get(node, &path, TIMEOUT)?).map_err(|e| e.to_string())?;
            match doc["state"].as_str() {
                Some("taken") => say_taken(node, &tag, &doc["snapshot"]),
                Some("failed") => {
                    let why = doc["error"].as_str().unwrap_or("?");
                    say!("{}: snapshot {tag} not taken: {why}\n", node.ip());
                    failed.push(format!("{}: {why}", node.ip()));
                }
                _ if Instant::now() < deadline => {
                    std::thread::sleep(POLL);
                    continue;
                }
                _ => failed.push(format!(
                    "{}: has not applied the snapshot's log entry after {TIMEOUT:?}",
                    node.ip()
                )),
            }
            break;
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "snapshot {tag} is missing on {} node(s): {}",
            failed.len(),
            failed.join("; ")
        ))
    }
}

fn say_taken(node: SocketAddr, tag: &str, doc: &Value) {
    let tables = doc["tables"].as_array().map_or(0, Vec::len);
    say!(
        "{}: snapshot {tag} of {tables} tables, {} pinned ({} more than before), in {:.1} ms\n",
        node.ip(),
        mib(&doc["pinned_bytes"]),
        mib(&doc["newly_pinned_bytes"]),
        doc["took_ms"].as_f64().unwrap_or(0.0)
    );
}

pub fn listsnapshots(addr: SocketAddr, all_nodes: bool) -> Result<(), String> {
    for node in nodes(addr, all_nodes)? {
        let doc: Value =
            serde_json::from_str(&http::get(node, "/snapshots", TIMEOUT)?).map_err(|e| e.to_string())?;
        say!("Snapshot Details on {}:\n", node.ip());
        let list = doc["snapshots"].as_array().cloned().unwrap_or_default();
        if list.is_empty() {
            say!("There are no snapshots\n");
            continue;
        }
        say!(
            "{:<40} {:<12} {:<30} {:>10} {:>12}\n",
            "Snapshot name",
            "Reason",
            "Keyspace.table",
            "Entries",
            "Pinned"
        );
        for s in &list {
            for t in s["tables"].as_array().into_iter().flatten() {
                say!(
                    "{:<40} {:<12} {:<30} {:>10} {:>12}\n",
                    s["tag"].as_str().unwrap_or("?"),
                    s["reason"].as_str().unwrap_or("?"),
                    format!(
                        "{}.{}",
                        t[0].as_str().unwrap_or("?"),
                        t[1].as_str().unwrap_or("?")
                    ),
                    t[2],
                    mib(&s["pinned_bytes"])
                );
            }
            if let Some(problem) = s["problem"].as_str() {
                say!("{:<40} DAMAGED: {problem}\n", s["tag"].as_str().unwrap_or("?"));
            }
        }
        say!(
            "\nPinned by snapshots: {}; held now (space only snapshots keep): {}\n",
            mib(&doc["pinned_bytes"]),
            mib(&doc["held_bytes"])
        );
    }
    Ok(())
}

pub fn clearsnapshot(addr: SocketAddr, tag: Option<&str>, all: bool, all_nodes: bool) -> Result<(), String> {
    let q = match (tag, all) {
        (Some(t), false) => format!("tag={t}"),
        (None, true) => "all=1".to_owned(),
        _ => return Err("name one snapshot (-t TAG) or ask for --all".to_owned()),
    };
    for node in nodes(addr, all_nodes)? {
        let doc = post(node, &format!("/clearsnapshot?{q}"))?;
        let cleared: Vec<&str> = doc["cleared"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        say!(
            "{}: cleared {}\n",
            node.ip(),
            if cleared.is_empty() {
                "nothing".to_owned()
            } else {
                cleared.join(", ")
            }
        );
    }
    Ok(())
}

pub struct RestoreArgs<'a> {
    pub snapshot: Option<&'a str>,
    /// A backup (`DIR/TAG` or `s3://BUCKET/PREFIX/TAG`), instead of a snapshot.
    pub from: Option<&'a str>,
    pub keyspace: Option<&'a str>,
    pub table: Option<&'a str>,
    pub to_table: Option<&'a str>,
    pub consistency: Option<&'a str>,
    pub all_nodes: bool,
}

pub fn restore(addr: SocketAddr, a: &RestoreArgs<'_>) -> Result<(), String> {
    let from = match (a.snapshot, a.from) {
        (Some(_), None) => None,
        (None, Some(s3)) if s3.starts_with(S3_SCHEME) => Some(s3.to_owned()),
        (None, Some(dir)) => Some(
            std::fs::canonicalize(dir)
                .map_err(|e| format!("--from {dir}: {e}"))?
                .to_string_lossy()
                .into_owned(),
        ),
        _ => return Err("restore from one source: --snapshot TAG or --from DIR/TAG".to_owned()),
    };
    // A backup is loaded by one node into the whole cluster: every node's part.
    let all_nodes = a.all_nodes && from.is_none();
    let source = a
        .snapshot
        .map_or_else(|| from.clone().unwrap_or_default(), str::to_owned);
    let q = query(&[
        ("tag", a.snapshot.map(str::to_owned)),
        ("from", from),
        ("keyspace", a.keyspace.map(str::to_owned)),
        ("table", a.table.map(str::to_owned)),
        ("to_table", a.to_table.map(str::to_owned)),
        ("consistency", a.consistency.map(str::to_owned)),
    ]);
    for node in nodes(addr, all_nodes)? {
        post(node, &format!("/restore?{q}"))?;
        let started = Instant::now();
        let mut last = String::new();
        let doc = wait_done(node, "/restore", "restore", |doc| {
            let line = doc["tables"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| {
                    format!(
                        "{}.{}: {} rows, {} partition tombstones{}{}",
                        t["keyspace"].as_str().unwrap_or("?"),
                        t["table"].as_str().unwrap_or("?"),
                        t["rows"],
                        t["partition_tombstones"],
                        if t["created"] == true {
                            " (table created)"
                        } else {
                            ""
                        },
                        match t["cells_skipped"].as_u64() {
                            Some(n) if n > 0 => format!(", {n} cells of columns the table lacks skipped"),
                            _ => String::new(),
                        }
                    )
                })
                .collect::<Vec<_>>()
                .join("; ");
            if line != last {
                say!("{}: {line}\n", node.ip());
                last = line;
            }
        })?;
        say!(
            "{}: restored from {source} in {:.1} s{}\n",
            node.ip(),
            started.elapsed().as_secs_f64(),
            if doc["resumed"] == true {
                " (went on from where an interrupted run stopped; the counts are this run's)"
            } else {
                ""
            }
        );
    }
    Ok(())
}

pub struct BackupArgs<'a> {
    pub to: &'a str,
    pub tag: Option<&'a str>,
    pub snapshot: Option<&'a str>,
    pub keyspace: Option<&'a str>,
    pub tables: &'a [String],
    pub incremental: bool,
    pub all_nodes: bool,
}

pub fn backup(addr: SocketAddr, a: &BackupArgs<'_>) -> Result<(), String> {
    // A bucket is the node's to reach, with its credentials; a directory is made here.
    let to = match a.to.strip_suffix('/').unwrap_or(a.to) {
        s3 if s3.starts_with(S3_SCHEME) => s3.to_owned(),
        dir => {
            std::fs::create_dir_all(dir).map_err(|e| format!("--to {dir}: {e}"))?;
            std::fs::canonicalize(dir)
                .map_err(|e| format!("--to {dir}: {e}"))?
                .to_string_lossy()
                .into_owned()
        }
    };
    // One tag for every node's part.
    let tag = a.tag.map(str::to_owned).unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
            .to_string()
    });
    let q = query(&[
        ("to", Some(to.clone())),
        ("tag", Some(tag.clone())),
        ("snapshot", a.snapshot.map(str::to_owned)),
        ("keyspace", a.keyspace.map(str::to_owned)),
        ("tables", (!a.tables.is_empty()).then(|| a.tables.join(","))),
        ("incremental", a.incremental.then(|| "1".to_owned())),
    ]);
    for node in nodes(addr, a.all_nodes)? {
        post(node, &format!("/backup?{q}"))?;
        // The node writes it in the background.
        let doc = wait_done(node, "/backup", "backup", |_| {})?["result"].clone();
        let (mut records, mut bytes) = (0u64, 0u64);
        for t in doc["tables"].as_array().into_iter().flatten() {
            records += t["records"].as_u64().unwrap_or(0);
            bytes += t["bytes"].as_u64().unwrap_or(0);
        }
        say!(
            "{}: backup {tag}{} of {} tables: {records} records, {} in {:.1} s\n",
            node.ip(),
            doc["base"]
                .as_str()
                .map(|b| format!(" (incremental over {b})"))
                .unwrap_or_default(),
            doc["tables"].as_array().map_or(0, Vec::len),
            mib(&Value::from(bytes)),
            doc["seconds"].as_f64().unwrap_or(0.0)
        );
    }
    say!("backup written to {to}/{tag}\n");
    Ok(())
}
