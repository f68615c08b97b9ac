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

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use clap::Parser;
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use hayate_storage::config::{BLOCK_SIZE_MAX_BYTES, BLOCK_SIZE_MIN_BYTES};
use hayate_storage::{DeviceConfig, NamespaceConfig};

mod client_encryption;
mod cluster;
pub mod guardrails;
mod settings;

pub use client_encryption::{ClientEncryptionConfig, TlsMode};
pub use cluster::ClusterConfig;
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
    /// Reads the file `--config` names, if any, applies the flags on top and validates the
    /// result. A relative `data_dir` stays relative to the working directory, as the flag's.
    pub fn load(cli: &Cli) -> Result<Config, ConfigError> {
        let mut config = match &cli.config {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        config.apply_flags(cli);
        config.validate()?;
        config.disable_direct_io_on_tmpfs();
        Ok(config)
    }

    /// Parses TOML text; `source` is only used in messages.
    pub fn from_toml(text: &str, source: Option<&Path>) -> Result<Config, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: source.map(Path::to_path_buf),
            message: e.to_string(),
        })?;
        config.source = source.map(Path::to_path_buf);
        Ok(config)
    }

    fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let read_error = |source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        };
        let len_bytes = std::fs::metadata(path).map_err(read_error)?.len();
        if len_bytes > CONFIG_FILE_MAX_BYTES {
            return Err(ConfigError::TooLarge {
                path: path.to_path_buf(),
                len_bytes,
            });
        }
        let text = std::fs::read_to_string(path).map_err(read_error)?;
        Config::from_toml(&text, Some(path))
    }

    fn apply_flags(&mut self, cli: &Cli) {
        if let Some(name) = &cli.cluster_name {
            self.cluster_name = name.clone();
        }
        if let Some(dir) = &cli.data_dir {
            self.data_dir = dir.clone();
        }
        if let Some(address) = cli.listen_address {
            self.listen_address = address;
        }
        if let Some(port) = cli.cql_port {
            self.cql_port = port;
        }
        // A switch can only turn the setting on; the file is the place to turn it off.
        if cli.commit_to_device {
            self.storage.commit_to_device = true;
        }
        if let Some(port) = cli.metrics_port {
            self.metrics.port = port;
        }
        if let Some(level) = &cli.log_level {
            self.log_level = level.clone();
        }
        if let Some(seeds) = &cli.seeds {
            self.cluster.seeds = seeds.clone();
        }
        if let Some(port) = cli.storage_port {
            self.cluster.storage_port = port;
        }
        if let Some(dc) = &cli.data_center {
            self.cluster.data_center = dc.clone();
        }
        if let Some(rack) = &cli.rack {
            self.cluster.rack = rack.clone();
        }
        if let Some(n) = cli.num_tokens {
            self.cluster.num_tokens = n;
        }
        if let Some(ip) = cli.replace_address {
            self.cluster.replace_address = Some(ip);
        }
        if let Some(size) = cli.device_size {
            self.storage.device_size_bytes = size;
        }
    }

    /// Checks every range the engine and the server rely on, naming the key in the message.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &'static str, value: String, reason: String| ConfigError::Invalid {
            path: self.source.clone(),
            key,
            value,
            reason,
        };
        if self.cluster_name.is_empty() {
            return Err(invalid("cluster_name", "\"\"".into(), "must not be empty".into()));
        }
        if self.data_dir.as_os_str().is_empty() {
            return Err(invalid(
                "data_dir",
                "\"\"".into(),
                "must name a directory (\".\" for the working directory)".into(),
            ));
        }
        // Cassandra refuses to start with this pair: permissions need a logged-in role.
        if self.auth.authorizer == AuthorizerKind::Cassandra
            && self.auth.authenticator == AuthenticatorKind::AllowAll
        {
            return Err(invalid(
                "auth.authorizer",
                "\"CassandraAuthorizer\"".into(),
                "AllowAllAuthenticator can't be used with CassandraAuthorizer: set authenticator = \"PasswordAuthenticator\"".into(),
            ));
        }
        if self.log_level.trim().is_empty() {
            return Err(invalid(
                "log_level",
                "\"\"".into(),
                "must be a level such as \"info\" or a filter such as \"info,hayate_storage=debug\"".into(),
            ));
        }

        let s = &self.storage;
        let block_bytes = s.write_block_size_bytes.0;
        if !(u64::from(BLOCK_SIZE_MIN_BYTES)..=u64::from(BLOCK_SIZE_MAX_BYTES)).contains(&block_bytes)
            || !block_bytes.is_power_of_two()
        {
            return Err(invalid(
                "storage.write_block_size",
                s.write_block_size_bytes.to_string(),
                format!(
                    "must be a power of two from {} to {} (1MiB suits most devices)",
                    ByteSize(BLOCK_SIZE_MIN_BYTES.into()),
                    ByteSize(BLOCK_SIZE_MAX_BYTES.into())
                ),
            ));
        }
        // The engine needs at least four write blocks in all: one being filled, one being
        // defragmented into, and room to free one.
        let device_min_bytes = 4 * block_bytes;
        if s.devices.is_empty() && s.device_size_bytes.0 < device_min_bytes {
            return Err(invalid(
                "storage.device_size",
                s.device_size_bytes.to_string(),
                format!(
                    "must hold at least four write blocks ({})",
                    ByteSize(device_min_bytes)
                ),
            ));
        }
        for (i, device) in s.devices.iter().enumerate() {
            if device.path.as_os_str().is_empty() {
                return Err(invalid(
                    "storage.devices.path",
                    format!("\"\" (device {})", i + 1),
                    "must name a file or a block device".into(),
                ));
            }
            let size = device.size_bytes.unwrap_or(s.device_size_bytes);
            if size.0 < block_bytes {
                return Err(invalid(
                    "storage.devices.size",
                    format!("{size} (device {})", device.path.display()),
                    format!("must hold at least one write block ({})", ByteSize(block_bytes)),
                ));
            }
        }
        if !(1..=99).contains(&s.defrag_lwm_pct) {
            return Err(invalid(
                "storage.defrag_lwm_pct",
                s.defrag_lwm_pct.to_string(),
                "must be a percentage from 1 to 99 (50 is the default)".into(),
            ));
        }
        if s.stop_writes_free_pct > 50 {
            return Err(invalid(
                "storage.stop_writes_free_pct",
                s.stop_writes_free_pct.to_string(),
                "must be a percentage from 0 to 50 (5 is the default)".into(),
            ));
        }
        if s.flush_interval_ms == 0 {
            return Err(invalid(
                "storage.flush_interval_ms",
                "0".into(),
                "must be at least 1 (use commit_to_device for synchronous writes)".into(),
            ));
        }
        if s.expiry_period_ms == 0 {
            return Err(invalid(
                "storage.expiry_period_ms",
                "0".into(),
                "must be at least 1".into(),
            ));
        }

        let l = &self.limits;
        let frame_max_bytes = u64::from(hayate_cql::frame::FRAME_BODY_MAX_BYTES);
        if !(MAX_FRAME_MIN_BYTES..=frame_max_bytes).contains(&l.max_frame_bytes.0) {
            return Err(invalid(
                "limits.max_frame_bytes",
                l.max_frame_bytes.to_string(),
                format!(
                    "must be from {} to {}",
                    ByteSize(MAX_FRAME_MIN_BYTES),
                    ByteSize(frame_max_bytes)
                ),
            ));
        }
        if !(1..=CONNECTIONS_MAX).contains(&l.max_connections) {
            return Err(invalid(
                "limits.max_connections",
                l.max_connections.to_string(),
                format!("must be from 1 to {CONNECTIONS_MAX}"),
            ));
        }
        if !(1..=REQUESTS_IN_FLIGHT_PER_CONNECTION_MAX).contains(&l.max_requests_in_flight_per_connection) {
            return Err(invalid(
                "limits.max_requests_in_flight_per_connection",
                l.max_requests_in_flight_per_connection.to_string(),
                format!(
                    "must be from 1 to {REQUESTS_IN_FLIGHT_PER_CONNECTION_MAX} (the stream ids of protocol v4)"
                ),
            ));
        }

        for (key, value) in [
            (
                "limits.max_request_data_in_flight",
                l.max_request_data_in_flight_bytes,
            ),
            (
                "limits.max_request_data_in_flight_per_ip",
                l.max_request_data_in_flight_per_ip_bytes,
            ),
        ] {
            if value.0 < REQUEST_DATA_IN_FLIGHT_MIN_BYTES {
                return Err(invalid(
                    key,
                    value.to_string(),
                    format!("must be at least {}", ByteSize(REQUEST_DATA_IN_FLIGHT_MIN_BYTES)),
                ));
            }
        }

        if l.service_threads > SERVICE_THREADS_MAX {
            return Err(invalid(
                "limits.service_threads",
                l.service_threads.to_string(),
                format!("must be from 0 (five per core) to {SERVICE_THREADS_MAX}"),
            ));
        }

        if let Some((key, value, reason)) = self.cluster.check() {
            return Err(invalid(key, value, reason));
        }
        if let Some((key, value, reason)) = self.client_encryption.check() {
            return Err(invalid(key, value, reason));
        }
        if let Some((key, value, reason)) = self.guardrails.check() {
            return Err(invalid(key, value, reason));
        }
        if self.listen_address.is_unspecified() {
            return Err(invalid(
                "listen_address",
                self.listen_address.to_string(),
                "must be this node's own address: other nodes reach it there (use 127.0.0.1 for a node of one)".into(),
            ));
        }
        if self.cluster.storage_port == self.cql_port {
            return Err(invalid(
                "cluster.storage_port",
                self.cluster.storage_port.to_string(),
                "is cql_port too; give internode traffic its own port (7000 is the default)".into(),
            ));
        }
        if self.metrics.port != 0
            && self.metrics.port == self.cql_port
            && addresses_overlap(self.metrics_listen_address(), self.listen_address)
        {
            return Err(invalid(
                "metrics.port",
                self.metrics.port.to_string(),
                "is cql_port too; give the metrics endpoint its own port (9180 is the default) or 0 to disable it"
                    .into(),
            ));
        }
        Ok(())
    }

    /// tmpfs refuses `O_DIRECT`, so a node whose data is in RAM anyway (a test, or a
    /// `/dev/shm` directory) would fail to open its device. Rather than make the operator
    /// learn that, turn direct I/O off there and say so.
    fn disable_direct_io_on_tmpfs(&mut self) {
        if !self.storage.direct_io {
            return;
        }
        let paths: Vec<PathBuf> = if self.storage.devices.is_empty() {
            vec![self.data_dir.clone()]
        } else {
            self.storage.devices.iter().map(|d| d.path.clone()).collect()
        };
        if let Some(path) = paths.iter().find(|p| is_on_tmpfs(p)) {
            self.storage.direct_io = false;
            self.warnings.push(format!(
                "{} is on tmpfs, which refuses O_DIRECT: opening devices without it \
                 (set storage.direct_io = false to silence this)",
                path.display()
            ));
        }
    }

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

/// Two listeners conflict on a port if either is a wildcard or both are the same address.
fn addresses_overlap(a: IpAddr, b: IpAddr) -> bool {
    a == b || a.is_unspecified() || b.is_unspecified()
}

/// Whether `path` (or, if it does not exist yet, its nearest existing ancestor) is on a tmpfs,
/// from the mount table. Any doubt (no `/proc`, an unreadable path) answers no, which leaves
/// direct I/O on: the engine then reports the device it cannot open.
fn is_on_tmpfs(path: &Path) -> bool {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else {
        return false;
    };
    let Some(existing) = path.ancestors().find_map(|p| {
        let p = if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        };
        p.canonicalize().ok()
    }) else {
        return false;
    };
    filesystem_type(&mounts, &existing).is_some_and(|fs| fs == "tmpfs")
}

/// The file system type of the longest mount point that contains `path`, from text in the
/// format of `/proc/self/mounts` (`device mount_point type options dump pass`, spaces in
/// the mount point written `\040`).
fn filesystem_type<'a>(mounts: &'a str, path: &Path) -> Option<&'a str> {
    let mut best: Option<(usize, &str)> = None;
    for line in mounts.lines() {
        let mut fields = line.split(' ');
        let (Some(_device), Some(mount_point), Some(fs_type)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let mount_point = mount_point.replace("\\040", " ");
        let mount_point = Path::new(&mount_point);
        if path.starts_with(mount_point) {
            let depth = mount_point.components().count();
            if best.is_none_or(|(best_depth, _)| depth >= best_depth) {
                best = Some((depth, fs_type));
            }
        }
    }
    best.map(|(_, fs_type)| fs_type)
}

/// A size in bytes, written in the file as "4GiB", "512MiB", "128KiB" or a plain number of
/// bytes. Binary units only: "4GB" is ambiguous (10^9 or 2^30) and is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub fn parse(text: &str) -> Result<ByteSize, String> {
        let text = text.trim();
        let digits_end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
        let (digits, unit) = text.split_at(digits_end);
        let shift = match unit.trim() {
            "" | "B" => 0,
            "KiB" => 10,
            "MiB" => 20,
            "GiB" => 30,
            "TiB" => 40,
            _ => return Err(size_form_message(text)),
        };
        let number: u64 = digits.parse().map_err(|_| size_form_message(text))?;
        number
            .checked_mul(1 << shift)
            .map(ByteSize)
            .ok_or_else(|| format!("size \"{text}\" is too large"))
    }
}

fn size_form_message(text: &str) -> String {
    format!(
        "\"{text}\" is not a size: write a number of bytes or a whole number with KiB, MiB, GiB or TiB, such as \"4GiB\" or \"512MiB\""
    )
}

impl fmt::Display for ByteSize {
    /// The largest binary unit that divides the size exactly, so messages echo what the
    /// operator wrote.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
            if self.0 != 0 && self.0.trailing_zeros() >= shift {
                return write!(f, "{}{unit}", self.0 >> shift);
            }
        }
        write!(f, "{}", self.0)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ByteSize, D::Error> {
        struct SizeVisitor;

        impl Visitor<'_> for SizeVisitor {
            type Value = ByteSize;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as \"4GiB\", \"512MiB\", \"128KiB\" or a number of bytes")
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v)
                    .map(ByteSize)
                    .map_err(|_| E::custom(format!("size {v} is negative")))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                ByteSize::parse(v).map_err(E::custom)
            }
        }

        deserializer.deserialize_any(SizeVisitor)
    }
}

/// Why the configuration could not be loaded.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConfigError {
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    TooLarge {
        path: PathBuf,
        len_bytes: u64,
    },
    /// Not TOML, an unknown key, or a value of the wrong type; the message from the TOML
    /// parser names the key and shows the line.
    Parse {
        path: Option<PathBuf>,
        message: String,
    },
    /// A value outside the range the node supports.
    Invalid {
        path: Option<PathBuf>,
        key: &'static str,
        value: String,
        reason: String,
    },
}

/// Where a setting came from, for messages: the file, or the defaults and flags.
struct Origin<'a>(&'a Option<PathBuf>);

impl fmt::Display for Origin<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(path) => write!(f, "{}", path.display()),
            None => f.write_str("configuration (defaults and command-line flags)"),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Read { path, source } => write!(
                f,
                "cannot read the configuration file {}: {source} (check the --config path)",
                path.display()
            ),
            ConfigError::TooLarge { path, len_bytes } => write!(
                f,
                "{} is {len_bytes} bytes, too large for a configuration file (at most {CONFIG_FILE_MAX_BYTES}); \
                 check the --config path",
                path.display()
            ),
            ConfigError::Parse { path, message } => write!(
                f,
                "{}: {} (every key is listed, with its default, in hayate.toml.example)",
                Origin(path),
                message.trim_end()
            ),
            ConfigError::Invalid {
                path,
                key,
                value,
                reason,
            } => write!(f, "{}: {key} = {value}: {reason}", Origin(path)),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::Read { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(args: &[&str]) -> Cli {
        let mut argv = vec!["hayate"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).expect("the test's flags parse")
    }

    #[test]
    fn no_arguments_give_the_embedded_defaults() {
        let config = Config::load(&cli(&[])).expect("defaults are valid");
        assert_eq!(config.cluster_name, "hayate");
        assert_eq!(config.cql_address(), "127.0.0.1:9042".parse().expect("address"));
        assert_eq!(config.data_dir, PathBuf::from("./data"));
        assert_eq!(config.storage.device_size_bytes, ByteSize(4 << 30));
        assert_eq!(config.storage.write_block_size_bytes, ByteSize(1 << 20));
        assert!(!config.storage.commit_to_device);
        assert_eq!(config.limits.max_frame_bytes, ByteSize(16 << 20));
        assert_eq!(config.auth.authenticator, AuthenticatorKind::AllowAll);
        assert_eq!(
            config.metrics_address(),
            Some("127.0.0.1:9180".parse().expect("address"))
        );
        assert_eq!(config.roles_path(), PathBuf::from("./data/roles.json"));

        let ns = config.namespace_config();
        assert_eq!(ns.name, NAMESPACE_NAME);
        assert_eq!(ns.devices.len(), 1);
        assert_eq!(ns.devices[0].path, PathBuf::from("./data/hayate.dat"));
        assert_eq!(ns.devices[0].size_bytes, 4 << 30);
        assert_eq!(ns.index_snapshot_path, Some(PathBuf::from("./data/hayate.index")));
        assert_eq!(ns.block_size_bytes, 1 << 20);
        assert!(!ns.data_in_memory);
        assert_eq!(ns.tombstone_grace_s, 864_000);
    }

    #[test]
    fn the_example_file_is_the_defaults() {
        // The example documents every key with its default: if the two disagree, one is wrong.
        let text = include_str!("../../../../hayate.toml.example");
        let uncommented: String = text
            .lines()
            .filter_map(|l| {
                // Settings are commented out as `#key = value` and `#[section]`; prose is
                // `# text`, and the device list example is indented prose.
                l.strip_prefix('#')
                    .filter(|rest| rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '['))
            })
            .collect::<Vec<_>>()
            .join("\n");
        let example = Config::from_toml(&uncommented, None).expect("the example parses");
        let defaults = Config::default();
        assert_eq!(format!("{example:?}"), format!("{defaults:?}"));
    }

    #[test]
    fn a_full_file_sets_everything() {
        let text = r#"
            cluster_name = "test cluster"
            listen_address = "10.1.2.3"
            cql_port = 19042
            data_dir = "/var/lib/hayate"
            log_level = "debug"

            [storage]
            device_size = "1GiB"
            write_block_size = "128KiB"
            commit_to_device = true
            write_buffer_dir = "/run/hayate"
            write_buffer_blocks = 16
            flush_interval_ms = 250
            post_write_cache = "64MiB"
            delta_buffer = "32MiB"
            read_page_cache = true
            data_in_memory = true
            defrag_lwm_pct = 40
            defrag_sleep_us = 500
            stop_writes_free_pct = 10
            tombstone_grace_s = 3600
            expiry_period_ms = 5000
            direct_io = false
            index_snapshot = false

            [[storage.devices]]
            path = "/dev/nvme0n1"

            [[storage.devices]]
            path = "/mnt/b/hayate.dat"
            size = 268435456

            [limits]
            max_frame_bytes = "1MiB"
            max_connections = 100
            max_requests_in_flight_per_connection = 64
            max_request_data_in_flight = "32MiB"
            max_request_data_in_flight_per_ip = "8MiB"

            [auth]
            authenticator = "PasswordAuthenticator"

            [metrics]
            listen_address = "::1"
            port = 0

            [cluster]
            seeds = ["10.1.2.3", "10.1.2.4:7001"]
            data_center = "dc2"
            rack = "r7"
            num_tokens = 8
            storage_port = 7001
            write_request_timeout_ms = 1000
            read_request_timeout_ms = 3000
            range_request_timeout_ms = 6000
            max_hint_window_ms = 60000
            hinted_handoff_throttle = "2MiB"
            max_hints_size_per_host = "100MiB"
            formation_wait_ms = 500

            [client_encryption]
            enabled = true
            optional = true
            certificate = "/etc/hayate/node.crt"
            private_key = "/etc/hayate/node.key"
            ca = "/etc/hayate/clients-ca.crt"
            require_client_auth = true

            [guardrails]
            batch_size_warn_threshold = "1KiB"
            batch_size_fail_threshold = "2KiB"
            partition_keys_in_select_warn_threshold = 10
            partition_keys_in_select_fail_threshold = 20
            in_select_cartesian_product_warn_threshold = 25
            in_select_cartesian_product_fail_threshold = -1
        "#;
        let config = Config::from_toml(text, Some(Path::new("full.toml"))).expect("parses");
        config.validate().expect("valid");
        assert_eq!(config.cluster_name, "test cluster");
        assert_eq!(config.cql_address(), "10.1.2.3:19042".parse().expect("address"));
        assert_eq!(
            config.storage_address(),
            "10.1.2.3:7001".parse().expect("address")
        );
        assert_eq!(
            config.cluster.seed_addresses(config.storage_address()),
            Ok(vec![
                "10.1.2.3:7001".parse().expect("address"),
                "10.1.2.4:7001".parse().expect("address")
            ])
        );
        assert_eq!(
            (config.cluster.data_center.as_str(), config.cluster.rack.as_str()),
            ("dc2", "r7")
        );
        assert_eq!(config.cluster.num_tokens, 8);
        assert_eq!(config.cluster.write_timeout(), std::time::Duration::from_secs(1));
        assert_eq!(config.cluster.hinted_handoff_throttle_bytes, ByteSize(2 << 20));
        assert_eq!(config.log_level, "debug");
        assert_eq!(config.limits.max_frame_bytes, ByteSize(1 << 20));
        assert_eq!(config.limits.max_connections, 100);
        assert_eq!(config.limits.max_requests_in_flight_per_connection, 64);
        assert_eq!(config.limits.max_request_data_in_flight_bytes, ByteSize(32 << 20));
        assert_eq!(config.client_encryption.mode(), Some(TlsMode::Optional));
        assert_eq!(
            config.client_encryption.ca,
            Path::new("/etc/hayate/clients-ca.crt")
        );
        assert!(config.client_encryption.require_client_auth);
        assert_eq!(
            config.limits.max_request_data_in_flight_per_ip_bytes,
            ByteSize(8 << 20)
        );
        assert_eq!(config.auth.authenticator, AuthenticatorKind::Password);
        assert_eq!(config.metrics_address(), None);
        let g = &config.guardrails;
        assert_eq!(
            (
                g.batch_size_warn_threshold_bytes,
                g.batch_size_fail_threshold_bytes
            ),
            (ByteSize(1 << 10), ByteSize(2 << 10))
        );
        assert_eq!(
            (
                g.partition_keys_in_select_warn_threshold,
                g.partition_keys_in_select_fail_threshold,
                g.in_select_cartesian_product_warn_threshold,
                g.in_select_cartesian_product_fail_threshold
            ),
            (10, 20, 25, -1)
        );

        let ns = config.namespace_config();
        assert_eq!(ns.devices.len(), 2);
        assert_eq!(ns.devices[0].path, PathBuf::from("/dev/nvme0n1"));
        assert_eq!(
            ns.devices[0].size_bytes,
            1 << 30,
            "a device without a size takes device_size"
        );
        assert_eq!(ns.devices[1].size_bytes, 256 << 20);
        assert_eq!(ns.block_size_bytes, 128 << 10);
        assert!(ns.commit_to_device);
        assert_eq!(ns.write_buffer_dir, Some(PathBuf::from("/run/hayate")));
        assert_eq!(ns.write_buffer_blocks, 16);
        assert_eq!(ns.flush_interval_ms, 250);
        assert_eq!(ns.post_write_cache_bytes, 64 << 20);
        assert_eq!(ns.delta_buffer_bytes, 32 << 20);
        assert!(ns.read_page_cache);
        assert!(ns.data_in_memory);
        assert_eq!(ns.defrag_lwm_pct, 40);
        assert_eq!(ns.defrag_sleep_us, 500);
        assert_eq!(ns.stop_writes_free_pct, 10);
        assert_eq!(ns.tombstone_grace_s, 3600);
        assert_eq!(ns.expiry_period_ms, 5000);
        assert!(!ns.direct_io);
        assert_eq!(ns.index_snapshot_path, None);
    }

    #[test]
    fn cassandra_class_names_are_accepted_for_the_authenticator() {
        let text = "[auth]\nauthenticator = \"org.apache.cassandra.auth.PasswordAuthenticator\"\n";
        let config = Config::from_toml(text, None).expect("parses");
        assert_eq!(config.auth.authenticator, AuthenticatorKind::Password);
    }

    #[test]
    fn the_authorizer_is_allow_all_unless_configured_and_needs_a_password_authenticator() {
        let config = Config::from_toml("", None).expect("empty config");
        assert_eq!(config.auth.authorizer, AuthorizerKind::AllowAll);
        let text = "[auth]\nauthenticator = \"PasswordAuthenticator\"\nauthorizer = \"org.apache.cassandra.auth.CassandraAuthorizer\"\n";
        let config = Config::from_toml(text, None).expect("parse");
        assert_eq!(config.auth.authorizer, AuthorizerKind::Cassandra);
        config.validate().expect("valid");
        let config =
            Config::from_toml("[auth]\nauthorizer = \"CassandraAuthorizer\"\n", None).expect("parse");
        let err = config.validate().expect_err("needs a password authenticator");
        assert!(
            err.to_string()
                .contains("AllowAllAuthenticator can't be used with CassandraAuthorizer"),
            "{err}"
        );
    }

    #[test]
    fn flags_override_the_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("hayate.toml");
        std::fs::write(
            &path,
            "cql_port = 9043\ndata_dir = \"/from/file\"\nlog_level = \"warn\"\n[metrics]\nport = 9999\n",
        )
        .expect("write config");
        let path_arg = path.to_str().expect("utf-8 temp path");

        let from_file = Config::load(&cli(&["--config", path_arg])).expect("loads");
        assert_eq!(from_file.cql_port, 9043);
        assert_eq!(from_file.data_dir, PathBuf::from("/from/file"));
        assert!(!from_file.storage.commit_to_device);

        let data_dir = dir.path().join("data");
        let data_dir_arg = data_dir.to_str().expect("utf-8 temp path");
        let config = Config::load(&cli(&[
            "--config",
            path_arg,
            "--data-dir",
            data_dir_arg,
            "--listen-address",
            "10.0.0.1",
            "--cql-port",
            "9044",
            "--commit-to-device",
            "--metrics-port",
            "0",
            "--log-level",
            "debug",
        ]))
        .expect("loads");
        assert_eq!(config.cql_address(), "10.0.0.1:9044".parse().expect("address"));
        assert_eq!(config.data_dir, data_dir);
        assert!(config.storage.commit_to_device);
        assert_eq!(config.metrics_address(), None);
        assert_eq!(config.log_level, "debug");
        assert_eq!(config.source.as_deref(), Some(path.as_path()));
    }

    #[test]
    fn an_unknown_key_is_refused_by_name() {
        let err = Config::from_toml("[storage]\ncomit_to_device = true\n", Some(Path::new("x.toml")))
            .expect_err("misspelt key");
        let message = err.to_string();
        assert!(message.contains("comit_to_device"), "{message}");
        assert!(message.contains("x.toml"), "{message}");

        let err = Config::from_toml("colour = 1\n", None).expect_err("unknown top-level key");
        assert!(err.to_string().contains("colour"), "{err}");
    }

    #[test]
    fn a_bad_size_is_refused() {
        let err = Config::from_toml("[storage]\ndevice_size = \"4 gigs\"\n", Some(Path::new("x.toml")))
            .expect_err("not a size");
        let message = err.to_string();
        assert!(message.contains("4 gigs") && message.contains("GiB"), "{message}");
        assert!(message.contains("device_size"), "{message}");

        let err = Config::from_toml("[storage]\ndevice_size = \"4GB\"\n", None).expect_err("decimal unit");
        assert!(err.to_string().contains("4GB"), "{err}");

        let err = Config::from_toml("[storage]\ndevice_size = -1\n", None).expect_err("negative");
        assert!(err.to_string().contains("negative"), "{err}");

        let err = Config::from_toml("[storage]\ndevice_size = \"99999999999TiB\"\n", None)
            .expect_err("overflows u64");
        assert!(err.to_string().contains("too large"), "{err}");
    }

    #[test]
    fn sizes_parse_in_every_unit() {
        assert_eq!(ByteSize::parse("4GiB"), Ok(ByteSize(4 << 30)));
        assert_eq!(ByteSize::parse("512MiB"), Ok(ByteSize(512 << 20)));
        assert_eq!(ByteSize::parse("128KiB"), Ok(ByteSize(128 << 10)));
        assert_eq!(ByteSize::parse("1 TiB"), Ok(ByteSize(1 << 40)));
        assert_eq!(ByteSize::parse("1000"), Ok(ByteSize(1000)));
        assert_eq!(ByteSize::parse("1000B"), Ok(ByteSize(1000)));
        assert!(ByteSize::parse("").is_err());
        assert!(ByteSize::parse("MiB").is_err());
        assert!(ByteSize::parse("1.5GiB").is_err());
        assert_eq!(ByteSize(1 << 20).to_string(), "1MiB");
        assert_eq!(ByteSize(1000).to_string(), "1000");
    }

    #[test]
    fn out_of_range_values_name_their_key_and_file() {
        let cases = [
            (
                "[storage]\nwrite_block_size = \"3MiB\"\n",
                "storage.write_block_size = 3MiB",
            ),
            (
                "[storage]\nwrite_block_size = \"64KiB\"\n",
                "storage.write_block_size = 64KiB",
            ),
            (
                "[storage]\nwrite_block_size = \"16MiB\"\n",
                "storage.write_block_size = 16MiB",
            ),
            (
                "[storage]\ndevice_size = \"1MiB\"\n",
                "storage.device_size = 1MiB",
            ),
            (
                "[storage]\ndefrag_lwm_pct = 100\n",
                "storage.defrag_lwm_pct = 100",
            ),
            ("[storage]\ndefrag_lwm_pct = 0\n", "storage.defrag_lwm_pct = 0"),
            (
                "[storage]\nstop_writes_free_pct = 60\n",
                "storage.stop_writes_free_pct = 60",
            ),
            (
                "[storage]\nflush_interval_ms = 0\n",
                "storage.flush_interval_ms = 0",
            ),
            (
                "[limits]\nmax_frame_bytes = \"32MiB\"\n",
                "limits.max_frame_bytes = 32MiB",
            ),
            (
                "[limits]\nmax_frame_bytes = 100\n",
                "limits.max_frame_bytes = 100",
            ),
            ("[limits]\nmax_connections = 0\n", "limits.max_connections = 0"),
            (
                "[client_encryption]\nenabled = true\n",
                "client_encryption.certificate = \"\"",
            ),
            (
                "[client_encryption]\noptional = true\ncertificate = \"a.pem\"\n",
                "client_encryption.private_key = \"\"",
            ),
            (
                "[client_encryption]\nrequire_client_auth = true\n",
                "client_encryption.require_client_auth = true",
            ),
            (
                "[client_encryption]\nenabled = true\ncertificate = \"a.pem\"\nprivate_key = \"k.pem\"\nrequire_client_auth = true\n",
                "client_encryption.ca = \"\"",
            ),
            (
                "[limits]\nmax_request_data_in_flight = 100\n",
                "limits.max_request_data_in_flight = 100",
            ),
            (
                "[limits]\nmax_request_data_in_flight_per_ip = 0\n",
                "limits.max_request_data_in_flight_per_ip = 0",
            ),
            (
                "[limits]\nservice_threads = 5000\n",
                "limits.service_threads = 5000",
            ),
            (
                "[limits]\nmax_requests_in_flight_per_connection = 40000\n",
                "limits.max_requests_in_flight_per_connection = 40000",
            ),
            ("[metrics]\nport = 9042\n", "metrics.port = 9042"),
            ("data_dir = \"\"\n", "data_dir"),
        ];
        for (text, expected) in cases {
            let config = Config::from_toml(text, Some(Path::new("/etc/hayate.toml"))).expect(text);
            let err = config.validate().expect_err(text).to_string();
            assert!(err.starts_with("/etc/hayate.toml: "), "{err}");
            assert!(err.contains(expected), "{text} gave {err}");
        }
    }

    #[test]
    fn ports_out_of_range_and_bad_addresses_are_refused_by_the_parser() {
        let err = Config::from_toml("cql_port = 70000\n", None).expect_err("port > u16");
        assert!(err.to_string().contains("cql_port"), "{err}");
        let err = Config::from_toml("listen_address = \"localhost:9042\"\n", None).expect_err("not an IP");
        assert!(err.to_string().contains("listen_address"), "{err}");
    }

    #[test]
    fn a_missing_file_says_which() {
        let err = Config::load(&cli(&["--config", "/nonexistent/hayate.toml"])).expect_err("missing file");
        assert!(err.to_string().contains("/nonexistent/hayate.toml"), "{err}");
    }

    #[test]
    fn the_file_system_of_a_path_is_its_longest_mount_point() {
        let mounts = "sysfs /sys sysfs rw 0 0\n\
                      /dev/sda1 / ext4 rw 0 0\n\
                      tmpfs /dev/shm tmpfs rw 0 0\n\
                      tmpfs /mnt/my\\040disk tmpfs rw 0 0\n\
                      /dev/sdb1 /dev/shm/inner xfs rw 0 0\n";
        assert_eq!(
            filesystem_type(mounts, Path::new("/var/lib/hayate")),
            Some("ext4")
        );
        assert_eq!(
            filesystem_type(mounts, Path::new("/dev/shm/hayate")),
            Some("tmpfs")
        );
        assert_eq!(
            filesystem_type(mounts, Path::new("/dev/shm/inner/x")),
            Some("xfs")
        );
        assert_eq!(
            filesystem_type(mounts, Path::new("/mnt/my disk/x")),
            Some("tmpfs")
        );
        assert_eq!(filesystem_type(mounts, Path::new("/dev/shmx")), Some("ext4"));
    }
}
