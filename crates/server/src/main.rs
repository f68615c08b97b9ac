//! The `hayate` node: a CQL server over the hybrid-memory storage engine, one member of a
//! cluster.
//!
//! The path of a request through this crate: [`connection`] (socket → frames) →
//! [`requests`] (one file per opcode) → [`query`] (statement → key ranges, mutations and
//! reads, against the [`schema`]) → `hayate_cluster::coordinator` → replicas (this node's
//! storage engine, and the others over the internode transport). Built-in tables come from
//! [`system`], schema statements go through the cluster metadata log ([`admin`]), role
//! statements through [`roles`]. [`cluster`] wires the node into its cluster; [`tools`] holds
//! the commands that are not a node (`hayate local`, `hayate status`).
//!
//! `hayate` with no arguments serves CQL on 127.0.0.1:9042 with its data in `./data`, a
//! cluster of one; see [`config`] for the file and the flags.

mod admin;
mod auth;
mod backup;
mod cluster;
mod config;
mod connection;
mod error;
mod logging;
mod metrics;
mod node;
mod prepared;
mod query;
mod requests;
mod roles;
mod schema;
mod snapshots;
mod system;
mod tools;
mod trace;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use hayate_cluster::batchlog::Batchlog;
use hayate_cluster::coordinator::{Coordinator, CoordinatorConfig, CoordinatorParts};
use hayate_cluster::hints::{HintStore, HintsConfig};
use hayate_cluster::node::HostId;
use hayate_storage::{Engine, SystemClock};
use tokio::net::TcpListener;

use crate::auth::{Authenticator, Authorizer, RoleStore};
use crate::cluster::ClusterNode;
use crate::config::{AuthenticatorKind, Cli, Config};
use crate::metrics::Metrics;
use crate::node::{LocalNode, Node, NodeSchemaEffects};
use crate::prepared::PreparedCache;
use crate::schema::machine::SchemaMachine;
use crate::schema::SchemaStore;

/// Log filter directives for the libraries whose routine chatter would drown the node's log.
const QUIET_LIBRARIES: &str = "openraft=error,openraft::replication=off,chitchat=error";

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(tool) = &cli.command {
        return tools::run(tool);
    }
    let config = match Config::load(&cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("hayate: {e}");
            return ExitCode::from(2);
        }
    };
    // Openraft narrates every election at info and logs an error for every heartbeat a down
    // node misses (four a second), chitchat a warning with a backtrace for every gossip round
    // a partition drops: hayate logs what those mean itself (node down, no quorum), so only
    // their other errors are kept, unless the operator names them.
    let directives = if config.log_level.contains("openraft") || config.log_level.contains("chitchat") {
        config.log_level.clone()
    } else {
        format!("{},{QUIET_LIBRARIES}", config.log_level)
    };
    // Colours only on a terminal: a log file or journal gets plain `key=value` fields. The
    // filter can be changed while the node runs (`hayate setlogginglevel`).
    logging::init(
        &directives,
        &format!("info,{QUIET_LIBRARIES}"),
        std::io::IsTerminal::is_terminal(&std::io::stderr()),
    );
    for w in &config.warnings {
        tracing::warn!("{w}");
    }
    match run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("hayate: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(config: Config) -> Result<(), String> {
    // First, so that a fault in the TLS files stops the node before it opens anything.
    let tls = connection::tls::Tls::load(&config.client_encryption)?;
    // Before the engine and the cluster: a node whose CQL port is taken (another node, another
    // cluster) stops here, before it has created a write buffer or gossiped with anyone, and
    // says so, rather than joining a cluster it can then never serve. A check, not the bind:
    // until the node serves, a connection to its CQL port is refused, which drivers and
    // readiness checks take for "not yet" (a listener would accept and then say nothing for
    // as long as a join streams).
    let addr = config.cql_address();
    std::net::TcpListener::bind(addr)
        .map_err(|e| format!("cannot listen for CQL on {addr}: {e} (is another node running there?)"))?;
    std::fs::create_dir_all(&config.data_dir).map_err(|e| {
        format!(
            "cannot create the data directory {}: {e}",
            config.data_dir.display()
        )
    })?;
    let engine = Arc::new(Engine::open(config.namespace_config()).map_err(|e| e.to_string())?);
    let local = LocalNode::load_or_create(&config.data_dir).map_err(|e| {
        format!(
            "cannot read or write {}/node.json: {e}",
            config.data_dir.display()
        )
    })?;
    let roles = Arc::new(
        RoleStore::open(
            &config.roles_path(),
            config.auth.authenticator == AuthenticatorKind::Password,
        )
        .map_err(|e| e.to_string())?,
    );
    let reads_block = !config.storage.data_in_memory && engine.read_ring().is_none();
    let service_threads = config.limits.service_threads(reads_block);
    tracing::info!(
        service_threads,
        read_page_cache = config.storage.read_page_cache,
        delta_buffer_bytes = config.storage.delta_buffer_bytes.0,
        "starting the service threads"
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .worker_threads(service_threads)
        .thread_name("hayate-service")
        .build()
        .map_err(|e| format!("cannot start the network runtime: {e}"))?;
    let node = match runtime.block_on(start(config, engine.clone(), local, roles)) {
        Ok(node) => node,
        Err(e) => {
            // A start that fails (a port taken, a join refused) leaves no write buffer behind
            // in the RAM file system.
            runtime.shutdown_timeout(Duration::from_secs(5));
            // Parts of the cluster may still hold the engine (their threads end with the
            // process): it is shut down here, which writes its open block and removes the buffer.
            engine.shutdown();
            return Err(e);
        }
    };
    drop(engine);
    let served = runtime.block_on(serve(node.clone(), tls));
    runtime.block_on(node.cluster.shutdown());
    runtime.shutdown_timeout(Duration::from_secs(5));
    // Closed whether or not it served (its CQL port taken since the check): the engine writes
    // its open block and removes its write buffer either way.
    let closed = close(node);
    served?;
    closed
}

/// Joins the cluster and builds the node.
async fn start(
    config: Config,
    engine: Arc<Engine>,
    local: LocalNode,
    roles: Arc<RoleStore>,
) -> Result<Arc<Node>, String> {
    // Device reads of one-row reads and writes go through io_uring, on this runtime.
    hayate_cluster::replica::drive_read_ring(&engine);
    let schema = Arc::new(SchemaStore::new());
    let machine = Arc::new(SchemaMachine::new(schema.clone()));
    let legacy_schema = SchemaStore::legacy_file(&config.data_dir).map_err(|e| e.to_string())?;
    let info = cluster::node_info(&config, HostId(local.host_id));
    let generation = u64::try_from(local.generation).unwrap_or(0);
    let cluster = Arc::new(
        ClusterNode::start(&config, info.clone(), generation, engine.clone(), machine.clone()).await?,
    );
    // The endpoint serves before the node has joined, so that `hayate status` and `netstats`
    // follow a join that streams for minutes. It holds the node weakly: the endpoint's thread
    // outlives the node, which shutdown must own alone to close the engine and save the index.
    let metrics = Arc::new(Metrics::new());
    let figures = Arc::new(node::figures::Figures::joining(
        &cluster,
        &engine,
        schema.clone(),
        config.cluster_name.clone(),
    ));
    if let Some(addr) = config.metrics_address() {
        let server = metrics::serve(addr, metrics.clone(), figures.clone())
            .map_err(|e| format!("cannot serve metrics on {addr}: {e}"))?;
        tracing::info!("metrics on http://{}/metrics", server.local_addr);
    }
    let seeds = config.cluster.seed_addresses(config.storage_address())?;
    let had_legacy = legacy_schema.is_some();
    cluster::join::join(
        &cluster,
        &seeds,
        config.cluster.num_tokens as usize,
        Duration::from_millis(config.cluster.formation_wait_ms),
        legacy_schema,
        config.cluster.replace_address,
    )
    .await?;
    if had_legacy {
        let from = config.data_dir.join(schema::store::LEGACY_SCHEMA_FILE);
        let to = from.with_extension("json.imported");
        if let Err(e) = std::fs::rename(&from, &to) {
            tracing::warn!("could not rename {} after importing it: {e}", from.display());
        }
    }
    // Rows of tables dropped (or truncated) while this node was down, or before a restart,
    // come back with the cold start: forget them again. A drop this node applied only now (it
    // was down when the cluster agreed it) gets its automatic snapshot first, as it would have.
    let live = schema.live_table_ids();
    let early_drops = machine.take_early_drops();
    for id in engine.table_ids() {
        // A table's Paxos state lives as long as the table.
        let owner = hayate_cluster::paxos::table_of_state(id).unwrap_or(id);
        if !live.contains(&owner) {
            if let Some(d) = early_drops.iter().find(|d| d.table == id) {
                if config.storage.auto_snapshot {
                    snapshots::before_drop(&engine, &d.keyspace, &d.was, d.truncated, d.index);
                }
            }
            let rows = engine.drop_table(id);
            tracing::info!(table_id = id, rows, "forgot the rows of a dropped table");
        }
    }
    let hints = Arc::new(
        HintStore::open(
            &config.data_dir.join("hints"),
            HintsConfig {
                target_bytes_max: config.cluster.max_hints_size_per_host_bytes.0,
                ..HintsConfig::default()
            },
        )
        .map_err(|e| e.to_string())?,
    );
    let (batchlog, unfinished_batches) =
        Batchlog::open(&config.data_dir.join("batchlog"), config.storage.commit_to_device)
            .map_err(|e| e.to_string())?;
    let coordinator = Arc::new(Coordinator::new(CoordinatorParts {
        local: info.host_id,
        placement: info.placement.clone(),
        replica: engine.clone(),
        clock: Arc::new(SystemClock),
        messaging: Some(cluster.messaging.clone()),
        liveness: cluster.liveness.clone(),
        hints: Some(hints.clone()),
        config: CoordinatorConfig {
            write_timeout: config.cluster.write_timeout(),
            read_timeout: config.cluster.read_timeout(),
            range_timeout: config.cluster.range_timeout(),
            cas_contention_timeout: config.cluster.cas_contention_timeout(),
            max_hint_window: Duration::from_millis(config.cluster.max_hint_window_ms),
            hint_replay_bytes_per_s: config.cluster.hinted_handoff_throttle_bytes.0,
        },
    }));
    if let Some(topology) = node::tasks::topology_of(&cluster.metadata.current()) {
        coordinator.set_topology(topology);
    }
    cluster.topology.set_coordinator(&coordinator);
    let schema_log = Arc::new(cluster.metadata.clone());
    let authorizer = Authorizer::open(config.auth.authorizer, roles.clone(), &config.permissions_path())
        .map_err(|e| e.to_string())?;
    let node = Arc::new(Node {
        auth: Authenticator::new(config.auth.authenticator, roles.clone()),
        authorizer,
        engine,
        coordinator,
        cluster,
        hints,
        batchlog: Arc::new(batchlog),
        schema,
        schema_log,
        prepared: PreparedCache::default(),
        metrics: metrics.clone(),
        events: node::event_channel(),
        traces: trace::TraceStore::default(),
        connected: Default::default(),
        local,
        config,
        stopping: tokio::sync::Notify::new(),
        runtime: tokio::runtime::Handle::current(),
        drained: std::sync::atomic::AtomicBool::new(false),
    });
    machine.set_effects(Arc::new(NodeSchemaEffects(Arc::downgrade(&node))));
    node.apply_table_settings();
    node.cluster
        .membership
        .set_schema_version(node.schema.current().version);
    // At once, not at the first publish round: `hayate status` on another node shows this
    // node's load from its first seconds rather than `?`.
    node.cluster.membership.set_load(node.engine.stats().live_bytes);
    if !unfinished_batches.is_empty() {
        // Before clients connect: a reader after a restart sees all of each batch or none.
        let count = unfinished_batches.len();
        let applied = query::batchlog::replay(
            &node.batchlog,
            unfinished_batches,
            &node.coordinator,
            &node.schema.current(),
        )
        .await;
        tracing::info!("applied {applied} of {count} logged batches a crash interrupted");
    }
    node::tasks::spawn(&node);
    cluster::operations::resume(&node);
    figures.serving(&node);
    Ok(node)
}

/// Closes the storage engine, saving the index for a fast restart, once nothing else holds it.
fn close(node: Arc<Node>) -> Result<(), String> {
    node.cluster.messaging.close();
    node.cluster.service.close();
    match Arc::try_unwrap(node).map(|node| {
        drop(node.coordinator);
        drop(node.cluster);
        Arc::try_unwrap(node.engine)
    }) {
        Ok(Ok(engine)) => engine
            .close()
            .map_err(|e| format!("closing the storage engine failed: {e}"))?,
        Ok(Err(engine)) => {
            tracing::warn!(
                "the storage engine was still in use at shutdown; syncing without an index snapshot"
            );
            engine
                .sync()
                .map_err(|e| format!("syncing the storage engine failed: {e}"))?;
        }
        Err(node) => {
            // A request still running on the blocking pool holds the node: sync what was
            // written instead of closing (the next start scans the device, as after a crash).
            tracing::warn!("requests were still running at shutdown; syncing without an index snapshot");
            node.engine
                .sync()
                .map_err(|e| format!("syncing the storage engine failed: {e}"))?;
        }
    }
    tracing::info!("stopped cleanly");
    Ok(())
}

/// Accepts connections until SIGTERM or SIGINT.
async fn serve(node: Arc<Node>, tls: Option<connection::tls::Tls>) -> Result<(), String> {
    use tokio::signal::unix::{signal, SignalKind};
    let addr = node.config.cql_address();
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen for CQL on {addr}: {e} (is another node running there?)"))?;
    tracing::info!(
        "hayate {} listening for CQL clients on {} (data in {})",
        env!("CARGO_PKG_VERSION"),
        listener.local_addr().map_or(addr, |a| a),
        node.config.data_dir.display()
    );
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
    let max_connections = node.config.limits.max_connections as usize;
    let connections = Arc::new(tokio::sync::Semaphore::new(max_connections));
    let clients = Arc::new(connection::Clients::new(&node, tls));
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!("accept failed: {e}");
                        continue;
                    }
                };
                let Ok(permit) = connections.clone().try_acquire_owned() else {
                    tracing::warn!(%peer, "refusing a connection: {max_connections} are open (limits.max_connections)");
                    drop(stream);
                    continue;
                };
                let node = node.clone();
                let clients = clients.clone();
                tasks.spawn(async move {
                    connection::serve(node, clients, stream, peer).await;
                    drop(permit);
                });
            }
            _ = term.recv() => { tracing::info!("SIGTERM: shutting down"); break; }
            _ = node.stopping.notified() => { tracing::info!("shutting down"); break; }
            _ = int.recv() => { tracing::info!("SIGINT: shutting down"); break; }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    drop(listener);
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    Ok(())
}
