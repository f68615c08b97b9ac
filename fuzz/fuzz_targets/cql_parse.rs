//! `statement::parse` on arbitrary text: it must return a statement or a syntax error, never
//! panic, and never overflow the stack however deeply the text nests (the parser bounds its
//! recursion by `NESTING_DEPTH_MAX`). Input: the statement's UTF-8 bytes; other bytes are
//! skipped, since a QUERY's [long string] is UTF-8 checked before it reaches the parser.

#![no_main]

use hayate_cql::statement::{parse, BIND_MARKERS_MAX};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse(text) {
        Ok(parsed) => {
            assert!(parsed.bind_markers.len() <= BIND_MARKERS_MAX);
            let _ = parsed.statement.kind();
            // Parsing is a function of the text alone.
            assert_eq!(parse(text), Ok(parsed));
        }
        Err(error) => {
            // Positions are 1-based, and the message names what went wrong.
            assert!(error.line >= 1 && error.column >= 1, "{error}");
            assert!(!error.message.is_empty());
            let _ = error.to_string();
        }
    }
});
