//! Answers replica placement questions with hayate's ring, for tests that compare it with other
//! implementations (`tests/python/test_ring_placement.py` compares it with the Python driver's).
//!
//! Reads one JSON request on stdin and writes one JSON answer on stdout:
//!
//! ```text
//! {"cases": [{"nodes": [{"host": 0, "dc": "dc1", "rack": "r1", "tokens": [-9000, 42]}, ...],
//!             "replications": [{"class": "SimpleStrategy", "replication_factor": 3},
//!                              {"class": "NetworkTopologyStrategy", "factors": {"dc1": 2}}],
//!             "tokens": [0, 42, 9223372036854775807]}]}
//! ->
//! {"cases": [{"replicas": [[[0, 1, 2], ...], ...], "uncached": [[[0, 1, 2], ...], ...]}]}
//! ```
//!
//! For every case, replication and token, `replicas` holds the hosts (by the numbers the request
//! gave them) that the case's `ReplicaMap` returns, in order, and `uncached` what
//! `TokenRing::replicas_for` returns. A ring that cannot be built gives `{"error": "..."}` for
//! its case.
//!
//! Run: `cargo run -q -p hayate-cluster --example placement < request.json`.

use std::collections::BTreeMap;
use std::io::Read;
use std::process::ExitCode;

use hayate_cluster::consistency::Replication;
use hayate_cluster::node::{HostId, Placement};
use hayate_cluster::ring::{RingNode, TokenRing};
use serde_json::{json, Value};

/// A host's number in the request becomes the last eight bytes of its host id.
fn host_id(number: u64) -> HostId {
    let mut id = [0u8; 16];
    id[8..].copy_from_slice(&number.to_be_bytes());
    HostId(id)
}

fn host_number(id: HostId) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&id.0[8..]);
    u64::from_be_bytes(bytes)
}

fn field<'a>(value: &'a Value, name: &str) -> Result<&'a Value, String> {
    value
        .get(name)
        .ok_or_else(|| format!("missing \"{name}\" in {value}"))
}

fn number(value: &Value) -> Result<i64, String> {
    value
        .as_i64()
        .ok_or_else(|| format!("{value} is not a 64-bit integer"))
}

fn text(value: &Value) -> Result<String, String> {
    value
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{value} is not a string"))
}

fn array(value: &Value) -> Result<&Vec<Value>, String> {
    value.as_array().ok_or_else(|| format!("{value} is not an array"))
}

fn factor(value: &Value) -> Result<usize, String> {
    usize::try_from(number(value)?).map_err(|_| format!("{value} is not a replication factor"))
}

fn replication(value: &Value) -> Result<Replication, String> {
    match text(field(value, "class")?)?.as_str() {
        "SimpleStrategy" => Ok(Replication::Simple {
            factor: factor(field(value, "replication_factor")?)?,
        }),
        "NetworkTopologyStrategy" => {
            let factors = field(value, "factors")?
                .as_object()
                .ok_or_else(|| format!("\"factors\" of {value} is not an object"))?
                .iter()
                .map(|(dc, f)| Ok((dc.clone(), factor(f)?)))
                .collect::<Result<BTreeMap<_, _>, String>>()?;
            Ok(Replication::NetworkTopology { factors })
        }
        "LocalStrategy" => Ok(Replication::Local),
        other => Err(format!("unknown replication class {other}")),
    }
}

fn ring_node(value: &Value) -> Result<RingNode, String> {
    let host = u64::try_from(number(field(value, "host")?)?).map_err(|_| format!("bad host in {value}"))?;
    Ok(RingNode {
        host: host_id(host),
        placement: Placement {
            data_center: text(field(value, "dc")?)?,
            rack: text(field(value, "rack")?)?,
        },
        tokens: array(field(value, "tokens")?)?
            .iter()
            .map(number)
            .collect::<Result<_, _>>()?,
    })
}

fn answer(case: &Value) -> Result<Value, String> {
    let nodes = array(field(case, "nodes")?)?
        .iter()
        .map(ring_node)
        .collect::<Result<Vec<_>, _>>()?;
    let replications = array(field(case, "replications")?)?
        .iter()
        .map(replication)
        .collect::<Result<Vec<_>, _>>()?;
    let tokens = array(field(case, "tokens")?)?
        .iter()
        .map(number)
        .collect::<Result<Vec<_>, _>>()?;
    let ring = match TokenRing::new(nodes) {
        Ok(ring) => ring,
        Err(e) => return Ok(json!({ "error": e.to_string() })),
    };
    let numbers = |hosts: &[HostId]| hosts.iter().map(|&h| host_number(h)).collect::<Vec<_>>();
    let mut cached = Vec::new();
    let mut uncached = Vec::new();
    for replication in &replications {
        let map = ring.replica_map(replication);
        cached.push(
            tokens
                .iter()
                .map(|&t| numbers(map.replicas(t)))
                .collect::<Vec<_>>(),
        );
        uncached.push(
            tokens
                .iter()
                .map(|&t| numbers(&ring.replicas_for(replication, t)))
                .collect::<Vec<_>>(),
        );
    }
    Ok(json!({ "replicas": cached, "uncached": uncached }))
}

fn run() -> Result<Value, String> {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .map_err(|e| format!("cannot read stdin: {e}"))?;
    let request: Value = serde_json::from_str(&input).map_err(|e| format!("the request is not JSON: {e}"))?;
    let cases = array(field(&request, "cases")?)?
        .iter()
        .map(answer)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(json!({ "cases": cases }))
}

fn main() -> ExitCode {
    match run() {
        Ok(answer) => {
            println!("{answer}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("placement: {e}");
            ExitCode::from(2)
        }
    }
}
