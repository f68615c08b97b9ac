//! `hayate flush`, `hayate drain`, `hayate setlogginglevel`, `hayate getlogginglevels` and
//! `hayate defragstats`: a node's upkeep, as `nodetool` has it. The operations are taken only
//! from the node's own machine.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::say;
use super::status::human_bytes;

/// How long a flush or a drain may take: writing what the write buffer holds and syncing.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(120);
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long `defragstats` watches the counters to give a rate.
const RATE_WINDOW: Duration = Duration::from_secs(1);

/// Flushes every write to the device. The keyspaces and tables named are checked against the
/// schema; all tables share the write blocks, so every table is flushed.
pub fn flush(addr: SocketAddr, keyspace: Option<&str>, tables: &[String]) -> Result<(), String> {
    if let Some(ks) = keyspace {
        let doc = super::http::get_json(addr, "/tablestats", READ_TIMEOUT)?;
        check_names(&doc, ks, tables)?;
    }
    let answer = super::http::post(addr, "/flush", FLUSH_TIMEOUT)?;
    say!("{answer}\n");
    Ok(())
}

fn check_names(doc: &Value, keyspace: &str, tables: &[String]) -> Result<(), String> {
    let ks = doc["keyspaces"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|k| k["keyspace"] == keyspace)
        .ok_or_else(|| format!("unknown keyspace {keyspace:?}"))?;
    for t in tables {
        if !ks["tables"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|x| x["table"] == t.as_str())
        {
            return Err(format!("unknown table {keyspace}.{t}"));
        }
    }
    Ok(())
}

pub fn drain(addr: SocketAddr) -> Result<(), String> {
    let answer = super::http::post(addr, "/drain", FLUSH_TIMEOUT)?;
    say!("{answer}\n");
    Ok(())
}

/// `setlogginglevel [TARGET] LEVEL`; with neither, the filter the node started with.
pub fn setlogginglevel(addr: SocketAddr, args: &[String]) -> Result<(), String> {
    let path = match args {
        [] => "/logging".to_owned(),
        [level] => format!("/logging?level={}", encode(level)),
        [target, level] => format!("/logging?target={}&level={}", encode(target), encode(level)),
        _ => return Err("give at most a target and a level: setlogginglevel [TARGET] LEVEL".to_owned()),
    };
    let answer = super::http::post(addr, &path, READ_TIMEOUT)?;
    say!("{answer}\n");
    Ok(())
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub fn getlogginglevels(addr: SocketAddr) -> Result<(), String> {
    let doc = super::http::get_json(addr, "/logging", READ_TIMEOUT)?;
    say!("{}", render_levels(&doc));
    Ok(())
}

pub fn render_levels(doc: &Value) -> String {
    let mut out = format!("\n{:<50}{:>10}\n", "Logger Name", "Log Level");
    for pair in doc["levels"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "{:<50}{:>10}\n",
            pair[0].as_str().unwrap_or("?"),
            pair[1].as_str().unwrap_or("?")
        ));
    }
    out
}

/// Two readings a second apart, for the rate.
pub fn defragstats(addr: SocketAddr) -> Result<(), String> {
    let first = super::http::get_json(addr, "/defragstats", READ_TIMEOUT)?;
    let started = Instant::now();
    std::thread::sleep(RATE_WINDOW);
    let second = super::http::get_json(addr, "/defragstats", READ_TIMEOUT)?;
    let moved = second["bytes_moved"]
        .as_u64()
        .unwrap_or(0)
        .saturating_sub(first["bytes_moved"].as_u64().unwrap_or(0));
    let rate = moved as f64 / started.elapsed().as_secs_f64();
    say!("{}", render_defrag(&second, rate));
    Ok(())
}

pub fn render_defrag(doc: &Value, rate_bytes_per_s: f64) -> String {
    let n = |k: &str| doc[k].as_u64().unwrap_or(0);
    let pending = n("pending_blocks");
    let mut out = format!("pending tasks: {pending}\n");
    out.push_str(&format!(
        "- blocks below the low-water mark ({}% live): {pending}, holding {} live to move\n",
        n("lwm_pct"),
        human_bytes(Some(n("pending_live_bytes")))
    ));
    out.push_str(&format!("defragmenting now: {} blocks\n", n("defragging_blocks")));
    out.push_str(&format!(
        "defragmented since start: {} blocks, {} moved\n",
        n("blocks_defragged"),
        human_bytes(Some(n("bytes_moved")))
    ));
    out.push_str(&format!(
        "rate: {}/s (over the last second)\n",
        human_bytes(Some(rate_bytes_per_s as u64))
    ));
    let total = n("total_blocks");
    out.push_str(&format!(
        "free blocks: {} of {total} ({:.1}%), {} each\n",
        n("free_blocks"),
        100.0 * n("free_blocks") as f64 / total.max(1) as f64,
        human_bytes(Some(n("block_size_bytes")))
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defragstats_reads_like_compactionstats() {
        let doc = serde_json::json!({"lwm_pct": 50, "pending_blocks": 3, "pending_live_bytes": 2048,
            "defragging_blocks": 1, "blocks_defragged": 12, "bytes_moved": 1u64 << 20,
            "free_blocks": 64, "total_blocks": 256, "block_size_bytes": 1u64 << 20});
        let text = render_defrag(&doc, 1048576.0);
        assert!(text.starts_with("pending tasks: 3\n"), "{text}");
        assert!(
            text.contains("(50% live): 3, holding 2.00 KiB live to move"),
            "{text}"
        );
        assert!(
            text.contains("defragmented since start: 12 blocks, 1.00 MiB moved"),
            "{text}"
        );
        assert!(text.contains("rate: 1.00 MiB/s"), "{text}");
        assert!(
            text.contains("free blocks: 64 of 256 (25.0%), 1.00 MiB each"),
            "{text}"
        );
    }

    #[test]
    fn levels_read_like_nodetools() {
        let doc = serde_json::json!({"levels": [["ROOT", "INFO"], ["hayate_storage", "DEBUG"]]});
        let text = render_levels(&doc);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            ["Logger", "Name", "Log", "Level"]
        );
        assert!(
            lines[2].starts_with("ROOT") && lines[2].ends_with("INFO"),
            "{text}"
        );
        assert_eq!(lines[2].len(), 60);
        assert_eq!(encode("hayate_storage::defrag"), "hayate_storage%3A%3Adefrag");
    }

    #[test]
    fn flush_checks_the_names_it_is_given() {
        let doc = serde_json::json!({"keyspaces": [{"keyspace": "ks", "tables": [{"table": "t"}]}]});
        assert!(check_names(&doc, "ks", &["t".to_owned()]).is_ok());
        assert!(check_names(&doc, "ks", &["u".to_owned()]).is_err());
        assert!(check_names(&doc, "nope", &[]).is_err());
    }
}
