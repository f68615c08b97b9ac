//! The settings of the metadata log, and the openraft configuration they become.

use std::path::PathBuf;
use std::time::Duration;

use openraft::SnapshotPolicy;

use super::{MetadataError, ENTRIES_PER_MESSAGE_MAX};
use crate::node::NodeInfo;

/// Where the metadata log lives and how quickly it reacts.
///
/// The defaults suit nodes on one network. A leader that dies is replaced in about two seconds
/// (1.7 to 2.0 s measured with three nodes): a follower waits its election timeout (drawn once
/// per node, at start, between the two bounds), and the others refuse to vote while they still
/// count on the old leader's lease (openraft's, `election_timeout_max`). A proposal made
/// meanwhile waits for the new leader, within `propose_timeout`. A follower learns of a commit
/// within one round trip: openraft sends the new commit index at once, not at the next
/// heartbeat.
#[derive(Clone, Debug)]
pub struct MetadataConfig {
    pub local: NodeInfo,
    /// The directory of the log, the vote and the snapshot, e.g. `<data_dir>/metadata`. Created
    /// if missing.
    pub dir: PathBuf,
    /// How often the leader sends heartbeats. It is also how long the leader waits for a
    /// follower's answer to one (which includes the follower's fsync), and how long it waits for
    /// a majority when it checks, before appending a command, that it still has one.
    pub heartbeat_interval: Duration,
    /// A follower that hears nothing from a leader for its election timeout, drawn between
    /// these once when the node opens, starts an election.
    pub election_timeout_min: Duration,
    pub election_timeout_max: Duration,
    /// How long `propose` (and `initialize`'s own proposals) may take, forwarding included.
    pub propose_timeout: Duration,
    /// How long `add_member` waits for a new node to catch up with the log before it makes it a
    /// voter.
    pub catch_up_timeout: Duration,
    /// How long sending a snapshot to a lagging node may take.
    pub snapshot_send_timeout: Duration,
    /// A snapshot is taken every this many applied entries; the log before it is then purged.
    pub snapshot_every_entries: u64,
    /// Entries kept in the log behind the latest snapshot, so that a node a little behind
    /// catches up from the log rather than from a whole snapshot.
    pub log_kept_after_snapshot_entries: u64,
}

impl MetadataConfig {
    pub fn new(local: NodeInfo, dir: PathBuf) -> MetadataConfig {
        MetadataConfig {
            local,
            dir,
            heartbeat_interval: Duration::from_millis(100),
            election_timeout_min: Duration::from_millis(500),
            election_timeout_max: Duration::from_millis(1000),
            propose_timeout: Duration::from_secs(5),
            catch_up_timeout: Duration::from_secs(30),
            snapshot_send_timeout: Duration::from_secs(10),
            snapshot_every_entries: 1000,
            log_kept_after_snapshot_entries: 100,
        }
    }

    /// The openraft configuration these settings make, validated.
    pub(crate) fn raft_config(&self) -> Result<openraft::Config, MetadataError> {
        if self.heartbeat_interval.is_zero() || self.election_timeout_min <= self.heartbeat_interval {
            return Err(MetadataError::Config(format!(
                "the election timeout ({} ms) must be longer than the heartbeat interval ({} ms)",
                millis(self.election_timeout_min),
                millis(self.heartbeat_interval)
            )));
        }
        if self.snapshot_every_entries == 0 {
            return Err(MetadataError::Config(
                "snapshot_every_entries must be at least 1".to_owned(),
            ));
        }
        let config = openraft::Config {
            cluster_name: "hayate-metadata".to_owned(),
            heartbeat_interval: millis(self.heartbeat_interval),
            election_timeout_min: millis(self.election_timeout_min),
            election_timeout_max: millis(self.election_timeout_max),
            install_snapshot_timeout: millis(self.snapshot_send_timeout),
            max_payload_entries: ENTRIES_PER_MESSAGE_MAX,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_every_entries),
            max_in_snapshot_log_to_keep: self.log_kept_after_snapshot_entries,
            purge_batch_size: 1,
            ..Default::default()
        };
        config
            .validate()
            .map_err(|e| MetadataError::Config(e.to_string()))
    }
}

/// A duration in whole milliseconds, for settings and errors that speak in them.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
