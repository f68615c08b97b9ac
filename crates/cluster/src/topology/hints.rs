//! A decommissioned node's hints go to a node that stays (Cassandra's decommission transfers
//! its hints the same way): hints this node keeps for a replica that is down would otherwise
//! leave with it, and that replica would never receive those writes.
//!
//! After its ranges have streamed, the leaving node delivers the hints of each target that is
//! up itself (the usual replay), and hands the others over to one live normal member (the
//! first by host id other than itself and the target), which keeps them as its own hints for
//! that target (`Call::KeepHints`), with their original creation times, and replays them when
//! the target returns. A segment is deleted here only once the other node has kept every hint
//! in it; a hand-over that fails leaves the rest here and fails the decommission, which can be
//! run again.

use std::time::Duration;

use super::control::{self, Answer, Call, HandedHint};
use super::{TopologyError, TopologyService};
use crate::hints::HintStore;
use crate::metadata::MemberStatus;
use crate::node::HostId;

/// Hint payload bytes sent in one call, at most (one hint larger than this goes alone).
const BATCH_BYTES: usize = 1 << 20;
/// How long the node keeping the hints may take to answer one call.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

impl TopologyService {
    /// Delivers or hands over every hint this node keeps; returns how many were handed over.
    pub(super) async fn hand_over_hints(&self) -> Result<usize, TopologyError> {
        let Some(coordinator) = self.coordinator() else {
            return Ok(0);
        };
        let Some(store) = coordinator.hint_store().cloned() else {
            return Ok(0);
        };
        let mut handed = 0;
        for target in coordinator.hinted_targets() {
            if self.liveness.is_alive(target) {
                let delivered = coordinator.replay_hints(target).await;
                tracing::info!(%target, delivered, "decommission: delivered this node's hints");
            }
            if !store.targets().iter().any(|(t, _)| *t == target) {
                continue;
            }
            let Some(to) = self.keeper_for(target) else {
                return Err(TopologyError::Failed(format!(
                    "hints for {target} cannot be handed over: no other live normal node to keep them; \
                     bring one back (or {target}) and run the decommission again"
                )));
            };
            let n = self.hand_over_target(&store, target, to).await?;
            tracing::info!(%target, keeper = %to, hints = n, "decommission: handed this node's hints over");
            handed += n;
        }
        Ok(handed)
    }

    /// The node that keeps the hints for `target`: the first live normal member by host id
    /// other than this one and the target.
    fn keeper_for(&self, target: HostId) -> Option<HostId> {
        self.log
            .current()
            .members
            .iter()
            .filter(|(h, r)| **h != self.local && **h != target && r.status == MemberStatus::Normal)
            .map(|(h, _)| *h)
            .find(|h| self.liveness.is_alive(*h))
    }

    /// Sends every hint for `target` to `to`, segment by segment.
    async fn hand_over_target(
        &self,
        store: &HintStore,
        target: HostId,
        to: HostId,
    ) -> Result<usize, TopologyError> {
        let failed =
            |e: String| TopologyError::Failed(format!("handing hints for {target} over to {to}: {e}"));
        let mut handed = 0;
        while let Some(segment) = store.take(target).map_err(|e| failed(e.to_string()))? {
            let read = match segment.read() {
                Ok(r) => r,
                Err(e) => {
                    store.give_back(segment);
                    return Err(failed(e.to_string()));
                }
            };
            let mut batches: Vec<Vec<HandedHint>> = vec![Vec::new()];
            let mut bytes = 0;
            for hint in &read.hints {
                if bytes + hint.payload.len() > BATCH_BYTES && !batches.last().is_some_and(Vec::is_empty) {
                    batches.push(Vec::new());
                    bytes = 0;
                }
                bytes += hint.payload.len();
                if let Some(batch) = batches.last_mut() {
                    batch.push(HandedHint::new(hint.created_at_us, &hint.payload));
                }
            }
            for hints in batches.into_iter().filter(|b| !b.is_empty()) {
                let count = hints.len();
                let call = Call::KeepHints { target, hints };
                match control::call(&self.messaging, to, &call, CALL_TIMEOUT).await {
                    Ok(Answer::Kept) => handed += count,
                    Ok(other) => {
                        store.give_back(segment);
                        return Err(failed(format!("it answered {other:?}")));
                    }
                    Err(e) => {
                        store.give_back(segment);
                        return Err(failed(e));
                    }
                }
            }
            store.finish(segment).map_err(|e| failed(e.to_string()))?;
        }
        Ok(handed)
    }

    /// `Call::KeepHints`: keeps hints another node hands over, as this node's own.
    pub(super) fn keep_hints(&self, from: HostId, target: HostId, hints: Vec<HandedHint>) -> Answer {
        let refused = |reason: String| Answer::Refused { reason };
        let Some(store) = self.coordinator().and_then(|c| c.hint_store().cloned()) else {
            return refused("this node keeps no hints".to_owned());
        };
        let count = hints.len();
        for hint in hints {
            let payload = match hint.payload() {
                Ok(p) => p,
                Err(e) => return refused(format!("a handed-over hint does not decode: {e}")),
            };
            if let Err(e) = store.store(target, hint.created_at_us, &payload) {
                tracing::warn!(%from, %target, "cannot keep a handed-over hint: {e}");
                return refused(e.to_string());
            }
        }
        tracing::debug!(%from, %target, count, "kept hints handed over by a leaving node");
        Answer::Kept
    }
}
