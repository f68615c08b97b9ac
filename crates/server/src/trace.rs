//! Request tracing: what a request with the tracing flag (0x02) gets back, and what
//! `system_traces.sessions` and `system_traces.events` show for it.
//!
//! A traced request gets a session id (a time UUID) on its response, and a session of events
//! that say where its time went: received, parsed, executed (with the storage engine's reads,
//! from the device or from the post-write cache), answered. Drivers find the session by polling
//! `system_traces.sessions` until its `duration` is set, then read `system_traces.events`.
//!
//! Cassandra writes traces into a replicated keyspace with a 24-hour TTL; hayate keeps them in
//! memory on the node that coordinated the request: the newest [`TRACE_SESSIONS_MAX`] sessions,
//! each for at most [`TRACE_TTL_S`]. A request without the flag pays nothing: no [`Trace`] is
//! made for it.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Sessions kept; past this the oldest is forgotten.
pub const TRACE_SESSIONS_MAX: usize = 1000;
/// How long a session stays visible, as Cassandra's traces' TTL.
pub const TRACE_TTL_S: i64 = 24 * 3600;
/// Events kept per session; a request that would record more keeps its first ones.
pub const TRACE_EVENTS_MAX: usize = 256;

/// One event of a session: a row of `system_traces.events`.
#[derive(Clone, Debug)]
pub struct TraceEvent {
    pub event_id: [u8; 16],
    pub activity: String,
    /// Microseconds since the request was received.
    pub source_elapsed_us: i32,
    pub thread: String,
}

/// One traced request: a row of `system_traces.sessions` and its events.
#[derive(Clone, Debug)]
pub struct TraceSession {
    pub session_id: [u8; 16],
    pub client: IpAddr,
    pub coordinator: IpAddr,
    pub coordinator_port: i32,
    pub command: String,
    pub request: String,
    pub parameters: Vec<(String, String)>,
    pub started_at_ms: i64,
    pub duration_us: i32,
    pub events: Vec<TraceEvent>,
}

/// The node's recent sessions, bounded by count and age.
#[derive(Default)]
pub struct TraceStore {
    sessions: Mutex<VecDeque<Arc<TraceSession>>>,
}

impl TraceStore {
    pub fn record(&self, session: TraceSession) {
        let mut sessions = self.sessions.lock().expect("trace store lock poisoned");
        if sessions.len() >= TRACE_SESSIONS_MAX {
            sessions.pop_front();
        }
        sessions.push_back(Arc::new(session));
    }

    /// The sessions younger than [`TRACE_TTL_S`] at `now_ms`, oldest first.
    pub fn sessions(&self, now_ms: i64) -> Vec<Arc<TraceSession>> {
        let mut sessions = self.sessions.lock().expect("trace store lock poisoned");
        while sessions
            .front()
            .is_some_and(|s| now_ms - s.started_at_ms > TRACE_TTL_S * 1000)
        {
            sessions.pop_front();
        }
        sessions.iter().cloned().collect()
    }
}

/// A request being traced: events are added as it runs, and [`Trace::finish`] stores it.
pub struct Trace {
    session: TraceSession,
    started: Instant,
}

impl Trace {
    pub fn start(client: IpAddr, coordinator: IpAddr, coordinator_port: u16, command: &str) -> Trace {
        let session_id = crate::query::bind::timeuuid_now();
        Trace {
            session: TraceSession {
                session_id,
                client,
                coordinator,
                coordinator_port: i32::from(coordinator_port),
                command: command.to_owned(),
                request: String::new(),
                parameters: Vec::new(),
                started_at_ms: crate::query::bind::now_us() / 1000,
                duration_us: 0,
                events: Vec::new(),
            },
            started: Instant::now(),
        }
    }

    pub fn session_id(&self) -> [u8; 16] {
        self.session.session_id
    }

    /// What the session shows as the request, and its parameters.
    pub fn describe(&mut self, request: &str, parameters: Vec<(String, String)>) {
        self.session.request = request.to_owned();
        self.session.parameters = parameters;
    }

    pub fn event(&mut self, activity: impl Into<String>) {
        if self.session.events.len() >= TRACE_EVENTS_MAX {
            return;
        }
        let thread = std::thread::current()
            .name()
            .unwrap_or("native-transport")
            .to_owned();
        self.session.events.push(TraceEvent {
            event_id: crate::query::bind::timeuuid_now(),
            activity: activity.into(),
            source_elapsed_us: elapsed_us(self.started),
            thread,
        });
    }

    pub fn finish(mut self, store: &TraceStore) {
        self.session.duration_us = elapsed_us(self.started).max(1);
        store.record(self.session);
    }
}

fn elapsed_us(since: Instant) -> i32 {
    i32::try_from(since.elapsed().as_micros()).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(started_at_ms: i64) -> TraceSession {
        let mut t = Trace::start([127, 0, 0, 1].into(), [127, 0, 0, 2].into(), 9042, "QUERY");
        t.event("one");
        t.session.started_at_ms = started_at_ms;
        t.session
    }

    #[test]
    fn the_store_keeps_the_newest_sessions_within_the_ttl() {
        let store = TraceStore::default();
        for i in 0..TRACE_SESSIONS_MAX + 10 {
            store.record(session(1_000_000 + i as i64));
        }
        let kept = store.sessions(1_000_000 + TRACE_SESSIONS_MAX as i64 + 10);
        assert_eq!(kept.len(), TRACE_SESSIONS_MAX);
        assert_eq!(kept[0].started_at_ms, 1_000_010, "the oldest ten were forgotten");
        let later = 1_000_010 + TRACE_TTL_S * 1000 + 5;
        assert_eq!(
            store.sessions(later).len(),
            TRACE_SESSIONS_MAX - 5,
            "five are past the TTL"
        );
    }

    #[test]
    fn events_are_bounded_and_ordered_in_time() {
        let mut t = Trace::start([127, 0, 0, 1].into(), [127, 0, 0, 1].into(), 9042, "QUERY");
        for i in 0..TRACE_EVENTS_MAX + 5 {
            t.event(format!("event {i}"));
        }
        assert_eq!(t.session.events.len(), TRACE_EVENTS_MAX);
        let elapsed: Vec<i32> = t.session.events.iter().map(|e| e.source_elapsed_us).collect();
        assert!(elapsed.windows(2).all(|w| w[0] <= w[1]));
    }
}
