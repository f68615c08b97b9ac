//! Counter writes: each partition's increments go to one replica, the leader (this node when it
//! is a live replica, else a live replica of its data center), which adds them to its own
//! shards and answers with the new shards; the coordinator then writes those to the other
//! replicas at the request's level, the leader counting as one acknowledgement
//! ([`crate::counter`]).

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::messaging::{Reply, Waiting};
use super::metrics::add;
use super::topology::Topology;
use super::write::Group;
use super::{check_write_level, Coordinator, CoordinatorError, WriteType};
use crate::consistency::{ConsistencyLevel, Replication};
use crate::counter::{self, CounterUpdate};
use crate::message::Message;
use crate::node::HostId;
use crate::replica::{Mutation, ReplicaError};
use crate::transport::Lane;

impl Coordinator {
    /// Adds `updates` to their counters at `consistency`, partition by partition.
    pub async fn counter_write(
        &self,
        replication: &Replication,
        consistency: ConsistencyLevel,
        updates: Vec<CounterUpdate>,
    ) -> Result<(), CoordinatorError> {
        check_write_level(consistency)?;
        if consistency == ConsistencyLevel::Any {
            return Err(CoordinatorError::Invalid(
                "Consistency level ANY is not yet supported for counter table".into(),
            ));
        }
        add(&self.metrics.writes, 1);
        let topology = self.topology();
        let mut partitions: Vec<Vec<CounterUpdate>> = Vec::new();
        for u in updates {
            match partitions
                .iter_mut()
                .find(|p| p[0].token == u.token && p[0].partition == u.partition && p[0].table == u.table)
            {
                Some(p) => p.push(u),
                None => partitions.push(vec![u]),
            }
        }
        for updates in partitions {
            self.counter_partition(&topology, replication, consistency, updates)
                .await?;
        }
        Ok(())
    }

    async fn counter_partition(
        &self,
        topology: &Topology,
        replication: &Replication,
        cl: ConsistencyLevel,
        updates: Vec<CounterUpdate>,
    ) -> Result<(), CoordinatorError> {
        let token = updates[0].token;
        let (natural, pending) = self.replicas_of(topology, replication, token);
        let mut group = Group {
            replicas: natural,
            pending,
            mutations: Vec::new(),
            applied_on: None,
        };
        self.check_live_for_write(topology, &group, cl, replication)?;
        self.count_not_replica(&group.replicas);
        let leader = self
            .candidates(topology, &group.replicas, cl)
            .first()
            .copied()
            .ok_or(CoordinatorError::WriteFailure {
                consistency: cl,
                received: 0,
                block_for: 1,
                failures: 0,
                write_type: WriteType::Counter,
            })?;
        let now_us = self.clock.now_us();
        let shards = if leader == self.local {
            let blocking = self.replica.reads_ahead();
            counter::run(&self.replica, self.local, updates, now_us, blocking)
                .await
                .map_err(|e| leader_failed(e, cl))?
        } else {
            self.lead_remotely(leader, updates, now_us, cl).await?
        };
        group.mutations = shards;
        group.applied_on = Some(leader);
        self.write_group(topology, replication, cl, group, WriteType::Counter)
            .await
    }

    async fn lead_remotely(
        &self,
        leader: HostId,
        updates: Vec<CounterUpdate>,
        timestamp_us: i64,
        cl: ConsistencyLevel,
    ) -> Result<Vec<Mutation>, CoordinatorError> {
        let timeout = || {
            add(&self.metrics.write_timeouts, 1);
            CoordinatorError::WriteTimeout {
                consistency: cl,
                received: 0,
                block_for: 1,
                write_type: WriteType::Counter,
            }
        };
        let Some(messaging) = &self.messaging else {
            return Err(timeout());
        };
        let (tx, mut rx) = mpsc::unbounded_channel::<Reply>();
        let mut waiting = Waiting::new(messaging.clone());
        let Some(id) = messaging.request(leader, Lane::Requests, &tx, |id| Message::CounterRequest {
            id,
            timestamp_us,
            updates,
        }) else {
            return Err(timeout());
        };
        waiting.push(id);
        let deadline = Instant::now() + self.config.write_timeout;
        loop {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some((_, Message::CounterResponse { result, .. }))) => {
                    return result.map_err(|e| leader_failed(e, cl));
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return Err(timeout()),
            }
        }
    }
}

/// The error for a leader that could not add the increments.
fn leader_failed(e: ReplicaError, cl: ConsistencyLevel) -> CoordinatorError {
    if e.is_refusal() {
        return CoordinatorError::Replica(e);
    }
    CoordinatorError::WriteFailure {
        consistency: cl,
        received: 0,
        block_for: 1,
        failures: 1,
        write_type: WriteType::Counter,
    }
}
