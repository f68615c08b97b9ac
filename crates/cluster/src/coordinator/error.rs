//! What a coordinated request ends in when it fails: Cassandra's request errors, with the
//! fields drivers read to decide whether to retry.

use std::fmt;

use crate::consistency::{ConsistencyLevel, Unavailable};
use crate::replica::ReplicaError;

/// Why a write was made, as the native protocol's write timeout names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteType {
    Simple,
    Batch,
    UnloggedBatch,
    Counter,
    BatchLog,
    Cas,
    View,
    Cdc,
}

impl WriteType {
    /// The name the protocol sends.
    pub fn name(self) -> &'static str {
        match self {
            WriteType::Simple => "SIMPLE",
            WriteType::Batch => "BATCH",
            WriteType::UnloggedBatch => "UNLOGGED_BATCH",
            WriteType::Counter => "COUNTER",
            WriteType::BatchLog => "BATCH_LOG",
            WriteType::Cas => "CAS",
            WriteType::View => "VIEW",
            WriteType::Cdc => "CDC",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CoordinatorError {
    /// Too few replicas are alive for the level; nothing was sent.
    Unavailable(Unavailable),
    /// Fewer than `block_for` replicas acknowledged the write in time. The write may still
    /// have been applied on some replicas (and will be, through hints, on the others).
    WriteTimeout {
        consistency: ConsistencyLevel,
        received: usize,
        block_for: usize,
        write_type: WriteType,
    },
    /// Fewer than `block_for` replicas answered the read in time.
    ReadTimeout {
        consistency: ConsistencyLevel,
        received: usize,
        block_for: usize,
        /// The replica asked for data answered (the missing answers were digests).
        data_present: bool,
    },
    /// Replicas failed (or went down) before answering, so that the level cannot be met.
    WriteFailure {
        consistency: ConsistencyLevel,
        received: usize,
        block_for: usize,
        failures: usize,
        write_type: WriteType,
    },
    ReadFailure {
        consistency: ConsistencyLevel,
        received: usize,
        block_for: usize,
        failures: usize,
        data_present: bool,
    },
    /// A replica refused the request for a reason the client must hear as it is (the device
    /// is full, a key is too large), so that the level cannot be met.
    Replica(ReplicaError),
    /// The request cannot be coordinated as asked (e.g. ANY for a read).
    Invalid(String),
}

impl fmt::Display for CoordinatorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // Cassandra's own messages, which some applications match on.
            CoordinatorError::Unavailable(u) => {
                write!(f, "Cannot achieve consistency level {}", u.consistency.name())
            }
            CoordinatorError::WriteTimeout { received, .. }
            | CoordinatorError::ReadTimeout { received, .. } => {
                write!(f, "Operation timed out - received only {received} responses.")
            }
            CoordinatorError::WriteFailure {
                failures, received, ..
            }
            | CoordinatorError::ReadFailure {
                failures, received, ..
            } => write!(
                f,
                "Operation failed - received {received} responses and {failures} failures"
            ),
            CoordinatorError::Replica(e) => write!(f, "{e}"),
            CoordinatorError::Invalid(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for CoordinatorError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CoordinatorError::Replica(e) => Some(e),
            _ => None,
        }
    }
}
