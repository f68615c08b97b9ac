//! Why a value was refused. The messages follow Cassandra's `MarshalException` and
//! InvalidRequest texts for the same mistake, because drivers' users search for those; the
//! server adds which column the value was for.

use std::fmt;

/// At most this many bytes of a refused value are shown in hex in a message: enough to find the
/// value, not enough to echo a megabyte back to the client.
pub const HEX_SHOWN_MAX_BYTES: usize = 64;

/// Why bytes or a literal are not a value of the expected type.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ValueError {
    /// A fixed-width value of the wrong length; `expected` is Cassandra's phrase, such as
    /// "Expected 4 or 0 byte int".
    WrongLength {
        expected: &'static str,
        length: usize,
    },
    InvalidAscii {
        byte: u8,
    },
    InvalidUtf8 {
        hex: String,
    },
    InvalidInet {
        hex: String,
    },
    /// A `time` outside one day.
    TimeOutOfRange {
        nanos: i64,
    },
    /// A `timeuuid` whose version nibble is not 1.
    TimeuuidVersion,
    /// A duration's months or days do not fit 32 bits.
    DurationFieldRange {
        field: &'static str,
        value: i64,
    },
    /// A duration's three fields have different signs.
    DurationSigns {
        months: i64,
        days: i64,
        nanos: i64,
    },
    /// The value ended while `what` was being read.
    Truncated {
        what: &'static str,
    },
    /// Bytes were left after a complete `what`.
    TrailingBytes {
        what: &'static str,
    },
    /// A collection count below zero.
    NegativeCount {
        what: &'static str,
        count: i32,
    },
    /// A collection element was null (length -1) or had a length below -1.
    NullInCollection,
    /// A tuple value with more components than its type.
    TooManyComponents {
        count: usize,
        max: usize,
    },
    /// Bytes given to [`super::decode_order_key`] are not a key of the type: storage damage or
    /// keys of another column read in its place.
    CorruptOrderKey {
        reason: &'static str,
    },
    /// A literal of a kind this type cannot be made from: a STRING for an int.
    InvalidLiteral {
        kind: &'static str,
        text: String,
        ty: String,
    },
    /// A literal of the right kind that still does not make a value, with Cassandra's
    /// explanation, such as "Unable to make int from '99999999999'".
    Unparseable {
        message: String,
    },
}

/// Hex of the first [`HEX_SHOWN_MAX_BYTES`] bytes, with `...` when cut.
pub(crate) fn hex_prefix(bytes: &[u8]) -> String {
    let shown = &bytes[..bytes.len().min(HEX_SHOWN_MAX_BYTES)];
    let mut out: String = shown.iter().map(|b| format!("{b:02x}")).collect();
    if shown.len() < bytes.len() {
        out.push_str("...");
    }
    out
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueError::WrongLength { expected, length } => write!(f, "{expected} ({length})"),
            ValueError::InvalidAscii { byte } => write!(f, "Invalid byte for ascii: {byte}"),
            ValueError::InvalidUtf8 { hex } => write!(f, "Invalid UTF-8 bytes {hex}"),
            ValueError::InvalidInet { hex } => {
                write!(f, "Expected 4 or 16 byte inetaddress; got {hex}")
            }
            ValueError::TimeOutOfRange { nanos } => write!(
                f,
                "Time value must be between 0 and 86399999999999 nanoseconds since midnight ({nanos})"
            ),
            ValueError::TimeuuidVersion => f.write_str("Invalid version for TimeUUID type."),
            ValueError::DurationFieldRange { field, value } => {
                write!(
                    f,
                    "The duration {field} must be a 32 bits integer but was: {value}"
                )
            }
            ValueError::DurationSigns { months, days, nanos } => write!(
                f,
                "The duration months, days and nanoseconds must be all of the same sign \
                 ({months}, {days}, {nanos})"
            ),
            ValueError::Truncated { what } => write!(f, "Not enough bytes to read {what}"),
            ValueError::TrailingBytes { what } => write!(f, "Unexpected extraneous bytes after {what} value"),
            ValueError::NegativeCount { what, count } => {
                write!(f, "Invalid negative number of elements ({count}) in {what}")
            }
            ValueError::NullInCollection => f.write_str("null is not supported inside collections"),
            ValueError::TooManyComponents { count, max } => write!(
                f,
                "Tuple value has {count} components but its type has only {max}"
            ),
            ValueError::CorruptOrderKey { reason } => write!(f, "corrupt order key: {reason}"),
            ValueError::InvalidLiteral { kind, text, ty } => {
                write!(f, "Invalid {kind} constant ({text}) of type {ty}")
            }
            ValueError::Unparseable { message } => f.write_str(message),
        }
    }
}

impl std::error::Error for ValueError {}
