//! The node's configuration: a TOML file, then command-line flags on top, then validation.
//!
//! Every setting has a default, so `hayate` with no arguments starts a usable single node that
//! keeps its data under `./data`. The file is read with unknown keys refused: a misspelt key
//! (`comit_to_device`) would otherwise be ignored silently and the node would run with a
//! setting the operator believes they changed. Every key, with its default, is documented in
//! `hayate.toml.example` at the root of the repository.
//!
//! The storage defaults are the storage engine's (see `hayate_storage::config`), which follow
//! Aerospike's; the network and auth defaults follow Cassandra's `cassandra.yaml`.
//!
//! This file holds the settings and their defaults; `load.rs` reads the file and the flags,
//! `validate.rs` checks the ranges, `byte_size.rs` parses sizes, `error.rs` says what to fix;
//! the sections of their own are `cluster.rs`, `client_encryption.rs`, `guardrails.rs` and
//! `settings.rs`.
//!
//! Files under `data_dir`:
//!
//! ```text
//! <data_dir>/hayate.dat     the device file, when [storage] lists no devices
//! <data_dir>/hayate.index   the index snapshot a clean shutdown writes, for a fast restart
//! <data_dir>/roles.json     roles and password hashes (see `auth::roles`)
//! <data_dir>/snapshots/     snapshots: pinned index entries and manifests (`docs/snapshots.md`)
//! <data_dir>/restore-progress.json
//!                           where an interrupted restore goes on from (`snapshots::resume`)
//! ```

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use clap::Parser;
use serde::Deserialize;

use hayate_storage::config::BLOCK_SIZE_MAX_BYTES;
use hayate_storage::{DeviceConfig, NamespaceConfig};

mod byte_size;
mod client_encryption;
mod cluster;
mod error;
pub mod guardrails;
mod load;
mod settings;
mod validate;

pub use byte_size::ByteSize;
pub use client_encryption::{ClientEncryptionConfig, TlsMode};
pub use cluster::ClusterConfig;
pub use error::ConfigError;
pub use guardrails::GuardrailsConfig;

/// The storage engine namespace the node keeps all tables in; it names the default device
/// file and the index snapshot (`hayate.dat`, `hayate.index`).
pub const NAMESPACE_NAME: &str = "hayate";

/// The file, under `data_dir`, that holds roles and their password hashes.
pub const ROLES_FILE_NAME: &str = "roles.json";
/// The permissions GRANT gives, beside the roles file.
pub const PERMISSIONS_FILE_NAME: &str = "permissions.json";

/// The smallest frame limit we accept: below this even a routine prepared statement or a
/// schema query result would not fit, and drivers would fail in confusing ways.
pub const MAX_FRAME_MIN_BYTES: u64 = 64 << 10;

/// A v4 stream id is a signed 16-bit number and clients use only the non-negative ones, so no
/// connection can have more requests in flight than this.
pub const REQUESTS_IN_FLIGHT_PER_CONNECTION_MAX: u32 = 32_768;

/// The default of `limits.max_request_data_in_flight`.
pub const REQUEST_DATA_IN_FLIGHT_DEFAULT_BYTES: u64 = 256 << 20;
/// The default of `limits.max_request_data_in_flight_per_ip`.
pub const REQUEST_DATA_IN_FLIGHT_PER_IP_DEFAULT_BYTES: u64 = 64 << 20;
/// The smallest request data limit accepted: below it, routine requests of a driver's
/// connection setup would already count as overload.
pub const REQUEST_DATA_IN_FLIGHT_MIN_BYTES: u64 = 1 << 10;

/// A bound on connections that still leaves room for file descriptors of the devices.
pub const CONNECTIONS_MAX: u32 = 1 << 20;
/// An upper bound on `limits.service_threads`: each is an OS thread with its own stack.
pub const SERVICE_THREADS_MAX: u32 = 1024;
const SERVICE_THREADS_PER_CORE_ON_DEVICE: usize = 5;

/// A config file larger than this is not a config file (a mistyped path to a data file).
const CONFIG_FILE_MAX_BYTES: u64 = 1 << 20;

/// The command line. Every flag overrides the same setting in the file.
#[derive(Debug, Clone, Default, Parser)]
#[command(
    name = "hayate",
    version,
    about = "A database node with an Aerospike-style storage engine that speaks Cassandra's CQL"
)]
pub struct Cli {
    /// Without a command, `hayate` runs a node.
    #[command(subcommand)]
    pub command: Option<crate::tools::Tool>,
    /// A TOML configuration file (see hayate.toml.example); without it every setting has its
    /// default.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where the device file, the index snapshot and the roles file live.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// The address the CQL port listens on.
    #[arg(long, value_name = "IP")]
    pub listen_address: Option<IpAddr>,
    /// The CQL native protocol port (0 picks a free port, for tests).
    #[arg(long, value_name = "PORT")]
    pub cql_port: Option<u16>,
    /// Acknowledge writes only once they are durable on the device.
    #[arg(long)]
    pub commit_to_device: bool,
    /// The Prometheus metrics port (0 disables the endpoint).
    #[arg(long, value_name = "PORT")]
    pub metrics_port: Option<u16>,
    /// A tracing filter: a level (error, warn, info, debug, trace) or directives such as
    /// "info,hayate_storage=debug".
    #[arg(long, value_name = "LEVEL")]
    pub log_level: Option<String>,
    /// Seed nodes to find the cluster through, comma-separated (`[cluster] seeds`).
    #[arg(long, value_name = "IP[:PORT],...", value_delimiter = ',')]
    pub seeds: Option<Vec<String>>,
    /// The internode port on the listen address (`[cluster] storage_port`).
    #[arg(long, value_name = "PORT")]
    pub storage_port: Option<u16>,
    /// This node's data center, as NetworkTopologyStrategy counts replicas per data center
    /// (`[cluster] data_center`; `datacenter1` by default).
    #[arg(long, value_name = "NAME")]
    pub data_center: Option<String>,
    /// This node's rack within its data center: replicas of a range go to distinct racks where
    /// there are enough (`[cluster] rack`; `rack1` by default).
    #[arg(long, value_name = "NAME")]
    pub rack: Option<String>,
    /// How many tokens this node takes on the ring when it first joins (`[cluster] num_tokens`;
    /// more tokens spread ranges more evenly; ignored after the first start).
    #[arg(long, value_name = "N")]
    pub num_tokens: Option<u32>,
    /// The cluster this node belongs to (`cluster_name`): it refuses gossip, connections and
    /// joins from nodes of any other name, so unrelated nodes never merge.
    #[arg(long, value_name = "NAME")]
    pub cluster_name: Option<String>,
    /// Start as the replacement of the dead node at this address: take its tokens and stream
    /// its data from the other replicas (`[cluster] replace_address`; first start only).
    #[arg(long, value_name = "IP")]
    pub replace_address: Option<IpAddr>,
    /// The size of each device file (`[storage] device_size`), e.g. `256MiB`.
    #[arg(long, value_name = "SIZE", value_parser = ByteSize::parse)]
    pub device_size: Option<ByteSize>,
}

/// Everything the node is configured with, defaults filled in.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Reported in `system.local` and to drivers; has no effect on a single node.
    pub cluster_name: String,
    pub listen_address: IpAddr,
    pub cql_port: u16,
    pub data_dir: PathBuf,
    /// A tracing filter, as `--log-level`.
    pub log_level: String,
    pub storage: StorageConfig,
    pub limits: LimitsConfig,
    pub auth: AuthConfig,
    pub metrics: MetricsConfig,
    pub cluster: ClusterConfig,
    pub client_encryption: ClientEncryptionConfig,
    pub guardrails: GuardrailsConfig,
    pub backup: BackupConfig,
    /// The file the settings came from, for messages; `None` for the embedded defaults.
    #[serde(skip)]
    pub source: Option<PathBuf>,
    /// Settings `load` adjusted on its own, for the caller to log once logging is set up
    /// (the log level is itself a setting, so `load` cannot log them).
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// The `[storage]` section: the engine's namespace.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    /// Files or raw block devices that hold the records. Empty means one file,
    /// `<data_dir>/hayate.dat`, of `device_size`.
    pub devices: Vec<DeviceEntry>,
    /// The size of the default device file (and of listed files that give no size).
    #[serde(rename = "device_size")]
    pub device_size_bytes: ByteSize,
    /// The unit the engine writes and defragments: a power of two from 128KiB to 8MiB.
    #[serde(rename = "write_block_size")]
    pub write_block_size_bytes: ByteSize,
    /// Acknowledge a write only once it is on the device (group commit). Off, a write is
    /// acknowledged once it is in the open write block and its copy in the write buffer: a
    /// process crash loses nothing, and a power failure up to `flush_interval_ms` of
    /// acknowledged writes (Aerospike's default; Cassandra's periodic commit log sync allows
    /// 10 s).
    pub commit_to_device: bool,
    /// A directory on a RAM file system for the write buffer, the copy of blocks not yet on the
    /// device that the next start replays after a process crash. Empty goes without it (a
    /// process crash may then lose up to `flush_interval_ms` of acknowledged writes).
    pub write_buffer_dir: PathBuf,
    /// Write blocks the buffer holds: how many may wait for the device before writes wait.
    pub write_buffer_blocks: u32,
    /// Read records from the device through io_uring, in batches, without a service thread
    /// waiting on each read. Off (or where the kernel refuses io_uring) every device read is a
    /// blocking `pread`, and there are five service threads per core.
    pub io_uring: bool,
    /// Read records through the page cache (Aerospike's `read-page-cache`), so memory the node
    /// leaves unused holds recently read pages; writes and block reads stay direct.
    pub read_page_cache: bool,
    pub flush_interval_ms: u64,
    /// RAM for recently written blocks, so fresh records are read without a device read.
    #[serde(rename = "post_write_cache")]
    pub post_write_cache_bytes: ByteSize,
    /// RAM for updates written without reading their row (deltas): an update that only sets
    /// cells is appended as a delta and its cells kept here until the row is next read or
    /// defragmented, when it is written whole again. "0" turns this off: every update then
    /// reads its row first.
    #[serde(rename = "delta_buffer")]
    pub delta_buffer_bytes: ByteSize,
    /// Keep every block in RAM as well as on the device, so reads never touch the device.
    pub data_in_memory: bool,
    /// Blocks less than this percent live are defragmented.
    pub defrag_lwm_pct: u32,
    /// Pause after each defragmented block, keeping its cost to client traffic flat.
    pub defrag_sleep_us: u64,
    /// Writes fail once fewer than this percent of blocks are free; the rest is
    /// defragmentation's reserve.
    pub stop_writes_free_pct: u32,
    /// How long a tombstone outlives its deletion in a table that sets no `gc_grace_seconds`.
    pub tombstone_grace_s: u32,
    /// How often the background pass that removes expired records walks the index.
    pub expiry_period_ms: u64,
    /// Open devices with `O_DIRECT`. tmpfs refuses it; `load` turns it off there by itself.
    pub direct_io: bool,
    /// Save the index on clean shutdown (`<data_dir>/hayate.index`) for a fast restart.
    pub index_snapshot: bool,
    /// Take a snapshot of a table (`<data_dir>/snapshots/dropped-<n>-...` or `truncated-...`)
    /// before DROP TABLE, DROP KEYSPACE or TRUNCATE forgets its rows, as Cassandra's
    /// `auto_snapshot` (on by default there too). Off, those statements lose the rows for good.
    pub auto_snapshot: bool,
}

/// One entry of `[[storage.devices]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceEntry {
    pub path: PathBuf,
    /// The size of a file to create; ignored for a raw block device. Defaults to
    /// `storage.device_size`.
    #[serde(default, rename = "size")]
    pub size_bytes: Option<ByteSize>,
}

/// The `[limits]` section: what one client may make the node hold.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// The largest frame body accepted, at most the protocol layer's 16MiB.
    pub max_frame_bytes: ByteSize,
    pub max_connections: u32,
    /// Requests a connection may have outstanding before the node stops reading from it.
    pub max_requests_in_flight_per_connection: u32,
    /// Threads that read sockets and run requests to completion, device reads included, as
    /// Aerospike's service threads; 0 picks [`LimitsConfig::service_threads`]'s default.
    pub service_threads: u32,
    /// Bytes of request bodies the whole node may hold while their requests run, as
    /// Cassandra's `native_transport_max_request_data_in_flight`.
    #[serde(rename = "max_request_data_in_flight")]
    pub max_request_data_in_flight_bytes: ByteSize,
    /// The same, for the connections of one client address, as Cassandra's
    /// `native_transport_max_request_data_in_flight_per_ip`.
    #[serde(rename = "max_request_data_in_flight_per_ip")]
    pub max_request_data_in_flight_per_ip_bytes: ByteSize,
}

impl LimitsConfig {
    /// The service threads to start. One per core when no request blocks its thread on the
    /// device: every block is in RAM, or the engine reads ahead through io_uring (one-row
    /// reads and writes await their device reads, and partition and range walks go to the
    /// blocking pool). Otherwise a request that reads the device blocks its thread for the
    /// device's latency, so there are five per core (Aerospike's default for SSD namespaces),
    /// enough to keep the device's queue full.
    pub fn service_threads(&self, reads_block: bool) -> usize {
        if self.service_threads != 0 {
            return self.service_threads as usize;
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if reads_block {
            cores * SERVICE_THREADS_PER_CORE_ON_DEVICE
        } else {
            cores
        }
    }
}

/// The `[auth]` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    pub authenticator: AuthenticatorKind,
    pub authorizer: AuthorizerKind,
}

/// Cassandra's two built-in authorizers, by the names `cassandra.yaml` uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum AuthorizerKind {
    /// Every role may do everything but manage roles; GRANT, REVOKE and LIST PERMISSIONS are
    /// refused.
    #[default]
    #[serde(
        rename = "AllowAllAuthorizer",
        alias = "org.apache.cassandra.auth.AllowAllAuthorizer"
    )]
    AllowAll,
    /// Permissions granted with GRANT, kept in the permissions file beside the roles file.
    #[serde(
        rename = "CassandraAuthorizer",
        alias = "org.apache.cassandra.auth.CassandraAuthorizer"
    )]
    Cassandra,
}

/// Cassandra's two built-in authenticators, by the names `cassandra.yaml` uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum AuthenticatorKind {
    /// No authentication: every connection is the anonymous user.
    #[default]
    #[serde(
        rename = "AllowAllAuthenticator",
        alias = "org.apache.cassandra.auth.AllowAllAuthenticator"
    )]
    AllowAll,
    /// Username and password, checked against the roles file.
    #[serde(
        rename = "PasswordAuthenticator",
        alias = "org.apache.cassandra.auth.PasswordAuthenticator"
    )]
    Password,
}

/// The `[backup]` section: where `hayate backup --to s3://...` finds its object store. Unset,
/// each is taken from the node's environment, as AWS's own tools do (`AWS_ENDPOINT_URL`,
/// `AWS_REGION`); credentials are only ever taken from there (`backup/store.rs`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BackupConfig {
    /// An S3-compatible store's URL (`http://` is allowed), instead of Amazon's.
    pub s3_endpoint: Option<String>,
    pub s3_region: Option<String>,
}

/// The `[metrics]` section: the Prometheus endpoint.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// Unset: the node's own listen address, so that nodes on 127.0.0.x do not collide.
    pub listen_address: Option<IpAddr>,
    /// 0 disables the endpoint.
    pub port: u16,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            cluster_name: "hayate".to_string(),
            listen_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            cql_port: 9042,
            data_dir: PathBuf::from("./data"),
            log_level: "info".to_string(),
            storage: StorageConfig::default(),
            limits: LimitsConfig::default(),
            auth: AuthConfig::default(),
            metrics: MetricsConfig::default(),
            cluster: ClusterConfig::default(),
            client_encryption: ClientEncryptionConfig::default(),
            guardrails: GuardrailsConfig::default(),
            backup: BackupConfig::default(),
            source: None,
            warnings: Vec::new(),
        }
    }
}

impl Default for StorageConfig {
    fn default() -> StorageConfig {
        // The engine's own defaults, so that the two cannot drift apart.
        let engine = NamespaceConfig::in_memory(NAMESPACE_NAME, 0);
        StorageConfig {
            devices: Vec::new(),
            device_size_bytes: ByteSize(4 << 30),
            write_block_size_bytes: ByteSize(engine.block_size_bytes.into()),
            commit_to_device: engine.commit_to_device,
            write_buffer_dir: PathBuf::from(hayate_storage::config::WRITE_BUFFER_DIR_DEFAULT),
            write_buffer_blocks: engine.write_buffer_blocks,
            io_uring: engine.io_uring,
            read_page_cache: engine.read_page_cache,
            flush_interval_ms: engine.flush_interval_ms,
            post_write_cache_bytes: ByteSize(engine.post_write_cache_bytes),
            delta_buffer_bytes: ByteSize(engine.delta_buffer_bytes),
            data_in_memory: false,
            defrag_lwm_pct: engine.defrag_lwm_pct,
            defrag_sleep_us: engine.defrag_sleep_us,
            stop_writes_free_pct: engine.stop_writes_free_pct,
            tombstone_grace_s: engine.tombstone_grace_s,
            expiry_period_ms: engine.expiry_period_ms,
            direct_io: engine.direct_io,
            index_snapshot: true,
            auto_snapshot: true,
        }
    }
}

impl Default for LimitsConfig {
    fn default() -> LimitsConfig {
        LimitsConfig {
            max_frame_bytes: ByteSize(hayate_cql::frame::FRAME_BODY_MAX_BYTES.into()),
            max_connections: 1024,
            max_requests_in_flight_per_connection: 1024,
            service_threads: 0,
            // Cassandra's defaults are a tenth and a fortieth of its heap; these are those of a
            // 2.5 GiB heap, fixed so that a node's limits do not change with the machine. They
            // keep Cassandra's four-to-one ratio, so that one client address cannot take the
            // whole node's allowance.
            max_request_data_in_flight_bytes: ByteSize(REQUEST_DATA_IN_FLIGHT_DEFAULT_BYTES),
            max_request_data_in_flight_per_ip_bytes: ByteSize(REQUEST_DATA_IN_FLIGHT_PER_IP_DEFAULT_BYTES),
        }
    }
}

impl Default for AuthConfig {
    fn default() -> AuthConfig {
        AuthConfig {
            authenticator: AuthenticatorKind::AllowAll,
            authorizer: AuthorizerKind::AllowAll,
        }
    }
}

impl Default for MetricsConfig {
    fn default() -> MetricsConfig {
        MetricsConfig {
            listen_address: None,
            port: 9180,
        }
    }
}

impl Config {
    /// The address drivers connect to.
    pub fn cql_address(&self) -> SocketAddr {
        SocketAddr::new(self.listen_address, self.cql_port)
    }

    fn metrics_listen_address(&self) -> IpAddr {
        self.metrics.listen_address.unwrap_or(self.listen_address)
    }

    /// The metrics endpoint's address, or `None` when it is disabled.
    pub fn metrics_address(&self) -> Option<SocketAddr> {
        (self.metrics.port != 0).then(|| SocketAddr::new(self.metrics_listen_address(), self.metrics.port))
    }

    /// The internode address (TCP messages, UDP gossip).
    pub fn storage_address(&self) -> SocketAddr {
        SocketAddr::new(self.listen_address, self.cluster.storage_port)
    }

    /// Where roles and their password hashes are kept.
    pub fn roles_path(&self) -> PathBuf {
        self.data_dir.join(ROLES_FILE_NAME)
    }

    /// Where the permissions granted to roles are kept.
    pub fn permissions_path(&self) -> PathBuf {
        self.data_dir.join(PERMISSIONS_FILE_NAME)
    }

    /// The storage engine's configuration for the node's one namespace.
    pub fn namespace_config(&self) -> NamespaceConfig {
        let s = &self.storage;
        let mut ns = NamespaceConfig::with_file(NAMESPACE_NAME, &self.data_dir, s.device_size_bytes.0);
        if !s.devices.is_empty() {
            ns.devices = s
                .devices
                .iter()
                .map(|d| DeviceConfig {
                    path: d.path.clone(),
                    size_bytes: d.size_bytes.unwrap_or(s.device_size_bytes).0,
                })
                .collect();
        }
        // `validate` kept the block size within the engine's range, which fits a u32.
        ns.block_size_bytes = u32::try_from(s.write_block_size_bytes.0).unwrap_or(BLOCK_SIZE_MAX_BYTES);
        ns.data_in_memory = s.data_in_memory;
        ns.flush_interval_ms = s.flush_interval_ms;
        ns.commit_to_device = s.commit_to_device;
        ns.write_buffer_dir =
            (!s.write_buffer_dir.as_os_str().is_empty()).then(|| s.write_buffer_dir.clone());
        ns.write_buffer_blocks = s.write_buffer_blocks;
        ns.io_uring = s.io_uring;
        ns.read_page_cache = s.read_page_cache;
        ns.post_write_cache_bytes = s.post_write_cache_bytes.0;
        ns.delta_buffer_bytes = s.delta_buffer_bytes.0;
        ns.defrag_lwm_pct = s.defrag_lwm_pct;
        ns.defrag_sleep_us = s.defrag_sleep_us;
        ns.stop_writes_free_pct = s.stop_writes_free_pct;
        ns.tombstone_grace_s = s.tombstone_grace_s;
        ns.expiry_period_ms = s.expiry_period_ms;
        ns.direct_io = s.direct_io;
        ns.index_snapshot_path = s
            .index_snapshot
            .then(|| self.data_dir.join(format!("{NAMESPACE_NAME}.index")));
        ns
    }
}

#[cfg(test)]
mod tests;
