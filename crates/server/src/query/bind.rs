//! Terms to bytes: literals, bind values, collection literals and the few functions a term may
//! call (`now()`, `uuid()`, `currentTimestamp()`, ...), each checked against the type of the
//! column that receives it.

use hayate_cql::request::Values;
use hayate_cql::statement::{BindMarker, Term};
use hayate_cql::value::{
    canonicalize, encode_list, encode_map, encode_set, encode_tuple, literal_to_bytes, validate,
};
use hayate_cql::value::{json, DataType, Literal};
use hayate_cql::wire::Value as WireValue;

use crate::error::{invalid, QueryError, QueryResult};

/// A term's value: null, "leave as is" (an unset bind value), or bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Evaluated {
    Null,
    Unset,
    Bytes(Vec<u8>),
}

/// The bind values of one request, by marker index.
pub struct Binds<'a> {
    values: Vec<WireValue<'a>>,
}

impl<'a> Binds<'a> {
    /// Lines up the values sent with the statement's markers. Named values are matched to
    /// markers by name (`:name`, or the receiving column's name for `?`), as drivers send them.
    pub fn new(
        values: &Values<'a>,
        markers: &[BindMarker],
        marker_names: &[String],
    ) -> QueryResult<Binds<'a>> {
        let values = match values {
            Values::None => Vec::new(),
            Values::Positional(v) => v.clone(),
            Values::Named(named) => {
                let mut out = vec![WireValue::NotSet; markers.len()];
                for (name, value) in named {
                    let lowered = name.to_lowercase();
                    let mut matched = false;
                    for (i, m) in markers.iter().enumerate() {
                        let marker_name = m.name.as_deref().or(marker_names.get(i).map(String::as_str));
                        if marker_name == Some(name) || marker_name == Some(lowered.as_str()) {
                            out[i] = *value;
                            matched = true;
                        }
                    }
                    if !matched {
                        return Err(invalid(format!(
                            "Invalid named value: no bind marker named {name}"
                        )));
                    }
                }
                out
            }
        };
        if values.len() != markers.len() {
            return Err(invalid(format!(
                "There were {} markers(?) in CQL but {} bound variables",
                markers.len(),
                values.len()
            )));
        }
        Ok(Binds { values })
    }

    fn get(&self, i: usize) -> WireValue<'a> {
        self.values.get(i).copied().unwrap_or(WireValue::NotSet)
    }
}

/// What a term is evaluated for: its receiver's name (for messages) and type.
pub struct Receiver<'t> {
    pub name: &'t str,
    pub ty: &'t DataType,
}

/// Evaluates `term` as a value of the receiver's type.
pub fn evaluate(term: &Term, to: &Receiver<'_>, binds: &Binds<'_>) -> QueryResult<Evaluated> {
    let bad =
        |e: hayate_cql::value::ValueError| invalid(format!("Invalid value for column {}: {e}", to.name));
    match term {
        Term::Literal(Literal::Null) => Ok(Evaluated::Null),
        Term::Literal(lit) => {
            let mut out = Vec::new();
            literal_to_bytes(to.ty, lit, &mut out).map_err(|e| match e {
                // Cassandra's words for a literal of the wrong kind.
                hayate_cql::value::ValueError::InvalidLiteral { kind, text, ty } => invalid(format!(
                    "Invalid {kind} constant ({text}) for \"{}\" of type {ty}",
                    to.name
                )),
                e => invalid(format!(
                    "Invalid {} constant for {} of type {}: {e}",
                    literal_kind(lit),
                    to.name,
                    to.ty
                )),
            })?;
            Ok(Evaluated::Bytes(out))
        }
        Term::Negate(inner) => match inner.as_ref() {
            Term::Literal(Literal::Int(s)) => evaluate(&Term::Literal(Literal::Int(negate(s))), to, binds),
            Term::Literal(Literal::Float(s)) => {
                evaluate(&Term::Literal(Literal::Float(negate(s))), to, binds)
            }
            _ => Err(invalid(format!("Invalid negation for {}", to.name))),
        },
        Term::Marker(i) => match binds.get(*i) {
            WireValue::Null => Ok(Evaluated::Null),
            WireValue::NotSet => Ok(Evaluated::Unset),
            WireValue::Bytes(b) => {
                validate(to.ty, b).map_err(bad)?;
                if to.ty.is_collection() || to.ty.components().is_some() {
                    let mut out = Vec::with_capacity(b.len());
                    canonicalize(to.ty, b, &mut out).map_err(bad)?;
                    Ok(Evaluated::Bytes(out))
                } else {
                    Ok(Evaluated::Bytes(b.to_vec()))
                }
            }
        },
        Term::List(items) => {
            let element = match to.ty {
                DataType::List { element, .. } => element,
                // Cassandra accepts a list literal for a set only when it is empty.
                DataType::Set { element, .. } if items.is_empty() => element,
                _ => return Err(type_mismatch("list literal", to)),
            };
            let elements = evaluate_elements(items, element, to, binds)?;
            let mut out = Vec::new();
            encode_list(elements, &mut out);
            Ok(Evaluated::Bytes(out))
        }
        Term::Set(items) => {
            let DataType::Set { element, .. } = to.ty else {
                return Err(type_mismatch("set literal", to));
            };
            let elements = evaluate_elements(items, element, to, binds)?;
            let mut out = Vec::new();
            encode_set(element, elements, &mut out);
            Ok(Evaluated::Bytes(out))
        }
        Term::Map(pairs) => {
            let DataType::Map { key, value, .. } = to.ty else {
                return Err(type_mismatch("map literal", to));
            };
            let mut entries = Vec::with_capacity(pairs.len());
            for (k, v) in pairs {
                let k = element_bytes(k, key, to, binds)?;
                let v = element_bytes(v, value, to, binds)?;
                entries.push((k, v));
            }
            let mut out = Vec::new();
            encode_map(key, entries, &mut out);
            Ok(Evaluated::Bytes(out))
        }
        Term::EmptyBraces => match to.ty {
            DataType::Set { .. } | DataType::Map { .. } | DataType::List { .. } => {
                let mut out = Vec::new();
                encode_list(std::iter::empty::<&[u8]>(), &mut out);
                Ok(Evaluated::Bytes(out))
            }
            _ => Err(type_mismatch("{}", to)),
        },
        Term::Tuple(items) => {
            let DataType::Tuple(types) = to.ty else {
                return Err(type_mismatch("tuple literal", to));
            };
            if items.len() > types.len() {
                return Err(invalid(format!(
                    "Invalid tuple literal for {}: too many elements. Type {} expects {} but got {}",
                    to.name,
                    to.ty,
                    types.len(),
                    items.len()
                )));
            }
            let mut components = Vec::with_capacity(items.len());
            for (item, ty) in items.iter().zip(types) {
                let r = Receiver { name: to.name, ty };
                components.push(match evaluate(item, &r, binds)? {
                    Evaluated::Bytes(b) => Some(b),
                    _ => None,
                });
            }
            let mut out = Vec::new();
            encode_tuple(components, &mut out);
            Ok(Evaluated::Bytes(out))
        }
        Term::Function { name, args } => function(&name.name, args, to, binds),
        Term::Cast { term, .. } => evaluate(term, to, binds),
        Term::UserType(fields) => {
            let DataType::Udt { def, .. } = to.ty else {
                return Err(type_mismatch("user type literal", to));
            };
            let mut components: Vec<Option<Vec<u8>>> = vec![None; def.field_names.len()];
            let mut given = vec![false; def.field_names.len()];
            for (field, term) in fields {
                let i = def.field_index(field).ok_or_else(|| {
                    invalid(format!(
                        "Unknown field '{field}' in value of user defined type {}",
                        def.name
                    ))
                })?;
                if std::mem::replace(&mut given[i], true) {
                    return Err(invalid(format!(
                        "Invalid user type literal for {}: duplicate field {field}",
                        to.name
                    )));
                }
                let r = Receiver {
                    name: to.name,
                    ty: &def.field_types[i],
                };
                let value = match (evaluate(term, &r, binds), term) {
                    // A literal of the wrong kind is named as Cassandra names it.
                    (Err(_), Term::Literal(_)) => Err(invalid(format!(
                        "Invalid user type literal for {}: field {field} is not of type {}",
                        to.name,
                        def.field_types[i].frozen()
                    ))),
                    (other, _) => other,
                };
                components[i] = match value? {
                    Evaluated::Bytes(b) => Some(b),
                    Evaluated::Null => None,
                    Evaluated::Unset => {
                        return Err(invalid(format!(
                            "Invalid unset value for field '{field}' of user defined type {}",
                            def.name
                        )))
                    }
                };
            }
            let mut out = Vec::new();
            encode_tuple(components, &mut out);
            Ok(Evaluated::Bytes(out))
        }
    }
}

/// A term evaluated for an integer receiver: a LIMIT, a TTL, a USING TIMESTAMP, a list index,
/// a token. The one decoder of every integer a statement binds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Integer {
    Value(i64),
    Null,
    Unset,
}

/// Evaluates `term` for a receiver named `name` of type `ty`, `int` or `bigint`.
pub fn evaluate_integer(term: &Term, name: &str, ty: &DataType, binds: &Binds<'_>) -> QueryResult<Integer> {
    debug_assert!(matches!(ty, DataType::Int | DataType::BigInt), "{ty}");
    Ok(match evaluate(term, &Receiver { name, ty }, binds)? {
        // `evaluate` checked the length against the type: 4 bytes for an int, 8 for a bigint,
        // or none, an empty value, which every integer receiver takes as null.
        Evaluated::Bytes(b) => match *b.as_slice() {
            [] => Integer::Null,
            [a, b, c, d] => Integer::Value(i32::from_be_bytes([a, b, c, d]).into()),
            [a, b, c, d, e, f, g, h] => Integer::Value(i64::from_be_bytes([a, b, c, d, e, f, g, h])),
            _ => {
                return Err(invalid(format!(
                    "Invalid value for {name}: expected 4 or 8 bytes"
                )))
            }
        },
        Evaluated::Null => Integer::Null,
        Evaluated::Unset => Integer::Unset,
    })
}

fn negate(s: &str) -> String {
    match s.strip_prefix('-') {
        Some(rest) => rest.to_owned(),
        None => format!("-{s}"),
    }
}

fn literal_kind(l: &Literal) -> &'static str {
    match l {
        Literal::Str(_) => "STRING",
        Literal::Int(_) => "INTEGER",
        Literal::Float(_) => "FLOAT",
        Literal::Bool(_) => "BOOLEAN",
        Literal::Uuid(_) => "UUID",
        Literal::Hex(_) => "HEX",
        Literal::Duration(_) => "DURATION",
        Literal::Null => "NULL",
    }
}

fn type_mismatch(what: &str, to: &Receiver<'_>) -> crate::error::QueryError {
    invalid(format!("Invalid {what} for {} of type {}", to.name, to.ty))
}

fn element_bytes(term: &Term, ty: &DataType, to: &Receiver<'_>, binds: &Binds<'_>) -> QueryResult<Vec<u8>> {
    match evaluate(term, &Receiver { name: to.name, ty }, binds)? {
        Evaluated::Bytes(b) => Ok(b),
        Evaluated::Null => Err(invalid("null is not supported inside collections")),
        Evaluated::Unset => Err(invalid(format!("Invalid unset value for {}", to.name))),
    }
}

fn evaluate_elements(
    items: &[Term],
    element: &DataType,
    to: &Receiver<'_>,
    binds: &Binds<'_>,
) -> QueryResult<Vec<Vec<u8>>> {
    items
        .iter()
        .map(|t| element_bytes(t, element, to, binds))
        .collect()
}

/// The microseconds since the epoch now.
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// A version 1 (time-based) UUID for now, with a random clock sequence and node.
pub fn timeuuid_now() -> [u8; 16] {
    // 100 ns intervals since 1582-10-15.
    const GREGORIAN_OFFSET_100NS: u64 = 0x01B2_1DD2_1381_4000;
    let t = (now_us() as u64) * 10 + GREGORIAN_OFFSET_100NS;
    let mut u = crate::schema::random_uuid();
    u[0..4].copy_from_slice(&((t & 0xFFFF_FFFF) as u32).to_be_bytes());
    u[4..6].copy_from_slice(&(((t >> 32) & 0xFFFF) as u16).to_be_bytes());
    u[6..8].copy_from_slice(&((((t >> 48) & 0x0FFF) as u16) | 0x1000).to_be_bytes());
    u[8] = (u[8] & 0x3F) | 0x80;
    u
}

fn function(name: &str, args: &[Term], to: &Receiver<'_>, binds: &Binds<'_>) -> QueryResult<Evaluated> {
    let name = name.to_ascii_lowercase();
    // The blob conversions: the argument is read as one type and its bytes kept as the other.
    let conversion = match (name.strip_suffix("asblob"), name.strip_prefix("blobas")) {
        (Some(from), _) => Some((DataType::parse(from).ok(), DataType::Blob)),
        (_, Some(into)) => DataType::parse(into).ok().map(|t| (Some(DataType::Blob), t)),
        _ => None,
    };
    if let (Some((Some(from), into)), [arg]) = (conversion, args) {
        if &into != to.ty {
            return Err(invalid(format!(
                "Type error: cannot assign result of function {name} (type {into}) to {} of type {}",
                to.name, to.ty
            )));
        }
        return evaluate(
            arg,
            &Receiver {
                name: to.name,
                ty: &from,
            },
            binds,
        );
    }
    if name == "fromjson" {
        return from_json(args, to, binds);
    }
    let now_ms = now_us() / 1000;
    let bytes = match (name.as_str(), args) {
        ("now", []) => timeuuid_now().to_vec(),
        ("uuid", []) => crate::schema::random_uuid().to_vec(),
        ("currenttimestamp", []) => now_ms.to_be_bytes().to_vec(),
        ("totimestamp", [Term::Function { name: inner, args }])
            if inner.name.eq_ignore_ascii_case("now") && args.is_empty() =>
        {
            now_ms.to_be_bytes().to_vec()
        }
        ("currentdate", []) => {
            let days = now_ms.div_euclid(86_400_000);
            ((days + (1i64 << 31)) as u32).to_be_bytes().to_vec()
        }
        ("currenttime", []) => (now_us().rem_euclid(86_400_000_000) * 1000)
            .to_be_bytes()
            .to_vec(),
        ("currenttimeuuid", []) => timeuuid_now().to_vec(),
        _ => {
            return Err(invalid(format!(
                "Unknown function {name} called (hayate supports now(), uuid(), currentTimestamp(), \
                 currentDate(), currentTime(), currentTimeUUID(), toTimestamp(now()) and fromJson() in values)"
            )))
        }
    };
    validate(to.ty, &bytes).map_err(|_| {
        invalid(format!(
            "Type error: cannot assign result of function {name} to {} of type {}",
            to.name, to.ty
        ))
    })?;
    Ok(Evaluated::Bytes(bytes))
}

/// `fromJson(text)`: the JSON text decoded as a value of the receiver's type. A null argument
/// gives null; text that is not JSON, or not JSON of the type, fails the function, as in
/// Cassandra.
fn from_json(args: &[Term], to: &Receiver<'_>, binds: &Binds<'_>) -> QueryResult<Evaluated> {
    let [arg] = args else {
        return Err(invalid(format!(
            "Invalid number of arguments in call to function system.fromjson: 1 required but {} provided",
            args.len()
        )));
    };
    let text = match evaluate(
        arg,
        &Receiver {
            name: "arg0(system.fromjson)",
            ty: &DataType::Text,
        },
        binds,
    )? {
        Evaluated::Bytes(b) => b,
        other => return Ok(other),
    };
    let fail = |message: String| QueryError::FunctionFailure {
        keyspace: "system".to_owned(),
        function: "fromjson".to_owned(),
        arg_types: vec!["text".to_owned()],
        message: format!("execution of 'system.fromjson[text]' failed: {message}"),
    };
    // Text arguments were validated as UTF-8 on the way in.
    let text = std::str::from_utf8(&text).map_err(|e| fail(e.to_string()))?;
    match json::from_json(to.ty, text) {
        Ok(Some(b)) => Ok(Evaluated::Bytes(b)),
        Ok(None) => Ok(Evaluated::Null),
        Err(e @ json::JsonError::Syntax { .. }) => Err(fail(format!(
            "Could not decode JSON string '{}': {e}",
            json::shown(text)
        ))),
        Err(e) => Err(fail(format!("Error decoding JSON value for {}: {e}", to.name))),
    }
}

#[cfg(test)]
mod tests {
    use hayate_cql::request::Values;
    use hayate_cql::wire::Value;

    use super::*;

    /// An empty int or bigint value is a null one to every integer receiver (LIMIT, TTL, USING
    /// TIMESTAMP, a list index, a token), as it was before they shared one decoder.
    #[test]
    fn an_empty_integer_value_is_null_and_others_decode_by_their_type() {
        let markers = vec![BindMarker { name: None }; 3];
        let values = Values::Positional(vec![
            Value::Bytes(&[]),
            Value::Bytes(&[0xFF, 0xFF, 0xFF, 0xFE]),
            Value::Bytes(&[0, 0, 0, 0, 0, 0, 1, 0]),
        ]);
        let binds = Binds::new(&values, &markers, &[]).expect("binds");
        let int = |i| evaluate_integer(&Term::Marker(i), "[limit]", &DataType::Int, &binds);
        assert_eq!(int(0), Ok(Integer::Null));
        assert_eq!(int(1), Ok(Integer::Value(-2)));
        let bigint = evaluate_integer(&Term::Marker(2), "[timestamp]", &DataType::BigInt, &binds);
        assert_eq!(bigint, Ok(Integer::Value(256)));
        let empty = evaluate_integer(&Term::Marker(0), "[timestamp]", &DataType::BigInt, &binds);
        assert_eq!(empty, Ok(Integer::Null));
    }
}
