//! Counters, replicated as Cassandra replicates them: one replica of the partition, the leader,
//! adds an increment to its own shard of the counter and sends the shard's new state to the
//! others, which merge shards; the counter's value is the sum of its shards.
//!
//! A shard is one cell of the counter's column, its path the leader's host id (16 bytes), its
//! value the shard's count (i64, big-endian), its timestamp the shard's clock: each new state of a
//! shard carries a later timestamp than the one before, so that the storage engine's
//! last-write-wins merge of cells keeps, per shard, the newest state, whatever order replicas,
//! hints and read repair deliver them in. Only the leader writes its shard, under a lock, so two
//! increments it leads are never merged away: each reads the state the one before it wrote.
//!
//! An increment that times out may have been added or not; retrying it may count it twice.

use std::sync::{Arc, Mutex, MutexGuard};

use hayate_storage::row::{Cell, Row};
use hayate_storage::TableId;

use crate::node::HostId;
use crate::replica::{
    Mutation, MutationKind, PartitionRead, ReadCommand, Replica, ReplicaError, ReplicaErrorKind,
};

/// One increment (or decrement, when negative) of one counter cell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterUpdate {
    pub table: TableId,
    pub token: i64,
    pub partition: Vec<u8>,
    /// Empty for a table without clustering columns, or the static row.
    pub clustering: Vec<u8>,
    pub column: u32,
    pub delta: i64,
}

/// The bytes of a shard's count.
const SHARD_VALUE_BYTES: usize = 8;

/// A shard's count, if `cell` holds one.
pub fn shard_count(cell: &Cell) -> Option<i64> {
    let bytes: [u8; SHARD_VALUE_BYTES] = cell.value_at(0)?.try_into().ok()?;
    Some(i64::from_be_bytes(bytes))
}

/// The value of counter column `column` in `row`: the sum of its live shards at `now_s`, or
/// `None` when it has none (never incremented, or deleted).
pub fn value(row: &Row, column: u32, now_s: u32) -> Option<i64> {
    let visible = row.visible(now_s);
    let mut shards = visible.cells.iter().filter(|c| c.column == column).peekable();
    shards.peek()?;
    Some(
        shards
            .filter_map(shard_count)
            .fold(0i64, |a, b| a.wrapping_add(b)),
    )
}

/// Rows' locks, by a hash of the row: shared by every replica in the process, which costs
/// nothing since a lock is never held across an `.await`.
const LOCK_STRIPES: usize = 256;
static LOCKS: [Mutex<()>; LOCK_STRIPES] = [const { Mutex::new(()) }; LOCK_STRIPES];

fn lock(u: &CounterUpdate) -> MutexGuard<'static, ()> {
    let mut h: u64 = (u.token as u64) ^ (u64::from(u.table) << 32);
    for b in &u.clustering {
        h = h.rotate_left(5) ^ u64::from(*b);
    }
    let stripe = h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56;
    LOCKS[stripe as usize % LOCK_STRIPES]
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Leads `updates` on this replica (`leader`): adds each to the leader's shard, writes the new
/// shards here, and returns them as the mutations the other replicas merge. Reads the device:
/// the caller runs it where blocking is allowed.
pub fn lead(
    replica: &dyn Replica,
    leader: HostId,
    updates: &[CounterUpdate],
    now_us: i64,
) -> Result<Vec<Mutation>, ReplicaError> {
    let mut out = Vec::with_capacity(updates.len());
    for u in updates {
        let _lock = lock(u);
        let read = PartitionRead {
            table: u.table,
            token: u.token,
            partition: u.partition.clone(),
            start: std::ops::Bound::Included(u.clustering.clone()),
            end: std::ops::Bound::Included(u.clustering.clone()),
            reverse: false,
            limit: 1,
        };
        let current = replica.read(&ReadCommand::Partition(read))?;
        let mine = current.rows.first().and_then(|r| {
            r.row
                .cells
                .iter()
                .find(|c| c.column == u.column && c.path == leader.0)
        });
        let (count, clock) = mine.map_or((0, 0), |c| (shard_count(c).unwrap_or(0), c.timestamp_us));
        let shard = Cell {
            path: leader.0.to_vec(),
            ..Cell::live(
                u.column,
                now_us.max(clock + 1),
                count.wrapping_add(u.delta).to_be_bytes().to_vec(),
            )
        };
        let mutation = Mutation {
            table: u.table,
            token: u.token,
            partition: u.partition.clone(),
            kind: MutationKind::Row {
                clustering: u.clustering.clone(),
                update: Row {
                    cells: vec![shard],
                    ..Row::default()
                },
            },
        };
        // Written here before the next update of the same counter reads it.
        replica.apply(vec![mutation.clone()])?;
        out.push(mutation);
    }
    Ok(out)
}

/// Runs [`lead`] where it may block: on the blocking pool when `blocking` (the replica reads
/// the device ahead of its few service threads, or waits for the device on writes), here
/// otherwise.
pub async fn run(
    replica: &Arc<dyn Replica>,
    leader: HostId,
    updates: Vec<CounterUpdate>,
    now_us: i64,
    blocking: bool,
) -> Result<Vec<Mutation>, ReplicaError> {
    if !blocking {
        return lead(&**replica, leader, &updates, now_us);
    }
    let replica = replica.clone();
    tokio::task::spawn_blocking(move || lead(&*replica, leader, &updates, now_us))
        .await
        .unwrap_or_else(|e| {
            Err(ReplicaError::new(
                ReplicaErrorKind::Failed,
                format!("counter update failed: {e}"),
            ))
        })
}

#[cfg(test)]
mod tests {
    use hayate_storage::{Engine, NamespaceConfig};

    use super::*;

    fn update(delta: i64) -> CounterUpdate {
        CounterUpdate {
            table: 2000,
            token: hayate_storage::token::token(b"views"),
            partition: b"views".to_vec(),
            clustering: Vec::new(),
            column: 1,
            delta,
        }
    }

    fn read(e: &Engine) -> Row {
        let u = update(0);
        let read = PartitionRead {
            table: u.table,
            token: u.token,
            partition: u.partition,
            start: std::ops::Bound::Included(Vec::new()),
            end: std::ops::Bound::Included(Vec::new()),
            reverse: false,
            limit: 1,
        };
        let response = e.read(&ReadCommand::Partition(read)).expect("read");
        response
            .rows
            .into_iter()
            .next()
            .map(|r| r.row)
            .unwrap_or_default()
    }

    #[test]
    fn each_leader_adds_to_its_own_shard_and_the_value_is_their_sum() {
        let a = Engine::open(NamespaceConfig::in_memory("counter-a", 64 << 20)).expect("engine");
        let b = Engine::open(NamespaceConfig::in_memory("counter-b", 64 << 20)).expect("engine");
        let (ha, hb) = (HostId([1; 16]), HostId([2; 16]));
        // Replica a leads two increments, b one; each sends its new shard to the other.
        let from_a1 = lead(&a, ha, &[update(5)], 100).expect("lead");
        let from_b = lead(&b, hb, &[update(-2)], 50).expect("lead");
        let from_a2 = lead(&a, ha, &[update(10)], 90).expect("lead");
        assert_eq!(value(&read(&a), 1, 0), Some(15));
        // b hears a's shards out of order: the newer state wins.
        b.apply(from_a2.clone()).expect("apply");
        b.apply(from_a1).expect("apply");
        a.apply(from_b).expect("apply");
        assert_eq!(value(&read(&a), 1, 0), Some(13));
        assert_eq!(value(&read(&b), 1, 0), Some(13));
        // The second state of a's shard carries a later clock though a's clock went back.
        let Some(MutationKind::Row { update, .. }) = from_a2.first().map(|m| &m.kind) else {
            panic!("a row mutation");
        };
        assert_eq!(update.cells[0].timestamp_us, 101);
    }

    #[test]
    fn a_counter_never_incremented_or_deleted_has_no_value() {
        assert_eq!(value(&Row::default(), 1, 0), None);
        let a = Engine::open(NamespaceConfig::in_memory("counter-del", 64 << 20)).expect("engine");
        lead(&a, HostId([1; 16]), &[update(3)], 100).expect("lead");
        let mut row = read(&a);
        row.merge(Row::deleted(200, 0), 0, 0);
        assert_eq!(value(&row, 1, 0), None);
    }
}
