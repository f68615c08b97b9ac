//! `hayate decommission`, `hayate removenode`, `hayate cleanup`: an operator's topology
//! operations, as `nodetool` has them. Each asks a node's HTTP endpoint (which takes them only
//! from the node's own machine), then follows the node's netstats until the change is over,
//! showing its streams as `hayate netstats` does.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::netstats::{self, Screen};
use super::say;

/// How long the node may take to start an operation (it proposes it to the metadata log).
const START_TIMEOUT: Duration = Duration::from_secs(90);
/// How long a cleanup may take (it waits for every node to drain, then drops ranges).
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(600);
const POLL: Duration = Duration::from_secs(1);
/// Polls in a row that must find a decommissioning node NORMAL with no change before the tool
/// calls the decommission aborted.
const ABORTED_AFTER_POLLS: u32 = 5;
/// How often progress is printed where it cannot be redrawn.
const PLAIN_PROGRESS_INTERVAL: Duration = Duration::from_secs(10);

/// What a wait for a change concludes from the node's netstats: `None` to go on waiting.
type Verdict = Option<Result<String, String>>;

pub fn decommission(addr: SocketAddr) -> Result<(), String> {
    let started = start(addr, "/decommission")?;
    say!("{started}\n");
    let normal_polls = std::cell::Cell::new(0u32);
    let done =
        follow(addr, |doc| match doc {
            // The node stops once it has left the ring.
            None => Some(Ok("decommissioned: the node left the ring and stopped".to_owned())),
            Some(doc) if doc["mode"] == "DECOMMISSIONED" => Some(Ok(
                "decommissioned: the node left the ring and is stopping".to_owned(),
            )),
            Some(doc) if doc["change"].is_null() && doc["mode"] == "NORMAL" => {
                // Just after the log removes the node from the ring, it reads NORMAL with no change
                // for a moment, until it says DECOMMISSIONED (or stops): aborted only if it stays so.
                normal_polls.set(normal_polls.get() + 1);
                (normal_polls.get() >= ABORTED_AFTER_POLLS).then(|| {
                    Err("the decommission ended without the node leaving the ring (aborted): its log says why"
                    .to_owned())
                })
            }
            Some(_) => {
                normal_polls.set(0);
                None
            }
        })?;
    say!("{done}\n");
    Ok(())
}

pub fn removenode(addr: SocketAddr, host_id: &str) -> Result<(), String> {
    if host_id == "status" {
        let doc = netstats::fetch(addr)?;
        match doc["change"]["kind"].as_str() {
            Some("removenode") => say!("{}", netstats::render(&doc, false)),
            _ => say!("RemovalStatus: No removals in process.\n"),
        }
        return Ok(());
    }
    let started = start(addr, &format!("/removenode?host={host_id}"))?;
    say!("{started}\n");
    let done = follow(addr, |doc| match doc {
        None => Some(Err(
            "the node driving the removal stopped answering; run removenode again to resume".to_owned(),
        )),
        Some(doc) if doc["change"]["kind"] != "removenode" || doc["change"]["subject"] != host_id => {
            Some(Ok(format!("{host_id} is no longer in the ring")))
        }
        Some(_) => None,
    })?;
    say!("{done}\n");
    Ok(())
}

pub fn cleanup(addr: SocketAddr) -> Result<(), String> {
    match super::http::request(addr, "POST", "/cleanup", CLEANUP_TIMEOUT)? {
        (200, body) => {
            say!("{}\n", body.trim());
            Ok(())
        }
        (_, body) => Err(body.trim().to_owned()),
    }
}

/// Asks the node to start an operation; its answer, or its refusal as the error.
fn start(addr: SocketAddr, path: &str) -> Result<String, String> {
    match super::http::request(addr, "POST", path, START_TIMEOUT)? {
        (200 | 202, body) => Ok(body.trim().to_owned()),
        (_, body) => Err(body.trim().to_owned()),
    }
}

/// Follows the node's netstats, showing the streams, until `verdict` has one (given `None`
/// when the node does not answer).
pub fn follow(addr: SocketAddr, verdict: impl Fn(Option<&Value>) -> Verdict) -> Result<String, String> {
    let terminal = std::io::stdout().is_terminal();
    let mut screen = Screen::default();
    let mut last_plain = None::<Instant>;
    loop {
        let doc = netstats::fetch(addr).ok();
        if let Some(done) = verdict(doc.as_ref()) {
            return done;
        }
        if let Some(doc) = &doc {
            if terminal {
                screen.draw(&netstats::render(doc, true));
            } else if last_plain.is_none_or(|t| t.elapsed() >= PLAIN_PROGRESS_INTERVAL) {
                say!("{}", netstats::render(doc, false));
                last_plain = Some(Instant::now());
            }
        }
        std::thread::sleep(POLL);
    }
}
