//! The first bytes on every internode connection: who is calling, for which cluster, on which
//! lane, and which frame version both sides will use.
//!
//! ```text
//!  hello (connecting node -> accepting node)
//!  0        4     5     6                          22        24
//!  +--------+-----+-----+--------------------------+---------+---------------------+
//!  | magic  | max |lane |      sender host id      |  name   |    cluster name     |
//!  | HYT1   | ver | u8  |         16 bytes         | len u16 |  UTF-8, len bytes   |
//!  +--------+-----+-----+--------------------------+---------+---------------------+
//!
//!  reply (accepting node -> connecting node)
//!  0        4     5
//!  +--------+-----+
//!  | magic  | ver |    ver 0: refused
//!  | HYT1   | u8  |
//!  +--------+-----+
//! ```
//!
//! The acceptor answers with the smaller of the caller's `max ver` and its own [`VERSION`], and
//! both sides then write frames of that version. It refuses (version 0, then closes, and logs
//! why) a caller from another cluster, so that two clusters on one machine never exchange data,
//! and a caller whose newest version is older than its [`VERSION_MIN`]. After the reply the
//! connection carries frames one way only, from the caller: a node sends its answers on its own
//! outbound connection.

use std::fmt;

use super::wire::{put_u16, put_u8};
use super::{Lane, VERSION, VERSION_MIN};
use crate::node::HostId;

pub const MAGIC: [u8; 4] = *b"HYT1";
/// The hello up to the cluster name.
pub const HELLO_FIXED_BYTES: usize = 24;
const _: () = assert!(HELLO_FIXED_BYTES == 4 + 1 + 1 + HostId::BYTES + 2);
pub const HELLO_REPLY_BYTES: usize = 5;
/// The longest cluster name a hello may carry.
pub const CLUSTER_NAME_BYTES_MAX: usize = 1024;
/// The reply's version byte when the acceptor refuses the connection.
pub const REFUSED: u8 = 0;

const _: () = assert!(VERSION_MIN > REFUSED);

/// What a connecting node says first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The newest frame version the caller speaks.
    pub max_version: u8,
    pub lane: Lane,
    pub sender: HostId,
    pub cluster_name: String,
}

/// The fixed part of a hello, before the cluster name is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HelloHead {
    pub max_version: u8,
    pub lane: Lane,
    pub sender: HostId,
    pub cluster_name_bytes: usize,
}

/// The acceptor's answer: the version both sides use, or [`REFUSED`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HelloReply {
    pub version: u8,
}

#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandshakeError {
    /// Not a hayate node (or a hayate of a wholly different protocol generation).
    BadMagic {
        found: [u8; 4],
    },
    UnknownLane {
        tag: u8,
    },
    ClusterNameTooLong {
        len_bytes: usize,
        max_bytes: usize,
    },
    BadUtf8,
    Truncated,
    /// The caller belongs to another cluster.
    OtherCluster {
        ours: String,
        theirs: String,
    },
    /// The two builds share no frame version.
    NoCommonVersion {
        theirs_max: u8,
    },
    /// The acceptor refused us; its log says why.
    Refused,
    /// The acceptor answered with a version we never offered.
    BadVersion {
        version: u8,
    },
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::BadMagic { found } => write!(
                f,
                "connection does not start with the internode magic (got {found:02x?}); something \
                 other than a hayate node is talking to the storage port"
            ),
            HandshakeError::UnknownLane { tag } => write!(f, "unknown connection lane {tag}"),
            HandshakeError::ClusterNameTooLong { len_bytes, max_bytes } => {
                write!(f, "cluster name of {len_bytes} bytes exceeds {max_bytes}")
            }
            HandshakeError::BadUtf8 => write!(f, "cluster name is not UTF-8"),
            HandshakeError::Truncated => write!(f, "handshake cut short"),
            HandshakeError::OtherCluster { ours, theirs } => write!(
                f,
                "peer belongs to cluster '{theirs}', this node to '{ours}'; check cluster_name \
                 and the seed list of both nodes"
            ),
            HandshakeError::NoCommonVersion { theirs_max } => write!(
                f,
                "peer speaks internode versions up to {theirs_max}, this node \
                 {VERSION_MIN}..={VERSION}; upgrade the older node"
            ),
            HandshakeError::Refused => write!(
                f,
                "peer refused the connection (another cluster name or no common version; its \
                 log says which)"
            ),
            HandshakeError::BadVersion { version } => {
                write!(
                    f,
                    "peer chose internode version {version}, which this node never offered"
                )
            }
        }
    }
}

impl std::error::Error for HandshakeError {}

impl Hello {
    /// Appends the hello. Panics on a cluster name over [`CLUSTER_NAME_BYTES_MAX`]: the
    /// configuration is checked before any connection is made.
    pub fn encode(&self, out: &mut Vec<u8>) {
        assert!(
            self.cluster_name.len() <= CLUSTER_NAME_BYTES_MAX,
            "cluster name length checked when the transport starts"
        );
        out.extend_from_slice(&MAGIC);
        put_u8(out, self.max_version);
        put_u8(out, self.lane.tag());
        out.extend_from_slice(&self.sender.0);
        put_u16(out, self.cluster_name.len() as u16);
        out.extend_from_slice(self.cluster_name.as_bytes());
    }

    /// Reads the fixed part; the caller then reads `cluster_name_bytes` more.
    pub fn decode_head(b: &[u8; HELLO_FIXED_BYTES]) -> Result<HelloHead, HandshakeError> {
        let mut magic = [0u8; 4];
        magic.copy_from_slice(&b[0..4]);
        if magic != MAGIC {
            return Err(HandshakeError::BadMagic { found: magic });
        }
        let max_version = b[4];
        let lane = Lane::from_tag(b[5]).ok_or(HandshakeError::UnknownLane { tag: b[5] })?;
        let mut sender = [0u8; HostId::BYTES];
        sender.copy_from_slice(&b[6..6 + HostId::BYTES]);
        let cluster_name_bytes = usize::from(u16::from_be_bytes([b[22], b[23]]));
        if cluster_name_bytes > CLUSTER_NAME_BYTES_MAX {
            return Err(HandshakeError::ClusterNameTooLong {
                len_bytes: cluster_name_bytes,
                max_bytes: CLUSTER_NAME_BYTES_MAX,
            });
        }
        Ok(HelloHead {
            max_version,
            lane,
            sender: HostId(sender),
            cluster_name_bytes,
        })
    }

    /// Completes a hello from its head and the cluster name's bytes.
    pub fn from_parts(head: HelloHead, name: &[u8]) -> Result<Hello, HandshakeError> {
        if name.len() != head.cluster_name_bytes {
            return Err(HandshakeError::Truncated);
        }
        let cluster_name = std::str::from_utf8(name).map_err(|_| HandshakeError::BadUtf8)?;
        Ok(Hello {
            max_version: head.max_version,
            lane: head.lane,
            sender: head.sender,
            cluster_name: cluster_name.to_owned(),
        })
    }

    /// Decodes a whole hello that is exactly `b`.
    pub fn decode(b: &[u8]) -> Result<Hello, HandshakeError> {
        let (fixed, name) = b
            .split_first_chunk::<HELLO_FIXED_BYTES>()
            .ok_or(HandshakeError::Truncated)?;
        Hello::from_parts(Hello::decode_head(fixed)?, name)
    }

    /// What the acceptor answers: the common version, or an error saying why not.
    pub fn accept(&self, our_cluster: &str) -> Result<HelloReply, HandshakeError> {
        if self.cluster_name != our_cluster {
            return Err(HandshakeError::OtherCluster {
                ours: our_cluster.to_owned(),
                theirs: self.cluster_name.clone(),
            });
        }
        if self.max_version < VERSION_MIN {
            return Err(HandshakeError::NoCommonVersion {
                theirs_max: self.max_version,
            });
        }
        Ok(HelloReply {
            version: self.max_version.min(VERSION),
        })
    }
}

impl HelloReply {
    pub const REFUSED: HelloReply = HelloReply { version: REFUSED };

    pub fn encode(&self) -> [u8; HELLO_REPLY_BYTES] {
        let mut out = [0u8; HELLO_REPLY_BYTES];
        out[..4].copy_from_slice(&MAGIC);
        out[4] = self.version;
        out
    }

    /// Checks the acceptor's reply to a hello that offered up to [`VERSION`]; returns the
    /// version to write.
    pub fn decode(b: &[u8; HELLO_REPLY_BYTES]) -> Result<u8, HandshakeError> {
        let mut found = [0u8; 4];
        found.copy_from_slice(&b[..4]);
        if found != MAGIC {
            return Err(HandshakeError::BadMagic { found });
        }
        match b[4] {
            REFUSED => Err(HandshakeError::Refused),
            v if (VERSION_MIN..=VERSION).contains(&v) => Ok(v),
            version => Err(HandshakeError::BadVersion { version }),
        }
    }
}
