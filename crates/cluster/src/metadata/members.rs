//! The membership commands: who is in the ring, with which tokens, and the one change of the
//! ring in progress. Applied by the state machine on every node in log order, so every function
//! here is deterministic: its answer depends only on its arguments.
//!
//! A topology change is three steps in the log (`docs/topology-changes.md`): a `Start*` command
//! records it (the ring that reads follow does not change yet; writes also go to the pending
//! ring), the data is streamed outside the log, and [`Command::FinishChange`] makes the pending
//! ring the ring (or [`Command::AbortChange`] drops it). One change at a time: a second start
//! is refused with a reason that names the one in progress.

use std::collections::BTreeSet;

use super::{
    ChangeKind, ClusterMetadata, Command, CommandResult, MemberRecord, MemberStatus, TopologyChange,
    TOKENS_PER_MEMBER_MAX,
};
use crate::node::HostId;

/// Applies a membership command to `metadata` at log index `index` (the id a change started
/// there takes).
pub(crate) fn apply_member_command(
    metadata: &mut ClusterMetadata,
    index: u64,
    command: &Command,
) -> CommandResult {
    match apply(metadata, index, command) {
        Ok(()) => CommandResult::Done,
        Err(reason) => CommandResult::Refused(reason),
    }
}

fn apply(metadata: &mut ClusterMetadata, index: u64, command: &Command) -> Result<(), String> {
    match command {
        Command::AddMember(record) => {
            if !check_new_member(metadata, record, None)? {
                metadata.members.insert(record.info.host_id, record.clone());
            }
        }
        Command::SetStatus { host, status } => member_mut(metadata, *host)?.status = *status,
        Command::RemoveMember(host) => {
            metadata
                .members
                .remove(host)
                .ok_or_else(|| format!("{host} is not a member"))?;
        }
        Command::StartJoin(record) => {
            no_change_in_progress(metadata)?;
            if record.status != MemberStatus::Joining {
                return Err(format!("{} must join with status joining", record.info.host_id));
            }
            if !check_new_member(metadata, record, None)? {
                metadata.members.insert(record.info.host_id, record.clone());
            }
            start(
                metadata,
                index,
                ChangeKind::Join {
                    node: record.info.host_id,
                },
            );
        }
        Command::StartLeave(host) => {
            no_change_in_progress(metadata)?;
            let normal = metadata
                .members
                .values()
                .filter(|r| r.status == MemberStatus::Normal)
                .count();
            let member = member_mut(metadata, *host)?;
            if member.status != MemberStatus::Normal {
                return Err(format!(
                    "{host} is {:?}, not normal: only a normal member can leave",
                    member.status
                ));
            }
            if normal < 2 {
                return Err(format!(
                    "{host} is the last member of the ring: nobody could take its data"
                ));
            }
            member.status = MemberStatus::Leaving;
            start(metadata, index, ChangeKind::Leave { node: *host });
        }
        Command::StartReplace { old, new } => {
            no_change_in_progress(metadata)?;
            let replaced = metadata
                .members
                .get(old)
                .ok_or_else(|| format!("{old} is not a member: there is nothing to replace"))?;
            if replaced.status != MemberStatus::Normal {
                return Err(format!(
                    "{old} is {:?}, not normal: it cannot be replaced now",
                    replaced.status
                ));
            }
            if new.tokens != replaced.tokens {
                return Err(format!(
                    "the replacement {} must take exactly the tokens of {old}",
                    new.info.host_id
                ));
            }
            if new.status != MemberStatus::Joining {
                return Err(format!(
                    "the replacement {} must start with status joining",
                    new.info.host_id
                ));
            }
            if metadata.members.contains_key(&new.info.host_id) {
                return Err(format!(
                    "the replacement {} is a member already",
                    new.info.host_id
                ));
            }
            check_new_member(metadata, new, Some(*old))?;
            metadata.members.insert(new.info.host_id, new.clone());
            start(
                metadata,
                index,
                ChangeKind::Replace {
                    old: *old,
                    new: new.info.host_id,
                },
            );
        }
        Command::StartRemove(host) => {
            no_change_in_progress(metadata)?;
            if metadata.members.len() < 2 {
                return Err(format!("{host} is the last member of the ring"));
            }
            let member = member_mut(metadata, *host)?;
            if member.status != MemberStatus::Normal {
                return Err(format!(
                    "{host} is {:?}, not normal: it cannot be removed now",
                    member.status
                ));
            }
            member.status = MemberStatus::Leaving;
            start(metadata, index, ChangeKind::Remove { node: *host });
        }
        Command::FinishChange { id } => {
            let change = the_change(metadata, *id)?;
            match change.kind {
                ChangeKind::Join { node } => member_mut(metadata, node)?.status = MemberStatus::Normal,
                ChangeKind::Leave { node } | ChangeKind::Remove { node } => {
                    metadata.members.remove(&node);
                }
                ChangeKind::Replace { old, new } => {
                    metadata.members.remove(&old);
                    member_mut(metadata, new)?.status = MemberStatus::Normal;
                }
            }
            metadata.change = None;
        }
        Command::AbortChange { id } => {
            let change = the_change(metadata, *id)?;
            match change.kind {
                ChangeKind::Join { node } | ChangeKind::Replace { new: node, .. } => {
                    metadata.members.remove(&node);
                }
                ChangeKind::Leave { node } | ChangeKind::Remove { node } => {
                    member_mut(metadata, node)?.status = MemberStatus::Normal;
                }
            }
            metadata.change = None;
        }
        Command::App(_) => unreachable!("app commands go to the app state machine"),
    }
    Ok(())
}

fn start(metadata: &mut ClusterMetadata, index: u64, kind: ChangeKind) {
    metadata.change = Some(TopologyChange { id: index, kind });
}

fn member_mut(metadata: &mut ClusterMetadata, host: HostId) -> Result<&mut MemberRecord, String> {
    metadata
        .members
        .get_mut(&host)
        .ok_or_else(|| format!("{host} is not a member"))
}

fn no_change_in_progress(metadata: &ClusterMetadata) -> Result<(), String> {
    match &metadata.change {
        None => Ok(()),
        Some(change) => Err(format!(
            "{change} is in progress: one topology change at a time; wait for it to finish (hayate \
             netstats shows its streams), or remove a node that will never finish joining with hayate \
             removenode"
        )),
    }
}

/// The change in progress, if it is the one started at `id`.
fn the_change(metadata: &ClusterMetadata, id: u64) -> Result<TopologyChange, String> {
    match &metadata.change {
        Some(change) if change.id == id => Ok(change.clone()),
        Some(change) => Err(format!(
            "the change started at epoch {id} is over; {change} is in progress"
        )),
        None => Err(format!(
            "the change started at epoch {id} is over; no change is in progress"
        )),
    }
}

/// Whether `record` may join: `Ok(true)` if the very same record is already there (a retried
/// join), `Ok(false)` if it is new and takes nothing another member has, otherwise why not.
/// The tokens of `replacing` (the member a replacement takes the place of) do not count as
/// taken.
pub(crate) fn check_new_member(
    metadata: &ClusterMetadata,
    record: &MemberRecord,
    replacing: Option<HostId>,
) -> Result<bool, String> {
    let host = record.info.host_id;
    if let Some(existing) = metadata.members.get(&host) {
        return if existing == record {
            Ok(true)
        } else {
            Err(format!(
                "{host} is already a member, with other tokens or addresses"
            ))
        };
    }
    if record.tokens.len() > TOKENS_PER_MEMBER_MAX {
        return Err(format!(
            "{host} has {} tokens, more than the {TOKENS_PER_MEMBER_MAX} allowed",
            record.tokens.len()
        ));
    }
    let mut own = BTreeSet::new();
    for token in &record.tokens {
        if !own.insert(*token) {
            return Err(format!("{host} lists token {token} twice"));
        }
    }
    for (other, existing) in &metadata.members {
        if other.raft_id() == host.raft_id() {
            return Err(format!(
                "{host} has the same Raft id ({}) as member {other}: give the new node another host id",
                host.raft_id()
            ));
        }
        if Some(*other) == replacing {
            continue;
        }
        if let Some(token) = existing.tokens.iter().find(|t| own.contains(t)) {
            return Err(format!("token {token} of {host} is already owned by {other}"));
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};

    use super::*;
    use crate::node::{HostId, NodeInfo, Placement};

    fn record(first_byte: u8, tokens: &[i64]) -> MemberRecord {
        let mut id = [7u8; 16];
        id[0] = first_byte;
        let ip = IpAddr::V4(Ipv4Addr::new(127, 0, 0, first_byte));
        MemberRecord {
            info: NodeInfo {
                host_id: HostId(id),
                placement: Placement {
                    data_center: "dc1".to_owned(),
                    rack: "r1".to_owned(),
                },
                listen_address: ip,
                storage_port: 7000,
                cql_address: SocketAddr::new(ip, 9042),
                release_version: "4.1.0".to_owned(),
            },
            tokens: tokens.to_vec(),
            status: MemberStatus::Joining,
        }
    }

    #[test]
    fn members_take_only_what_is_free() {
        let mut m = ClusterMetadata::default();
        let a = record(1, &[10, 20]);
        assert_eq!(
            apply_member_command(&mut m, 1, &Command::AddMember(a.clone())),
            CommandResult::Done
        );
        // The same record again: a retried join.
        assert_eq!(
            apply_member_command(&mut m, 1, &Command::AddMember(a.clone())),
            CommandResult::Done
        );
        assert_eq!(m.members.len(), 1);

        let taken = apply_member_command(&mut m, 1, &Command::AddMember(record(2, &[30, 20])));
        assert!(
            matches!(&taken, CommandResult::Refused(r) if r.contains("token 20")),
            "{taken:?}"
        );
        let twice = apply_member_command(&mut m, 1, &Command::AddMember(record(2, &[30, 30])));
        assert!(
            matches!(&twice, CommandResult::Refused(r) if r.contains("twice")),
            "{twice:?}"
        );
        let mut same_raft_id = record(1, &[40]);
        same_raft_id.info.host_id.0[15] = 0;
        let clash = apply_member_command(&mut m, 1, &Command::AddMember(same_raft_id));
        assert!(
            matches!(&clash, CommandResult::Refused(r) if r.contains("Raft id")),
            "{clash:?}"
        );
        let mut moved = a.clone();
        moved.tokens = vec![11];
        let other = apply_member_command(&mut m, 1, &Command::AddMember(moved));
        assert!(
            matches!(&other, CommandResult::Refused(r) if r.contains("already a member")),
            "{other:?}"
        );
        assert_eq!(m.members.len(), 1);

        let b = record(2, &[30]);
        assert_eq!(
            apply_member_command(&mut m, 1, &Command::AddMember(b.clone())),
            CommandResult::Done
        );
        assert_eq!(m.token_owner(30), Some(b.info.host_id));
        let set = Command::SetStatus {
            host: b.info.host_id,
            status: MemberStatus::Normal,
        };
        assert_eq!(apply_member_command(&mut m, 1, &set), CommandResult::Done);
        assert_eq!(m.members[&b.info.host_id].status, MemberStatus::Normal);
        let remove = Command::RemoveMember(a.info.host_id);
        assert_eq!(apply_member_command(&mut m, 1, &remove), CommandResult::Done);
        assert!(matches!(
            apply_member_command(&mut m, 1, &remove),
            CommandResult::Refused(_)
        ));
        assert_eq!(m.token_owner(10), None);
    }

    fn normal(first_byte: u8, tokens: &[i64]) -> MemberRecord {
        MemberRecord {
            status: MemberStatus::Normal,
            ..record(first_byte, tokens)
        }
    }

    /// Three normal members owning tokens 10/20/30.
    fn three() -> ClusterMetadata {
        let mut m = ClusterMetadata::default();
        for (i, t) in [(1, 10), (2, 20), (3, 30)] {
            assert_eq!(
                apply_member_command(&mut m, 1, &Command::AddMember(normal(i, &[t]))),
                CommandResult::Done
            );
        }
        m
    }

    fn hosts(ring: &crate::ring::TokenRing) -> Vec<HostId> {
        ring.nodes().iter().map(|n| n.host).collect()
    }

    fn refused(result: CommandResult, words: &str) {
        assert!(
            matches!(&result, CommandResult::Refused(r) if r.contains(words)),
            "{result:?} should say {words:?}"
        );
    }

    #[test]
    fn a_join_is_pending_until_it_finishes() {
        let mut m = three();
        let joiner = record(4, &[25]);
        let id = joiner.info.host_id;
        assert_eq!(
            apply_member_command(&mut m, 7, &Command::StartJoin(joiner.clone())),
            CommandResult::Done
        );
        assert_eq!(
            m.change,
            Some(TopologyChange {
                id: 7,
                kind: ChangeKind::Join { node: id }
            })
        );
        // Reads follow the three; writes also reach the fourth.
        assert_eq!(m.ring().expect("ring").nodes().len(), 3);
        let pending = m.pending_ring().expect("a change").expect("ring");
        assert!(hosts(&pending).contains(&id));
        // One change at a time, and the refusal names the one in progress.
        refused(
            apply_member_command(&mut m, 8, &Command::StartJoin(record(5, &[26]))),
            "join of",
        );
        refused(
            apply_member_command(&mut m, 8, &Command::StartLeave(normal(1, &[10]).info.host_id)),
            "in progress",
        );
        // A finish for another change does nothing.
        refused(
            apply_member_command(&mut m, 8, &Command::FinishChange { id: 6 }),
            "is over",
        );
        assert_eq!(
            apply_member_command(&mut m, 9, &Command::FinishChange { id: 7 }),
            CommandResult::Done
        );
        assert_eq!(m.change, None);
        assert_eq!(m.members[&id].status, MemberStatus::Normal);
        assert_eq!(m.ring().expect("ring").nodes().len(), 4);
        assert!(m.pending_ring().is_none());
        refused(
            apply_member_command(&mut m, 10, &Command::FinishChange { id: 7 }),
            "no change",
        );
    }

    #[test]
    fn an_aborted_join_leaves_the_ring_as_it_was() {
        let mut m = three();
        let before = m.clone();
        let joiner = record(4, &[25]);
        apply_member_command(&mut m, 7, &Command::StartJoin(joiner));
        assert_eq!(
            apply_member_command(&mut m, 8, &Command::AbortChange { id: 7 }),
            CommandResult::Done
        );
        assert_eq!(m.members, before.members);
        assert_eq!(m.change, None);
        // A join needs its own tokens, and status joining.
        refused(
            apply_member_command(&mut m, 9, &Command::StartJoin(record(4, &[20]))),
            "token 20",
        );
        refused(
            apply_member_command(&mut m, 9, &Command::StartJoin(normal(4, &[21]))),
            "status joining",
        );
        assert_eq!(m.change, None);
    }

    #[test]
    fn a_leave_and_its_abort() {
        let mut m = three();
        let leaver = normal(2, &[20]).info.host_id;
        assert_eq!(
            apply_member_command(&mut m, 5, &Command::StartLeave(leaver)),
            CommandResult::Done
        );
        assert_eq!(m.members[&leaver].status, MemberStatus::Leaving);
        assert_eq!(
            m.ring().expect("ring").nodes().len(),
            3,
            "a leaving node still serves reads"
        );
        assert!(!hosts(&m.pending_ring().expect("change").expect("ring")).contains(&leaver));
        assert_eq!(
            apply_member_command(&mut m, 6, &Command::AbortChange { id: 5 }),
            CommandResult::Done
        );
        assert_eq!(m.members[&leaver].status, MemberStatus::Normal);
        apply_member_command(&mut m, 7, &Command::StartLeave(leaver));
        assert_eq!(
            apply_member_command(&mut m, 8, &Command::FinishChange { id: 7 }),
            CommandResult::Done
        );
        assert!(!m.members.contains_key(&leaver));
        // The last member cannot leave.
        let mut one = ClusterMetadata::default();
        let only = normal(1, &[10]);
        apply_member_command(&mut one, 1, &Command::AddMember(only.clone()));
        refused(
            apply_member_command(&mut one, 2, &Command::StartLeave(only.info.host_id)),
            "last member",
        );
    }

    #[test]
    fn a_replacement_takes_the_old_tokens() {
        let mut m = three();
        let old = normal(3, &[30]).info.host_id;
        let new = record(9, &[30]);
        // Other tokens than the old node's are refused; so is a replacement of a non-member.
        refused(
            apply_member_command(
                &mut m,
                4,
                &Command::StartReplace {
                    old,
                    new: record(9, &[31]),
                },
            ),
            "exactly the tokens",
        );
        refused(
            apply_member_command(
                &mut m,
                4,
                &Command::StartReplace {
                    old: record(8, &[1]).info.host_id,
                    new: new.clone(),
                },
            ),
            "not a member",
        );
        assert_eq!(
            apply_member_command(
                &mut m,
                4,
                &Command::StartReplace {
                    old,
                    new: new.clone()
                }
            ),
            CommandResult::Done
        );
        // The old node keeps serving reads (it is dead; the others answer), the new one is pending.
        let read = hosts(&m.ring().expect("the read ring builds despite the shared tokens"));
        assert!(read.contains(&old) && !read.contains(&new.info.host_id));
        let pending = hosts(&m.pending_ring().expect("change").expect("ring"));
        assert!(!pending.contains(&old) && pending.contains(&new.info.host_id));
        assert_eq!(
            apply_member_command(&mut m, 5, &Command::FinishChange { id: 4 }),
            CommandResult::Done
        );
        assert!(!m.members.contains_key(&old));
        assert_eq!(m.members[&new.info.host_id].status, MemberStatus::Normal);
        assert_eq!(m.token_owner(30), Some(new.info.host_id));
    }

    #[test]
    fn a_removal_forgets_the_node_when_it_finishes() {
        let mut m = three();
        let dead = normal(1, &[10]).info.host_id;
        assert_eq!(
            apply_member_command(&mut m, 4, &Command::StartRemove(dead)),
            CommandResult::Done
        );
        assert_eq!(m.members[&dead].status, MemberStatus::Leaving);
        assert_eq!(
            apply_member_command(&mut m, 5, &Command::FinishChange { id: 4 }),
            CommandResult::Done
        );
        assert!(!m.members.contains_key(&dead));
        assert_eq!(m.ring().expect("ring").nodes().len(), 2);
    }
}
