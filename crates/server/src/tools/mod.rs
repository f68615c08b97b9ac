//! The `hayate` commands that are not the node itself: a local cluster in one command
//! ([`local`], as `ccm` gives Cassandra users), the cluster's status ([`status`], as
//! `nodetool status`), streams ([`netstats`]), the topology operations ([`ops`]:
//! decommission, removenode, cleanup), a node's figures ([`info`], [`tablestats`], [`ring`]:
//! ring and describecluster), its upkeep ([`maintenance`]: flush, drain, the log level,
//! defragmentation) and snapshots ([`snapshot`]: snapshot, listsnapshots, clearsnapshot,
//! restore).

pub mod http;
pub mod info;
pub mod local;
pub mod maintenance;
pub mod netstats;
pub mod ops;
pub mod ports;
pub mod ring;
pub mod snapshot;
pub mod status;
pub mod tablestats;

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

/// `print!` for the tools: a reader that goes away (`hayate local start | head`) does not stop
/// the command, which goes on with its work and its exit code, its output unread (`print!`
/// panics on the closed pipe).
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::tools::write_out(format_args!($($arg)*))
    };
}
pub(crate) use say;

pub fn write_out(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    // A closed pipe or a full disk: the output is lost, the command's work and exit code are not.
    let _ = out.write_fmt(args).and_then(|()| out.flush());
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum Tool {
    /// Runs a cluster of several nodes on this machine, one per loopback address
    /// (127.0.0.1, 127.0.0.2, ...), each with its data, log and pid file under DIR/nodeK/, and a
    /// cluster name of its own (from DIR), so that it never merges with another cluster.
    Local {
        #[command(subcommand)]
        action: LocalAction,
    },
    /// Prints what `nodetool status` prints: each node's state, address, load, tokens,
    /// ownership, host id and rack, per data center.
    Status {
        #[command(flatten)]
        at: NodeAddress,
    },
    /// Prints what `nodetool netstats` prints: the node's mode (normal, joining, leaving), the
    /// topology change in progress, and each stream in and out with records and bytes done of
    /// the total, its rate and the time left; on a terminal it redraws while streams run.
    Netstats {
        #[command(flatten)]
        at: NodeAddress,
    },
    /// Decommissions the node: streams its ranges to their next owners, then it leaves the ring
    /// and stops. Refused when a keyspace would keep fewer nodes (in the node's data center)
    /// than its replication factor. Run on the node's own machine; returns when it has left.
    Decommission {
        #[command(flatten)]
        at: NodeAddress,
    },
    /// Removes a dead node from the ring (HOST_ID, as `hayate status` shows it): the other
    /// replicas stream its ranges to their next owners. `removenode status` shows a removal in
    /// progress. Refused for a live node (decommission it instead).
    Removenode {
        /// The dead node's host id, or `status`.
        target: String,
        #[command(flatten)]
        at: NodeAddress,
    },
    /// Drops the records of ranges the node no longer holds. A node does this by itself after a
    /// topology change moves ranges away from it; this forces it.
    Cleanup {
        #[command(flatten)]
        at: NodeAddress,
    },
    /// Takes a snapshot of tables on the node, as `nodetool snapshot`: every user table, a
    /// keyspace's, or the ones named. Instant whatever the data size: it saves the tables'
    /// index entries and pins the write blocks their rows are in, which then stay on the device
    /// until the snapshot is cleared (up to the pinned size, shown). Refused when the blocks it
    /// would newly pin exceed the free space beyond the stop-writes reserve.
    Snapshot {
        /// The keyspace (all user keyspaces if none).
        keyspace: Option<String>,
        /// Tables of the keyspace (all of them if none).
        tables: Vec<String>,
        /// The snapshot's name (default: the time in milliseconds).
        #[arg(short = 't', long)]
        tag: Option<String>,
        /// Take it on every node of the cluster, with the same tag, through one metadata log
        /// entry: every node takes it at the same log position, so no schema change falls
        /// between one node's snapshot and another's. Every node must be up.
        #[arg(long)]
        all_nodes: bool,
        #[command(flatten)]
        at: NodeAddress,
    },
    /// Lists the node's snapshots (those taken by hand and the automatic ones before DROP and
    /// TRUNCATE), their tables and the device space they pin, as `nodetool listsnapshots`.
    Listsnapshots {
        #[arg(long)]
        all_nodes: bool,
        #[command(flatten)]
        at: NodeAddress,
    },
    /// Deletes a snapshot (or all of them) and gives its blocks back to defragmentation, as
    /// `nodetool clearsnapshot`.
    Clearsnapshot {
        #[arg(short = 't', long)]
        tag: Option<String>,
        /// Every snapshot on the node.
        #[arg(long)]
        all: bool,
        #[arg(long)]
        all_nodes: bool,
        #[command(flatten)]
        at: NodeAddress,
    },
    /// Writes a backup of the node's tables to DIR/TAG/HOST_ID/, as files (one per table, in a
    /// documented, versioned, checksummed format: docs/backups.md) that can be kept anywhere:
    /// of a snapshot taken for it (and cleared after), or of `--snapshot TAG`. DIR may be an
    /// S3-compatible bucket, s3://BUCKET/PREFIX, which the node reaches with the AWS_*
    /// variables of its environment. `--incremental` writes only what the node wrote since its
    /// newest backup in DIR.
    Backup {
        /// Where the backup goes: a directory on the node's machine, or s3://BUCKET/PREFIX.
        #[arg(long)]
        to: String,
        /// The backup's name (default: the time in milliseconds).
        #[arg(short = 't', long)]
        tag: Option<String>,
        /// Export this snapshot rather than take one.
        #[arg(long)]
        snapshot: Option<String>,
        /// The keyspace (all user keyspaces if none).
        keyspace: Option<String>,
        /// Tables of the keyspace (all of them if none).
        tables: Vec<String>,
        /// Only what changed since the node's newest backup in DIR.
        #[arg(long)]
        incremental: bool,
        /// Every node's part, under one tag.
        #[arg(long)]
        all_nodes: bool,
        #[command(flatten)]
        at: NodeAddress,
    },
    /// Puts a snapshot's rows back into the cluster, as `sstableloader` does: each row to its
    /// current replicas (at ALL by default), with its timestamps, TTLs and tombstones. A table
    /// that is gone (the automatic snapshot of a DROP) is created again from the snapshot, its
    /// keyspace too. Each node holds a snapshot of its own replicas: use --all-nodes for the
    /// cluster. Running it again is harmless.
    Restore {
        /// The snapshot's tag (`hayate listsnapshots`).
        #[arg(long)]
        snapshot: Option<String>,
        /// A backup, DIR/TAG or s3://BUCKET/PREFIX/TAG (`hayate backup`): one node loads every node's part
        /// into the whole cluster, whatever its size and replication factor, after checking
        /// every file (a damaged backup loads nothing).
        #[arg(long, conflicts_with = "snapshot")]
        from: Option<String>,
        /// Only this keyspace's tables.
        keyspace: Option<String>,
        /// Only this table.
        table: Option<String>,
        /// Load the table into KEYSPACE.TABLE instead (created like the original if missing).
        #[arg(long)]
        to_table: Option<String>,
        /// The consistency of the writes (default ALL).
        #[arg(long)]
        consistency: Option<String>,
        #[arg(long)]
        all_nodes: bool,
        #[command(flatten)]
        at: NodeAddress,
    },
    /// Prints what `nodetool info` prints: the node's host id, whether it gossips and serves
    /// CQL, its load, gossip generation, uptime, memory (Cassandra's heap is hayate's RAM index
    /// and the process's resident memory), data center, rack, errors, and the post-write cache
    /// (in place of the key cache: recently written blocks in RAM, which serve reads without a
    /// device read).
    Info {
        #[command(flatten)]
        at: NodeAddress,
        /// List every token of the node.
        #[arg(short = 'T', long)]
        tokens: bool,
    },
    /// Prints what `nodetool tablestats` prints, per keyspace and table: rows (an estimate: a
    /// row whose TTL ran out counts until the expiry pass), tombstones, bytes of live records
    /// and of the RAM index, and the local read and write latency (the storage engine's time for
    /// the table's reads and writes on this node, mean and percentiles).
    Tablestats {
        /// Keyspaces (KS) or tables (KS.TABLE) to show; all of them without.
        filters: Vec<String>,
        #[command(flatten)]
        at: NodeAddress,
        /// Bytes in KiB, MiB, GiB.
        #[arg(short = 'H', long)]
        human_readable: bool,
    },
    /// Prints what `nodetool ring` prints: every token of the ring in order, with its node's
    /// address, rack, state, load and ownership, per data center.
    Ring {
        #[command(flatten)]
        at: NodeAddress,
    },
    /// Prints what `nodetool describecluster` prints: the cluster's name, partitioner, the
    /// schema version each node has, node counts per state and data center, releases, and each
    /// keyspace's replication.
    Describecluster {
        #[command(flatten)]
        at: NodeAddress,
    },
    /// Makes every write acknowledged so far durable on the device (as `nodetool flush`): the
    /// open write block and the blocks in the write buffer are written and synced. All tables
    /// share the write blocks, so naming a keyspace or tables checks the names and flushes them
    /// all.
    Flush {
        /// Check that this keyspace exists.
        keyspace: Option<String>,
        /// Check that these tables of KEYSPACE exist.
        tables: Vec<String>,
        #[command(flatten)]
        at: NodeAddress,
    },
    /// Drains the node, as `nodetool drain` does before an upgrade or a restart: it refuses
    /// every CQL request from then on (saying that it is drained), leaves gossip (the other
    /// nodes mark it down at once) and the internode transport, and flushes every write to the
    /// device. It keeps running until it is stopped; a restart serves again.
    Drain {
        #[command(flatten)]
        at: NodeAddress,
    },
    /// Changes the node's log filter while it runs (as `nodetool setlogginglevel`): `LEVEL`
    /// sets the default level, `TARGET LEVEL` one module's (e.g. `hayate_storage::defrag
    /// debug`), keeping the others; with neither, the filter the node started with comes back.
    /// Levels: off, error, warn, info, debug, trace. Not kept across a restart.
    Setlogginglevel {
        /// `[TARGET] LEVEL`.
        args: Vec<String>,
        #[command(flatten)]
        at: NodeAddress,
    },
    /// Prints the node's log filter, one target per line (ROOT is the default level), as
    /// `nodetool getlogginglevels`.
    Getlogginglevels {
        #[command(flatten)]
        at: NodeAddress,
    },
    /// Prints defragmentation's backlog and progress, as `nodetool compactionstats` prints
    /// compactions: blocks below the low-water mark waiting (pending tasks) and the live bytes
    /// they hold, blocks being defragmented, blocks and bytes moved since start, the rate over
    /// one second (it watches for a second), and free blocks.
    Defragstats {
        #[command(flatten)]
        at: NodeAddress,
    },
}

/// The node a tool asks: its address and its HTTP (metrics) port.
#[derive(Debug, Clone, clap::Args)]
pub struct NodeAddress {
    /// The node (its metrics endpoint).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// The node's metrics port.
    #[arg(long, default_value_t = 9180)]
    pub port: u16,
}

impl NodeAddress {
    fn addr(&self) -> SocketAddr {
        SocketAddr::new(self.host, self.port)
    }
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum LocalAction {
    /// Starts the nodes and returns once every node started is up (the very process started,
    /// as the node itself reports) and agrees with the nodes that are up; a node stopped on
    /// purpose is reported, not waited for. A taken port is refused before anything starts,
    /// naming the process that holds it. Exits non-zero, with the node's own last log lines,
    /// when a node started is not up or a node died on its own.
    Start {
        /// How many nodes (the first start of DIR); nodes are 127.0.0.1 to 127.0.0.N, or on the
        /// addresses of --address-prefix.
        #[arg(long)]
        nodes: Option<usize>,
        /// The first three parts of the nodes' addresses, node K on PREFIX.K (the first start
        /// of DIR; as ccm's -i): 127.0.1. runs a cluster beside a single node on 127.0.0.1, or
        /// beside another local cluster.
        #[arg(long, value_name = "PREFIX")]
        address_prefix: Option<String>,
        /// Where the cluster's nodes keep their data, logs and pid files.
        #[arg(long)]
        dir: PathBuf,
        /// Start only node K again (after `stop --node K`, or a crash).
        #[arg(long)]
        node: Option<usize>,
        /// With --node K: node K died for good (its disk is lost): delete its data and start a
        /// fresh node on its address that replaces it (`--replace-address`), taking its tokens
        /// and streaming its data from the other replicas.
        #[arg(long, requires = "node")]
        replace: bool,
        /// Spread the nodes over this many data centers, dc1 to dcD, in order (with 6 nodes and
        /// 2: nodes 1-3 in dc1, 4-6 in dc2), for NetworkTopologyStrategy (the first start of
        /// DIR; without it every node is in datacenter1).
        #[arg(long, value_name = "D")]
        data_centers: Option<usize>,
        /// Settings passed to every node, after `--` (e.g. `-- --commit-to-device`).
        #[arg(last = true)]
        extra: Vec<String>,
    },
    /// Adds a node to the running cluster (the next address, 127.0.0.N+1): it streams the
    /// data of the ranges it takes over, and this returns once it is normal, showing the streams
    /// while it waits.
    Add {
        #[arg(long)]
        dir: PathBuf,
        /// The data center of the new node (a cluster started with --data-centers: dc1, dc2,
        /// ...; the default is that of the last node).
        #[arg(long, value_name = "NAME")]
        data_center: Option<String>,
    },
    /// Decommissions node K: its ranges stream to their next owners, then it leaves the ring
    /// and stops; this returns once it has.
    Decommission {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        node: usize,
    },
    /// Stops the nodes cleanly (SIGTERM) and waits for them to exit.
    Stop {
        #[arg(long)]
        dir: PathBuf,
        /// Stop only node K.
        #[arg(long)]
        node: Option<usize>,
    },
}

/// Runs a tool; the process's exit code.
pub fn run(tool: &Tool) -> std::process::ExitCode {
    let result = match tool {
        Tool::Local { action } => local::run(action),
        Tool::Status { at } => status::run(at.host, at.port),
        Tool::Netstats { at } => netstats::run(at.addr()),
        Tool::Decommission { at } => ops::decommission(at.addr()),
        Tool::Removenode { target, at } => ops::removenode(at.addr(), target),
        Tool::Cleanup { at } => ops::cleanup(at.addr()),
        Tool::Snapshot {
            keyspace,
            tables,
            tag,
            all_nodes,
            at,
        } => snapshot::snapshot(at.addr(), keyspace.as_deref(), tables, tag.as_deref(), *all_nodes),
        Tool::Listsnapshots { all_nodes, at } => snapshot::listsnapshots(at.addr(), *all_nodes),
        Tool::Clearsnapshot {
            tag,
            all,
            all_nodes,
            at,
        } => snapshot::clearsnapshot(at.addr(), tag.as_deref(), *all, *all_nodes),
        Tool::Backup {
            to,
            tag,
            snapshot,
            keyspace,
            tables,
            incremental,
            all_nodes,
            at,
        } => snapshot::backup(
            at.addr(),
            &snapshot::BackupArgs {
                to,
                tag: tag.as_deref(),
                snapshot: snapshot.as_deref(),
                keyspace: keyspace.as_deref(),
                tables,
                incremental: *incremental,
                all_nodes: *all_nodes,
            },
        ),
        Tool::Restore {
            snapshot,
            from,
            keyspace,
            table,
            to_table,
            consistency,
            all_nodes,
            at,
        } => snapshot::restore(
            at.addr(),
            &snapshot::RestoreArgs {
                snapshot: snapshot.as_deref(),
                from: from.as_deref(),
                keyspace: keyspace.as_deref(),
                table: table.as_deref(),
                to_table: to_table.as_deref(),
                consistency: consistency.as_deref(),
                all_nodes: *all_nodes,
            },
        ),
        Tool::Info { at, tokens } => info::run(at.addr(), *tokens),
        Tool::Tablestats {
            filters,
            at,
            human_readable,
        } => tablestats::run(at.addr(), filters, *human_readable),
        Tool::Ring { at } => ring::ring(at.addr()),
        Tool::Describecluster { at } => ring::describecluster(at.addr()),
        Tool::Flush { keyspace, tables, at } => maintenance::flush(at.addr(), keyspace.as_deref(), tables),
        Tool::Drain { at } => maintenance::drain(at.addr()),
        Tool::Setlogginglevel { args, at } => maintenance::setlogginglevel(at.addr(), args),
        Tool::Getlogginglevels { at } => maintenance::getlogginglevels(at.addr()),
        Tool::Defragstats { at } => maintenance::defragstats(at.addr()),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hayate: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
