//! REGISTER: the client wants EVENT frames of some types. A task forwards the node's events
//! of those types to the connection on stream -1.

use hayate_cql::request::{EventType, Register};
use hayate_cql::response::event::EVENT_STREAM;
use hayate_cql::response::{Event, Ready, Response};
use tokio::sync::broadcast::error::RecvError;

use super::Session;

pub fn handle(session: &Session, register: &Register) -> Response {
    let types: Vec<EventType> = register.event_types.clone();
    let mut events = session.node.events.subscribe();
    let outbox = session.outbox.clone();
    // REGISTER comes after STARTUP, so how frames are written is settled by now.
    let writer = session.writer();
    let task = session.runtime.spawn(async move {
        loop {
            match events.recv().await {
                Ok(event) => {
                    let wanted = match &event {
                        Event::SchemaChange(_) => types.contains(&EventType::SchemaChange),
                        Event::TopologyChange { .. } => types.contains(&EventType::TopologyChange),
                        Event::StatusChange { .. } => types.contains(&EventType::StatusChange),
                    };
                    if wanted && outbox.is_full() {
                        // A client that does not read its responses gets no more events
                        // queued: they would be the one thing its backlog does not bound.
                        tracing::debug!("dropped an event for a client that does not read");
                    } else if wanted {
                        let out = writer.encode(EVENT_STREAM, &Response::Event(event));
                        if !out.is_empty() {
                            outbox.push(out);
                        }
                    }
                }
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!("a client missed {n} events: it reads too slowly")
                }
                Err(RecvError::Closed) => return,
            }
        }
    });
    if let Some(old) = session.state().event_task.replace(task) {
        old.abort();
    }
    Response::Ready(Ready)
}
