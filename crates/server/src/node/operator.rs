//! The operator's endpoints on the node's HTTP port (the metrics port) that the `nodetool`-like
//! tools read, each a JSON document: `/info`, `/tablestats`, `/ring`, `/describecluster`,
//! `/defragstats` and `/logging` (GET), and the operations `/flush`, `/drain` and `/logging`
//! (POST, taken only from the node's own machine, as `nodetool` reaches Cassandra over local
//! JMX). The topology operations and `/netstats` are in [`super::figures`].
//!
//! Every figure here is read from counters the node keeps anyway; none scans the data.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use hayate_storage::{Engine, LatencySnapshot};
use serde_json::{json, Value};

use crate::cluster::ClusterNode;
use crate::node::Node;
use crate::schema::SchemaStore;

const OK: &str = "200 OK";

/// What the endpoints read: the node's parts as the endpoint's thread holds them.
pub struct Parts<'a> {
    pub cluster: &'a ClusterNode,
    pub engine: &'a Engine,
    pub schema: &'a SchemaStore,
    /// `None` while the node joins.
    pub node: Option<Arc<Node>>,
    /// The `/status` document (every member's state, load, tokens, ownership, schema version).
    pub status: &'a dyn Fn() -> Value,
}

/// Answers an operator's request for one of this file's paths; `None` for any other path.
pub fn answer(
    parts: &Parts<'_>,
    method: &str,
    path: &str,
    query: &str,
    from_loopback: bool,
) -> Option<(String, String)> {
    let reads = matches!(
        path,
        "/info" | "/tablestats" | "/ring" | "/describecluster" | "/defragstats" | "/logging"
    );
    let changes = matches!(path, "/flush" | "/drain" | "/logging");
    if !reads && !changes {
        return None;
    }
    if method == "GET" && reads {
        let doc = match path {
            "/info" => info(parts),
            "/tablestats" => tablestats(parts),
            "/ring" => ring(parts),
            "/describecluster" => describecluster(parts),
            "/defragstats" => defragstats(parts.engine),
            _ => match crate::logging::levels() {
                Ok(levels) => json!({ "levels": levels }),
                Err(e) => return Some(("409 Conflict".to_owned(), e + "\n")),
            },
        };
        return Some((OK.to_owned(), doc.to_string()));
    }
    let allowed = if changes { "POST" } else { "GET" };
    if let Some(refused) =
        super::figures::refuse(method, allowed, from_loopback, "flush, drain and setlogginglevel")
    {
        return Some(refused);
    }
    let result = match path {
        "/flush" => flush(parts.engine),
        "/drain" => match &parts.node {
            Some(node) => drain(node),
            None => Err("refused: this node is still joining the cluster".to_owned()),
        },
        _ => {
            let target = param(query, "target");
            let level = param(query, "level");
            crate::logging::set_level(target.as_deref(), level.as_deref())
                .map(|now| format!("log filter now: {now}"))
        }
    };
    Some(match result {
        Ok(body) => (OK.to_owned(), body + "\n"),
        Err(e) => ("409 Conflict".to_owned(), e + "\n"),
    })
}

/// A query parameter's value, percent-decoded (`%3A%3A` in a target's `::`).
fn param(query: &str, name: &str) -> Option<String> {
    let raw = query
        .split('&')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))?;
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok().filter(|s| !s.is_empty())
}

/// The process's resident memory, from /proc (`None` elsewhere).
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// `nodetool info`'s figures, from the node's own parts.
fn info(parts: &Parts<'_>) -> Value {
    let stats = parts.engine.stats();
    let local = parts.cluster.local_row();
    let node = parts.node.as_ref();
    let drained = node.is_some_and(|n| n.is_drained());
    let (errors, server_errors) = node.map(|n| n.metrics.errors()).unwrap_or_default();
    json!({
        "host_id": parts.cluster.info.host_id.to_string(),
        "gossip_active": !drained,
        "native_transport_active": node.is_some() && !drained,
        "mode": if drained { "DRAINED" } else if node.is_some() { "NORMAL" } else { "JOINING" },
        "load_bytes": stats.live_bytes,
        "generation": node.map(|n| n.local.generation),
        "uptime_s": node.map(|n| n.metrics.uptime().as_secs()),
        "index_bytes": stats.index_bytes,
        "delta_bytes": stats.delta_bytes,
        "resident_bytes": resident_bytes(),
        "device_bytes_used": (stats.total_blocks - stats.free_blocks) * stats.block_size_bytes,
        "device_bytes_total": stats.total_blocks * stats.block_size_bytes,
        "data_center": local.data_center,
        "rack": local.rack,
        "errors": errors,
        "server_errors": server_errors,
        "device_read_errors": stats.read_errors,
        "cache": {
            "bytes": stats.cache_bytes,
            "capacity_bytes": parts.engine.config().post_write_cache_bytes,
            "hits": stats.cache_hits,
            "device_reads": stats.device_reads,
        },
        "tokens": local.tokens,
    })
}

fn latency(l: &LatencySnapshot) -> Value {
    json!({
        "count": l.count(),
        "mean_us": l.mean_us(),
        "p50_us": l.quantile_us(0.5),
        "p95_us": l.quantile_us(0.95),
        "p99_us": l.quantile_us(0.99),
        "max_us": l.quantile_us(1.0),
    })
}

/// Every table of the schema with the engine's figures for it (zeros for a table that holds
/// nothing on this node), by keyspace; virtual tables are left out.
fn tablestats(parts: &Parts<'_>) -> Value {
    let schema = parts.schema.current();
    let figures: BTreeMap<u32, hayate_storage::TableStats> = parts
        .engine
        .table_stats()
        .into_iter()
        .map(|t| (t.table, t))
        .collect();
    let mut keyspaces = Vec::new();
    for ks in schema.user_keyspaces() {
        let tables: Vec<Value> = ks
            .tables
            .values()
            .filter(|t| !t.is_virtual)
            .map(|t| {
                let f = figures.get(&t.storage_id).cloned().unwrap_or_default();
                json!({
                    "table": t.name,
                    "rows": f.rows(),
                    "tombstones": f.tombstones,
                    "range_tombstone_partitions": f.range_tombstone_entries,
                    "live_bytes": f.record_bytes,
                    "index_bytes": f.index_bytes,
                    "index_lookups": f.index_lookups,
                    "reads": latency(&f.reads),
                    "writes": latency(&f.writes),
                })
            })
            .collect();
        keyspaces.push(json!({ "keyspace": ks.name, "tables": tables }));
    }
    let stats = parts.engine.stats();
    json!({
        "keyspaces": keyspaces,
        "node": {
            "live_bytes": stats.live_bytes,
            "device_bytes_used": (stats.total_blocks - stats.free_blocks) * stats.block_size_bytes,
            "index_bytes": stats.index_bytes,
            // What the request path repeats, counted since the node started: a token per
            // partition a request names, a plan per statement text of any kind (none per EXECUTE).
            "tokens_computed": hayate_storage::token::computed_tokens(),
            "plans_compiled": crate::query::plans_compiled(),
        },
    })
}

/// The `/status` document with each member's tokens.
fn ring(parts: &Parts<'_>) -> Value {
    let mut doc = (parts.status)();
    let metadata = parts.cluster.metadata.current();
    for n in doc["nodes"].as_array_mut().into_iter().flatten() {
        let tokens = metadata
            .members
            .values()
            .find(|r| n["host_id"] == r.info.host_id.to_string())
            .map(|r| r.tokens.clone())
            .unwrap_or_default();
        n["token_list"] = json!(tokens);
    }
    doc
}

/// The `/status` document with what `nodetool describecluster` adds: partitioner, snitch,
/// each member's release, and each keyspace's replication.
fn describecluster(parts: &Parts<'_>) -> Value {
    let mut doc = (parts.status)();
    let metadata = parts.cluster.metadata.current();
    for n in doc["nodes"].as_array_mut().into_iter().flatten() {
        let release = metadata
            .members
            .values()
            .find(|r| n["host_id"] == r.info.host_id.to_string())
            .map(|r| r.info.release_version.clone());
        n["release_version"] = json!(release);
    }
    let schema = parts.schema.current();
    let keyspaces: BTreeMap<&str, &BTreeMap<String, String>> = schema
        .keyspaces
        .values()
        .filter(|k| k.virtual_kind.is_none())
        .map(|k| (k.name.as_str(), &k.replication))
        .collect();
    doc["partitioner"] = json!("org.apache.cassandra.dht.Murmur3Partitioner");
    doc["snitch"] = json!("hayate: data center and rack from each node's [cluster] settings");
    doc["keyspaces"] = json!(keyspaces);
    doc
}

fn defragstats(engine: &Engine) -> Value {
    let d = engine.defrag_status();
    json!({
        "lwm_pct": d.lwm_pct,
        "pending_blocks": d.pending_blocks,
        "pending_live_bytes": d.pending_live_bytes,
        "defragging_blocks": d.defragging_blocks,
        "blocks_defragged": d.blocks_defragged,
        "bytes_moved": d.bytes_moved,
        "free_blocks": d.free_blocks,
        "total_blocks": d.total_blocks,
        "block_size_bytes": d.block_size_bytes,
    })
}

/// Makes everything written so far durable on the device. Every table's records share the
/// write blocks, so this flushes them all.
fn flush(engine: &Engine) -> Result<String, String> {
    engine.sync().map_err(|e| format!("the flush failed: {e}"))?;
    Ok("flushed: every write acknowledged so far is on the device".to_owned())
}

/// `nodetool drain`: the node stops taking requests from clients and other nodes, leaves
/// gossip (the others mark it down at once), and makes everything written durable on the
/// device. It keeps running, refusing requests, until it is stopped; a restart serves again.
fn drain(node: &Arc<Node>) -> Result<String, String> {
    if node.drained.swap(true, Ordering::AcqRel) {
        return Ok("already drained".to_owned());
    }
    tracing::info!("draining: refusing requests, leaving gossip, flushing to the device");
    let membership = node.cluster.membership.clone();
    // The gossip thread's goodbye takes a few hundred milliseconds; this thread may wait.
    membership.shutdown();
    node.cluster.messaging.close();
    node.engine
        .sync()
        .map_err(|e| format!("drained, but the flush failed: {e}"))?;
    tracing::info!("drained: restart the node to serve again");
    Ok(
        "drained: the node refuses requests, has left gossip and has flushed everything to the \
        device; restart it to serve again"
            .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::param;

    #[test]
    fn parameters_are_percent_decoded() {
        assert_eq!(
            param("target=hayate_storage%3A%3Adefrag&level=debug", "target").as_deref(),
            Some("hayate_storage::defrag")
        );
        assert_eq!(param("target=a&level=debug", "level").as_deref(), Some("debug"));
        assert_eq!(param("level=", "level"), None);
        assert_eq!(param("targets=x", "target"), None);
    }
}
