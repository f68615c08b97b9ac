//! Replication-aware allocation, measured against the primary-ownership allocator: clusters grown
//! one node at a time with each, the loads compared after every join and after a node leaves.
//!
//! A node's load is its replicated ownership (`TokenRing::ownership` with the replication), the
//! share of all data it stores. The figures in the comments come from running these tests with
//! `--nocapture`; the bounds asserted leave room over them.

use super::*;
use crate::consistency::Replication;
use crate::node::Placement;
use crate::ring::tests::{node, random_ring, seeds, Rng};
use crate::ring::{RingNode, TokenRing, MINIMUM_TOKEN};

const NUM_TOKENS: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Allocator {
    /// `allocate_tokens_in`: primary ownership within the data center.
    Primary,
    /// `allocate_tokens_for_replication`.
    Replicated,
}

fn placement(dc: &str, rack: &str) -> Placement {
    Placement {
        data_center: dc.to_owned(),
        rack: rack.to_owned(),
    }
}

fn simple(factor: usize) -> Replication {
    Replication::Simple { factor }
}

fn nts(factors: &[(&str, usize)]) -> Replication {
    Replication::NetworkTopology {
        factors: factors.iter().map(|&(dc, f)| (dc.to_owned(), f)).collect(),
    }
}

/// How even the loads of a set of nodes are.
#[derive(Clone, Copy, Debug)]
struct Spread {
    /// The most loaded node's load over the least loaded one's.
    ratio: f64,
    /// The largest `|load / mean - 1|`.
    off_mean: f64,
}

fn spread_of(loads: &[f64]) -> Spread {
    let mean = loads.iter().sum::<f64>() / loads.len() as f64;
    let most = loads.iter().copied().fold(f64::MIN, f64::max);
    let least = loads.iter().copied().fold(f64::MAX, f64::min);
    Spread {
        ratio: most / least,
        off_mean: loads.iter().map(|l| (l / mean - 1.0).abs()).fold(0.0, f64::max),
    }
}

/// The spread of loads among the nodes of `dc` that `keep` selects.
fn spread(ring: &TokenRing, replication: &Replication, keep: impl Fn(&RingNode) -> bool) -> Spread {
    let shares = ring.ownership(Some(replication));
    let loads: Vec<f64> = ring
        .nodes()
        .iter()
        .filter(|n| keep(n))
        .map(|n| shares[&n.host])
        .collect();
    spread_of(&loads)
}

/// Three nodes of `dc`, evenly interleaved by `initial_tokens` from `offset`, one per rack if
/// `racks`, numbered from `first`.
fn three_nodes(dc: &str, offset: i64, racks: bool, first: u16) -> Vec<RingNode> {
    initial_tokens(3, NUM_TOKENS, offset)
        .into_iter()
        .enumerate()
        .map(|(i, tokens)| {
            let rack = if racks {
                format!("r{}", i + 1)
            } else {
                "r1".to_owned()
            };
            node(first + i as u16, dc, &rack, tokens)
        })
        .collect()
}

/// Adds node `n` at `at`, its tokens chosen by `allocator` for `replication`.
fn join(
    members: &mut Vec<RingNode>,
    n: u16,
    at: &Placement,
    allocator: Allocator,
    replication: &Replication,
) {
    let ring = TokenRing::new(members.clone()).expect("valid ring");
    let tokens = match allocator {
        Allocator::Primary => allocate_tokens_in(&ring, &at.data_center, NUM_TOKENS),
        Allocator::Replicated => allocate_tokens_for_replication(&ring, at, NUM_TOKENS, replication),
    };
    assert_eq!(tokens.len(), NUM_TOKENS);
    members.push(node(n, &at.data_center, &at.rack, tokens));
}

/// Grows a one-rack data center from 3 nodes (initial tokens from `offset`) to `nodes`, and
/// returns the spread of the loads after each join (4 nodes first).
fn grow_simple(factor: usize, nodes: u16, allocator: Allocator, offset: i64) -> Vec<Spread> {
    let replication = simple(factor);
    let mut members = three_nodes("dc1", offset, false, 0);
    (3..nodes)
        .map(|n| {
            join(&mut members, n, &placement("dc1", "r1"), allocator, &replication);
            let ring = TokenRing::new(members.clone()).expect("valid ring");
            spread(&ring, &replication, |_| true)
        })
        .collect()
}

fn ratios(spreads: &[Spread]) -> String {
    spreads
        .iter()
        .map(|s| format!("{:.3}", s.ratio))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Measured, most / least loaded after each join, 4 to 12 nodes of 16 tokens, one data center,
/// initial tokens from offset 12345:
///
/// ```text
/// factor  allocator   4     5     6     7     8     9     10    11    12
/// 1       primary     1.065 1.065 1.058 1.041 1.061 1.061 1.043 1.064 1.063
/// 1       replicated  1.000 1.000 1.001 1.001 1.001 1.002 1.005 1.013 1.005
/// 2       primary     1.612 1.384 1.261 1.333 1.283 1.263 1.253 1.352 1.502
/// 2       replicated  1.000 1.000 1.000 1.001 1.001 1.009 1.024 1.006 1.011
/// 3       primary     2.380 2.051 1.823 1.762 1.806 1.596 1.541 1.507 1.610
/// 3       replicated  1.000 1.009 1.001 1.021 1.004 1.004 1.020 1.008 1.018
/// ```
///
/// Balancing primary ranges leaves the factor-3 loads up to 2.4 apart: the joining node's
/// tokens also make it a replica of the two ranges before each, which that allocator does not
/// count.
#[test]
fn replicated_allocation_evens_out_simple_strategy_loads() {
    for (factor, bound) in [(1, 1.03), (2, 1.05), (3, 1.05)] {
        let primary = grow_simple(factor, 12, Allocator::Primary, 12_345);
        let replicated = grow_simple(factor, 12, Allocator::Replicated, 12_345);
        eprintln!("factor {factor} primary:    {}", ratios(&primary));
        eprintln!("factor {factor} replicated: {}", ratios(&replicated));
        for (step, spread) in replicated.iter().enumerate() {
            assert!(
                spread.ratio < bound,
                "factor {factor}, {} nodes: most / least loaded is {:.3}",
                step + 4,
                spread.ratio
            );
        }
        if factor == 1 {
            // At least as good as the allocator it replaces, at every step.
            for (step, (new, old)) in replicated.iter().zip(&primary).enumerate() {
                assert!(
                    new.ratio <= old.ratio,
                    "{} nodes: {new:?} against {old:?}",
                    step + 4
                );
            }
        }
    }
}

/// What the product needs: a 3-node cluster at factor 3 grown to 4 and then 5 nodes keeps every
/// node within 20% of an even share. Measured over the 20 offsets of `seeds()`: within 0.7%
/// (the primary allocator: up to 51% off).
///
/// 3 to 4 nodes is the hard step: every range has all three old nodes as replicas, and each
/// token of the new node takes over at least two whole ranges (it becomes a replica of the two
/// before it), so of the 36 of 48 ranges it must end up holding, 32 come in whole ranges and
/// the rest from where its tokens fall; the parabola of each range finds those points.
#[test]
fn growing_three_nodes_at_factor_three_keeps_every_node_near_an_even_share() {
    let mut worst: f64 = 0.0;
    for seed in seeds() {
        let offset = Rng::new(seed).token();
        for replication in [simple(3), nts(&[("dc1", 3)])] {
            let mut members = three_nodes("dc1", offset, false, 0);
            for n in 3..5 {
                join(
                    &mut members,
                    n,
                    &placement("dc1", "r1"),
                    Allocator::Replicated,
                    &replication,
                );
                let ring = TokenRing::new(members.clone()).expect("valid ring");
                let spread = spread(&ring, &replication, |_| true);
                worst = worst.max(spread.off_mean);
                assert!(
                    spread.off_mean < 0.02,
                    "seed {seed}, {replication:?}, {} nodes: {spread:?}; replay with HAYATE_SEED={seed}",
                    n + 1
                );
            }
        }
    }
    eprintln!("worst off an even share at 4 and 5 nodes: {:.2}%", worst * 100.0);
}

/// Measured, two data centers of 3 racks at factor 3 each, nodes joining each in turn with
/// racks taken in turn (so the racks are even at 3, 6, 9 and 12 nodes a data center); most /
/// least loaded in dc1 (dc2 is the same to the third decimal), then the worst within one rack:
///
/// ```text
/// nodes a DC          4     5     6     7     8     9     10    11    12
/// primary, DC         2.909 2.909 2.310 2.834 2.945 1.907 2.418 2.352 1.784
/// primary, rack       1.909 1.909 2.556 2.556 2.556 2.055 2.055 1.776 1.752
/// replicated, DC      2.000 2.000 1.000 1.500 1.500 1.000 1.333 1.333 1.000
/// replicated, rack    1.000 1.000 1.000 1.000 1.000 1.000 1.000 1.000 1.000
/// ```
///
/// With as many racks as replicas every range has one replica in each rack, so a rack's nodes
/// share a third of the data whatever their tokens: with racks of 2, 1 and 1 nodes the lone
/// nodes store twice what the others do. No allocator can do better than that ratio (the
/// node count of the largest rack over the smallest's); within each rack, the replicated
/// allocator makes the loads equal.
#[test]
fn replicated_allocation_evens_out_loads_within_racks() {
    let replication = nts(&[("dc1", 3), ("dc2", 3)]);
    for allocator in [Allocator::Primary, Allocator::Replicated] {
        let mut members = three_nodes("dc1", 12_345, true, 0);
        members.extend(three_nodes("dc2", 12_345 + (1 << 57), true, 100));
        let (mut in_dc, mut in_rack) = (Vec::new(), Vec::new());
        for k in 3..12u16 {
            let rack = format!("r{}", k % 3 + 1);
            for (dc, first) in [("dc1", 0), ("dc2", 100)] {
                join(
                    &mut members,
                    first + k,
                    &placement(dc, &rack),
                    allocator,
                    &replication,
                );
            }
            let ring = TokenRing::new(members.clone()).expect("valid ring");
            let dc_spread = spread(&ring, &replication, |n| n.placement.data_center == "dc1");
            // Node i of a data center is in rack i % 3 + 1.
            let rack_nodes = |rack: u16| (0..=k).filter(|i| i % 3 + 1 == rack).count() as f64;
            let mut worst_rack: f64 = 1.0;
            for dc in ["dc1", "dc2"] {
                for rack in ["r1", "r2", "r3"] {
                    let within = spread(&ring, &replication, |n| {
                        n.placement.data_center == dc && n.placement.rack == rack
                    });
                    worst_rack = worst_rack.max(within.ratio);
                }
                // No better than the racks' sizes allow; the replicated allocator reaches it.
                let sizes: Vec<f64> = (1..=3).map(rack_nodes).collect();
                let floor = sizes.iter().copied().fold(0.0, f64::max)
                    / sizes.iter().copied().fold(f64::MAX, f64::min);
                let whole = spread(&ring, &replication, |n| n.placement.data_center == dc);
                assert!(
                    whole.ratio >= floor - 1e-9,
                    "{allocator:?}, {} nodes: {whole:?}",
                    k + 1
                );
                if allocator == Allocator::Replicated {
                    assert!(
                        whole.ratio < floor * 1.02,
                        "{} nodes in {dc}: {whole:?}, racks allow {floor}",
                        k + 1
                    );
                }
            }
            in_dc.push(dc_spread);
            in_rack.push(Spread {
                ratio: worst_rack,
                off_mean: 0.0,
            });
            if allocator == Allocator::Replicated {
                assert!(
                    worst_rack < 1.02,
                    "{} nodes a data center: within a rack {worst_rack:.3}",
                    k + 1
                );
            }
        }
        eprintln!("{allocator:?}, DC:   {}", ratios(&in_dc));
        eprintln!("{allocator:?}, rack: {}", ratios(&in_rack));
    }
}

/// A node leaving (decommissioned, or removed) hands each range it replicated to the next node
/// that range's walk meets; no tokens move, so the survivors' loads are what the joins left
/// them. Measured, 3 nodes at factor 3 grown to 5 and then each node removed in turn, over 200
/// offsets: most off an even share, median 10.6%, 90th percentile 13.9%, worst 19.4% (with the
/// primary allocator: median 47.9%, worst 53.5%). The worst cases all remove one of the three
/// first nodes; removing the last to join leaves the other four even. For the offsets of
/// `seeds()`: worst 19.4%, within the 20% the product asks for, but only just.
///
/// 20% is about what an even ring gives here: five nodes of 16 perfectly interleaved tokens
/// (A B C D E A B ...) are even, and without A the ranges A replicated go to B, C and D, never
/// to E (A is a replica of the ranges ending at A, E and D, which next meet D, C and B), which
/// leaves E 20% below the others' mean. Spreading a leaving node's ranges over every survivor
/// needs irregular rings. Weighing, in the choice of each token, how evenly every node's ranges
/// would be handed over (tried: a handover term in the sum of squares, at weights from 1:4 to
/// 10^6:1 against the loads) moved the worst case between 12.5% and 22% with no trend, and
/// cost the joins some of their balance.
#[test]
fn after_one_of_five_nodes_leaves_the_rest_stay_within_a_fifth_of_even() {
    let replication = simple(3);
    let mut worst: f64 = 0.0;
    for seed in seeds() {
        let offset = Rng::new(seed).token();
        let mut members = three_nodes("dc1", offset, false, 0);
        for n in 3..5 {
            join(
                &mut members,
                n,
                &placement("dc1", "r1"),
                Allocator::Replicated,
                &replication,
            );
        }
        for leaving in 0..members.len() {
            let mut rest = members.clone();
            rest.remove(leaving);
            let ring = TokenRing::new(rest).expect("valid ring");
            let spread = spread(&ring, &replication, |_| true);
            worst = worst.max(spread.off_mean);
            assert!(
                spread.off_mean < 0.20,
                "seed {seed}, node {leaving} left: {spread:?}; replay with HAYATE_SEED={seed}"
            );
        }
    }
    eprintln!(
        "worst off an even share after one of 5 nodes left: {:.1}%",
        worst * 100.0
    );
}

/// On random rings (several data centers and racks, edge tokens, one to sixteen tokens a node)
/// the tokens are valid for a new node, and the same whatever order the ring lists its nodes in.
#[test]
fn replicated_allocation_gives_valid_tokens_the_same_everywhere() {
    for seed in seeds() {
        let mut rng = Rng::new(seed);
        for _ in 0..5 {
            let (ring, replications) = random_ring(&mut rng);
            let mut reversed = ring.nodes().to_vec();
            reversed.reverse();
            let same_ring = TokenRing::new(reversed).expect("valid ring");
            for replication in &replications {
                let at = placement(
                    &format!("dc{}", 1 + rng.below(3)),
                    &format!("r{}", 1 + rng.below(4)),
                );
                let num_tokens = 1 + rng.below(16);
                let context =
                    format!("seed {seed}: {replication:?} at {at:?}; replay with HAYATE_SEED={seed}");
                let tokens = allocate_tokens_for_replication(&ring, &at, num_tokens, replication);
                assert_eq!(
                    tokens,
                    allocate_tokens_for_replication(&same_ring, &at, num_tokens, replication),
                    "{context}"
                );
                assert_eq!(tokens.len(), num_tokens, "{context}");
                assert!(
                    tokens.windows(2).all(|w| w[0] < w[1]),
                    "{context}: sorted and distinct"
                );
                assert!(!tokens.contains(&MINIMUM_TOKEN), "{context}");
                let mut grown = ring.nodes().to_vec();
                grown.push(node(u16::MAX, &at.data_center, &at.rack, tokens));
                assert!(TokenRing::new(grown).is_ok(), "{context}: no token taken twice");
            }
        }
    }
}

#[test]
fn rings_the_search_cannot_help_fall_back_to_primary_ownership() {
    let ring = TokenRing::new(three_nodes("dc1", 7, true, 0)).expect("valid ring");
    let fallback = |dc: &str| allocate_tokens_in(&ring, dc, NUM_TOKENS);
    let at = placement("dc1", "r1");
    let check = |replication: Replication, at: &Placement| {
        assert_eq!(
            allocate_tokens_for_replication(&ring, at, NUM_TOKENS, &replication),
            fallback(&at.data_center),
            "{replication:?} at {at:?}"
        );
    };
    // Nothing to balance: no replicas kept by the ring, or none in this data center.
    check(Replication::Local, &at);
    check(simple(0), &at);
    check(nts(&[("dc2", 3)]), &at);
    // Four nodes at factor 4: every node, the new one too, replicates everything.
    check(simple(4), &at);
    check(nts(&[("dc1", 4)]), &placement("dc1", "r4"));
    // The first node of a third rack at factor 3: every replica set needs it, wherever its
    // tokens are.
    let two_racks = TokenRing::new(
        initial_tokens(6, NUM_TOKENS, 7)
            .into_iter()
            .enumerate()
            .map(|(i, tokens)| node(i as u16, "dc1", &format!("r{}", i % 2 + 1), tokens))
            .collect(),
    )
    .expect("valid ring");
    assert_eq!(
        allocate_tokens_for_replication(
            &two_racks,
            &placement("dc1", "r3"),
            NUM_TOKENS,
            &nts(&[("dc1", 3)])
        ),
        allocate_tokens_in(&two_racks, "dc1", NUM_TOKENS)
    );

    // A ring too large to search within ALLOCATION_STEPS_MAX: 100 nodes of 256 tokens.
    let large = TokenRing::new(
        initial_tokens(100, 256, 7)
            .into_iter()
            .enumerate()
            .map(|(i, tokens)| node(i as u16, "dc1", "r1", tokens))
            .collect(),
    )
    .expect("valid ring");
    assert_eq!(
        allocate_tokens_for_replication(&large, &at, 256, &simple(3)),
        allocate_tokens_in(&large, "dc1", 256)
    );
    // The first node of a data center, and of a ring, gets evenly spread tokens.
    let first =
        allocate_tokens_for_replication(&ring, &placement("dc2", "r1"), NUM_TOKENS, &nts(&[("dc2", 3)]));
    assert_eq!(first, allocate_tokens_in(&ring, "dc2", NUM_TOKENS));
    let alone = allocate_tokens_for_replication(&TokenRing::default(), &at, 4, &simple(3));
    assert_eq!(alone, allocate_tokens_in(&TokenRing::default(), "dc1", 4));
    assert!(allocate_tokens_for_replication(&ring, &at, 0, &simple(3)).is_empty());
}

/// A join into 100 nodes of 16 tokens, racks and all. Measured in release builds: 40 ms at
/// factor 3 (one rack or three); 110 ms into 300 nodes of three racks, 240 ms at factor 5
/// into 300 nodes of one rack. The bound is for the tests' own build (opt-level 1) on a loaded
/// machine.
#[test]
fn a_join_into_a_hundred_nodes_is_fast() {
    for (racks, replication) in [(1, simple(3)), (3, nts(&[("dc1", 3)]))] {
        let ring = TokenRing::new(
            initial_tokens(100, NUM_TOKENS, 77)
                .into_iter()
                .enumerate()
                .map(|(i, tokens)| node(i as u16, "dc1", &format!("r{}", i % racks), tokens))
                .collect(),
        )
        .expect("valid ring");
        let started = std::time::Instant::now();
        let tokens =
            allocate_tokens_for_replication(&ring, &placement("dc1", "r0"), NUM_TOKENS, &replication);
        let took = started.elapsed();
        eprintln!("join into 100 nodes, {replication:?}: {took:?}");
        assert_eq!(tokens.len(), NUM_TOKENS);
        assert!(took < std::time::Duration::from_secs(3), "took {took:?}");
    }
}

/// Regression: a data center of 100 nodes whose racks hold 98, 1 and 1 of them makes every
/// walk long (it reads on until it meets both lone racks). Redoing every walk a new token
/// crosses took 1.5 s in release; a walk that would pass the joining node over is now skipped
/// without being redone (`Plan::accepts`), which brings it to 90 ms.
#[test]
fn lopsided_racks_do_not_make_the_search_slow() {
    let rack = |i: usize| match i {
        0 => "r1",
        1 => "r2",
        _ => "r0",
    };
    let ring = TokenRing::new(
        initial_tokens(100, NUM_TOKENS, 77)
            .into_iter()
            .enumerate()
            .map(|(i, tokens)| node(i as u16, "dc1", rack(i), tokens))
            .collect(),
    )
    .expect("valid ring");
    let started = std::time::Instant::now();
    let tokens =
        allocate_tokens_for_replication(&ring, &placement("dc1", "r0"), NUM_TOKENS, &nts(&[("dc1", 3)]));
    let took = started.elapsed();
    eprintln!("join into 98/1/1 racks: {took:?}");
    assert_eq!(tokens.len(), NUM_TOKENS);
    assert!(took < std::time::Duration::from_secs(3), "took {took:?}");
}
