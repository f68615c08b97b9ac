//! CQL text -> tokens.
//!
//! Tokens borrow their text from the statement: a token is a kind and a byte range, and the
//! parser unescapes strings and folds identifiers only when it keeps them. The whole statement
//! is tokenized up front (bounded by [`TOKENS_MAX`]) because the grammar needs a few tokens of
//! lookahead in places, e.g. to tell `c = c + 1` from `c = ?`.
//!
//! The lexer settles the ambiguities between words and numbers by looking at the whole run of
//! characters, the way a maximal-munch lexer would:
//!
//! - `123e4567-e89b-12d3-a456-426614174000` is a UUID, though it starts like the float `123e4567`
//!   and `abcdef01-...` starts like an identifier: the 8-4-4-4-12 shape is tried first.
//! - `1h30m` is a duration, `1e5` a float, `12` an integer: a digit run followed by duration
//!   units is a duration only if the units account for the whole run.
//! - `P1DT2H` is an ISO 8601 duration and `p1` an identifier.
//! - `-` is always its own token: the parser folds it into a following number (`-5`), so that
//!   `c = c -1` still reads as a subtraction.

use super::error::SyntaxError;
use super::position;

/// The longest statement accepted, in bytes. A QUERY or PREPARE body cannot be larger than a
/// frame, so this is the frame bound: it only matters for callers that pass text from
/// elsewhere.
pub const STATEMENT_MAX_BYTES: usize = crate::frame::FRAME_BODY_MAX_BYTES as usize;

/// The most tokens in one statement. This bounds the parser's memory (a token is 24 bytes,
/// and the tree holds at most a node or two per token) independently of how the text packs
/// them: `[1,1,1,...]` has a token every byte. A million tokens is a batch of thousands of
/// inserts or a vector literal of hundreds of thousands of floats.
pub const TOKENS_MAX: usize = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokenKind {
    /// An unquoted word: a keyword or an identifier, not yet folded.
    Word,
    /// `"Name"`, with its quotes.
    QuotedName,
    /// `'text'`, with its quotes.
    Str,
    /// `$$text$$`, with its dollars.
    DollarStr,
    Int,
    Float,
    Uuid,
    /// `0x...`
    Hex,
    Duration,
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Semicolon,
    Dot,
    Colon,
    Question,
    Eq,
    Neq,
    Lt,
    Lte,
    Gt,
    Gte,
    Plus,
    Minus,
    PlusEq,
    MinusEq,
    Star,
    Slash,
    Percent,
    Eof,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    pub kind: TokenKind,
    /// Byte offset of the first character in the statement text.
    pub start: u32,
    /// Byte offset one past the last character.
    pub end: u32,
}

impl Token {
    pub fn text<'a>(&self, src: &'a str) -> &'a str {
        // The lexer only makes tokens on character boundaries within `src`.
        &src[self.start as usize..self.end as usize]
    }
}

/// Splits `src` into tokens, ending with one [`TokenKind::Eof`].
pub(crate) fn tokenize(src: &str) -> Result<Vec<Token>, SyntaxError> {
    if src.len() > STATEMENT_MAX_BYTES {
        return Err(SyntaxError {
            line: 1,
            column: 1,
            message: format!(
                "statement of {} bytes exceeds the maximum of {STATEMENT_MAX_BYTES} bytes; \
                 split it, or send large values as bound values",
                src.len()
            ),
        });
    }
    let mut lexer = Lexer {
        src,
        bytes: src.as_bytes(),
        pos: 0,
    };
    let mut tokens = Vec::new();
    loop {
        lexer.skip_blanks()?;
        let start = lexer.pos;
        let kind = match lexer.bytes.get(start) {
            None => TokenKind::Eof,
            Some(_) => lexer.next_kind()?,
        };
        if tokens.len() >= TOKENS_MAX {
            let (line, column) = position(src, start);
            return Err(SyntaxError {
                line,
                column,
                message: format!(
                    "statement has more than {TOKENS_MAX} tokens; split it into smaller \
                     statements, or send large values as bound values"
                ),
            });
        }
        tokens.push(Token {
            kind,
            start: offset_u32(start),
            end: offset_u32(lexer.pos),
        });
        if kind == TokenKind::Eof {
            return Ok(tokens);
        }
    }
}

fn offset_u32(offset: usize) -> u32 {
    // STATEMENT_MAX_BYTES keeps every offset far below u32::MAX.
    u32::try_from(offset).expect("statement length is bounded by STATEMENT_MAX_BYTES")
}

struct Lexer<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl Lexer<'_> {
    fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.bytes.get(self.pos + ahead).copied()
    }

    fn error(&self, at: usize, message: String) -> SyntaxError {
        let (line, column) = position(self.src, at);
        SyntaxError {
            line,
            column,
            message,
        }
    }

    /// Skips whitespace and the three comment forms.
    fn skip_blanks(&mut self) -> Result<(), SyntaxError> {
        loop {
            match (self.peek_at(0), self.peek_at(1)) {
                (Some(b), _) if b.is_ascii_whitespace() => self.pos += 1,
                (Some(b'-'), Some(b'-')) | (Some(b'/'), Some(b'/')) => {
                    while let Some(b) = self.peek_at(0) {
                        if b == b'\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                (Some(b'/'), Some(b'*')) => {
                    let start = self.pos;
                    match self.src[self.pos + 2..].find("*/") {
                        Some(i) => self.pos += 2 + i + 2,
                        None => {
                            return Err(self
                                .error(start, "unterminated comment: '/*' has no closing '*/'".to_owned()))
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    /// Lexes the token at `self.pos` (which is not at the end) and advances past it.
    fn next_kind(&mut self) -> Result<TokenKind, SyntaxError> {
        let start = self.pos;
        let first = self.bytes[start];
        let one = |lexer: &mut Self, kind| {
            lexer.pos += 1;
            Ok(kind)
        };
        let two = |lexer: &mut Self, kind| {
            lexer.pos += 2;
            Ok(kind)
        };
        let second = self.peek_at(1);
        match first {
            b'(' => one(self, TokenKind::LParen),
            b')' => one(self, TokenKind::RParen),
            b'[' => one(self, TokenKind::LBracket),
            b']' => one(self, TokenKind::RBracket),
            b'{' => one(self, TokenKind::LBrace),
            b'}' => one(self, TokenKind::RBrace),
            b',' => one(self, TokenKind::Comma),
            b';' => one(self, TokenKind::Semicolon),
            b'.' => one(self, TokenKind::Dot),
            b':' => one(self, TokenKind::Colon),
            b'?' => one(self, TokenKind::Question),
            b'*' => one(self, TokenKind::Star),
            b'/' => one(self, TokenKind::Slash),
            b'%' => one(self, TokenKind::Percent),
            b'=' => one(self, TokenKind::Eq),
            b'!' if second == Some(b'=') => two(self, TokenKind::Neq),
            b'<' if second == Some(b'=') => two(self, TokenKind::Lte),
            b'<' => one(self, TokenKind::Lt),
            b'>' if second == Some(b'=') => two(self, TokenKind::Gte),
            b'>' => one(self, TokenKind::Gt),
            b'+' if second == Some(b'=') => two(self, TokenKind::PlusEq),
            b'+' => one(self, TokenKind::Plus),
            b'-' if second == Some(b'=') => two(self, TokenKind::MinusEq),
            b'-' => one(self, TokenKind::Minus),
            b'\'' => self.quoted(b'\'', TokenKind::Str, "string"),
            b'"' => self.quoted(b'"', TokenKind::QuotedName, "quoted name"),
            b'$' if second == Some(b'$') => self.dollar_string(),
            b if b.is_ascii_alphanumeric() => self.word_or_number(),
            _ => {
                let c = self.src[start..].chars().next().unwrap_or('?');
                Err(self.error(
                    start,
                    format!(
                        "token recognition error at: '{c}'; outside strings and quoted names \
                         CQL uses only ASCII letters, digits and punctuation"
                    ),
                ))
            }
        }
    }

    /// `'...'` or `"..."`, where a doubled quote stands for one.
    fn quoted(&mut self, quote: u8, kind: TokenKind, what: &str) -> Result<TokenKind, SyntaxError> {
        let start = self.pos;
        self.pos += 1;
        loop {
            match self.peek_at(0) {
                None => {
                    let q = quote as char;
                    return Err(self.error(
                        start,
                        format!("unterminated {what}: the {q} here has no closing {q}"),
                    ));
                }
                Some(b) if b == quote => {
                    if self.peek_at(1) == Some(quote) {
                        self.pos += 2;
                    } else {
                        self.pos += 1;
                        return Ok(kind);
                    }
                }
                Some(_) => self.pos += 1,
            }
        }
    }

    /// `$$...$$`, which has no escapes.
    fn dollar_string(&mut self) -> Result<TokenKind, SyntaxError> {
        let start = self.pos;
        match self.src[start + 2..].find("$$") {
            Some(i) => {
                self.pos = start + 2 + i + 2;
                Ok(TokenKind::DollarStr)
            }
            None => Err(self.error(
                start,
                "unterminated string: the $$ here has no closing $$".to_owned(),
            )),
        }
    }

    /// A word, number, UUID, blob or duration: anything that starts with a letter or digit.
    fn word_or_number(&mut self) -> Result<TokenKind, SyntaxError> {
        let start = self.pos;
        let rest = &self.bytes[start..];
        let run = rest.iter().take_while(|b| is_word_byte(**b)).count();
        let followed_by_word = |len: usize| rest.get(len).is_some_and(|b| is_word_byte(*b));

        if let Some(len) = uuid_len(rest) {
            if !followed_by_word(len) {
                self.pos += len;
                return Ok(TokenKind::Uuid);
            }
        }
        if rest[0].is_ascii_digit() {
            if rest[0] == b'0' && matches!(rest.get(1), Some(b'x' | b'X')) {
                if rest[2..run].iter().all(u8::is_ascii_hexdigit) {
                    self.pos += run;
                    return Ok(TokenKind::Hex);
                }
                return Err(self.error(
                    start,
                    format!(
                        "invalid blob constant '{}': a blob is 0x followed by hex digits only",
                        &self.src[start..start + run]
                    ),
                ));
            }
            if let Some(len) = duration_len(rest) {
                // `10µs` runs past the word (µ is not ASCII), `1h30` stops short of it.
                if !followed_by_word(len) {
                    self.pos += len;
                    return Ok(TokenKind::Duration);
                }
            }
            let (len, kind) = number_len(rest);
            if followed_by_word(len) {
                let bad_end = len + rest[len..].iter().take_while(|b| is_word_byte(**b)).count();
                return Err(self.error(
                    start,
                    format!(
                        "invalid number '{}': a number is digits with an optional fraction and \
                         exponent, and a duration is digits followed by units such as 1h30m",
                        &self.src[start..start + bad_end]
                    ),
                ));
            }
            self.pos += len;
            return Ok(kind);
        }
        if matches!(rest[0], b'P' | b'p') && iso_duration_len(&rest[..run]) == Some(run) {
            self.pos += run;
            return Ok(TokenKind::Duration);
        }
        self.pos += run;
        match &self.src[start..start + run] {
            "NaN" | "Infinity" => Ok(TokenKind::Float),
            _ => Ok(TokenKind::Word),
        }
    }
}

/// The length of an 8-4-4-4-12 hex UUID at the start of `bytes`.
fn uuid_len(bytes: &[u8]) -> Option<usize> {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let mut at = 0;
    for (i, group) in GROUPS.iter().enumerate() {
        if i > 0 {
            if bytes.get(at) != Some(&b'-') {
                return None;
            }
            at += 1;
        }
        let digits = bytes.get(at..at + group)?;
        if !digits.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        at += group;
    }
    Some(at)
}

/// The length of an integer or float at the start of `bytes` (which starts with a digit):
/// `12`, `1.5`, `1.`, `1e5`, `2.5E-3`.
fn number_len(bytes: &[u8]) -> (usize, TokenKind) {
    let digits = |from: usize| bytes[from..].iter().take_while(|b| b.is_ascii_digit()).count();
    let mut len = digits(0);
    let mut kind = TokenKind::Int;
    if bytes.get(len) == Some(&b'.') {
        // `1.` is a float in CQL, as is `1.5`.
        len += 1 + digits(len + 1);
        kind = TokenKind::Float;
    }
    if matches!(bytes.get(len), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(bytes.get(len + 1), Some(b'+' | b'-')));
        let exponent = digits(len + 1 + sign);
        if exponent > 0 {
            len += 1 + sign + exponent;
            kind = TokenKind::Float;
        }
    }
    (len, kind)
}

/// The units of a CQL duration, longest first where one is a prefix of another.
const DURATION_UNITS: [&str; 12] = ["mo", "ms", "us", "µs", "μs", "ns", "y", "w", "d", "h", "m", "s"];

/// The length of a `1y2mo3w4d5h6m7s8ms9us10ns` duration at the start of `bytes`.
fn duration_len(bytes: &[u8]) -> Option<usize> {
    let mut at = 0;
    loop {
        let digits = bytes[at..].iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return if at == 0 { None } else { Some(at) };
        }
        let unit_at = at + digits;
        let unit = DURATION_UNITS.iter().find(|unit| {
            bytes
                .get(unit_at..unit_at + unit.len())
                .is_some_and(|b| b.eq_ignore_ascii_case(unit.as_bytes()))
        });
        match unit {
            Some(unit) => at = unit_at + unit.len(),
            // Digits without a unit end the duration before them (and, in practice, make the
            // caller see a word after it and fall back to a number).
            None => return if at == 0 { None } else { Some(at) },
        }
    }
}

/// The length of an ISO 8601 duration (`P1Y2M3DT4H5M6S`, `P2W`, `PT10S`) that is all of
/// `word`, case-insensitively.
fn iso_duration_len(word: &[u8]) -> Option<usize> {
    let upper: Vec<u8> = word.iter().map(u8::to_ascii_uppercase).collect();
    let mut at = 1;
    let mut parts = 0;
    let mut in_time = false;
    let mut allowed: &[u8] = b"YMWD";
    while at < upper.len() {
        if upper[at] == b'T' && !in_time {
            in_time = true;
            allowed = b"HMS";
            at += 1;
            continue;
        }
        let digits = upper[at..].iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        let unit = *upper.get(at + digits)?;
        let index = allowed.iter().position(|u| *u == unit)?;
        // Units must come in order, each at most once.
        allowed = &allowed[index + 1..];
        at += digits + 1;
        parts += 1;
    }
    (parts > 0).then_some(at)
}
