//! The application state a node publishes in its chitchat key-values, and how a peer's keys are
//! read back into a [`PeerState`]. The key names are listed in the module comment of
//! [`crate::membership`]; this file is their only spelling.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;

use crate::node::{HostId, NodeInfo, Placement};

use super::{NodeStatus, PeerState};

/// The node's data center.
pub(crate) const KEY_DATA_CENTER: &str = "dc";
/// The node's rack.
pub(crate) const KEY_RACK: &str = "rack";
/// `joining`, `normal`, `leaving` or `shutdown` ([`NodeStatus::as_str`]).
pub(crate) const KEY_STATUS: &str = "status";
/// The internode (TCP) address, `listen_address:storage_port`.
pub(crate) const KEY_STORAGE: &str = "storage";
/// Where drivers connect, `ip:port`.
pub(crate) const KEY_CQL: &str = "cql";
/// The Cassandra release the node reports.
pub(crate) const KEY_RELEASE: &str = "release";
/// The schema version, as UUID text. Absent until the node has a schema.
pub(crate) const KEY_SCHEMA: &str = "schema";
/// Bytes of data the node holds, in decimal. Absent until the node has measured it.
pub(crate) const KEY_LOAD: &str = "load";
/// The prefix of the keys [`crate::membership::Membership::set`] publishes, so that they can
/// never collide with ours, today's or tomorrow's.
pub(crate) const APPLICATION_KEY_PREFIX: &str = "app.";

/// The longest key [`crate::membership::Membership::set`] accepts, without its prefix.
pub const APPLICATION_KEY_BYTES_MAX: usize = 64;
/// The longest value [`crate::membership::Membership::set`] accepts. Every value travels in
/// every full gossip exchange with a newcomer, inside a UDP datagram of 64 KiB shared by all
/// the nodes' state.
pub const APPLICATION_VALUE_BYTES_MAX: usize = 1024;
/// How many distinct keys [`crate::membership::Membership::set`] accepts over the life of a
/// node (keys are never deleted: a value can be replaced, not withdrawn).
pub const APPLICATION_KEYS_MAX: usize = 32;

/// The key-values a node starts gossiping with.
pub(crate) fn initial_key_values(info: &NodeInfo, status: NodeStatus) -> Vec<(String, String)> {
    vec![
        (KEY_DATA_CENTER.to_owned(), info.placement.data_center.clone()),
        (KEY_RACK.to_owned(), info.placement.rack.clone()),
        (KEY_STATUS.to_owned(), status.as_str().to_owned()),
        (KEY_STORAGE.to_owned(), info.storage_address().to_string()),
        (KEY_CQL.to_owned(), info.cql_address.to_string()),
        (KEY_RELEASE.to_owned(), info.release_version.clone()),
    ]
}

/// A key a peer publishes is missing or unreadable, so its state cannot be told yet (a
/// newcomer's keys arrive a gossip round after its heartbeat) or ever (another program).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BadKey {
    pub key: &'static str,
    pub value: Option<String>,
}

impl fmt::Display for BadKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            None => write!(f, "gossip key '{}' is missing", self.key),
            Some(value) => write!(f, "gossip key '{}' has an unreadable value '{value}'", self.key),
        }
    }
}

/// Reads a peer's published keys. `get` looks one key up; `application` lists the keys under
/// [`APPLICATION_KEY_PREFIX`] (with the prefix).
pub(crate) fn decode_peer<'a>(
    host_id: HostId,
    generation: u64,
    gossip_address: SocketAddr,
    get: impl Fn(&str) -> Option<&'a str>,
    application: impl Iterator<Item = (&'a str, &'a str)>,
) -> Result<PeerState, BadKey> {
    let required = |key: &'static str| get(key).ok_or(BadKey { key, value: None });
    let parsed = |key: &'static str| -> Result<SocketAddr, BadKey> {
        let text = required(key)?;
        text.parse().map_err(|_| BadKey {
            key,
            value: Some(text.to_owned()),
        })
    };
    let storage = parsed(KEY_STORAGE)?;
    let cql_address = parsed(KEY_CQL)?;
    let status_text = required(KEY_STATUS)?;
    let status = NodeStatus::parse(status_text).ok_or_else(|| BadKey {
        key: KEY_STATUS,
        value: Some(status_text.to_owned()),
    })?;
    let schema_version = match get(KEY_SCHEMA) {
        None => None,
        Some(text) => Some(text.parse::<HostId>().map(|uuid| uuid.0).map_err(|_| BadKey {
            key: KEY_SCHEMA,
            value: Some(text.to_owned()),
        })?),
    };
    let load_bytes = match get(KEY_LOAD) {
        None => None,
        Some(text) => Some(text.parse::<u64>().map_err(|_| BadKey {
            key: KEY_LOAD,
            value: Some(text.to_owned()),
        })?),
    };
    let application: BTreeMap<String, String> = application
        .filter_map(|(key, value)| {
            key.strip_prefix(APPLICATION_KEY_PREFIX)
                .map(|key| (key.to_owned(), value.to_owned()))
        })
        .collect();
    Ok(PeerState {
        info: NodeInfo {
            host_id,
            placement: Placement {
                data_center: required(KEY_DATA_CENTER)?.to_owned(),
                rack: required(KEY_RACK)?.to_owned(),
            },
            listen_address: storage.ip(),
            storage_port: storage.port(),
            cql_address,
            release_version: required(KEY_RELEASE)?.to_owned(),
        },
        alive: false,
        status,
        schema_version,
        load_bytes,
        generation,
        gossip_address,
        application,
    })
}

/// A schema version as the UUID text it is gossiped as.
pub(crate) fn schema_text(version: [u8; 16]) -> String {
    // A host id prints as a UUID, which is what a schema version is too.
    HostId(version).to_string()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn info() -> NodeInfo {
        NodeInfo {
            host_id: HostId([7; 16]),
            placement: Placement {
                data_center: "dc1".to_owned(),
                rack: "r2".to_owned(),
            },
            listen_address: "127.0.0.3".parse().expect("an address"),
            storage_port: 7000,
            cql_address: "127.0.0.3:9042".parse().expect("an address"),
            release_version: "4.1.0".to_owned(),
        }
    }

    #[test]
    fn a_node_reads_back_what_it_published() {
        let mut keys: HashMap<String, String> = initial_key_values(&info(), NodeStatus::Joining)
            .into_iter()
            .collect();
        keys.insert(KEY_SCHEMA.to_owned(), schema_text([0xab; 16]));
        keys.insert(KEY_LOAD.to_owned(), "12345".to_owned());
        keys.insert(format!("{APPLICATION_KEY_PREFIX}tokens"), "3".to_owned());
        let gossip: SocketAddr = "127.0.0.3:7000".parse().expect("an address");
        let peer = decode_peer(
            HostId([7; 16]),
            42,
            gossip,
            |key| keys.get(key).map(String::as_str),
            keys.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        )
        .expect("every key is there");
        assert_eq!(peer.info, info());
        assert_eq!(peer.status, NodeStatus::Joining);
        assert_eq!(peer.schema_version, Some([0xab; 16]));
        assert_eq!(peer.load_bytes, Some(12345));
        assert_eq!(peer.generation, 42);
        assert_eq!(peer.application.get("tokens").map(String::as_str), Some("3"));
        assert_eq!(peer.application.len(), 1);
    }

    #[test]
    fn a_missing_or_unreadable_key_is_named() {
        let mut keys: HashMap<String, String> = initial_key_values(&info(), NodeStatus::Normal)
            .into_iter()
            .collect();
        keys.remove(KEY_RELEASE);
        let gossip: SocketAddr = "127.0.0.3:7000".parse().expect("an address");
        let decode = |keys: &HashMap<String, String>| {
            decode_peer(
                HostId([7; 16]),
                1,
                gossip,
                |key| keys.get(key).map(String::as_str),
                std::iter::empty(),
            )
        };
        assert_eq!(
            decode(&keys),
            Err(BadKey {
                key: KEY_RELEASE,
                value: None
            })
        );
        keys.insert(KEY_RELEASE.to_owned(), "4.1.0".to_owned());
        keys.insert(KEY_STATUS.to_owned(), "moving".to_owned());
        assert_eq!(
            decode(&keys),
            Err(BadKey {
                key: KEY_STATUS,
                value: Some("moving".to_owned())
            })
        );
    }
}
