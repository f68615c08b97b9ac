//! A constant as it is written in CQL text, before the schema says what type it must be.
//!
//! The parser ([`crate::statement`]) produces these; [`crate::value`] turns one into the
//! serialized bytes of a column's type, or says why it cannot.

/// One scalar constant of CQL text. Numbers keep their text, so that a varint or a decimal
/// loses nothing before its type is known.
#[derive(Clone, Debug, PartialEq)]
pub enum Literal {
    /// `'it''s'` or `$$it's$$`, unescaped.
    Str(String),
    /// An integer as written, with an optional leading `-`: `42`, `-7`.
    Int(String),
    /// A float as written: `1.5`, `-2e10`, `NaN`, `-Infinity`.
    Float(String),
    Bool(bool),
    /// A UUID as written: `123e4567-e89b-12d3-a456-426614174000`.
    Uuid(String),
    /// `0xCAFE`, decoded to bytes.
    Hex(Vec<u8>),
    /// A duration as written: `1h30m`, `P1DT2H`, `-3d`.
    Duration(String),
    Null,
}
