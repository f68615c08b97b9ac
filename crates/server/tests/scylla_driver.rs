//! The Rust driver (`scylla` 1.x) against a real `hayate` process, as a Rust application would
//! use it.
//!
//! Each test starts the binary Cargo built for this test run on a free port with a fresh data
//! directory, and kills it when the test ends (pass or fail). On connect the driver reads
//! `system.local`, `system.peers` and `system_schema.*`, builds its token ring and table
//! metadata, and prepares statements whose partition keys it hashes itself to route requests:
//! each of those must agree with what the server does, or the session fails to build or routes
//! wrongly. When anything fails, the message carries the driver's error and the end of the
//! node's log.

use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};
use scylla::response::{PagingState, PagingStateResponse};
use scylla::statement::Consistency;
use scylla::value::{CqlDate, CqlDuration, CqlTimestamp, CqlVarint};

const RF1: &str = "{'class': 'SimpleStrategy', 'replication_factor': 1}";
/// More replicas than the one node: QUORUM and ALL are unavailable, as in Cassandra.
const RF3: &str = "{'class': 'SimpleStrategy', 'replication_factor': 3}";

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A node that has not opened its CQL port by then is stuck, not slow.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// One `hayate` process with its own data directory, killed on drop. With
/// `HAYATE_REFERENCE=host:port` set, a server started elsewhere instead (Apache Cassandra, to
/// check that an expectation here is Cassandra's).
struct Node {
    child: Option<Child>,
    addr: SocketAddr,
    log: PathBuf,
    _dir: Option<tempfile::TempDir>,
    /// Appended to keyspace names, so runs against a long-lived reference server do not collide.
    suffix: String,
}

impl Node {
    fn start() -> Node {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let suffix = format!(
            "{:x}_{}",
            since_epoch.as_millis() % (1 << 32),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        if let Ok(reference) = std::env::var("HAYATE_REFERENCE") {
            return Node {
                child: None,
                addr: reference.parse().expect("HAYATE_REFERENCE is host:port"),
                log: PathBuf::from("(reference server: no log)"),
                _dir: None,
                suffix,
            };
        }
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/test-nodes");
        fs::create_dir_all(&root).expect("create target/test-nodes");
        let dir = tempfile::Builder::new()
            .prefix("scylla-driver-")
            .tempdir_in(&root)
            .expect("create the node's directory");
        let data = dir.path().join("data");
        fs::create_dir_all(&data).expect("create the data directory");
        let config = dir.path().join("hayate.toml");
        // The write buffer in the node's own directory rather than /dev/shm, so that the node
        // killed at the end does not leave it in RAM.
        fs::write(
            &config,
            format!(
                "[storage]\ndevice_size = \"256MiB\"\nwrite_buffer_dir = \"{}\"\n\
                 [metrics]\nport = 0\n[auth]\nauthenticator = \"AllowAllAuthenticator\"\n",
                dir.path().display()
            ),
        )
        .expect("write the config");
        let port = free_port();
        // Each test's node is a cluster of its own, with its own internode port.
        let storage_port = free_port();
        let log = dir.path().join("node.log");
        let log_file = fs::File::create(&log).expect("create the node's log");
        let child = Command::new(env!("CARGO_BIN_EXE_hayate"))
            .arg("--config")
            .arg(&config)
            .arg("--data-dir")
            .arg(&data)
            .args(["--listen-address", "127.0.0.1", "--cql-port", &port.to_string()])
            .args(["--storage-port", &storage_port.to_string()])
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("clone the log handle"))
            .stderr(log_file)
            .spawn()
            .expect("spawn the hayate binary");
        let mut node = Node {
            child: Some(child),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            log,
            _dir: Some(dir),
            suffix,
        };
        node.wait_ready();
        node
    }

    /// Ready means this node's log says it listens on its CQL address and that address accepts
    /// TCP. The log line proves the listener is this process and not another one that happens to
    /// hold the port.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        let listening = format!("listening for CQL clients on {}", self.addr);
        while Instant::now() < deadline {
            let exited = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                panic!(
                    "hayate exited with {status} before opening {}\n{}",
                    self.addr,
                    self.log_tail()
                );
            }
            let logged = fs::read_to_string(&self.log).is_ok_and(|text| text.contains(&listening));
            if logged && TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "hayate did not open {} within {START_TIMEOUT:?}\n{}",
            self.addr,
            self.log_tail()
        );
    }

    /// A keyspace name unique to this node and run.
    fn ks(&self, base: &str) -> String {
        format!("{base}_{}", self.suffix)
    }

    fn log_tail(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut text);
        }
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(30)..].join("\n");
        format!("--- last lines of {} ---\n{tail}", self.log.display())
    }

    async fn session(&self) -> Session {
        match SessionBuilder::new()
            .known_node(self.addr.to_string())
            .connection_timeout(Duration::from_secs(5))
            .build()
            .await
        {
            Ok(session) => session,
            Err(e) => panic!("the scylla driver could not connect: {e}\n{}", self.log_tail()),
        }
    }
}

/// A port on 127.0.0.1 that is free for TCP and UDP (gossip uses the internode port for both).
///
/// Picked below the kernel's ephemeral range (32768 and up on Linux), never by binding port 0:
/// a port the kernel hands out is free only until the next port-0 bind or outgoing connection
/// takes it, and the nodes of tests running in parallel bind their metrics port as port 0. One
/// of them once took a port another test had picked for its CQL port, and that test's readiness
/// check connected to the wrong process.
fn free_port() -> u16 {
    const BAND: std::ops::Range<u32> = 20_000..32_000;
    static TRIED: AtomicU32 = AtomicU32::new(0);
    let seed = std::process::id().wrapping_mul(2_654_435_761);
    for _ in 0..2_000 {
        let n = TRIED.fetch_add(1, Ordering::Relaxed);
        let port = (BAND.start + seed.wrapping_add(n.wrapping_mul(7_919)) % BAND.len() as u32) as u16;
        let tcp = TcpListener::bind(("127.0.0.1", port)).is_ok();
        if tcp && std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("found no free port on 127.0.0.1 in {BAND:?}");
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs a statement that must succeed, with the node's log in the panic if it does not.
async fn run(node: &Node, session: &Session, cql: &str) {
    if let Err(e) = session.query_unpaged(cql, &[]).await {
        panic!("{cql}\nfailed: {e}\n{}", node.log_tail());
    }
}

/// The database error of a failed request: its code and the server's message.
fn db_error(e: ExecutionError) -> (DbError, String) {
    match e {
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(db, message)) => (db, message),
        other => panic!("expected an error from the server, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_sees_the_node_and_schema() {
    let node = Node::start();
    let session = node.session().await;
    let ks = node.ks("meta");
    run(
        &node,
        &session,
        &format!("CREATE KEYSPACE {ks} WITH replication = {RF1}"),
    )
    .await;
    run(
        &node,
        &session,
        &format!("CREATE TABLE {ks}.t (a int, b text, c bigint, v blob, PRIMARY KEY ((a, b), c))"),
    )
    .await;
    session.refresh_metadata().await.expect("refresh metadata");

    let state = session.get_cluster_state();
    let nodes = state.get_nodes_info();
    assert_eq!(nodes.len(), 1, "one node, no peers");
    assert_eq!(nodes[0].datacenter.as_deref(), Some("datacenter1"));
    let table = state
        .get_keyspace(&ks)
        .and_then(|k| k.tables.get("t"))
        .unwrap_or_else(|| panic!("the driver's metadata has no {ks}.t"));
    assert_eq!(table.partition_key, ["a", "b"]);
    assert_eq!(table.clustering_key, ["c"]);

    // The driver drops a keyspace whose metadata it cannot parse (logging a warning): every
    // keyspace and table the server lists must be in its metadata.
    let listed = session
        .query_unpaged("SELECT keyspace_name, table_name FROM system_schema.tables", &[])
        .await
        .expect("select system_schema.tables")
        .into_rows_result()
        .expect("rows");
    for row in listed.rows::<(String, String)>().expect("typed rows") {
        let (keyspace, table) = row.expect("a row");
        let parsed = state.get_keyspace(&keyspace).and_then(|k| k.tables.get(&table));
        assert!(
            parsed.is_some(),
            "the driver could not read the metadata of {keyspace}.{table}"
        );
    }

    // The driver hashes partition keys itself for token-aware routing: it must agree with the
    // server's token() for a composite key.
    let token = state
        .compute_token(&ks, "t", &(7_i32, "seven"))
        .expect("compute a token");
    run(
        &node,
        &session,
        &format!("INSERT INTO {ks}.t (a, b, c) VALUES (7, 'seven', 1)"),
    )
    .await;
    let rows = session
        .query_unpaged(
            format!("SELECT token(a, b) FROM {ks}.t WHERE a = 7 AND b = 'seven'"),
            &[],
        )
        .await
        .expect("select token")
        .into_rows_result()
        .expect("rows");
    let (server_token,): (i64,) = rows.single_row().expect("one row with the token");
    assert_eq!(
        token.value(),
        server_token,
        "Murmur3 tokens differ between driver and server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_round_trip_many_types() {
    let node = Node::start();
    let session = node.session().await;
    let ks = node.ks("types");
    run(
        &node,
        &session,
        &format!("CREATE KEYSPACE {ks} WITH replication = {RF1}"),
    )
    .await;
    run(
        &node,
        &session,
        &format!(
            "CREATE TABLE {ks}.t (k int PRIMARY KEY, s text, big bigint, d double, b blob, \
             flag boolean, at timestamp, day date, huge varint, wait duration, l list<int>, \
             m map<text, int>, missing text, tiny tinyint, small smallint)"
        ),
    )
    .await;

    let mut insert = session
        .prepare(format!(
            "INSERT INTO {ks}.t (k, s, big, d, b, flag, at, day, huge, wait, l, m, missing, tiny, \
             small) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        ))
        .await
        .expect("prepare the insert");
    insert.set_consistency(Consistency::Quorum);
    let m: HashMap<String, i32> = [("x".to_string(), 1), ("ü".to_string(), -2)].into();
    let huge = CqlVarint::from_signed_bytes_be(vec![0x80, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    // All three parts negative: Cassandra refuses mixed signs.
    let wait = CqlDuration {
        months: -1,
        days: -2,
        nanoseconds: -3_000_000_007,
    };
    let values = (
        1_i32,
        "héllo 世界".to_string(),
        i64::MIN,
        -0.25_f64,
        vec![0_u8, 255, 7],
        true,
        CqlTimestamp(-1_500),
        CqlDate((1 << 31) - 1),
        huge.clone(),
        wait,
        vec![3_i32, 1, 2],
        m.clone(),
        None::<String>,
        i8::MIN,
        i16::MAX,
    );
    session
        .execute_unpaged(&insert, values)
        .await
        .expect("execute the insert");

    let select = session
        .prepare(format!(
            "SELECT s, big, d, b, flag, at, day, huge, wait, l, m, missing, tiny, small \
             FROM {ks}.t WHERE k = ?"
        ))
        .await
        .expect("prepare the select");
    let result = session
        .execute_unpaged(&select, (1_i32,))
        .await
        .expect("execute the select")
        .into_rows_result()
        .expect("a rows result");
    type Row = (
        String,
        i64,
        f64,
        Vec<u8>,
        bool,
        CqlTimestamp,
        CqlDate,
        CqlVarint,
        CqlDuration,
        Vec<i32>,
        HashMap<String, i32>,
        Option<String>,
        i8,
        i16,
    );
    let row: Row = result.single_row().expect("one row of the expected types");
    assert_eq!(row.0, "héllo 世界");
    assert_eq!(row.1, i64::MIN);
    assert_eq!(row.2, -0.25);
    assert_eq!(row.3, [0, 255, 7]);
    assert!(row.4);
    assert_eq!(row.5, CqlTimestamp(-1_500));
    assert_eq!(
        row.6,
        CqlDate((1 << 31) - 1),
        "1970-01-01 is 2^31 in CQL's date encoding"
    );
    assert_eq!(row.7, huge);
    assert_eq!(row.8, wait);
    assert_eq!(row.9, [3, 1, 2]);
    assert_eq!(row.10, m);
    assert_eq!(row.11, None);
    assert_eq!((row.12, row.13), (i8::MIN, i16::MAX));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_through_more_rows_than_a_page() {
    const ROWS: i32 = 1_050;
    const PAGE: i32 = 100;
    let node = Node::start();
    let session = node.session().await;
    let ks = node.ks("paging");
    run(
        &node,
        &session,
        &format!("CREATE KEYSPACE {ks} WITH replication = {RF1}"),
    )
    .await;
    run(
        &node,
        &session,
        &format!("CREATE TABLE {ks}.t (k int, c int, v text, PRIMARY KEY (k, c))"),
    )
    .await;
    let insert = session
        .prepare(format!("INSERT INTO {ks}.t (k, c, v) VALUES (?, ?, ?)"))
        .await
        .expect("prepare the insert");
    for c in 0..ROWS {
        // Two partitions, so the full scan crosses a partition boundary mid-page.
        session
            .execute_unpaged(&insert, (c % 2, c, format!("v{c}")))
            .await
            .expect("insert");
    }

    let mut select = session
        .prepare(format!("SELECT c, v FROM {ks}.t WHERE k = ?"))
        .await
        .expect("prepare the select");
    select.set_page_size(PAGE);
    let mut seen = Vec::new();
    let mut pages = 0;
    let mut paging_state = PagingState::start();
    loop {
        let (result, response) = session
            .execute_single_page(&select, (0_i32,), paging_state)
            .await
            .expect("fetch a page");
        pages += 1;
        let rows = result.into_rows_result().expect("a rows result");
        assert!(
            rows.rows_num() <= PAGE as usize,
            "a page holds at most the page size"
        );
        for row in rows.rows::<(i32, String)>().expect("typed rows") {
            let (c, v) = row.expect("a row");
            assert_eq!(v, format!("v{c}"));
            seen.push(c);
        }
        match response {
            PagingStateResponse::HasMorePages { state } => paging_state = state,
            PagingStateResponse::NoMorePages => break,
        }
    }
    let expected: Vec<i32> = (0..ROWS).filter(|c| c % 2 == 0).collect();
    assert_eq!(
        seen, expected,
        "every row of the partition once, in clustering order"
    );
    assert!(
        pages >= (expected.len() as i32 / PAGE) as usize,
        "the result came in pages ({pages})"
    );

    // A full scan, paged, across both partitions.
    let mut scan = session
        .prepare(format!("SELECT k, c FROM {ks}.t"))
        .await
        .expect("prepare the scan");
    scan.set_page_size(PAGE);
    let mut count = 0;
    let mut paging_state = PagingState::start();
    loop {
        let (result, response) = session
            .execute_single_page(&scan, (), paging_state)
            .await
            .expect("fetch a scan page");
        count += result.into_rows_result().expect("rows").rows_num();
        match response {
            PagingStateResponse::HasMorePages { state } => paging_state = state,
            PagingStateResponse::NoMorePages => break,
        }
    }
    assert_eq!(count, ROWS as usize);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_carry_cassandras_codes() {
    let node = Node::start();
    let session = node.session().await;
    let ks = node.ks("errs");

    let (db, message) = db_error(
        session
            .query_unpaged("SELEC * FROM nowhere", &[])
            .await
            .expect_err("the statement must fail"),
    );
    assert_eq!(db, DbError::SyntaxError, "{message}");
    assert!(message.contains("line 1:"), "{message}");

    let (db, message) = db_error(
        session
            .query_unpaged("SELECT * FROM no_such_keyspace.t", &[])
            .await
            .expect_err("the statement must fail"),
    );
    assert_eq!(db, DbError::Invalid, "{message}");
    assert!(message.contains("no_such_keyspace"), "{message}");

    run(
        &node,
        &session,
        &format!("CREATE KEYSPACE {ks} WITH replication = {RF3}"),
    )
    .await;
    let (db, message) = db_error(
        session
            .query_unpaged(format!("CREATE KEYSPACE {ks} WITH replication = {RF1}"), &[])
            .await
            .expect_err("the statement must fail"),
    );
    assert_eq!(
        db,
        DbError::AlreadyExists {
            keyspace: ks.clone(),
            table: String::new()
        },
        "{message}"
    );

    run(
        &node,
        &session,
        &format!("CREATE TABLE {ks}.t (k int PRIMARY KEY)"),
    )
    .await;
    let mut insert = session
        .prepare(format!("INSERT INTO {ks}.t (k) VALUES (?)"))
        .await
        .expect("prepare");
    insert.set_consistency(Consistency::All);
    let err = session
        .execute_unpaged(&insert, (1_i32,))
        .await
        .expect_err("ALL needs 3 replicas");
    let (db, message) = db_error(err);
    assert_eq!(
        db,
        DbError::Unavailable {
            consistency: Consistency::All,
            required: 3,
            alive: 1
        },
        "{message}"
    );
}
