//! The JSON decoder of `INSERT JSON` and `fromJson` (`value::json`) on arbitrary text: it must
//! return a value or an error, never panic, never overflow the stack however deeply the text
//! nests, and every value it returns must be a valid serialized value of the type, which
//! `to_json` can print and whose printed text reads back to a value printed the same way.
//!
//! Input: a byte that picks the CQL type, then the JSON text (UTF-8; other bytes are skipped,
//! since a text value is UTF-8 checked before it reaches the decoder). Bit 7 of the first byte
//! reads the text as an `INSERT JSON` object instead, each value against the type.

#![no_main]

use hayate_cql::value::json::{from_json, parse_object, to_json, value_from_json};
use hayate_cql::value::{validate, DataType};
use libfuzzer_sys::fuzz_target;

const TYPES: &[&str] = &[
    "int",
    "bigint",
    "tinyint",
    "varint",
    "decimal",
    "float",
    "double",
    "text",
    "ascii",
    "blob",
    "boolean",
    "timestamp",
    "date",
    "time",
    "uuid",
    "timeuuid",
    "inet",
    "duration",
    "list<int>",
    "set<text>",
    "map<text, int>",
    "map<int, frozen<list<text>>>",
    "map<frozen<set<int>>, boolean>",
    "tuple<int, text, frozen<map<text, double>>>",
    "list<frozen<list<frozen<list<varint>>>>>",
];

fn check(ty: &DataType, decoded: Option<Vec<u8>>) {
    let Some(bytes) = decoded else {
        return;
    };
    assert!(
        validate(ty, &bytes).is_ok(),
        "{ty}: the decoder made an invalid value"
    );
    let printed = to_json(ty, &bytes);
    // NaN and the infinities print as null, also inside collections (where a null does not
    // read back). Printing may lose what does not matter (an
    // IPv4-mapped IPv6 address prints as IPv4, as in Java), so the property is that the printed
    // text reads back to a value that prints the same.
    let text = ty.to_string();
    if printed == "null" || (printed.contains("null") && (text.contains("double") || text.contains("float")))
    {
        return;
    }
    match from_json(ty, &printed) {
        Ok(Some(again)) => assert_eq!(to_json(ty, &again), printed, "{ty}: {printed} does not read back"),
        // Dates before year 0 or after 9999 print in a form no date parser reads back, as in
        // Cassandra.
        Err(_) if matches!(ty, DataType::Timestamp | DataType::Date) => {}
        other => panic!("{ty}: printed {printed} does not decode: {other:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let name = TYPES[usize::from(pick & 0x7f) % TYPES.len()];
    let Ok(ty) = DataType::parse(name) else {
        panic!("fuzz type table entry {name} does not parse");
    };
    if pick & 0x80 == 0 {
        if let Ok(decoded) = from_json(&ty, text) {
            check(&ty, decoded);
        }
    } else if let Ok(Some(object)) = parse_object(text) {
        for raw in object.values() {
            if let Ok(decoded) = value_from_json(&ty, raw) {
                check(&ty, decoded);
            }
        }
    }
});
