//! Replica placement equals Cassandra 5.0's, order included, on the rings of
//! `placement_vectors.json`: 200 random rings (1-8 nodes, 1-3 data centers, 1-4 racks, 1-4
//! tokens a node) with SimpleStrategy and NetworkTopologyStrategy replications, and for each the
//! replicas of every ring token, some of their neighbours, `i64::MIN`, `i64::MIN + 1`,
//! `i64::MAX` and a few random tokens.
//!
//! The expected answers come from `tests/python/test_ring_placement.py`, which computes them by
//! Cassandra 5.0's algorithm, checks them against the Python driver's own replica maps, and also
//! runs hayate on many more rings; this test lets `cargo test` check placement without Python.
//! Regenerate the vectors with
//! `target/pyenv/bin/python tests/python/test_ring_placement.py --write-vectors`.

use std::collections::BTreeMap;

use hayate_cluster::consistency::Replication;
use hayate_cluster::node::{HostId, Placement};
use hayate_cluster::ring::{RingNode, TokenRing};
use serde_json::Value;

const VECTORS: &str = include_str!("placement_vectors.json");

/// A host's number in the vectors is the last eight bytes of its host id (as in the placement
/// example).
fn host_id(number: u64) -> HostId {
    let mut id = [0u8; 16];
    id[8..].copy_from_slice(&number.to_be_bytes());
    HostId(id)
}

fn int(value: &Value) -> i64 {
    value.as_i64().expect("vectors hold 64-bit integers")
}

fn text(value: &Value) -> String {
    value.as_str().expect("vectors hold names as strings").to_owned()
}

fn list(value: &Value) -> &Vec<Value> {
    value.as_array().expect("vectors hold lists")
}

fn replication(value: &Value) -> Replication {
    match value["class"].as_str() {
        Some("SimpleStrategy") => Replication::Simple {
            factor: int(&value["replication_factor"]) as usize,
        },
        Some("NetworkTopologyStrategy") => Replication::NetworkTopology {
            factors: value["factors"]
                .as_object()
                .expect("factors by data center")
                .iter()
                .map(|(dc, f)| (dc.clone(), int(f) as usize))
                .collect::<BTreeMap<_, _>>(),
        },
        Some("LocalStrategy") => Replication::Local,
        other => panic!("unknown replication class {other:?}"),
    }
}

fn ring(case: &Value) -> TokenRing {
    let nodes = list(&case["nodes"])
        .iter()
        .map(|n| RingNode {
            host: host_id(int(&n["host"]) as u64),
            placement: Placement {
                data_center: text(&n["dc"]),
                rack: text(&n["rack"]),
            },
            tokens: list(&n["tokens"]).iter().map(int).collect(),
        })
        .collect();
    TokenRing::new(nodes).expect("the vectors' rings are valid")
}

#[test]
fn placement_equals_cassandra_on_every_vector() {
    let vectors: Value = serde_json::from_str(VECTORS).expect("placement_vectors.json is JSON");
    let cases = list(&vectors["cases"]);
    assert!(cases.len() >= 100, "the vectors file lost its cases");
    let mut answers = 0;
    for (index, case) in cases.iter().enumerate() {
        let ring = ring(case);
        let tokens: Vec<i64> = list(&case["tokens"]).iter().map(int).collect();
        for (replication_json, expected) in list(&case["replications"]).iter().zip(list(&case["expected"])) {
            let replication = replication(replication_json);
            let map = ring.replica_map(&replication);
            for (&token, want) in tokens.iter().zip(list(expected)) {
                let want: Vec<HostId> = list(want).iter().map(|h| host_id(int(h) as u64)).collect();
                let context = format!("case {index}, {replication_json} at token {token}");
                assert_eq!(map.replicas(token), want.as_slice(), "{context} (ReplicaMap)");
                assert_eq!(
                    ring.replicas_for(&replication, token),
                    want,
                    "{context} (replicas_for)"
                );
                answers += 1;
            }
        }
    }
    eprintln!("{} rings, {answers} placements equal Cassandra's", cases.len());
}
