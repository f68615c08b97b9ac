//! The recursive-descent parser's cursor, errors, and the pieces every statement shares:
//! names, terms, types, relations and properties.
//!
//! Each statement family has its own file (`dml.rs`, `ddl.rs`, `auth.rs`, `describe.rs`) that
//! adds methods to [`Parser`]. Every method that can recurse goes through [`Parser::nested`],
//! which bounds the depth by [`NESTING_DEPTH_MAX`] so that hostile text such as ten thousand
//! `[` cannot overflow the stack.

use super::ast::*;
use super::error::SyntaxError;
use super::lexer::{Token, TokenKind};
use super::position;
use crate::value::Literal;

/// How deeply terms, types and selectors may nest: `[[[1]]]` is 3. Real statements stay under
/// ten (a frozen map of frozen lists is 3); the bound only has to keep recursion far from the
/// stack's end, for which 64 leaves ample room even in a debug build.
pub const NESTING_DEPTH_MAX: usize = 64;

/// The most bind markers in one statement. EXECUTE carries its values with a [short] count,
/// so a statement with more markers could never be run.
pub const BIND_MARKERS_MAX: usize = u16::MAX as usize;

/// The most items in one comma-separated list (columns, values, selectors, collection
/// elements, IN values) or statements in one batch. Cassandra's own limits are the protocol's
/// [short] counts, which this matches; it keeps one list from taking all of [`TOKENS_MAX`].
///
/// [`TOKENS_MAX`]: super::lexer::TOKENS_MAX
pub const LIST_ITEMS_MAX: usize = u16::MAX as usize;

/// The longest identifier, in bytes. Names go back to clients in result metadata as a
/// [string], whose length is a [short].
pub const IDENTIFIER_MAX_BYTES: usize = u16::MAX as usize;

/// The longest piece of the offending token quoted in an error message.
const ERROR_TOKEN_MAX_CHARS: usize = 40;
/// How much of the text before the offending token the error's snippet shows.
const ERROR_CONTEXT_MAX_CHARS: usize = 60;

/// Cassandra's reserved keywords, plus the boolean constants: these cannot name anything
/// unless quoted. Every other keyword (`key`, `type`, `ttl`, `count`, `values`, ...) is also
/// a valid identifier. Sorted, for [`Parser::is_reserved`]'s binary search.
pub(super) const RESERVED: [&str; 63] = [
    "ADD",
    "ALLOW",
    "ALTER",
    "AND",
    "APPLY",
    "ASC",
    "AUTHORIZE",
    "BATCH",
    "BEGIN",
    "BY",
    "COLUMNFAMILY",
    "CREATE",
    "DELETE",
    "DESC",
    "DESCRIBE",
    "DROP",
    "ENTRIES",
    "EXECUTE",
    "FALSE",
    "FROM",
    "FULL",
    "GRANT",
    "IF",
    "IN",
    "INDEX",
    "INFINITY",
    "INSERT",
    "INTO",
    "IS",
    "KEYSPACE",
    "LIMIT",
    "MATERIALIZED",
    "MBEAN",
    "MBEANS",
    "MODIFY",
    "NAN",
    "NORECURSIVE",
    "NOT",
    "NULL",
    "OF",
    "ON",
    "OR",
    "ORDER",
    "PRIMARY",
    "RENAME",
    "REPLACE",
    "REVOKE",
    "SCHEMA",
    "SELECT",
    "SET",
    "TABLE",
    "TO",
    "TOKEN",
    "TRUE",
    "TRUNCATE",
    "UNLOGGED",
    "UNSET",
    "UPDATE",
    "USE",
    "USING",
    "VIEW",
    "WHERE",
    "WITH",
];

const PACKED_MAX_BYTES: usize = 16;

/// Up to 16 bytes, upper-cased, packed big-endian into an integer, so that integer order is
/// the keywords' alphabetical order.
const fn pack_upper(word: &[u8]) -> u128 {
    let mut packed = 0u128;
    let mut i = 0;
    while i < PACKED_MAX_BYTES {
        packed <<= 8;
        if i < word.len() {
            packed |= word[i].to_ascii_uppercase() as u128;
        }
        i += 1;
    }
    packed
}

/// [`RESERVED`], packed by [`pack_upper`].
const RESERVED_PACKED: [u128; RESERVED.len()] = {
    let mut packed = [0u128; RESERVED.len()];
    let mut i = 0;
    while i < RESERVED.len() {
        assert!(RESERVED[i].len() <= PACKED_MAX_BYTES);
        packed[i] = pack_upper(RESERVED[i].as_bytes());
        i += 1;
    }
    packed
};

pub(crate) type Result<T> = std::result::Result<T, SyntaxError>;

pub(crate) struct Parser<'a> {
    pub src: &'a str,
    pub tokens: Vec<Token>,
    pub pos: usize,
    pub markers: Vec<BindMarker>,
    depth: usize,
}

impl<'a> Parser<'a> {
    pub fn new(src: &'a str, tokens: Vec<Token>) -> Parser<'a> {
        assert!(
            tokens.last().is_some_and(|t| t.kind == TokenKind::Eof),
            "the lexer ends every token list with Eof"
        );
        Parser {
            src,
            tokens,
            pos: 0,
            markers: Vec::new(),
            depth: 0,
        }
    }

    // ---- The cursor ----

    pub fn peek(&self) -> Token {
        self.peek_at(0)
    }

    /// The token `ahead` places on; the Eof token repeats past the end.
    pub fn peek_at(&self, ahead: usize) -> Token {
        let last = self.tokens.len() - 1;
        self.tokens[(self.pos + ahead).min(last)]
    }

    pub fn kind_at(&self, ahead: usize) -> TokenKind {
        self.peek_at(ahead).kind
    }

    pub fn text(&self, token: Token) -> &'a str {
        token.text(self.src)
    }

    pub fn advance(&mut self) -> Token {
        let token = self.peek();
        if token.kind != TokenKind::Eof {
            self.pos += 1;
        }
        token
    }

    pub fn at(&self, kind: TokenKind) -> bool {
        self.kind_at(0) == kind
    }

    pub fn eat(&mut self, kind: TokenKind) -> bool {
        let found = self.at(kind);
        if found {
            self.advance();
        }
        found
    }

    pub fn expect(&mut self, kind: TokenKind, expecting: &str) -> Result<Token> {
        if self.at(kind) {
            Ok(self.advance())
        } else {
            Err(self.mismatched(expecting))
        }
    }

    /// Whether the token `ahead` places on is the (unquoted, case-insensitive) keyword.
    pub fn is_kw_at(&self, ahead: usize, keyword: &str) -> bool {
        let token = self.peek_at(ahead);
        token.kind == TokenKind::Word && self.text(token).eq_ignore_ascii_case(keyword)
    }

    pub fn is_kw(&self, keyword: &str) -> bool {
        self.is_kw_at(0, keyword)
    }

    pub fn eat_kw(&mut self, keyword: &str) -> bool {
        let found = self.is_kw(keyword);
        if found {
            self.advance();
        }
        found
    }

    pub fn expect_kw(&mut self, keyword: &str) -> Result<()> {
        if self.eat_kw(keyword) {
            Ok(())
        } else {
            Err(self.mismatched(keyword))
        }
    }

    /// Eats `IF NOT EXISTS` if it is there.
    pub fn if_not_exists(&mut self) -> Result<bool> {
        if !self.eat_kw("IF") {
            return Ok(false);
        }
        self.expect_kw("NOT")?;
        self.expect_kw("EXISTS")?;
        Ok(true)
    }

    /// Eats `IF EXISTS` if it is there.
    pub fn if_exists(&mut self) -> Result<bool> {
        if !self.eat_kw("IF") {
            return Ok(false);
        }
        self.expect_kw("EXISTS")?;
        Ok(true)
    }

    /// Runs `f` one nesting level deeper, refusing to go past [`NESTING_DEPTH_MAX`].
    pub fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        if self.depth >= NESTING_DEPTH_MAX {
            return Err(self.error_here(format!(
                "statement nests deeper than {NESTING_DEPTH_MAX} levels at input '{}'; \
                 CQL values and types are never nested that deeply in practice",
                self.token_display(self.peek())
            )));
        }
        self.depth += 1;
        let result = f(self);
        self.depth -= 1;
        result
    }

    /// Parses `item (, item)*`, bounded by [`LIST_ITEMS_MAX`].
    pub fn comma_list<T>(&mut self, mut item: impl FnMut(&mut Self) -> Result<T>) -> Result<Vec<T>> {
        let mut items = vec![item(self)?];
        while self.eat(TokenKind::Comma) {
            self.check_list_len(items.len())?;
            items.push(item(self)?);
        }
        Ok(items)
    }

    pub fn check_list_len(&self, len: usize) -> Result<()> {
        if len >= LIST_ITEMS_MAX {
            return Err(self.error_here(format!(
                "list has more than {LIST_ITEMS_MAX} items; split the statement, or bind \
                 large collections as one value"
            )));
        }
        Ok(())
    }

    /// Skips to the end of the text: used once the leading keywords of an unsupported
    /// statement have been recognised.
    pub fn skip_rest(&mut self) {
        self.pos = self.tokens.len() - 1;
    }

    // ---- Errors ----

    pub fn error_at(&self, token: Token, message: String) -> SyntaxError {
        let (line, column) = position(self.src, token.start as usize);
        SyntaxError {
            line,
            column,
            message,
        }
    }

    pub fn error_here(&self, message: String) -> SyntaxError {
        self.error_at(self.peek(), message)
    }

    /// The token as an error message quotes it: `<EOF>`, or its text, shortened.
    pub fn token_display(&self, token: Token) -> String {
        if token.kind == TokenKind::Eof {
            return "<EOF>".to_owned();
        }
        shorten(self.text(token), ERROR_TOKEN_MAX_CHARS)
    }

    /// `(SELECT * [FRM]...)`: the text before the token, the token in brackets, and `...` if
    /// more follows.
    pub fn snippet(&self, token: Token) -> String {
        let before = &self.src[..token.start as usize];
        let chars_before = before.chars().count();
        let mut context: String = before
            .chars()
            .skip(chars_before.saturating_sub(ERROR_CONTEXT_MAX_CHARS))
            .map(|c| if c.is_whitespace() { ' ' } else { c })
            .collect();
        if chars_before > ERROR_CONTEXT_MAX_CHARS {
            context.insert_str(0, "...");
        }
        if token.kind == TokenKind::Eof {
            return format!("({})", context.trim_end());
        }
        let more = if self.src[token.end as usize..].trim().is_empty() {
            ""
        } else {
            "..."
        };
        format!("({context}[{}]{more})", self.token_display(token))
    }

    /// `mismatched input 'X' expecting Y (snippet)` at the current token.
    pub fn mismatched(&self, expecting: &str) -> SyntaxError {
        let token = self.peek();
        self.error_at(
            token,
            format!(
                "mismatched input '{}' expecting {expecting} {}",
                self.token_display(token),
                self.snippet(token)
            ),
        )
    }

    /// `no viable alternative at input 'X' (snippet)` at the current token, for places where
    /// many things could follow.
    pub fn no_viable(&self) -> SyntaxError {
        let token = self.peek();
        self.error_at(
            token,
            format!(
                "no viable alternative at input '{}' {}",
                self.token_display(token),
                self.snippet(token)
            ),
        )
    }

    // ---- Names ----

    pub fn is_reserved(word: &str) -> bool {
        // Every name goes through here several times, so compare integers, not strings.
        word.len() <= PACKED_MAX_BYTES
            && RESERVED_PACKED
                .binary_search(&pack_upper(word.as_bytes()))
                .is_ok()
    }

    /// Whether the token `ahead` places on can be an identifier.
    pub fn is_ident_at(&self, ahead: usize) -> bool {
        let token = self.peek_at(ahead);
        match token.kind {
            TokenKind::Word => !Self::is_reserved(self.text(token)),
            TokenKind::QuotedName => true,
            _ => false,
        }
    }

    /// An identifier: an unreserved word folded to lower case, or a quoted name as written.
    pub fn ident(&mut self) -> Result<String> {
        self.ident_expecting("an identifier")
    }

    pub fn ident_expecting(&mut self, expecting: &str) -> Result<String> {
        if !self.is_ident_at(0) {
            return Err(self.mismatched(expecting));
        }
        let token = self.advance();
        self.name_of(token)
    }

    /// The name an identifier token stands for.
    pub fn name_of(&self, token: Token) -> Result<String> {
        let text = self.text(token);
        if text.len() > IDENTIFIER_MAX_BYTES {
            return Err(self.error_at(
                token,
                format!("identifier longer than {IDENTIFIER_MAX_BYTES} bytes; use a shorter name"),
            ));
        }
        match token.kind {
            TokenKind::QuotedName => {
                let name = unquote(text, '"');
                if name.is_empty() {
                    return Err(
                        self.error_at(token, "empty quoted name \"\"; a name needs a character".into())
                    );
                }
                Ok(name)
            }
            _ => Ok(text.to_ascii_lowercase()),
        }
    }

    /// `name` or `ks.name`.
    pub fn qualified_name(&mut self) -> Result<QualifiedName> {
        let first = self.ident()?;
        if self.eat(TokenKind::Dot) {
            let name = self.ident()?;
            return Ok(QualifiedName {
                keyspace: Some(first),
                name,
            });
        }
        Ok(QualifiedName {
            keyspace: None,
            name: first,
        })
    }

    /// A role or user name: an identifier or a string.
    pub fn role_name(&mut self) -> Result<String> {
        if matches!(self.kind_at(0), TokenKind::Str | TokenKind::DollarStr) {
            return self.string_literal();
        }
        self.ident_expecting("a role name")
    }

    // ---- Constants ----

    /// A `'...'` or `$$...$$` string, unescaped.
    pub fn string_literal(&mut self) -> Result<String> {
        let token = self.peek();
        match token.kind {
            TokenKind::Str => {
                self.advance();
                Ok(unquote(self.text(token), '\''))
            }
            TokenKind::DollarStr => {
                self.advance();
                let text = self.text(token);
                Ok(text[2..text.len() - 2].to_owned())
            }
            _ => Err(self.mismatched("a string")),
        }
    }

    /// `true` or `false`.
    pub fn boolean(&mut self) -> Result<bool> {
        if self.eat_kw("TRUE") {
            Ok(true)
        } else if self.eat_kw("FALSE") {
            Ok(false)
        } else {
            Err(self.mismatched("true or false"))
        }
    }

    /// A constant at the cursor, if there is one: a literal token, `true`, `false`, `null`,
    /// or `-` before a number or duration.
    pub fn try_constant(&mut self) -> Result<Option<Literal>> {
        let token = self.peek();
        let text = self.text(token);
        let literal = match token.kind {
            TokenKind::Str | TokenKind::DollarStr => Literal::Str(self.string_literal()?),
            TokenKind::Int => Literal::Int(text.to_owned()),
            TokenKind::Float => Literal::Float(text.to_owned()),
            TokenKind::Uuid => Literal::Uuid(text.to_owned()),
            TokenKind::Duration => Literal::Duration(text.to_owned()),
            TokenKind::Hex => Literal::Hex(self.hex(token)?),
            TokenKind::Word if text.eq_ignore_ascii_case("true") => Literal::Bool(true),
            TokenKind::Word if text.eq_ignore_ascii_case("false") => Literal::Bool(false),
            TokenKind::Word if text.eq_ignore_ascii_case("null") => Literal::Null,
            TokenKind::Minus => {
                let next = self.peek_at(1);
                let digits = self.text(next);
                let literal = match next.kind {
                    TokenKind::Int => Literal::Int(format!("-{digits}")),
                    TokenKind::Float => Literal::Float(format!("-{digits}")),
                    TokenKind::Duration => Literal::Duration(format!("-{digits}")),
                    _ => return Ok(None),
                };
                self.advance();
                self.advance();
                return Ok(Some(literal));
            }
            _ => return Ok(None),
        };
        if !matches!(token.kind, TokenKind::Str | TokenKind::DollarStr) {
            self.advance();
        }
        Ok(Some(literal))
    }

    pub fn constant(&mut self) -> Result<Literal> {
        match self.try_constant()? {
            Some(literal) => Ok(literal),
            None => Err(self.mismatched("a constant")),
        }
    }

    fn hex(&self, token: Token) -> Result<Vec<u8>> {
        let digits = &self.text(token).as_bytes()[2..];
        if digits.len() % 2 == 1 {
            return Err(self.error_at(
                token,
                format!(
                    "blob constant '{}' has an odd number of hex digits; each byte takes two",
                    self.token_display(token)
                ),
            ));
        }
        Ok(digits
            .chunks_exact(2)
            .map(|pair| (hex_value(pair[0]) << 4) | hex_value(pair[1]))
            .collect())
    }

    // ---- Terms ----

    /// A value: constant, bind marker, collection, tuple, function call, cast or negation.
    pub fn term(&mut self) -> Result<Term> {
        self.nested(|p| p.term_inner())
    }

    fn term_inner(&mut self) -> Result<Term> {
        if let Some(literal) = self.try_constant()? {
            return Ok(Term::Literal(literal));
        }
        match self.kind_at(0) {
            TokenKind::Question | TokenKind::Colon => Ok(Term::Marker(self.bind_marker()?)),
            TokenKind::Minus => {
                self.advance();
                Ok(Term::Negate(Box::new(self.term()?)))
            }
            TokenKind::LBracket => {
                self.advance();
                let items = self.terms_until(TokenKind::RBracket, "']'")?;
                Ok(Term::List(items))
            }
            TokenKind::LBrace => self.braces(),
            TokenKind::LParen => {
                if self.looks_like_cast() {
                    self.advance();
                    let type_text = self.type_text()?;
                    self.expect(TokenKind::RParen, "')'")?;
                    let term = self.term()?;
                    return Ok(Term::Cast {
                        type_text,
                        term: Box::new(term),
                    });
                }
                self.advance();
                let items = self.comma_list(Self::term)?;
                self.expect(TokenKind::RParen, "')' or ','")?;
                Ok(Term::Tuple(items))
            }
            TokenKind::Word | TokenKind::QuotedName if self.function_call_ahead() => {
                let name = self.function_name()?;
                self.advance(); // (
                let args = self.terms_until(TokenKind::RParen, "')'")?;
                Ok(Term::Function { name, args })
            }
            _ => Err(self.no_viable()),
        }
    }

    /// `?` or `:name`, registered in order of appearance.
    pub fn bind_marker(&mut self) -> Result<MarkerIndex> {
        let name = if self.eat(TokenKind::Question) {
            None
        } else {
            self.expect(TokenKind::Colon, "'?' or ':name'")?;
            Some(self.ident_expecting("a bind marker name")?)
        };
        if self.markers.len() >= BIND_MARKERS_MAX {
            return Err(self.error_here(format!(
                "statement has more than {BIND_MARKERS_MAX} bind markers, more than a driver \
                 can send values for; split it"
            )));
        }
        self.markers.push(BindMarker { name });
        Ok(self.markers.len() - 1)
    }

    /// Terms separated by commas up to `close`, which may come at once (`[]`, `f()`).
    fn terms_until(&mut self, close: TokenKind, expecting: &str) -> Result<Vec<Term>> {
        if self.eat(close) {
            return Ok(Vec::new());
        }
        let items = self.comma_list(Self::term)?;
        self.expect(close, &format!("{expecting} or ','"))?;
        Ok(items)
    }

    /// `{}`, `{a, b}`, `{k: v, ...}` or `{field: v, ...}`.
    fn braces(&mut self) -> Result<Term> {
        self.advance(); // {
        if self.eat(TokenKind::RBrace) {
            return Ok(Term::EmptyBraces);
        }
        let is_user_type = self.is_ident_at(0) && self.kind_at(1) == TokenKind::Colon;
        if is_user_type {
            let fields = self.comma_list(|p| {
                let field = p.ident_expecting("a field name")?;
                p.expect(TokenKind::Colon, "':'")?;
                Ok((field, p.term()?))
            })?;
            self.expect(TokenKind::RBrace, "'}' or ','")?;
            return Ok(Term::UserType(fields));
        }
        let first = self.term()?;
        if self.eat(TokenKind::Colon) {
            let first_value = self.term()?;
            let mut entries = vec![(first, first_value)];
            while self.eat(TokenKind::Comma) {
                self.check_list_len(entries.len())?;
                let key = self.term()?;
                self.expect(TokenKind::Colon, "':'")?;
                entries.push((key, self.term()?));
            }
            self.expect(TokenKind::RBrace, "'}' or ','")?;
            return Ok(Term::Map(entries));
        }
        let mut items = vec![first];
        while self.eat(TokenKind::Comma) {
            self.check_list_len(items.len())?;
            items.push(self.term()?);
        }
        self.expect(TokenKind::RBrace, "'}' or ','")?;
        Ok(Term::Set(items))
    }

    /// Whether `(` starts a cast `(type) term` rather than a tuple: a type name is a word
    /// that a tuple element could not be (an element that is a word is a function call).
    fn looks_like_cast(&self) -> bool {
        let word = |ahead: usize| {
            let token = self.peek_at(ahead);
            token.kind == TokenKind::QuotedName
                || (token.kind == TokenKind::Word
                    && !matches!(
                        self.text(token).to_ascii_lowercase().as_str(),
                        "true" | "false" | "null"
                    ))
        };
        if !word(1) {
            return false;
        }
        match self.kind_at(2) {
            TokenKind::RParen | TokenKind::Lt => true,
            TokenKind::Dot => word(3) && matches!(self.kind_at(4), TokenKind::RParen | TokenKind::Lt),
            _ => false,
        }
    }

    /// Whether a function call `f(` or `ks.f(` starts at the cursor.
    pub fn function_call_ahead(&self) -> bool {
        let word = |ahead: usize| matches!(self.kind_at(ahead), TokenKind::Word | TokenKind::QuotedName);
        word(0)
            && (self.kind_at(1) == TokenKind::LParen
                || (self.kind_at(1) == TokenKind::Dot && word(2) && self.kind_at(3) == TokenKind::LParen))
    }

    /// A function's name, `f` or `ks.f`. Function names may be keywords (`token`, `count`).
    pub fn function_name(&mut self) -> Result<QualifiedName> {
        let first = self.advance();
        let first = self.name_of(first)?;
        if self.eat(TokenKind::Dot) {
            let name = self.advance();
            return Ok(QualifiedName {
                keyspace: Some(first),
                name: self.name_of(name)?,
            });
        }
        Ok(QualifiedName {
            keyspace: None,
            name: first,
        })
    }

    // ---- Types ----

    /// A CQL type as normalized text: `int`, `frozen<map<text, list<int>>>`, `"MyType"`,
    /// `ks.udt`, `vector<float, 3>`, or a custom class name in quotes.
    pub fn type_text(&mut self) -> Result<String> {
        self.nested(|p| p.type_text_inner())
    }

    fn type_text_inner(&mut self) -> Result<String> {
        let token = self.peek();
        let mut text = match token.kind {
            TokenKind::Word => {
                self.advance();
                self.text(token).to_ascii_lowercase()
            }
            TokenKind::QuotedName => {
                self.advance();
                self.text(token).to_owned()
            }
            TokenKind::Str => {
                self.advance();
                return Ok(self.text(token).to_owned());
            }
            _ => return Err(self.mismatched("a type")),
        };
        if self.eat(TokenKind::Dot) {
            let name = self.peek();
            if !matches!(name.kind, TokenKind::Word | TokenKind::QuotedName) {
                return Err(self.mismatched("a type name"));
            }
            self.advance();
            text.push('.');
            if name.kind == TokenKind::Word {
                text.push_str(&self.text(name).to_ascii_lowercase());
            } else {
                text.push_str(self.text(name));
            }
        }
        if self.eat(TokenKind::Lt) {
            let args = self.comma_list(|p| {
                if p.at(TokenKind::Int) {
                    let size = p.advance();
                    return Ok(p.text(size).to_owned());
                }
                p.type_text()
            })?;
            self.expect(TokenKind::Gt, "'>' or ','")?;
            text.push('<');
            text.push_str(&args.join(", "));
            text.push('>');
        }
        Ok(text)
    }

    // ---- Relations ----

    /// `relation (AND relation)*`
    pub fn relations(&mut self) -> Result<Vec<Relation>> {
        let mut relations = vec![self.relation()?];
        while self.eat_kw("AND") {
            self.check_list_len(relations.len())?;
            relations.push(self.relation()?);
        }
        Ok(relations)
    }

    fn relation(&mut self) -> Result<Relation> {
        let lhs = if self.is_kw("TOKEN") && self.kind_at(1) == TokenKind::LParen {
            self.advance();
            self.advance();
            let columns = self.comma_list(Self::ident)?;
            self.expect(TokenKind::RParen, "')' or ','")?;
            RelationLhs::Token(columns)
        } else if self.eat(TokenKind::LParen) {
            let columns = self.comma_list(Self::ident)?;
            self.expect(TokenKind::RParen, "')' or ','")?;
            RelationLhs::Tuple(columns)
        } else {
            let column = self.ident_expecting("a column name")?;
            if self.eat_kw("IS") {
                self.expect_kw("NOT")?;
                self.expect_kw("NULL")?;
                return Ok(Relation::IsNotNull { column });
            }
            if self.eat(TokenKind::LBracket) {
                let key = self.term()?;
                self.expect(TokenKind::RBracket, "']'")?;
                RelationLhs::Element { column, key }
            } else if self.eat(TokenKind::Dot) {
                let field = self.ident_expecting("a field name")?;
                RelationLhs::Field { column, field }
            } else {
                RelationLhs::Column(column)
            }
        };
        if self.eat_kw("IN") {
            let values = if matches!(self.kind_at(0), TokenKind::Question | TokenKind::Colon) {
                InValues::Marker(self.bind_marker()?)
            } else {
                self.expect(TokenKind::LParen, "'(' or a bind marker")?;
                InValues::Terms(self.terms_until(TokenKind::RParen, "')'")?)
            };
            return Ok(Relation::In { lhs, values });
        }
        let op = self.compare_op()?;
        let rhs = self.term()?;
        Ok(Relation::Compare { lhs, op, rhs })
    }

    fn compare_op(&mut self) -> Result<CompareOp> {
        let op = match self.kind_at(0) {
            TokenKind::Eq => CompareOp::Eq,
            TokenKind::Neq => CompareOp::Neq,
            TokenKind::Lt => CompareOp::Lt,
            TokenKind::Lte => CompareOp::Lte,
            TokenKind::Gt => CompareOp::Gt,
            TokenKind::Gte => CompareOp::Gte,
            TokenKind::Word if self.is_kw("CONTAINS") => {
                self.advance();
                return Ok(if self.eat_kw("KEY") {
                    CompareOp::ContainsKey
                } else {
                    CompareOp::Contains
                });
            }
            TokenKind::Word if self.is_kw("LIKE") => CompareOp::Like,
            _ => {
                return Err(
                    self.mismatched("an operator (=, <, <=, >, >=, !=, IN, CONTAINS, CONTAINS KEY, LIKE)")
                )
            }
        };
        self.advance();
        Ok(op)
    }

    // ---- Properties ----

    /// `name = value (AND name = value)*` for keyspaces and tables.
    pub fn properties(&mut self) -> Result<Vec<Property>> {
        let mut properties = vec![self.property()?];
        while self.eat_kw("AND") {
            self.check_list_len(properties.len())?;
            properties.push(self.property()?);
        }
        Ok(properties)
    }

    pub fn property(&mut self) -> Result<Property> {
        let name = self.ident_expecting("a property name")?;
        self.expect(TokenKind::Eq, "'='")?;
        let value = if self.eat(TokenKind::LBrace) {
            let mut entries = Vec::new();
            if !self.eat(TokenKind::RBrace) {
                entries = self.comma_list(|p| {
                    let key = p.constant()?;
                    p.expect(TokenKind::Colon, "':'")?;
                    Ok((key, p.constant()?))
                })?;
                self.expect(TokenKind::RBrace, "'}' or ','")?;
            }
            PropertyValue::Map(entries)
        } else if let Some(literal) = self.try_constant()? {
            PropertyValue::Constant(literal)
        } else if self.is_ident_at(0) {
            PropertyValue::Identifier(self.ident()?)
        } else {
            return Err(self.mismatched("a constant, a name or a map"));
        };
        Ok(Property { name, value })
    }
}

/// The text between the quotes of a `'...'` or `"..."` token, with doubled quotes undone.
fn unquote(text: &str, quote: char) -> String {
    let inner = &text[1..text.len() - 1];
    let doubled = [quote, quote];
    let doubled: String = doubled.iter().collect();
    inner.replace(&doubled, &quote.to_string())
}

fn hex_value(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        b'A'..=b'F' => digit - b'A' + 10,
        _ => unreachable!("the lexer admits only hex digits after 0x"),
    }
}

fn shorten(text: &str, max_chars: usize) -> String {
    let mut chars = text.chars();
    let mut short: String = chars.by_ref().take(max_chars).collect();
    if chars.next().is_some() {
        short.push_str("...");
    }
    short
}
