//! EVENT (0x0C): a server push on stream -1 to connections that REGISTERed. Spec 4.2.6.
//!
//! Body: `<event_type: [string]>` then, for TOPOLOGY_CHANGE and STATUS_CHANGE,
//! `<change: [string]><address: [inet]>`, and for SCHEMA_CHANGE a [`SchemaChange`] (the same
//! layout as the Schema_change RESULT, spec 4.2.5.5).

use std::net::SocketAddr;

use crate::request::register::EventType;
use crate::wire::{
    read_inet, read_string, read_string_list, write_inet, write_string, write_string_list, DecodeError,
};

/// The stream id of every EVENT frame (spec section 2.3).
pub const EVENT_STREAM: i16 = -1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeType {
    Created,
    Updated,
    Dropped,
}

impl ChangeType {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeType::Created => "CREATED",
            ChangeType::Updated => "UPDATED",
            ChangeType::Dropped => "DROPPED",
        }
    }

    /// The change type named by its wire text (`as_str`'s inverse).
    pub fn parse(s: &str) -> Result<ChangeType, DecodeError> {
        match s {
            "CREATED" => Ok(ChangeType::Created),
            "UPDATED" => Ok(ChangeType::Updated),
            "DROPPED" => Ok(ChangeType::Dropped),
            other => Err(DecodeError::InvalidName {
                what: "schema change type",
                value: other.to_owned(),
            }),
        }
    }
}

/// What a schema change touched, with the options its target carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaTarget {
    Keyspace {
        keyspace: String,
    },
    Table {
        keyspace: String,
        table: String,
    },
    Type {
        keyspace: String,
        type_name: String,
    },
    Function {
        keyspace: String,
        function: String,
        arg_types: Vec<String>,
    },
    Aggregate {
        keyspace: String,
        aggregate: String,
        arg_types: Vec<String>,
    },
}

/// `<change_type><target><options>`, shared by the EVENT and the RESULT of a DDL statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaChange {
    pub change_type: ChangeType,
    pub target: SchemaTarget,
}

impl SchemaChange {
    pub fn encode(&self, out: &mut Vec<u8>) {
        write_string(out, self.change_type.as_str());
        match &self.target {
            SchemaTarget::Keyspace { keyspace } => {
                write_string(out, "KEYSPACE");
                write_string(out, keyspace);
            }
            SchemaTarget::Table { keyspace, table } => {
                write_string(out, "TABLE");
                write_string(out, keyspace);
                write_string(out, table);
            }
            SchemaTarget::Type { keyspace, type_name } => {
                write_string(out, "TYPE");
                write_string(out, keyspace);
                write_string(out, type_name);
            }
            SchemaTarget::Function {
                keyspace,
                function,
                arg_types,
            } => {
                write_string(out, "FUNCTION");
                write_string(out, keyspace);
                write_string(out, function);
                write_string_list(out, arg_types);
            }
            SchemaTarget::Aggregate {
                keyspace,
                aggregate,
                arg_types,
            } => {
                write_string(out, "AGGREGATE");
                write_string(out, keyspace);
                write_string(out, aggregate);
                write_string_list(out, arg_types);
            }
        }
    }

    pub fn decode(buf: &mut &[u8]) -> Result<SchemaChange, DecodeError> {
        let change_type = ChangeType::parse(read_string(buf)?)?;
        let owned = |s: &str| s.to_owned();
        let list = |v: Vec<&str>| v.into_iter().map(str::to_owned).collect();
        let target = match read_string(buf)? {
            "KEYSPACE" => SchemaTarget::Keyspace {
                keyspace: owned(read_string(buf)?),
            },
            "TABLE" => SchemaTarget::Table {
                keyspace: owned(read_string(buf)?),
                table: owned(read_string(buf)?),
            },
            "TYPE" => SchemaTarget::Type {
                keyspace: owned(read_string(buf)?),
                type_name: owned(read_string(buf)?),
            },
            "FUNCTION" => SchemaTarget::Function {
                keyspace: owned(read_string(buf)?),
                function: owned(read_string(buf)?),
                arg_types: list(read_string_list(buf)?),
            },
            "AGGREGATE" => SchemaTarget::Aggregate {
                keyspace: owned(read_string(buf)?),
                aggregate: owned(read_string(buf)?),
                arg_types: list(read_string_list(buf)?),
            },
            other => {
                return Err(DecodeError::InvalidName {
                    what: "schema change target",
                    value: other.to_owned(),
                })
            }
        };
        Ok(SchemaChange { change_type, target })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopologyChange {
    NewNode,
    RemovedNode,
    /// A node's tokens changed (the protocol's `MOVED_NODE`).
    MovedNode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusChange {
    Up,
    Down,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    TopologyChange {
        change: TopologyChange,
        address: SocketAddr,
    },
    StatusChange {
        change: StatusChange,
        address: SocketAddr,
    },
    SchemaChange(SchemaChange),
}

impl Event {
    pub fn event_type(&self) -> EventType {
        match self {
            Event::TopologyChange { .. } => EventType::TopologyChange,
            Event::StatusChange { .. } => EventType::StatusChange,
            Event::SchemaChange(_) => EventType::SchemaChange,
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        write_string(out, self.event_type().as_str());
        match self {
            Event::TopologyChange { change, address } => {
                write_string(
                    out,
                    match change {
                        TopologyChange::NewNode => "NEW_NODE",
                        TopologyChange::RemovedNode => "REMOVED_NODE",
                        TopologyChange::MovedNode => "MOVED_NODE",
                    },
                );
                write_inet(out, *address);
            }
            Event::StatusChange { change, address } => {
                write_string(
                    out,
                    match change {
                        StatusChange::Up => "UP",
                        StatusChange::Down => "DOWN",
                    },
                );
                write_inet(out, *address);
            }
            Event::SchemaChange(change) => change.encode(out),
        }
    }

    pub fn decode(buf: &mut &[u8]) -> Result<Event, DecodeError> {
        match EventType::parse(read_string(buf)?)? {
            EventType::TopologyChange => {
                let change = match read_string(buf)? {
                    "NEW_NODE" => TopologyChange::NewNode,
                    "REMOVED_NODE" => TopologyChange::RemovedNode,
                    "MOVED_NODE" => TopologyChange::MovedNode,
                    other => {
                        return Err(DecodeError::InvalidName {
                            what: "topology change",
                            value: other.to_owned(),
                        })
                    }
                };
                Ok(Event::TopologyChange {
                    change,
                    address: read_inet(buf)?,
                })
            }
            EventType::StatusChange => {
                let change = match read_string(buf)? {
                    "UP" => StatusChange::Up,
                    "DOWN" => StatusChange::Down,
                    other => {
                        return Err(DecodeError::InvalidName {
                            what: "status change",
                            value: other.to_owned(),
                        })
                    }
                };
                Ok(Event::StatusChange {
                    change,
                    address: read_inet(buf)?,
                })
            }
            EventType::SchemaChange => Ok(Event::SchemaChange(SchemaChange::decode(buf)?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_round_trips_and_rejects_truncation() {
        let addr: SocketAddr = "127.0.0.3:9042".parse().expect("addr");
        let events = [
            Event::TopologyChange {
                change: TopologyChange::NewNode,
                address: addr,
            },
            Event::TopologyChange {
                change: TopologyChange::MovedNode,
                address: addr,
            },
            Event::TopologyChange {
                change: TopologyChange::RemovedNode,
                address: addr,
            },
            Event::StatusChange {
                change: StatusChange::Down,
                address: addr,
            },
            Event::SchemaChange(SchemaChange {
                change_type: ChangeType::Created,
                target: SchemaTarget::Keyspace {
                    keyspace: "ks".into(),
                },
            }),
            Event::SchemaChange(SchemaChange {
                change_type: ChangeType::Updated,
                target: SchemaTarget::Table {
                    keyspace: "ks".into(),
                    table: "t".into(),
                },
            }),
            Event::SchemaChange(SchemaChange {
                change_type: ChangeType::Dropped,
                target: SchemaTarget::Function {
                    keyspace: "ks".into(),
                    function: "f".into(),
                    arg_types: vec!["int".into(), "text".into()],
                },
            }),
        ];
        for e in events {
            let mut out = Vec::new();
            e.encode(&mut out);
            assert_eq!(Event::decode(&mut out.as_slice()), Ok(e.clone()));
            for cut in 0..out.len() {
                assert!(
                    Event::decode(&mut &out[..cut]).is_err(),
                    "{e:?} accepted {cut} bytes"
                );
            }
        }
    }
}
