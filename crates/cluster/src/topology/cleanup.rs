//! Dropping what a node no longer holds: after a topology change moved ranges away from it (by
//! itself, once the change is over and every live node has drained its ring), at start, and
//! when an operator asks (`hayate cleanup`).

use std::sync::Arc;

use tokio::task::JoinHandle;

use super::checkpoint;
use super::plan::{complement, kept_ranges};
use super::{TopologyError, TopologyService};
use crate::consistency::Replication;

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
                let dropped = tokio::task::spawn_blocking(move || replica.remove_range(table, range))
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

    /// Follows the metadata: each time a change ends (finished or aborted), waits
    /// `cleanup_delay`, drains, and cleans up, and forgets the change's stream checkpoints.
    pub fn spawn_follower(self: &Arc<Self>) -> JoinHandle<()> {
        let weak = Arc::downgrade(self);
        let mut watch = self.log.watch();
        tokio::spawn(async move {
            let mut in_progress = watch.borrow_and_update().change.clone();
            while watch.changed().await.is_ok() {
                let now = watch.borrow_and_update().change.clone();
                let ended =
                    in_progress.is_some() && now.as_ref().map(|c| c.id) != in_progress.as_ref().map(|c| c.id);
                in_progress = now;
                if !ended {
                    continue;
                }
                let Some(service) = weak.upgrade() else { return };
                if let Some(dir) = &service.config.state_dir {
                    checkpoint::remove_others(dir, in_progress.as_ref().map(|c| c.id));
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
}
