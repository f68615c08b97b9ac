//! Merging several replicas' answers to one read, and working out what each was missing.
//!
//! Every version of a row is merged by last-write-wins ([`hayate_storage::Row::merge`]), so the
//! answer is the same whatever order replicas answered in, and a tombstone on one replica wins
//! over older data on another. A replica whose version differs from the merged one gets the
//! merged row as a repair (a replica merges it into what it has, so sending the whole row is
//! safe, and converges).
//!
//! A replica that stopped at the read's limit may hold more rows after its last one, which the
//! others returned: rows past the earliest such stopping point are left out of this answer
//! (the caller reads on from there), since their merge could miss that replica's version.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use std::ops::Bound;

use hayate_storage::{PartitionTombstones, Row};

use super::ReadResult;
use crate::replica::{Mutation, MutationKind, ReadCommand, ReadResponse, ReplicaRow};

/// The merged answer, and the repairs each replica (by index in the responses) needs.
pub(crate) struct Merged {
    pub result: ReadResult,
    pub repairs: Vec<Vec<Mutation>>,
}

/// A row's place in read order.
#[derive(Clone, PartialEq, Eq)]
struct Key {
    token: i64,
    partition: Vec<u8>,
    clustering: Vec<u8>,
    reverse: bool,
}

impl Ord for Key {
    fn cmp(&self, other: &Key) -> Ordering {
        let c = (self.token, &self.partition).cmp(&(other.token, &other.partition));
        let within = self.clustering.cmp(&other.clustering);
        c.then(if self.reverse { within.reverse() } else { within })
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

fn key(row: &ReplicaRow, reverse: bool) -> Key {
    Key {
        token: row.token,
        partition: row.partition.clone(),
        clustering: row.clustering.clone(),
        reverse,
    }
}

pub(crate) fn merge(command: &ReadCommand, responses: Vec<ReadResponse>, now_s: u32) -> Merged {
    let reverse = matches!(command, ReadCommand::Partition(p) if p.reverse);
    let table = command.table();
    let limit = command.limit();
    // The earliest place a replica stopped at its limit: nothing after it is complete.
    let horizon: Option<Key> = responses
        .iter()
        .filter(|r| r.more)
        .filter_map(|r| r.rows.last().map(|row| key(row, reverse)))
        .min();
    let any_more = responses.iter().any(|r| r.more);
    let replicas = responses.len();
    // The partitions' range and partition tombstones, joined across replicas: they shadow the
    // rows of every replica, including rows a replica that took the delete never had.
    let mut tombstones: BTreeMap<(i64, Vec<u8>), PartitionTombstones> = BTreeMap::new();
    let mut held: Vec<BTreeMap<(i64, Vec<u8>), PartitionTombstones>> = vec![BTreeMap::new(); replicas];
    for (i, response) in responses.iter().enumerate() {
        for t in &response.tombstones {
            let key = (t.token, t.partition.clone());
            tombstones
                .entry(key.clone())
                .or_default()
                .merge(t.tombstones.clone());
            held[i].entry(key).or_default().merge(t.tombstones.clone());
        }
    }
    let mut versions: BTreeMap<Key, Vec<Option<Row>>> = BTreeMap::new();
    for (i, response) in responses.into_iter().enumerate() {
        for row in response.rows {
            let k = key(&row, reverse);
            if horizon.as_ref().is_some_and(|h| k > *h) {
                continue;
            }
            versions.entry(k).or_insert_with(|| vec![None; replicas])[i] = Some(row.row);
        }
    }
    let mut result = ReadResult {
        rows: Vec::with_capacity(versions.len()),
        more: any_more,
    };
    let mut repairs: Vec<Vec<Mutation>> = vec![Vec::new(); replicas];
    let mut live = 0usize;
    for (k, rows) in versions {
        if live == limit {
            result.more = true;
            break;
        }
        let mut merged: Option<Row> = None;
        for version in rows.iter().flatten() {
            match &mut merged {
                None => merged = Some(version.clone()),
                // No purge here: a tombstone must reach every replica before it may go.
                Some(m) => m.merge(version.clone(), now_s, 0),
            }
        }
        let mut merged = merged.expect("every key has at least one version");
        if let Some(t) = tombstones.get(&(k.token, k.partition.clone())) {
            t.shadow(&k.clustering, &mut merged, now_s);
        }
        for (i, version) in rows.iter().enumerate() {
            if version.as_ref() != Some(&merged) {
                repairs[i].push(Mutation {
                    table,
                    token: k.token,
                    partition: k.partition.clone(),
                    kind: MutationKind::Row {
                        clustering: k.clustering.clone(),
                        update: merged.clone(),
                    },
                });
            }
        }
        live += usize::from(merged.is_live(now_s));
        result.rows.push(ReplicaRow {
            token: k.token,
            partition: k.partition,
            clustering: k.clustering,
            row: merged,
        });
    }
    // A replica that lacks some of the tombstones gets them all again (joining is idempotent).
    for (i, held) in held.iter().enumerate() {
        for (key, t) in &tombstones {
            let mut theirs = held.get(key).cloned().unwrap_or_default();
            let before = theirs.clone();
            theirs.merge(t.clone());
            if theirs == before {
                continue;
            }
            let deletions = t
                .partition
                .map(|d| (Bound::Unbounded, Bound::Unbounded, d))
                .into_iter()
                .chain(
                    t.ranges
                        .iter()
                        .map(|r| (r.start.clone(), r.end.clone(), r.deletion)),
                );
            for (start, end, deletion) in deletions {
                repairs[i].push(Mutation {
                    table,
                    token: key.0,
                    partition: key.1.clone(),
                    kind: MutationKind::DeleteRange { start, end, deletion },
                });
            }
        }
    }
    Merged { result, repairs }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replica::{RangeRead, RangeStart};
    use hayate_storage::Cell;

    fn row(c: u8, ts: i64, value: u8) -> ReplicaRow {
        let mut r = Row::default();
        r.cells.push(Cell::live(1, ts, vec![value]));
        ReplicaRow {
            token: 5,
            partition: b"p".to_vec(),
            clustering: vec![c],
            row: r,
        }
    }

    fn deleted(c: u8, ts: i64) -> ReplicaRow {
        ReplicaRow {
            token: 5,
            partition: b"p".to_vec(),
            clustering: vec![c],
            row: Row::deleted(ts, 100),
        }
    }

    fn range(limit: usize) -> ReadCommand {
        ReadCommand::Range(RangeRead {
            table: 1,
            start: RangeStart::Token(i64::MIN),
            end_token: i64::MAX,
            limit,
            index: None,
        })
    }

    #[test]
    fn the_newest_version_wins_and_the_others_are_repaired() {
        let a = ReadResponse {
            rows: vec![row(1, 10, 1), row(2, 10, 2)],
            more: false,
            ..ReadResponse::default()
        };
        let b = ReadResponse {
            rows: vec![row(1, 20, 9), deleted(2, 30)],
            more: false,
            ..ReadResponse::default()
        };
        let m = merge(&range(10), vec![a, b], 1000);
        assert_eq!(m.result.rows.len(), 2);
        assert_eq!(m.result.rows[0].row.cells[0].value_at(1000), Some(&[9u8][..]));
        assert!(!m.result.rows[1].row.is_live(1000), "the tombstone wins");
        assert_eq!(m.repairs[0].len(), 2, "a was behind on both rows");
        assert!(m.repairs[1].is_empty(), "b had the newest of both");
    }

    #[test]
    fn rows_past_a_replica_that_stopped_at_its_limit_wait_for_the_next_read() {
        let a = ReadResponse {
            rows: vec![row(1, 10, 1), row(2, 10, 2)],
            more: true,
            ..ReadResponse::default()
        };
        let b = ReadResponse {
            rows: vec![row(1, 10, 1), row(2, 10, 2), row(3, 10, 3)],
            more: false,
            ..ReadResponse::default()
        };
        let m = merge(&range(2), vec![a, b], 1000);
        assert_eq!(m.result.rows.len(), 2);
        assert!(m.result.more);
        assert!(
            m.repairs.iter().all(Vec::is_empty),
            "row 3 is not repaired: a may hold it"
        );
    }

    #[test]
    fn a_missing_row_is_repaired_on_the_replica_without_it() {
        let a = ReadResponse::default();
        let b = ReadResponse {
            rows: vec![row(7, 1, 1)],
            more: false,
            ..ReadResponse::default()
        };
        let m = merge(&range(10), vec![a, b], 1000);
        assert_eq!(m.repairs[0].len(), 1);
        assert!(m.repairs[1].is_empty());
    }
}
