//! The operations: a node's own join or replacement, its decommission, and the removal of a
//! dead node; each drives its change from start to finish, or resumes it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use super::checkpoint;
use super::control::{self, Answer, Call, Span, SpanFrom};
use super::plan::transfers;
use super::{FetchJob, TopologyError, TopologyService};
use crate::metadata::{ChangeKind, ClusterMetadata, Command, CommandResult, TopologyChange};
use crate::node::HostId;

/// How long a fetch call waits before it answers with progress; the driver asks again.
const FETCH_POLL: Duration = Duration::from_secs(20);
/// How long a fetch call may take to be answered at all.
const FETCH_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a driver looks again at nodes it waits for.
const RETRY_INTERVAL: Duration = Duration::from_millis(200);
/// How often a driver that waits for a node that is down says so.
const WAITING_LOG_INTERVAL: Duration = Duration::from_secs(30);

impl TopologyService {
    /// Drives this node's join, or its replacement of a dead node, to its end: waits until
    /// every live node writes to it, streams every range it takes over (resuming from its
    /// checkpoint), then finishes the change. The change must be in progress, with this node
    /// arriving. On a failure another try cannot mend (no replica left for a range, a full
    /// device) it aborts the change, which leaves the ring as it was, and says so.
    pub async fn join(self: &Arc<Self>) -> Result<(), TopologyError> {
        let m = self.log.current();
        let change = m
            .change
            .clone()
            .filter(|c| c.kind.arriving() == Some(self.local))
            .ok_or_else(|| {
                TopologyError::NotInProgress(format!("no join of {} is in progress", self.local))
            })?;
        let purpose = change.kind.name();
        tracing::info!(
            change = change.id,
            "{purpose}: waiting for every live node to write to this one too"
        );
        self.drain_all(change.id).await?;
        let spans: Vec<SpanFrom> = self
            .plan(&m, &change)?
            .into_iter()
            .filter(|(to, _)| *to == self.local)
            .map(|(_, s)| s)
            .collect();
        tracing::info!(
            change = change.id,
            ranges = spans.len(),
            "{purpose}: streaming the ranges this node takes over"
        );
        let received = {
            let _streaming = self.ranges.read().await;
            self.receive(change.id, purpose, spans).await
        };
        if let Err(e) = received {
            if matches!(e, TopologyError::NoSource { .. } | TopologyError::Stream(_)) {
                tracing::error!(change = change.id, "{purpose} cannot finish: {e}; aborting it");
                let abort = Command::AbortChange { id: change.id };
                if let Err(a) = self.log.propose_removing(self.local, abort).await {
                    tracing::error!(
                        "the abort was not confirmed either: {a}; hayate removenode {} ends it",
                        self.local
                    );
                }
            }
            return Err(e);
        }
        let finish = Command::FinishChange { id: change.id };
        let result = match change.kind {
            ChangeKind::Replace { old, .. } => self.log.propose_removing(old, finish).await,
            _ => self.log.propose(finish).await,
        };
        self.check_finished(&change, result)?;
        if let Some(dir) = &self.config.state_dir {
            checkpoint::remove_others(dir, None);
        }
        tracing::info!(change = change.id, "{purpose} finished: this node is normal");
        Ok(())
    }

    /// Starts this node's decommission (or resumes the one in progress) and drives it to its
    /// end: every range it holds streams to its next owner, then it leaves the ring. The caller
    /// has checked that every keyspace keeps enough nodes for its replication factor.
    pub async fn decommission(self: &Arc<Self>) -> Result<(), TopologyError> {
        let leave = ChangeKind::Leave { node: self.local };
        let change = self
            .start_or_resume(leave, Command::StartLeave(self.local))
            .await?;
        self.hand_over(&change, "decommission").await?;
        self.hand_over_hints().await?;
        let result = self
            .log
            .propose_removing(self.local, Command::FinishChange { id: change.id })
            .await;
        self.check_finished(&change, result)?;
        self.decommissioned.store(true, Ordering::Relaxed);
        tracing::info!(change = change.id, "decommissioned: this node left the ring");
        Ok(())
    }

    /// Removes the dead node `dead` from the ring (or resumes its removal): the ranges it held
    /// stream to their next owners from the other replicas, then it is forgotten. A dead node
    /// still joining (or replacing another) is not removed but has its change aborted. Refused
    /// for a node that is alive.
    pub async fn remove(self: &Arc<Self>, dead: HostId) -> Result<String, TopologyError> {
        let change = match self.begin_removal(dead).await? {
            Ok(change) => change,
            Err(done) => return Ok(done),
        };
        self.hand_over(&change, "removenode").await?;
        let result = self
            .log
            .propose_removing(dead, Command::FinishChange { id: change.id })
            .await;
        self.check_finished(&change, result)?;
        Ok(format!("{dead} removed"))
    }

    /// Starts this node's decommission, or finds it in progress: the first step of
    /// [`TopologyService::decommission`], for a caller that wants the refusals at once and
    /// drives the rest in the background.
    pub async fn begin_decommission(&self) -> Result<TopologyChange, TopologyError> {
        self.start_or_resume(
            ChangeKind::Leave { node: self.local },
            Command::StartLeave(self.local),
        )
        .await
    }

    /// The same for the removal of `dead`: `Ok(None)` when there is nothing more to drive (a
    /// join of a dead node was aborted instead), with what was done.
    pub async fn begin_removal(&self, dead: HostId) -> Result<Result<TopologyChange, String>, TopologyError> {
        let m = self.log.current();
        if !m.members.contains_key(&dead) {
            return Err(TopologyError::Refused(format!(
                "{dead} is not a member of the ring"
            )));
        }
        if dead == self.local || self.liveness.is_alive(dead) {
            return Err(TopologyError::Refused(format!(
                "{dead} is alive: removenode is for dead nodes; decommission a live one instead (hayate \
                 decommission --host <its address>)"
            )));
        }
        if let Some(c) = m.change.clone().filter(|c| c.kind.arriving() == Some(dead)) {
            let result = self
                .log
                .propose_removing(dead, Command::AbortChange { id: c.id })
                .await;
            self.check_finished(&c, result)?;
            return Ok(Err(format!("{dead} was dead while it joined: aborted {c}")));
        }
        self.start_or_resume(ChangeKind::Remove { node: dead }, Command::StartRemove(dead))
            .await
            .map(Ok)
    }

    /// The change of `kind` in progress, or a new one started with `start`.
    async fn start_or_resume(
        &self,
        kind: ChangeKind,
        start: Command,
    ) -> Result<TopologyChange, TopologyError> {
        if let Some(c) = self.log.current().change.clone() {
            return if c.kind == kind {
                tracing::info!(change = c.id, "resuming {c}");
                Ok(c)
            } else {
                Err(TopologyError::Refused(format!(
                    "{c} is in progress: one topology change at a time"
                )))
            };
        }
        match self.log.propose(start).await.map_err(TopologyError::Log)? {
            CommandResult::Refused(reason) => Err(TopologyError::Refused(reason)),
            _ => {
                let c = self
                    .log
                    .current()
                    .change
                    .clone()
                    .filter(|c| c.kind == kind)
                    .ok_or_else(|| {
                        TopologyError::Failed("the change started, then ended at once".to_owned())
                    })?;
                tracing::info!(change = c.id, "started {c}");
                Ok(c)
            }
        }
    }

    /// The streams of a decommission or removal: each node taking ranges over pulls them.
    async fn hand_over(
        self: &Arc<Self>,
        change: &TopologyChange,
        purpose: &str,
    ) -> Result<(), TopologyError> {
        self.drain_all(change.id).await?;
        let m = self.log.current();
        let mut by_target: BTreeMap<HostId, Vec<SpanFrom>> = BTreeMap::new();
        for (to, s) in self.plan(&m, change)? {
            if s.sources.is_empty() {
                tracing::warn!(span = %s.span, "no live replica holds this range (replication factor 1?): its data is lost with the node");
                continue;
            }
            by_target.entry(to).or_default().push(s);
        }
        tracing::info!(
            change = change.id,
            targets = by_target.len(),
            "{purpose}: the next owners stream their ranges"
        );
        let mut jobs = JoinSet::new();
        for (to, spans) in by_target {
            let (service, purpose, id) = (self.clone(), purpose.to_owned(), change.id);
            jobs.spawn(async move { service.drive_fetch(to, id, purpose, spans).await });
        }
        let mut outcome = Ok(());
        while let Some(joined) = jobs.join_next().await {
            if let Err(e) =
                joined.unwrap_or_else(|e| Err(TopologyError::Failed(format!("a fetch task failed: {e}"))))
            {
                outcome = Err(e);
                jobs.abort_all();
            }
        }
        if let Err(e) = &outcome {
            if matches!(e, TopologyError::Target { .. }) {
                tracing::error!(change = change.id, "{purpose} cannot finish: {e}; aborting it");
                if let Err(a) = self.log.propose(Command::AbortChange { id: change.id }).await {
                    tracing::error!("the abort was not confirmed either: {a}");
                }
            }
        }
        outcome
    }

    /// Has `to` pull `spans`, asking until it says they are all there.
    async fn drive_fetch(
        self: &Arc<Self>,
        to: HostId,
        change: u64,
        purpose: String,
        spans: Vec<SpanFrom>,
    ) -> Result<(), TopologyError> {
        let call = Call::Fetch {
            change,
            purpose,
            spans,
        };
        let mut last_log = None::<Instant>;
        loop {
            if to == self.local {
                // This node takes ranges over itself (a removal driven from a node that gains).
                let Call::Fetch {
                    change,
                    purpose,
                    spans,
                } = call.clone()
                else {
                    unreachable!("built as a fetch above")
                };
                match self.fetch_for(self.local, change, purpose, spans).await {
                    Answer::Fetched => return Ok(()),
                    Answer::Failed { reason } | Answer::Refused { reason } => {
                        return Err(TopologyError::Target { host: to, reason })
                    }
                    _ => continue,
                }
            }
            let answer = if self.liveness.is_alive(to) {
                control::call(&self.messaging, to, &call, FETCH_CALL_TIMEOUT).await
            } else {
                Err(format!("{to} is down"))
            };
            let state = match &answer {
                Ok(Answer::Fetched) => "done".to_owned(),
                Ok(Answer::Fetching { spans_total, .. }) => format!("streaming {spans_total} ranges"),
                Ok(other) => format!("{other:?}"),
                Err(e) => format!("waiting: {e}"),
            };
            self.handover
                .lock()
                .expect("handover lock poisoned")
                .insert(to, state);
            match answer {
                Ok(Answer::Fetched) => return Ok(()),
                Ok(Answer::Fetching { .. }) => {}
                Ok(Answer::Failed { reason }) => return Err(TopologyError::Target { host: to, reason }),
                Ok(other) => {
                    return Err(TopologyError::Target {
                        host: to,
                        reason: format!("it answered {other:?}"),
                    })
                }
                Err(e) => {
                    if last_log.is_none_or(|t| t.elapsed() >= WAITING_LOG_INTERVAL) {
                        tracing::warn!(node = %to, "waiting for a node that takes ranges over: {e}");
                        last_log = Some(Instant::now());
                    }
                    tokio::time::sleep(RETRY_INTERVAL * 5).await;
                }
            }
        }
    }

    /// A node's side of `Call::Fetch`: starts (or joins) the streams of `spans` for the change,
    /// and answers when they are done, or after [`FETCH_POLL`] with how far they are.
    pub(super) async fn fetch_for(
        self: &Arc<Self>,
        from: HostId,
        change: u64,
        purpose: String,
        spans: Vec<SpanFrom>,
    ) -> Answer {
        let current = self.log.current();
        if current.change.as_ref().is_none_or(|c| c.id != change) {
            return Answer::Refused {
                reason: format!("the change started at epoch {change} is not in progress here (yet)"),
            };
        }
        let job = {
            let mut fetches = self.fetches.lock().expect("fetches lock poisoned");
            fetches.retain(|id, _| *id == change);
            fetches
                .entry(change)
                .or_insert_with(|| {
                    let job = Arc::new(FetchJob {
                        spans_total: spans.len() as u64,
                        outcome: Default::default(),
                        fatal: std::sync::atomic::AtomicBool::new(false),
                    });
                    let (service, running) = (self.clone(), job.clone());
                    tracing::info!(change, driver = %from, ranges = spans.len(), "{purpose}: taking ranges over");
                    tokio::spawn(async move {
                        let received = {
                            let _streaming = service.ranges.read().await;
                            service.receive(change, &purpose, spans).await
                        };
                        if let Err(e) = &received {
                            running.fatal.store(true, Ordering::Relaxed);
                            tracing::error!(change, "taking ranges over failed: {e}");
                        }
                        running.finish(received.map_err(|e| e.to_string()));
                    });
                    job
                })
                .clone()
        };
        match job.wait(FETCH_POLL).await {
            Some(Ok(())) => Answer::Fetched,
            Some(Err(reason)) => {
                if !job.fatal.load(Ordering::Relaxed) {
                    self.fetches
                        .lock()
                        .expect("fetches lock poisoned")
                        .remove(&change);
                }
                Answer::Failed { reason }
            }
            None => Answer::Fetching {
                spans_done: 0,
                spans_total: job.spans_total,
            },
        }
    }

    /// Waits until every live node (this one included) plans its requests on a ring of
    /// `epoch` or later and none planned on an older ring still runs.
    pub(super) async fn drain_all(&self, epoch: u64) -> Result<(), TopologyError> {
        let deadline = Instant::now() + self.config.drain_timeout;
        let mut waiting: BTreeSet<HostId> = self
            .log
            .current()
            .members
            .keys()
            .copied()
            .filter(|h| *h != self.local)
            .collect();
        loop {
            let local_done = match self.coordinator() {
                Some(c) => c.drained(epoch, self.config.drain_call_timeout).await,
                None => true,
            };
            let mut calls = JoinSet::new();
            for &host in &waiting {
                if !self.liveness.is_alive(host) {
                    // A node that is down coordinates nothing; when it comes back it replays the
                    // log before it serves.
                    calls.spawn(async move { (host, true) });
                    continue;
                }
                let messaging = self.messaging.clone();
                let timeout = self.config.drain_call_timeout + Duration::from_secs(5);
                calls.spawn(async move {
                    let answer = control::call(&messaging, host, &Call::Drain { epoch }, timeout).await;
                    (host, matches!(answer, Ok(Answer::Drained { drained: true, .. })))
                });
            }
            while let Some(Ok((host, done))) = calls.join_next().await {
                if done {
                    waiting.remove(&host);
                }
            }
            if local_done && waiting.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(TopologyError::Drain {
                    host: waiting.iter().next().copied().unwrap_or(self.local),
                    epoch,
                });
            }
            tokio::time::sleep(RETRY_INTERVAL).await;
        }
    }

    /// The ranges `change` moves: each with the node taking it over and its sources.
    pub(super) fn plan(
        &self,
        m: &ClusterMetadata,
        change: &TopologyChange,
    ) -> Result<Vec<(HostId, SpanFrom)>, TopologyError> {
        let ring = m
            .ring()
            .map_err(|e| TopologyError::Failed(format!("the ring does not build: {e}")))?;
        let pending = m
            .pending_ring()
            .ok_or_else(|| TopologyError::NotInProgress("no change is in progress".to_owned()))?
            .map_err(|e| TopologyError::Failed(format!("the pending ring does not build: {e}")))?;
        let tables = self.tables.tables();
        Ok(transfers(&ring, &pending, change.kind, &tables)
            .into_iter()
            .map(|t| {
                (
                    t.to,
                    SpanFrom {
                        span: Span::new(t.table, t.range),
                        sources: t.sources,
                    },
                )
            })
            .collect())
    }

    /// Whether a finish (or abort) of `change` took: applied now, or applied by an earlier try
    /// whose answer was lost.
    fn check_finished(
        &self,
        change: &TopologyChange,
        result: Result<CommandResult, String>,
    ) -> Result<(), TopologyError> {
        match result {
            Ok(CommandResult::Refused(reason)) => {
                if self
                    .log
                    .current()
                    .change
                    .as_ref()
                    .is_some_and(|c| c.id == change.id)
                {
                    Err(TopologyError::Refused(reason))
                } else {
                    // Ended already: an earlier try was applied.
                    Ok(())
                }
            }
            Ok(_) => Ok(()),
            Err(e) => Err(TopologyError::Log(e)),
        }
    }
}
