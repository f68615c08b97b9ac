//! Errors of membership, one type per operation, each saying what to do about it.

use std::fmt;
use std::io;
use std::net::SocketAddr;

/// Membership could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum MembershipError {
    /// A setting is out of its bounds.
    Config { field: &'static str, reason: String },
    /// The gossip socket could not be bound.
    Bind {
        address: SocketAddr,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The gossip thread or its runtime could not be made.
    Thread { source: io::Error },
}

impl fmt::Display for MembershipError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MembershipError::Config { field, reason } => {
                write!(f, "invalid membership setting {field}: {reason}")
            }
            MembershipError::Bind { address, source } => write!(
                f,
                "cannot bind gossip to {address}/UDP: {source} (is another node using this \
                 listen_address and storage_port, or is the address not one of this machine's?)"
            ),
            MembershipError::Thread { source } => write!(
                f,
                "cannot start the gossip thread: {source} (the process may be out of threads or memory)"
            ),
        }
    }
}

impl std::error::Error for MembershipError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MembershipError::Bind { source, .. } => Some(source.as_ref()),
            MembershipError::Thread { source } => Some(source),
            MembershipError::Config { .. } => None,
        }
    }
}

/// An application key-value could not be published.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SetError {
    /// The key is empty or longer than its bound.
    KeyLength {
        key: String,
        bytes: usize,
        max_bytes: usize,
    },
    /// The value is longer than its bound.
    ValueTooLarge {
        key: String,
        bytes: usize,
        max_bytes: usize,
    },
    /// The node already publishes as many application keys as it may.
    TooManyKeys { key: String, max_keys: usize },
    /// Membership was shut down.
    Stopped,
}

impl fmt::Display for SetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetError::KeyLength {
                key,
                bytes,
                max_bytes,
            } => write!(
                f,
                "gossip key '{key}' has {bytes} bytes; a key has 1 to {max_bytes} (use a shorter name)"
            ),
            SetError::ValueTooLarge {
                key,
                bytes,
                max_bytes,
            } => write!(
                f,
                "the value of gossip key '{key}' has {bytes} bytes, more than {max_bytes} (gossip carries \
                 small state; send large data over the internode transport)"
            ),
            SetError::TooManyKeys { key, max_keys } => write!(
                f,
                "cannot publish gossip key '{key}': a node publishes at most {max_keys} keys (reuse a key)"
            ),
            SetError::Stopped => write!(f, "membership was shut down; start it again to publish state"),
        }
    }
}

impl std::error::Error for SetError {}
