//! SELECT, INSERT, UPDATE, DELETE and BATCH: the statements that read and write rows.

use super::ast::*;
use super::lexer::TokenKind;
use super::parser::{Parser, Result, LIST_ITEMS_MAX};

impl Parser<'_> {
    /// After `SELECT`.
    pub fn select(&mut self) -> Result<Select> {
        // JSON and DISTINCT are also valid column names: `SELECT json FROM t`.
        let is_modifier = |p: &Self, keyword: &str| {
            p.is_kw(keyword)
                && !p.is_kw_at(1, "FROM")
                && !p.is_kw_at(1, "AS")
                && p.kind_at(1) != TokenKind::Comma
        };
        let json = is_modifier(self, "JSON");
        if json {
            self.advance();
        }
        let distinct = is_modifier(self, "DISTINCT");
        if distinct {
            self.advance();
        }
        let selection = if self.eat(TokenKind::Star) {
            Selection::Wildcard
        } else {
            Selection::Selectors(self.comma_list(Self::selector)?)
        };
        self.expect_kw("FROM")?;
        let table = self.qualified_name()?;
        let mut select = Select {
            table,
            json,
            distinct,
            selection,
            where_clause: Vec::new(),
            group_by: Vec::new(),
            order_by: Vec::new(),
            per_partition_limit: None,
            limit: None,
            allow_filtering: false,
        };
        if self.eat_kw("WHERE") {
            select.where_clause = self.relations()?;
        }
        if self.eat_kw("GROUP") {
            self.expect_kw("BY")?;
            select.group_by = self.comma_list(Self::ident)?;
        }
        if self.eat_kw("ORDER") {
            self.expect_kw("BY")?;
            select.order_by = self.comma_list(Self::ordering)?;
        }
        if self.eat_kw("PER") {
            self.expect_kw("PARTITION")?;
            self.expect_kw("LIMIT")?;
            select.per_partition_limit = Some(self.term()?);
        }
        if self.eat_kw("LIMIT") {
            select.limit = Some(self.term()?);
        }
        if self.eat_kw("ALLOW") {
            self.expect_kw("FILTERING")?;
            select.allow_filtering = true;
        }
        Ok(select)
    }

    /// `column [ASC | DESC]`
    pub fn ordering(&mut self) -> Result<Ordering> {
        let column = self.ident_expecting("a column name")?;
        let descending = if self.eat_kw("DESC") {
            true
        } else {
            self.eat_kw("ASC");
            false
        };
        Ok(Ordering { column, descending })
    }

    fn selector(&mut self) -> Result<Selector> {
        let expr = self.selector_expr()?;
        let alias = if self.eat_kw("AS") {
            Some(self.ident_expecting("an alias")?)
        } else {
            None
        };
        Ok(Selector { expr, alias })
    }

    fn selector_expr(&mut self) -> Result<SelectorExpr> {
        self.nested(|p| {
            let mut expr = p.selector_primary()?;
            while p.at(TokenKind::Dot) {
                p.advance();
                let field = p.ident_expecting("a field name")?;
                expr = SelectorExpr::Field {
                    expr: Box::new(expr),
                    field,
                };
            }
            Ok(expr)
        })
    }

    fn selector_primary(&mut self) -> Result<SelectorExpr> {
        if self.function_call_ahead() {
            let unquoted = self.kind_at(0) == TokenKind::Word && self.kind_at(1) == TokenKind::LParen;
            let name = self.function_name()?;
            self.advance(); // (
            if unquoted {
                if let Some(special) = self.special_selector(&name.name)? {
                    return Ok(special);
                }
            }
            let mut args = Vec::new();
            if !self.eat(TokenKind::RParen) {
                args = self.comma_list(Self::selector_expr)?;
                self.expect(TokenKind::RParen, "')' or ','")?;
            }
            return Ok(SelectorExpr::Function { name, args });
        }
        if self.is_ident_at(0) {
            return Ok(SelectorExpr::Column(self.ident()?));
        }
        Ok(SelectorExpr::Term(self.term()?))
    }

    /// The selectors with their own syntax, after `name(`: `count(*)`, `count(1)`,
    /// `writetime(c)`, `ttl(c)` and `CAST(x AS type)`. `None` if `name` is none of them or
    /// its arguments are ordinary ones (`count(c)`).
    fn special_selector(&mut self, name: &str) -> Result<Option<SelectorExpr>> {
        let closes_after =
            |p: &Self, kind: TokenKind| p.kind_at(0) == kind && p.kind_at(1) == TokenKind::RParen;
        match name {
            "count" if closes_after(self, TokenKind::Star) => {
                self.advance();
                self.advance();
                Ok(Some(SelectorExpr::CountRows))
            }
            "count" if closes_after(self, TokenKind::Int) && self.text(self.peek()) == "1" => {
                self.advance();
                self.advance();
                Ok(Some(SelectorExpr::CountRows))
            }
            "writetime" | "ttl" if self.is_ident_at(0) && self.kind_at(1) == TokenKind::RParen => {
                let column = self.ident()?;
                self.advance();
                Ok(Some(if name == "ttl" {
                    SelectorExpr::Ttl(column)
                } else {
                    SelectorExpr::WriteTime(column)
                }))
            }
            "cast" => {
                let expr = self.selector_expr()?;
                self.expect_kw("AS")?;
                let type_text = self.type_text()?;
                self.expect(TokenKind::RParen, "')'")?;
                Ok(Some(SelectorExpr::Cast {
                    expr: Box::new(expr),
                    type_text,
                }))
            }
            _ => Ok(None),
        }
    }

    /// After `INSERT`.
    pub fn insert(&mut self) -> Result<Insert> {
        self.expect_kw("INTO")?;
        let table = self.qualified_name()?;
        let values = if self.eat_kw("JSON") {
            let json = self.term()?;
            let mut default_unset = false;
            if self.eat_kw("DEFAULT") {
                if self.eat_kw("UNSET") {
                    default_unset = true;
                } else if !self.eat_kw("NULL") {
                    return Err(self.mismatched("NULL or UNSET"));
                }
            }
            InsertValues::Json { json, default_unset }
        } else {
            self.expect(TokenKind::LParen, "'(' or JSON")?;
            let columns = self.comma_list(|p| p.ident_expecting("a column name"))?;
            self.expect(TokenKind::RParen, "')' or ','")?;
            self.expect_kw("VALUES")?;
            let open = self.expect(TokenKind::LParen, "'('")?;
            let values = self.comma_list(Self::term)?;
            self.expect(TokenKind::RParen, "')' or ','")?;
            if columns.len() != values.len() {
                return Err(self.error_at(
                    open,
                    format!(
                        "unmatched column names/values: {} columns but {} values; give one value \
                         per column",
                        columns.len(),
                        values.len()
                    ),
                ));
            }
            InsertValues::Columns { columns, values }
        };
        let if_not_exists = self.if_not_exists()?;
        let using = self.using()?;
        Ok(Insert {
            table,
            values,
            if_not_exists,
            using,
        })
    }

    /// `[USING TTL x AND TIMESTAMP y]`, in either order, each at most once.
    pub fn using(&mut self) -> Result<Using> {
        let mut using = Using::default();
        if !self.eat_kw("USING") {
            return Ok(using);
        }
        loop {
            let token = self.peek();
            let (slot, what) = if self.eat_kw("TTL") {
                (&mut using.ttl, "TTL")
            } else if self.eat_kw("TIMESTAMP") {
                (&mut using.timestamp, "TIMESTAMP")
            } else {
                return Err(self.mismatched("TTL or TIMESTAMP"));
            };
            if slot.is_some() {
                return Err(self.error_at(token, format!("{what} is given twice in USING; give it once")));
            }
            *slot = Some(self.term()?);
            if !self.eat_kw("AND") {
                return Ok(using);
            }
        }
    }

    /// After `UPDATE`.
    pub fn update(&mut self) -> Result<Update> {
        let table = self.qualified_name()?;
        let using = self.using()?;
        self.expect_kw("SET")?;
        let assignments = self.comma_list(Self::assignment)?;
        self.expect_kw("WHERE")?;
        let where_clause = self.relations()?;
        let condition = self.condition()?;
        Ok(Update {
            table,
            using,
            assignments,
            where_clause,
            condition,
        })
    }

    fn assignment(&mut self) -> Result<Assignment> {
        let column = self.ident_expecting("a column name")?;
        let operation = if self.eat(TokenKind::LBracket) {
            let key = self.term()?;
            self.expect(TokenKind::RBracket, "']'")?;
            self.expect(TokenKind::Eq, "'='")?;
            Operation::SetElement {
                key,
                value: self.term()?,
            }
        } else if self.eat(TokenKind::Dot) {
            let field = self.ident_expecting("a field name")?;
            self.expect(TokenKind::Eq, "'='")?;
            Operation::SetField {
                field,
                value: self.term()?,
            }
        } else if self.eat(TokenKind::PlusEq) {
            Operation::Add(self.term()?)
        } else if self.eat(TokenKind::MinusEq) {
            Operation::Subtract(self.term()?)
        } else {
            self.expect(TokenKind::Eq, "'=', '+=', '-=', '[' or '.'")?;
            self.assigned_value(&column)?
        };
        Ok(Assignment { column, operation })
    }

    /// After `c =`: `term`, `c + term`, `c - term` or `term + c`.
    fn assigned_value(&mut self, column: &str) -> Result<Operation> {
        // A term never starts with a bare name (a name followed by `(` is a function call),
        // so a name here is the column itself in `c = c + x`.
        if self.is_ident_at(0) && matches!(self.kind_at(1), TokenKind::Plus | TokenKind::Minus) {
            self.same_column(column)?;
            let plus = self.advance().kind == TokenKind::Plus;
            let term = self.term()?;
            return Ok(if plus {
                Operation::Add(term)
            } else {
                Operation::Subtract(term)
            });
        }
        let term = self.term()?;
        if self.eat(TokenKind::Plus) {
            self.same_column(column)?;
            return Ok(Operation::Prepend(term));
        }
        Ok(Operation::Set(term))
    }

    /// Eats the column name of `c = c + x` / `c = x + c`, which must be the assigned column.
    fn same_column(&mut self, column: &str) -> Result<()> {
        let token = self.peek();
        let other = self.ident_expecting("the assigned column's name")?;
        if other != column {
            return Err(self.error_at(
                token,
                format!(
                    "only '{column} = {column} + value', '{column} = {column} - value' and \
                     '{column} = value + {column}' may name a column on the right of '=', not \
                     '{other}'"
                ),
            ));
        }
        Ok(())
    }

    /// `[IF EXISTS | IF relation AND ...]` of UPDATE and DELETE.
    fn condition(&mut self) -> Result<Condition> {
        if !self.eat_kw("IF") {
            return Ok(Condition::None);
        }
        if self.eat_kw("EXISTS") {
            return Ok(Condition::Exists);
        }
        Ok(Condition::If(self.relations()?))
    }

    /// After `DELETE`.
    pub fn delete(&mut self) -> Result<Delete> {
        let mut targets = Vec::new();
        if !self.is_kw("FROM") {
            targets = self.comma_list(Self::delete_target)?;
        }
        self.expect_kw("FROM")?;
        let table = self.qualified_name()?;
        let using = self.using()?;
        self.expect_kw("WHERE")?;
        let where_clause = self.relations()?;
        let condition = self.condition()?;
        Ok(Delete {
            targets,
            table,
            using,
            where_clause,
            condition,
        })
    }

    fn delete_target(&mut self) -> Result<DeleteTarget> {
        let column = self.ident_expecting("a column name or FROM")?;
        if self.eat(TokenKind::LBracket) {
            let key = self.term()?;
            self.expect(TokenKind::RBracket, "']'")?;
            return Ok(DeleteTarget::Element { column, key });
        }
        if self.eat(TokenKind::Dot) {
            let field = self.ident_expecting("a field name")?;
            return Ok(DeleteTarget::Field { column, field });
        }
        Ok(DeleteTarget::Column(column))
    }

    /// After `BEGIN`.
    pub fn batch(&mut self) -> Result<Batch> {
        let kind = if self.eat_kw("UNLOGGED") {
            BatchKind::Unlogged
        } else if self.eat_kw("COUNTER") {
            BatchKind::Counter
        } else {
            BatchKind::Logged
        };
        self.expect_kw("BATCH")?;
        let using = self.using()?;
        let mut statements = Vec::new();
        loop {
            let statement = if self.eat_kw("INSERT") {
                BatchStatement::Insert(self.insert()?)
            } else if self.eat_kw("UPDATE") {
                BatchStatement::Update(self.update()?)
            } else if self.eat_kw("DELETE") {
                BatchStatement::Delete(self.delete()?)
            } else if self.eat_kw("APPLY") {
                self.expect_kw("BATCH")?;
                return Ok(Batch {
                    kind,
                    using,
                    statements,
                });
            } else {
                return Err(self.mismatched("INSERT, UPDATE, DELETE or APPLY BATCH"));
            };
            if statements.len() >= LIST_ITEMS_MAX {
                return Err(self.error_here(format!(
                    "batch has more than {LIST_ITEMS_MAX} statements; split it into smaller batches"
                )));
            }
            statements.push(statement);
            while self.eat(TokenKind::Semicolon) {}
        }
    }
}
