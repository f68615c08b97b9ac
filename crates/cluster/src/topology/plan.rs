//! What a topology change moves: for each table, the ranges each node takes over and where it
//! streams them from; and what a node keeps once a change is over. Pure functions of the rings,
//! so that every node that plans the same change plans it alike.

use std::collections::{BTreeSet, HashMap};

use hayate_storage::TableId;

use crate::consistency::Replication;
use crate::metadata::ChangeKind;
use crate::node::HostId;
use crate::ring::{ReplicaMap, Token, TokenRange, TokenRing, MINIMUM_TOKEN};

/// One range of one table that a node takes over, and where it may stream it from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub table: TableId,
    pub range: TokenRange,
    /// The node that takes the range over (a pending replica of it).
    pub to: HostId,
    /// Where to stream it from, best first: the replicas that give the range up (what a quorum
    /// of the old replicas wrote is on them, so the new replica set still holds it), then the
    /// other replicas; within each, those in `to`'s data center first, and among equals the one
    /// that is first source of the least so far (so that a replacement, where no replica gives
    /// anything up, reads from every remaining replica alike rather than mostly from the first
    /// in ring order). Never the dead node of a replacement or removal. Empty when no replica
    /// but a dead one holds the range.
    pub sources: Vec<HostId>,
}

/// The ranges the change moves, for every table, each with the node that takes it over.
pub fn transfers(
    current: &TokenRing,
    pending: &TokenRing,
    change: ChangeKind,
    tables: &[(TableId, Replication)],
) -> Vec<Transfer> {
    let gone = match change {
        ChangeKind::Replace { old, .. } => Some(old),
        ChangeKind::Remove { node } => Some(node),
        ChangeKind::Join { .. } | ChangeKind::Leave { .. } => None,
    };
    let dc = |host: HostId| -> &str {
        pending
            .node(host)
            .or_else(|| current.node(host))
            .map_or("", |n| n.placement.data_center.as_str())
    };
    let bounds = boundaries(current, pending);
    // How much of the ring (token span times tables) each node is first source of so far.
    let mut first_of: HashMap<HostId, u128> = HashMap::new();
    let mut out = Vec::new();
    for replication in &placed_replications(tables) {
        let table_count = tables.iter().filter(|(_, r)| r == replication).count() as u128;
        let now = current.replica_map(replication);
        let then = pending.replica_map(replication);
        // (to, sources, range) per piece, merged with the piece before when they agree.
        let mut moved: Vec<(HostId, Vec<HostId>, TokenRange)> = Vec::new();
        for range in pieces(&bounds) {
            let natural = now.replicas(range.end_inclusive);
            let final_replicas = then.replicas(range.end_inclusive);
            for &to in final_replicas.iter().filter(|h| !natural.contains(h)) {
                let giving_up = natural.iter().filter(|h| !final_replicas.contains(h));
                let others = natural.iter().filter(|h| final_replicas.contains(h));
                let mut sources = Vec::new();
                for group in [giving_up.copied().collect::<Vec<_>>(), others.copied().collect()] {
                    let (mut near, mut far): (Vec<HostId>, Vec<HostId>) = group
                        .into_iter()
                        .filter(|&h| Some(h) != gone && h != to)
                        .partition(|&h| dc(h) == dc(to));
                    // Stable: equals keep their ring order, so every node plans alike.
                    near.sort_by_key(|h| first_of.get(h).copied().unwrap_or(0));
                    far.sort_by_key(|h| first_of.get(h).copied().unwrap_or(0));
                    sources.extend(near);
                    sources.extend(far);
                }
                if let Some(&first) = sources.first() {
                    *first_of.entry(first).or_insert(0) += span_of(&range) * table_count;
                }
                match moved.iter_mut().rev().find(|(t, _, _)| *t == to) {
                    Some((_, s, r)) if *s == sources && r.end_inclusive == range.start_exclusive => {
                        r.end_inclusive = range.end_inclusive;
                    }
                    _ => moved.push((to, sources, range)),
                }
            }
        }
        for (table, _) in tables.iter().filter(|(_, r)| r == replication) {
            out.extend(moved.iter().map(|(to, sources, range)| Transfer {
                table: *table,
                range: *range,
                to: *to,
                sources: sources.clone(),
            }));
        }
    }
    out
}

/// The ranges `host` keeps under `replication`: where it is a replica of the ring, or a pending
/// one of the change in progress; merged and in token order.
pub fn kept_ranges(
    current: &TokenRing,
    pending: Option<&TokenRing>,
    host: HostId,
    replication: &Replication,
) -> Vec<TokenRange> {
    let now = current.replica_map(replication);
    let then: Option<ReplicaMap> = pending.map(|p| p.replica_map(replication));
    let bounds = match pending {
        Some(p) => boundaries(current, p),
        None => boundaries(current, current),
    };
    let mut kept: Vec<TokenRange> = Vec::new();
    for range in pieces(&bounds) {
        let holds = now.replicas(range.end_inclusive).contains(&host)
            || then
                .as_ref()
                .is_some_and(|m| m.replicas(range.end_inclusive).contains(&host));
        if !holds {
            continue;
        }
        match kept.last_mut() {
            Some(last) if last.end_inclusive == range.start_exclusive => {
                last.end_inclusive = range.end_inclusive
            }
            _ => kept.push(range),
        }
    }
    kept
}

/// The ranges of the whole ring, `(i64::MIN, i64::MAX]`, that `kept` (merged, in token order)
/// does not cover.
pub fn complement(kept: &[TokenRange]) -> Vec<TokenRange> {
    let mut out = Vec::new();
    let mut from = MINIMUM_TOKEN;
    for r in kept {
        if r.start_exclusive > from {
            out.push(TokenRange {
                start_exclusive: from,
                end_inclusive: r.start_exclusive,
            });
        }
        from = from.max(r.end_inclusive);
    }
    if from < Token::MAX {
        out.push(TokenRange {
            start_exclusive: from,
            end_inclusive: Token::MAX,
        });
    }
    out
}

/// Each replication the ring places data by (every one but `LocalStrategy`'s), once.
pub fn placed_replications(tables: &[(TableId, Replication)]) -> Vec<Replication> {
    let mut out: Vec<Replication> = Vec::new();
    for (_, r) in tables {
        if !matches!(r, Replication::Local) && !out.contains(r) {
            out.push(r.clone());
        }
    }
    out
}

/// How many tokens `range` covers.
fn span_of(range: &TokenRange) -> u128 {
    (range.end_inclusive as i128 - range.start_exclusive as i128) as u128
}

/// Every token of both rings, sorted: within two of them, both rings name the same replicas.
fn boundaries(a: &TokenRing, b: &TokenRing) -> Vec<Token> {
    let set: BTreeSet<Token> = a.tokens().iter().chain(b.tokens()).map(|&(t, _)| t).collect();
    set.into_iter().collect()
}

/// The pieces of the ring between consecutive boundaries, the wrapping one split in two:
/// `(i64::MIN, first]`, ..., `(last, i64::MAX]` (see [`TokenRange`]).
fn pieces(bounds: &[Token]) -> Vec<TokenRange> {
    let mut out = Vec::with_capacity(bounds.len() + 1);
    let mut from = MINIMUM_TOKEN;
    for &t in bounds {
        if t > from {
            out.push(TokenRange {
                start_exclusive: from,
                end_inclusive: t,
            });
            from = t;
        }
    }
    if from < Token::MAX {
        out.push(TokenRange {
            start_exclusive: from,
            end_inclusive: Token::MAX,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::Placement;
    use crate::ring::RingNode;

    fn host(i: u8) -> HostId {
        HostId([i; 16])
    }

    fn node(i: u8, dc: &str, tokens: &[Token]) -> RingNode {
        RingNode {
            host: host(i),
            placement: Placement {
                data_center: dc.to_owned(),
                rack: "r1".to_owned(),
            },
            tokens: tokens.to_vec(),
        }
    }

    fn ring(nodes: &[RingNode]) -> TokenRing {
        TokenRing::new(nodes.to_vec()).expect("valid ring")
    }

    #[test]
    fn a_joining_node_streams_what_it_takes_from_the_node_that_gives_it_up() {
        let three = [
            node(1, "dc1", &[-100]),
            node(2, "dc1", &[0]),
            node(3, "dc1", &[100]),
        ];
        let current = ring(&three);
        let mut four = three.to_vec();
        four.push(node(4, "dc1", &[50]));
        let pending = ring(&four);
        let rf1 = Replication::Simple { factor: 1 };
        let moved = transfers(
            &current,
            &pending,
            ChangeKind::Join { node: host(4) },
            &[(7, rf1)],
        );
        // Node 4 takes (0, 50] from node 3, which owned (0, 100].
        assert_eq!(
            moved,
            vec![Transfer {
                table: 7,
                range: TokenRange {
                    start_exclusive: 0,
                    end_inclusive: 50
                },
                to: host(4),
                sources: vec![host(3)],
            }]
        );
        // With RF 2 it also becomes the second replica of (-100, 0], which node 2 held with 3
        // and gives up to it; the node giving the range up comes first, then the one keeping it.
        let rf2 = Replication::Simple { factor: 2 };
        let moved = transfers(
            &current,
            &pending,
            ChangeKind::Join { node: host(4) },
            &[(7, rf2)],
        );
        assert!(moved.iter().all(|t| t.to == host(4)));
        let total: u128 = moved.iter().map(|t| span_of(&t.range)).sum();
        assert_eq!(total, 150, "{moved:?}");
        for t in &moved {
            let now = current.replicas_for(&Replication::Simple { factor: 2 }, t.range.end_inclusive);
            let then = pending.replicas_for(&Replication::Simple { factor: 2 }, t.range.end_inclusive);
            let giving_up: Vec<HostId> = now.iter().copied().filter(|h| !then.contains(h)).collect();
            assert_eq!(t.sources[0], giving_up[0], "{t:?}");
            assert_eq!(t.sources.len(), 2);
        }
    }

    #[test]
    fn a_replacement_streams_from_the_other_replicas_never_the_dead_node() {
        let three = [
            node(1, "dc1", &[-100]),
            node(2, "dc1", &[0]),
            node(3, "dc1", &[100]),
        ];
        let current = ring(&three);
        let pending = ring(&[three[0].clone(), three[1].clone(), node(9, "dc1", &[100])]);
        let rf3 = Replication::Simple { factor: 3 };
        let change = ChangeKind::Replace {
            old: host(3),
            new: host(9),
        };
        let moved = transfers(&current, &pending, change, &[(1, rf3.clone()), (2, rf3)]);
        // The whole ring, for both tables, to node 9, from nodes 1 and 2.
        assert_eq!(
            moved.iter().map(|t| span_of(&t.range)).sum::<u128>(),
            2 * (u64::MAX as u128)
        );
        for t in &moved {
            assert_eq!(t.to, host(9));
            assert!(!t.sources.contains(&host(3)) && t.sources.len() == 2, "{t:?}");
        }
        // With RF 1 nobody else holds the dead node's ranges.
        let rf1 = Replication::Simple { factor: 1 };
        let moved = transfers(&current, &pending, change, &[(1, rf1)]);
        assert!(!moved.is_empty() && moved.iter().all(|t| t.sources.is_empty()));
    }

    /// A replacement in a 3-node ring at RF 3 once streamed 2/3 of the data from node 2 and
    /// 1/3 from node 1, because every range listed the remaining replicas in ring order and the
    /// first source is the one streamed from: node 2 sent twice what node 1 did, and the
    /// replacement took about twice as long as its sources' rate allowed.
    #[test]
    fn a_replacement_reads_from_every_remaining_replica_alike() {
        let tokens = crate::ring::initial_tokens(3, 16, 0);
        let nodes: Vec<RingNode> = (0..3u8)
            .map(|i| node(i + 1, "dc1", &tokens[i as usize]))
            .collect();
        let current = ring(&nodes);
        let pending = ring(&[nodes[0].clone(), nodes[1].clone(), node(9, "dc1", &tokens[2])]);
        let rf3 = Replication::Simple { factor: 3 };
        let change = ChangeKind::Replace {
            old: host(3),
            new: host(9),
        };
        let moved = transfers(&current, &pending, change, &[(1, rf3.clone()), (2, rf3)]);
        let first = |h: HostId| -> u128 {
            moved
                .iter()
                .filter(|t| t.sources[0] == h)
                .map(|t| span_of(&t.range))
                .sum()
        };
        let (one, two) = (first(host(1)) as f64, first(host(2)) as f64);
        let share = one / (one + two);
        assert!(
            (0.45..=0.55).contains(&share),
            "node 1 is first source of {share:.2} of the data, node 2 of {:.2}",
            1.0 - share
        );
        // Every range still lists both remaining replicas, the second as a fallback.
        assert!(moved.iter().all(|t| t.sources.len() == 2), "{moved:?}");
    }

    #[test]
    fn a_leaving_node_is_the_source_of_everything_it_hands_over() {
        let four = [
            node(1, "dc1", &[-100]),
            node(2, "dc1", &[0]),
            node(3, "dc1", &[100]),
            node(4, "dc1", &[200]),
        ];
        let current = ring(&four);
        let pending = ring(&[four[0].clone(), four[2].clone(), four[3].clone()]);
        let rf2 = Replication::Simple { factor: 2 };
        let moved = transfers(
            &current,
            &pending,
            ChangeKind::Leave { node: host(2) },
            &[(3, rf2)],
        );
        assert!(!moved.is_empty());
        for t in &moved {
            assert_eq!(t.sources[0], host(2), "{t:?}");
            assert_ne!(t.to, host(2));
        }
    }

    #[test]
    fn a_node_prefers_sources_in_its_own_data_center() {
        let nodes = [
            node(1, "dc1", &[-200]),
            node(2, "dc2", &[-100]),
            node(3, "dc1", &[0]),
            node(4, "dc2", &[100]),
        ];
        let current = ring(&nodes);
        let mut more = nodes.to_vec();
        more.push(node(5, "dc2", &[50]));
        let pending = ring(&more);
        let nts = Replication::NetworkTopology {
            factors: [("dc1".to_owned(), 2), ("dc2".to_owned(), 2)].into(),
        };
        let moved = transfers(
            &current,
            &pending,
            ChangeKind::Join { node: host(5) },
            &[(1, nts)],
        );
        assert!(!moved.is_empty());
        for t in &moved {
            assert!(
                [host(2), host(4)].contains(&t.sources[0]),
                "{t:?} should stream from dc2 first"
            );
        }
    }

    #[test]
    fn kept_ranges_and_their_complement_cover_the_ring() {
        let three = [
            node(1, "dc1", &[-100]),
            node(2, "dc1", &[0]),
            node(3, "dc1", &[100]),
        ];
        let current = ring(&three);
        let rf1 = Replication::Simple { factor: 1 };
        let kept = kept_ranges(&current, None, host(1), &rf1);
        // Node 1 owns the wrapping range: (100, MAX] and (MIN, -100].
        assert_eq!(
            kept,
            vec![
                TokenRange {
                    start_exclusive: i64::MIN,
                    end_inclusive: -100
                },
                TokenRange {
                    start_exclusive: 100,
                    end_inclusive: i64::MAX
                }
            ]
        );
        assert_eq!(
            complement(&kept),
            vec![TokenRange {
                start_exclusive: -100,
                end_inclusive: 100
            }]
        );
        assert!(complement(&[TokenRange {
            start_exclusive: i64::MIN,
            end_inclusive: i64::MAX
        }])
        .is_empty());
        // A joining node keeps its pending ranges.
        let mut four = three.to_vec();
        four.push(node(4, "dc1", &[50]));
        let pending = ring(&four);
        assert_eq!(
            kept_ranges(&current, Some(&pending), host(4), &rf1),
            vec![TokenRange {
                start_exclusive: 0,
                end_inclusive: 50
            }]
        );
        assert!(kept_ranges(&current, None, host(4), &rf1).is_empty());
    }
}
