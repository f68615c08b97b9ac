//! The CQL frame layer and value layer on arbitrary bytes: nothing a client sends may panic the
//! server. Input: `header (9 bytes) | body`.
//!
//! - The header goes through `FrameHeader::decode_request` with its length field rewritten to
//!   the body's real length, so the fuzzer spends its time in `Request::decode` rather than on
//!   matching a length. A body with the compression flag is first decompressed with
//!   `decompress_lz4`, bounded by the frame limit, as the server will.
//! - The body is also read as a serialized value of a type the first byte picks, through
//!   `validate`, `Value::decode` and the rest of the value layer, with the properties that must
//!   hold whenever decoding succeeds: what `encode` writes validates and decodes to the same
//!   value, a value equals itself in `compare`, and order keys round-trip in both directions.

#![no_main]

use hayate_cql::compression::{compress_lz4, decompress_lz4};
use hayate_cql::frame::{FrameFlags, FrameHeader, FRAME_BODY_MAX_BYTES, HEADER_BYTES};
use hayate_cql::request::Request;
use hayate_cql::value::{
    canonicalize, compare, decode_order_key, encode_order_key, to_cql_literal, validate, DataType, Value,
};
use libfuzzer_sys::fuzz_target;

/// The types the first input byte chooses from (modulo their count): every scalar and a few
/// nested shapes.
const TYPES: [&str; 28] = [
    "ascii",
    "text",
    "blob",
    "boolean",
    "tinyint",
    "smallint",
    "int",
    "bigint",
    "varint",
    "float",
    "double",
    "decimal",
    "timestamp",
    "date",
    "time",
    "uuid",
    "timeuuid",
    "inet",
    "duration",
    "counter",
    "list<int>",
    "set<text>",
    "map<text, frozen<list<varint>>>",
    "tuple<int, text, decimal>",
    "frozen<list<frozen<set<timeuuid>>>>",
    "map<uuid, frozen<tuple<double, blob>>>",
    "frozen<map<decimal, inet>>",
    "tuple<duration, frozen<list<float>>>",
];

/// Values longer than this skip the order-key and literal checks, whose decimal conversion is
/// quadratic: the server bounds clustering values far below it.
const ORDER_CHECK_MAX_BYTES: usize = 4096;

fn check_frame(data: &[u8]) {
    let Some((head, body)) = data.split_first_chunk::<HEADER_BYTES>() else {
        return;
    };
    if body.len() > FRAME_BODY_MAX_BYTES as usize {
        return;
    }
    let mut head = *head;
    head[5..9].copy_from_slice(&(body.len() as u32).to_be_bytes());
    let Ok(mut header) = FrameHeader::decode_request(&head) else {
        return;
    };
    if header.flags.compression() {
        let Ok(plain) = decompress_lz4(body, FRAME_BODY_MAX_BYTES as usize) else {
            return;
        };
        header.flags = FrameFlags(header.flags.0 & !FrameFlags::COMPRESSION);
        header.body_length_bytes = plain.len() as u32;
        let _ = Request::decode(&header, &plain);
        // Whatever decompressed must survive our own compression round trip.
        let mut again = Vec::new();
        compress_lz4(&plain, &mut again);
        assert_eq!(
            decompress_lz4(&again, plain.len()).as_deref(),
            Ok(plain.as_slice())
        );
    } else {
        let _ = Request::decode(&header, body);
    }
}

fn check_value(data: &[u8]) {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let text = TYPES[usize::from(pick) % TYPES.len()];
    let Ok(ty) = DataType::parse(text) else {
        panic!("fuzz type table entry {text} does not parse");
    };
    let valid = validate(&ty, bytes).is_ok();
    let decoded = Value::decode(&ty, bytes);
    assert_eq!(decoded.is_ok(), valid, "{ty}: decode and validate disagree");
    let mut canonical = Vec::new();
    assert_eq!(
        canonicalize(&ty, bytes, &mut canonical).is_ok(),
        valid,
        "{ty}: canonicalize disagrees"
    );
    if let Ok(value) = decoded {
        let encoded = value.to_bytes();
        assert!(
            validate(&ty, &encoded).is_ok(),
            "{ty}: encode wrote an invalid value"
        );
        let again = Value::decode(&ty, &encoded);
        // NaN payloads make `PartialEq` fail on equal bits; compare the bytes instead.
        assert_eq!(
            again.map(|v| v.to_bytes()).as_deref(),
            Ok(encoded.as_slice()),
            "{ty}"
        );
        // `canonicalize` keeps scalar bytes as sent (a boolean 0x33, a duration's long-form
        // vints) where `Value` normalises them, so compare after one more decode.
        let via_canonical = Value::decode(&ty, &canonical).map(|v| v.to_bytes());
        assert_eq!(
            via_canonical.as_deref(),
            Ok(encoded.as_slice()),
            "{ty}: canonicalize changed the value"
        );
    }
    assert!(
        compare(&ty, bytes, bytes).is_eq(),
        "{ty}: a value differs from itself"
    );
    if bytes.len() <= ORDER_CHECK_MAX_BYTES {
        for descending in [false, true] {
            let mut key = Vec::new();
            encode_order_key(&ty, bytes, descending, &mut key);
            let mut input = key.as_slice();
            let mut out = Vec::new();
            let decoded = decode_order_key(&ty, descending, &mut input, &mut out);
            assert!(decoded.is_ok(), "{ty}: own order key refused: {decoded:?}");
            assert_eq!(out, bytes, "{ty}: order key does not round-trip");
            assert!(input.is_empty());
            // Junk read as a key must fail cleanly, never panic.
            let mut junk = bytes;
            let _ = decode_order_key(&ty, descending, &mut junk, &mut Vec::new());
        }
        let _ = to_cql_literal(&ty, bytes);
    }
}

fuzz_target!(|data: &[u8]| {
    check_frame(data);
    check_value(data);
});
