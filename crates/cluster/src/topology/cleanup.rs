//! Dropping what a node no longer holds: after a topology change moved ranges away from it (by
//! itself, once the change is over and every live node has drained its ring), at start, and
//! when an operator asks (`hayate cleanup`).

use std::sync::Arc;

use tokio::task::JoinHandle;

use super::checkpoint;
use super::plan::{complement, kept_ranges, placed_replications};
use super::{TopologyError, TopologyService};
use crate::consistency::Replication;
use crate::metadata::ClusterMetadata;
use crate::ring::{TokenRange, TokenRing};

/// What a cleanup dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanupReport {
    /// Ranges (of any table) it looked at and found records in, or not.
    pub ranges: usize,
    pub records: u64,
}

impl TopologyService {
    /// Drops every record of the ranges this node neither replicates nor is a pending replica
    /// of, for every table it holds. Waits for streams coming in to end first, and computes
    /// what to keep from the newest metadata after that.
    pub async fn cleanup(&self) -> Result<CleanupReport, TopologyError> {
        let _exclusive = self.ranges.write().await;
        let m = self.log.current();
        if !m.members.contains_key(&self.local) {
            return Err(TopologyError::NotInProgress(
                "this node is not a member of the ring: nothing to keep or drop".to_owned(),
            ));
        }
        let ring = m
            .ring()
            .map_err(|e| TopologyError::Failed(format!("the ring does not build: {e}")))?;
        let pending = m
            .pending_ring()
            .transpose()
            .map_err(|e| TopologyError::Failed(format!("the pending ring does not build: {e}")))?;
        let held = self.replica.table_ids();
        let mut report = CleanupReport::default();
        for (table, replication) in self.tables.tables() {
            if matches!(replication, Replication::Local) || !held.contains(&table) {
                continue;
            }
            let kept = kept_ranges(&ring, pending.as_ref(), self.local, &replication);
            if kept.is_empty() && pending.is_none() && !ring.nodes().iter().any(|n| n.host == self.local) {
                continue;
            }
            for range in complement(&kept) {
                if self.log.current().epoch != m.epoch {
                    // The ring moved under the cleanup: stop; the next one computes afresh.
                    return Ok(report);
                }
                let replica = self.replica.clone();
                let dropped = self
                    .streams
                    .blocking(move || replica.remove_range(table, range))
                    .await
                    .unwrap_or(0);
                report.ranges += 1;
                report.records += dropped;
            }
        }
        if report.records > 0 {
            tracing::info!(
                records = report.records,
                "cleanup: dropped the records of ranges this node no longer holds"
            );
        }
        Ok(report)
    }

    /// Drains the ring this node has, then cleans up: what `hayate cleanup` runs, and what a
    /// node runs after a change moved ranges away from it.
    pub async fn drain_and_cleanup(&self) -> Result<CleanupReport, TopologyError> {
        let epoch = self.log.current().epoch;
        self.drain_all(epoch).await?;
        self.cleanup().await
    }

    /// Follows the metadata: each time a change ends (finished or aborted), forgets the
    /// change's stream checkpoints and, if the change took ranges away from this node, waits
    /// `cleanup_delay`, drains, and cleans up.
    ///
    /// Only the nodes that gave ranges up clean up: a join moves ranges away from a few
    /// replicas, a decommission, replacement or removal from none that stays. Every member
    /// used to clean up after every change, and each cleanup drains every member: 2N(N+1)
    /// drain calls a change, 20,200 at 100 nodes, where the givers alone make a handful.
    pub fn spawn_follower(self: &Arc<Self>) -> JoinHandle<()> {
        let weak = Arc::downgrade(self);
        let mut watch = self.log.watch();
        tokio::spawn(async move {
            let mut before = watch.borrow_and_update().clone();
            while watch.changed().await.is_ok() {
                let after = watch.borrow_and_update().clone();
                let during = std::mem::replace(&mut before, after.clone());
                // A node that applies a change's start and finish at once (it lagged) sees the
                // members move without ever seeing the change.
                let ended = match &during.change {
                    Some(c) => after.change.as_ref().map(|a| a.id) != Some(c.id),
                    None => after.change.is_none() && after.members != during.members,
                };
                if !ended {
                    continue;
                }
                let Some(service) = weak.upgrade() else { return };
                if let Some(dir) = &service.config.state_dir {
                    checkpoint::remove_others(dir, after.change.as_ref().map(|c| c.id));
                }
                if !service.gave_up_ranges(&during, &after) {
                    continue;
                }
                let delay = service.config.cleanup_delay;
                drop(service);
                tokio::time::sleep(delay).await;
                let Some(service) = weak.upgrade() else { return };
                if service.decommissioned.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                if let Err(e) = service.drain_and_cleanup().await {
                    tracing::warn!(
                        "cleanup after a topology change did not run: {e}; hayate cleanup runs it"
                    );
                }
            }
        })
    }

    /// Whether this node held, while a change was in progress (`during`), a range of some table
    /// that it holds no more once it ended (`after`): then it has records to drop. When a ring
    /// does not build, says yes (a cleanup that finds nothing costs little).
    fn gave_up_ranges(&self, during: &ClusterMetadata, after: &ClusterMetadata) -> bool {
        let rings = |m: &ClusterMetadata| -> Option<(TokenRing, Option<TokenRing>)> {
            Some((m.ring().ok()?, m.pending_ring().transpose().ok()?))
        };
        let (Some((ring_during, pending_during)), Some((ring_after, pending_after))) =
            (rings(during), rings(after))
        else {
            return true;
        };
        placed_replications(&self.tables.tables())
            .iter()
            .any(|replication| {
                let held = kept_ranges(&ring_during, pending_during.as_ref(), self.local, replication);
                let kept = kept_ranges(&ring_after, pending_after.as_ref(), self.local, replication);
                !covers(&kept, &held)
            })
    }
}

/// Whether every range of `inner` lies inside `outer`; both merged and in token order, as
/// [`kept_ranges`] makes them (so each range of `inner` lies inside one range of `outer`).
fn covers(outer: &[TokenRange], inner: &[TokenRange]) -> bool {
    inner.iter().all(|i| {
        let at = outer.partition_point(|o| o.end_inclusive < i.end_inclusive);
        outer
            .get(at)
            .is_some_and(|o| o.start_exclusive <= i.start_exclusive && i.end_inclusive <= o.end_inclusive)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start_exclusive: i64, end_inclusive: i64) -> TokenRange {
        TokenRange {
            start_exclusive,
            end_inclusive,
        }
    }

    #[test]
    fn covers_tells_whether_a_node_kept_all_it_held() {
        let kept = [r(i64::MIN, -100), r(0, 50), r(100, i64::MAX)];
        assert!(covers(&kept, &[]));
        assert!(covers(&kept, &[r(i64::MIN, -200), r(0, 50), r(200, 300)]));
        assert!(!covers(&kept, &[r(0, 60)]), "(50, 60] was given up");
        assert!(!covers(&kept, &[r(-100, 0)]), "(-100, 0] is not kept at all");
        assert!(!covers(&[], &[r(1, 2)]));
    }
}
