//! The rows of `system_views`, Cassandra 5.0's virtual tables of the node's own state, made
//! when they are read. The columns are Cassandra's (`schema::system`); where hayate has no such
//! thing, the value is null. What each table shows:
//!
//! - `clients`: one row per open CQL connection (`connection::registry`). `hostname` is the
//!   client's address (hayate does no reverse DNS lookups); `authentication_mode` is
//!   "Password" or "Unauthenticated" and `authentication_metadata` null; `client_options` are
//!   the STARTUP options, `driver_name` and `driver_version` two of them; `keyspace_name`
//!   (a column later Cassandra versions add) is the connection's USE keyspace.
//! - `settings`: the effective configuration ([`crate::config::Config::settings`]).
//! - `thread_pools`: the service threads (the runtime that runs requests: its workers as
//!   `active_tasks_limit`, the tasks alive on it, connections included, as `active_tasks`, and
//!   its global queue as `pending_tasks`), and the storage engine's one-thread workers (flusher,
//!   defragmentation, expiry; defragmentation counts the blocks it has moved as completed
//!   tasks). Blocked counts are null: nothing in hayate blocks a task for lack of a thread.
//! - `caches`: the engine's post-write cache (write blocks kept in RAM after they are written;
//!   hits are reads it answered, requests those plus device reads) and the prepared statement
//!   cache (counted in statements: `capacity_bytes` and `size_bytes` null). Recent rates null.
//! - `disk_usage`: one row per user table, `mebibytes` null: every table lives in the one
//!   storage namespace, which counts its live bytes as a whole (the metrics' live bytes).
//! - `local_read_latency`, `local_write_latency`: hayate keeps latency per statement kind, not
//!   per table, and as the coordinator sees it (the whole request): one row, keyspace_name and
//!   table_name "*", for SELECTs and for INSERT, UPDATE, DELETE and BATCH; `per_second` is the
//!   mean rate since the node started (Cassandra's is a five-minute rate).

use crate::metrics::LatencySummary;
use crate::requests::ClientSnapshot;
use crate::schema::{Schema, Table};

use super::{inet, text_map, RowBuilder};

/// A thread pool as `system_views.thread_pools` shows it; `None` where hayate has no figure.
#[derive(Debug, Clone, Default)]
pub struct ThreadPool {
    pub name: &'static str,
    pub active_tasks: Option<i32>,
    pub active_tasks_limit: Option<i32>,
    pub pending_tasks: Option<i32>,
    pub completed_tasks: Option<i64>,
}

/// A cache as `system_views.caches` shows it.
#[derive(Debug, Clone, Default)]
pub struct Cache {
    pub name: &'static str,
    pub capacity_bytes: Option<i64>,
    pub size_bytes: Option<i64>,
    pub entry_count: Option<i32>,
    pub request_count: i64,
    pub hit_count: i64,
}

/// What the `system_views` tables show of this node.
pub trait NodeViews {
    fn clients(&self) -> Vec<ClientSnapshot>;
    fn settings(&self) -> Vec<(String, String)>;
    fn thread_pools(&self) -> Vec<ThreadPool>;
    fn caches(&self) -> Vec<Cache>;
    /// Reads (`false`) or writes (`true`).
    fn latency(&self, writes: bool) -> Option<LatencySummary>;
}

/// Every row of `system_views.<table>`.
pub fn rows(views: &dyn NodeViews, schema: &Schema, table: &Table) -> Vec<Vec<Option<Vec<u8>>>> {
    match table.name.as_str() {
        "clients" => views.clients().iter().map(|c| client(c, table)).collect(),
        "settings" => views
            .settings()
            .iter()
            .map(|(name, value)| {
                RowBuilder::new(table)
                    .text("name", name)
                    .text("value", value)
                    .done()
            })
            .collect(),
        "thread_pools" => views
            .thread_pools()
            .iter()
            .map(|p| {
                let mut row = RowBuilder::new(table).text("name", p.name);
                row = opt(
                    row,
                    "active_tasks",
                    p.active_tasks.map(|v| v.to_be_bytes().to_vec()),
                );
                row = opt(
                    row,
                    "active_tasks_limit",
                    p.active_tasks_limit.map(|v| v.to_be_bytes().to_vec()),
                );
                row = opt(
                    row,
                    "pending_tasks",
                    p.pending_tasks.map(|v| v.to_be_bytes().to_vec()),
                );
                row = opt(
                    row,
                    "completed_tasks",
                    p.completed_tasks.map(|v| v.to_be_bytes().to_vec()),
                );
                row.done()
            })
            .collect(),
        "caches" => views.caches().iter().map(|c| cache(c, table)).collect(),
        "disk_usage" => schema
            .user_keyspaces()
            .flat_map(|k| k.tables.values())
            .map(|t| {
                RowBuilder::new(table)
                    .text("keyspace_name", &t.keyspace)
                    .text("table_name", &t.name)
                    .done()
            })
            .collect(),
        "local_read_latency" | "local_write_latency" => {
            let writes = table.name == "local_write_latency";
            views
                .latency(writes)
                .map(|l| latency(&l, table))
                .into_iter()
                .collect()
        }
        _ => Vec::new(),
    }
}

fn opt<'t>(row: RowBuilder<'t>, column: &str, value: Option<Vec<u8>>) -> RowBuilder<'t> {
    match value {
        Some(v) => row.set(column, v),
        None => row,
    }
}

fn client(c: &ClientSnapshot, table: &Table) -> Vec<Option<Vec<u8>>> {
    let option = |name: &str| {
        c.startup_options
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_bytes().to_vec())
    };
    let mut row = RowBuilder::new(table)
        .set("address", inet(c.peer.ip()))
        .int("port", i32::from(c.peer.port()))
        .text("hostname", &c.peer.ip().to_string())
        .text("connection_stage", c.stage)
        .int("protocol_version", i32::from(c.protocol_version))
        .set("request_count", (c.request_count as i64).to_be_bytes().to_vec())
        .boolean("ssl_enabled", c.tls.is_some())
        .set(
            "client_options",
            text_map(c.startup_options.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
        );
    row = opt(row, "driver_name", option("DRIVER_NAME"));
    row = opt(row, "driver_version", option("DRIVER_VERSION"));
    row = opt(
        row,
        "username",
        c.username.as_ref().map(|u| u.as_bytes().to_vec()),
    );
    row = opt(
        row,
        "authentication_mode",
        c.authentication_mode.map(|m| m.as_bytes().to_vec()),
    );
    row = opt(
        row,
        "keyspace_name",
        c.keyspace.as_ref().map(|k| k.as_bytes().to_vec()),
    );
    if let Some(tls) = &c.tls {
        row = opt(
            row,
            "ssl_protocol",
            tls.protocol.as_ref().map(|p| p.as_bytes().to_vec()),
        );
        row = opt(
            row,
            "ssl_cipher_suite",
            tls.cipher_suite.as_ref().map(|p| p.as_bytes().to_vec()),
        );
    }
    row.done()
}

fn cache(c: &Cache, table: &Table) -> Vec<Option<Vec<u8>>> {
    let long = |v: i64| v.to_be_bytes().to_vec();
    let hit_ratio = if c.request_count > 0 {
        c.hit_count as f64 / c.request_count as f64
    } else {
        // Cassandra's ratio of no requests.
        f64::NAN
    };
    let mut row = RowBuilder::new(table)
        .text("name", c.name)
        .set("request_count", long(c.request_count))
        .set("hit_count", long(c.hit_count))
        .set("hit_ratio", hit_ratio.to_be_bytes().to_vec());
    row = opt(row, "capacity_bytes", c.capacity_bytes.map(long));
    row = opt(row, "size_bytes", c.size_bytes.map(long));
    row = opt(
        row,
        "entry_count",
        c.entry_count.map(|v| v.to_be_bytes().to_vec()),
    );
    row.done()
}

fn latency(l: &LatencySummary, table: &Table) -> Vec<Option<Vec<u8>>> {
    // Milliseconds to three decimals, as Cassandra rounds them for cqlsh.
    let ms = |us: u64| ((us as f64 / 1000.0) * 1000.0).round() / 1000.0;
    let double = |v: f64| v.to_be_bytes().to_vec();
    RowBuilder::new(table)
        .text("keyspace_name", "*")
        .text("table_name", "*")
        .set("count", (l.count as i64).to_be_bytes().to_vec())
        .set("50th_ms", double(ms(l.p50_us)))
        .set("99th_ms", double(ms(l.p99_us)))
        .set("max_ms", double(ms(l.max_us)))
        .set("per_second", double((l.per_second * 1000.0).round() / 1000.0))
        .done()
}
