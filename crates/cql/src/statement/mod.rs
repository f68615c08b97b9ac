//! The CQL statement parser: text -> [`ast`].
//!
//! [`parse`] accepts what Cassandra 4 and 5 accept from the drivers, cqlsh and YCSB: the
//! data statements, keyspace and table DDL, roles and permissions, and DESCRIBE. Schema
//! objects hayate does not have (indexes, types, functions, views, triggers) parse to
//! [`Statement::Unsupported`] so that the server can refuse them by name.
//!
//! The parser is hand-written recursive descent over a token list (`lexer.rs`, then
//! `parser.rs` and one file per statement family). It is the first code to see a client's
//! text, so everything it builds is bounded: the text's length and token count
//! ([`STATEMENT_MAX_BYTES`], [`TOKENS_MAX`]), nesting ([`NESTING_DEPTH_MAX`]), bind markers
//! ([`BIND_MARKERS_MAX`]), list lengths ([`LIST_ITEMS_MAX`]) and names
//! ([`IDENTIFIER_MAX_BYTES`]). Errors carry the line and column of the offending token.

pub mod ast;
mod auth;
mod ddl;
mod describe;
mod dml;
pub mod error;
mod lexer;
mod parser;

#[cfg(test)]
mod tests;

pub use ast::*;
pub use error::SyntaxError;
pub use lexer::{STATEMENT_MAX_BYTES, TOKENS_MAX};
pub use parser::{BIND_MARKERS_MAX, IDENTIFIER_MAX_BYTES, LIST_ITEMS_MAX, NESTING_DEPTH_MAX};

use lexer::TokenKind;
use parser::Parser;

/// Parses one CQL statement. Any number of `;` may follow it.
pub fn parse(text: &str) -> Result<Parsed, SyntaxError> {
    let tokens = lexer::tokenize(text)?;
    let mut parser = Parser::new(text, tokens);
    let statement = parser.statement()?;
    while parser.eat(TokenKind::Semicolon) {}
    if !parser.at(TokenKind::Eof) {
        return Err(parser.mismatched("the end of the statement"));
    }
    Ok(Parsed {
        statement,
        bind_markers: parser.markers,
    })
}

impl Parser<'_> {
    /// One statement, chosen by its first keyword.
    fn statement(&mut self) -> Result<Statement, SyntaxError> {
        let verb = self.peek();
        let verb_text = self.text(verb).to_ascii_uppercase();
        if verb.kind != TokenKind::Word {
            return Err(self.no_viable());
        }
        self.advance();
        match verb_text.as_str() {
            "SELECT" => Ok(Statement::Select(self.select()?)),
            "INSERT" => Ok(Statement::Insert(self.insert()?)),
            "UPDATE" => Ok(Statement::Update(self.update()?)),
            "DELETE" => Ok(Statement::Delete(self.delete()?)),
            "BEGIN" => Ok(Statement::Batch(self.batch()?)),
            "USE" => self.use_statement(),
            "CREATE" => self.create(),
            "ALTER" => self.alter(),
            "DROP" => self.drop(),
            "TRUNCATE" => self.truncate(),
            "GRANT" => self.grant(),
            "REVOKE" => self.revoke(),
            "LIST" => self.list(),
            "DESCRIBE" | "DESC" => self.describe(),
            "ADD" if self.is_kw("IDENTITY") => {
                self.skip_rest();
                Ok(Statement::Unsupported { what: "ADD IDENTITY" })
            }
            _ => {
                self.pos -= 1;
                Err(self.no_viable())
            }
        }
    }
}

/// The 1-based line and character column of a byte offset into `text`.
pub(crate) fn position(text: &str, offset: usize) -> (u32, u32) {
    let before = &text[..offset.min(text.len())];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.matches('\n').count() + 1;
    let column = before[line_start..].chars().count() + 1;
    let clamp = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    (clamp(line), clamp(column))
}
