//! The `[cluster]` section: where the node sits, how it finds the others, and Cassandra's
//! request timeouts and hint settings.
//!
//! The names follow `cassandra.yaml` and `cassandra-rackdc.properties`: `seeds` (the seed
//! provider's list), `data_center` and `rack` (the snitch's), `num_tokens`, `storage_port`, the
//! `*_request_timeout` settings and `max_hint_window`.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::Deserialize;

use super::ByteSize;

/// Cassandra's limit on a node's virtual nodes.
pub const NUM_TOKENS_MAX: u32 = 1536;
/// A request timeout longer than this is a mistake, not a setting.
pub const REQUEST_TIMEOUT_MAX_MS: u64 = 10 * 60 * 1000;

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// Nodes a new node asks to find the cluster: addresses (`10.0.0.1`) or address and storage
    /// port (`10.0.0.1:7000`). Empty: this node alone, which starts a cluster of its own.
    pub seeds: Vec<String>,
    pub data_center: String,
    pub rack: String,
    /// Virtual nodes this node owns on the token ring (Cassandra 4's default is 16).
    pub num_tokens: u32,
    /// The internode port (TCP for messages, UDP for gossip) on the listen address.
    pub storage_port: u16,
    pub write_request_timeout_ms: u64,
    pub read_request_timeout_ms: u64,
    pub range_request_timeout_ms: u64,
    /// How long a lightweight transaction keeps starting its Paxos round again while other
    /// transactions of its partition get in its way (Cassandra's `cas_contention_timeout`, 1 s).
    pub cas_contention_timeout_ms: u64,
    /// No new hints for a node down longer than this (Cassandra's `max_hint_window`, 3 h).
    pub max_hint_window_ms: u64,
    /// Bytes of hints replayed per second, divided by the number of other nodes (Cassandra's
    /// `hinted_handoff_throttle`, the same default).
    #[serde(rename = "hinted_handoff_throttle")]
    pub hinted_handoff_throttle_bytes: ByteSize,
    /// Hints kept for one node at most (Cassandra's `max_hints_size_per_host`).
    #[serde(rename = "max_hints_size_per_host")]
    pub max_hints_size_per_host_bytes: ByteSize,
    /// How long the first seed waits for the other seeds before it forms the cluster with the
    /// nodes it has found.
    pub formation_wait_ms: u64,
    /// Bytes per second this node streams to others at most, over all its streams (Cassandra's
    /// `stream_throughput_outbound`, the same default); 0: unthrottled.
    #[serde(rename = "stream_throughput")]
    pub stream_throughput_bytes: ByteSize,
    /// Start as the replacement of the dead node at this address (Cassandra's
    /// `-Dcassandra.replace_address_first_boot`): take its tokens and stream its data from the
    /// other replicas. Only for a node's first start; ignored once it is a member.
    pub replace_address: Option<IpAddr>,
    /// How long after a topology change ends a node waits before it drops the ranges it gave
    /// up (requests planned on the old ring end first).
    pub cleanup_delay_ms: u64,
}

impl Default for ClusterConfig {
    fn default() -> ClusterConfig {
        ClusterConfig {
            seeds: Vec::new(),
            data_center: "datacenter1".to_owned(),
            rack: "rack1".to_owned(),
            num_tokens: 16,
            storage_port: 7000,
            write_request_timeout_ms: 2000,
            read_request_timeout_ms: 5000,
            range_request_timeout_ms: 10_000,
            cas_contention_timeout_ms: 1000,
            max_hint_window_ms: 3 * 3600 * 1000,
            hinted_handoff_throttle_bytes: ByteSize(1 << 20),
            max_hints_size_per_host_bytes: ByteSize(1 << 30),
            formation_wait_ms: 10_000,
            stream_throughput_bytes: ByteSize(24 << 20),
            replace_address: None,
            cleanup_delay_ms: 10_000,
        }
    }
}

impl ClusterConfig {
    /// The seeds' gossip addresses; a seed without a port uses this node's storage port (every
    /// node of a cluster normally shares it). Empty seeds: this node itself.
    pub fn seed_addresses(&self, local: SocketAddr) -> Result<Vec<SocketAddr>, String> {
        if self.seeds.is_empty() {
            return Ok(vec![local]);
        }
        self.seeds
            .iter()
            .map(|s| {
                let s = s.trim();
                if let Ok(a) = s.parse::<SocketAddr>() {
                    return Ok(a);
                }
                s.parse::<IpAddr>()
                    .map(|ip| SocketAddr::new(ip, self.storage_port))
                    .map_err(|_| {
                        format!("'{s}' is not an address (10.0.0.1) or an address and port (10.0.0.1:7000)")
                    })
            })
            .collect()
    }

    pub fn write_timeout(&self) -> Duration {
        Duration::from_millis(self.write_request_timeout_ms)
    }

    pub fn read_timeout(&self) -> Duration {
        Duration::from_millis(self.read_request_timeout_ms)
    }

    pub fn cleanup_delay(&self) -> Duration {
        Duration::from_millis(self.cleanup_delay_ms)
    }

    pub fn range_timeout(&self) -> Duration {
        Duration::from_millis(self.range_request_timeout_ms)
    }

    pub fn cas_contention_timeout(&self) -> Duration {
        Duration::from_millis(self.cas_contention_timeout_ms)
    }

    /// The first problem with the section, as (key, value, what is wrong).
    pub(super) fn check(&self) -> Option<(&'static str, String, String)> {
        if self.data_center.trim().is_empty() {
            return Some((
                "cluster.data_center",
                "\"\"".into(),
                "must name a data center".into(),
            ));
        }
        if self.rack.trim().is_empty() {
            return Some(("cluster.rack", "\"\"".into(), "must name a rack".into()));
        }
        if !(1..=NUM_TOKENS_MAX).contains(&self.num_tokens) {
            return Some((
                "cluster.num_tokens",
                self.num_tokens.to_string(),
                format!("must be from 1 to {NUM_TOKENS_MAX} (16 is the default)"),
            ));
        }
        if self.storage_port == 0 {
            return Some((
                "cluster.storage_port",
                "0".into(),
                "must be a port (7000 is the default)".into(),
            ));
        }
        for (key, ms) in [
            ("cluster.write_request_timeout_ms", self.write_request_timeout_ms),
            ("cluster.read_request_timeout_ms", self.read_request_timeout_ms),
            ("cluster.range_request_timeout_ms", self.range_request_timeout_ms),
            (
                "cluster.cas_contention_timeout_ms",
                self.cas_contention_timeout_ms,
            ),
        ] {
            if !(1..=REQUEST_TIMEOUT_MAX_MS).contains(&ms) {
                return Some((
                    key,
                    ms.to_string(),
                    format!("must be from 1 to {REQUEST_TIMEOUT_MAX_MS}"),
                ));
            }
        }
        if self.hinted_handoff_throttle_bytes.0 == 0 {
            return Some((
                "cluster.hinted_handoff_throttle",
                "0".into(),
                "must be at least 1KiB per second".into(),
            ));
        }
        let local = SocketAddr::new(IpAddr::from([127, 0, 0, 1]), self.storage_port);
        if let Err(reason) = self.seed_addresses(local) {
            return Some(("cluster.seeds", format!("{:?}", self.seeds), reason));
        }
        None
    }
}
