//! USE, keyspaces, tables and TRUNCATE, and the schema statements hayate recognises only to
//! refuse by name.

use super::ast::*;
use super::lexer::TokenKind;
use super::parser::{Parser, Result};

/// Statements Cassandra has that hayate does not, by their leading keywords after the verb.
/// A row matches when every keyword matches, in order; the first match wins.
const UNSUPPORTED_CREATE: &[(&[&str], &str)] = &[
    (&["FUNCTION"], "CREATE FUNCTION"),
    (&["OR", "REPLACE", "FUNCTION"], "CREATE FUNCTION"),
    (&["AGGREGATE"], "CREATE AGGREGATE"),
    (&["OR", "REPLACE", "AGGREGATE"], "CREATE AGGREGATE"),
    (&["MATERIALIZED", "VIEW"], "CREATE MATERIALIZED VIEW"),
    (&["TRIGGER"], "CREATE TRIGGER"),
];

const UNSUPPORTED_ALTER: &[(&[&str], &str)] = &[(&["MATERIALIZED", "VIEW"], "ALTER MATERIALIZED VIEW")];

const UNSUPPORTED_DROP: &[(&[&str], &str)] = &[
    (&["FUNCTION"], "DROP FUNCTION"),
    (&["AGGREGATE"], "DROP AGGREGATE"),
    (&["MATERIALIZED", "VIEW"], "DROP MATERIALIZED VIEW"),
    (&["TRIGGER"], "DROP TRIGGER"),
    (&["IDENTITY"], "DROP IDENTITY"),
];

impl Parser<'_> {
    /// If the next keywords match a row of `table`, skips the rest of the statement and
    /// returns it as unsupported.
    pub fn unsupported(&mut self, table: &[(&[&str], &'static str)]) -> Option<Statement> {
        let (_, what) = table.iter().find(|(keywords, _)| {
            keywords
                .iter()
                .enumerate()
                .all(|(ahead, keyword)| self.is_kw_at(ahead, keyword))
        })?;
        self.skip_rest();
        Some(Statement::Unsupported { what })
    }

    /// After `USE`.
    pub fn use_statement(&mut self) -> Result<Statement> {
        let keyspace = self.ident_expecting("a keyspace name")?;
        Ok(Statement::Use { keyspace })
    }

    /// After `CREATE`.
    pub fn create(&mut self) -> Result<Statement> {
        if let Some(unsupported) = self.unsupported(UNSUPPORTED_CREATE) {
            return Ok(unsupported);
        }
        if self.eat_kw("KEYSPACE") || self.eat_kw("SCHEMA") {
            let if_not_exists = self.if_not_exists()?;
            let keyspace = self.ident_expecting("a keyspace name")?;
            self.expect_kw("WITH")?;
            let properties = self.properties()?;
            return Ok(Statement::CreateKeyspace {
                keyspace,
                if_not_exists,
                properties,
            });
        }
        if self.eat_kw("TABLE") || self.eat_kw("COLUMNFAMILY") {
            return Ok(Statement::CreateTable(self.create_table()?));
        }
        if self.eat_kw("TYPE") {
            return self.create_type();
        }
        if self.eat_kw("INDEX") {
            return self.create_index(false);
        }
        if self.is_kw_at(0, "CUSTOM") && self.is_kw_at(1, "INDEX") {
            self.eat_kw("CUSTOM");
            self.eat_kw("INDEX");
            return self.create_index(true);
        }
        if self.eat_kw("ROLE") {
            return self.create_role();
        }
        if self.eat_kw("USER") {
            return self.create_user();
        }
        Err(self.mismatched(
            "KEYSPACE, TABLE, ROLE, USER, INDEX, TYPE, FUNCTION, AGGREGATE, MATERIALIZED VIEW or TRIGGER",
        ))
    }

    /// After `ALTER`.
    pub fn alter(&mut self) -> Result<Statement> {
        if let Some(unsupported) = self.unsupported(UNSUPPORTED_ALTER) {
            return Ok(unsupported);
        }
        if self.eat_kw("KEYSPACE") || self.eat_kw("SCHEMA") {
            let if_exists = self.if_exists()?;
            let keyspace = self.ident_expecting("a keyspace name")?;
            self.expect_kw("WITH")?;
            let properties = self.properties()?;
            return Ok(Statement::AlterKeyspace {
                keyspace,
                if_exists,
                properties,
            });
        }
        if self.eat_kw("TABLE") || self.eat_kw("COLUMNFAMILY") {
            let if_exists = self.if_exists()?;
            let table = self.qualified_name()?;
            let action = self.alter_table_action()?;
            return Ok(Statement::AlterTable {
                table,
                if_exists,
                action,
            });
        }
        if self.eat_kw("TYPE") {
            let name = self.qualified_name()?;
            let action = if self.eat_kw("ADD") {
                let field = self.ident_expecting("a field name")?;
                let type_text = self.type_text()?;
                AlterTypeAction::Add { field, type_text }
            } else if self.eat_kw("RENAME") {
                let mut renames = Vec::new();
                loop {
                    self.check_list_len(renames.len())?;
                    let from = self.ident_expecting("a field name")?;
                    self.expect_kw("TO")?;
                    let to = self.ident_expecting("the new field name")?;
                    renames.push((from, to));
                    if !self.eat_kw("AND") {
                        break;
                    }
                }
                AlterTypeAction::Rename(renames)
            } else {
                return Err(self.mismatched("ADD or RENAME"));
            };
            return Ok(Statement::AlterType { name, action });
        }
        if self.eat_kw("ROLE") {
            return self.alter_role();
        }
        if self.eat_kw("USER") {
            return self.alter_user();
        }
        Err(self.mismatched("KEYSPACE, TABLE, ROLE, USER, TYPE or MATERIALIZED VIEW"))
    }

    /// After `DROP`.
    pub fn drop(&mut self) -> Result<Statement> {
        if let Some(unsupported) = self.unsupported(UNSUPPORTED_DROP) {
            return Ok(unsupported);
        }
        if self.eat_kw("KEYSPACE") || self.eat_kw("SCHEMA") {
            let if_exists = self.if_exists()?;
            let keyspace = self.ident_expecting("a keyspace name")?;
            return Ok(Statement::DropKeyspace { keyspace, if_exists });
        }
        if self.eat_kw("TABLE") || self.eat_kw("COLUMNFAMILY") {
            let if_exists = self.if_exists()?;
            let table = self.qualified_name()?;
            return Ok(Statement::DropTable { table, if_exists });
        }
        if self.eat_kw("TYPE") {
            let if_exists = self.if_exists()?;
            let name = self.qualified_name()?;
            return Ok(Statement::DropType { name, if_exists });
        }
        if self.eat_kw("INDEX") {
            let if_exists = self.if_exists()?;
            let name = self.qualified_name()?;
            return Ok(Statement::DropIndex { name, if_exists });
        }
        if self.eat_kw("ROLE") {
            let if_exists = self.if_exists()?;
            let role = self.role_name()?;
            return Ok(Statement::DropRole { role, if_exists });
        }
        if self.eat_kw("USER") {
            let if_exists = self.if_exists()?;
            let user = self.role_name()?;
            return Ok(Statement::DropUser { user, if_exists });
        }
        Err(self.mismatched(
            "KEYSPACE, TABLE, ROLE, USER, INDEX, TYPE, FUNCTION, AGGREGATE, MATERIALIZED VIEW or TRIGGER",
        ))
    }

    /// After `TRUNCATE`.
    pub fn truncate(&mut self) -> Result<Statement> {
        if !self.eat_kw("TABLE") {
            self.eat_kw("COLUMNFAMILY");
        }
        let table = self.qualified_name()?;
        Ok(Statement::Truncate { table })
    }

    /// After `CREATE TYPE`: `[IF NOT EXISTS] name (field type, ...)`, at least one field.
    fn create_type(&mut self) -> Result<Statement> {
        let if_not_exists = self.if_not_exists()?;
        let name = self.qualified_name()?;
        self.expect(TokenKind::LParen, "'('")?;
        let fields = self.comma_list(|p| {
            let field = p.ident_expecting("a field name")?;
            let type_text = p.type_text()?;
            Ok((field, type_text))
        })?;
        self.expect(TokenKind::RParen, "')' or ','")?;
        Ok(Statement::CreateType {
            name,
            if_not_exists,
            fields,
        })
    }

    /// After `CREATE [CUSTOM] INDEX`.
    fn create_index(&mut self, custom: bool) -> Result<Statement> {
        let if_not_exists = self.if_not_exists()?;
        let name = if self.is_kw_at(0, "ON") {
            None
        } else {
            Some(self.ident_expecting("an index name or ON")?)
        };
        self.expect_kw("ON")?;
        let table = self.qualified_name()?;
        self.expect(TokenKind::LParen, "'('")?;
        let mut targets = Vec::new();
        if !self.eat(TokenKind::RParen) {
            targets = self.comma_list(|p| {
                let kinds = [
                    ("KEYS", IndexTargetKind::Keys),
                    ("VALUES", IndexTargetKind::Values),
                    ("ENTRIES", IndexTargetKind::Entries),
                    ("FULL", IndexTargetKind::Full),
                ];
                let wrapped = kinds
                    .iter()
                    .find(|(kw, _)| p.is_kw_at(0, kw) && p.kind_at(1) == TokenKind::LParen);
                if let Some(&(kw, kind)) = wrapped {
                    p.eat_kw(kw);
                    p.expect(TokenKind::LParen, "'('")?;
                    let column = p.ident_expecting("a column name")?;
                    p.expect(TokenKind::RParen, "')'")?;
                    return Ok(IndexTarget { kind, column });
                }
                let column = p.ident_expecting("a column name")?;
                Ok(IndexTarget {
                    kind: IndexTargetKind::Simple,
                    column,
                })
            })?;
            self.expect(TokenKind::RParen, "')' or ','")?;
        }
        let using = if self.eat_kw("USING") {
            Some(self.string_literal()?)
        } else {
            None
        };
        let properties = if self.eat_kw("WITH") {
            self.properties()?
        } else {
            Vec::new()
        };
        Ok(Statement::CreateIndex(CreateIndex {
            name,
            table,
            if_not_exists,
            custom,
            targets,
            using,
            properties,
        }))
    }

    /// After `CREATE TABLE`.
    fn create_table(&mut self) -> Result<CreateTable> {
        let if_not_exists = self.if_not_exists()?;
        let table = self.qualified_name()?;
        let mut create = CreateTable {
            table,
            if_not_exists,
            columns: Vec::new(),
            partition_key: Vec::new(),
            clustering_columns: Vec::new(),
            clustering_order: Vec::new(),
            compact_storage: false,
            properties: Vec::new(),
        };
        let open = self.expect(TokenKind::LParen, "'('")?;
        // Cassandra accepts stray commas between definitions, `(a int, , b int,)`.
        loop {
            while self.eat(TokenKind::Comma) {}
            if self.eat(TokenKind::RParen) {
                break;
            }
            self.check_list_len(create.columns.len())?;
            self.table_element(&mut create)?;
            if !self.at(TokenKind::Comma) {
                self.expect(TokenKind::RParen, "')' or ','")?;
                break;
            }
        }
        if create.partition_key.is_empty() {
            return Err(self.error_at(
                open,
                format!(
                    "table {} has no PRIMARY KEY; mark a column 'PRIMARY KEY' or add \
                     'PRIMARY KEY (partition_key, clustering...)'",
                    create.table.name
                ),
            ));
        }
        if self.eat_kw("WITH") {
            loop {
                self.table_option(&mut create)?;
                if !self.eat_kw("AND") {
                    break;
                }
            }
        }
        Ok(create)
    }

    /// One definition inside `CREATE TABLE (...)`: a column or the PRIMARY KEY clause.
    fn table_element(&mut self, create: &mut CreateTable) -> Result<()> {
        let start = self.peek();
        if self.is_kw("PRIMARY") && self.is_kw_at(1, "KEY") {
            self.advance();
            self.advance();
            self.expect(TokenKind::LParen, "'('")?;
            let partition_key = if self.eat(TokenKind::LParen) {
                let columns = self.comma_list(|p| p.ident_expecting("a column name"))?;
                self.expect(TokenKind::RParen, "')' or ','")?;
                columns
            } else {
                vec![self.ident_expecting("a column name or '('")?]
            };
            let mut clustering = Vec::new();
            while self.eat(TokenKind::Comma) {
                self.check_list_len(clustering.len())?;
                clustering.push(self.ident_expecting("a column name")?);
            }
            self.expect(TokenKind::RParen, "')' or ','")?;
            return self.set_primary_key(create, start, partition_key, clustering);
        }
        let name = self.ident_expecting("a column name or PRIMARY KEY")?;
        let type_text = self.type_text()?;
        let is_static = self.eat_kw("STATIC");
        let primary = self.is_kw("PRIMARY");
        if primary {
            self.advance();
            self.expect_kw("KEY")?;
        }
        create.columns.push(ColumnDefinition {
            name: name.clone(),
            type_text,
            is_static,
        });
        if primary {
            return self.set_primary_key(create, start, vec![name], Vec::new());
        }
        Ok(())
    }

    fn set_primary_key(
        &self,
        create: &mut CreateTable,
        at: super::lexer::Token,
        partition_key: Vec<String>,
        clustering: Vec<String>,
    ) -> Result<()> {
        if !create.partition_key.is_empty() {
            return Err(self.error_at(
                at,
                "multiple PRIMARY KEYs specified; give the key once, on one column or in one \
                 PRIMARY KEY (...) clause"
                    .to_owned(),
            ));
        }
        create.partition_key = partition_key;
        create.clustering_columns = clustering;
        Ok(())
    }

    /// One `WITH` item of CREATE TABLE.
    fn table_option(&mut self, create: &mut CreateTable) -> Result<()> {
        if self.is_kw("CLUSTERING") && self.is_kw_at(1, "ORDER") {
            self.advance();
            self.advance();
            self.expect_kw("BY")?;
            self.expect(TokenKind::LParen, "'('")?;
            create.clustering_order = self.comma_list(Self::ordering)?;
            self.expect(TokenKind::RParen, "')' or ','")?;
            return Ok(());
        }
        if self.is_kw("COMPACT") && self.is_kw_at(1, "STORAGE") {
            self.advance();
            self.advance();
            create.compact_storage = true;
            return Ok(());
        }
        create.properties.push(self.property()?);
        Ok(())
    }

    /// After `ALTER TABLE t`.
    fn alter_table_action(&mut self) -> Result<AlterTableAction> {
        if self.eat_kw("ADD") {
            let column = |p: &mut Self| {
                let name = p.ident_expecting("a column name")?;
                let type_text = p.type_text()?;
                let is_static = p.eat_kw("STATIC");
                Ok(ColumnDefinition {
                    name,
                    type_text,
                    is_static,
                })
            };
            if self.eat(TokenKind::LParen) {
                let columns = self.comma_list(column)?;
                self.expect(TokenKind::RParen, "')' or ','")?;
                return Ok(AlterTableAction::Add(columns));
            }
            return Ok(AlterTableAction::Add(vec![column(self)?]));
        }
        if self.eat_kw("DROP") {
            if self.eat(TokenKind::LParen) {
                let columns = self.comma_list(|p| p.ident_expecting("a column name"))?;
                self.expect(TokenKind::RParen, "')' or ','")?;
                return Ok(AlterTableAction::Drop(columns));
            }
            return Ok(AlterTableAction::Drop(vec![
                self.ident_expecting("a column name or '('")?
            ]));
        }
        if self.eat_kw("RENAME") {
            let mut renames = Vec::new();
            loop {
                self.check_list_len(renames.len())?;
                let from = self.ident_expecting("a column name")?;
                self.expect_kw("TO")?;
                let to = self.ident_expecting("the new column name")?;
                renames.push((from, to));
                if !self.eat_kw("AND") {
                    return Ok(AlterTableAction::Rename(renames));
                }
            }
        }
        if self.eat_kw("ALTER") {
            let column = self.ident_expecting("a column name")?;
            self.expect_kw("TYPE")?;
            let type_text = self.type_text()?;
            return Ok(AlterTableAction::AlterType { column, type_text });
        }
        if self.eat_kw("WITH") {
            return Ok(AlterTableAction::With(self.properties()?));
        }
        Err(self.mismatched("ADD, DROP, RENAME, ALTER or WITH"))
    }
}
