//! The coordinator's Paxos rounds for [`cas`](super::cas): prepare (with the read), finish what
//! an earlier round left accepted, decide, propose, commit.
//!
//! A round needs promises from a quorum of the partition's replicas (of the local data center
//! for `LOCAL_SERIAL`), plus every pending replica of a range being moved, as Cassandra counts
//! them. A replica that promised a later ballot refuses; the coordinator then waits a moment
//! (a jitter, so that two coordinators do not keep colliding, of up to 1 ms after the first
//! collision, doubling with each further one up to 100 ms) and starts again above that ballot,
//! for at most the contention timeout.
//!
//! Transactions (and serial reads) this coordinator runs on one partition take turns: each
//! waits for the one before it to end rather than racing it with a higher ballot, which would
//! only make both start again. Coordinators still race each other, as in Cassandra; the turns
//! only spare a partition's replicas the rounds one coordinator would waste on itself (on one
//! node, or with a client that routes a partition's requests to one coordinator, all of them).
//!
//! When a proposal was partly accepted and the coordinator cannot tell whether it will be
//! decided, the client hears a write timeout of type CAS: the write may or may not be applied,
//! and a later round that sees it accepted finishes it.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::cas::{CasError, CasOutcome, CasRequest};
use super::merge::merge;
use super::messaging::{Reply, Waiting};
use super::metrics::add;
use super::topology::Topology;
use super::{counts, Coordinator, CoordinatorError, ReadResult, WriteType};
use crate::consistency::{block_for_write, quorum_for, ConsistencyLevel, Replication, Unavailable};
use crate::message::Message;
use crate::node::HostId;
use crate::paxos::{acceptor, Ballot, PaxosKey, PaxosReply, PaxosRequest, Proposal};
use crate::replica::{Mutation, PartitionRead, ReadCommand, ReadResponse, ReplicaError};
use crate::transport::Lane;

/// The longest wait after a transaction's first collision with another coordinator's round; it
/// doubles with each further collision, up to [`CONTENTION_BACKOFF_MAX`]. Cassandra 5.0 scales
/// its bound from its Paxos latency (p95 × 1.8^attempts, from 10 to 100 ms); a round here takes
/// a fraction of a millisecond, so the first wait starts lower, and a contended key does not sit
/// idle for tens of milliseconds while its next transaction could have run.
const CONTENTION_BACKOFF_FIRST: Duration = Duration::from_millis(1);

/// The longest wait between two attempts that met another coordinator's round.
const CONTENTION_BACKOFF_MAX: Duration = Duration::from_millis(100);

/// Stripes of [`Turns`]: partitions that share one wait for each other too, which with this
/// many is rare (32 transactions in flight share a stripe with probability under 1%).
const TURN_STRIPES: usize = 4096;

/// The turns of this coordinator's transactions on each partition, by a hash of the key: a
/// fair (first come, first served) lock per stripe, held for a whole transaction.
pub(super) struct Turns {
    stripes: Box<[tokio::sync::Mutex<()>]>,
}

impl Turns {
    pub(super) fn new() -> Turns {
        Turns {
            stripes: (0..TURN_STRIPES).map(|_| tokio::sync::Mutex::new(())).collect(),
        }
    }

    /// The lock whose holder has `key`'s turn.
    fn of(&self, key: &PaxosKey) -> &tokio::sync::Mutex<()> {
        &self.stripes[(key.stripe_hash() >> 32) as usize % self.stripes.len()]
    }
}

/// How a transaction has been contended so far: the ballot to start above, and how often it
/// has waited.
#[derive(Clone, Copy)]
struct Contention {
    above: Ballot,
    waits: u32,
}

impl Default for Contention {
    fn default() -> Contention {
        Contention {
            above: Ballot::NONE,
            waits: 0,
        }
    }
}

impl Contention {
    /// The bound of the next wait: [`CONTENTION_BACKOFF_FIRST`] doubled with each wait before.
    fn next_bound(&mut self) -> Duration {
        let bound = CONTENTION_BACKOFF_FIRST
            .saturating_mul(1 << self.waits.min(16))
            .min(CONTENTION_BACKOFF_MAX);
        self.waits += 1;
        bound
    }
}

/// The last ballot time this process handed out: each round takes a later one.
static LAST_BALLOT_US: AtomicI64 = AtomicI64::new(0);

/// The replicas a round on one partition talks to.
struct Participants {
    /// Natural and pending replicas: a commit goes to all of them.
    all: Vec<HostId>,
    /// The pending ones (a range being moved to them).
    pending: Vec<HostId>,
    /// The live replicas whose promises and acceptances count.
    electorate: Vec<HostId>,
    /// How many of them must promise (or accept).
    required: usize,
}

/// A promise, with what the replica read.
struct Promise {
    accepted: Option<Proposal>,
    committed: Option<Proposal>,
    data: ReadResponse,
}

/// How a prepare ended.
enum Prepared {
    /// A quorum promised.
    Promised(Vec<(HostId, Promise)>),
    /// A replica had promised a later ballot: start again above it.
    Contended(Ballot),
}

/// How a proposal ended.
enum Proposed {
    Accepted,
    /// Refused by every replica that answered, accepted by none: nothing of it can be decided.
    Refused(Ballot),
}

/// A round begun: its ring, replicas, ballot and a quorum's promises.
struct Begun {
    topology: Arc<Topology>,
    who: Participants,
    ballot: Ballot,
    promises: Vec<(HostId, Promise)>,
}

/// What finishing an earlier round's proposal left this round to do.
enum Finished {
    /// Nothing was in progress: go on with this round.
    Nothing,
    /// The earlier proposal is committed, which spent this round's ballot: start again at once.
    Again(Ballot),
    /// Another round's ballot got in the way: wait, then start again above it.
    Contended(Ballot),
}

/// Whether the round is a write (its timeouts are write timeouts of type CAS) or a serial read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Purpose {
    Write,
    Read,
}

impl Coordinator {
    pub(super) async fn paxos_cas<E>(
        &self,
        request: CasRequest<'_>,
        mut decide: impl FnMut(&ReadResult, i64) -> Result<Option<Vec<Mutation>>, E>,
    ) -> Result<CasOutcome, CasError<E>> {
        add(&self.metrics.cas_writes, 1);
        let key = PaxosKey::of_read(&request.read);
        let deadline = Instant::now() + self.config.cas_contention_timeout;
        let _turn = self
            .take_turn(
                request.replication,
                request.serial,
                &key,
                deadline,
                Purpose::Write,
            )
            .await?;
        let mut contention = Contention::default();
        loop {
            let Begun {
                topology,
                who,
                ballot,
                promises,
            } = self
                .begin(
                    request.replication,
                    request.serial,
                    &request.read,
                    &key,
                    &mut contention,
                    deadline,
                    Purpose::Write,
                )
                .await?;
            // The update is written at the ballot's time: it must be later than every update a
            // replica accepted or committed, or last-write-wins could keep the older one. Two
            // nodes' ballots can share a microsecond (the node breaks the tie between ballots,
            // not between timestamps): start again above it, at once.
            if let Some(later) = latest_update_micros(&promises).filter(|m| *m >= ballot.micros) {
                contention.above = Ballot {
                    micros: later,
                    node: 0,
                };
                continue;
            }
            let current = self.merge_promises(&request.read, promises);
            let Some(update) = decide(&current, ballot.micros).map_err(CasError::Decide)? else {
                return Ok(CasOutcome {
                    applied: false,
                    current,
                });
            };
            let proposal = Proposal {
                ballot,
                update: Arc::new(update),
            };
            match self
                .propose(&who, &key, proposal.clone(), request.serial, Purpose::Write)
                .await?
            {
                Proposed::Accepted => {}
                Proposed::Refused(promised) => {
                    self.back_off(
                        &mut contention,
                        promised,
                        ballot,
                        deadline,
                        &who,
                        request.serial,
                        Purpose::Write,
                    )
                    .await?;
                    continue;
                }
            }
            self.commit(
                &topology,
                request.replication,
                &who,
                &key,
                proposal,
                request.commit,
            )
            .await?;
            return Ok(CasOutcome {
                applied: true,
                current,
            });
        }
    }

    pub(super) async fn paxos_read(
        &self,
        replication: &Replication,
        serial: ConsistencyLevel,
        read: PartitionRead,
    ) -> Result<ReadResult, CoordinatorError> {
        add(&self.metrics.serial_reads, 1);
        let key = PaxosKey::of_read(&read);
        let deadline = Instant::now() + self.config.cas_contention_timeout;
        let _turn = self
            .take_turn(replication, serial, &key, deadline, Purpose::Read)
            .await?;
        let mut contention = Contention::default();
        let begun = self
            .begin(
                replication,
                serial,
                &read,
                &key,
                &mut contention,
                deadline,
                Purpose::Read,
            )
            .await?;
        Ok(self.merge_promises(&read, begun.promises))
    }

    /// Starts a round: a ballot above `contention.above` promised by a quorum, with nothing an earlier
    /// round left in progress. Starts again (after a wait when another round got in the way)
    /// until it has one, or the contention timeout passes.
    #[allow(clippy::too_many_arguments)]
    async fn begin(
        &self,
        replication: &Replication,
        serial: ConsistencyLevel,
        read: &PartitionRead,
        key: &PaxosKey,
        contention: &mut Contention,
        deadline: Instant,
        purpose: Purpose,
    ) -> Result<Begun, CoordinatorError> {
        loop {
            let topology = self.topology();
            let who = self.participants(&topology, replication, serial, key.token)?;
            let ballot = self.next_ballot(contention.above);
            let promises = match self.prepare(&who, ballot, read, serial, purpose).await? {
                Prepared::Promised(p) => p,
                Prepared::Contended(promised) => {
                    self.back_off(contention, promised, ballot, deadline, &who, serial, purpose)
                        .await?;
                    continue;
                }
            };
            match self
                .finish_in_progress(&topology, &who, key, ballot, &promises, serial, purpose)
                .await?
            {
                Finished::Nothing => {
                    return Ok(Begun {
                        topology,
                        who,
                        ballot,
                        promises,
                    })
                }
                Finished::Again(spent) => contention.above = spent,
                Finished::Contended(promised) => {
                    self.back_off(contention, promised, ballot, deadline, &who, serial, purpose)
                        .await?;
                }
            }
        }
    }

    /// This coordinator's turn on `key`: at once when no transaction of its stripe is running
    /// (a queued one is handed the lock first, so none is overtaken); otherwise, once enough
    /// replicas are alive to begin (Unavailable, before any wait), after the ones before it,
    /// and a turn not come by `deadline` is a timeout.
    async fn take_turn(
        &self,
        replication: &Replication,
        serial: ConsistencyLevel,
        key: &PaxosKey,
        deadline: Instant,
        purpose: Purpose,
    ) -> Result<tokio::sync::MutexGuard<'_, ()>, CoordinatorError> {
        let turn = self.turns.of(key);
        if let Ok(now) = turn.try_lock() {
            return Ok(now);
        }
        let who = self.participants(&self.topology(), replication, serial, key.token)?;
        tokio::time::timeout_at(deadline, turn.lock())
            .await
            .map_err(|_| self.timed_out(serial, 0, who.required, purpose))
    }

    /// A ballot later than `above` and than every ballot this process handed out.
    fn next_ballot(&self, above: Ballot) -> Ballot {
        let floor = self.clock.now_us().max(above.micros.saturating_add(1));
        let mut last = LAST_BALLOT_US.load(Ordering::Relaxed);
        loop {
            let next = floor.max(last + 1);
            match LAST_BALLOT_US.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Ballot::new(next, self.local),
                Err(seen) => last = seen,
            }
        }
    }

    fn participants(
        &self,
        topology: &Topology,
        replication: &Replication,
        serial: ConsistencyLevel,
        token: i64,
    ) -> Result<Participants, CoordinatorError> {
        let (natural, pending) = self.replicas_of(topology, replication, token);
        let in_scope = |h: &&HostId| {
            serial != ConsistencyLevel::LocalSerial || topology.data_center(**h) == self.local_dc
        };
        let pending_in_scope = pending.iter().filter(in_scope).count();
        let required = quorum_for(natural.iter().filter(in_scope).count()) + pending_in_scope;
        let electorate: Vec<HostId> = natural
            .iter()
            .chain(&pending)
            .filter(in_scope)
            .filter(|h| self.is_alive(**h))
            .copied()
            .collect();
        if pending_in_scope > 1 || electorate.len() < required {
            add(&self.metrics.unavailable, 1);
            return Err(CoordinatorError::Unavailable(Unavailable {
                consistency: serial,
                required,
                alive: electorate.len(),
            }));
        }
        Ok(Participants {
            all: natural.into_iter().chain(pending.iter().copied()).collect(),
            pending,
            electorate,
            required,
        })
    }

    /// Sends `request` to `hosts` (the local replica answers in place) and returns the
    /// answers as they come.
    async fn send_round(&self, hosts: &[HostId], request: PaxosRequest) -> Round {
        add(&self.metrics.paxos_round_trips, 1);
        let (tx, rx) = mpsc::unbounded_channel::<Reply>();
        let mut round = Round {
            local: self.local,
            rx,
            waiting: self.messaging.as_ref().map(|m| Waiting::new(m.clone())),
            outstanding: Vec::new(),
            here: None,
        };
        for &host in hosts.iter().filter(|&&h| h != self.local) {
            let sent = match (&self.messaging, &mut round.waiting) {
                (Some(m), Some(w)) => m
                    .request(host, Lane::Requests, &tx, |id| Message::PaxosRequest {
                        id,
                        request: request.clone(),
                    })
                    .map(|id| w.push(id))
                    .is_some(),
                _ => false,
            };
            if sent {
                round.outstanding.push(host);
            }
        }
        if hosts.contains(&self.local) {
            round.here = Some(acceptor::run(&self.replica, request, false).await);
        }
        round
    }

    async fn prepare(
        &self,
        who: &Participants,
        ballot: Ballot,
        read: &PartitionRead,
        serial: ConsistencyLevel,
        purpose: Purpose,
    ) -> Result<Prepared, CoordinatorError> {
        let request = PaxosRequest::Prepare {
            ballot,
            read: read.clone(),
        };
        let mut round = self.send_round(&who.electorate, request).await;
        let deadline = Instant::now() + self.phase_timeout(purpose);
        let mut promises = Vec::new();
        let mut refused = Ballot::NONE;
        let mut error: Option<ReplicaError> = None;
        loop {
            if promises.len() >= who.required {
                return Ok(Prepared::Promised(promises));
            }
            if promises.len() + round.waiting_for() < who.required {
                if refused != Ballot::NONE {
                    return Ok(Prepared::Contended(refused));
                }
                return Err(self.failed(error, serial, promises.len(), who.required, purpose));
            }
            let Some((from, answer)) = round.next(deadline).await else {
                return Err(self.timed_out(serial, promises.len(), who.required, purpose));
            };
            match answer {
                Ok(PaxosReply::Promised {
                    accepted,
                    committed,
                    data,
                }) => promises.push((
                    from,
                    Promise {
                        accepted,
                        committed,
                        data,
                    },
                )),
                Ok(PaxosReply::Refused { promised }) => refused = refused.max(promised),
                Ok(_) => {}
                Err(e) => {
                    error.get_or_insert(e);
                }
            }
        }
    }

    /// Finishes a proposal some replica accepted that no replica of the quorum knows committed,
    /// and brings replicas that missed the latest commit up to it.
    #[allow(clippy::too_many_arguments)]
    async fn finish_in_progress(
        &self,
        topology: &Topology,
        who: &Participants,
        key: &PaxosKey,
        ballot: Ballot,
        promises: &[(HostId, Promise)],
        serial: ConsistencyLevel,
        purpose: Purpose,
    ) -> Result<Finished, CoordinatorError> {
        let latest_commit = promises
            .iter()
            .filter_map(|(_, p)| p.committed.as_ref())
            .max_by_key(|p| p.ballot);
        let committed_ballot = latest_commit.map_or(Ballot::NONE, |p| p.ballot);
        let in_progress = promises
            .iter()
            .filter_map(|(_, p)| p.accepted.as_ref())
            .filter(|a| a.ballot > committed_ballot)
            .max_by_key(|a| a.ballot);
        if let Some(accepted) = in_progress {
            // Decided or not, it may have been: propose it again at this ballot and commit it.
            let proposal = Proposal {
                ballot,
                update: accepted.update.clone(),
            };
            return match self.propose(who, key, proposal.clone(), serial, purpose).await? {
                Proposed::Accepted => {
                    let quorum = match serial {
                        ConsistencyLevel::LocalSerial => ConsistencyLevel::LocalQuorum,
                        _ => ConsistencyLevel::Quorum,
                    };
                    // A serial read that cannot finish the earlier proposal times out as a
                    // read, as in Cassandra: the client asked to read, not to write.
                    self.commit_to(who, key, proposal, who.required, quorum, topology)
                        .await
                        .map_err(|e| match (purpose, e) {
                            // commit_to counted the timeout already.
                            (
                                Purpose::Read,
                                CoordinatorError::WriteTimeout {
                                    received, block_for, ..
                                },
                            ) => CoordinatorError::ReadTimeout {
                                consistency: serial,
                                received,
                                block_for,
                                data_present: false,
                            },
                            (
                                Purpose::Read,
                                CoordinatorError::WriteFailure {
                                    received, block_for, ..
                                },
                            ) => self.failed(None, serial, received, block_for, purpose),
                            (_, e) => e,
                        })?;
                    // Start again: this round's ballot was spent on the older proposal.
                    Ok(Finished::Again(ballot))
                }
                Proposed::Refused(promised) => Ok(Finished::Contended(promised)),
            };
        }
        // Replicas of the quorum that missed the latest commit get it now, so that a read at
        // QUORUM after this transaction cannot miss it.
        if let Some(latest) = latest_commit {
            let behind: Vec<HostId> = promises
                .iter()
                .filter(|(_, p)| p.committed.as_ref().map_or(Ballot::NONE, |c| c.ballot) < latest.ballot)
                .map(|(h, _)| *h)
                .collect();
            if !behind.is_empty() {
                let request = PaxosRequest::Commit {
                    key: key.clone(),
                    proposal: latest.clone(),
                };
                let mut round = self.send_round(&behind, request).await;
                let deadline = Instant::now() + self.config.write_timeout;
                while round.waiting_for() > 0 {
                    if round.next(deadline).await.is_none() {
                        break;
                    }
                }
            }
        }
        Ok(Finished::Nothing)
    }

    async fn propose(
        &self,
        who: &Participants,
        key: &PaxosKey,
        proposal: Proposal,
        serial: ConsistencyLevel,
        purpose: Purpose,
    ) -> Result<Proposed, CoordinatorError> {
        let request = PaxosRequest::Propose {
            key: key.clone(),
            proposal,
        };
        let mut round = self.send_round(&who.electorate, request).await;
        let deadline = Instant::now() + self.phase_timeout(purpose);
        let mut accepted = 0;
        // Replicas that failed or went down after the proposal was sent: each may have
        // accepted it before it did.
        let mut maybe_accepted = 0;
        let mut refused = Ballot::NONE;
        loop {
            if accepted >= who.required {
                return Ok(Proposed::Accepted);
            }
            // Refused only once every replica asked has said so: one that has not answered may
            // still accept, and a later round then finish the proposal.
            if round.waiting_for() == 0 {
                if accepted == 0 && maybe_accepted == 0 && refused != Ballot::NONE {
                    return Ok(Proposed::Refused(refused));
                }
                // Accepted (or maybe accepted) by some: a later round may yet decide it, even
                // this coordinator's next one, which would then find its own update done and
                // answer "not applied". The outcome is unknown: say so, as Cassandra does for
                // a superseded proposal that may have had side effects.
                return Err(self.timed_out(serial, accepted, who.required, purpose));
            }
            let Some((_, answer)) = round.next(deadline).await else {
                return Err(self.timed_out(serial, accepted, who.required, purpose));
            };
            match answer {
                Ok(PaxosReply::Accepted) => accepted += 1,
                Ok(PaxosReply::Refused { promised }) => refused = refused.max(promised),
                Err(e) if !e.is_refusal() => maybe_accepted += 1,
                Ok(_) | Err(_) => {}
            }
        }
    }

    /// Commits a decided proposal on every replica, and waits for the commit level.
    async fn commit(
        &self,
        topology: &Topology,
        replication: &Replication,
        who: &Participants,
        key: &PaxosKey,
        proposal: Proposal,
        cl: ConsistencyLevel,
    ) -> Result<(), CoordinatorError> {
        let pending = topology.states(&who.pending, self.local, &*self.liveness);
        let block_for = match cl {
            ConsistencyLevel::Any => 1,
            _ => block_for_write(cl, replication, &self.local_dc, &pending),
        };
        self.commit_to(who, key, proposal, block_for, cl, topology).await
    }

    async fn commit_to(
        &self,
        who: &Participants,
        key: &PaxosKey,
        proposal: Proposal,
        block_for: usize,
        cl: ConsistencyLevel,
        topology: &Topology,
    ) -> Result<(), CoordinatorError> {
        let update = proposal.update.clone();
        let live: Vec<HostId> = who.all.iter().filter(|h| self.is_alive(**h)).copied().collect();
        let now_us = self.clock.now_us();
        for &host in who.all.iter().filter(|h| !live.contains(h)) {
            self.hint(host, &update, now_us);
        }
        let request = PaxosRequest::Commit {
            key: key.clone(),
            proposal,
        };
        let mut round = self.send_round(&live, request).await;
        let deadline = Instant::now() + self.config.write_timeout;
        let mut acked = 0;
        let mut answered: Vec<HostId> = Vec::new();
        let mut error: Option<ReplicaError> = None;
        while acked < block_for {
            if acked + round.waiting_for() < block_for {
                return Err(match error {
                    Some(e) if e.is_refusal() => CoordinatorError::Replica(e),
                    _ => CoordinatorError::WriteFailure {
                        consistency: cl,
                        received: acked,
                        block_for,
                        failures: answered.len() - acked,
                        write_type: WriteType::Simple,
                    },
                });
            }
            let Some((from, answer)) = round.next(deadline).await else {
                for host in live.iter().filter(|h| !answered.contains(h)) {
                    self.hint(*host, &update, now_us);
                }
                add(&self.metrics.write_timeouts, 1);
                return Err(CoordinatorError::WriteTimeout {
                    consistency: cl,
                    received: acked,
                    block_for,
                    write_type: WriteType::Simple,
                });
            };
            answered.push(from);
            match answer {
                Ok(_)
                    if counts(cl, topology.data_center(from), &self.local_dc)
                        || cl == ConsistencyLevel::Any =>
                {
                    acked += 1
                }
                Ok(_) => {}
                Err(e) => {
                    error.get_or_insert(e);
                }
            }
        }
        Ok(())
    }

    fn merge_promises(&self, read: &PartitionRead, promises: Vec<(HostId, Promise)>) -> ReadResult {
        let command = ReadCommand::Partition(read.clone());
        let responses: Vec<ReadResponse> = promises.into_iter().map(|(_, p)| p.data).collect();
        if responses.len() == 1 {
            return responses.into_iter().next().expect("one response").into();
        }
        merge(&command, responses, self.clock.now_s()).result
    }

    /// Waits before another attempt above `promised` (the ballot that got in the way), or gives
    /// up when the contention timeout has passed.
    #[allow(clippy::too_many_arguments)]
    async fn back_off(
        &self,
        contention: &mut Contention,
        promised: Ballot,
        ballot: Ballot,
        deadline: Instant,
        who: &Participants,
        serial: ConsistencyLevel,
        purpose: Purpose,
    ) -> Result<(), CoordinatorError> {
        contention.above = promised;
        add(&self.metrics.paxos_contended, 1);
        if Instant::now() >= deadline {
            return Err(self.timed_out(serial, 0, who.required, purpose));
        }
        // A jitter drawn from the ballot, not a random generator, so a simulation replays.
        let mix = (ballot.micros as u64 ^ ballot.node).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let bound = contention.next_bound().as_micros() as u64;
        let wait = Duration::from_micros(mix % bound.max(1));
        tokio::time::sleep_until((Instant::now() + wait).min(deadline)).await;
        Ok(())
    }

    fn phase_timeout(&self, purpose: Purpose) -> Duration {
        match purpose {
            Purpose::Write => self.config.write_timeout,
            Purpose::Read => self.config.read_timeout,
        }
    }

    fn timed_out(
        &self,
        serial: ConsistencyLevel,
        received: usize,
        block_for: usize,
        purpose: Purpose,
    ) -> CoordinatorError {
        match purpose {
            Purpose::Write => {
                add(&self.metrics.write_timeouts, 1);
                CoordinatorError::WriteTimeout {
                    consistency: serial,
                    received,
                    block_for,
                    write_type: WriteType::Cas,
                }
            }
            Purpose::Read => {
                add(&self.metrics.read_timeouts, 1);
                CoordinatorError::ReadTimeout {
                    consistency: serial,
                    received,
                    block_for,
                    data_present: false,
                }
            }
        }
    }

    fn failed(
        &self,
        error: Option<ReplicaError>,
        serial: ConsistencyLevel,
        received: usize,
        block_for: usize,
        purpose: Purpose,
    ) -> CoordinatorError {
        match error {
            Some(e) if e.is_refusal() => CoordinatorError::Replica(e),
            _ => match purpose {
                Purpose::Write => CoordinatorError::WriteFailure {
                    consistency: serial,
                    received,
                    block_for,
                    failures: 1,
                    write_type: WriteType::Cas,
                },
                Purpose::Read => CoordinatorError::ReadFailure {
                    consistency: serial,
                    received,
                    block_for,
                    failures: 1,
                    data_present: false,
                },
            },
        }
    }
}

/// The time of the latest proposal any promise reports accepted or committed.
fn latest_update_micros(promises: &[(HostId, Promise)]) -> Option<i64> {
    promises
        .iter()
        .flat_map(|(_, p)| p.accepted.iter().chain(p.committed.iter()))
        .map(|p| p.ballot.micros)
        .max()
}

/// One phase's requests in flight, and the local replica's answer.
struct Round {
    local: HostId,
    rx: mpsc::UnboundedReceiver<Reply>,
    waiting: Option<Waiting>,
    outstanding: Vec<HostId>,
    here: Option<Result<PaxosReply, ReplicaError>>,
}

impl Round {
    fn waiting_for(&self) -> usize {
        self.outstanding.len() + usize::from(self.here.is_some())
    }

    /// The next answer, or `None` at the deadline.
    async fn next(&mut self, deadline: Instant) -> Option<(HostId, Result<PaxosReply, ReplicaError>)> {
        if let Some(here) = self.here.take() {
            return Some((self.local, here));
        }
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some((from, Message::PaxosResponse { result, .. }))) => {
                    self.outstanding.retain(|&h| h != from);
                    return Some((from, result));
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contention_wait_starts_at_a_millisecond_and_doubles_to_its_cap() {
        let mut contention = Contention::default();
        let bounds: Vec<u64> = (0..10)
            .map(|_| contention.next_bound().as_millis() as u64)
            .collect();
        assert_eq!(bounds, [1, 2, 4, 8, 16, 32, 64, 100, 100, 100]);
        for _ in 0..100 {
            contention.next_bound();
        }
        assert_eq!(
            contention.next_bound(),
            CONTENTION_BACKOFF_MAX,
            "no overflow after many waits"
        );
    }
}
