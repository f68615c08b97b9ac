//! `hayate status`: what `nodetool status` prints, from a node's `/status` document.
//!
//! ```text
//! Datacenter: datacenter1
//! =======================
//! Status=Up/Down
//! |/ State=Normal/Leaving/Joining/Moving
//! --  Address    Load       Tokens  Owns    Host ID                               Rack
//! UN  127.0.0.1  1.21 MiB   16      33.3%   3f2b6a1c-0d4e-4a5b-9c8d-7e6f5a4b3c2d  rack1
//! ```

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::say;
use serde_json::Value;

const STATUS_TIMEOUT: Duration = Duration::from_secs(5);
/// How long `hayate status` waits for each other node's own load: a node that is slow to
/// answer keeps the load gossip gave.
const LOAD_TIMEOUT: Duration = Duration::from_secs(1);

pub fn run(host: IpAddr, port: u16) -> Result<(), String> {
    let doc = fetch_fresh(SocketAddr::new(host, port))?;
    say!("{}", render(&doc));
    Ok(())
}

/// A node's status document, with each node's load as that node reports it now.
///
/// A node publishes its load in gossip every two seconds, so one node's document shows the
/// others' loads as of their last round (`0 B` or `?` right after the first writes). Asked
/// directly (on the same port, at its address), each node that is up reports what it holds
/// now; one that does not answer, or answers as another node, keeps gossip's figure.
pub fn fetch_fresh(addr: SocketAddr) -> Result<Value, String> {
    let mut doc = fetch(addr)?;
    let local = doc["local"].clone();
    for n in doc["nodes"].as_array_mut().into_iter().flatten() {
        if n["state"] != "up" || n["host_id"] == local {
            continue;
        }
        let Some(ip) = n["address"].as_str().and_then(|a| a.parse::<IpAddr>().ok()) else {
            continue;
        };
        let Ok(theirs) = fetch_within(SocketAddr::new(ip, addr.port()), LOAD_TIMEOUT) else {
            continue;
        };
        if theirs["local"] != n["host_id"] {
            continue;
        }
        let own = theirs["nodes"]
            .as_array()
            .and_then(|list| list.iter().find(|m| m["host_id"] == n["host_id"]))
            .map(|m| m["load_bytes"].clone());
        if let Some(load) = own {
            n["load_bytes"] = load;
        }
    }
    Ok(doc)
}

/// A node's status document.
pub fn fetch(addr: SocketAddr) -> Result<Value, String> {
    fetch_within(addr, STATUS_TIMEOUT)
}

fn fetch_within(addr: SocketAddr, timeout: Duration) -> Result<Value, String> {
    let body = super::http::get(addr, "/status", timeout).map_err(|e| {
        format!(
            "{e} (is a node running there, with its metrics endpoint on this port? see --host and --port)"
        )
    })?;
    serde_json::from_str(&body).map_err(|e| format!("{addr} answered a status this build cannot read: {e}"))
}

pub fn human_bytes(bytes: Option<u64>) -> String {
    let Some(b) = bytes else {
        return "?".to_owned();
    };
    let units = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (unit, shift) in units {
        if b >= 1 << shift {
            return format!("{:.2} {unit}", b as f64 / (1u64 << shift) as f64);
        }
    }
    format!("{b} B")
}

/// The table, one section per data center.
pub fn render(doc: &Value) -> String {
    let mut by_dc: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for n in doc["nodes"].as_array().into_iter().flatten() {
        by_dc
            .entry(n["data_center"].as_str().unwrap_or("?").to_owned())
            .or_default()
            .push(n);
    }
    let mut out = String::new();
    for (dc, mut nodes) in by_dc {
        nodes.sort_by_key(|n| n["address"].as_str().unwrap_or_default().to_owned());
        let title = format!("Datacenter: {dc}");
        out.push_str(&format!("{title}\n{}\n", "=".repeat(title.len())));
        out.push_str("Status=Up/Down\n|/ State=Normal/Leaving/Joining/Moving\n");
        out.push_str(&format!(
            "{:<4}{:<16}{:<12}{:<8}{:<9}{:<38}{}\n",
            "--", "Address", "Load", "Tokens", "Owns", "Host ID", "Rack"
        ));
        for n in nodes {
            let state = if n["state"] == "up" { 'U' } else { 'D' };
            let status = match n["status"].as_str() {
                Some("joining") => 'J',
                Some("leaving") => 'L',
                _ => 'N',
            };
            let owns = n["owns"]
                .as_f64()
                .map_or("?".to_owned(), |o| format!("{:.1}%", o * 100.0));
            out.push_str(&format!(
                "{:<4}{:<16}{:<12}{:<8}{:<9}{:<38}{}\n",
                format!("{state}{status}"),
                n["address"].as_str().unwrap_or("?"),
                human_bytes(n["load_bytes"].as_u64()),
                n["tokens"].as_u64().unwrap_or(0),
                owns,
                n["host_id"].as_str().unwrap_or("?"),
                n["rack"].as_str().unwrap_or("?"),
            ));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_reads_like_nodetools() {
        let doc = serde_json::json!({
            "nodes": [
                {"address": "127.0.0.2", "data_center": "dc1", "rack": "r1", "state": "down", "status": "normal",
                 "load_bytes": 3u64 << 20, "tokens": 16, "owns": 0.5, "host_id": "b"},
                {"address": "127.0.0.1", "data_center": "dc1", "rack": "r1", "state": "up", "status": "normal",
                 "load_bytes": 1024, "tokens": 16, "owns": 0.5, "host_id": "a"},
            ]
        });
        let text = render(&doc);
        assert!(text.starts_with("Datacenter: dc1\n===============\n"), "{text}");
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("UN") || l.starts_with("DN"))
            .collect();
        assert!(
            rows[0].starts_with("UN  127.0.0.1       1.00 KiB    16      50.0%"),
            "{text}"
        );
        assert!(rows[1].starts_with("DN  127.0.0.2       3.00 MiB"), "{text}");
    }
}
