//! DESCRIBE (or DESC), which Cassandra 4+ runs on the server: cqlsh 6 sends it as a query
//! and prints the rows it gets back.

use super::ast::*;
use super::lexer::TokenKind;
use super::parser::{Parser, Result};

impl Parser<'_> {
    /// After `DESCRIBE` or `DESC`.
    pub fn describe(&mut self) -> Result<Statement> {
        let target = self.describe_target()?;
        let with_internals = if self.eat_kw("WITH") {
            self.expect_kw("INTERNALS")?;
            true
        } else {
            false
        };
        Ok(Statement::Describe(Describe {
            target,
            with_internals,
        }))
    }

    fn describe_target(&mut self) -> Result<DescribeTarget> {
        if self.eat_kw("FULL") {
            self.expect_kw("SCHEMA")?;
            return Ok(DescribeTarget::Schema { full: true });
        }
        if self.eat_kw("SCHEMA") {
            return Ok(DescribeTarget::Schema { full: false });
        }
        if self.eat_kw("CLUSTER") {
            return Ok(DescribeTarget::Cluster);
        }
        if self.eat_kw("KEYSPACES") {
            return Ok(DescribeTarget::Keyspaces);
        }
        let only = self.eat_kw("ONLY");
        if only || self.is_kw("KEYSPACE") {
            self.expect_kw("KEYSPACE")?;
            let keyspace = if self.is_ident_at(0) {
                Some(self.ident()?)
            } else {
                None
            };
            return Ok(DescribeTarget::Keyspace { keyspace, only });
        }
        if self.eat_kw("TABLES") || self.eat_kw("COLUMNFAMILIES") {
            return Ok(DescribeTarget::Tables);
        }
        if self.eat_kw("TABLE") || self.eat_kw("COLUMNFAMILY") {
            return Ok(DescribeTarget::Table(self.qualified_name()?));
        }
        if self.eat_kw("TYPES") {
            return Ok(DescribeTarget::Types);
        }
        if self.eat_kw("TYPE") {
            return Ok(DescribeTarget::Type(self.qualified_name()?));
        }
        if self.eat_kw("FUNCTIONS") {
            return Ok(DescribeTarget::Functions);
        }
        if self.eat_kw("FUNCTION") {
            return Ok(DescribeTarget::Function(self.qualified_name()?));
        }
        if self.eat_kw("AGGREGATES") {
            return Ok(DescribeTarget::Aggregates);
        }
        if self.eat_kw("AGGREGATE") {
            return Ok(DescribeTarget::Aggregate(self.qualified_name()?));
        }
        if self.eat_kw("INDEX") {
            return Ok(DescribeTarget::Index(self.qualified_name()?));
        }
        if self.eat_kw("MATERIALIZED") {
            self.expect_kw("VIEW")?;
            return Ok(DescribeTarget::MaterializedView(self.qualified_name()?));
        }
        if self.is_ident_at(0) {
            return Ok(DescribeTarget::Name(self.qualified_name()?));
        }
        if self.at(TokenKind::Eof) || self.at(TokenKind::Semicolon) {
            return Err(
                self.mismatched("what to describe (SCHEMA, KEYSPACES, KEYSPACE, TABLES, TABLE, a name...)")
            );
        }
        Err(self.no_viable())
    }
}
