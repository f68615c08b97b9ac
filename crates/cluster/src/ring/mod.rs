//! The token ring: which node owns which token, and where a keyspace's replicas of a token live.
//!
//! Tokens are Cassandra's `Murmur3Partitioner` tokens (`i64`). Each node owns `num_tokens`
//! virtual nodes; a node token `t` owns the range `(previous ring token, t]`, and the range
//! holding tokens above the largest ring token wraps around to the first one. Token `i64::MIN`
//! is the ring's minimum token: no key hashes to it (the partitioner maps it to `i64::MAX`) and
//! no node may own it, as in Cassandra.
//!
//! A [`TokenRing`] is an immutable snapshot, rebuilt whenever ownership changes (through the
//! metadata log) and shared in an `Arc`. Placement ([`TokenRing::replicas_for`]) follows
//! Cassandra 5.0's `SimpleStrategy` and `NetworkTopologyStrategy` exactly, order included
//! (see [`strategy`]); the request path reads it through a [`ReplicaMap`], computed once per
//! ring and keyspace replication, which answers with one binary search and no allocation.
//! [`allocate`] chooses the tokens of nodes that start or join.
//!
//! The ring does not know which node it runs on, so [`Replication::Local`] (Cassandra's
//! `LocalStrategy`, whose only replica is the node asked) places no replicas here: callers
//! answer `Local` keyspaces from the local node themselves.

pub mod allocate;
mod replica_map;
pub mod strategy;

use std::collections::BTreeMap;
use std::fmt;

use crate::consistency::Replication;
use crate::node::{HostId, Placement};

pub use allocate::{allocate_tokens, allocate_tokens_for_replication, allocate_tokens_in, initial_tokens};
pub use replica_map::{Ranges, ReplicaMap, TokenRange};

/// A Murmur3 token.
pub type Token = i64;

/// Cassandra's minimum token: the start of the ring, never a node's token nor a key's.
pub const MINIMUM_TOKEN: Token = Token::MIN;

/// Tokens one node may own: Cassandra's own limit on `num_tokens`.
pub const TOKENS_PER_NODE_MAX: usize = 1536;

/// Nodes in one ring. A bound on the memory of a ring and of its replica maps (nodes x tokens x
/// factor host ids); four times the largest Cassandra clusters in service.
pub const RING_NODES_MAX: usize = 4096;

/// The size of the token space, 2^64, in which ownership shares are counted.
const RING_SPAN: u128 = 1 << 64;

/// One node on the ring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingNode {
    pub host: HostId,
    pub placement: Placement,
    /// Sorted ascending once the node is in a [`TokenRing`].
    pub tokens: Vec<Token>,
}

/// A ring that cannot be built from the nodes given.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RingError {
    /// Two nodes (or one node twice) claim the same token.
    DuplicateToken {
        token: Token,
        first: HostId,
        second: HostId,
    },
    /// A node without tokens would own nothing, which Cassandra does not allow for a member.
    NoTokens {
        host: HostId,
    },
    TooManyTokens {
        host: HostId,
        tokens: usize,
        max: usize,
    },
    /// The same host id appears twice.
    DuplicateHost {
        host: HostId,
    },
    /// A node claims `i64::MIN`, the ring's minimum token, which no node may own.
    MinimumToken {
        host: HostId,
    },
    TooManyNodes {
        nodes: usize,
        max: usize,
    },
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RingError::DuplicateToken { token, first, second } if first == second => write!(
                f,
                "node {first} lists token {token} twice; give each of its tokens once"
            ),
            RingError::DuplicateToken { token, first, second } => write!(
                f,
                "nodes {first} and {second} both claim token {token}; give one of them other tokens"
            ),
            RingError::NoTokens { host } => write!(
                f,
                "node {host} has no tokens; give it at least one (num_tokens >= 1)"
            ),
            RingError::TooManyTokens { host, tokens, max } => write!(
                f,
                "node {host} has {tokens} tokens, more than the {max} a node may have; lower num_tokens"
            ),
            RingError::DuplicateHost { host } => write!(
                f,
                "host id {host} appears twice in the ring; each node needs its own host id"
            ),
            RingError::MinimumToken { host } => write!(
                f,
                "node {host} claims token {MINIMUM_TOKEN}, the ring's minimum token, which no node may own; \
                 choose another token"
            ),
            RingError::TooManyNodes { nodes, max } => {
                write!(f, "a ring of {nodes} nodes is more than the {max} supported")
            }
        }
    }
}

impl std::error::Error for RingError {}

/// An immutable snapshot of token ownership. Cheap to share in an `Arc`; rebuilt on every change.
#[derive(Clone, Debug)]
pub struct TokenRing {
    /// Sorted by host id, so that every listing and every tie is in the same order everywhere.
    nodes: Vec<RingNode>,
    /// Every node token with its owner, sorted by token.
    tokens: Vec<(Token, HostId)>,
    /// `owners[i]` is the index in `nodes` of `tokens[i]`'s owner: placement walks indexes.
    owners: Vec<u32>,
    topology: strategy::Topology,
}

impl Default for TokenRing {
    fn default() -> TokenRing {
        TokenRing::new(Vec::new()).expect("an empty ring is valid")
    }
}

impl TokenRing {
    pub fn new(mut nodes: Vec<RingNode>) -> Result<TokenRing, RingError> {
        if nodes.len() > RING_NODES_MAX {
            return Err(RingError::TooManyNodes {
                nodes: nodes.len(),
                max: RING_NODES_MAX,
            });
        }
        nodes.sort_by_key(|n| n.host);
        for pair in nodes.windows(2) {
            if pair[0].host == pair[1].host {
                return Err(RingError::DuplicateHost { host: pair[0].host });
            }
        }
        let mut tokens = Vec::with_capacity(nodes.iter().map(|n| n.tokens.len()).sum());
        for node in &mut nodes {
            if node.tokens.is_empty() {
                return Err(RingError::NoTokens { host: node.host });
            }
            if node.tokens.len() > TOKENS_PER_NODE_MAX {
                return Err(RingError::TooManyTokens {
                    host: node.host,
                    tokens: node.tokens.len(),
                    max: TOKENS_PER_NODE_MAX,
                });
            }
            node.tokens.sort_unstable();
            if node.tokens[0] == MINIMUM_TOKEN {
                return Err(RingError::MinimumToken { host: node.host });
            }
            tokens.extend(node.tokens.iter().map(|&t| (t, node.host)));
        }
        tokens.sort_unstable();
        for pair in tokens.windows(2) {
            if pair[0].0 == pair[1].0 {
                return Err(RingError::DuplicateToken {
                    token: pair[0].0,
                    first: pair[0].1,
                    second: pair[1].1,
                });
            }
        }
        let owners = tokens
            .iter()
            .map(|(_, host)| {
                let index = nodes
                    .binary_search_by_key(host, |n| n.host)
                    .expect("every token's owner is a ring node");
                u32::try_from(index).expect("RING_NODES_MAX fits in u32")
            })
            .collect();
        let topology = strategy::Topology::new(&nodes);
        Ok(TokenRing {
            nodes,
            tokens,
            owners,
            topology,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The nodes, sorted by host id.
    pub fn nodes(&self) -> &[RingNode] {
        &self.nodes
    }

    pub fn node(&self, host: HostId) -> Option<&RingNode> {
        self.nodes
            .binary_search_by_key(&host, |n| n.host)
            .ok()
            .map(|i| &self.nodes[i])
    }

    /// Every node token with its owner, sorted by token.
    pub fn tokens(&self) -> &[(Token, HostId)] {
        &self.tokens
    }

    /// The node owning the range that holds `token`: the owner of the first ring token at or
    /// above it, wrapping to the first ring token past the largest. `None` on an empty ring.
    pub fn primary(&self, token: Token) -> Option<HostId> {
        self.range_index(token).map(|i| self.tokens[i].1)
    }

    /// Cassandra's natural replicas of `token` in placement order (the order its
    /// `calculateNaturalReplicas` returns them), computed afresh. The request path uses a
    /// [`ReplicaMap`] instead. Empty on an empty ring and for [`Replication::Local`], which the
    /// caller answers from the local node.
    pub fn replicas_for(&self, replication: &Replication, token: Token) -> Vec<HostId> {
        let Some(start) = self.range_index(token) else {
            return Vec::new();
        };
        let plan = strategy::Plan::new(&self.topology, replication);
        let mut walker = strategy::Walker::new(self);
        let mut out = Vec::new();
        walker.walk(self, &plan, start, &mut out);
        out.into_iter().map(|i| self.nodes[i as usize].host).collect()
    }

    /// The replicas of every range of this ring under `replication`, for the request path.
    pub fn replica_map(&self, replication: &Replication) -> ReplicaMap {
        ReplicaMap::build(self, replication)
    }

    /// What `nodetool status` shows as "Owns", for every node. Without a replication: the share
    /// of the token space each node's ranges cover (the shares sum to 1). With one: the
    /// effective ownership, the share of all data each node stores a replica of, so the shares
    /// sum to the number of replicas each token has (the factor, or fewer where the ring has
    /// fewer nodes). Nodes that store nothing are listed with 0. Empty for
    /// [`Replication::Local`], for which Cassandra too calls ownership meaningless (`nodetool`
    /// then prints `?`).
    ///
    /// Shares are counted in a token space of 2^64 tokens; Cassandra divides by 2^64 - 2, a
    /// difference far below the percent with one decimal that `nodetool` prints.
    pub fn ownership(&self, replication: Option<&Replication>) -> BTreeMap<HostId, f64> {
        if matches!(replication, Some(Replication::Local)) {
            return BTreeMap::new();
        }
        let mut owned_tokens = vec![0u128; self.nodes.len()];
        match replication {
            None => {
                for (i, &owner) in self.owners.iter().enumerate() {
                    owned_tokens[owner as usize] += self.range_span(i);
                }
            }
            Some(replication) => {
                let plan = strategy::Plan::new(&self.topology, replication);
                let mut walker = strategy::Walker::new(self);
                let mut replicas = Vec::new();
                for i in 0..self.tokens.len() {
                    replicas.clear();
                    walker.walk(self, &plan, i, &mut replicas);
                    for &node in &replicas {
                        owned_tokens[node as usize] += self.range_span(i);
                    }
                }
            }
        }
        self.nodes
            .iter()
            .zip(owned_tokens)
            .map(|(node, owned)| (node.host, owned as f64 / RING_SPAN as f64))
            .collect()
    }

    /// Tokens each node's primary ranges hold, exactly (they sum to 2^64 on a non-empty ring).
    pub fn owned_token_counts(&self) -> BTreeMap<HostId, u128> {
        let mut owned: BTreeMap<HostId, u128> = self.nodes.iter().map(|n| (n.host, 0)).collect();
        for (i, &(_, host)) in self.tokens.iter().enumerate() {
            *owned.get_mut(&host).expect("every owner is a node") += self.range_span(i);
        }
        owned
    }

    /// The index in `tokens` of the range holding `token`: the first ring token at or above it,
    /// wrapping to 0.
    fn range_index(&self, token: Token) -> Option<usize> {
        if self.tokens.is_empty() {
            return None;
        }
        let i = self.tokens.partition_point(|&(t, _)| t < token);
        Some(if i == self.tokens.len() { 0 } else { i })
    }

    /// How many tokens the range ending at `tokens[i]` holds.
    fn range_span(&self, i: usize) -> u128 {
        let previous = if i == 0 { self.tokens.len() - 1 } else { i - 1 };
        span(self.tokens[previous].0, self.tokens[i].0)
    }
}

/// How many tokens the ring range `(start_exclusive, end_inclusive]` holds, going clockwise
/// (wrapping past `i64::MAX`); a range from a token to itself is the whole ring.
pub(crate) fn span(start_exclusive: Token, end_inclusive: Token) -> u128 {
    match (end_inclusive as u64).wrapping_sub(start_exclusive as u64) {
        0 => RING_SPAN,
        n => u128::from(n),
    }
}

#[cfg(test)]
mod tests;
