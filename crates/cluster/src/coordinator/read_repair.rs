//! Blocking read repair, and the copies a topology change in progress needs.
//!
//! A read whose replicas disagreed repairs those that were behind before it answers, so that a
//! QUORUM read that saw a version never sees an older one afterwards.
//!
//! While a change is in progress, a range's pending replicas (they take writes, not reads, until
//! the change ends) are not among those a read asks. A version the read returns is then on the
//! replicas it read, but the change may take some of them out of the range: a QUORUM read of
//! two replicas, one of which gives the range up, leaves the version on one of the final
//! replicas. Two things keep the level's promise across the change:
//! - reads ask the replicas that keep the range before those that give it up
//!   ([`Coordinator::prefer_staying`]), so that most reads read only final replicas;
//! - a read that still read a replica giving the range up, or that repaired one, gives the
//!   pending replicas a full copy of what it returned ([`Coordinator::pending_copies`]), and
//!   answers only once they hold it (Cassandra's blocking read repair sends its pending
//!   replicas the same full copy).

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::merge::{merge, Merged};
use super::messaging::{Messaging, Reply, Waiting};
use super::metrics::add;
use super::topology::Topology;
use super::{counts, Coordinator};
use crate::consistency::{ConsistencyLevel, Replication};
use crate::message::Message;
use crate::node::HostId;
use crate::replica::{apply_local, Mutation, ReadCommand, ReadResponse};
use crate::transport::Lane;

impl Coordinator {
    /// Puts the candidates that keep `token` after the change in progress before those that
    /// give it up, keeping the order within each; nothing moves when no change is in progress.
    pub(super) fn prefer_staying(
        &self,
        topology: &Topology,
        replication: &Replication,
        token: i64,
        candidates: &mut [HostId],
    ) {
        if matches!(replication, Replication::Local) {
            return;
        }
        if let Some(pending) = topology.pending_map(replication) {
            let staying = pending.replicas(token);
            candidates.sort_by_key(|h| !staying.contains(h));
        }
    }

    /// Whether a read of `token` from `read_from` must copy what it returns to the token's
    /// pending replicas even though no replica needed a repair: one it read gives the token up.
    pub(super) fn read_gives_up(
        &self,
        topology: &Topology,
        replication: &Replication,
        token: i64,
        read_from: &[HostId],
    ) -> bool {
        if matches!(replication, Replication::Local) {
            return false;
        }
        topology.pending_map(replication).is_some_and(|pending| {
            let staying = pending.replicas(token);
            read_from.iter().any(|h| !staying.contains(h))
        })
    }

    /// The copies the pending replicas need of what a read returned. `full` holds every row and
    /// tombstone the read merged, as the mutations a replica that had none of them would get;
    /// `read_from` is the replicas the read asked, and `repaired` whether it repaired any of
    /// them. A row's pending replicas (those the level counts) get it when the read repaired a
    /// replica or read one that gives the row's range up.
    pub(super) fn pending_copies(
        &self,
        topology: &Topology,
        replication: &Replication,
        cl: ConsistencyLevel,
        read_from: &[HostId],
        repaired: bool,
        full: Vec<Mutation>,
    ) -> Vec<(HostId, Vec<Mutation>)> {
        let pending = match replication {
            Replication::Local => None,
            _ => topology.pending_map(replication),
        };
        let Some(pending) = pending else {
            return Vec::new();
        };
        let map = topology.map(replication);
        let mut copies: BTreeMap<HostId, Vec<Mutation>> = BTreeMap::new();
        for m in full {
            let natural = map.replicas(m.token);
            let staying = pending.replicas(m.token);
            if !repaired && read_from.iter().all(|h| staying.contains(h)) {
                continue;
            }
            let added = staying
                .iter()
                .filter(|h| !natural.contains(h))
                .filter(|&&h| counts(cl, topology.data_center(h), &self.local_dc));
            for &host in added {
                copies.entry(host).or_default().push(m.clone());
            }
        }
        copies.into_iter().collect()
    }

    /// Sends the pending replicas their copies of what a read returned (see
    /// [`Coordinator::pending_copies`]) and waits for them: `false` if any did not acknowledge.
    pub(super) async fn copy_to_pending(
        &self,
        copies: Vec<(HostId, Vec<Mutation>)>,
        deadline: Instant,
    ) -> bool {
        if copies.is_empty() {
            return true;
        }
        add(&self.metrics.read_repairs, 1);
        self.repair(self.messaging.as_ref(), copies, deadline).await == 0
    }

    /// Sends mutations to replicas that were behind (read repair) and waits until each has
    /// acknowledged, or the deadline. Returns how many did not acknowledge (a replica that is
    /// down is not asked, and counts as one).
    pub(super) async fn repair(
        &self,
        messaging: Option<&Arc<Messaging>>,
        repairs: Vec<(HostId, Vec<Mutation>)>,
        deadline: Instant,
    ) -> usize {
        let (tx, mut rx) = mpsc::unbounded_channel::<Reply>();
        let mut waiting = messaging.map(|m| Waiting::new(m.clone()));
        let mut outstanding = 0usize;
        let mut failed = 0usize;
        for (host, mutations) in repairs {
            if mutations.is_empty() {
                continue;
            }
            add(&self.metrics.repaired_rows, mutations.len() as u64);
            if host == self.local {
                if let Err(e) = apply_local(&*self.replica, mutations).await {
                    tracing::warn!("read repair on this node failed: {e}");
                    failed += 1;
                }
                continue;
            }
            if !self.is_alive(host) {
                failed += 1;
                continue;
            }
            let sent = match (messaging, &mut waiting) {
                (Some(m), Some(w)) => m
                    .request(host, Lane::Requests, &tx, |id| Message::MutationRequest {
                        id,
                        mutations: Arc::new(mutations),
                    })
                    .map(|id| w.push(id))
                    .is_some(),
                _ => false,
            };
            if sent {
                outstanding += 1;
            } else {
                failed += 1;
            }
        }
        while outstanding > 0 {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some((_, Message::MutationResponse { result, .. }))) => {
                    outstanding -= 1;
                    if result.is_err() {
                        failed += 1;
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return failed + outstanding,
            }
        }
        failed
    }
    /// Merges the replicas' answers to a read ([`merge`]) and, while a change is in progress,
    /// also returns every row and tombstone merged, as the mutations a replica that had none of
    /// them would need (for [`Coordinator::pending_copies`]; empty otherwise).
    pub(super) fn merge_for_read(
        &self,
        topology: &Topology,
        replication: &Replication,
        command: &ReadCommand,
        mut responses: Vec<ReadResponse>,
    ) -> (Merged, Vec<Mutation>) {
        let changing = !matches!(replication, Replication::Local) && topology.pending_ring().is_some();
        if changing {
            // A replica with nothing: what it would need is everything.
            responses.push(ReadResponse::default());
        }
        let mut merged = merge(command, responses, self.clock.now_s());
        let full = match changing {
            true => merged.repairs.pop().unwrap_or_default(),
            false => Vec::new(),
        };
        (merged, full)
    }
}
