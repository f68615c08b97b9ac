//! Lightweight transactions: a conditional write (compare and set) on one partition, and a
//! read at SERIAL, decided by Paxos among the partition's replicas.
//!
//! The caller (the query layer) says which rows of the partition its condition needs
//! ([`CasRequest::read`]) and decides, given those rows as the replicas agree they are, whether
//! to write and what ([`Coordinator::cas`]'s `decide`). The update is written with the ballot's
//! timestamp, so that a later transaction's writes always win over an earlier one's.

use super::{Coordinator, CoordinatorError, ReadResult};
use crate::consistency::{ConsistencyLevel, Replication};
use crate::replica::{Mutation, PartitionRead};

/// A conditional write to coordinate.
pub struct CasRequest<'a> {
    pub replication: &'a Replication,
    /// `SERIAL` or `LOCAL_SERIAL`: which replicas' promises make the quorum.
    pub serial: ConsistencyLevel,
    /// The level the decided update is committed at (the request's own consistency).
    pub commit: ConsistencyLevel,
    /// The rows of the partition the condition is judged on.
    pub read: PartitionRead,
}

/// What a conditional write did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CasOutcome {
    /// The update was decided and committed at the request's level.
    pub applied: bool,
    /// The rows the decision was made on: merged across replicas, as stored (deletions
    /// included).
    pub current: ReadResult,
}

/// Why a conditional write failed: the coordinator's error, or the caller's own from `decide`.
#[derive(Debug)]
pub enum CasError<E> {
    Coordinator(CoordinatorError),
    Decide(E),
}

impl<E> From<CoordinatorError> for CasError<E> {
    fn from(e: CoordinatorError) -> CasError<E> {
        CasError::Coordinator(e)
    }
}

/// Checks the serial level of a conditional write or a serial read.
pub(super) fn check_serial_level(cl: ConsistencyLevel) -> Result<(), CoordinatorError> {
    match cl {
        ConsistencyLevel::Serial | ConsistencyLevel::LocalSerial => Ok(()),
        other => Err(CoordinatorError::Invalid(format!(
            "Invalid consistency for conditional update. Must be one of SERIAL or LOCAL_SERIAL, got {}",
            other.name()
        ))),
    }
}

impl Coordinator {
    /// Writes what `decide` makes of the partition's current rows, if it makes anything, as one
    /// linearizable step: no other conditional write of the partition falls between the read
    /// and the write. `decide` gets the rows and the timestamp the update must carry; it may be
    /// called more than once (a round that lost to another coordinator starts again), and only
    /// the last call's answer counts.
    pub async fn cas<E>(
        &self,
        request: CasRequest<'_>,
        decide: impl FnMut(&ReadResult, i64) -> Result<Option<Vec<Mutation>>, E>,
    ) -> Result<CasOutcome, CasError<E>> {
        check_serial_level(request.serial)?;
        super::check_write_level(request.commit)?;
        self.paxos_cas(request, decide).await
    }

    /// Reads one partition at `SERIAL` or `LOCAL_SERIAL`: a Paxos round that finishes any
    /// conditional write in progress on the partition first, so that the answer holds every
    /// conditional write acknowledged before it began.
    pub async fn read_serial(
        &self,
        replication: &Replication,
        serial: ConsistencyLevel,
        read: PartitionRead,
    ) -> Result<ReadResult, CoordinatorError> {
        check_serial_level(serial)?;
        self.paxos_read(replication, serial, read).await
    }
}
