//! The read path for one partition: data from one replica, digests from the others the level
//! needs; on a mismatch, data from all of them, merged, with the replicas that were behind
//! repaired before the answer (blocking read repair, so that a QUORUM read that saw a value
//! never sees an older one afterwards).

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::messaging::{Reply, Waiting};
use super::metrics::add;
use super::topology::Topology;
use super::{check_read_level, Coordinator, CoordinatorError, ReadRequest, ReadResult, SpeculativeRetry};
use crate::consistency::{block_for, each_quorum_block_for, ConsistencyLevel, Replication};
use crate::message::{digest, Message, ReadReply};
use crate::node::HostId;
use crate::replica::{read_local, Mutation, ReadCommand, ReadResponse, ReplicaError};
use crate::transport::Lane;

impl Coordinator {
    /// Reads at `consistency`: a partition slice, or a run of the table in token order.
    pub async fn read(&self, request: ReadRequest<'_>) -> Result<ReadResult, CoordinatorError> {
        check_read_level(request.consistency)?;
        match &request.command {
            ReadCommand::Partition(_) => {
                add(&self.metrics.reads, 1);
                self.read_partition(request).await
            }
            ReadCommand::Range(_) => {
                add(&self.metrics.range_reads, 1);
                self.read_range(request).await
            }
        }
    }

    /// The live replicas a read may ask, best first: this node, then its data center, then the
    /// others (each in placement order); only the local data center for the LOCAL_ levels.
    pub(super) fn candidates(
        &self,
        topology: &Topology,
        replicas: &[HostId],
        cl: ConsistencyLevel,
    ) -> Vec<HostId> {
        let mut out: Vec<HostId> = Vec::with_capacity(replicas.len());
        if replicas.contains(&self.local) {
            out.push(self.local);
        }
        let live = |h: &&HostId| **h != self.local && self.is_alive(**h);
        let local_dc = |h: &&HostId| topology.data_center(**h) == self.local_dc;
        out.extend(replicas.iter().filter(live).filter(local_dc));
        if !cl.is_datacenter_local() {
            out.extend(replicas.iter().filter(live).filter(|h| !local_dc(h)));
        }
        out
    }

    /// The replicas a read contacts: the first `block_for` candidates, or for EACH_QUORUM the
    /// first quorum of each data center.
    pub(super) fn contacts(
        &self,
        topology: &Topology,
        candidates: &[HostId],
        cl: ConsistencyLevel,
        replication: &Replication,
        block_for: usize,
    ) -> Vec<HostId> {
        if cl == ConsistencyLevel::EachQuorum && matches!(replication, Replication::NetworkTopology { .. }) {
            let mut out = Vec::new();
            for (dc, need) in each_quorum_block_for(replication) {
                out.extend(
                    candidates
                        .iter()
                        .filter(|&&h| topology.data_center(h) == dc)
                        .take(need),
                );
            }
            return out;
        }
        candidates.iter().take(block_for).copied().collect()
    }

    fn speculation_delay(&self, retry: SpeculativeRetry) -> Option<Duration> {
        match retry {
            SpeculativeRetry::Never => None,
            SpeculativeRetry::Always => Some(Duration::ZERO),
            SpeculativeRetry::After(d) => Some(d),
            // Before enough answers were timed, half the read timeout, as Cassandra starts.
            SpeculativeRetry::Percentile99 => Some(
                self.latency
                    .percentile(99.0)
                    .unwrap_or(self.config.read_timeout / 2),
            ),
            SpeculativeRetry::Percentile(p) => {
                Some(self.latency.percentile(p).unwrap_or(self.config.read_timeout / 2))
            }
        }
    }

    pub(super) fn record_replica_latency(&self, latency: Duration) {
        self.latency.record(latency);
        add(&self.metrics.replica_responses, 1);
        add(&self.metrics.replica_latency_us_total, latency.as_micros() as u64);
    }

    async fn read_partition(&self, request: ReadRequest<'_>) -> Result<ReadResult, CoordinatorError> {
        let cl = request.consistency;
        let replication = request.replication;
        let ReadCommand::Partition(p) = &request.command else {
            unreachable!("read_partition reads partitions");
        };
        let topology = self.topology();
        let map;
        let replicas: &[HostId] = if matches!(replication, Replication::Local) {
            std::slice::from_ref(&self.local)
        } else {
            map = topology.map(replication);
            map.replicas(p.token)
        };
        self.check_live(&topology, replicas, cl, replication)?;
        self.count_not_replica(replicas);
        let block_for = block_for(cl, replication, &self.local_dc);
        let read_here = || async {
            read_local(&self.replica, &request.command)
                .await
                .map(ReadResult::from)
                .map_err(CoordinatorError::Replica)
        };
        if replicas == [self.local] {
            // One replica, and it is this node: nothing to compare.
            return read_here().await;
        }
        let mut candidates = self.candidates(&topology, replicas, cl);
        self.prefer_staying(&topology, replication, p.token, &mut candidates);
        let targets = self.contacts(&topology, &candidates, cl, replication, block_for);
        if targets == [self.local] && request.speculative_retry != SpeculativeRetry::Always {
            // The level needs one answer and this node is a replica (a token-aware driver at
            // ONE or LOCAL_ONE): its own read is the answer, with nothing to compare.
            return read_here().await;
        }
        let block_for = targets.len().max(1);
        let started = Instant::now();
        let deadline = started + self.config.read_timeout;
        let timeout = |received: usize, data_present: bool| {
            add(&self.metrics.read_timeouts, 1);
            CoordinatorError::ReadTimeout {
                consistency: cl,
                received,
                block_for,
                data_present,
            }
        };

        let (tx, mut rx) = mpsc::unbounded_channel::<Reply>();
        let mut waiting = self.messaging.as_ref().map(|m| Waiting::new(m.clone()));
        let mut asked: Vec<HostId> = Vec::with_capacity(targets.len() + 1);
        let send = |host: HostId, digest_only: bool, waiting: &mut Option<Waiting>| -> bool {
            let (Some(m), Some(w)) = (&self.messaging, waiting.as_mut()) else {
                return false;
            };
            m.request(host, Lane::Requests, &tx, |id| Message::ReadRequest {
                id,
                command: request.command.clone(),
                digest_only,
            })
            .map(|id| w.push(id))
            .is_some()
        };
        let data_host = targets[0];
        for (i, &host) in targets.iter().enumerate() {
            if host != self.local && send(host, i > 0, &mut waiting) {
                asked.push(host);
            }
        }
        // Answers: the data, and every digest with its node.
        let mut data: Option<(HostId, ReadResponse)> = None;
        let mut digests: Vec<(HostId, [u8; 16])> = Vec::new();
        // Some replica behind a digest stopped at the limit: it may hold rows past the last.
        let mut digest_more = false;
        let mut error: Option<ReplicaError> = None;
        if targets.contains(&self.local) {
            match read_local(&self.replica, &request.command).await {
                Ok(response) if data_host == self.local => data = Some((self.local, response)),
                Ok(response) => {
                    digest_more |= response.more;
                    digests.push((self.local, digest(&response)));
                }
                Err(e) => error = Some(e),
            }
        }
        let mut spare = candidates.iter().filter(|h| !targets.contains(h)).copied();
        let mut failures = usize::from(error.is_some());
        let mut speculate_at = self
            .speculation_delay(request.speculative_retry)
            .map(|d| started + d);
        // EACH_QUORUM counts answers per data center: a speculative extra replica in one data
        // center does not stand in for a missing answer in another.
        let each_quorum = match cl {
            ConsistencyLevel::EachQuorum => each_quorum_block_for(replication),
            _ => Default::default(),
        };
        loop {
            let received = digests.len() + usize::from(data.is_some());
            let every_dc = || {
                each_quorum.iter().all(|(dc, &need)| {
                    let answered = data.iter().map(|(h, _)| h).chain(digests.iter().map(|(h, _)| h));
                    answered.filter(|&&h| topology.data_center(h) == dc).count() >= need
                })
            };
            if data.is_some() && received >= block_for && every_dc() {
                break;
            }
            if asked.is_empty() {
                if let Some(e) = error.take() {
                    // Nobody left to ask: the failures made the level impossible.
                    return Err(read_failure(e, cl, received, block_for, failures, data.is_some()));
                }
            }
            let wake = speculate_at.map_or(deadline, |s| s.min(deadline));
            match tokio::time::timeout_at(wake, rx.recv()).await {
                Ok(Some((from, Message::ReadResponse { result, .. }))) => {
                    asked.retain(|&h| h != from);
                    if result.is_ok() {
                        self.record_replica_latency(started.elapsed());
                    }
                    match result {
                        Ok(ReadReply::Data(r)) if data.is_none() => data = Some((from, r)),
                        Ok(ReadReply::Data(r)) => {
                            digest_more |= r.more;
                            digests.push((from, digest(&r)));
                        }
                        Ok(ReadReply::Digest { digest: d, more }) => {
                            digest_more |= more;
                            digests.push((from, d));
                        }
                        Err(e) => {
                            // Another replica answers in its place, if there is one.
                            failures += 1;
                            if let Some(extra) = spare.next() {
                                if send(extra, data.is_some(), &mut waiting) {
                                    asked.push(extra);
                                }
                            }
                            error = Some(e);
                        }
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) => return Err(timeout(received, data.is_some())),
                Err(_) if Instant::now() >= deadline => return Err(timeout(received, data.is_some())),
                Err(_) => {
                    // Speculate: one more replica, asked for whatever is missing.
                    speculate_at = None;
                    if let Some(extra) = spare.next() {
                        // The data is what is late if it has not come: ask the extra for it.
                        if send(extra, data.is_some(), &mut waiting) {
                            add(&self.metrics.speculative_retries, 1);
                            asked.push(extra);
                        }
                    }
                }
            }
        }
        let (data_from, data) = data.expect("the loop ends with data");
        let data_digest = digest(&data);
        if digests.iter().all(|(_, d)| *d == data_digest) {
            // The same rows everywhere; but a replica that stopped at the limit may hold more
            // after them, even if the data replica has nothing more.
            let read_from: Vec<HostId> = std::iter::once(data_from)
                .chain(digests.iter().map(|(h, _)| *h))
                .collect();
            if self.read_gives_up(&topology, replication, p.token, &read_from) {
                drop(waiting);
                let (_, full) =
                    self.merge_for_read(&topology, replication, &request.command, vec![data.clone()]);
                let copies = self.pending_copies(&topology, replication, cl, &read_from, false, full);
                if !self.copy_to_pending(copies, deadline).await {
                    return Err(timeout(block_for.saturating_sub(1), true));
                }
            }
            let mut result = ReadResult::from(data);
            result.more |= digest_more;
            return Ok(result);
        }
        // The replicas disagree: read them all in full, merge, repair.
        add(&self.metrics.read_repairs, 1);
        let mut responses: Vec<(HostId, ReadResponse)> = vec![(data_from, data)];
        let mut full_asked: Vec<HostId> = Vec::with_capacity(digests.len());
        for &(host, _) in &digests {
            if host == self.local {
                match read_local(&self.replica, &request.command).await {
                    Ok(r) => responses.push((host, r)),
                    Err(e) => return Err(read_failure(e, cl, responses.len(), block_for, 1, true)),
                }
            } else if send(host, false, &mut waiting) {
                full_asked.push(host);
            } else {
                // Not sent (too many requests wait for answers): the round cannot have the
                // answers the level needs.
                return Err(timeout(responses.len(), true));
            }
        }
        while !full_asked.is_empty() {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some((from, Message::ReadResponse { result, .. }))) => {
                    // Only this round's answers count. A late answer from the first round (the
                    // replica a speculative retry stood in for) stands in for none of them: the
                    // replica it would replace could go unmerged and unrepaired, and EACH_QUORUM
                    // lose a data center's quorum.
                    let Some(i) = full_asked.iter().position(|&h| h == from) else {
                        continue;
                    };
                    match result {
                        Ok(ReadReply::Data(r)) => {
                            full_asked.swap_remove(i);
                            responses.push((from, r));
                        }
                        Ok(ReadReply::Digest { .. }) => {}
                        Err(e) => return Err(read_failure(e, cl, responses.len(), block_for, 1, true)),
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return Err(timeout(responses.len(), true)),
            }
        }
        let hosts: Vec<HostId> = responses.iter().map(|(h, _)| *h).collect();
        let (merged, full) = self.merge_for_read(
            &topology,
            replication,
            &request.command,
            responses.into_iter().map(|(_, r)| r).collect(),
        );
        let repaired = merged.repairs.iter().any(|r| !r.is_empty());
        let copies = self.pending_copies(&topology, replication, cl, &hosts, repaired, full);
        let mut repairs: Vec<(HostId, Vec<Mutation>)> = hosts.into_iter().zip(merged.repairs).collect();
        repairs.extend(copies);
        drop(waiting);
        let unacknowledged = self.repair(self.messaging.as_ref(), repairs, deadline).await;
        if unacknowledged > 0 {
            return Err(timeout(block_for.saturating_sub(unacknowledged), true));
        }
        Ok(merged.result)
    }
}

/// The error for a read that failures made impossible: a refusal the client must hear as it is,
/// or Cassandra's read failure.
pub(super) fn read_failure(
    e: ReplicaError,
    consistency: ConsistencyLevel,
    received: usize,
    block_for: usize,
    failures: usize,
    data_present: bool,
) -> CoordinatorError {
    if e.is_refusal() {
        return CoordinatorError::Replica(e);
    }
    CoordinatorError::ReadFailure {
        consistency,
        received,
        block_for,
        failures,
        data_present,
    }
}
