//! `hayate info`: what `nodetool info` prints, from a node's `/info` document. Cassandra's heap
//! is hayate's RAM index and process memory, its key cache the post-write cache (recently
//! written blocks kept in RAM, which serve reads without a device read).
//!
//! ```text
//! ID                     : 3f2b6a1c-0d4e-4a5b-9c8d-7e6f5a4b3c2d
//! Gossip active          : true
//! Native Transport active: true
//! Load                   : 1.21 MiB
//! ```

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;

use super::say;
use super::status::human_bytes;

const INFO_TIMEOUT: Duration = Duration::from_secs(5);

pub fn run(addr: SocketAddr, tokens: bool) -> Result<(), String> {
    let doc = super::http::get_json(addr, "/info", INFO_TIMEOUT)?;
    say!("{}", render(&doc, tokens));
    Ok(())
}

fn mib(bytes: &Value) -> String {
    bytes.as_u64().map_or("?".to_owned(), |b| {
        format!("{:.2}", b as f64 / (1u64 << 20) as f64)
    })
}

fn or_na(v: &Value) -> String {
    match v {
        Value::Null => "n/a".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub fn render(doc: &Value, all_tokens: bool) -> String {
    let mut out = String::new();
    let mut line = |name: &str, value: String| out.push_str(&format!("{name:<23}: {value}\n"));
    line("ID", or_na(&doc["host_id"]));
    line("Gossip active", or_na(&doc["gossip_active"]));
    line("Native Transport active", or_na(&doc["native_transport_active"]));
    line("Mode", or_na(&doc["mode"]));
    line("Load", human_bytes(doc["load_bytes"].as_u64()));
    line("Generation No", or_na(&doc["generation"]));
    line("Uptime (seconds)", or_na(&doc["uptime_s"]));
    line(
        "RAM index (MiB)",
        format!(
            "{} (+ {} of deltas)",
            mib(&doc["index_bytes"]),
            mib(&doc["delta_bytes"])
        ),
    );
    line("Process memory (MiB)", mib(&doc["resident_bytes"]));
    line(
        "Device (MiB)",
        format!(
            "{} / {}",
            mib(&doc["device_bytes_used"]),
            mib(&doc["device_bytes_total"])
        ),
    );
    line("Data Center", or_na(&doc["data_center"]));
    line("Rack", or_na(&doc["rack"]));
    line(
        "Exceptions",
        format!(
            "{} ({} errors answered to clients, {} device read errors)",
            doc["server_errors"].as_u64().unwrap_or(0) + doc["device_read_errors"].as_u64().unwrap_or(0),
            doc["errors"].as_u64().unwrap_or(0),
            doc["device_read_errors"].as_u64().unwrap_or(0),
        ),
    );
    let cache = &doc["cache"];
    let hits = cache["hits"].as_u64().unwrap_or(0);
    let requests = hits + cache["device_reads"].as_u64().unwrap_or(0);
    let rate = if requests == 0 {
        "NaN".to_owned()
    } else {
        format!("{:.3}", hits as f64 / requests as f64)
    };
    line(
        "Post-write cache",
        format!(
            "size {} bytes, capacity {} bytes, {hits} hits, {requests} requests, {rate} hit rate",
            cache["bytes"].as_u64().unwrap_or(0),
            cache["capacity_bytes"].as_u64().unwrap_or(0),
        ),
    );
    line(
        "Percent Repaired",
        "n/a (hayate keeps no repaired set)".to_owned(),
    );
    let tokens: Vec<String> = doc["tokens"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t.to_string())
        .collect();
    if all_tokens {
        for t in &tokens {
            line("Token", t.clone());
        }
    } else {
        line(
            "Token",
            format!("(invoke with -T/--tokens to see all {} tokens)", tokens.len()),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_reads_like_nodetools() {
        let doc = serde_json::json!({
            "host_id": "abc", "gossip_active": true, "native_transport_active": true,
            "mode": "NORMAL", "load_bytes": 2048, "generation": 1700000000, "uptime_s": 12,
            "index_bytes": 1u64 << 20, "delta_bytes": 0, "resident_bytes": 100u64 << 20,
            "device_bytes_used": 1u64 << 20, "device_bytes_total": 256u64 << 20,
            "data_center": "datacenter1", "rack": "rack1", "errors": 3, "server_errors": 1,
            "device_read_errors": 0,
            "cache": {"bytes": 10, "capacity_bytes": 100, "hits": 3, "device_reads": 1},
            "tokens": [-5, 7]
        });
        let text = render(&doc, false);
        assert!(text.starts_with("ID                     : abc\n"), "{text}");
        assert!(text.contains("Native Transport active: true\n"), "{text}");
        assert!(text.contains("Load                   : 2.00 KiB\n"), "{text}");
        assert!(
            text.contains("RAM index (MiB)        : 1.00 (+ 0.00 of deltas)\n"),
            "{text}"
        );
        assert!(text.contains("Exceptions             : 1 (3 errors"), "{text}");
        assert!(text.contains("3 hits, 4 requests, 0.750 hit rate"), "{text}");
        assert!(text.contains("Token                  : (invoke with -T/--tokens to see all 2 tokens)"));
        let all = render(&doc, true);
        assert!(
            all.contains("Token                  : -5\nToken                  : 7\n"),
            "{all}"
        );
    }
}
