//! The write path: every live replica gets the mutations; the write returns after `blockFor`
//! acknowledgements; replicas that are down, or that do not answer in time, get a hint.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::messaging::{Reply, Waiting};
use super::metrics::add;
use super::topology::Topology;
use super::{check_write_level, counts, Coordinator, CoordinatorError, WriteRequest, WriteType};
use crate::consistency::{
    assure_sufficient_live_for_write, block_for_write, each_quorum_block_for_write, ConsistencyLevel,
    ReplicaState, Replication,
};
use crate::message::Message;
use crate::node::HostId;
use crate::replica::{apply_local, Mutation, ReplicaError, ReplicaErrorKind};
use crate::transport::Lane;

/// Mutations of partitions that share their replicas, natural and pending.
pub(super) struct Group {
    pub replicas: Vec<HostId>,
    pub pending: Vec<HostId>,
    pub mutations: Vec<Mutation>,
    /// A replica that holds the mutations already (a counter's leader): it is sent nothing and
    /// counts as an acknowledgement.
    pub applied_on: Option<HostId>,
}

/// Acknowledgements counted the way the level counts them.
struct Acks<'a> {
    cl: ConsistencyLevel,
    local_dc: &'a str,
    block_for: usize,
    /// EACH_QUORUM: per data center, needed and received.
    each: BTreeMap<String, (usize, usize)>,
    received: usize,
    failures: usize,
    error: Option<ReplicaError>,
}

impl<'a> Acks<'a> {
    fn new(
        cl: ConsistencyLevel,
        replication: &Replication,
        local_dc: &'a str,
        block_for: usize,
        pending: &[ReplicaState<'_>],
    ) -> Acks<'a> {
        let each = match cl {
            ConsistencyLevel::EachQuorum => each_quorum_block_for_write(replication, pending)
                .into_iter()
                .map(|(dc, n)| (dc, (n, 0)))
                .collect(),
            _ => BTreeMap::new(),
        };
        Acks {
            cl,
            local_dc,
            block_for,
            each,
            received: 0,
            failures: 0,
            error: None,
        }
    }

    fn ack(&mut self, dc: &str) {
        if counts(self.cl, dc, self.local_dc) {
            self.received += 1;
        }
        if let Some((_, got)) = self.each.get_mut(dc) {
            *got += 1;
        }
    }

    /// A hint stored for a write at ANY counts as its acknowledgement.
    fn hinted(&mut self) {
        if self.cl == ConsistencyLevel::Any {
            self.received += 1;
        }
    }

    fn fail(&mut self, e: ReplicaError) {
        self.failures += 1;
        self.error.get_or_insert(e);
    }

    /// The error for a write the failures made impossible: a refusal the client must hear
    /// as it is (device full), or Cassandra's write failure.
    fn failure(&mut self, write_type: WriteType) -> CoordinatorError {
        match self.error.take() {
            Some(e) if e.is_refusal() => CoordinatorError::Replica(e),
            _ => CoordinatorError::WriteFailure {
                consistency: self.cl,
                received: self.received,
                block_for: self.block_for,
                failures: self.failures,
                write_type,
            },
        }
    }

    fn satisfied(&self) -> bool {
        if self.each.is_empty() {
            self.received >= self.block_for
        } else {
            self.each.values().all(|(need, got)| got >= need)
        }
    }
}

impl Coordinator {
    /// Applies mutations at `consistency`. Mutations of different partitions may have
    /// different replicas: each group is checked for enough live replicas before anything is
    /// sent, then all are written at once.
    pub async fn write(&self, request: WriteRequest<'_>) -> Result<(), CoordinatorError> {
        let cl = request.consistency;
        check_write_level(cl)?;
        add(&self.metrics.writes, 1);
        let topology = self.topology();
        let replication = request.replication;
        let mut groups: Vec<Group> = Vec::new();
        {
            let map = (!matches!(replication, Replication::Local)).then(|| topology.map(replication));
            let mut pending = Vec::new();
            for m in request.mutations {
                let replicas: &[HostId] = match &map {
                    Some(map) => map.replicas(m.token),
                    None => std::slice::from_ref(&self.local),
                };
                pending.clear();
                if map.is_some() {
                    topology.pending_replicas(replication, m.token, replicas, &mut pending);
                }
                match groups
                    .iter_mut()
                    .find(|g| g.replicas.as_slice() == replicas && g.pending == pending)
                {
                    Some(group) => group.mutations.push(m),
                    None => groups.push(Group {
                        replicas: replicas.to_vec(),
                        pending: pending.clone(),
                        mutations: vec![m],
                        applied_on: None,
                    }),
                }
            }
        }
        for group in &groups {
            self.check_live_for_write(&topology, group, cl, replication)?;
            self.count_not_replica(&group.replicas);
        }
        if groups.len() == 1 {
            let group = groups.pop().expect("one group");
            return self
                .write_group(&topology, replication, cl, group, request.write_type)
                .await;
        }
        let writes = groups.into_iter().map(|group| {
            let topology = &topology;
            async move {
                self.write_group(topology, replication, cl, group, request.write_type)
                    .await
            }
        });
        for result in join_all(writes.collect()).await {
            result?;
        }
        Ok(())
    }

    /// Refuses with `Unavailable`, before anything is sent, if too few of a group's natural and
    /// pending replicas are alive for `cl` (see [`assure_sufficient_live_for_write`]).
    pub(super) fn check_live_for_write(
        &self,
        topology: &Topology,
        group: &Group,
        cl: ConsistencyLevel,
        replication: &Replication,
    ) -> Result<(), CoordinatorError> {
        if group.pending.is_empty() {
            return self.check_live(topology, &group.replicas, cl, replication);
        }
        let natural = topology.states(&group.replicas, self.local, &*self.liveness);
        let pending = topology.states(&group.pending, self.local, &*self.liveness);
        assure_sufficient_live_for_write(cl, replication, &self.local_dc, &natural, &pending).map_err(|u| {
            add(&self.metrics.unavailable, 1);
            CoordinatorError::Unavailable(u)
        })
    }

    /// Writes one group of mutations that share their replicas, natural and pending.
    pub(super) async fn write_group(
        &self,
        topology: &Topology,
        replication: &Replication,
        cl: ConsistencyLevel,
        group: Group,
        write_type: WriteType,
    ) -> Result<(), CoordinatorError> {
        let Group {
            replicas: natural,
            pending,
            mutations,
            applied_on,
        } = group;
        let has_local = (natural.contains(&self.local) || pending.contains(&self.local))
            && applied_on != Some(self.local);
        if natural.len() == 1 && pending.is_empty() && applied_on == natural.first().copied() {
            return Ok(());
        }
        if natural.len() == 1 && pending.is_empty() && has_local {
            // The common single-replica case: no channel, no copy.
            return apply_local(&*self.replica, mutations)
                .await
                .map_err(CoordinatorError::Replica);
        }
        // One copy for every replica's message and the hints; the local replica takes its own.
        let mutations = Arc::new(mutations);
        let pending_states = topology.states(&pending, self.local, &*self.liveness);
        let block_for = match cl {
            ConsistencyLevel::Any => 1,
            _ => block_for_write(cl, replication, &self.local_dc, &pending_states),
        };
        let mut acks = Acks::new(cl, replication, &self.local_dc, block_for, &pending_states);
        if let Some(done) = applied_on {
            acks.ack(topology.data_center(done));
        }
        let now_us = self.clock.now_us();
        let (tx, mut rx) = mpsc::unbounded_channel::<Reply>();
        let mut waiting = self.messaging.as_ref().map(|m| Waiting::new(m.clone()));
        let mut outstanding: Vec<HostId> = Vec::new();
        let replicas: Vec<HostId> = natural.iter().chain(&pending).copied().collect();
        for &host in replicas
            .iter()
            .filter(|&&h| h != self.local && Some(h) != applied_on)
        {
            let sent = match (&self.messaging, &mut waiting) {
                (Some(messaging), Some(waiting)) if self.is_alive(host) => messaging
                    .request(host, Lane::Requests, &tx, |id| Message::MutationRequest {
                        id,
                        mutations: mutations.clone(),
                    })
                    .map(|id| waiting.push(id))
                    .is_some(),
                _ => false,
            };
            if sent {
                outstanding.push(host);
            } else if self.hint(host, &mutations, now_us) {
                acks.hinted();
            }
        }
        let started = Instant::now();
        if has_local {
            // A copy: the mutations are still needed for hints if a replica does not answer.
            match apply_local(&*self.replica, Vec::clone(&mutations)).await {
                Ok(()) => acks.ack(&self.local_dc),
                Err(e) => acks.fail(e),
            }
        }
        let deadline = started + self.config.write_timeout;
        while !acks.satisfied() {
            let countable = outstanding
                .iter()
                .filter(|&&h| counts(cl, topology.data_center(h), &self.local_dc))
                .count();
            if acks.received + countable < block_for && acks.each.is_empty() && acks.failures > 0 {
                // The level is out of reach: the replicas still to answer may apply the write
                // (and get a hint if they do not), but the client hears now, not at the timeout.
                self.hint_stragglers(waiting.take(), rx, outstanding, &mutations, now_us, deadline);
                return Err(acks.failure(write_type));
            }
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some((from, Message::MutationResponse { result, .. }))) => {
                    outstanding.retain(|&h| h != from);
                    match result {
                        Ok(()) => {
                            self.record_replica_latency(started.elapsed());
                            acks.ack(topology.data_center(from));
                        }
                        Err(e) => {
                            if e.kind == ReplicaErrorKind::Unreachable {
                                // It went down: it may or may not have the write.
                                self.hint(from, &mutations, now_us);
                            }
                            acks.fail(e);
                        }
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => {
                    for host in outstanding {
                        self.hint(host, &mutations, now_us);
                    }
                    add(&self.metrics.write_timeouts, 1);
                    return Err(CoordinatorError::WriteTimeout {
                        consistency: cl,
                        received: acks.received,
                        block_for,
                        write_type,
                    });
                }
            }
        }
        // The level is met; the replicas still to answer get a hint if they do not by the
        // timeout. This waits in the background, holding no request.
        self.hint_stragglers(waiting, rx, outstanding, &mutations, now_us, deadline);
        Ok(())
    }

    /// Waits in the background, until `deadline`, for the replicas still to acknowledge a
    /// write, and hints those that do not (or that went down).
    fn hint_stragglers(
        &self,
        waiting: Option<Waiting>,
        mut rx: mpsc::UnboundedReceiver<Reply>,
        mut outstanding: Vec<HostId>,
        mutations: &Arc<Vec<Mutation>>,
        now_us: i64,
        deadline: Instant,
    ) {
        if outstanding.is_empty() {
            return;
        }
        let (Some(hinter), Some(waiting)) = (self.hinter.clone(), waiting) else {
            return;
        };
        let mutations = mutations.clone();
        tokio::spawn(async move {
            let _waiting = waiting;
            while !outstanding.is_empty() {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some((from, Message::MutationResponse { result, .. }))) => {
                        if result.is_ok() {
                            outstanding.retain(|&h| h != from);
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => break,
                }
            }
            for host in outstanding {
                hinter.hint(host, &mutations, now_us);
            }
        });
    }

    /// Stores a hint for `host` if this node keeps hints; true if one was stored.
    pub(super) fn hint(&self, host: HostId, mutations: &Arc<Vec<Mutation>>, now_us: i64) -> bool {
        match &self.hinter {
            Some(h) => h.hint(host, mutations, now_us),
            None => false,
        }
    }
}

/// Runs futures at once and collects their outputs in order.
pub(super) async fn join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<std::pin::Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, out) in futures.iter_mut().zip(outputs.iter_mut()) {
            if out.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *out = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|o| o.expect("every future finished"))
        .collect()
}
