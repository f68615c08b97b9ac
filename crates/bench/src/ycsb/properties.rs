//! YCSB's configuration: a flat map of `name=value` properties, read from Java `.properties` files
//! (`-P`) and the command line (`-p`), with typed getters that say which property is wrong.
//!
//! The file syntax is `java.util.Properties.load`'s: `#` and `!` start comment lines, the key ends
//! at the first unescaped `=`, `:` or whitespace, a trailing backslash continues the line, and
//! `\t \n \r \f \\ \uXXXX` escapes are decoded. YCSB's own workload files use only `key=value` and
//! `#` comments, but files written for YCSB by hand may use the rest.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// A workload file larger than this is not a workload file.
const PROPERTIES_FILE_BYTES_MAX: u64 = 1024 * 1024;

/// The effective properties of a run: files in command-line order, then every `-p` and flag.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Properties {
    map: BTreeMap<String, String>,
}

/// A property is missing, unreadable or out of range; the message names it and what is expected.
#[derive(Debug)]
#[non_exhaustive]
pub enum PropertyError {
    File {
        path: String,
        source: std::io::Error,
    },
    FileTooLarge {
        path: String,
        bytes: u64,
    },
    Invalid {
        name: String,
        value: String,
        expected: &'static str,
    },
    Missing {
        name: String,
        expected: &'static str,
    },
}

impl fmt::Display for PropertyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PropertyError::File { path, source } => {
                write!(f, "cannot read the properties file {path}: {source}")
            }
            PropertyError::FileTooLarge { path, bytes } => write!(
                f,
                "{path} is {bytes} bytes, more than the {PROPERTIES_FILE_BYTES_MAX} a workload file may have; \
                 is it the right file?"
            ),
            PropertyError::Invalid { name, value, expected } => {
                write!(f, "property {name}={value:?} is invalid: expected {expected}")
            }
            PropertyError::Missing { name, expected } => {
                write!(f, "the property {name} is required: {expected}")
            }
        }
    }
}

impl std::error::Error for PropertyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PropertyError::File { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl Properties {
    pub fn new() -> Properties {
        Properties::default()
    }

    /// Reads a `.properties` file; its keys override what is already set, as YCSB's `-P` does.
    pub fn load_file(&mut self, path: &Path) -> Result<(), PropertyError> {
        let name = path.display().to_string();
        let bytes = std::fs::metadata(path)
            .map_err(|source| PropertyError::File {
                path: name.clone(),
                source,
            })?
            .len();
        if bytes > PROPERTIES_FILE_BYTES_MAX {
            return Err(PropertyError::FileTooLarge { path: name, bytes });
        }
        let text =
            std::fs::read_to_string(path).map_err(|source| PropertyError::File { path: name, source })?;
        self.load_str(&text);
        Ok(())
    }

    /// Parses `.properties` text; its keys override what is already set.
    pub fn load_str(&mut self, text: &str) {
        for logical in logical_lines(text) {
            let (key, value) = split_key_value(&logical);
            self.map.insert(key, value);
        }
    }

    pub fn set(&mut self, name: &str, value: &str) {
        self.map.insert(name.to_string(), value.to_string());
    }

    /// Sets a property only when it is not set yet: how defaults enter `meta.json`.
    pub fn set_default(&mut self, name: &str, value: &str) {
        self.map
            .entry(name.to_string())
            .or_insert_with(|| value.to_string());
    }

    /// Every property of `other` overrides this one's (`-p` over `-P`).
    pub fn override_with(&mut self, other: &Properties) {
        for (k, v) in &other.map {
            self.map.insert(k.clone(), v.clone());
        }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.map.get(name).map(String::as_str)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    pub fn str_or<'a>(&'a self, name: &str, default: &'a str) -> &'a str {
        self.get(name).unwrap_or(default)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.map.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// An integer property (Java's `Long.parseLong`: surrounding spaces are not allowed there, but
    /// a hand-edited file often has trailing ones, so they are trimmed).
    pub fn i64_or(&self, name: &str, default: i64) -> Result<i64, PropertyError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v.trim().parse().map_err(|_| invalid(name, v, "an integer")),
        }
    }

    pub fn u64_or(&self, name: &str, default: u64) -> Result<u64, PropertyError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| invalid(name, v, "a non-negative integer")),
        }
    }

    pub fn f64_or(&self, name: &str, default: f64) -> Result<f64, PropertyError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => match v.trim().parse::<f64>() {
                Ok(x) if x.is_finite() => Ok(x),
                _ => Err(invalid(name, v, "a number")),
            },
        }
    }

    /// Java's `Boolean.parseBoolean`: "true" in any case is true, anything else is false.
    pub fn bool_or(&self, name: &str, default: bool) -> bool {
        match self.get(name) {
            None => default,
            Some(v) => v.trim().eq_ignore_ascii_case("true"),
        }
    }
}

pub fn invalid(name: &str, value: &str, expected: &'static str) -> PropertyError {
    PropertyError::Invalid {
        name: name.to_string(),
        value: value.to_string(),
        expected,
    }
}

/// Joins continuation lines and drops comments and blank lines.
fn logical_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for raw in text.lines() {
        let line = raw.trim_start_matches([' ', '\t', '\x0c']);
        if current.is_none() && (line.is_empty() || line.starts_with('#') || line.starts_with('!')) {
            continue;
        }
        let continues = ends_with_odd_backslashes(line);
        let body = if continues { &line[..line.len() - 1] } else { line };
        match current.as_mut() {
            Some(acc) => acc.push_str(body),
            None => current = Some(body.to_string()),
        }
        if !continues {
            out.extend(current.take());
        }
    }
    out.extend(current);
    out
}

fn ends_with_odd_backslashes(line: &str) -> bool {
    line.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// Splits at the first unescaped `=`, `:` or whitespace; the value loses its leading whitespace
/// (and one separator) but keeps trailing whitespace, as Java does.
fn split_key_value(line: &str) -> (String, String) {
    let mut chars = line.char_indices().peekable();
    let mut key_end = line.len();
    while let Some((i, c)) = chars.next() {
        if c == '\\' {
            chars.next();
            continue;
        }
        if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\x0c' {
            key_end = i;
            break;
        }
    }
    let key = unescape(&line[..key_end]);
    let mut rest = line[key_end..].trim_start_matches([' ', '\t', '\x0c']);
    if let Some(r) = rest.strip_prefix(['=', ':']) {
        rest = r.trim_start_matches([' ', '\t', '\x0c']);
    }
    (key, unescape(rest))
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(decoded) => out.push(decoded),
                    None => out.push_str(&hex),
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ycsb_workload_file_syntax() {
        let mut p = Properties::new();
        p.load_str(
            "# Yahoo! Cloud System Benchmark\n\
             recordcount=1000\n\
             \n\
             ! also a comment\n\
             readproportion = 0.5\n\
             workload=site.ycsb.workloads.CoreWorkload\n\
             requestdistribution:zipfian\n\
             hosts 127.0.0.1,127.0.0.2\n",
        );
        assert_eq!(p.get("recordcount"), Some("1000"));
        assert_eq!(p.get("readproportion"), Some("0.5"));
        assert_eq!(p.get("requestdistribution"), Some("zipfian"));
        assert_eq!(p.get("hosts"), Some("127.0.0.1,127.0.0.2"));
        assert_eq!(p.iter().count(), 5);
    }

    #[test]
    fn continuation_lines_and_escapes() {
        let mut p = Properties::new();
        p.load_str("long = a,\\\n    b,\\\n    c\nkey\\=with\\:seps=v\\tw\nu=\\u0041x\nempty=\n");
        assert_eq!(p.get("long"), Some("a,b,c"));
        assert_eq!(p.get("key=with:seps"), Some("v\tw"));
        assert_eq!(p.get("u"), Some("Ax"));
        assert_eq!(p.get("empty"), Some(""));
    }

    #[test]
    fn later_files_then_command_line_override_earlier_ones() {
        // YCSB: -P files in order, then every -p over all files wherever it stood on the line.
        let mut files = Properties::new();
        files.load_str("recordcount=1000\noperationcount=1000\n");
        files.load_str("recordcount=5000\n");
        let mut cli = Properties::new();
        cli.set("operationcount", "7");
        cli.set("operationcount", "8");
        files.override_with(&cli);
        assert_eq!(files.get("recordcount"), Some("5000"));
        assert_eq!(files.get("operationcount"), Some("8"));
    }

    #[test]
    fn typed_getters_name_the_bad_property() {
        let mut p = Properties::new();
        p.load_str("recordcount=ten\nreadallfields=TRUE\nratio=0.25 \n");
        let err = p.i64_or("recordcount", 0).expect_err("not a number");
        assert!(err.to_string().contains("recordcount=\"ten\""), "{err}");
        assert_eq!(p.i64_or("fieldcount", 10).expect("default"), 10);
        assert!(p.bool_or("readallfields", false));
        assert!(!p.bool_or("writeallfields", false));
        assert_eq!(p.f64_or("ratio", 0.0).expect("trimmed"), 0.25);
    }
}
