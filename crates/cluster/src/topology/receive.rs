//! Taking ranges over: stream each from its best live source, resume from a checkpoint, fall
//! back to another replica when a source stays away.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinSet;

use super::checkpoint::{self, SpanState};
use super::control::{self, Answer, Call, Span, SpanFrom};
use super::{TopologyError, TopologyService};
use crate::node::HostId;
use crate::streaming::{fetch_range, FetchError, FetchRange, Inbound};

/// Sources a receiver streams from at once (each one range at a time).
const SOURCES_IN_PARALLEL_MAX: usize = 4;
/// How often the checkpoint is written while chunks arrive: what a resumed receive asks for
/// again is at most this long of streaming (a second was a sixth of a 140 MB join at 34 MB/s,
/// in bench/results/2026-12-01-topology).
const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(250);
/// Failed tries of one source before a range is asked of the next.
const TRIES_PER_SOURCE: u32 = 3;
/// The longest wait between two tries.
const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(10);
/// How long a sizes query may take.
const SIZES_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a range whose sources are all down says it is still waiting.
const WAITING_LOG_INTERVAL: Duration = Duration::from_secs(30);
/// How long a receive waits for a range's preferred source to be seen up before it asks
/// another: a node that has just started may not have heard from every peer yet, and the
/// preferred source (the replica that gives the range up, or one in this data center) is the
/// one that keeps consistency and saves traffic.
const PREFERRED_SOURCE_PATIENCE: Duration = Duration::from_secs(10);
/// How often, meanwhile, it looks again.
const PREFERRED_SOURCE_POLL: Duration = Duration::from_millis(250);

type State = Arc<Mutex<BTreeMap<Span, SpanState>>>;

impl TopologyService {
    /// Streams every span of `spans` to this node, for the change started at epoch `change`,
    /// resuming from what an earlier try left in the checkpoint. Returns once every span is
    /// here and durable; fails only for what another try cannot mend (no source left at all,
    /// or this node cannot store a chunk), leaving the checkpoint for a later resume.
    pub(crate) async fn receive(
        self: &Arc<Self>,
        change: u64,
        purpose: &str,
        spans: Vec<SpanFrom>,
    ) -> Result<(), TopologyError> {
        if let Some(orphan) = spans.iter().find(|s| s.sources.is_empty()) {
            return Err(TopologyError::NoSource { span: orphan.span });
        }
        let dir = self.config.state_dir.clone();
        let mut saved = dir
            .as_deref()
            .map(|d| checkpoint::load(d, change))
            .unwrap_or_default();
        let state: State = Arc::new(Mutex::new(
            spans
                .iter()
                .map(|s| (s.span, saved.remove(&s.span).unwrap_or_default()))
                .collect(),
        ));
        let todo: Vec<SpanFrom> = {
            let st = state.lock().expect("stream state lock poisoned");
            spans.into_iter().filter(|s| !st[&s.span].done).collect()
        };
        let resumed = state
            .lock()
            .expect("stream state lock poisoned")
            .values()
            .filter(|s| s.done || s.after.is_some())
            .count();
        if resumed > 0 {
            tracing::info!(
                change,
                resumed,
                left = todo.len(),
                "resuming the streams of a topology change from its checkpoint"
            );
        }
        // Best source first; each source's ranges one after another, sources in parallel.
        let mut by_source: BTreeMap<HostId, Vec<SpanFrom>> = BTreeMap::new();
        for s in todo {
            by_source.entry(s.sources[0]).or_default().push(s);
        }
        let sizes = self.sizes(&by_source).await;
        // Ordered, so that the sessions end in the same order on every run of a simulation seed.
        let sessions: Arc<Mutex<BTreeMap<HostId, Arc<Inbound>>>> = Arc::default();
        // Aborted when the receive ends, or is dropped (its driver's task aborted): a writer left
        // behind would hold the service for good and write its stale state over the checkpoint
        // of the receive that resumes.
        let writer = dir.clone().map(|d| {
            let (service, state) = (self.clone(), state.clone());
            AbortOnDrop(tokio::spawn(async move {
                loop {
                    tokio::time::sleep(CHECKPOINT_INTERVAL).await;
                    service.save_checkpoint(&d, change, &state).await;
                }
            }))
        });
        let patience = tokio::time::Instant::now() + PREFERRED_SOURCE_PATIENCE;
        let limit = Arc::new(tokio::sync::Semaphore::new(SOURCES_IN_PARALLEL_MAX));
        let mut jobs = JoinSet::new();
        for (_, list) in by_source {
            let (service, state, sessions, sizes, limit) = (
                self.clone(),
                state.clone(),
                sessions.clone(),
                sizes.clone(),
                limit.clone(),
            );
            let purpose = purpose.to_owned();
            jobs.spawn(async move {
                let _permit = limit
                    .acquire_owned()
                    .await
                    .expect("the semaphore is never closed");
                for s in list {
                    service
                        .receive_span(
                            &s,
                            Receiving {
                                change,
                                purpose: &purpose,
                                state: &state,
                                sessions: &sessions,
                                sizes: &sizes,
                                patience,
                            },
                        )
                        .await?;
                }
                Ok::<(), TopologyError>(())
            });
        }
        let mut outcome = Ok(());
        while let Some(joined) = jobs.join_next().await {
            let result =
                joined.unwrap_or_else(|e| Err(TopologyError::Failed(format!("a stream task failed: {e}"))));
            if let Err(e) = result {
                outcome = Err(e);
                jobs.abort_all();
            }
        }
        drop(writer);
        if let Some(d) = &dir {
            self.save_checkpoint(d, change, &state).await;
        }
        for (_, inbound) in std::mem::take(&mut *sessions.lock().expect("sessions lock poisoned")) {
            inbound.finish(outcome.as_ref().map(|_| ()).map_err(|e| e.to_string()));
        }
        outcome
    }

    /// Streams one span, trying its sources in order until one sends it all.
    async fn receive_span(&self, s: &SpanFrom, receiving: Receiving<'_>) -> Result<(), TopologyError> {
        let Receiving {
            change,
            purpose,
            state,
            sessions,
            sizes,
            patience,
        } = receiving;
        let mut failures = 0u32;
        let mut last_waiting_log = None::<tokio::time::Instant>;
        loop {
            if failures == 0
                && !self.liveness.is_alive(s.sources[0])
                && tokio::time::Instant::now() < patience
            {
                tokio::time::sleep(PREFERRED_SOURCE_POLL).await;
                continue;
            }
            let live: Vec<HostId> = s
                .sources
                .iter()
                .copied()
                .filter(|&h| self.liveness.is_alive(h))
                .collect();
            if live.is_empty() {
                if last_waiting_log.is_none_or(|t| t.elapsed() >= WAITING_LOG_INTERVAL) {
                    tracing::warn!(span = %s.span, sources = ?s.sources, "every replica that holds this range is down; waiting for one to come back");
                    last_waiting_log = Some(tokio::time::Instant::now());
                }
                tokio::time::sleep(RETRY_BACKOFF_MAX).await;
                continue;
            }
            let source = live[((failures / TRIES_PER_SOURCE) as usize) % live.len()];
            if source != s.sources[0] && failures.is_multiple_of(TRIES_PER_SOURCE) {
                tracing::warn!(
                    span = %s.span, preferred = %s.sources[0], from = %source,
                    "streaming a range from another replica than the one giving it up: a row written below \
                     QUORUM that only the first had may be missing here until a repair"
                );
            }
            {
                let mut sessions = sessions.lock().expect("sessions lock poisoned");
                let inbound = sessions.entry(source).or_insert_with(|| {
                    Arc::new(self.streams.progress.inbound(source, purpose, Some(change)))
                });
                if failures == 0 || source != s.sources[0] {
                    inbound.add_ranges(1, sizes.get(&s.span).copied());
                }
            }
            let fetch = FetchRange {
                table: s.span.table,
                range: s.span.range(),
                after: state.lock().expect("stream state lock poisoned")[&s.span].after,
            };
            let inbound = sessions.lock().expect("sessions lock poisoned")[&source].clone();
            let span = s.span;
            let st = state.clone();
            let result = fetch_range(
                &self.messaging,
                &self.replica,
                &self.streams,
                source,
                &fetch,
                &inbound,
                move |next| {
                    let mut st = st.lock().expect("stream state lock poisoned");
                    let entry = st.get_mut(&span).expect("every span has a state");
                    match next {
                        Some(p) => entry.after = Some(p),
                        None => entry.done = true,
                    }
                },
            )
            .await;
            match result {
                Ok(_) => {
                    if let Some(i) = sessions.lock().expect("sessions lock poisoned").get(&source) {
                        i.range_done();
                    }
                    return Ok(());
                }
                Err(e) if !e.is_retryable() => return Err(TopologyError::Stream(e)),
                Err(e) => {
                    failures += 1;
                    tracing::warn!(span = %s.span, %source, failures, "streaming a range failed: {e}; trying again");
                    let backoff = Duration::from_millis(250 << failures.min(6)).min(RETRY_BACKOFF_MAX);
                    tokio::time::sleep(backoff).await;
                }
            }
        }
    }

    /// The size of each span on its first source, where the source answers.
    async fn sizes(&self, by_source: &BTreeMap<HostId, Vec<SpanFrom>>) -> Arc<HashMap<Span, (u64, u64)>> {
        let mut out = HashMap::new();
        for (source, list) in by_source {
            let spans: Vec<Span> = list.iter().map(|s| s.span).collect();
            let call = Call::Sizes { spans: spans.clone() };
            if let Ok(Answer::Sizes { sizes }) =
                control::call(&self.messaging, *source, &call, SIZES_TIMEOUT).await
            {
                out.extend(spans.into_iter().zip(sizes));
            }
        }
        Arc::new(out)
    }

    /// Makes what the state counts durable, then writes it down.
    async fn save_checkpoint(&self, dir: &std::path::Path, change: u64, state: &State) {
        let snapshot = state.lock().expect("stream state lock poisoned").clone();
        let (replica, dir) = (self.replica.clone(), dir.to_owned());
        let saved = self
            .streams
            .blocking(move || {
                replica.sync().map_err(|e| e.to_string())?;
                checkpoint::save(&dir, change, &snapshot).map_err(|e| e.to_string())
            })
            .await;
        match saved {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(change, "could not save the stream checkpoint: {e}"),
            Err(e) => tracing::warn!(change, "could not save the stream checkpoint: {e}"),
        }
    }
}

/// What every range of one receive shares.
#[derive(Clone, Copy)]
struct Receiving<'a> {
    change: u64,
    purpose: &'a str,
    state: &'a State,
    sessions: &'a Arc<Mutex<BTreeMap<HostId, Arc<Inbound>>>>,
    sizes: &'a Arc<HashMap<Span, (u64, u64)>>,
    /// Until when a range waits for its preferred source to be seen up.
    patience: tokio::time::Instant,
}

/// A task that ends with its handle.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl From<FetchError> for TopologyError {
    fn from(e: FetchError) -> TopologyError {
        TopologyError::Stream(e)
    }
}
