//! The CQL binding: YCSB's `CassandraCQLClient`, on the scylla driver (token-aware routing,
//! prepared statements, async). It issues the statements the Cassandra binding issues, with the
//! same properties, so a run against hayate and one against Apache Cassandra compare like for
//! like:
//!
//! ```text
//! SELECT * | fieldN | field0, field1, … FROM <table> WHERE y_id = ? LIMIT 1
//! SELECT … FROM <table> WHERE token(y_id) >= token(?) LIMIT ?
//! UPDATE <table> SET fieldN = ? [, …] WHERE y_id = ?
//! INSERT INTO <table> (y_id, field0, …) VALUES (?, …)
//! DELETE FROM <table> WHERE y_id = ?
//! ```
//!
//! With `-p hayate.lwt=true` (hayate-bench's own, not YCSB's) every write is a lightweight
//! transaction: an INSERT gets `IF NOT EXISTS` and an UPDATE `IF EXISTS`, with SERIAL as the
//! serial consistency; a transaction that does not apply (`[applied] = false`) still counts as
//! done, as the application would see it.
//!
//! With `-p hayate.counter=true` (hayate-bench's own too) the fields are counters: the table is
//! made with `counter` fields, and an update or insert increments the fields it would write by
//! one (`UPDATE ... SET f = f + 1`), since counter tables take no INSERT; reads are unchanged.
//!
//! With `-p hayate.index=legacy` or `-p hayate.index=sai` (hayate-bench's own too) the table has
//! one more column, `y_ix`, with a secondary index on it (`CREATE INDEX`, or `USING 'sai'`); an
//! insert writes the key there too, and a read looks the row up by it, without the partition
//! key (`SELECT … FROM <table> WHERE y_ix = ?`, no LIMIT: the database does not know the value
//! is unique), so every read is an indexed lookup by a column; updates and scans are
//! unchanged.
//!
//! Statements are prepared on first use, once per field set, and shared by all workers. A failed
//! prepare (say, the table does not exist) fails that operation with `Return=ERROR` and is tried
//! again by the next one, as in YCSB.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::client::PoolSize;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::{Consistency, SerialConsistency};
use tokio::sync::OnceCell;

use super::db::Db;
use super::measure::Status;
use super::properties::{invalid, Properties, PropertyError};
use super::workload::{CoreWorkload, FieldSet, Values};

/// YCSB's Cassandra binding names its key column so.
const KEY_COLUMN: &str = "y_id";
/// Only the first few failed operations are printed with their error; the rest are counted.
const ERRORS_PRINTED_MAX: u32 = 10;
/// How long the whole connection attempt may take beyond the per-connection timeout.
const CONNECT_SLACK: Duration = Duration::from_secs(5);

/// The connection properties (`hosts`, `port`, `cassandra.*`).
#[derive(Debug, Clone)]
pub struct CqlConfig {
    pub hosts: Vec<String>,
    pub keyspace: String,
    pub read_consistency: Consistency,
    pub write_consistency: Consistency,
    pub username: Option<String>,
    pub password: String,
    pub connect_timeout: Option<Duration>,
    pub read_timeout: Option<Duration>,
    pub connections_per_host: Option<NonZeroUsize>,
    /// `hayate.createtable=true` (hayate-bench's own, not YCSB's): make the keyspace, with
    /// SimpleStrategy and `hayate.replicationfactor` (1), and YCSB's table (the key `y_id`
    /// and the workload's fields, all `varchar`, as YCSB's Cassandra binding documents) if
    /// they do not exist, before the load or run.
    pub create_table: Option<u32>,
    /// `hayate.lwt=true`: conditional writes (see the module comment).
    pub lwt: bool,
    /// `hayate.counter=true`: counter fields, written by increments (see the module comment).
    pub counter: bool,
    /// `hayate.index=legacy|sai`: reads by an indexed column (see the module comment); the
    /// `USING` class, empty for a legacy index.
    pub index: Option<&'static str>,
}

/// The indexed column of `hayate.index`.
const INDEX_COLUMN: &str = "y_ix";

impl CqlConfig {
    pub fn from_properties(p: &Properties) -> Result<CqlConfig, PropertyError> {
        let hosts_text = p.get("hosts").ok_or_else(|| PropertyError::Missing {
            name: "hosts".to_string(),
            expected: "a comma-separated list of CQL hosts (for example -p hosts=127.0.0.1)",
        })?;
        let port = p.u64_or("port", 9042)?;
        if !(1..=65535).contains(&port) {
            return Err(invalid("port", &port.to_string(), "a TCP port"));
        }
        let hosts: Vec<String> = hosts_text
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(|h| with_port(h, port as u16))
            .collect();
        if hosts.is_empty() {
            return Err(invalid("hosts", hosts_text, "at least one host"));
        }
        let millis = |name: &str| -> Result<Option<Duration>, PropertyError> {
            match p.get(name) {
                None => Ok(None),
                Some(_) => Ok(Some(Duration::from_millis(p.u64_or(name, 0)?.max(1)))),
            }
        };
        // The Java driver's pools: `maxconnections` caps, `coreconnections` opens; the scylla
        // driver keeps a fixed number per host, so the larger of the two is used.
        let max = p.u64_or("cassandra.maxconnections", 0)?;
        let core = p.u64_or("cassandra.coreconnections", 0)?;
        let connections_per_host = NonZeroUsize::new(max.max(core).min(64) as usize);
        Ok(CqlConfig {
            hosts,
            keyspace: p.str_or("cassandra.keyspace", "ycsb").to_string(),
            read_consistency: consistency(p, "cassandra.readconsistencylevel")?,
            write_consistency: consistency(p, "cassandra.writeconsistencylevel")?,
            username: p
                .get("cassandra.username")
                .filter(|u| !u.is_empty())
                .map(str::to_string),
            password: p.str_or("cassandra.password", "").to_string(),
            connect_timeout: millis("cassandra.connecttimeoutmillis")?,
            read_timeout: millis("cassandra.readtimeoutmillis")?,
            connections_per_host,
            create_table: match p.bool_or("hayate.createtable", false) {
                false => None,
                true => Some(match p.u64_or("hayate.replicationfactor", 1)? {
                    rf @ 1..=16 => rf as u32,
                    rf => return Err(invalid("hayate.replicationfactor", &rf.to_string(), "1 to 16")),
                }),
            },
            lwt: p.bool_or("hayate.lwt", false),
            counter: p.bool_or("hayate.counter", false),
            index: match p
                .str_or("hayate.index", "none")
                .trim()
                .to_ascii_lowercase()
                .as_str()
            {
                "none" | "" => None,
                "legacy" => Some(""),
                "sai" => Some(" USING 'sai'"),
                other => return Err(invalid("hayate.index", other, "none, legacy or sai")),
            },
        })
        .and_then(|c| {
            if c.lwt && c.counter {
                // Cassandra refuses conditions on counter tables.
                return Err(invalid("hayate.counter", "true", "false when hayate.lwt is true"));
            }
            if c.counter && c.index.is_some() {
                // Cassandra refuses indexes on counter tables.
                return Err(invalid(
                    "hayate.index",
                    "an index",
                    "none when hayate.counter is true",
                ));
            }
            Ok(c)
        })
    }
}

/// `host` or `host:port` (an IPv6 address needs brackets to carry a port).
fn with_port(host: &str, port: u16) -> String {
    if host.parse::<SocketAddr>().is_ok() {
        host.to_string()
    } else if host.parse::<std::net::Ipv6Addr>().is_ok() {
        format!("[{host}]:{port}")
    } else if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:{port}")
    }
}

fn consistency(p: &Properties, name: &str) -> Result<Consistency, PropertyError> {
    let v = p.str_or(name, "QUORUM");
    Ok(match v.trim().to_ascii_uppercase().as_str() {
        "ANY" => Consistency::Any,
        "ONE" => Consistency::One,
        "TWO" => Consistency::Two,
        "THREE" => Consistency::Three,
        "QUORUM" => Consistency::Quorum,
        "ALL" => Consistency::All,
        "LOCAL_QUORUM" => Consistency::LocalQuorum,
        "EACH_QUORUM" => Consistency::EachQuorum,
        "LOCAL_ONE" => Consistency::LocalOne,
        "SERIAL" => Consistency::Serial,
        "LOCAL_SERIAL" => Consistency::LocalSerial,
        _ => {
            return Err(invalid(
                name,
                v,
                "ANY, ONE, TWO, THREE, QUORUM, ALL, LOCAL_QUORUM, EACH_QUORUM or LOCAL_ONE",
            ))
        }
    })
}

/// The session could not be opened; the run cannot start.
#[derive(Debug)]
pub struct ConnectError {
    pub hosts: Vec<String>,
    pub keyspace: String,
    pub reason: String,
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot connect to the CQL hosts {} (keyspace {}): {}; check -p hosts=… and -p port=…, \
             that the server is up, and that the keyspace exists",
            self.hosts.join(","),
            self.keyspace,
            self.reason
        )
    }
}

impl std::error::Error for ConnectError {}

/// One driver session shared by all workers, and the statements prepared on it.
pub struct CqlDb {
    session: Session,
    config: CqlConfig,
    table: String,
    field_names: Vec<String>,
    read_all: OnceCell<PreparedStatement>,
    read_by_name: OnceCell<PreparedStatement>,
    read_one: Vec<OnceCell<PreparedStatement>>,
    scan_all: OnceCell<PreparedStatement>,
    scan_by_name: OnceCell<PreparedStatement>,
    scan_one: Vec<OnceCell<PreparedStatement>>,
    update_one: Vec<OnceCell<PreparedStatement>>,
    update_all: OnceCell<PreparedStatement>,
    insert_all: OnceCell<PreparedStatement>,
    delete: OnceCell<PreparedStatement>,
    errors_printed: AtomicU32,
}

impl CqlDb {
    pub async fn connect(config: CqlConfig, workload: &CoreWorkload) -> Result<CqlDb, ConnectError> {
        let fail = |reason: String| ConnectError {
            hosts: config.hosts.clone(),
            keyspace: config.keyspace.clone(),
            reason,
        };
        // Resolve first, so that a misspelt host name is reported as such.
        for h in &config.hosts {
            if let Err(e) = h.to_socket_addrs() {
                return Err(fail(format!("cannot resolve {h}: {e}")));
            }
        }
        let mut profile = ExecutionProfile::builder();
        if let Some(t) = config.read_timeout {
            profile = profile.request_timeout(Some(t));
        }
        if let Some(rf) = config.create_table {
            create_table(&config, workload, rf, connect_timeout_of(&config))
                .await
                .map_err(|e| fail(format!("cannot create the keyspace and table: {e}")))?;
        }
        let mut builder = SessionBuilder::new()
            .known_nodes(&config.hosts)
            .default_execution_profile_handle(profile.build().into_handle())
            .use_keyspace(&config.keyspace, false);
        let connect_timeout = connect_timeout_of(&config);
        builder = builder.connection_timeout(connect_timeout);
        if let Some(user) = &config.username {
            builder = builder.user(user, &config.password);
        }
        if let Some(n) = config.connections_per_host {
            builder = builder.pool_size(PoolSize::PerHost(n));
        }
        let session = match tokio::time::timeout(connect_timeout + CONNECT_SLACK, builder.build()).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(fail(e.to_string())),
            Err(_) => {
                return Err(fail(format!(
                    "no session within {:?}",
                    connect_timeout + CONNECT_SLACK
                )))
            }
        };
        let n = workload.field_count();
        let cells = || (0..n).map(|_| OnceCell::new()).collect::<Vec<_>>();
        Ok(CqlDb {
            session,
            config,
            table: workload.table.clone(),
            field_names: workload.field_names.clone(),
            read_all: OnceCell::new(),
            read_by_name: OnceCell::new(),
            read_one: cells(),
            scan_all: OnceCell::new(),
            scan_by_name: OnceCell::new(),
            scan_one: cells(),
            update_one: cells(),
            update_all: OnceCell::new(),
            insert_all: OnceCell::new(),
            delete: OnceCell::new(),
            errors_printed: AtomicU32::new(0),
        })
    }

    /// A write's condition when writes are lightweight transactions, else nothing.
    fn condition(&self, lwt: &'static str) -> &'static str {
        if self.config.lwt {
            lwt
        } else {
            ""
        }
    }

    fn selection(&self, fields: FieldSet) -> String {
        match fields {
            FieldSet::All => "*".to_string(),
            FieldSet::AllByName => self.field_names.join(", "),
            FieldSet::One(f) => self.field_names[f].clone(),
        }
    }

    async fn prepared<'a>(
        &self,
        cell: &'a OnceCell<PreparedStatement>,
        text: impl FnOnce() -> String,
        consistency: Consistency,
    ) -> Result<&'a PreparedStatement, String> {
        cell.get_or_try_init(|| async {
            let text = text();
            let mut stmt = self
                .session
                .prepare(text.as_str())
                .await
                .map_err(|e| format!("cannot prepare {text}: {e}"))?;
            stmt.set_consistency(consistency);
            if self.config.lwt {
                stmt.set_serial_consistency(Some(SerialConsistency::Serial));
            }
            Ok(stmt)
        })
        .await
    }

    fn read_statement_cell(&self, fields: FieldSet, scan: bool) -> &OnceCell<PreparedStatement> {
        match (fields, scan) {
            (FieldSet::All, false) => &self.read_all,
            (FieldSet::AllByName, false) => &self.read_by_name,
            (FieldSet::One(f), false) => &self.read_one[f],
            (FieldSet::All, true) => &self.scan_all,
            (FieldSet::AllByName, true) => &self.scan_by_name,
            (FieldSet::One(f), true) => &self.scan_one[f],
        }
    }

    /// Prints an operation's error, the first few times; YCSB logs every one, which at
    /// thousands per second helps nobody.
    fn report(&self, what: &str, key: &str, error: &str) -> Status {
        let n = self.errors_printed.fetch_add(1, Ordering::Relaxed);
        if n < ERRORS_PRINTED_MAX {
            eprintln!("hayate-bench: {what} of key {key} failed: {error}");
            if n + 1 == ERRORS_PRINTED_MAX {
                eprintln!("hayate-bench: further errors are counted in the summary, not printed");
            }
        }
        Status::Error
    }

    async fn select(&self, what: &str, key: &str, fields: FieldSet, scan_limit: Option<i32>) -> Status {
        let cell = self.read_statement_cell(fields, scan_limit.is_some());
        let text = || match scan_limit {
            None if self.config.index.is_some() => format!(
                "SELECT {} FROM {} WHERE {INDEX_COLUMN} = ?",
                self.selection(fields),
                self.table
            ),
            None => format!(
                "SELECT {} FROM {} WHERE {KEY_COLUMN} = ? LIMIT 1",
                self.selection(fields),
                self.table
            ),
            Some(_) => format!(
                "SELECT {} FROM {} WHERE token({KEY_COLUMN}) >= token(?) LIMIT ?",
                self.selection(fields),
                self.table
            ),
        };
        let stmt = match self.prepared(cell, text, self.config.read_consistency).await {
            Ok(s) => s,
            Err(e) => return self.report(what, key, &e),
        };
        let result = match scan_limit {
            None => self.session.execute_unpaged(stmt, (key,)).await,
            Some(limit) => self.session.execute_unpaged(stmt, (key, limit)).await,
        };
        match result {
            Err(e) => self.report(what, key, &e.to_string()),
            Ok(r) => match r.into_rows_result() {
                Err(e) => self.report(what, key, &format!("not a rows result: {e}")),
                Ok(rows) if rows.rows_num() == 0 && scan_limit.is_none() => Status::NotFound,
                Ok(_) => Status::Ok,
            },
        }
    }

    async fn write(
        &self,
        what: &str,
        stmt: Result<&PreparedStatement, String>,
        key: &str,
        values: &[&str],
    ) -> Status {
        let stmt = match stmt {
            Ok(s) => s,
            Err(e) => return self.report(what, key, &e),
        };
        match self.session.execute_unpaged(stmt, values).await {
            Ok(_) => Status::Ok,
            Err(e) => self.report(what, key, &e.to_string()),
        }
    }
}

impl CqlDb {
    /// An update or insert of a counter table: each field it would write is incremented by one.
    async fn increment(&self, what: &str, key: &str, values: Values<'_>) -> Status {
        let (cell, fields): (_, Vec<usize>) = match values {
            Values::One { field, .. } => (&self.update_one[field], vec![field]),
            Values::All(all) => (&self.update_all, (0..all.len()).collect()),
        };
        let text = || {
            let sets: Vec<String> = fields
                .iter()
                .map(|&f| format!("{0} = {0} + 1", self.field_names[f]))
                .collect();
            format!(
                "UPDATE {} SET {} WHERE {KEY_COLUMN} = ?",
                self.table,
                sets.join(", ")
            )
        };
        let stmt = self.prepared(cell, text, self.config.write_consistency).await;
        self.write(what, stmt, key, &[key]).await
    }
}

impl Db for CqlDb {
    async fn read(&self, key: &str, fields: FieldSet) -> Status {
        self.select("READ", key, fields, None).await
    }

    async fn scan(&self, start_key: &str, record_count: i32, fields: FieldSet) -> Status {
        self.select("SCAN", start_key, fields, Some(record_count)).await
    }

    async fn update(&self, key: &str, values: Values<'_>) -> Status {
        let wc = self.config.write_consistency;
        if self.config.counter {
            return self.increment("UPDATE", key, values).await;
        }
        match values {
            Values::One { field, value } => {
                let text = || {
                    format!(
                        "UPDATE {} SET {} = ? WHERE {KEY_COLUMN} = ?{}",
                        self.table,
                        self.field_names[field],
                        self.condition(" IF EXISTS")
                    )
                };
                let stmt = self.prepared(&self.update_one[field], text, wc).await;
                self.write("UPDATE", stmt, key, &[value, key]).await
            }
            Values::All(all) => {
                let text = || {
                    let sets: Vec<String> = self.field_names.iter().map(|f| format!("{f} = ?")).collect();
                    format!(
                        "UPDATE {} SET {} WHERE {KEY_COLUMN} = ?{}",
                        self.table,
                        sets.join(", "),
                        self.condition(" IF EXISTS")
                    )
                };
                let stmt = self.prepared(&self.update_all, text, wc).await;
                let mut bound: Vec<&str> = (0..all.len()).map(|f| all.get(f)).collect();
                bound.push(key);
                self.write("UPDATE", stmt, key, &bound).await
            }
        }
    }

    async fn insert(&self, key: &str, values: Values<'_>) -> Status {
        if self.config.counter {
            return self.increment("INSERT", key, values).await;
        }
        let all = match values {
            Values::All(all) => all,
            Values::One { .. } => panic!("YCSB inserts write every field"),
        };
        let indexed = self.config.index.is_some();
        let text = || {
            let extra = if indexed { 2 } else { 1 };
            let marks = vec!["?"; self.field_names.len() + extra].join(", ");
            let ix = if indexed {
                format!(", {INDEX_COLUMN}")
            } else {
                String::new()
            };
            format!(
                "INSERT INTO {} ({KEY_COLUMN}{ix}, {}) VALUES ({marks}){}",
                self.table,
                self.field_names.join(", "),
                self.condition(" IF NOT EXISTS")
            )
        };
        let stmt = self
            .prepared(&self.insert_all, text, self.config.write_consistency)
            .await;
        let mut bound: Vec<&str> = Vec::with_capacity(all.len() + 2);
        bound.push(key);
        if indexed {
            bound.push(key);
        }
        bound.extend((0..all.len()).map(|f| all.get(f)));
        self.write("INSERT", stmt, key, &bound).await
    }

    async fn delete(&self, key: &str) -> Status {
        let text = || format!("DELETE FROM {} WHERE {KEY_COLUMN} = ?", self.table);
        let stmt = self
            .prepared(&self.delete, text, self.config.write_consistency)
            .await;
        self.write("DELETE", stmt, key, &[key]).await
    }
}

fn connect_timeout_of(config: &CqlConfig) -> Duration {
    config.connect_timeout.unwrap_or(Duration::from_secs(5))
}

/// Makes the keyspace and YCSB's table if they do not exist (`hayate.createtable`).
async fn create_table(
    config: &CqlConfig,
    workload: &CoreWorkload,
    rf: u32,
    timeout: Duration,
) -> Result<(), String> {
    // The statements need no schema metadata, and fetching it after each one (the driver's
    // schema agreement) fails on a table with a type the driver cannot parse (a custom type),
    // which the load itself never reads.
    let mut builder = SessionBuilder::new()
        .known_nodes(&config.hosts)
        .connection_timeout(timeout)
        .fetch_schema_metadata(false);
    if let Some(user) = &config.username {
        builder = builder.user(user, &config.password);
    }
    let session = tokio::time::timeout(timeout + CONNECT_SLACK, builder.build())
        .await
        .map_err(|_| "no session".to_string())?
        .map_err(|e| e.to_string())?;
    let ty = if config.counter { "counter" } else { "varchar" };
    let mut fields: String = workload
        .field_names
        .iter()
        .map(|f| format!(", {f} {ty}"))
        .collect();
    let mut index = None;
    if let Some(using) = config.index {
        fields.push_str(&format!(", {INDEX_COLUMN} varchar"));
        index = Some(format!(
            "CREATE INDEX IF NOT EXISTS ON {}.{} ({INDEX_COLUMN}){using}",
            config.keyspace, workload.table
        ));
    }
    for cql in [
        format!(
            "CREATE KEYSPACE IF NOT EXISTS {} WITH replication = {{'class': 'SimpleStrategy', \
             'replication_factor': {rf}}}",
            config.keyspace
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {}.{} (y_id varchar PRIMARY KEY{fields})",
            config.keyspace, workload.table
        ),
    ]
    .into_iter()
    .chain(index)
    {
        session
            .query_unpaged(cql.as_str(), ())
            .await
            .map_err(|e| format!("{cql}: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(text: &str) -> Properties {
        let mut p = Properties::new();
        p.load_str(text);
        p
    }

    #[test]
    fn properties_of_ycsbs_cassandra_binding() {
        let c = CqlConfig::from_properties(&props(
            "hosts=10.0.0.1, 10.0.0.2:9043,::1\nport=9142\ncassandra.keyspace=bench\n\
             cassandra.readconsistencylevel=ONE\ncassandra.writeconsistencylevel=local_quorum\n\
             cassandra.username=u\ncassandra.password=p\ncassandra.readtimeoutmillis=2000\n\
             cassandra.maxconnections=4\n",
        ))
        .expect("valid");
        assert_eq!(c.hosts, ["10.0.0.1:9142", "10.0.0.2:9043", "[::1]:9142"]);
        assert_eq!(c.keyspace, "bench");
        assert_eq!(c.read_consistency, Consistency::One);
        assert_eq!(c.write_consistency, Consistency::LocalQuorum);
        assert_eq!(c.username.as_deref(), Some("u"));
        assert_eq!(c.read_timeout, Some(Duration::from_millis(2000)));
        assert_eq!(c.connections_per_host.map(NonZeroUsize::get), Some(4));

        let d = CqlConfig::from_properties(&props("hosts=h\n")).expect("defaults");
        assert_eq!(d.hosts, ["h:9042"]);
        assert_eq!(d.keyspace, "ycsb");
        assert_eq!(
            (d.read_consistency, d.write_consistency),
            (Consistency::Quorum, Consistency::Quorum)
        );
        assert!(d.username.is_none() && d.connections_per_host.is_none() && d.connect_timeout.is_none());

        let missing = CqlConfig::from_properties(&props("")).expect_err("hosts is required");
        assert!(missing.to_string().contains("hosts"), "{missing}");
        assert!(
            CqlConfig::from_properties(&props("hosts=h\ncassandra.readconsistencylevel=MOST\n")).is_err()
        );
    }
}
