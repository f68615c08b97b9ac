//! Tokens for a node joining a ring that already holds data: chosen to even out what every node
//! stores, its replicated ownership, rather than the primary ranges alone.
//!
//! Data is streamed to a joining node, so what matters is the load after the join: the share of
//! all data each node holds a replica of ([`TokenRing::ownership`] with a replication). With a
//! factor above 1 a token moves load between more nodes than the two its range touches: the
//! joining node becomes a replica of ranges before its token too, and each range whose replica
//! set it enters drops a replica. Balancing primary ranges (as [`allocate_tokens_in`] does)
//! leaves the replicated loads far apart: growing 3 nodes to 4 at factor 3, the most loaded
//! node stores 2.4 times what the least does. Cassandra's answer is
//! `allocate_tokens_for_local_replication_factor`; this is ours.
//!
//! # The method
//!
//! The joining node's tokens are chosen one at a time, greedily, then improved:
//!
//! 1. For every range of the ring being balanced, the allocator works out exactly what a token
//!    of the joining node inside it would change, by redoing the replica placement walk (the
//!    strategy's own, racks and all) of every range whose walk would meet that token and take
//!    the joining node there. Only the split range's share depends on where the token falls in
//!    it, and linearly: the part below the token gets the new replica set. So the sum of squared
//!    differences between each node's load and its target is a parabola in the token's
//!    position, whose lowest point (kept inside the range, stepped off tokens other data centers
//!    own) is that range's candidate.
//! 2. The candidate that lowers the sum the most wins, ties going to the lowest token. While
//!    tokens remain to be placed, the joining node's target is its final share scaled by the
//!    tokens placed, so that early tokens do not grab all the node is owed.
//! 3. Once all are placed, each of the joining node's tokens in turn is taken out and put back
//!    where it now lowers the sum the most, against the final targets, until a pass moves none
//!    or [`REFINE_PASSES_MAX`] passes have run.
//!
//! Loads are counted in tokens (`u128`) and the sum of squares in units of 2^-40 of the ring
//! (`i128`), so the choice is the same on every node: no floating point.
//!
//! What it costs is the owners the redone walks read, about (ranges) x (walk length) x (ranges
//! a walk crosses) per search, with `num_tokens x (1 + REFINE_PASSES_MAX)` searches at most.
//! Walks are short (a few owners) unless a rack holds few of the data center's tokens; a ring
//! for which the estimate passes [`ALLOCATION_STEPS_MAX`] is balanced by primary ownership
//! instead (see [`allocate_tokens_for_replication`]).

use std::collections::BTreeSet;

use super::{allocate_tokens_in, first_tokens, split_point};
use crate::consistency::Replication;
use crate::node::{HostId, Placement};
use crate::ring::strategy::{Plan, Topology, Walker};
use crate::ring::{span, RingNode, Token, TokenRing, RING_SPAN, TOKENS_PER_NODE_MAX};

/// Passes of the improvement step (3. in the module doc) at most. Measured, the rings of the
/// tests settle within 3.
const REFINE_PASSES_MAX: usize = 4;

/// Owners that the placement walks of one allocation may read, estimated before it starts: about
/// a second of work (a step costs some 40 ns). A join into 300 nodes of 16 tokens at factor 5
/// estimates 11.5 million; 100 nodes of 256 tokens at factor 3, 130 million.
const ALLOCATION_STEPS_MAX: usize = 25_000_000;

/// Loads are compared in units of 2^-40 of the ring (2^24 tokens): a deviation is then below
/// 2^41 units, its square below 2^82 and a sum over every node of a ring below 2^95, which an
/// `i128` holds; the unit is far below any share that matters.
const DEVIATION_SHIFT_BITS: u32 = 24;

/// Tokens for one node joining `ring` in `placement`, chosen so that, once it has them, the
/// nodes' replicated ownership under `replication` is as even as the allocator can make it: the
/// data center's nodes for `NetworkTopologyStrategy` (with that data center's factor, racks
/// honoured as the strategy honours them), every node for `SimpleStrategy`, which knows no data
/// centers. See the [module documentation](self) for the method.
///
/// One replication is balanced, as Cassandra's `allocate_tokens_for_local_replication_factor`
/// takes one factor: where keyspaces replicate differently, pass the one with the largest
/// factor in the joining node's data center, the keyspaces whose data weighs most on every
/// node. Ownership under a smaller factor is then even to within what the larger one allows.
///
/// Falls back to [`allocate_tokens_in`] (primary ownership within the data center):
/// - for [`Replication::Local`] and for a replication that stores nothing in the data center;
/// - when the joining node will replicate every range wherever its tokens fall (the data center
///   has no more nodes than the factor, or the node opens a rack that every replica set needs):
///   its own load is then fixed, and the walks that would have to be redone go round the ring;
/// - when the search would cost more than [`ALLOCATION_STEPS_MAX`] (many tokens per node, or a
///   rack with a small share of the data center's tokens, which makes every walk long).
///
/// The first node of a data center (or of an empty ring) gets evenly spread tokens, as there.
///
/// Deterministic: the same ring, placement and replication give the same tokens on every node
/// (ties between candidates go to the lowest token; candidates never share one).
/// The tokens are sorted, distinct, never a token of another node nor `i64::MIN`; there are
/// `num_tokens` of them (fewer only if every range were too small to split, which the ring's
/// bounds rule out). A node replacing another takes over its tokens and needs none of this.
///
/// # Panics
///
/// If `num_tokens` exceeds [`TOKENS_PER_NODE_MAX`].
pub fn allocate_tokens_for_replication(
    ring: &TokenRing,
    placement: &Placement,
    num_tokens: usize,
    replication: &Replication,
) -> Vec<Token> {
    assert!(
        num_tokens <= TOKENS_PER_NODE_MAX,
        "num_tokens {num_tokens} is more than TOKENS_PER_NODE_MAX"
    );
    let data_center = placement.data_center.as_str();
    let taken: BTreeSet<Token> = ring.tokens().iter().map(|&(t, _)| t).collect();
    // The nodes whose loads the placement of this replication couples to the joining node's.
    let (members, replication): (Vec<&RingNode>, Replication) = match replication {
        Replication::Simple { factor } if *factor > 0 => (ring.nodes().iter().collect(), replication.clone()),
        Replication::NetworkTopology { factors } if factors.get(data_center).is_some_and(|&f| f > 0) => {
            // Other data centers neither take from nor give to this one's replica sets: walk
            // this data center's nodes alone, for this data center's factor alone.
            let members = ring
                .nodes()
                .iter()
                .filter(|n| n.placement.data_center == data_center)
                .collect();
            let factor = factors[data_center];
            let factors = [(data_center.to_owned(), factor)].into_iter().collect();
            (members, Replication::NetworkTopology { factors })
        }
        _ => return allocate_tokens_in(ring, data_center, num_tokens),
    };
    if num_tokens == 0 {
        return Vec::new();
    }
    if members.is_empty() {
        return first_tokens(&taken, num_tokens);
    }

    let mut model = Model::new(&members, placement, &replication, taken);
    let mut loads = model.loads();
    if loads.read.iter().any(Option::is_none) {
        // Some walk cannot find its replicas without the joining node: it will be in every one.
        return allocate_tokens_in(ring, data_center, num_tokens);
    }
    let searches = num_tokens * (1 + REFINE_PASSES_MAX);
    if loads.search_steps(&model).saturating_mul(searches) > ALLOCATION_STEPS_MAX {
        return allocate_tokens_in(ring, data_center, num_tokens);
    }
    for placed in 0..num_tokens {
        let targets = model.targets(placed + 1, num_tokens);
        let Some(best) = model.best_split(&loads, &targets) else {
            break;
        };
        model.insert(best.token);
        loads = model.loads();
    }
    if num_tokens > 1 {
        model.refine();
    }
    let mut chosen = model.joining_tokens();
    chosen.sort_unstable();
    chosen
}

/// The ring being balanced: the tokens of the nodes that replicate together, with the joining
/// node's as they are chosen.
struct Model {
    /// The members, then the joining node, last: node indexes in placement walks.
    topology: Topology,
    plan: Plan,
    joining: u32,
    nodes: usize,
    /// The members' and the joining node's tokens, sorted, and their owners.
    tokens: Vec<Token>,
    owners: Vec<u32>,
    /// Every token of the whole ring, other data centers' included, and the joining node's.
    taken: BTreeSet<Token>,
    /// What each node stores once the join is done, if all are even: 2^64 x replicas / nodes.
    mean_load: u128,
    walker: Walker,
}

/// What every node of a [`Model`] stores, and how each range's replicas were found.
struct Loads {
    /// Per node: tokens of the ring it holds a replica of.
    load: Vec<u128>,
    /// The replicas of range `r` (the one ending at `tokens[r]`) are
    /// `replicas[starts[r]..starts[r + 1]]`, in the order the walk took them, and `positions`
    /// (alongside) says how many owners into the walk each was met.
    replicas: Vec<u32>,
    positions: Vec<usize>,
    starts: Vec<usize>,
    /// Per range: how many owners its walk read, or `None` if it went round without finding
    /// every replica (then a new token anywhere changes it).
    read: Vec<Option<usize>>,
    /// The most owners any walk read; `tokens.len()` if one went round.
    read_max: usize,
}

impl Loads {
    /// Whether a token of the joining node met `back` owners into the walk of range `range`
    /// could change that range's replicas: the walk had not finished by then and would take the
    /// joining node there.
    fn meets_joining(&self, model: &Model, range: usize, back: usize) -> bool {
        if self.read[range].is_some_and(|read| read <= back) {
            return false;
        }
        let replicas = &self.replicas[self.starts[range]..self.starts[range + 1]];
        let positions = &self.positions[self.starts[range]..self.starts[range + 1]];
        let taken_before = positions.partition_point(|&p| p < back);
        model
            .plan
            .accepts(&model.topology, &replicas[..taken_before], model.joining)
    }

    /// About how many owners one search for the best token reads: for every range, each walk
    /// redone with a token of the joining node in it.
    fn search_steps(&self, model: &Model) -> usize {
        let count = self.read.len();
        let mut steps = 0usize;
        for range in 0..count {
            let read = self.read[range].unwrap_or(count);
            let redone = (1..read.min(count))
                .filter(|&back| self.meets_joining(model, range, back))
                .count();
            steps = steps.saturating_add((redone + 1).saturating_mul(read + 1));
        }
        steps
    }
}

/// A token the joining node could take, and what it would do to the sum of squares.
#[derive(Clone, Copy, Debug)]
struct Split {
    /// Change of the sum of squared deviations, in squared units of 2^-40 of the ring.
    change: i128,
    token: Token,
}

/// How one node's load would change with a candidate token at `distance` tokens past the start
/// of the range it splits: `fixed + slope * distance`.
#[derive(Clone, Copy, Debug)]
struct Change {
    node: u32,
    fixed: i128,
    slope: i128,
}

impl Model {
    fn new(
        members: &[&RingNode],
        placement: &Placement,
        replication: &Replication,
        taken: BTreeSet<Token>,
    ) -> Model {
        let mut nodes: Vec<RingNode> = members.iter().map(|&n| n.clone()).collect();
        nodes.push(RingNode {
            // Never compared: the joining node is known by its index.
            host: HostId([0; 16]),
            placement: placement.clone(),
            tokens: Vec::new(),
        });
        let topology = Topology::new(&nodes);
        let plan = Plan::new(&topology, replication);
        let joining = u32::try_from(members.len()).expect("RING_NODES_MAX fits in u32");
        let mut owned: Vec<(Token, u32)> = Vec::new();
        for (i, node) in members.iter().enumerate() {
            let index = u32::try_from(i).expect("RING_NODES_MAX fits in u32");
            owned.extend(node.tokens.iter().map(|&t| (t, index)));
        }
        owned.sort_unstable();
        let factor = match replication {
            Replication::Simple { factor } => *factor,
            Replication::NetworkTopology { factors } => factors.values().sum(),
            Replication::Local => unreachable!("Local is answered by allocate_tokens_in"),
        };
        let replicas = factor.min(nodes.len()) as u128;
        Model {
            walker: Walker::for_topology(&topology),
            topology,
            plan,
            joining,
            nodes: nodes.len(),
            tokens: owned.iter().map(|&(t, _)| t).collect(),
            owners: owned.iter().map(|&(_, o)| o).collect(),
            taken,
            mean_load: RING_SPAN * replicas / nodes.len() as u128,
        }
    }

    /// Every node's target load with `placed` of the joining node's `num_tokens` tokens placed:
    /// the mean for the members, that part of it for the joining node.
    fn targets(&self, placed: usize, num_tokens: usize) -> Vec<u128> {
        let mut targets = vec![self.mean_load; self.nodes];
        targets[self.joining as usize] = self.mean_load * placed as u128 / num_tokens as u128;
        targets
    }

    /// The span of range `r`, the one ending at `tokens[r]`.
    fn range_span(&self, r: usize) -> u128 {
        let previous = if r == 0 { self.tokens.len() - 1 } else { r - 1 };
        span(self.tokens[previous], self.tokens[r])
    }

    fn loads(&mut self) -> Loads {
        let count = self.tokens.len();
        let mut loads = Loads {
            load: vec![0; self.nodes],
            replicas: Vec::with_capacity(count * 3),
            positions: Vec::with_capacity(count * 3),
            starts: Vec::with_capacity(count + 1),
            read: Vec::with_capacity(count),
            read_max: 0,
        };
        for r in 0..count {
            loads.starts.push(loads.replicas.len());
            let clockwise = self.owners[r..].iter().chain(&self.owners[..r]).copied();
            let read = self
                .walker
                .walk_sequence(&self.topology, &self.plan, clockwise, &mut loads.replicas);
            loads.read_max = loads.read_max.max(read.unwrap_or(count));
            loads.read.push(read);
            // A walk takes a node the first time it meets it or never (whatever makes it pass a
            // node over only grows as the walk goes on), so that is where each was met.
            let taken = &loads.replicas[loads.starts[r]..];
            loads.positions.extend(taken.iter().map(|&node| {
                (0..count)
                    .find(|&p| self.owners[(r + p) % count] == node)
                    .expect("a replica owns a token of the ring")
            }));
            let range = self.range_span(r);
            for &node in &loads.replicas[loads.starts[r]..] {
                loads.load[node as usize] += range;
            }
        }
        loads.starts.push(loads.replicas.len());
        loads
    }

    /// The best token for the joining node against `targets`, or `None` if no range can be split.
    fn best_split(&mut self, loads: &Loads, targets: &[u128]) -> Option<Split> {
        let deviation: Vec<i128> = loads
            .load
            .iter()
            .zip(targets)
            .map(|(&load, &target)| load as i128 - target as i128)
            .collect();
        let count = self.tokens.len();
        let mut changes: Vec<Change> = Vec::new();
        let mut walked: Vec<u32> = Vec::new();
        let mut best: Option<Split> = None;
        for r in 0..count {
            let range = self.range_span(r);
            if range < 2 {
                continue;
            }
            changes.clear();
            // The ranges before this one whose walks would meet the new token: the token sits
            // `back` owners into their walk, and a walk that stopped short of it is unchanged.
            for back in 1..count.min(loads.read_max + 1) {
                let before = (r + count - back) % count;
                if !loads.meets_joining(self, before, back) {
                    continue;
                }
                walked.clear();
                let clockwise = (0..=count).map(|p| match p.cmp(&back) {
                    std::cmp::Ordering::Less => self.owners[(before + p) % count],
                    std::cmp::Ordering::Equal => self.joining,
                    std::cmp::Ordering::Greater => self.owners[(before + p - 1) % count],
                });
                self.walker
                    .walk_sequence(&self.topology, &self.plan, clockwise, &mut walked);
                let old = &loads.replicas[loads.starts[before]..loads.starts[before + 1]];
                let span_before = self.range_span(before) as i128;
                record_difference(&mut changes, old, &walked, |delta| (delta * span_before, 0));
            }
            // The split range: below the token, a walk that meets the joining node first.
            walked.clear();
            let clockwise = (0..=count).map(|p| match p {
                0 => self.joining,
                _ => self.owners[(r + p - 1) % count],
            });
            self.walker
                .walk_sequence(&self.topology, &self.plan, clockwise, &mut walked);
            let old = &loads.replicas[loads.starts[r]..loads.starts[r + 1]];
            record_difference(&mut changes, old, &walked, |delta| (0, delta));

            let Some(split) = self.split_at_lowest(r, range, &changes, &deviation) else {
                continue;
            };
            if best.is_none_or(|b| (split.change, split.token) < (b.change, b.token)) {
                best = Some(split);
            }
        }
        best
    }

    /// The candidate token of range `r` (`range` tokens long) under `changes`: where the sum of
    /// squares is lowest, kept inside the range and off taken tokens.
    fn split_at_lowest(
        &self,
        r: usize,
        range: u128,
        changes: &[Change],
        deviation: &[i128],
    ) -> Option<Split> {
        let start = self.tokens[if r == 0 { self.tokens.len() - 1 } else { r - 1 }];
        // d/dx of sum((y + s x)^2) is 2 sum(s y) + 2 x sum(s^2): lowest at -sum(s y) / sum(s^2).
        let (mut slope_dot, mut slope_squares) = (0i128, 0i128);
        for c in changes {
            slope_dot += c.slope * (deviation[c.node as usize] + c.fixed);
            slope_squares += c.slope * c.slope;
        }
        let last = range as i128 - 1;
        let distance = if slope_squares == 0 {
            // Where the token falls does not move load: halve the range, for later joins.
            range as i128 / 2
        } else {
            (-slope_dot).div_euclid(slope_squares).clamp(1, last)
        };
        let distance = u128::try_from(distance).expect("clamped to 1..range");
        let token = split_point(start, range, distance, &self.taken)?;
        let distance = span(start, token) as i128;
        let change = changes
            .iter()
            .map(|c| {
                let old = deviation[c.node as usize];
                let new = old + c.fixed + c.slope * distance;
                square(new) - square(old)
            })
            .sum();
        Some(Split { change, token })
    }

    fn insert(&mut self, token: Token) {
        let at = self.tokens.partition_point(|&t| t < token);
        assert!(
            self.tokens.get(at) != Some(&token) && self.taken.insert(token),
            "token {token} is already taken"
        );
        self.tokens.insert(at, token);
        self.owners.insert(at, self.joining);
    }

    fn remove(&mut self, token: Token) {
        let at = self.tokens.binary_search(&token).expect("a joining node's token");
        assert_eq!(
            self.owners[at], self.joining,
            "only the joining node's tokens move"
        );
        self.tokens.remove(at);
        self.owners.remove(at);
        self.taken.remove(&token);
    }

    fn joining_tokens(&self) -> Vec<Token> {
        self.tokens
            .iter()
            .zip(&self.owners)
            .filter(|&(_, &o)| o == self.joining)
            .map(|(&t, _)| t)
            .collect()
    }

    /// Moves each of the joining node's tokens to where it now lowers the sum of squares most,
    /// until a pass moves none.
    fn refine(&mut self) {
        let num_tokens = self.joining_tokens().len();
        let targets = self.targets(num_tokens, num_tokens);
        for _ in 0..REFINE_PASSES_MAX {
            let mut moved = false;
            for token in self.joining_tokens() {
                let before = sum_of_squares(&self.loads(), &targets);
                self.remove(token);
                let loads = self.loads();
                let without = sum_of_squares(&loads, &targets);
                match self.best_split(&loads, &targets) {
                    Some(best) if without + best.change < before => {
                        self.insert(best.token);
                        moved = true;
                    }
                    _ => self.insert(token),
                }
            }
            if !moved {
                break;
            }
        }
    }
}

/// Adds to `changes` what moving from the replica set `old` to `new` does to each node that
/// enters (+1) or leaves (-1) it, as `(fixed, slope)` from `effect`.
fn record_difference(
    changes: &mut Vec<Change>,
    old: &[u32],
    new: &[u32],
    effect: impl Fn(i128) -> (i128, i128),
) {
    let entering = new.iter().filter(|n| !old.contains(n)).map(|&n| (n, 1));
    let leaving = old.iter().filter(|n| !new.contains(n)).map(|&n| (n, -1));
    for (node, delta) in entering.chain(leaving) {
        let (fixed, slope) = effect(delta);
        match changes.iter_mut().find(|c| c.node == node) {
            Some(c) => {
                c.fixed += fixed;
                c.slope += slope;
            }
            None => changes.push(Change { node, fixed, slope }),
        }
    }
}

/// A deviation's square in squared units of 2^-40 of the ring.
fn square(deviation_tokens: i128) -> i128 {
    let units = deviation_tokens >> DEVIATION_SHIFT_BITS;
    units * units
}

fn sum_of_squares(loads: &Loads, targets: &[u128]) -> i128 {
    loads
        .load
        .iter()
        .zip(targets)
        .map(|(&load, &target)| square(load as i128 - target as i128))
        .sum()
}
