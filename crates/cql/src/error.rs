//! The errors the server reports to clients in ERROR messages.
//!
//! Spec: native_protocol_v4.spec, section 4.2.1 "ERROR" and section 9 "Error codes". An ERROR
//! body is `<code: [int]><message: [string]>` followed by fields that depend on the code.
//! Each code's fields are named here so that the server cannot send an ERROR a driver cannot
//! parse (a driver reads exactly these fields and would misread the stream otherwise).
//!
//! Protocol v5 changes one thing here: READ_FAILURE and WRITE_FAILURE carry, instead of
//! `<numfailures: [int]>`, a `<reasonmap>`: an [int] n and n pairs of the failed replica's
//! address ([inetaddr]: a [byte] length and the address) and a [short] failure reason code.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::wire::{
    read_byte, read_consistency, read_int, read_short_bytes, read_string, read_string_list, write_byte,
    write_consistency, write_int, write_short_bytes, write_string, write_string_list, Consistency,
    DecodeError,
};

/// The error codes of spec section 9. The discriminant is the [int] on the wire.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    ServerError = 0x0000,
    ProtocolError = 0x000A,
    AuthenticationError = 0x0100,
    Unavailable = 0x1000,
    Overloaded = 0x1001,
    IsBootstrapping = 0x1002,
    TruncateError = 0x1003,
    WriteTimeout = 0x1100,
    ReadTimeout = 0x1200,
    ReadFailure = 0x1300,
    FunctionFailure = 0x1400,
    WriteFailure = 0x1500,
    SyntaxError = 0x2000,
    Unauthorized = 0x2100,
    Invalid = 0x2200,
    ConfigError = 0x2300,
    AlreadyExists = 0x2400,
    Unprepared = 0x2500,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 18] = [
        ErrorCode::ServerError,
        ErrorCode::ProtocolError,
        ErrorCode::AuthenticationError,
        ErrorCode::Unavailable,
        ErrorCode::Overloaded,
        ErrorCode::IsBootstrapping,
        ErrorCode::TruncateError,
        ErrorCode::WriteTimeout,
        ErrorCode::ReadTimeout,
        ErrorCode::ReadFailure,
        ErrorCode::FunctionFailure,
        ErrorCode::WriteFailure,
        ErrorCode::SyntaxError,
        ErrorCode::Unauthorized,
        ErrorCode::Invalid,
        ErrorCode::ConfigError,
        ErrorCode::AlreadyExists,
        ErrorCode::Unprepared,
    ];

    pub fn from_int(value: i32) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| *c as i32 == value)
    }
}

/// The kind of write that timed out or failed (the `<writeType>` [string] of section 9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteType {
    Simple,
    Batch,
    UnloggedBatch,
    Counter,
    BatchLog,
    /// A lightweight transaction (Cassandra sends this though the v4 spec omits it).
    Cas,
    /// Any other string, kept so that decoding a newer server's error does not fail.
    Other(String),
}

impl WriteType {
    pub fn as_str(&self) -> &str {
        match self {
            WriteType::Simple => "SIMPLE",
            WriteType::Batch => "BATCH",
            WriteType::UnloggedBatch => "UNLOGGED_BATCH",
            WriteType::Counter => "COUNTER",
            WriteType::BatchLog => "BATCH_LOG",
            WriteType::Cas => "CAS",
            WriteType::Other(s) => s,
        }
    }

    pub fn parse(s: &str) -> WriteType {
        match s {
            "SIMPLE" => WriteType::Simple,
            "BATCH" => WriteType::Batch,
            "UNLOGGED_BATCH" => WriteType::UnloggedBatch,
            "COUNTER" => WriteType::Counter,
            "BATCH_LOG" => WriteType::BatchLog,
            "CAS" => WriteType::Cas,
            other => WriteType::Other(other.to_owned()),
        }
    }
}

/// The code-specific part of an ERROR body, one variant per code, fields in wire order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorBody {
    ServerError,
    ProtocolError,
    AuthenticationError,
    Unavailable {
        consistency: Consistency,
        required: i32,
        alive: i32,
    },
    Overloaded,
    IsBootstrapping,
    TruncateError,
    WriteTimeout {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        write_type: WriteType,
    },
    ReadTimeout {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        data_present: bool,
    },
    ReadFailure {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        num_failures: i32,
        /// The replicas that failed and why, where known (v5's reason map).
        reasons: Vec<FailureReason>,
        data_present: bool,
    },
    FunctionFailure {
        keyspace: String,
        function: String,
        arg_types: Vec<String>,
    },
    WriteFailure {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        num_failures: i32,
        /// The replicas that failed and why, where known (v5's reason map).
        reasons: Vec<FailureReason>,
        write_type: WriteType,
    },
    SyntaxError,
    Unauthorized,
    Invalid,
    ConfigError,
    /// `table` is empty when a keyspace already exists.
    AlreadyExists {
        keyspace: String,
        table: String,
    },
    Unprepared {
        id: Vec<u8>,
    },
}

impl ErrorBody {
    pub fn code(&self) -> ErrorCode {
        match self {
            ErrorBody::ServerError => ErrorCode::ServerError,
            ErrorBody::ProtocolError => ErrorCode::ProtocolError,
            ErrorBody::AuthenticationError => ErrorCode::AuthenticationError,
            ErrorBody::Unavailable { .. } => ErrorCode::Unavailable,
            ErrorBody::Overloaded => ErrorCode::Overloaded,
            ErrorBody::IsBootstrapping => ErrorCode::IsBootstrapping,
            ErrorBody::TruncateError => ErrorCode::TruncateError,
            ErrorBody::WriteTimeout { .. } => ErrorCode::WriteTimeout,
            ErrorBody::ReadTimeout { .. } => ErrorCode::ReadTimeout,
            ErrorBody::ReadFailure { .. } => ErrorCode::ReadFailure,
            ErrorBody::FunctionFailure { .. } => ErrorCode::FunctionFailure,
            ErrorBody::WriteFailure { .. } => ErrorCode::WriteFailure,
            ErrorBody::SyntaxError => ErrorCode::SyntaxError,
            ErrorBody::Unauthorized => ErrorCode::Unauthorized,
            ErrorBody::Invalid => ErrorCode::Invalid,
            ErrorBody::ConfigError => ErrorCode::ConfigError,
            ErrorBody::AlreadyExists { .. } => ErrorCode::AlreadyExists,
            ErrorBody::Unprepared { .. } => ErrorCode::Unprepared,
        }
    }
}

/// The largest message we send: a [string] length is a [short].
pub const ERROR_MESSAGE_MAX_BYTES: usize = u16::MAX as usize;

/// A complete ERROR body: code, human-readable message, and the code's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    pub message: String,
    pub body: ErrorBody,
}

/// One entry of a v5 reason map: which replica failed, and Cassandra's reason code for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureReason {
    pub replica: IpAddr,
    pub code: u16,
}

impl FailureReason {
    /// Cassandra's `RequestFailureReason.UNKNOWN`.
    pub const UNKNOWN: u16 = 0x0000;
}

/// The most reason map entries decoded: one per replica, and no keyspace has more replicas.
pub const FAILURE_REASONS_MAX: usize = 1024;

/// Writes v5's reason map. Where the replicas that failed are not known by address (the
/// coordinator counts failures), each unnamed failure is written as the unspecified address
/// with reason UNKNOWN, so that the count a driver reports stays right.
fn write_reason_map(out: &mut Vec<u8>, num_failures: i32, reasons: &[FailureReason]) {
    let unnamed = usize::try_from(num_failures)
        .unwrap_or(0)
        .saturating_sub(reasons.len());
    write_int(out, (reasons.len() + unnamed) as i32);
    let unknown = FailureReason {
        replica: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        code: FailureReason::UNKNOWN,
    };
    for reason in reasons.iter().chain(std::iter::repeat_n(&unknown, unnamed)) {
        match reason.replica {
            IpAddr::V4(a) => {
                write_byte(out, 4);
                out.extend_from_slice(&a.octets());
            }
            IpAddr::V6(a) => {
                write_byte(out, 16);
                out.extend_from_slice(&a.octets());
            }
        }
        out.extend_from_slice(&reason.code.to_be_bytes());
    }
}

fn read_reason_map(buf: &mut &[u8]) -> Result<Vec<FailureReason>, DecodeError> {
    let n = read_int(buf)?;
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n <= FAILURE_REASONS_MAX)
        .ok_or(DecodeError::Invalid {
            what: "reason map size",
            value: n.into(),
        })?;
    let mut reasons = Vec::with_capacity(n.min(buf.len() / 7));
    for _ in 0..n {
        let replica = match read_byte(buf)? {
            4 => IpAddr::V4(Ipv4Addr::from(read_fixed::<4>(buf)?)),
            16 => IpAddr::V6(Ipv6Addr::from(read_fixed::<16>(buf)?)),
            other => {
                return Err(DecodeError::Invalid {
                    what: "reason map address length",
                    value: other.into(),
                })
            }
        };
        let code = u16::from_be_bytes(read_fixed::<2>(buf)?);
        reasons.push(FailureReason { replica, code });
    }
    Ok(reasons)
}

fn read_fixed<const N: usize>(buf: &mut &[u8]) -> Result<[u8; N], DecodeError> {
    let Some((head, rest)) = buf.split_first_chunk::<N>() else {
        return Err(DecodeError::Truncated {
            what: "reason map entry",
            needed: N,
            remaining: buf.len(),
        });
    };
    *buf = rest;
    Ok(*head)
}

impl WireError {
    pub fn new(body: ErrorBody, message: impl Into<String>) -> WireError {
        WireError {
            message: message.into(),
            body,
        }
    }

    /// A protocol error (0x000A), the answer to any malformed frame or body.
    pub fn protocol(message: impl Into<String>) -> WireError {
        WireError::new(ErrorBody::ProtocolError, message)
    }

    pub fn code(&self) -> ErrorCode {
        self.body.code()
    }

    /// Appends a protocol v4 ERROR body.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_versioned(out, crate::frame::PROTOCOL_V4);
    }

    /// Appends the ERROR body. A message longer than a [string] can hold is cut at a character
    /// boundary: messages may echo user input (a query), which must not crash the server.
    pub fn encode_versioned(&self, out: &mut Vec<u8>, version: u8) {
        let v5 = version >= crate::frame::PROTOCOL_V5;
        write_int(out, self.code() as i32);
        let mut end = self.message.len().min(ERROR_MESSAGE_MAX_BYTES);
        while !self.message.is_char_boundary(end) {
            end -= 1;
        }
        write_string(out, &self.message[..end]);
        match &self.body {
            ErrorBody::Unavailable {
                consistency,
                required,
                alive,
            } => {
                write_consistency(out, *consistency);
                write_int(out, *required);
                write_int(out, *alive);
            }
            ErrorBody::WriteTimeout {
                consistency,
                received,
                block_for,
                write_type,
            } => {
                write_consistency(out, *consistency);
                write_int(out, *received);
                write_int(out, *block_for);
                write_string(out, write_type.as_str());
            }
            ErrorBody::ReadTimeout {
                consistency,
                received,
                block_for,
                data_present,
            } => {
                write_consistency(out, *consistency);
                write_int(out, *received);
                write_int(out, *block_for);
                write_byte(out, u8::from(*data_present));
            }
            ErrorBody::ReadFailure {
                consistency,
                received,
                block_for,
                num_failures,
                reasons,
                data_present,
            } => {
                write_consistency(out, *consistency);
                write_int(out, *received);
                write_int(out, *block_for);
                if v5 {
                    write_reason_map(out, *num_failures, reasons);
                } else {
                    write_int(out, *num_failures);
                }
                write_byte(out, u8::from(*data_present));
            }
            ErrorBody::FunctionFailure {
                keyspace,
                function,
                arg_types,
            } => {
                write_string(out, keyspace);
                write_string(out, function);
                write_string_list(out, arg_types);
            }
            ErrorBody::WriteFailure {
                consistency,
                received,
                block_for,
                num_failures,
                reasons,
                write_type,
            } => {
                write_consistency(out, *consistency);
                write_int(out, *received);
                write_int(out, *block_for);
                if v5 {
                    write_reason_map(out, *num_failures, reasons);
                } else {
                    write_int(out, *num_failures);
                }
                write_string(out, write_type.as_str());
            }
            ErrorBody::AlreadyExists { keyspace, table } => {
                write_string(out, keyspace);
                write_string(out, table);
            }
            ErrorBody::Unprepared { id } => write_short_bytes(out, id),
            ErrorBody::ServerError
            | ErrorBody::ProtocolError
            | ErrorBody::AuthenticationError
            | ErrorBody::Overloaded
            | ErrorBody::IsBootstrapping
            | ErrorBody::TruncateError
            | ErrorBody::SyntaxError
            | ErrorBody::Unauthorized
            | ErrorBody::Invalid
            | ErrorBody::ConfigError => {}
        }
    }

    /// Decodes a protocol v4 ERROR body (client side: the bench and the tests).
    pub fn decode(buf: &mut &[u8]) -> Result<WireError, DecodeError> {
        WireError::decode_versioned(buf, crate::frame::PROTOCOL_V4)
    }

    pub fn decode_versioned(buf: &mut &[u8], version: u8) -> Result<WireError, DecodeError> {
        let v5 = version >= crate::frame::PROTOCOL_V5;
        let failures = |buf: &mut &[u8]| -> Result<(i32, Vec<FailureReason>), DecodeError> {
            if v5 {
                let reasons = read_reason_map(buf)?;
                Ok((reasons.len() as i32, reasons))
            } else {
                Ok((read_int(buf)?, Vec::new()))
            }
        };
        let code = read_int(buf)?;
        let code = ErrorCode::from_int(code).ok_or(DecodeError::Invalid {
            what: "error code",
            value: code.into(),
        })?;
        let message = read_string(buf)?.to_owned();
        let body = match code {
            ErrorCode::ServerError => ErrorBody::ServerError,
            ErrorCode::ProtocolError => ErrorBody::ProtocolError,
            ErrorCode::AuthenticationError => ErrorBody::AuthenticationError,
            ErrorCode::Unavailable => ErrorBody::Unavailable {
                consistency: read_consistency(buf)?,
                required: read_int(buf)?,
                alive: read_int(buf)?,
            },
            ErrorCode::Overloaded => ErrorBody::Overloaded,
            ErrorCode::IsBootstrapping => ErrorBody::IsBootstrapping,
            ErrorCode::TruncateError => ErrorBody::TruncateError,
            ErrorCode::WriteTimeout => ErrorBody::WriteTimeout {
                consistency: read_consistency(buf)?,
                received: read_int(buf)?,
                block_for: read_int(buf)?,
                write_type: WriteType::parse(read_string(buf)?),
            },
            ErrorCode::ReadTimeout => ErrorBody::ReadTimeout {
                consistency: read_consistency(buf)?,
                received: read_int(buf)?,
                block_for: read_int(buf)?,
                data_present: read_byte(buf)? != 0,
            },
            ErrorCode::ReadFailure => {
                let consistency = read_consistency(buf)?;
                let received = read_int(buf)?;
                let block_for = read_int(buf)?;
                let (num_failures, reasons) = failures(buf)?;
                ErrorBody::ReadFailure {
                    consistency,
                    received,
                    block_for,
                    num_failures,
                    reasons,
                    data_present: read_byte(buf)? != 0,
                }
            }
            ErrorCode::FunctionFailure => ErrorBody::FunctionFailure {
                keyspace: read_string(buf)?.to_owned(),
                function: read_string(buf)?.to_owned(),
                arg_types: read_string_list(buf)?.into_iter().map(str::to_owned).collect(),
            },
            ErrorCode::WriteFailure => {
                let consistency = read_consistency(buf)?;
                let received = read_int(buf)?;
                let block_for = read_int(buf)?;
                let (num_failures, reasons) = failures(buf)?;
                ErrorBody::WriteFailure {
                    consistency,
                    received,
                    block_for,
                    num_failures,
                    reasons,
                    write_type: WriteType::parse(read_string(buf)?),
                }
            }
            ErrorCode::SyntaxError => ErrorBody::SyntaxError,
            ErrorCode::Unauthorized => ErrorBody::Unauthorized,
            ErrorCode::Invalid => ErrorBody::Invalid,
            ErrorCode::ConfigError => ErrorBody::ConfigError,
            ErrorCode::AlreadyExists => ErrorBody::AlreadyExists {
                keyspace: read_string(buf)?.to_owned(),
                table: read_string(buf)?.to_owned(),
            },
            ErrorCode::Unprepared => ErrorBody::Unprepared {
                id: read_short_bytes(buf)?.to_vec(),
            },
        };
        Ok(WireError { message, body })
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} (0x{:04X}): {}",
            self.code(),
            self.code() as i32,
            self.message
        )
    }
}

impl std::error::Error for WireError {}

impl From<DecodeError> for WireError {
    fn from(e: DecodeError) -> WireError {
        WireError::protocol(e.to_string())
    }
}

impl From<crate::frame::FrameError> for WireError {
    fn from(e: crate::frame::FrameError) -> WireError {
        WireError::protocol(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<WireError> {
        let c = Consistency::Quorum;
        let bodies = vec![
            ErrorBody::ServerError,
            ErrorBody::ProtocolError,
            ErrorBody::AuthenticationError,
            ErrorBody::Unavailable {
                consistency: c,
                required: 2,
                alive: 1,
            },
            ErrorBody::Overloaded,
            ErrorBody::IsBootstrapping,
            ErrorBody::TruncateError,
            ErrorBody::WriteTimeout {
                consistency: c,
                received: 1,
                block_for: 2,
                write_type: WriteType::Simple,
            },
            ErrorBody::ReadTimeout {
                consistency: c,
                received: 1,
                block_for: 2,
                data_present: true,
            },
            ErrorBody::ReadFailure {
                consistency: c,
                received: 1,
                block_for: 2,
                num_failures: 1,
                reasons: Vec::new(),
                data_present: false,
            },
            ErrorBody::FunctionFailure {
                keyspace: "ks".into(),
                function: "f".into(),
                arg_types: vec!["int".into()],
            },
            ErrorBody::WriteFailure {
                consistency: c,
                received: 0,
                block_for: 2,
                num_failures: 2,
                reasons: Vec::new(),
                write_type: WriteType::UnloggedBatch,
            },
            ErrorBody::SyntaxError,
            ErrorBody::Unauthorized,
            ErrorBody::Invalid,
            ErrorBody::ConfigError,
            ErrorBody::AlreadyExists {
                keyspace: "ks".into(),
                table: String::new(),
            },
            ErrorBody::Unprepared { id: vec![0xAB; 16] },
        ];
        bodies
            .into_iter()
            .map(|b| WireError::new(b, "something went wrong"))
            .collect()
    }

    #[test]
    fn every_code_round_trips_and_rejects_every_truncation() {
        for err in samples() {
            let mut out = Vec::new();
            err.encode(&mut out);
            let mut cursor = out.as_slice();
            assert_eq!(WireError::decode(&mut cursor), Ok(err.clone()));
            assert!(cursor.is_empty());
            for cut in 0..out.len() {
                let mut cursor = &out[..cut];
                assert!(
                    WireError::decode(&mut cursor).is_err(),
                    "{err:?} accepted a {cut}-byte prefix"
                );
            }
        }
    }

    #[test]
    fn v5_failures_carry_a_reason_map() {
        let replica: IpAddr = "10.0.0.7".parse().expect("address");
        let err = WireError::new(
            ErrorBody::WriteFailure {
                consistency: Consistency::Quorum,
                received: 0,
                block_for: 2,
                num_failures: 2,
                reasons: vec![FailureReason { replica, code: 3 }],
                write_type: WriteType::Simple,
            },
            "Operation failed",
        );
        let mut out = Vec::new();
        err.encode_versioned(&mut out, crate::frame::PROTOCOL_V5);
        // code, message, consistency, received, block_for, then the map: 2 entries, the named
        // replica and one unnamed failure.
        let map_at = 4 + 2 + "Operation failed".len() + 2 + 4 + 4;
        assert_eq!(&out[map_at..map_at + 4], [0, 0, 0, 2]);
        assert_eq!(&out[map_at + 4..map_at + 11], [4, 10, 0, 0, 7, 0, 3]);
        assert_eq!(&out[map_at + 11..map_at + 18], [4, 0, 0, 0, 0, 0, 0]);
        let decoded =
            WireError::decode_versioned(&mut out.as_slice(), crate::frame::PROTOCOL_V5).expect("decodes");
        let ErrorBody::WriteFailure {
            num_failures,
            reasons,
            ..
        } = decoded.body
        else {
            panic!("{decoded:?}")
        };
        assert_eq!((num_failures, reasons.len()), (2, 2));
        for cut in 0..out.len() {
            assert!(WireError::decode_versioned(&mut &out[..cut], crate::frame::PROTOCOL_V5).is_err());
        }
    }

    #[test]
    fn codes_match_the_spec_table() {
        assert_eq!(ErrorCode::SyntaxError as i32, 0x2000);
        assert_eq!(ErrorCode::Invalid as i32, 0x2200);
        assert_eq!(ErrorCode::Unavailable as i32, 0x1000);
        assert_eq!(ErrorCode::WriteTimeout as i32, 0x1100);
        assert_eq!(ErrorCode::ReadTimeout as i32, 0x1200);
        assert_eq!(ErrorCode::AlreadyExists as i32, 0x2400);
        assert_eq!(ErrorCode::Unprepared as i32, 0x2500);
        assert_eq!(ErrorCode::AuthenticationError as i32, 0x0100);
        assert_eq!(ErrorCode::ProtocolError as i32, 0x000A);
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_int(code as i32), Some(code));
        }
    }

    #[test]
    fn unavailable_is_laid_out_as_drivers_read_it() {
        let err = WireError::new(
            ErrorBody::Unavailable {
                consistency: Consistency::All,
                required: 3,
                alive: 2,
            },
            "Cannot achieve consistency level ALL",
        );
        let mut out = Vec::new();
        err.encode(&mut out);
        assert_eq!(&out[..4], [0x00, 0x00, 0x10, 0x00]);
        let tail = &out[out.len() - 10..];
        assert_eq!(tail, [0x00, 0x05, 0, 0, 0, 3, 0, 0, 0, 2]);
    }

    #[test]
    fn an_overlong_message_is_cut_at_a_char_boundary_instead_of_panicking() {
        // Regression guard: an error that echoes a huge query must still encode.
        let err = WireError::new(ErrorBody::SyntaxError, "é".repeat(40_000));
        let mut out = Vec::new();
        err.encode(&mut out);
        let decoded = WireError::decode(&mut out.as_slice()).expect("decodes");
        assert_eq!(decoded.message.len(), ERROR_MESSAGE_MAX_BYTES - 1);
    }
}
