//! The decoders a user-defined type value meets: `validate` (every bound value passes it),
//! `Value::decode`, `canonicalize`, `split_components` (how a non-frozen UDT becomes a cell per
//! field) and the order keys of frozen UDTs in primary keys. None may panic on any bytes; a
//! value `validate` accepts must decode, canonicalize to a fixed point, and round-trip through
//! its order key exactly. Input: a selector byte (which of a few UDT types, or 0xFF: the rest is
//! type text for `DataType::parse_with`), then the value's bytes.

#![no_main]

use std::sync::Arc;

use hayate_cql::value::{
    canonicalize, decode_order_key, encode_order_key, split_components, validate, DataType, UserType, Value,
};
use libfuzzer_sys::fuzz_target;

fn address() -> Arc<UserType> {
    Arc::new(UserType {
        keyspace: "ks".into(),
        name: "address".into(),
        field_names: vec!["street".into(), "zip".into(), "tags".into()],
        field_types: vec![
            DataType::Text,
            DataType::Int,
            DataType::Set {
                element: Box::new(DataType::Text),
                frozen: true,
            },
        ],
    })
}

fn person(home: &Arc<UserType>) -> Arc<UserType> {
    Arc::new(UserType {
        keyspace: "ks".into(),
        name: "person".into(),
        field_names: vec!["name".into(), "home".into(), "born".into()],
        field_types: vec![
            DataType::Text,
            DataType::Udt {
                def: home.clone(),
                frozen: true,
            },
            DataType::Decimal,
        ],
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, value)) = data.split_first() else {
        return;
    };
    let home = address();
    let who = person(&home);
    if selector == 0xFF {
        if let Ok(text) = std::str::from_utf8(value) {
            let lookup = |n: &str| match n {
                "address" => Some(home.clone()),
                "person" => Some(who.clone()),
                _ => None,
            };
            if let Ok(ty) = DataType::parse_with(text, &lookup) {
                // What a type prints, it parses back to.
                assert_eq!(DataType::parse_with(&ty.to_string(), &lookup).as_ref(), Ok(&ty));
                let _ = ty.to_column_type();
            }
        }
        return;
    }
    let ty = match selector % 4 {
        0 => DataType::Udt {
            def: home,
            frozen: true,
        },
        1 => DataType::Udt {
            def: who,
            frozen: true,
        },
        2 => DataType::List {
            element: Box::new(DataType::Udt {
                def: who,
                frozen: true,
            }),
            frozen: true,
        },
        _ => DataType::Tuple(vec![
            DataType::Int,
            DataType::Udt {
                def: home,
                frozen: true,
            },
        ]),
    };
    let _ = split_components(value);
    let mut key = Vec::new();
    encode_order_key(&ty, value, false, &mut key);
    if validate(&ty, value).is_err() {
        return;
    }
    Value::decode(&ty, value).expect("a value validate accepts decodes");
    let mut canonical = Vec::new();
    canonicalize(&ty, value, &mut canonical).expect("a value validate accepts canonicalizes");
    let mut again = Vec::new();
    canonicalize(&ty, &canonical, &mut again).expect("a canonical value canonicalizes");
    assert_eq!(again, canonical, "canonical form is a fixed point");
    let mut rest = key.as_slice();
    let mut back = Vec::new();
    decode_order_key(&ty, false, &mut rest, &mut back).expect("a key we made decodes");
    assert!(rest.is_empty(), "the key is read to its end");
    assert_eq!(back, value, "the order key gives back the value exactly");
});
