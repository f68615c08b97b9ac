//! The coordinator: applies a request's consistency level across the replicas of its token.
//!
//! The server plans a statement into [`Mutation`]s or a [`ReadCommand`] and hands it here with
//! the keyspace's [`Replication`] and the request's [`ConsistencyLevel`]. The coordinator finds
//! the replicas, refuses with `Unavailable` before sending anything if too few are alive,
//! and waits for as many answers as the level needs.
//!
//! Waiting is async: a request waiting for other nodes holds no thread. The local replica is
//! called inline on the service thread that runs the request, as every device read is in this
//! node (see `crates/server/src/connection.rs` for why).

mod error;

use std::sync::Arc;

use hayate_storage::{Clock, TableId};

pub use error::{CoordinatorError, WriteType};

use crate::consistency::{assure_sufficient_live, ConsistencyLevel, ReplicaState, Replication};
use crate::node::HostId;
use crate::replica::{Mutation, ReadCommand, ReadResponse, Replica, ReplicaRow};

/// A write to coordinate.
pub struct WriteRequest<'a> {
    pub replication: &'a Replication,
    pub consistency: ConsistencyLevel,
    pub mutations: Vec<Mutation>,
    pub write_type: WriteType,
}

/// A read to coordinate.
pub struct ReadRequest<'a> {
    pub replication: &'a Replication,
    pub consistency: ConsistencyLevel,
    pub command: ReadCommand,
}

/// The merged answer to a read: rows as stored (deletions included; the caller decides what is
/// visible at its clock), in read order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadResult {
    pub rows: Vec<ReplicaRow>,
    /// The replicas may hold more rows after the last one (a limit stopped the read).
    pub more: bool,
}

impl From<ReadResponse> for ReadResult {
    fn from(r: ReadResponse) -> ReadResult {
        ReadResult {
            rows: r.rows,
            more: r.more,
        }
    }
}

pub struct Coordinator {
    local: HostId,
    local_dc: String,
    replica: Arc<dyn Replica>,
    clock: Arc<dyn Clock>,
}

impl Coordinator {
    /// A coordinator for a node that is the whole cluster.
    pub fn single_node(
        local: HostId,
        local_dc: impl Into<String>,
        replica: Arc<dyn Replica>,
        clock: Arc<dyn Clock>,
    ) -> Coordinator {
        Coordinator {
            local,
            local_dc: local_dc.into(),
            replica,
            clock,
        }
    }

    /// The clock writes take their timestamps from and reads judge expiry by.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub fn local_host(&self) -> HostId {
        self.local
    }

    pub fn local_data_center(&self) -> &str {
        &self.local_dc
    }

    /// Applies mutations at `consistency`.
    pub async fn write(&self, request: WriteRequest<'_>) -> Result<(), CoordinatorError> {
        check_write_level(request.consistency)?;
        let replicas = [ReplicaState {
            host: self.local,
            data_center: &self.local_dc,
            alive: true,
        }];
        assure_sufficient_live(
            request.consistency,
            request.replication,
            &self.local_dc,
            &replicas,
        )
        .map_err(CoordinatorError::Unavailable)?;
        self.replica
            .apply(request.mutations)
            .map_err(CoordinatorError::Replica)
    }

    /// Reads at `consistency`.
    pub async fn read(&self, request: ReadRequest<'_>) -> Result<ReadResult, CoordinatorError> {
        check_read_level(request.consistency)?;
        let replicas = [ReplicaState {
            host: self.local,
            data_center: &self.local_dc,
            alive: true,
        }];
        assure_sufficient_live(
            request.consistency,
            request.replication,
            &self.local_dc,
            &replicas,
        )
        .map_err(CoordinatorError::Unavailable)?;
        self.replica
            .read(&request.command)
            .map(ReadResult::from)
            .map_err(CoordinatorError::Replica)
    }

    /// Forgets a dropped or truncated table's rows on this node. Every node does this itself
    /// when it applies the schema change, so nothing is sent.
    pub fn drop_local_table(&self, table: TableId) -> usize {
        self.replica.drop_table(table)
    }
}

fn check_write_level(cl: ConsistencyLevel) -> Result<(), CoordinatorError> {
    match cl {
        ConsistencyLevel::Serial | ConsistencyLevel::LocalSerial => Err(CoordinatorError::Invalid(
            "You must use conditional updates for serializable writes".into(),
        )),
        _ => Ok(()),
    }
}

fn check_read_level(cl: ConsistencyLevel) -> Result<(), CoordinatorError> {
    match cl {
        ConsistencyLevel::Any => Err(CoordinatorError::Invalid(
            "ANY ConsistencyLevel is only supported for writes".into(),
        )),
        _ => Ok(()),
    }
}
