//! SUPPORTED (0x06): the answer to OPTIONS. Spec section 4.2.4.
//!
//! Body: a [string multimap] from each STARTUP option to its supported values. Drivers read
//! `CQL_VERSION` and `COMPRESSION` from it; Cassandra 4 also sends `PROTOCOL_VERSIONS`.

use crate::wire::{read_string_multimap, write_string_multimap, DecodeError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Supported {
    pub options: Vec<(String, Vec<String>)>,
}

impl Supported {
    /// What hayate supports: CQL 3, protocol v4, LZ4 and Snappy compression.
    pub fn hayate() -> Supported {
        Supported {
            options: vec![
                ("CQL_VERSION".to_owned(), vec!["3.4.5".to_owned()]),
                (
                    "COMPRESSION".to_owned(),
                    vec!["lz4".to_owned(), "snappy".to_owned()],
                ),
                (
                    "PROTOCOL_VERSIONS".to_owned(),
                    vec!["4/v4".to_owned(), "5/v5".to_owned()],
                ),
            ],
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        write_string_multimap(out, &self.options);
    }

    pub fn decode(buf: &mut &[u8]) -> Result<Supported, DecodeError> {
        let options = read_string_multimap(buf)?
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
            .collect();
        Ok(Supported { options })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hayates_options_round_trip() {
        let s = Supported::hayate();
        let mut out = Vec::new();
        s.encode(&mut out);
        assert_eq!(Supported::decode(&mut out.as_slice()), Ok(s));
    }
}
