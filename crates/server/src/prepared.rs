//! Prepared statements, keyed as Cassandra keys them: the MD5 of the keyspace the statement
//! was prepared in followed by its text. The same text prepared on any node, or again after a
//! restart, gets the same id, so a driver that meets UNPREPARED re-prepares and carries on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};

use hayate_cql::statement::Parsed;
use md5::{Digest, Md5};

use crate::query::prepare::Prepared;

/// Statements kept; past this the cache forgets an arbitrary half, and clients re-prepare.
pub const PREPARED_STATEMENTS_MAX: usize = 100_000;

pub struct PreparedStatement {
    pub id: [u8; 16],
    pub text: String,
    /// The connection's keyspace when it was prepared (for unqualified table names).
    pub keyspace: Option<String>,
    pub parsed: Parsed,
    pub prepared: Prepared,
    /// v5: the id of the result metadata, which EXECUTE sends back.
    pub result_metadata_id: [u8; 16],
    /// Planning work each EXECUTE of the statement reuses.
    pub memo: crate::query::Memo,
}

#[derive(Default)]
pub struct PreparedCache {
    statements: RwLock<HashMap<[u8; 16], Arc<PreparedStatement>>>,
    /// EXECUTEs (and batch statements) that looked a statement up, and those that found it,
    /// for `system_views.caches`.
    lookups: AtomicU64,
    hits: AtomicU64,
}

pub fn statement_id(keyspace: Option<&str>, text: &str) -> [u8; 16] {
    let mut h = Md5::new();
    if let Some(k) = keyspace {
        h.update(k.as_bytes());
    }
    h.update(text.as_bytes());
    h.finalize().into()
}

/// The v5 result metadata id: the MD5 of the encoded result columns, so that the same columns
/// always get the same id and any change of name or type a new one.
pub fn result_metadata_id(result: &hayate_cql::response::result::RowsMetadata) -> [u8; 16] {
    let mut encoded = Vec::new();
    result.encode(&mut encoded);
    Md5::digest(&encoded).into()
}

impl PreparedCache {
    pub fn get(&self, id: &[u8]) -> Option<Arc<PreparedStatement>> {
        self.lookups.fetch_add(1, Relaxed);
        let id: [u8; 16] = id.try_into().ok()?;
        let found = self
            .statements
            .read()
            .expect("prepared lock poisoned")
            .get(&id)
            .cloned();
        if found.is_some() {
            self.hits.fetch_add(1, Relaxed);
        }
        found
    }

    /// Statements kept, lookups and lookups that found their statement.
    pub fn figures(&self) -> (usize, u64, u64) {
        let len = self.statements.read().expect("prepared lock poisoned").len();
        (len, self.lookups.load(Relaxed), self.hits.load(Relaxed))
    }

    pub fn insert(&self, statement: PreparedStatement) -> Arc<PreparedStatement> {
        let statement = Arc::new(statement);
        let mut map = self.statements.write().expect("prepared lock poisoned");
        if map.len() >= PREPARED_STATEMENTS_MAX {
            let drop: Vec<[u8; 16]> = map.keys().take(map.len() / 2).copied().collect();
            for k in drop {
                map.remove(&k);
            }
        }
        map.insert(statement.id, statement.clone());
        statement
    }

    /// Forgets statements on a table or keyspace whose schema changed, so clients re-prepare
    /// and get the new metadata.
    pub fn invalidate(&self, keyspace: &str) {
        self.statements
            .write()
            .expect("prepared lock poisoned")
            .retain(|_, s| !s.text.contains(keyspace) && s.keyspace.as_deref() != Some(keyspace));
    }
}
