//! The snapshot operations on the node's HTTP endpoint, which `hayate snapshot`,
//! `listsnapshots`, `clearsnapshot` and `restore --snapshot` ask:
//!
//! - `POST /snapshot?tag=T&keyspace=K&tables=a,b`: takes a snapshot on this node; with
//!   `all_nodes=1`, proposes it to the metadata log, so that every node takes it when it applies
//!   that entry, and `GET /snapshot?tag=T` then says what this node made of it;
//! - `GET /snapshots`: the snapshots on this node and the device space they hold;
//! - `POST /clearsnapshot?tag=T` (or `all=1`);
//! - `POST /restore?tag=T&keyspace=K&table=t&to_table=ks.t&consistency=ALL` starts a restore
//!   from a snapshot (or, with `from=DIR/TAG` or `from=s3://BUCKET/PREFIX/TAG`, from a backup),
//!   and `GET /restore` shows how far it is;
//! - `POST /backup?to=DIR&tag=T&snapshot=S&keyspace=K&tables=a,b&incremental=1` starts writing
//!   this node's part of a backup (`crate::backup`) to a directory or to `to=s3://BUCKET/PREFIX`,
//!   and `GET /backup` shows whether it is done, and what it wrote. Both run in the background:
//!   the endpoint answers one request at a time, and a backup can take hours.
//!
//! Values are percent-encoded where they must be (`%XX`).
//!
//! Each answers a JSON document, or a line saying why not. Like the topology operations, they
//! are taken only from the node's own machine.

use serde_json::json;

use std::sync::{Arc, Mutex};

use super::restore::{Progress, RestoreRequest};
use crate::node::Node;

type Answer = (String, String);

const PATHS: [&str; 5] = ["/snapshot", "/snapshots", "/clearsnapshot", "/restore", "/backup"];

/// The answer to a snapshot request, or `None` if `path` is not one.
pub fn answer(
    node: Option<Arc<Node>>,
    method: &str,
    path: &str,
    query: &str,
    from_loopback: bool,
) -> Option<Answer> {
    if !PATHS.contains(&path) {
        return None;
    }
    let wanted = match path {
        "/snapshots" => "GET",
        "/snapshot" | "/restore" | "/backup" if method == "GET" => "GET",
        _ => "POST",
    };
    if let Some(refused) = crate::node::figures::refuse(method, wanted, from_loopback, "snapshot operations")
    {
        return Some(refused);
    }
    let Some(node) = node else {
        return Some((
            "409 Conflict".to_owned(),
            "refused: this node is still joining the cluster; wait until it is normal\n".to_owned(),
        ));
    };
    let param = |name: &str| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            .filter(|v| !v.is_empty())
            .map(percent_decode)
    };
    let result = match path {
        "/snapshot" if method == "GET" => logged(param("tag")),
        "/snapshot" if param("all_nodes").is_some() => {
            by_log(&node, param("tag"), param("keyspace"), param("tables"))
        }
        "/snapshot" => take(&node, param("tag"), param("keyspace"), param("tables")),
        "/snapshots" => Ok(list(&node)),
        "/clearsnapshot" => match (param("tag"), param("all")) {
            (Some(tag), _) => super::clear(&node.engine, Some(&tag)),
            (None, Some(_)) => super::clear(&node.engine, None),
            (None, None) => Err("name the snapshot (tag=T), or ask for all=1".to_owned()),
        }
        .map(|cleared| json!({ "cleared": cleared })),
        "/backup" if method == "GET" => Ok(BACKUP.lock().expect("backup progress lock poisoned").clone()),
        "/backup" => backup(&node, param),
        _ if method == "GET" => Ok(json!(RESTORE
            .lock()
            .expect("restore progress lock poisoned")
            .clone())),
        _ => restore(&node, param),
    };
    Some(match result {
        Ok(doc) => ("200 OK".to_owned(), doc.to_string() + "\n"),
        Err(e) => ("409 Conflict".to_owned(), e + "\n"),
    })
}

/// A snapshot request's tag (Cassandra's default: the time in milliseconds) and tables.
fn request(
    tag: Option<String>,
    keyspace: Option<&str>,
    tables: Option<String>,
) -> Result<(String, Vec<String>), String> {
    let tag = tag.unwrap_or_else(|| super::now_ms().to_string());
    let tables: Vec<String> = tables
        .map(|t| t.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    if !tables.is_empty() && keyspace.is_none() {
        return Err("tables are named within a keyspace: give the keyspace too".to_owned());
    }
    if !hayate_storage::valid_snapshot_tag(&tag) {
        return Err(hayate_storage::SnapshotError::BadTag(tag).to_string());
    }
    Ok((tag, tables))
}

/// Proposes snapshot `tag` to the metadata log: every node takes it as it applies the entry.
fn by_log(
    node: &Node,
    tag: Option<String>,
    keyspace: Option<String>,
    tables: Option<String>,
) -> Result<serde_json::Value, String> {
    let (tag, tables) = request(tag, keyspace.as_deref(), tables)?;
    let command = crate::schema::machine::snapshot_command(&tag, keyspace.as_deref(), &tables);
    // This thread is the endpoint's own, not the runtime's: it may wait on the runtime.
    node.runtime
        .block_on(node.schema_log.propose(command))
        .and_then(|a| crate::schema::machine::decode_answer(&a))
        .map_err(|e| e.to_string())?;
    Ok(json!({ "tag": tag, "proposed": true }))
}

/// What this node made of the snapshot `tag` the metadata log asked for.
fn logged(tag: Option<String>) -> Result<serde_json::Value, String> {
    let tag = tag.ok_or("name the snapshot (tag=T)")?;
    Ok(match super::logged_outcome(&tag) {
        None => json!({ "tag": tag, "state": "pending" }),
        Some(Ok(taken)) => json!({ "tag": tag, "state": "taken", "snapshot": taken }),
        Some(Err(e)) => json!({ "tag": tag, "state": "failed", "error": e }),
    })
}

fn take(
    node: &Node,
    tag: Option<String>,
    keyspace: Option<String>,
    tables: Option<String>,
) -> Result<serde_json::Value, String> {
    let (tag, tables) = request(tag, keyspace.as_deref(), tables)?;
    let schema = node.schema.current();
    let chosen = super::select(&schema, keyspace.as_deref(), &tables)?;
    if chosen.is_empty() {
        return Err("no table to snapshot".to_owned());
    }
    let (manifest, summary) = super::take(&node.engine, &tag, &chosen, "snapshot", false)?;
    tracing::info!(
        "took snapshot {tag} of {} tables ({} blocks pinned) in {:?}",
        manifest.tables.len(),
        summary.pinned_blocks,
        summary.took
    );
    Ok(super::described(&manifest, &summary))
}

fn list(node: &Node) -> serde_json::Value {
    let space = node.engine.snapshot_space();
    let block = u64::from(space.block_size_bytes);
    json!({
        "snapshots": super::list(&node.engine),
        "pinned_bytes": space.pinned_blocks * block,
        "held_bytes": space.held_bytes,
    })
}

fn restore(node: &Arc<Node>, param: impl Fn(&str) -> Option<String>) -> Result<serde_json::Value, String> {
    let tag = param("tag")
        .or_else(|| param("from").is_some().then(String::new))
        .ok_or("name the snapshot to restore from (tag=T), or the backup (from=DIR/TAG)")?;
    let to_table = match param("to_table") {
        None => None,
        Some(t) => Some(
            t.split_once('.')
                .map(|(k, t)| (k.to_owned(), t.to_owned()))
                .ok_or_else(|| format!("--to-table {t}: give it as KEYSPACE.TABLE"))?,
        ),
    };
    let consistency = match param("consistency") {
        None => None,
        Some(c) => {
            use hayate_cluster::consistency::ConsistencyLevel as Cl;
            let levels = [
                Cl::Any,
                Cl::One,
                Cl::Two,
                Cl::Three,
                Cl::Quorum,
                Cl::All,
                Cl::LocalQuorum,
            ];
            let level = levels.into_iter().find(|l| l.name().eq_ignore_ascii_case(&c));
            Some(level.ok_or_else(|| {
                format!("consistency {c}: use one of ONE, TWO, THREE, QUORUM, ALL, LOCAL_QUORUM, ANY")
            })?)
        }
    };
    let from = param("from");
    let tag = match from.as_deref().and_then(crate::backup::store::split_tag) {
        Some((_, backup)) => backup.to_owned(),
        None => tag,
    };
    let request = RestoreRequest {
        tag,
        keyspace: param("keyspace"),
        table: param("table"),
        to_table,
        consistency,
    };
    {
        let mut p = RESTORE.lock().expect("restore progress lock poisoned");
        if p.state == "running" {
            return Err(format!("refused: a restore from snapshot {} is running", p.tag));
        }
        *p = Progress {
            tag: request.tag.clone(),
            state: "running".to_owned(),
            ..Progress::default()
        };
    }
    let node = Arc::clone(node);
    node.runtime.clone().spawn(async move {
        let result = match &from {
            Some(from) => crate::backup::restore(&node, from, &request, &RESTORE).await,
            None => super::restore(&node, &request, &RESTORE).await,
        };
        let mut p = RESTORE.lock().expect("restore progress lock poisoned");
        match result {
            Ok(()) => p.state = "done".to_owned(),
            Err(e) => {
                tracing::warn!("restore from snapshot {} failed: {e}", request.tag);
                p.state = "failed".to_owned();
                p.error = Some(e);
            }
        }
    });
    Ok(json!({ "started": true }))
}

/// The restore running on this node, or the last one (one node per process).
static RESTORE: Mutex<Progress> = Mutex::new(Progress {
    tag: String::new(),
    state: String::new(),
    tables: Vec::new(),
    resumed: false,
    error: None,
});

/// The backup running on this node, or the last one: `{"state": "running" | "done" | "failed",
/// "tag", "result" | "error"}`.
static BACKUP: Mutex<serde_json::Value> = Mutex::new(serde_json::Value::Null);

fn backup(node: &Arc<Node>, param: impl Fn(&str) -> Option<String>) -> Result<serde_json::Value, String> {
    let to = param("to").ok_or("say where the backup goes (to=DIR or to=s3://BUCKET/PREFIX)")?;
    let tag = param("tag").unwrap_or_else(|| super::now_ms().to_string());
    let request = crate::backup::BackupRequest {
        to,
        tag,
        snapshot: param("snapshot"),
        keyspace: param("keyspace"),
        tables: param("tables")
            .map(|t| t.split(',').map(str::to_owned).collect())
            .unwrap_or_default(),
        incremental: param("incremental").is_some(),
    };
    {
        let mut b = BACKUP.lock().expect("backup progress lock poisoned");
        if b["state"] == "running" {
            return Err(format!("refused: backup {} is being written", b["tag"]));
        }
        *b = json!({ "state": "running", "tag": request.tag });
    }
    let node = Arc::clone(node);
    node.runtime.clone().spawn(async move {
        let started = std::time::Instant::now();
        let outcome = match crate::backup::backup(&node, &request).await {
            Ok(m) => json!({ "state": "done", "tag": request.tag, "result": {
                "tag": m.tag,
                "base": m.base,
                "tables": m.tables.iter().map(|t| json!({
                    "keyspace": t.table.keyspace, "table": t.table.table, "records": t.records, "bytes": t.bytes,
                })).collect::<Vec<_>>(),
                "seconds": started.elapsed().as_secs_f64(),
            }}),
            Err(e) => {
                tracing::warn!("backup {} failed: {e}", request.tag);
                json!({ "state": "failed", "tag": request.tag, "error": e })
            }
        };
        *BACKUP.lock().expect("backup progress lock poisoned") = outcome;
    });
    Ok(json!({ "started": true }))
}

/// `%XX` sequences decoded (`+` is left as it is).
pub fn percent_decode(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).and_then(|&c| hex(c)),
            b.get(i + 2).and_then(|&c| hex(c)),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `v` with the characters a query value cannot hold as they are written `%XX`.
pub fn percent_encode(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/,".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_survive_percent_encoding() {
        for v in ["/tmp/a b&c=d%e", "plain", "dir/with,comma", "é"] {
            assert_eq!(percent_decode(&percent_encode(v)), v);
        }
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }
}
