//! `hayate ring` and `hayate describecluster`: what `nodetool ring` and `nodetool
//! describecluster` print, from a node's `/ring` and `/describecluster` documents (its
//! `/status` with each member's tokens, release, and the keyspaces' replication).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;

use super::say;
use super::status::human_bytes;

const RING_TIMEOUT: Duration = Duration::from_secs(5);

pub fn ring(addr: SocketAddr) -> Result<(), String> {
    let doc = super::http::get_json(addr, "/ring", RING_TIMEOUT)?;
    say!("{}", render_ring(&doc));
    Ok(())
}

pub fn describecluster(addr: SocketAddr) -> Result<(), String> {
    let doc = super::http::get_json(addr, "/describecluster", RING_TIMEOUT)?;
    say!("{}", render_describecluster(&doc));
    Ok(())
}

fn state(n: &Value) -> (&'static str, &'static str) {
    let up = if n["state"] == "up" { "Up" } else { "Down" };
    let status = match n["status"].as_str() {
        Some("joining") => "Joining",
        Some("leaving") => "Leaving",
        _ => "Normal",
    };
    (up, status)
}

/// One section per data center, a line per token in token order; the first line is the last
/// token alone, where the ring wraps, as nodetool prints it.
pub fn render_ring(doc: &Value) -> String {
    let mut by_dc: BTreeMap<&str, Vec<(i64, &Value)>> = BTreeMap::new();
    for n in doc["nodes"].as_array().into_iter().flatten() {
        let dc = n["data_center"].as_str().unwrap_or("?");
        for t in n["token_list"].as_array().into_iter().flatten() {
            if let Some(t) = t.as_i64() {
                by_dc.entry(dc).or_default().push((t, n));
            }
        }
    }
    let mut out = String::new();
    for (dc, mut tokens) in by_dc {
        tokens.sort_by_key(|(t, _)| *t);
        out.push_str(&format!("\nDatacenter: {dc}\n==========\n"));
        out.push_str(&format!(
            "{:<16}{:<12}{:<7}{:<8}{:<16}{:<20}{}\n",
            "Address", "Rack", "Status", "State", "Load", "Owns", "Token"
        ));
        if let Some((last, _)) = tokens.last() {
            out.push_str(&format!("{:<79}{last}\n", ""));
        }
        for (token, n) in &tokens {
            let (up, status) = state(n);
            let owns = n["owns"]
                .as_f64()
                .map_or("?".to_owned(), |o| format!("{:.2}%", o * 100.0));
            out.push_str(&format!(
                "{:<16}{:<12}{:<7}{:<8}{:<16}{:<20}{token}\n",
                n["address"].as_str().unwrap_or("?"),
                n["rack"].as_str().unwrap_or("?"),
                up,
                status,
                human_bytes(n["load_bytes"].as_u64()),
                owns,
            ));
        }
    }
    out.push('\n');
    out
}

pub fn render_describecluster(doc: &Value) -> String {
    let nodes: Vec<&Value> = doc["nodes"].as_array().into_iter().flatten().collect();
    let mut out = String::from("Cluster Information:\n");
    out.push_str(&format!(
        "\tName: {}\n",
        doc["cluster_name"].as_str().unwrap_or("?")
    ));
    out.push_str(&format!("\tSnitch: {}\n", doc["snitch"].as_str().unwrap_or("?")));
    out.push_str(&format!(
        "\tPartitioner: {}\n",
        doc["partitioner"].as_str().unwrap_or("?")
    ));
    out.push_str("\tSchema versions:\n");
    let mut versions: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for n in &nodes {
        let version = n["schema_version"].as_str().unwrap_or("UNREACHABLE").to_owned();
        versions
            .entry(version)
            .or_default()
            .push(n["address"].as_str().unwrap_or("?"));
    }
    for (version, mut addresses) in versions {
        addresses.sort_unstable();
        out.push_str(&format!("\t\t{version}: [{}]\n", addresses.join(", ")));
    }
    let count = |f: &dyn Fn(&Value) -> bool| nodes.iter().filter(|n| f(n)).count();
    out.push_str("\nStats for all nodes:\n");
    out.push_str(&format!("\tLive: {}\n", count(&|n| n["state"] == "up")));
    out.push_str(&format!("\tJoining: {}\n", count(&|n| n["status"] == "joining")));
    out.push_str("\tMoving: 0\n");
    out.push_str(&format!("\tLeaving: {}\n", count(&|n| n["status"] == "leaving")));
    out.push_str(&format!("\tUnreachable: {}\n", count(&|n| n["state"] != "up")));
    out.push_str("\nData Centers: \n");
    let mut dcs: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for n in &nodes {
        let e = dcs.entry(n["data_center"].as_str().unwrap_or("?")).or_default();
        e.0 += 1;
        if n["state"] != "up" {
            e.1 += 1;
        }
    }
    for (dc, (all, down)) in dcs {
        out.push_str(&format!("\t{dc} #Nodes: {all} #Down: {down}\n"));
    }
    out.push_str("\nDatabase versions:\n");
    let mut releases: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for n in &nodes {
        releases
            .entry(n["release_version"].as_str().unwrap_or("?"))
            .or_default()
            .push(n["address"].as_str().unwrap_or("?"));
    }
    for (release, mut addresses) in releases {
        addresses.sort_unstable();
        out.push_str(&format!("\t{release}: [{}]\n", addresses.join(", ")));
    }
    out.push_str("\nKeyspaces:\n");
    for (name, replication) in doc["keyspaces"].as_object().into_iter().flatten() {
        let class = replication["class"].as_str().unwrap_or("?");
        let options: Vec<String> = replication
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.as_str() != "class")
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("?")))
            .collect();
        out.push_str(&format!(
            "\t{name} -> Replication class: {} {{{}}}\n",
            class.rsplit('.').next().unwrap_or(class),
            options.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> Value {
        serde_json::json!({
            "cluster_name": "c", "partitioner": "org.apache.cassandra.dht.Murmur3Partitioner",
            "snitch": "s",
            "nodes": [
                {"address": "127.0.0.2", "data_center": "dc1", "rack": "r1", "state": "down",
                 "status": "normal", "load_bytes": 1024, "owns": 0.5, "token_list": [-10, 30],
                 "schema_version": null, "release_version": "4.1.0"},
                {"address": "127.0.0.1", "data_center": "dc1", "rack": "r1", "state": "up",
                 "status": "normal", "load_bytes": 2048, "owns": 0.5, "token_list": [20, -40],
                 "schema_version": "v1", "release_version": "4.1.0"}
            ],
            "keyspaces": {"ks": {"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": "2"}}
        })
    }

    #[test]
    fn the_ring_lists_tokens_in_order_after_the_wrap() {
        let text = render_ring(&doc());
        let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(lines[0], "Datacenter: dc1");
        assert!(
            lines[2].starts_with("Address         Rack        Status State"),
            "{text}"
        );
        assert!(lines[3].trim() == "30", "{text}");
        assert!(
            lines[4].starts_with("127.0.0.1       r1          Up     Normal  2.00 KiB        50.00%")
                && lines[4].ends_with("-40"),
            "{text}"
        );
        let tokens: Vec<&str> = lines[4..]
            .iter()
            .map(|l| l.rsplit(' ').next().unwrap_or(""))
            .collect();
        assert_eq!(tokens, ["-40", "-10", "20", "30"]);
        assert!(lines[5].contains("Down   Normal"), "{text}");
    }

    #[test]
    fn describecluster_groups_schema_versions_and_shows_replication() {
        let text = render_describecluster(&doc());
        assert!(text.starts_with("Cluster Information:\n\tName: c\n"), "{text}");
        assert!(
            text.contains("\t\tUNREACHABLE: [127.0.0.2]\n\t\tv1: [127.0.0.1]\n"),
            "{text}"
        );
        assert!(text.contains("\tLive: 1\n"), "{text}");
        assert!(text.contains("\tUnreachable: 1\n"), "{text}");
        assert!(text.contains("\tdc1 #Nodes: 2 #Down: 1\n"), "{text}");
        assert!(text.contains("\t4.1.0: [127.0.0.1, 127.0.0.2]\n"), "{text}");
        assert!(
            text.contains("\tks -> Replication class: SimpleStrategy {replication_factor=2}\n"),
            "{text}"
        );
    }
}
