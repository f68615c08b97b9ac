//! `hayate tablestats [KS[.TABLE]]`: what `nodetool tablestats` prints, per keyspace and table,
//! from a node's `/tablestats` document: rows, tombstones, bytes on the device and in the RAM
//! index, and the local read and write latencies (the time the storage engine took, as
//! Cassandra's "Local read latency" is the replica's own).
//!
//! Every figure is counted as the table's index changes, so asking costs no scan. Rows are an
//! estimate as Cassandra's partition count is: a row whose TTL ran out counts until the expiry
//! pass removes it.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;

use super::say;
use super::status::human_bytes;

const TABLESTATS_TIMEOUT: Duration = Duration::from_secs(10);

pub fn run(addr: SocketAddr, filters: &[String], human: bool) -> Result<(), String> {
    let doc = super::http::get_json(addr, "/tablestats", TABLESTATS_TIMEOUT)?;
    say!("{}", render(&doc, filters, human)?);
    Ok(())
}

/// Whether `filters` (`ks` or `ks.table`, none for every table) select this table.
fn selected(filters: &[String], keyspace: &str, table: &str) -> bool {
    filters.is_empty()
        || filters.iter().any(|f| match f.split_once('.') {
            Some((k, t)) => k == keyspace && t == table,
            None => f == keyspace,
        })
}

fn ms(us: &Value) -> String {
    us.as_f64()
        .map_or("NaN ms".to_owned(), |us| format!("{:.3} ms", us / 1000.0))
}

fn bytes(b: &Value, human: bool) -> String {
    match b.as_u64() {
        Some(b) if human => human_bytes(Some(b)),
        Some(b) => b.to_string(),
        None => "?".to_owned(),
    }
}

/// A keyspace's mean latency over its tables' calls.
fn keyspace_mean(tables: &[&Value], which: &str) -> (u64, Value) {
    let mut count = 0u64;
    let mut sum_us = 0.0;
    for t in tables {
        let n = t[which]["count"].as_u64().unwrap_or(0);
        count += n;
        sum_us += t[which]["mean_us"].as_f64().unwrap_or(0.0) * n as f64;
    }
    let mean = if count == 0 {
        Value::Null
    } else {
        Value::from(sum_us / count as f64)
    };
    (count, mean)
}

fn percentiles(l: &Value) -> String {
    let p = |name: &str| {
        l[name]
            .as_f64()
            .map_or("NaN".to_owned(), |us| format!("{:.3}", us / 1000.0))
    };
    format!(
        "p50 {}, p95 {}, p99 {}, max {} ms",
        p("p50_us"),
        p("p95_us"),
        p("p99_us"),
        p("max_us")
    )
}

/// The report; an error when a filter names no keyspace or table the node has.
pub fn render(doc: &Value, filters: &[String], human: bool) -> Result<String, String> {
    let keyspaces = doc["keyspaces"].as_array().cloned().unwrap_or_default();
    for f in filters {
        let found = keyspaces.iter().any(|ks| {
            let name = ks["keyspace"].as_str().unwrap_or_default();
            ks["tables"].as_array().into_iter().flatten().any(|t| {
                selected(
                    std::slice::from_ref(f),
                    name,
                    t["table"].as_str().unwrap_or_default(),
                )
            }) || f == name
        });
        if !found {
            return Err(format!("unknown keyspace or table {f:?}"));
        }
    }
    let mut out = String::new();
    let mut total = 0;
    let mut body = String::new();
    for ks in &keyspaces {
        let name = ks["keyspace"].as_str().unwrap_or("?");
        let tables: Vec<&Value> = ks["tables"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| selected(filters, name, t["table"].as_str().unwrap_or_default()))
            .collect();
        if tables.is_empty() && !filters.iter().any(|f| f == name) {
            continue;
        }
        total += tables.len();
        let (reads, read_mean) = keyspace_mean(&tables, "reads");
        let (writes, write_mean) = keyspace_mean(&tables, "writes");
        body.push_str(&format!("Keyspace : {name}\n"));
        body.push_str(&format!(
            "\tRead Count: {reads}\n\tRead Latency: {}\n",
            ms(&read_mean)
        ));
        body.push_str(&format!(
            "\tWrite Count: {writes}\n\tWrite Latency: {}\n",
            ms(&write_mean)
        ));
        for t in tables {
            let mut line = |k: &str, v: String| body.push_str(&format!("\t\t{k}: {v}\n"));
            line("Table", t["table"].as_str().unwrap_or("?").to_owned());
            line("Rows (estimate)", t["rows"].to_string());
            line("Tombstones", t["tombstones"].to_string());
            line(
                "Partitions with range tombstones",
                t["range_tombstone_partitions"].to_string(),
            );
            line("Space used (live)", bytes(&t["live_bytes"], human));
            line("RAM index used", bytes(&t["index_bytes"], human));
            if let Some(n) = t["index_lookups"].as_u64() {
                line("RAM index lookups", n.to_string());
            }
            line("Local read count", t["reads"]["count"].to_string());
            line("Local read latency", ms(&t["reads"]["mean_us"]));
            line("Local read latency percentiles", percentiles(&t["reads"]));
            line("Local write count", t["writes"]["count"].to_string());
            line("Local write latency", ms(&t["writes"]["mean_us"]));
            line("Local write latency percentiles", percentiles(&t["writes"]));
            body.push('\n');
        }
        body.push_str("----------------\n");
    }
    out.push_str(&format!("Total number of tables: {total}\n"));
    let node = &doc["node"];
    out.push_str(&format!(
        "Node: {} of records live, {} of device blocks in use, {} of RAM index\n",
        bytes(&node["live_bytes"], human),
        bytes(&node["device_bytes_used"], human),
        bytes(&node["index_bytes"], human),
    ));
    out.push_str("----------------\n");
    out.push_str(&body);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> Value {
        let lat = |n: u64, mean: f64| {
            serde_json::json!({"count": n, "mean_us": if n > 0 { Value::from(mean) } else { Value::Null },
                               "p50_us": 100, "p95_us": 200, "p99_us": 300, "max_us": 1000})
        };
        serde_json::json!({
            "node": {"live_bytes": 5000, "device_bytes_used": 131072, "index_bytes": 4096},
            "keyspaces": [
                {"keyspace": "ks", "tables": [
                    {"table": "a", "rows": 95, "tombstones": 5, "range_tombstone_partitions": 0,
                     "live_bytes": 4000, "index_bytes": 2048, "reads": lat(30, 100.0), "writes": lat(10, 50.0)},
                    {"table": "b", "rows": 0, "tombstones": 0, "range_tombstone_partitions": 0,
                     "live_bytes": 0, "index_bytes": 0, "reads": lat(10, 500.0), "writes": lat(0, 0.0)}
                ]},
                {"keyspace": "other", "tables": []}
            ]
        })
    }

    #[test]
    fn tables_read_like_nodetools() {
        let text = render(&doc(), &[], false).expect("render");
        assert!(text.starts_with("Total number of tables: 2\n"), "{text}");
        assert!(
            text.contains("Keyspace : ks\n\tRead Count: 40\n\tRead Latency: 0.200 ms\n"),
            "{text}"
        );
        assert!(
            text.contains("\tWrite Count: 10\n\tWrite Latency: 0.050 ms\n"),
            "{text}"
        );
        assert!(
            text.contains("\t\tTable: a\n\t\tRows (estimate): 95\n\t\tTombstones: 5\n"),
            "{text}"
        );
        assert!(text.contains("\t\tSpace used (live): 4000\n"), "{text}");
        assert!(text.contains("\t\tLocal write latency: NaN ms\n"), "{text}");
        assert!(
            text.contains("p50 0.100, p95 0.200, p99 0.300, max 1.000 ms"),
            "{text}"
        );
        assert!(!text.contains("Keyspace : other"), "{text}");
    }

    #[test]
    fn filters_pick_a_keyspace_or_a_table() {
        let one = render(&doc(), &["ks.b".to_owned()], true).expect("render");
        assert!(one.starts_with("Total number of tables: 1\n"), "{one}");
        assert!(one.contains("Table: b") && !one.contains("Table: a"), "{one}");
        let empty = render(&doc(), &["other".to_owned()], false).expect("render");
        assert!(empty.contains("Keyspace : other"), "{empty}");
        let err = render(&doc(), &["ks.nope".to_owned()], false).expect_err("unknown");
        assert!(err.contains("ks.nope"), "{err}");
    }
}
