//! The read path for a run of the table in token order: vnode range by vnode range, each asked
//! of as many of its replicas as the level needs (for data: range reads have no digests), merged
//! and repaired like a partition read.

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::messaging::{Reply, Waiting};
use super::metrics::add;
use super::read::read_failure;
use super::topology::Topology;
use super::write::join_all;
use super::{Coordinator, CoordinatorError, ReadRequest, ReadResult};
use crate::consistency::{block_for, ConsistencyLevel, Replication};
use crate::message::{Message, ReadReply};
use crate::node::HostId;
use crate::replica::{read_local, Mutation, RangeRead, RangeStart, ReadCommand, ReadResponse};
use crate::transport::Lane;

impl Coordinator {
    pub(super) async fn read_range(&self, request: ReadRequest<'_>) -> Result<ReadResult, CoordinatorError> {
        let cl = request.consistency;
        let replication = request.replication;
        let ReadCommand::Range(range) = &request.command else {
            unreachable!("read_range reads token ranges");
        };
        let topology = self.topology();
        let start_token = match &range.start {
            RangeStart::Token(t) => *t,
            RangeStart::After(p) => p.token,
        };
        // Each vnode range is asked of the replicas the level needs; consecutive ranges asked
        // of the same nodes are read as one piece (at ONE on a replica, the whole scan is one
        // local read). Every range is checked for enough live replicas before anything is read.
        let block_for = block_for(cl, replication, &self.local_dc);
        let mut pieces: Vec<(i64, Vec<HostId>)> = Vec::new();
        let mut plan = |end: i64, replicas: &[HostId]| -> Result<(), CoordinatorError> {
            self.check_live(&topology, replicas, cl, replication)?;
            let mut candidates = self.candidates(&topology, replicas, cl);
            self.prefer_staying(&topology, replication, end, &mut candidates);
            let mut targets = self.contacts(&topology, &candidates, cl, replication, block_for);
            targets.sort_unstable();
            match pieces.last_mut() {
                Some((last_end, last)) if *last == targets => *last_end = end,
                _ => pieces.push((end, targets)),
            }
            Ok(())
        };
        if matches!(replication, Replication::Local) {
            plan(range.end_token, &[self.local])?;
        } else {
            let map = topology.map(replication);
            for (r, replicas) in map.ranges_between(start_token, range.end_token) {
                plan(r.end_inclusive.min(range.end_token), replicas)?;
            }
        }
        let now_s = self.clock.now_s();
        if range.index.is_some() && pieces.len() > 1 && range.limit > 0 {
            return self
                .read_index_pieces(&topology, replication, cl, range, pieces, now_s)
                .await;
        }
        let mut out = ReadResult::default();
        let mut live = 0usize;
        let mut from = range.start.clone();
        for (end, targets) in pieces {
            loop {
                let piece = RangeRead {
                    table: range.table,
                    start: from.clone(),
                    end_token: end,
                    limit: range.limit - live,
                    index: range.index.clone(),
                };
                let result = self
                    .read_range_piece(&topology, replication, cl, &targets, piece)
                    .await?;
                live += result.rows.iter().filter(|r| r.row.is_live(now_s)).count();
                let last = result.rows.last().map(|r| r.position());
                out.rows.extend(result.rows);
                if live >= range.limit {
                    out.more = true;
                    return Ok(out);
                }
                match last {
                    Some(p) if result.more => from = RangeStart::After(p),
                    _ => break,
                }
            }
            match end.checked_add(1) {
                Some(next) if end < range.end_token => from = RangeStart::Token(next),
                _ => break,
            }
        }
        Ok(out)
    }

    /// A range read by a secondary index: every piece at once, since an index read returns
    /// only the rows that match (a lookup by a unique value finds one row in one piece, and
    /// asking the pieces one after another would cost a round trip each). The answers are
    /// joined in token order up to the read's limit; a piece that stopped at its limit ends the
    /// answer there, with `more` set, and the caller goes on after its last row.
    async fn read_index_pieces(
        &self,
        topology: &Topology,
        replication: &Replication,
        cl: ConsistencyLevel,
        range: &RangeRead,
        pieces: Vec<(i64, Vec<HostId>)>,
        now_s: u32,
    ) -> Result<ReadResult, CoordinatorError> {
        let mut from = range.start.clone();
        let mut reads = Vec::with_capacity(pieces.len());
        for (end, targets) in pieces {
            let piece = RangeRead {
                table: range.table,
                start: from.clone(),
                end_token: end,
                limit: range.limit,
                index: range.index.clone(),
            };
            reads.push(async move {
                self.read_range_piece(topology, replication, cl, &targets, piece)
                    .await
            });
            match end.checked_add(1) {
                Some(next) => from = RangeStart::Token(next),
                None => break,
            }
        }
        let done = join_all(reads).await;
        let mut out = ReadResult::default();
        let mut live = 0usize;
        for result in done {
            let result = result?;
            for row in result.rows {
                let is_live = row.row.is_live(now_s);
                out.rows.push(row);
                if is_live {
                    live += 1;
                    if live >= range.limit {
                        out.more = true;
                        return Ok(out);
                    }
                }
            }
            if result.more {
                out.more = true;
                return Ok(out);
            }
        }
        Ok(out)
    }

    /// Reads one piece of a token range from `targets`, the replicas the level needs.
    async fn read_range_piece(
        &self,
        topology: &Topology,
        replication: &Replication,
        cl: ConsistencyLevel,
        targets: &[HostId],
        piece: RangeRead,
    ) -> Result<ReadResult, CoordinatorError> {
        let by_index = piece.index.is_some();
        let command = ReadCommand::Range(piece);
        if targets.len() <= 1 && targets.first().is_none_or(|&h| h == self.local) {
            return read_local(&self.replica, &command)
                .await
                .map(ReadResult::from)
                .map_err(|e| match by_index {
                    // An index being built: Cassandra's INDEX_NOT_AVAILABLE, a read failure.
                    true => read_failure(e, cl, 0, 1, 1, false),
                    false => CoordinatorError::Replica(e),
                });
        }
        let deadline = Instant::now() + self.config.range_timeout;
        let (tx, mut rx) = mpsc::unbounded_channel::<Reply>();
        let mut waiting = self.messaging.as_ref().map(|m| Waiting::new(m.clone()));
        let mut asked = 0usize;
        for &host in targets.iter().filter(|&&h| h != self.local) {
            if let (Some(m), Some(w)) = (&self.messaging, waiting.as_mut()) {
                if let Some(id) = m.request(host, Lane::Requests, &tx, |id| Message::ReadRequest {
                    id,
                    command: command.clone(),
                    digest_only: false,
                }) {
                    w.push(id);
                    asked += 1;
                }
            }
        }
        let mut responses: Vec<(HostId, ReadResponse)> = Vec::with_capacity(targets.len());
        if targets.contains(&self.local) {
            match read_local(&self.replica, &command).await {
                Ok(r) => responses.push((self.local, r)),
                Err(e) => return Err(read_failure(e, cl, 0, targets.len(), 1, false)),
            }
        }
        let started = Instant::now();
        while asked > 0 {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some((from, Message::ReadResponse { result, .. }))) => {
                    asked -= 1;
                    self.record_replica_latency(started.elapsed());
                    match result {
                        Ok(ReadReply::Data(r)) => responses.push((from, r)),
                        Ok(ReadReply::Digest { .. }) => {}
                        Err(e) => {
                            return Err(read_failure(
                                e,
                                cl,
                                responses.len(),
                                targets.len(),
                                1,
                                !responses.is_empty(),
                            ))
                        }
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => {
                    add(&self.metrics.read_timeouts, 1);
                    return Err(CoordinatorError::ReadTimeout {
                        consistency: cl,
                        received: responses.len(),
                        block_for: targets.len(),
                        data_present: !responses.is_empty(),
                    });
                }
            }
        }
        let hosts: Vec<HostId> = responses.iter().map(|(h, _)| *h).collect();
        let (merged, full) = self.merge_for_read(
            topology,
            replication,
            &command,
            responses.into_iter().map(|(_, r)| r).collect(),
        );
        let repaired = merged.repairs.iter().any(|r| !r.is_empty());
        let copies = self.pending_copies(topology, replication, cl, &hosts, repaired, full);
        if repaired || !copies.is_empty() {
            add(&self.metrics.read_repairs, 1);
            let mut repairs: Vec<(HostId, Vec<Mutation>)> = hosts.into_iter().zip(merged.repairs).collect();
            repairs.extend(copies);
            let unacknowledged = self.repair(self.messaging.as_ref(), repairs, deadline).await;
            if unacknowledged > 0 {
                add(&self.metrics.read_timeouts, 1);
                return Err(CoordinatorError::ReadTimeout {
                    consistency: cl,
                    received: targets.len().saturating_sub(unacknowledged),
                    block_for: targets.len(),
                    data_present: true,
                });
            }
        }
        Ok(merged.result)
    }
}
