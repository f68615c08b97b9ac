//! The node's live client connections, for `system_views.clients`.
//!
//! A connection registers its session when it starts serving and is removed when it ends
//! ([`Registration`]'s `Drop`). The request path takes no lock here: what the table shows is
//! read from each session when the table is read ([`crate::requests::Session::client`]), and
//! the session counts its requests with an atomic.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, Weak};

use crate::requests::Session;

#[derive(Default)]
pub struct ClientRegistry {
    next_id: AtomicU64,
    live: Mutex<HashMap<u64, Weak<Session>>>,
}

/// A connection's place in the registry, held while the connection is served.
pub struct Registration<'a> {
    registry: &'a ClientRegistry,
    id: u64,
}

impl ClientRegistry {
    /// Lists `session` until the returned guard is dropped.
    pub fn register(&self, session: &Arc<Session>) -> Registration<'_> {
        let id = self.next_id.fetch_add(1, Relaxed);
        self.lock().insert(id, Arc::downgrade(session));
        Registration { registry: self, id }
    }

    /// The sessions of the connections open now, oldest first.
    pub fn sessions(&self) -> Vec<Arc<Session>> {
        let live = self.lock();
        let mut ids: Vec<(&u64, &Weak<Session>)> = live.iter().collect();
        ids.sort_by_key(|(id, _)| **id);
        ids.into_iter().filter_map(|(_, s)| s.upgrade()).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Weak<Session>>> {
        self.live.lock().expect("client registry lock poisoned")
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.id);
    }
}
