//! The replicas of every range of one ring under one replication, computed once, so that a
//! request finds its replicas with one binary search and no allocation.

use super::strategy::{Plan, Walker};
use super::{Token, TokenRing, MINIMUM_TOKEN};
use crate::consistency::Replication;
use crate::node::HostId;

/// A range of tokens `(start_exclusive, end_inclusive]` that does not wrap:
/// `start_exclusive < end_inclusive`.
///
/// Cassandra's ring has one range that wraps, from the largest ring token round to the
/// smallest. A scan walks tokens from the bottom of the ring to the top, so [`ReplicaMap`]
/// hands that range out as its two halves: `(i64::MIN, smallest]` first and
/// `(largest, i64::MAX]` last. Cassandra splits it the same way (`Range.unwrap`) but writes the
/// upper half `(largest, MIN]`, its minimum token standing for the end of the ring as a right
/// bound; we write `i64::MAX`, which holds the same keys. Token `i64::MIN` itself lies in no
/// range, and no key has it: Cassandra's partitioner maps a hash of `i64::MIN` to `i64::MAX`
/// (so does `hayate_storage::token`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenRange {
    pub start_exclusive: Token,
    pub end_inclusive: Token,
}

impl TokenRange {
    pub fn contains(&self, token: Token) -> bool {
        self.start_exclusive < token && token <= self.end_inclusive
    }
}

/// Replicas for every vnode range of one ring and one replication, precomputed. Build it with
/// [`TokenRing::replica_map`] when the ring or the keyspace's replication changes.
///
/// [`Replication::Local`] gives a map whose every range has no replicas: the ring does not know
/// the local node, so the caller answers `Local` keyspaces itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaMap {
    /// The ring's tokens, sorted: range `i` is `(ends[i - 1], ends[i]]`, range 0 the wrapping one.
    ends: Vec<Token>,
    /// Range `i`'s replicas are `hosts[offsets[i]..offsets[i + 1]]`, in placement order.
    offsets: Vec<u32>,
    hosts: Vec<HostId>,
}

impl ReplicaMap {
    pub(crate) fn build(ring: &TokenRing, replication: &Replication) -> ReplicaMap {
        let ranges = ring.tokens.len();
        let plan = Plan::new(&ring.topology, replication);
        let mut walker = Walker::new(ring);
        let mut nodes = Vec::with_capacity(ranges * replication.total_factor().min(ring.nodes.len()));
        let mut offsets = Vec::with_capacity(ranges + 1);
        offsets.push(0);
        for start in 0..ranges {
            walker.walk(ring, &plan, start, &mut nodes);
            offsets
                .push(u32::try_from(nodes.len()).expect("ring bounds keep a replica map under 2^32 entries"));
        }
        ReplicaMap {
            ends: ring.tokens.iter().map(|&(t, _)| t).collect(),
            offsets,
            hosts: nodes.into_iter().map(|i| ring.nodes[i as usize].host).collect(),
        }
    }

    /// The replicas of `token`, in placement order (empty on an empty ring).
    #[inline]
    pub fn replicas(&self, token: Token) -> &[HostId] {
        if self.ends.is_empty() {
            return &[];
        }
        let i = self.ends.partition_point(|&end| end < token);
        self.replicas_of_range(if i == self.ends.len() { 0 } else { i })
    }

    fn replicas_of_range(&self, i: usize) -> &[HostId] {
        &self.hosts[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// How many ranges [`ReplicaMap::ranges`] yields: one per ring token, plus the upper half of
    /// the wrapping range unless the largest token is `i64::MAX`.
    fn range_count(&self) -> usize {
        match self.ends.last() {
            None => 0,
            Some(&Token::MAX) => self.ends.len(),
            Some(_) => self.ends.len() + 1,
        }
    }

    /// Range `k` of the split ring (see [`TokenRange`]): `k < ends.len()` ends at ring token
    /// `k`; `k == ends.len()` is the upper half of the wrapping range.
    fn range(&self, k: usize) -> (TokenRange, &[HostId]) {
        if k == self.ends.len() {
            let last = *self
                .ends
                .last()
                .expect("the upper half exists only on a non-empty ring");
            let range = TokenRange {
                start_exclusive: last,
                end_inclusive: Token::MAX,
            };
            return (range, self.replicas_of_range(0));
        }
        let range = TokenRange {
            start_exclusive: if k == 0 { MINIMUM_TOKEN } else { self.ends[k - 1] },
            end_inclusive: self.ends[k],
        };
        (range, self.replicas_of_range(k))
    }

    /// Every range of the ring in token order, from `(i64::MIN, smallest token]` to
    /// `(largest token, i64::MAX]` (the wrapping range split in two, see [`TokenRange`]), each
    /// with its replicas: what a scan of the whole ring walks through.
    pub fn ranges(&self) -> Ranges<'_> {
        Ranges {
            map: self,
            next: 0,
            end: self.range_count(),
        }
    }

    /// The ranges that hold at least one token of `[from, to]` (both inclusive), in token
    /// order; none if `from > to`.
    pub fn ranges_between(&self, from: Token, to: Token) -> Ranges<'_> {
        if from > to || to == MINIMUM_TOKEN {
            // No range holds i64::MIN.
            return Ranges {
                map: self,
                next: 0,
                end: 0,
            };
        }
        // The first range ending at or above `from`, up to the last one starting below `to`:
        // range k starts at ends[k - 1] (k > 0) or at the minimum token (k = 0).
        let next = self.ends.partition_point(|&end| end < from);
        let end = (self.ends.partition_point(|&end| end < to) + 1).min(self.range_count());
        Ranges {
            map: self,
            next,
            end: end.max(next),
        }
    }
}

/// The ranges of a [`ReplicaMap`], in token order, with their replicas.
#[derive(Clone, Debug)]
pub struct Ranges<'a> {
    map: &'a ReplicaMap,
    next: usize,
    end: usize,
}

impl<'a> Iterator for Ranges<'a> {
    type Item = (TokenRange, &'a [HostId]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        let item = self.map.range(self.next);
        self.next += 1;
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.end.saturating_sub(self.next);
        (n, Some(n))
    }
}

impl ExactSizeIterator for Ranges<'_> {}
