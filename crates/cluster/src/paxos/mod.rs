//! Paxos for lightweight transactions, one instance per partition: what the replicas keep and
//! answer (the acceptor, [`acceptor`]) and what travels between a coordinator and them. The
//! coordinator's rounds are in `coordinator/paxos.rs`.
//!
//! The shape is Cassandra's Paxos v2: the prepare carries the read the transaction's condition
//! needs, so that an uncontended transaction takes three round trips (prepare and read, propose,
//! commit), one when its condition fails, and a serial read one.
//!
//! A replica keeps, per partition: the highest ballot it promised, the proposal it accepted
//! last (if not yet committed), and the last proposal committed. It keeps them in the storage
//! engine, in a table of their own beside the partition's table ([`state_table`]), written
//! before it answers, so that they are as durable as any write under the node's durability
//! setting, and go when the table is dropped or truncated.

pub mod acceptor;

use std::fmt;
use std::sync::Arc;

use hayate_storage::TableId;

use crate::node::HostId;
use crate::replica::{Mutation, PartitionRead, ReadResponse};

/// The top bit of a table id marks the storage table that holds another table's Paxos state.
/// Schema tables count up from 1024, far below it.
const STATE_TABLE_BIT: TableId = 1 << 31;

/// The storage table that holds the Paxos state of `table`'s partitions (under the same keys
/// and tokens).
pub fn state_table(table: TableId) -> TableId {
    table | STATE_TABLE_BIT
}

/// The table whose Paxos state storage table `id` holds, if it holds any.
pub fn table_of_state(id: TableId) -> Option<TableId> {
    (id & STATE_TABLE_BIT != 0).then_some(id & !STATE_TABLE_BIT)
}

/// A proposal number: later ballots win. The time in microseconds comes first, so that a
/// committed update's write timestamp (the ballot's time) orders transactions as their ballots
/// do; the node breaks ties.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ballot {
    pub micros: i64,
    pub node: u64,
}

impl Ballot {
    pub const BYTES: usize = 16;

    /// No ballot: below every real one.
    pub const NONE: Ballot = Ballot {
        micros: i64::MIN,
        node: 0,
    };

    pub fn new(micros: i64, host: HostId) -> Ballot {
        Ballot {
            micros,
            node: host.raft_id(),
        }
    }
}

impl fmt::Display for Ballot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{:016x}", self.micros, self.node)
    }
}

/// A value proposed at a ballot: the mutations of one partition (empty for a round that only
/// reads).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proposal {
    pub ballot: Ballot,
    pub update: Arc<Vec<Mutation>>,
}

/// The partition a Paxos instance decides for: its table, token and key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PaxosKey {
    pub table: TableId,
    pub token: i64,
    pub partition: Vec<u8>,
}

impl PaxosKey {
    pub fn of_read(read: &PartitionRead) -> PaxosKey {
        PaxosKey {
            table: read.table,
            token: read.token,
            partition: read.partition.clone(),
        }
    }

    /// A hash of the key's table and token, spread over all 64 bits, for picking a stripe of
    /// locks (take its high bits).
    pub fn stripe_hash(&self) -> u64 {
        (self.token as u64 ^ u64::from(self.table)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

/// What a coordinator asks a replica in a round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PaxosRequest {
    /// Promise to accept nothing below `ballot`, and read what the condition needs.
    Prepare { ballot: Ballot, read: PartitionRead },
    /// Accept this proposal unless a later ballot was promised.
    Propose { key: PaxosKey, proposal: Proposal },
    /// Apply this decided proposal and remember it as committed.
    Commit { key: PaxosKey, proposal: Proposal },
}

impl PaxosRequest {
    /// The mutations the request carries, for a send queue's size estimate.
    pub fn update(&self) -> Option<&Arc<Vec<Mutation>>> {
        match self {
            PaxosRequest::Prepare { .. } => None,
            PaxosRequest::Propose { proposal, .. } | PaxosRequest::Commit { proposal, .. } => {
                Some(&proposal.update)
            }
        }
    }
}

/// A replica's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PaxosReply {
    /// The replica promised: what it accepted and committed last, and the rows read.
    Promised {
        accepted: Option<Proposal>,
        committed: Option<Proposal>,
        data: ReadResponse,
    },
    /// The replica had promised a later ballot (prepare) or a later one than the proposal's
    /// (propose): the coordinator must start again above it.
    Refused { promised: Ballot },
    /// The proposal was accepted.
    Accepted,
    /// The proposal was committed.
    Committed,
}
