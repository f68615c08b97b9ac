//! The CQL native protocol, versions 4 and 5 (spec: Cassandra's `doc/native_protocol_v4.spec` and
//! `doc/native_protocol_v5.spec`).
//!
//! A request travels through this crate as: 9 header bytes → [`frame::FrameHeader`] → body
//! bytes → [`request`] message. Responses go the other way. The protocol is big-endian; every
//! length read from the wire is checked against a named `*_MAX` bound before it is trusted.
//! This crate does no I/O: the server crate reads and writes sockets.

pub mod compression;
pub mod error;
pub mod frame;
pub mod opcode;
pub mod request;
pub mod response;
pub mod segment;
pub mod statement;
pub mod value;
pub mod wire;

#[cfg(test)]
mod driver_frames_tests;
