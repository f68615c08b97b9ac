//! STARTUP (0x01): the first request of a connection. Spec section 4.1.1.
//!
//! Body: a [string map] of options. `CQL_VERSION` is mandatory; `COMPRESSION` is optional;
//! drivers also send others (`DRIVER_NAME`, `DRIVER_VERSION`, ...) which are kept as sent.

use crate::wire::{read_string_map, write_string_map, DecodeError};

pub const CQL_VERSION: &str = "CQL_VERSION";
pub const COMPRESSION: &str = "COMPRESSION";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Startup<'a> {
    /// Every option, in the order the client sent them.
    pub options: Vec<(&'a str, &'a str)>,
}

impl<'a> Startup<'a> {
    /// Decodes the body; fails if `CQL_VERSION` is missing, as Cassandra does.
    pub fn decode(buf: &mut &'a [u8]) -> Result<Startup<'a>, DecodeError> {
        let startup = Startup {
            options: read_string_map(buf)?,
        };
        if startup.option(CQL_VERSION).is_none() {
            return Err(DecodeError::Missing {
                what: "CQL_VERSION in STARTUP options",
            });
        }
        Ok(startup)
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        write_string_map(out, &self.options);
    }

    /// The value of an option; keys are matched exactly, as Cassandra does.
    pub fn option(&self, key: &str) -> Option<&'a str> {
        self.options.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    pub fn cql_version(&self) -> Option<&'a str> {
        self.option(CQL_VERSION)
    }

    pub fn compression(&self) -> Option<&'a str> {
        self.option(COMPRESSION)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_round_trip_and_cql_version_is_required() {
        let s = Startup {
            options: vec![("CQL_VERSION", "3.0.0"), ("COMPRESSION", "lz4")],
        };
        let mut out = Vec::new();
        s.encode(&mut out);
        let decoded = Startup::decode(&mut out.as_slice()).expect("decodes");
        assert_eq!(decoded, s);
        assert_eq!(decoded.cql_version(), Some("3.0.0"));
        assert_eq!(decoded.compression(), Some("lz4"));
        for cut in 0..out.len() {
            assert!(Startup::decode(&mut &out[..cut]).is_err());
        }
        let mut out = Vec::new();
        Startup {
            options: vec![("DRIVER_NAME", "x")],
        }
        .encode(&mut out);
        assert!(matches!(
            Startup::decode(&mut out.as_slice()),
            Err(DecodeError::Missing { .. })
        ));
    }
}
