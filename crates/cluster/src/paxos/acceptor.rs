//! The replica's side of Paxos: promise, accept and commit, with the state of each partition
//! kept in the storage engine before the answer goes out.
//!
//! Each call reads the partition's state, decides, and writes the state back while holding the
//! partition's lock, so that two rounds on one replica never interleave; a prepare reads the
//! rows under the same lock, so that its answer's state and rows are of one moment. Calls are
//! synchronous and may read the device: the caller runs them where blocking is allowed
//! ([`run`]).
//!
//! The state expires [`STATE_TTL_S`] after its last change, as Cassandra's `system.paxos` rows
//! do, so partitions no transaction touched for that long cost nothing.

use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};

use hayate_storage::row::{Cell, Row};

use super::{state_table, Ballot, PaxosKey, PaxosReply, PaxosRequest, Proposal};
use crate::message::paxos::{decode_state, encode_state};
use crate::replica::{
    Mutation, MutationKind, PartitionRead, ReadCommand, Replica, ReplicaError, ReplicaErrorKind,
};

/// What a replica keeps for one partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PaxosState {
    /// The highest ballot promised (or accepted).
    pub promised: Ballot,
    /// The last proposal accepted and not yet known committed.
    pub accepted: Option<Proposal>,
    /// The last proposal committed here.
    pub committed: Option<Proposal>,
}

impl PaxosState {
    fn committed_ballot(&self) -> Ballot {
        self.committed.as_ref().map_or(Ballot::NONE, |p| p.ballot)
    }
}

/// Partitions' locks, by a hash of the key: shared by every replica in the process, which
/// costs nothing since a lock is never held across an `.await`.
const LOCK_STRIPES: usize = 256;
static LOCKS: [Mutex<()>; LOCK_STRIPES] = [const { Mutex::new(()) }; LOCK_STRIPES];

fn lock(key: &PaxosKey) -> MutexGuard<'static, ()> {
    LOCKS[(key.stripe_hash() >> 56) as usize % LOCK_STRIPES]
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Answers one request against `replica`.
pub fn handle(replica: &dyn Replica, request: PaxosRequest) -> Result<PaxosReply, ReplicaError> {
    match request {
        PaxosRequest::Prepare { ballot, read } => {
            let key = PaxosKey::of_read(&read);
            let _lock = lock(&key);
            let (mut state, stamp) = load(replica, &key)?;
            if ballot <= state.promised {
                return Ok(PaxosReply::Refused {
                    promised: state.promised,
                });
            }
            state.promised = ballot;
            store(replica, &key, &state, stamp)?;
            let data = replica.read(&ReadCommand::Partition(read))?;
            Ok(PaxosReply::Promised {
                accepted: state.accepted,
                committed: state.committed,
                data,
            })
        }
        PaxosRequest::Propose { key, proposal } => {
            let _lock = lock(&key);
            let (mut state, stamp) = load(replica, &key)?;
            if proposal.ballot < state.promised {
                return Ok(PaxosReply::Refused {
                    promised: state.promised,
                });
            }
            state.promised = proposal.ballot;
            state.accepted = Some(proposal);
            store(replica, &key, &state, stamp)?;
            Ok(PaxosReply::Accepted)
        }
        PaxosRequest::Commit { key, proposal } => {
            let _lock = lock(&key);
            // The rows first: a crash between the two leaves the proposal accepted, and the
            // next round commits it again, which changes nothing.
            if !proposal.update.is_empty() {
                replica.apply(Vec::clone(&proposal.update))?;
            }
            let (mut state, stamp) = load(replica, &key)?;
            if state
                .accepted
                .as_ref()
                .is_some_and(|a| a.ballot <= proposal.ballot)
            {
                state.accepted = None;
            }
            if proposal.ballot > state.committed_ballot() {
                state.committed = Some(proposal);
            }
            store(replica, &key, &state, stamp)?;
            Ok(PaxosReply::Committed)
        }
    }
}

/// Runs `handle` where it may block: on the blocking pool when the replica reads the device
/// ahead of its service threads (and so has few of them) or its writes wait for the device
/// (`blocking_writes`), on this thread otherwise.
pub async fn run(
    replica: &Arc<dyn Replica>,
    request: PaxosRequest,
    blocking_writes: bool,
) -> Result<PaxosReply, ReplicaError> {
    if !replica.reads_ahead() && !blocking_writes {
        return handle(&**replica, request);
    }
    let replica = replica.clone();
    tokio::task::spawn_blocking(move || handle(&*replica, request))
        .await
        .unwrap_or_else(|e| {
            Err(ReplicaError::new(
                ReplicaErrorKind::Failed,
                format!("paxos request failed: {e}"),
            ))
        })
}

/// The state of `key`, and the timestamp its record was written with (0 when there is none).
fn load(replica: &dyn Replica, key: &PaxosKey) -> Result<(PaxosState, i64), ReplicaError> {
    let read = PartitionRead {
        table: state_table(key.table),
        token: key.token,
        partition: key.partition.clone(),
        start: Bound::Included(Vec::new()),
        end: Bound::Included(Vec::new()),
        reverse: false,
        limit: 1,
    };
    let response = replica.read(&ReadCommand::Partition(read))?;
    let Some(cell) = response
        .rows
        .first()
        .and_then(|r| r.row.cells.iter().find(|c| c.column == STATE_COLUMN))
    else {
        return Ok((PaxosState::default(), 0));
    };
    let Some(bytes) = cell.value_at(replica.now_s()) else {
        return Ok((PaxosState::default(), cell.timestamp_us));
    };
    let state = decode_state(bytes).map_err(|e| {
        ReplicaError::new(
            ReplicaErrorKind::Failed,
            format!(
                "the Paxos state of a partition of table {} does not decode ({e}); the record is damaged",
                key.table
            ),
        )
    })?;
    Ok((state, cell.timestamp_us))
}

const STATE_COLUMN: u32 = 0;

/// How long a partition's Paxos state outlives its last change: 10 days, Cassandra's default
/// `gc_grace_seconds`, which (at least 3 hours) is how long Cassandra keeps its `system.paxos`
/// rows. A transaction whose rounds span longer than that would find its promises gone; no
/// coordinator waits that long (`cas_contention_timeout_ms`).
pub const STATE_TTL_S: u32 = 10 * 24 * 3600;

/// Writes the state, with a timestamp above the one it replaces and above any this replica
/// wrote before the last state expired (its clock has moved on since), so that an expired
/// state never shadows a new one.
fn store(replica: &dyn Replica, key: &PaxosKey, state: &PaxosState, stamp: i64) -> Result<(), ReplicaError> {
    let bytes = encode_state(state).map_err(|e| {
        ReplicaError::new(
            ReplicaErrorKind::Invalid,
            format!("the Paxos state does not fit a record: {e}"),
        )
    })?;
    let now_s = replica.now_s();
    let stamp = (stamp + 1).max(i64::from(now_s) * 1_000_000);
    let update = Row {
        cells: vec![Cell::expiring(STATE_COLUMN, stamp, bytes, STATE_TTL_S, now_s)],
        ..Row::default()
    };
    replica.apply(vec![Mutation {
        table: state_table(key.table),
        token: key.token,
        partition: key.partition.clone(),
        kind: MutationKind::Row {
            clustering: Vec::new(),
            update,
        },
    }])
}

#[cfg(test)]
mod tests {
    use hayate_storage::{Engine, NamespaceConfig};

    use super::*;

    fn engine(name: &str) -> Engine {
        Engine::open(NamespaceConfig::in_memory(name, 64 << 20)).expect("open an engine in memory")
    }

    fn read() -> PartitionRead {
        PartitionRead {
            table: 2000,
            token: hayate_storage::token::token(b"p"),
            partition: b"p".to_vec(),
            start: Bound::Included(Vec::new()),
            end: Bound::Included(Vec::new()),
            reverse: false,
            limit: 1,
        }
    }

    fn ballot(micros: i64) -> Ballot {
        Ballot { micros, node: 7 }
    }

    fn proposal(micros: i64, value: &[u8]) -> Proposal {
        let update = Row {
            cells: vec![Cell::live(1, micros, value.to_vec())],
            ..Row::default()
        };
        Proposal {
            ballot: ballot(micros),
            update: Arc::new(vec![Mutation {
                table: 2000,
                token: hayate_storage::token::token(b"p"),
                partition: b"p".to_vec(),
                kind: MutationKind::Row {
                    clustering: Vec::new(),
                    update,
                },
            }]),
        }
    }

    fn key() -> PaxosKey {
        PaxosKey::of_read(&read())
    }

    fn prepare(e: &Engine, micros: i64) -> PaxosReply {
        handle(
            e,
            PaxosRequest::Prepare {
                ballot: ballot(micros),
                read: read(),
            },
        )
        .expect("prepare")
    }

    #[test]
    fn a_replica_promises_only_later_ballots_and_accepts_nothing_below_its_promise() {
        let e = engine("acceptor-order");
        assert!(matches!(
            prepare(&e, 10),
            PaxosReply::Promised {
                accepted: None,
                committed: None,
                ..
            }
        ));
        assert_eq!(prepare(&e, 10), PaxosReply::Refused { promised: ballot(10) });
        assert_eq!(prepare(&e, 9), PaxosReply::Refused { promised: ballot(10) });
        // A proposal at the promised ballot is accepted; one below it is refused.
        let p10 = proposal(10, b"ten");
        let accept = |p: &Proposal| {
            handle(
                &e,
                PaxosRequest::Propose {
                    key: key(),
                    proposal: p.clone(),
                },
            )
            .expect("propose")
        };
        assert_eq!(accept(&p10), PaxosReply::Accepted);
        assert!(matches!(prepare(&e, 20), PaxosReply::Promised { accepted: Some(ref a), .. } if *a == p10));
        assert_eq!(
            accept(&proposal(15, b"late")),
            PaxosReply::Refused { promised: ballot(20) }
        );
    }

    #[test]
    fn a_commit_applies_the_update_and_retires_the_accepted_proposal() {
        let e = engine("acceptor-commit");
        let p = proposal(10, b"ten");
        prepare(&e, 10);
        handle(
            &e,
            PaxosRequest::Propose {
                key: key(),
                proposal: p.clone(),
            },
        )
        .expect("propose");
        assert_eq!(
            handle(
                &e,
                PaxosRequest::Commit {
                    key: key(),
                    proposal: p.clone()
                }
            )
            .expect("commit"),
            PaxosReply::Committed
        );
        let PaxosReply::Promised {
            accepted,
            committed,
            data,
        } = prepare(&e, 30)
        else {
            panic!("a later ballot is promised");
        };
        assert_eq!(accepted, None, "the committed proposal is no longer in progress");
        assert_eq!(committed, Some(p));
        assert_eq!(data.rows.len(), 1, "the prepare read the committed row");
        assert_eq!(data.rows[0].row.cells[0].value_at(0), Some(&b"ten"[..]));
        // An older commit arriving late changes neither the rows' winner nor the state.
        let old = proposal(5, b"five");
        handle(
            &e,
            PaxosRequest::Commit {
                key: key(),
                proposal: old,
            },
        )
        .expect("commit");
        let PaxosReply::Promised { committed, data, .. } = prepare(&e, 40) else {
            panic!("a later ballot is promised");
        };
        assert_eq!(committed.map(|c| c.ballot), Some(ballot(10)));
        assert_eq!(data.rows[0].row.cells[0].value_at(0), Some(&b"ten"[..]));
    }

    #[test]
    fn the_state_lives_beside_its_table_and_goes_with_it() {
        let e = engine("acceptor-drop");
        prepare(&e, 10);
        assert_eq!(e.table_ids(), vec![state_table(2000)]);
        assert_eq!(crate::paxos::table_of_state(e.table_ids()[0]), Some(2000));
        assert_eq!(crate::paxos::table_of_state(2000), None);
        e.drop_table(state_table(2000));
        assert!(
            matches!(prepare(&e, 5), PaxosReply::Promised { .. }),
            "a dropped table's promises are forgotten"
        );
    }

    #[test]
    fn the_state_expires_after_its_ttl_and_a_new_one_is_not_shadowed_by_it() {
        let start_us = 1_800_000_000_000_000;
        let clock = Arc::new(hayate_storage::ManualClock::new(start_us));
        let e = Engine::open_with_clock(
            NamespaceConfig::in_memory("acceptor-ttl", 64 << 20),
            clock.clone(),
        )
        .expect("open an engine in memory");
        let at = |s: i64| start_us + s * 1_000_000;
        prepare(&e, at(0));
        handle(
            &e,
            PaxosRequest::Propose {
                key: key(),
                proposal: proposal(at(0), b"v"),
            },
        )
        .expect("propose");
        // Each change starts the TTL again: the state a day before expiry is whole.
        clock.advance_s(STATE_TTL_S - 24 * 3600);
        assert!(matches!(
            prepare(&e, at(1)),
            PaxosReply::Promised {
                accepted: Some(_),
                ..
            }
        ));
        clock.advance_s(STATE_TTL_S - 1);
        assert!(matches!(prepare(&e, at(0)), PaxosReply::Refused { promised } if promised == ballot(at(1))));
        // Past it, the partition has no state: an old ballot is promised, and nothing was accepted.
        clock.advance_s(2);
        assert!(matches!(
            prepare(&e, at(0)),
            PaxosReply::Promised {
                accepted: None,
                committed: None,
                ..
            }
        ));
        // The new state is the one read back, not the expired one with its later ballot.
        assert!(matches!(prepare(&e, at(-1)), PaxosReply::Refused { promised } if promised == ballot(at(0))));
    }

    #[test]
    fn partitions_and_tables_keep_their_own_state() {
        let e = engine("acceptor-keys");
        prepare(&e, 10);
        let mut other = read();
        other.partition = b"q".to_vec();
        other.token = hayate_storage::token::token(b"q");
        assert!(matches!(
            handle(
                &e,
                PaxosRequest::Prepare {
                    ballot: ballot(5),
                    read: other.clone()
                }
            )
            .expect("prepare"),
            PaxosReply::Promised { .. }
        ));
        other.partition = b"p".to_vec();
        other.token = hayate_storage::token::token(b"p");
        other.table = 2001;
        assert!(matches!(
            handle(
                &e,
                PaxosRequest::Prepare {
                    ballot: ballot(5),
                    read: other
                }
            )
            .expect("prepare"),
            PaxosReply::Promised { .. }
        ));
    }
}
