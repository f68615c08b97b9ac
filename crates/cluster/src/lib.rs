//! The cluster layer: where a request meets its replicas.
//!
//! The path of a request through this crate: the server plans a statement into mutations, a
//! partition read or a token-range read and hands it to the [`coordinator`] with a consistency
//! level. The coordinator asks the [`ring`] which nodes hold the token, checks the
//! [`consistency`] level against the nodes [`membership`] says are alive (before anything is
//! sent), reaches the local replica through [`replica::Replica`] (which the storage engine
//! implements) and the others with [`message`]s over a [`transport`], waits for as many answers
//! as the level needs, merges them by last-write-wins and repairs the replicas it saw behind.
//! A write for a replica that is down becomes a [`hints`] entry, replayed when it returns.
//!
//! What must be agreed rather than gossiped (token ownership and the schema) goes through a
//! Raft log ([`metadata`]); liveness and the rest of a node's published state travel by gossip
//! ([`membership`]).
//!
//! This crate knows nothing of CQL: keys are bytes, a row is the engine's [`hayate_storage::Row`],
//! and the schema is an opaque state machine the server supplies.

pub mod batchlog;
pub mod consistency;
pub mod coordinator;
pub mod counter;
pub mod hints;
pub mod membership;
pub mod message;
pub mod metadata;
pub mod node;
pub mod paxos;
pub mod replica;
pub mod ring;
pub mod streaming;
pub mod topology;
pub mod transport;
