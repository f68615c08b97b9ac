//! The `hayate` commands that are not the node itself: a local cluster in one command
//! ([`local`], as `ccm` gives Cassandra users) and the cluster's status ([`status`], as
//! `nodetool status`).

pub mod http;
pub mod local;
pub mod status;

use std::net::IpAddr;
use std::path::PathBuf;

#[derive(Debug, Clone, clap::Subcommand)]
pub enum Tool {
    /// Runs a cluster of several nodes on this machine, one per loopback address
    /// (127.0.0.1, 127.0.0.2, ...), each with its data, log and pid file under DIR/nodeK/.
    Local {
        #[command(subcommand)]
        action: LocalAction,
    },
    /// Prints what `nodetool status` prints: each node's state, address, load, tokens,
    /// ownership, host id and rack, per data center.
    Status {
        /// A node of the cluster (its metrics endpoint answers /status).
        #[arg(long, default_value = "127.0.0.1")]
        host: IpAddr,
        /// The node's metrics port.
        #[arg(long, default_value_t = 9180)]
        port: u16,
    },
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum LocalAction {
    /// Starts the nodes and returns once every node is up and the schema agrees.
    Start {
        /// How many nodes (the first start of DIR); nodes are 127.0.0.1 to 127.0.0.N.
        #[arg(long)]
        nodes: Option<usize>,
        /// Where the cluster's nodes keep their data, logs and pid files.
        #[arg(long)]
        dir: PathBuf,
        /// Start only node K again (after `stop --node K`, or a crash).
        #[arg(long)]
        node: Option<usize>,
        /// Settings passed to every node, after `--` (e.g. `-- --commit-to-device`).
        #[arg(last = true)]
        extra: Vec<String>,
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
        Tool::Status { host, port } => status::run(*host, *port),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hayate: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
