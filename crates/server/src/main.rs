//! The `hayate` node: a CQL server over the hybrid-memory storage engine.
//!
//! The path of a request through this crate: [`connection`] (socket → frames) →
//! [`requests`] (one file per opcode) → [`query`] (statement → key ranges and row updates,
//! against the [`schema`]) → `hayate_storage::Engine`. Built-in tables come from [`system`],
//! schema and role statements go through [`admin`] and [`roles`].
//!
//! `hayate` with no arguments serves CQL on 127.0.0.1:9042 with its data in `./data`; see
//! [`config`] for the file and the flags.

mod admin;
mod auth;
mod config;
mod connection;
mod error;
mod metrics;
mod node;
mod prepared;
mod query;
mod requests;
mod roles;
mod schema;
mod system;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use hayate_cluster::coordinator::Coordinator;
use hayate_cluster::node::HostId;
use hayate_storage::SystemClock;
use tokio::net::TcpListener;

use crate::auth::{Authenticator, RoleStore};
use crate::config::{AuthenticatorKind, Cli, Config};
use crate::metrics::Metrics;
use crate::node::{LocalNode, Node};
use crate::prepared::PreparedCache;
use crate::schema::SchemaStore;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = match Config::load(&cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("hayate: {e}");
            return ExitCode::from(2);
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&config.log_level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
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
    std::fs::create_dir_all(&config.data_dir).map_err(|e| {
        format!(
            "cannot create the data directory {}: {e}",
            config.data_dir.display()
        )
    })?;
    let engine = hayate_storage::Engine::open(config.namespace_config()).map_err(|e| e.to_string())?;
    let schema = SchemaStore::open(&config.data_dir).map_err(|e| e.to_string())?;
    // Rows of tables dropped (or truncated) before a restart come back with the cold start:
    // forget them again.
    let live = schema.live_table_ids();
    for id in engine.table_ids() {
        if !live.contains(&id) {
            let rows = engine.drop_table(id);
            tracing::info!(table_id = id, rows, "forgot the rows of a dropped table");
        }
    }
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
    let metrics = Arc::new(Metrics::new());
    let engine = Arc::new(engine);
    let coordinator = Coordinator::single_node(
        HostId(local.host_id),
        node::DATA_CENTER,
        engine.clone(),
        Arc::new(SystemClock),
    );
    let node = Arc::new(Node {
        auth: Authenticator::new(config.auth.authenticator, roles.clone()),
        roles,
        engine,
        coordinator,
        schema,
        prepared: PreparedCache::default(),
        metrics: metrics.clone(),
        events: node::event_channel(),
        local,
        config,
    });
    if let Some(addr) = node.config.metrics_address() {
        // A weak reference: the endpoint's thread outlives the node, which shutdown must own
        // alone to close the engine and save the index.
        let n = Arc::downgrade(&node);
        let server = metrics::serve(addr, metrics, move || {
            n.upgrade().map(|n| n.engine.stats()).unwrap_or_default()
        })
        .map_err(|e| format!("cannot serve metrics on {addr}: {e}"))?;
        tracing::info!("metrics on http://{}/metrics", server.local_addr);
    }

    let service_threads = node
        .config
        .limits
        .service_threads(node.config.storage.data_in_memory);
    tracing::info!(service_threads, "starting the service threads");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .worker_threads(service_threads)
        .thread_name("hayate-service")
        .build()
        .map_err(|e| format!("cannot start the network runtime: {e}"))?;
    runtime.block_on(serve(node.clone()))?;
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));

    match Arc::try_unwrap(node).map(|node| {
        drop(node.coordinator);
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
async fn serve(node: Arc<Node>) -> Result<(), String> {
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
                tasks.spawn(async move {
                    connection::serve(node, stream, peer).await;
                    drop(permit);
                });
            }
            _ = term.recv() => { tracing::info!("SIGTERM: shutting down"); break; }
            _ = int.recv() => { tracing::info!("SIGINT: shutting down"); break; }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    drop(listener);
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    Ok(())
}
