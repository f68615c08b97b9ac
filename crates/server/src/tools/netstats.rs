//! `hayate netstats`, as `nodetool netstats`: what a node streams in and out during a topology
//! change, with records and bytes done of the total, the rate and the time left. On a terminal
//! it redraws in place, a bar per stream, while streams run; otherwise it prints plain lines.

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;

use super::say;
use super::status::human_bytes;

const NETSTATS_TIMEOUT: Duration = Duration::from_secs(5);
const REFRESH: Duration = Duration::from_secs(1);
const BAR_WIDTH: usize = 30;

pub fn run(addr: SocketAddr) -> Result<(), String> {
    let doc = fetch(addr)?;
    if !std::io::stdout().is_terminal() || !is_busy(&doc) {
        say!("{}", render(&doc, false));
        return Ok(());
    }
    let mut screen = Screen::default();
    let mut doc = doc;
    loop {
        screen.draw(&render(&doc, true));
        if !is_busy(&doc) {
            return Ok(());
        }
        std::thread::sleep(REFRESH);
        doc = fetch(addr)?;
    }
}

pub fn fetch(addr: SocketAddr) -> Result<Value, String> {
    let body = super::http::get(addr, "/netstats", NETSTATS_TIMEOUT)?;
    serde_json::from_str(&body).map_err(|e| format!("{addr} answered netstats this build cannot read: {e}"))
}

/// Streams run, or a change is in progress.
pub fn is_busy(doc: &Value) -> bool {
    doc["streams"].as_array().is_some_and(|s| !s.is_empty()) || !doc["change"].is_null()
}

/// Redraws a block of lines in place on a terminal.
#[derive(Default)]
pub struct Screen {
    lines: usize,
}

impl Screen {
    pub fn draw(&mut self, text: &str) {
        let mut out = std::io::stdout().lock();
        if self.lines > 0 {
            // Up to the block's first line, and clear from there down.
            let _ = write!(out, "\x1b[{}F\x1b[J", self.lines);
        }
        let _ = write!(out, "{text}");
        let _ = out.flush();
        self.lines = text.lines().count();
    }
}

fn rate(bytes_per_s: f64) -> String {
    format!("{}/s", human_bytes(Some(bytes_per_s as u64)))
}

fn duration(seconds: f64) -> String {
    let s = seconds.round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

fn bar(fraction: f64) -> String {
    let filled = ((fraction.clamp(0.0, 1.0)) * BAR_WIDTH as f64).round() as usize;
    format!(
        "[{}{}] {:>3.0}%",
        "#".repeat(filled),
        "-".repeat(BAR_WIDTH - filled),
        fraction * 100.0
    )
}

/// One stream's line (and its bar, on a terminal).
fn stream_line(s: &Value, bars: bool) -> String {
    let inbound = s["direction"] == "in";
    let peer = s["peer_address"].as_str().unwrap_or("?");
    let bytes_done = s["bytes_done"].as_u64().unwrap_or(0);
    let records_done = s["records_done"].as_u64().unwrap_or(0);
    let mut line = if inbound {
        format!(
            "    Receiving from {peer} ({}): {}/{} ranges, {} records",
            s["purpose"].as_str().unwrap_or("?"),
            s["ranges_done"],
            s["ranges_total"],
            records_done
        )
    } else {
        format!(
            "    Sending to {peer}: {} ranges done, {records_done} records",
            s["ranges_done"]
        )
    };
    if let Some(total) = s["records_total"].as_u64() {
        line.push_str(&format!(" of {total}"));
    }
    line.push_str(&format!(", {}", human_bytes(Some(bytes_done))));
    let total_bytes = s["bytes_total"].as_u64();
    if let Some(total) = total_bytes {
        line.push_str(&format!(" of {}", human_bytes(Some(total))));
    }
    line.push_str(&format!(
        ", {}",
        rate(s["rate_bytes_per_s"].as_f64().unwrap_or(0.0))
    ));
    if let Some(eta) = s["eta_s"].as_f64() {
        line.push_str(&format!(", {} left", duration(eta)));
    }
    let state = s["state"].as_str().unwrap_or("");
    if state != "streaming" {
        line.push_str(&format!(" ({state})"));
    }
    line.push('\n');
    if bars && state == "streaming" {
        if let Some(total) = total_bytes.filter(|t| *t > 0) {
            line.push_str(&format!("      {}\n", bar(bytes_done as f64 / total as f64)));
        }
    }
    line
}

/// The whole report.
pub fn render(doc: &Value, bars: bool) -> String {
    let mut out = format!("Mode: {}\n", doc["mode"].as_str().unwrap_or("?"));
    if let Some(change) = doc["change"]["description"].as_str() {
        out.push_str(&format!("Change in progress: {change}\n"));
    }
    if let Some(handover) = doc["handover"].as_object().filter(|h| !h.is_empty()) {
        out.push_str("Nodes taking ranges over:\n");
        for (node, state) in handover {
            out.push_str(&format!("    {node}: {}\n", state.as_str().unwrap_or("?")));
        }
    }
    let streams = doc["streams"].as_array().cloned().unwrap_or_default();
    if streams.is_empty() {
        out.push_str("Not sending or receiving any streams.\n");
    } else {
        out.push_str("Streams:\n");
        for s in &streams {
            out.push_str(&stream_line(s, bars));
        }
    }
    let finished = doc["finished"].as_array().cloned().unwrap_or_default();
    if !finished.is_empty() && !bars {
        out.push_str("Finished streams:\n");
        for s in finished.iter().take(8) {
            out.push_str(&stream_line(s, false));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_reads_like_netstats() {
        let doc = serde_json::json!({
            "mode": "JOINING",
            "change": {"description": "the join of abc (started at epoch 9)"},
            "handover": {},
            "streams": [{
                "peer_address": "127.0.0.2", "direction": "in", "purpose": "join",
                "ranges_done": 3, "ranges_total": 8, "records_done": 1000, "records_total": 4000,
                "bytes_done": 1u64 << 20, "bytes_total": 4u64 << 20, "rate_bytes_per_s": 1048576.0,
                "eta_s": 3.0, "state": "streaming"
            }],
            "finished": []
        });
        let text = render(&doc, true);
        assert!(
            text.starts_with("Mode: JOINING\nChange in progress: the join of abc"),
            "{text}"
        );
        assert!(
            text.contains("Receiving from 127.0.0.2 (join): 3/8 ranges, 1000 records of 4000, 1.00 MiB of 4.00 MiB, 1.00 MiB/s, 3s left"),
            "{text}"
        );
        assert!(text.contains("[########----------------------]  25%"), "{text}");
        assert!(is_busy(&doc));
        let idle = serde_json::json!({"mode": "NORMAL", "change": null, "streams": [], "finished": []});
        assert_eq!(
            render(&idle, false),
            "Mode: NORMAL\nNot sending or receiving any streams.\n"
        );
        assert!(!is_busy(&idle));
    }
}
