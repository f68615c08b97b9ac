//! The error a statement that does not parse is answered with.

use std::fmt;

/// A statement that does not parse, answered with the SYNTAX_ERROR code (0x2000).
///
/// The Display form follows Cassandra's, `line 1:10 mismatched input 'FRM' expecting FROM
/// (SELECT * [FRM]...)`, so that people and tools used to Cassandra read it the same way.
/// Unlike Cassandra (whose columns count from 0), `column` counts characters from 1, as
/// editors do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    /// 1-based line of the offending token.
    pub line: u32,
    /// 1-based character (not byte) position of the offending token within its line.
    pub column: u32,
    /// What went wrong, with the offending token and a snippet of the text around it.
    pub message: String,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}:{} {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for SyntaxError {}
