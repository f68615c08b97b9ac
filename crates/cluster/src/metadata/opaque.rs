//! Opaque byte strings in JSON (`#[serde(with = "opaque")]`): as a JSON string when they are
//! UTF-8, which the server's schema commands are, so the log stays readable; otherwise as
//! `{"hex": "…"}`. (serde_json would otherwise write an array of numbers, four times the size.)

use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serializer};

pub(crate) fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    match std::str::from_utf8(bytes) {
        Ok(text) => serializer.serialize_str(text),
        Err(_) => {
            let mut map = serializer.serialize_map(Some(1))?;
            map.serialize_entry("hex", &to_hex(bytes))?;
            map.end()
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Repr {
    Text(String),
    Hex { hex: String },
}

pub(crate) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
    match Repr::deserialize(deserializer)? {
        Repr::Text(text) => Ok(text.into_bytes()),
        Repr::Hex { hex } => {
            from_hex(&hex).ok_or_else(|| serde::de::Error::custom("opaque bytes: invalid hex digits"))
        }
    }
}

fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

fn from_hex(hex: &str) -> Option<Vec<u8>> {
    if hex.len() & 1 != 0 || !hex.is_ascii() {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Holder(#[serde(with = "super")] Vec<u8>);

    #[test]
    fn text_stays_text_and_binary_becomes_hex() {
        let text = Holder(b"CREATE TABLE ks.t (k int PRIMARY KEY)".to_vec());
        let json = serde_json::to_string(&text).expect("serializes");
        assert_eq!(json, "\"CREATE TABLE ks.t (k int PRIMARY KEY)\"");
        assert_eq!(serde_json::from_str::<Holder>(&json).expect("decodes"), text);

        let binary = Holder(vec![0xff, 0x00, 0x7f, 0x80]);
        let json = serde_json::to_string(&binary).expect("serializes");
        assert_eq!(json, "{\"hex\":\"ff007f80\"}");
        assert_eq!(serde_json::from_str::<Holder>(&json).expect("decodes"), binary);

        assert!(serde_json::from_str::<Holder>("{\"hex\":\"f\"}").is_err());
    }
}
