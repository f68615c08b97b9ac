//! Who a node is: its host id, where it listens, and where it sits (data center and rack).

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A node's identity for life, as Cassandra's host id: a UUID made at its first start and kept
/// in its data directory. Addresses may change; the host id does not.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostId(pub [u8; 16]);

impl HostId {
    pub const BYTES: usize = 16;

    /// The 64-bit number Raft knows this node by: the first eight bytes of the host id.
    /// Two host ids that agree in them are refused at join (a random UUID makes it a
    /// one-in-2^61 event).
    pub fn raft_id(self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[..8]);
        u64::from_be_bytes(b)
    }
}

impl fmt::Display for HostId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        for (i, byte) in b.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for HostId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HostId({self})")
    }
}

/// A host id that is not a UUID in its usual text form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadHostId(pub String);

impl fmt::Display for BadHostId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "'{}' is not a host id (a UUID such as 3f2b6a1c-0d4e-4a5b-9c8d-7e6f5a4b3c2d)",
            self.0
        )
    }
}

impl std::error::Error for BadHostId {}

impl FromStr for HostId {
    type Err = BadHostId;

    fn from_str(s: &str) -> Result<HostId, BadHostId> {
        let hex: String = s.chars().filter(|&c| c != '-').collect();
        if !s.is_ascii() || hex.len() != 32 || s.len() != 36 {
            return Err(BadHostId(s.to_owned()));
        }
        let mut out = [0u8; 16];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| BadHostId(s.to_owned()))?;
        }
        Ok(HostId(out))
    }
}

// Host ids travel in the cluster metadata (its Raft log, snapshots and messages) as their text
// form, so those files read as a person would write the id, and a host id can key a JSON map.
impl Serialize for HostId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HostId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<HostId, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Where a node sits in the topology, which replica placement reads.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Placement {
    pub data_center: String,
    pub rack: String,
}

/// What every node knows about every other: identity, addresses and placement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub host_id: HostId,
    pub placement: Placement,
    /// The node's own address: internode messages, gossip and (by default) CQL and metrics bind
    /// to it, so several nodes can share one machine on 127.0.0.x.
    pub listen_address: IpAddr,
    /// The internode port (Cassandra's `storage_port`): TCP for messages, UDP for gossip.
    pub storage_port: u16,
    /// Where drivers connect.
    pub cql_address: SocketAddr,
    /// The Cassandra version this node reports, as `system.peers.release_version`.
    pub release_version: String,
}

impl NodeInfo {
    pub fn storage_address(&self) -> SocketAddr {
        SocketAddr::new(self.listen_address, self.storage_port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_ids_round_trip_through_their_text() {
        let id = HostId([
            0x3f, 0x2b, 0x6a, 0x1c, 0x0d, 0x4e, 0x4a, 0x5b, 0x9c, 0x8d, 0x7e, 0x6f, 0x5a, 0x4b, 0x3c, 0x2d,
        ]);
        let text = id.to_string();
        assert_eq!(text, "3f2b6a1c-0d4e-4a5b-9c8d-7e6f5a4b3c2d");
        assert_eq!(text.parse::<HostId>(), Ok(id));
        assert!("3f2b6a1c0d4e4a5b9c8d7e6f5a4b3c2d".parse::<HostId>().is_err());
        assert!("zz2b6a1c-0d4e-4a5b-9c8d-7e6f5a4b3c2d".parse::<HostId>().is_err());
    }
}
