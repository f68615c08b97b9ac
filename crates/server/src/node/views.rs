//! What this node shows in `system_views` (see [`crate::system::views`] for what each table
//! means here): read from its connections, its configuration, its runtime, its storage engine
//! and its metrics when a table is read.

use crate::metrics::LatencySummary;
use crate::requests::ClientSnapshot;
use crate::system::views::{Cache, NodeViews, ThreadPool};

use super::Node;

/// The statement kinds the latency tables count (as [`hayate_cql::statement::Statement::kind`]).
const READ_KINDS: &[&str] = &["select"];
const WRITE_KINDS: &[&str] = &["insert", "update", "delete", "batch"];

fn int(v: usize) -> Option<i32> {
    i32::try_from(v).ok()
}

fn long(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl NodeViews for Node {
    fn clients(&self) -> Vec<ClientSnapshot> {
        self.connected.sessions().iter().map(|s| s.client()).collect()
    }

    fn settings(&self) -> Vec<(String, String)> {
        self.config.settings()
    }

    fn thread_pools(&self) -> Vec<ThreadPool> {
        let runtime = self.runtime.metrics();
        let stats = self.engine.stats();
        let one = Some(1);
        vec![
            ThreadPool {
                name: "service",
                active_tasks: int(runtime.num_alive_tasks()),
                active_tasks_limit: int(runtime.num_workers()),
                pending_tasks: int(runtime.global_queue_depth()),
                completed_tasks: None,
            },
            ThreadPool {
                name: "flusher",
                active_tasks_limit: one,
                ..ThreadPool::default()
            },
            ThreadPool {
                name: "defrag",
                active_tasks_limit: one,
                completed_tasks: Some(long(stats.defrag_blocks)),
                ..ThreadPool::default()
            },
            ThreadPool {
                name: "expiry",
                active_tasks_limit: one,
                ..ThreadPool::default()
            },
        ]
    }

    fn caches(&self) -> Vec<Cache> {
        let stats = self.engine.stats();
        let blocks = stats.cache_bytes.checked_div(stats.block_size_bytes).unwrap_or(0);
        let (statements, lookups, hits) = self.prepared.figures();
        vec![
            Cache {
                name: "post_write_cache",
                capacity_bytes: Some(long(self.config.storage.post_write_cache_bytes.0)),
                size_bytes: Some(long(stats.cache_bytes)),
                entry_count: i32::try_from(blocks).ok(),
                request_count: long(stats.cache_hits.saturating_add(stats.device_reads)),
                hit_count: long(stats.cache_hits),
            },
            Cache {
                name: "prepared_statements",
                capacity_bytes: None,
                size_bytes: None,
                entry_count: int(statements),
                request_count: long(lookups),
                hit_count: long(hits),
            },
        ]
    }

    fn latency(&self, writes: bool) -> Option<LatencySummary> {
        self.metrics
            .latency_summary(if writes { WRITE_KINDS } else { READ_KINDS })
    }
}
