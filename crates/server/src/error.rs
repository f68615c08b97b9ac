//! The errors a statement can end in, typed. Each becomes a CQL ERROR (a code drivers map to an
//! exception type, and a message a person can act on) only where the response is written
//! ([`QueryError::to_wire`]).

use std::fmt;

use hayate_cluster::consistency::{ConsistencyLevel, Unavailable};
use hayate_cluster::coordinator::{CoordinatorError, WriteType};
use hayate_cluster::replica::ReplicaErrorKind;
use hayate_cql::error::{self as wire, ErrorBody, WireError};
use hayate_cql::wire::Consistency;

/// What executing a request ends in when it fails.
pub type QueryResult<T> = Result<T, QueryError>;

#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum QueryError {
    /// 0x2000: the statement does not parse.
    Syntax(String),
    /// 0x2200: well formed but cannot be done (unknown table, wrong type, ...).
    Invalid(String),
    /// 0x2100: the logged-in role may not do this.
    Unauthorized(String),
    /// 0x2400: CREATE of something that exists; `table` empty for a keyspace.
    AlreadyExists { keyspace: String, table: String },
    /// 0x2300: the node's configuration forbids the request (e.g. a write with the device full).
    Config(String),
    /// 0x0000: something went wrong on our side; the message says what and where to look.
    Server(String),
    /// 0x1400: a function failed on its argument (e.g. `fromJson` of text that is not JSON).
    FunctionFailure {
        keyspace: String,
        function: String,
        arg_types: Vec<String>,
        message: String,
    },
    /// 0x2500: a prepared statement this node does not know.
    Unprepared { id: Vec<u8>, message: String },
    /// 0x1000, 0x1100, 0x1200, 0x1300, 0x1500: the replicas could not meet the consistency
    /// level (too few alive, too slow, or failed).
    Coordinator(CoordinatorError),
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueryError::Syntax(m)
            | QueryError::Invalid(m)
            | QueryError::Unauthorized(m)
            | QueryError::Config(m)
            | QueryError::Server(m)
            | QueryError::Unprepared { message: m, .. }
            | QueryError::FunctionFailure { message: m, .. } => f.write_str(m),
            QueryError::AlreadyExists { keyspace, table } if table.is_empty() => {
                write!(f, "Keyspace {keyspace} already exists")
            }
            QueryError::AlreadyExists { keyspace, table } => {
                write!(f, "Table {keyspace}.{table} already exists")
            }
            QueryError::Coordinator(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for QueryError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            QueryError::Coordinator(e) => Some(e),
            _ => None,
        }
    }
}

impl From<CoordinatorError> for QueryError {
    fn from(e: CoordinatorError) -> QueryError {
        match e {
            CoordinatorError::Invalid(m) => QueryError::Invalid(m),
            CoordinatorError::Replica(r) => match r.kind {
                ReplicaErrorKind::Refused => QueryError::Config(r.message),
                ReplicaErrorKind::Invalid => QueryError::Invalid(r.message),
                _ => QueryError::Server(r.message),
            },
            other => QueryError::Coordinator(other),
        }
    }
}

impl QueryError {
    /// The ERROR the client gets.
    pub fn to_wire(&self) -> WireError {
        let message = self.to_string();
        let body = match self {
            QueryError::Syntax(_) => ErrorBody::SyntaxError,
            QueryError::Invalid(_) => ErrorBody::Invalid,
            QueryError::Unauthorized(_) => ErrorBody::Unauthorized,
            QueryError::AlreadyExists { keyspace, table } => ErrorBody::AlreadyExists {
                keyspace: keyspace.clone(),
                table: table.clone(),
            },
            QueryError::Config(_) => ErrorBody::ConfigError,
            QueryError::Server(_) => ErrorBody::ServerError,
            QueryError::Unprepared { id, .. } => ErrorBody::Unprepared { id: id.clone() },
            QueryError::FunctionFailure {
                keyspace,
                function,
                arg_types,
                ..
            } => ErrorBody::FunctionFailure {
                keyspace: keyspace.clone(),
                function: function.clone(),
                arg_types: arg_types.clone(),
            },
            QueryError::Coordinator(e) => coordinator_body(e),
        };
        WireError::new(body, message)
    }
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn coordinator_body(e: &CoordinatorError) -> ErrorBody {
    match e {
        CoordinatorError::Unavailable(Unavailable {
            consistency,
            required,
            alive,
        }) => ErrorBody::Unavailable {
            consistency: to_wire_consistency(*consistency),
            required: count(*required),
            alive: count(*alive),
        },
        CoordinatorError::WriteTimeout {
            consistency,
            received,
            block_for,
            write_type,
        } => ErrorBody::WriteTimeout {
            consistency: to_wire_consistency(*consistency),
            received: count(*received),
            block_for: count(*block_for),
            write_type: to_wire_write_type(*write_type),
        },
        CoordinatorError::ReadTimeout {
            consistency,
            received,
            block_for,
            data_present,
        } => ErrorBody::ReadTimeout {
            consistency: to_wire_consistency(*consistency),
            received: count(*received),
            block_for: count(*block_for),
            data_present: *data_present,
        },
        CoordinatorError::WriteFailure {
            consistency,
            received,
            block_for,
            failures,
            write_type,
        } => ErrorBody::WriteFailure {
            consistency: to_wire_consistency(*consistency),
            received: count(*received),
            block_for: count(*block_for),
            num_failures: count(*failures),
            // The coordinator counts failed replicas but does not name them; v5's reason map
            // then lists each as an unknown replica (see hayate_cql::error).
            reasons: Vec::new(),
            write_type: to_wire_write_type(*write_type),
        },
        CoordinatorError::ReadFailure {
            consistency,
            received,
            block_for,
            failures,
            data_present,
        } => ErrorBody::ReadFailure {
            consistency: to_wire_consistency(*consistency),
            received: count(*received),
            block_for: count(*block_for),
            num_failures: count(*failures),
            reasons: Vec::new(),
            data_present: *data_present,
        },
        _ => ErrorBody::ServerError,
    }
}

fn to_wire_write_type(w: WriteType) -> wire::WriteType {
    match w {
        WriteType::Simple => wire::WriteType::Simple,
        WriteType::Batch => wire::WriteType::Batch,
        WriteType::UnloggedBatch => wire::WriteType::UnloggedBatch,
        WriteType::Counter => wire::WriteType::Counter,
        WriteType::BatchLog => wire::WriteType::BatchLog,
        WriteType::Cas => wire::WriteType::Cas,
        other => wire::WriteType::Other(other.name().to_owned()),
    }
}

/// The protocol's consistency level as the coordinator's.
pub fn consistency_level(c: Consistency) -> ConsistencyLevel {
    match c {
        Consistency::Any => ConsistencyLevel::Any,
        Consistency::One => ConsistencyLevel::One,
        Consistency::Two => ConsistencyLevel::Two,
        Consistency::Three => ConsistencyLevel::Three,
        Consistency::Quorum => ConsistencyLevel::Quorum,
        Consistency::All => ConsistencyLevel::All,
        Consistency::LocalQuorum => ConsistencyLevel::LocalQuorum,
        Consistency::EachQuorum => ConsistencyLevel::EachQuorum,
        Consistency::Serial => ConsistencyLevel::Serial,
        Consistency::LocalSerial => ConsistencyLevel::LocalSerial,
        Consistency::LocalOne => ConsistencyLevel::LocalOne,
    }
}

fn to_wire_consistency(c: ConsistencyLevel) -> Consistency {
    match c {
        ConsistencyLevel::Any => Consistency::Any,
        ConsistencyLevel::One => Consistency::One,
        ConsistencyLevel::Two => Consistency::Two,
        ConsistencyLevel::Three => Consistency::Three,
        ConsistencyLevel::Quorum => Consistency::Quorum,
        ConsistencyLevel::All => Consistency::All,
        ConsistencyLevel::LocalQuorum => Consistency::LocalQuorum,
        ConsistencyLevel::EachQuorum => Consistency::EachQuorum,
        ConsistencyLevel::Serial => Consistency::Serial,
        ConsistencyLevel::LocalSerial => Consistency::LocalSerial,
        ConsistencyLevel::LocalOne => Consistency::LocalOne,
    }
}

/// 0x2200: the request is well formed but cannot be done.
pub fn invalid(message: impl Into<String>) -> QueryError {
    QueryError::Invalid(message.into())
}

/// 0x2000: the statement does not parse.
pub fn syntax(message: impl Into<String>) -> QueryError {
    QueryError::Syntax(message.into())
}

/// 0x2400: CREATE of something that exists; `table` empty for a keyspace.
pub fn already_exists(keyspace: &str, table: &str) -> QueryError {
    QueryError::AlreadyExists {
        keyspace: keyspace.to_owned(),
        table: table.to_owned(),
    }
}

/// 0x2100: the logged-in role may not do this.
pub fn unauthorized(message: impl Into<String>) -> QueryError {
    QueryError::Unauthorized(message.into())
}

/// 0x0000: something went wrong on our side.
pub fn server_error(message: impl Into<String>) -> QueryError {
    QueryError::Server(message.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hayate_cql::error::ErrorCode;

    #[test]
    fn coordinator_errors_keep_their_fields_on_the_wire() {
        let e: QueryError = CoordinatorError::Unavailable(Unavailable {
            consistency: ConsistencyLevel::Quorum,
            required: 2,
            alive: 1,
        })
        .into();
        let w = e.to_wire();
        assert_eq!(w.code(), ErrorCode::Unavailable);
        assert_eq!(
            w.body,
            ErrorBody::Unavailable {
                consistency: Consistency::Quorum,
                required: 2,
                alive: 1
            }
        );
        let e: QueryError = CoordinatorError::WriteTimeout {
            consistency: ConsistencyLevel::Two,
            received: 1,
            block_for: 2,
            write_type: WriteType::Batch,
        }
        .into();
        assert_eq!(e.to_wire().code(), ErrorCode::WriteTimeout);
    }
}
