//! REGISTER (0x0B): subscribe this connection to server-pushed events. Spec section 4.1.8.
//!
//! Body: a [string list] of event types. The answer is READY.

use crate::wire::{read_string_list, write_string_list, DecodeError};

/// The event types of spec section 4.2.6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    TopologyChange,
    StatusChange,
    SchemaChange,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::TopologyChange => "TOPOLOGY_CHANGE",
            EventType::StatusChange => "STATUS_CHANGE",
            EventType::SchemaChange => "SCHEMA_CHANGE",
        }
    }

    pub fn parse(s: &str) -> Result<EventType, DecodeError> {
        match s {
            "TOPOLOGY_CHANGE" => Ok(EventType::TopologyChange),
            "STATUS_CHANGE" => Ok(EventType::StatusChange),
            "SCHEMA_CHANGE" => Ok(EventType::SchemaChange),
            other => Err(DecodeError::InvalidName {
                what: "event type",
                value: other.to_owned(),
            }),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Register {
    pub event_types: Vec<EventType>,
}

impl Register {
    pub fn decode(buf: &mut &[u8]) -> Result<Register, DecodeError> {
        let names = read_string_list(buf)?;
        let event_types = names
            .into_iter()
            .map(EventType::parse)
            .collect::<Result<_, _>>()?;
        Ok(Register { event_types })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let names: Vec<&str> = self.event_types.iter().map(|e| e.as_str()).collect();
        write_string_list(out, &names);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_event_types_round_trip_and_others_are_refused() {
        let r = Register {
            event_types: vec![
                EventType::TopologyChange,
                EventType::StatusChange,
                EventType::SchemaChange,
            ],
        };
        let mut out = Vec::new();
        r.encode(&mut out);
        assert_eq!(Register::decode(&mut out.as_slice()), Ok(r));
        for cut in 0..out.len() {
            assert!(Register::decode(&mut &out[..cut]).is_err());
        }
        let mut out = Vec::new();
        write_string_list(&mut out, &["KEYSPACE_CHANGE"]);
        assert!(matches!(
            Register::decode(&mut out.as_slice()),
            Err(DecodeError::InvalidName { .. })
        ));
    }
}
