//! The Paxos messages' payloads (frame version 5 on), and the replica's Paxos state record,
//! which is built of the same parts. `docs/internode-protocol.md` draws both.
//!
//! ```text
//! ballot    = micros i64 | node u64
//! proposal  = ballot | count u32 | mutation*             (mutations as in a MutationRequest)
//! request   = 0 prepare | ballot | partition read command
//!           | 1 propose | table u32 | token i64 | key | proposal
//!           | 2 commit  | table u32 | token i64 | key | proposal
//! reply     = 0 ok | tag u8 | ...  or  1 error | replica error
//!   tag 0 promised  | accepted? (bool, proposal) | committed? (bool, proposal) | data reply
//!   tag 1 refused   | promised ballot
//!   tag 2 accepted
//!   tag 3 committed
//! state     = format u8 (1) | promised ballot | accepted? | committed?
//! ```

use std::sync::Arc;

use super::payload::{
    get_command, get_mutations, get_replica_error, get_reply, put_command, put_mutations, put_replica_error,
    put_reply,
};
use super::row::{get_key, put_key};
use super::wire::{put_bool, put_i64, put_u32, put_u64, put_u8, Reader};
use super::{DecodeError, EncodeError, ReadReply, VERSION};
use crate::paxos::acceptor::PaxosState;
use crate::paxos::{Ballot, PaxosKey, PaxosReply, PaxosRequest, Proposal};
use crate::replica::{ReadCommand, ReplicaError};

const PREPARE: u8 = 0;
const PROPOSE: u8 = 1;
const COMMIT: u8 = 2;
const PROMISED: u8 = 0;
const REFUSED: u8 = 1;
const ACCEPTED: u8 = 2;
const COMMITTED: u8 = 3;
const RESULT_OK: u8 = 0;
const RESULT_ERROR: u8 = 1;
/// The state record's format.
const STATE_FORMAT: u8 = 1;

fn put_ballot(out: &mut Vec<u8>, b: Ballot) {
    put_i64(out, b.micros);
    put_u64(out, b.node);
}

fn get_ballot(r: &mut Reader<'_>) -> Result<Ballot, DecodeError> {
    Ok(Ballot {
        micros: r.i64("ballot time")?,
        node: r.u64("ballot node")?,
    })
}

fn put_proposal(out: &mut Vec<u8>, p: &Proposal, version: u8) -> Result<(), EncodeError> {
    put_ballot(out, p.ballot);
    put_mutations(out, &p.update, version)
}

fn get_proposal(r: &mut Reader<'_>, version: u8) -> Result<Proposal, DecodeError> {
    Ok(Proposal {
        ballot: get_ballot(r)?,
        update: Arc::new(get_mutations(r, version)?),
    })
}

fn put_optional_proposal(out: &mut Vec<u8>, p: Option<&Proposal>, version: u8) -> Result<(), EncodeError> {
    put_bool(out, p.is_some());
    match p {
        Some(p) => put_proposal(out, p, version),
        None => Ok(()),
    }
}

fn get_optional_proposal(r: &mut Reader<'_>, version: u8) -> Result<Option<Proposal>, DecodeError> {
    match r.bool("proposal flag")? {
        true => Ok(Some(get_proposal(r, version)?)),
        false => Ok(None),
    }
}

fn put_key_of(out: &mut Vec<u8>, key: &PaxosKey) -> Result<(), EncodeError> {
    put_u32(out, key.table);
    put_i64(out, key.token);
    put_key(out, "partition key", &key.partition)
}

fn get_key_of(r: &mut Reader<'_>) -> Result<PaxosKey, DecodeError> {
    Ok(PaxosKey {
        table: r.u32("table")?,
        token: r.i64("token")?,
        partition: get_key(r, "partition key")?,
    })
}

pub(super) fn put_request(out: &mut Vec<u8>, request: &PaxosRequest, version: u8) -> Result<(), EncodeError> {
    match request {
        PaxosRequest::Prepare { ballot, read } => {
            put_u8(out, PREPARE);
            put_ballot(out, *ballot);
            put_command(out, &ReadCommand::Partition(read.clone()))?;
        }
        PaxosRequest::Propose { key, proposal } | PaxosRequest::Commit { key, proposal } => {
            let tag = match request {
                PaxosRequest::Propose { .. } => PROPOSE,
                _ => COMMIT,
            };
            put_u8(out, tag);
            put_key_of(out, key)?;
            put_proposal(out, proposal, version)?;
        }
    }
    Ok(())
}

pub(super) fn get_request(r: &mut Reader<'_>, version: u8) -> Result<PaxosRequest, DecodeError> {
    Ok(match r.u8("paxos request tag")? {
        PREPARE => {
            let ballot = get_ballot(r)?;
            match get_command(r)? {
                ReadCommand::Partition(read) => PaxosRequest::Prepare { ballot, read },
                ReadCommand::Range(_) => {
                    return Err(DecodeError::BadTag {
                        what: "paxos prepare read (a range read)",
                        tag: 1,
                    })
                }
            }
        }
        PROPOSE => PaxosRequest::Propose {
            key: get_key_of(r)?,
            proposal: get_proposal(r, version)?,
        },
        COMMIT => PaxosRequest::Commit {
            key: get_key_of(r)?,
            proposal: get_proposal(r, version)?,
        },
        tag => {
            return Err(DecodeError::BadTag {
                what: "paxos request tag",
                tag,
            })
        }
    })
}

pub(super) fn put_result(
    out: &mut Vec<u8>,
    result: &Result<PaxosReply, ReplicaError>,
    version: u8,
) -> Result<(), EncodeError> {
    let reply = match result {
        Ok(reply) => reply,
        Err(e) => {
            put_u8(out, RESULT_ERROR);
            put_replica_error(out, e);
            return Ok(());
        }
    };
    put_u8(out, RESULT_OK);
    match reply {
        PaxosReply::Promised {
            accepted,
            committed,
            data,
        } => {
            put_u8(out, PROMISED);
            put_optional_proposal(out, accepted.as_ref(), version)?;
            put_optional_proposal(out, committed.as_ref(), version)?;
            put_reply(out, &ReadReply::Data(data.clone()), version)?;
        }
        PaxosReply::Refused { promised } => {
            put_u8(out, REFUSED);
            put_ballot(out, *promised);
        }
        PaxosReply::Accepted => put_u8(out, ACCEPTED),
        PaxosReply::Committed => put_u8(out, COMMITTED),
    }
    Ok(())
}

pub(super) fn get_result(
    r: &mut Reader<'_>,
    version: u8,
) -> Result<Result<PaxosReply, ReplicaError>, DecodeError> {
    match r.u8("result tag")? {
        RESULT_OK => {}
        RESULT_ERROR => return Ok(Err(get_replica_error(r)?)),
        tag => {
            return Err(DecodeError::BadTag {
                what: "result tag",
                tag,
            })
        }
    }
    Ok(Ok(match r.u8("paxos reply tag")? {
        PROMISED => {
            let accepted = get_optional_proposal(r, version)?;
            let committed = get_optional_proposal(r, version)?;
            let data = match get_reply(r, version)? {
                ReadReply::Data(data) => data,
                ReadReply::Digest { .. } => {
                    return Err(DecodeError::BadTag {
                        what: "paxos promise data (a digest)",
                        tag: 1,
                    })
                }
            };
            PaxosReply::Promised {
                accepted,
                committed,
                data,
            }
        }
        REFUSED => PaxosReply::Refused {
            promised: get_ballot(r)?,
        },
        ACCEPTED => PaxosReply::Accepted,
        COMMITTED => PaxosReply::Committed,
        tag => {
            return Err(DecodeError::BadTag {
                what: "paxos reply tag",
                tag,
            })
        }
    }))
}

/// A replica's Paxos state as its record stores it (mutations in this build's row format).
pub fn encode_state(state: &PaxosState) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    put_u8(&mut out, STATE_FORMAT);
    put_ballot(&mut out, state.promised);
    put_optional_proposal(&mut out, state.accepted.as_ref(), VERSION)?;
    put_optional_proposal(&mut out, state.committed.as_ref(), VERSION)?;
    Ok(out)
}

pub fn decode_state(bytes: &[u8]) -> Result<PaxosState, DecodeError> {
    let mut r = Reader::new(bytes);
    match r.u8("paxos state format")? {
        STATE_FORMAT => {}
        tag => {
            return Err(DecodeError::BadTag {
                what: "paxos state format",
                tag,
            })
        }
    }
    let state = PaxosState {
        promised: get_ballot(&mut r)?,
        accepted: get_optional_proposal(&mut r, VERSION)?,
        committed: get_optional_proposal(&mut r, VERSION)?,
    };
    if r.remaining() > 0 {
        return Err(DecodeError::TrailingBytes {
            what: "paxos state",
            bytes: r.remaining(),
        });
    }
    Ok(state)
}
