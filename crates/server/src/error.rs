//! Shorthands for the errors a statement can end in. Each is a CQL ERROR as the client will
//! see it: a code drivers map to an exception type, and a message a person can act on.

use hayate_cql::error::{ErrorBody, WireError};
use hayate_cql::wire::Consistency;

/// What executing a request ends in when it fails.
pub type QueryResult<T> = Result<T, WireError>;

/// 0x2200: the request is well formed but cannot be done (unknown table, wrong type, ...).
pub fn invalid(message: impl Into<String>) -> WireError {
    WireError::new(ErrorBody::Invalid, message)
}

/// 0x2000: the statement does not parse.
pub fn syntax(message: impl Into<String>) -> WireError {
    WireError::new(ErrorBody::SyntaxError, message)
}

/// 0x2400: CREATE of something that exists; `table` empty for a keyspace.
pub fn already_exists(keyspace: &str, table: &str) -> WireError {
    let message = if table.is_empty() {
        format!("Keyspace {keyspace} already exists")
    } else {
        format!("Table {keyspace}.{table} already exists")
    };
    WireError::new(
        ErrorBody::AlreadyExists {
            keyspace: keyspace.to_owned(),
            table: table.to_owned(),
        },
        message,
    )
}

/// 0x2100: the logged-in role may not do this.
pub fn unauthorized(message: impl Into<String>) -> WireError {
    WireError::new(ErrorBody::Unauthorized, message)
}

/// 0x0000: something went wrong on our side; the message says what and where to look.
pub fn server_error(message: impl Into<String>) -> WireError {
    WireError::new(ErrorBody::ServerError, message)
}

/// 0x2300: the node's configuration forbids the request (e.g. a write with the device full).
pub fn config_error(message: impl Into<String>) -> WireError {
    WireError::new(ErrorBody::ConfigError, message)
}

/// 0x1000: not enough replicas can be reached for the consistency level.
pub fn unavailable(consistency: Consistency, required: usize, alive: usize) -> WireError {
    WireError::new(
        ErrorBody::Unavailable {
            consistency,
            required: i32::try_from(required).unwrap_or(i32::MAX),
            alive: i32::try_from(alive).unwrap_or(i32::MAX),
        },
        format!(
            "Cannot achieve consistency level {}",
            consistency_name(consistency)
        ),
    )
}

/// The level's name as Cassandra prints it.
pub fn consistency_name(c: Consistency) -> &'static str {
    match c {
        Consistency::Any => "ANY",
        Consistency::One => "ONE",
        Consistency::Two => "TWO",
        Consistency::Three => "THREE",
        Consistency::Quorum => "QUORUM",
        Consistency::All => "ALL",
        Consistency::LocalQuorum => "LOCAL_QUORUM",
        Consistency::EachQuorum => "EACH_QUORUM",
        Consistency::Serial => "SERIAL",
        Consistency::LocalSerial => "LOCAL_SERIAL",
        Consistency::LocalOne => "LOCAL_ONE",
    }
}
