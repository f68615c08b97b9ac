//! The payload of each message kind, after the frame header: encode and decode.
//!
//! `docs/internode-protocol.md` draws every payload byte by byte (section 4) and the row and
//! tombstones formats they carry (sections 5 and 6); change the two together. Rows and
//! tombstones travel in the format of `row.rs` from frame version 4 on, and in
//! the frozen layout of `row_v1.rs` to a peer that speaks only an older version. A stream
//! chunk is the one exception to "the wire has its own format": it carries the storage engine's
//! records as they are on purpose, since the receiver imports them into its engine whole.
//!
//! Booleans are 0 or 1; any other byte is refused, as is any unknown tag and any byte left over
//! at the end of the payload.

use std::ops::Bound;
use std::sync::Arc;

use hayate_storage::Row;

use super::row::{get_bound, get_deletion, get_key, put_bound, put_deletion, put_key};
use super::wire::{put_bool, put_i64, put_u32, put_u64, put_u8, Reader};
use super::{paxos, VERSION_PAXOS};
use super::{
    row, row_v1, DecodeError, EncodeError, Kind, Message, ReadReply, RequestId, ENCODED_ITEM_BYTES_MIN,
    ERROR_MESSAGE_BYTES_MAX, FRAME_BYTES_MAX, MUTATIONS_PER_MESSAGE_MAX, ROWS_PER_MESSAGE_MAX, VERSION_ROWS,
    VERSION_STREAMS,
};
use crate::counter::CounterUpdate;
use crate::paxos::PaxosReply;
use crate::replica::{
    IndexRead, Mutation, MutationKind, PartitionRead, RangeRead, RangeSize, RangeStart, ReadCommand,
    ReadResponse, ReplicaError, ReplicaErrorKind, ReplicaRow, ReplicaTombstones, RowPosition, StreamChunk,
    StreamRequest, STREAM_CHUNK_BYTES_MAX, STREAM_POSITION_BYTES, STREAM_REQUEST_BYTES_MAX,
};
use crate::ring::TokenRange;
use hayate_storage::TermRange;

const MUTATION_ROW: u8 = 0;
const MUTATION_DELETE_RANGE: u8 = 1;
const RESULT_OK: u8 = 0;
const RESULT_ERROR: u8 = 1;
const COMMAND_PARTITION: u8 = 0;
const COMMAND_RANGE: u8 = 1;
/// A range read by a secondary index: a range read's fields, then the index and its terms.
const COMMAND_INDEXED_RANGE: u8 = 2;
const START_TOKEN: u8 = 0;
const START_AFTER: u8 = 1;
const REPLY_DATA: u8 = 0;
const REPLY_DIGEST: u8 = 1;
const ERROR_REFUSED: u8 = 0;
const ERROR_INVALID: u8 = 1;
const ERROR_FAILED: u8 = 2;
const ERROR_UNREACHABLE: u8 = 3;

/// Appends the payload of `message`.
pub(super) fn encode(message: &Message, version: u8, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let kind = message.kind();
    if (kind as u8) >= Kind::StreamRequest as u8 && version < VERSION_STREAMS
        || (kind as u8) >= Kind::PaxosRequest as u8 && version < VERSION_PAXOS
    {
        return Err(EncodeError::NotInVersion { kind, version });
    }
    match message {
        Message::MutationRequest { mutations, .. } => put_mutations(out, mutations, version)?,
        Message::MutationResponse { result, .. } => match result {
            Ok(()) => put_u8(out, RESULT_OK),
            Err(e) => {
                put_u8(out, RESULT_ERROR);
                put_replica_error(out, e);
            }
        },
        Message::ReadRequest {
            command, digest_only, ..
        } => {
            put_bool(out, *digest_only);
            put_command(out, command)?;
        }
        Message::ReadResponse { result, .. } => match result {
            Ok(reply) => {
                put_u8(out, RESULT_OK);
                put_reply(out, reply, version)?;
            }
            Err(e) => {
                put_u8(out, RESULT_ERROR);
                put_replica_error(out, e);
            }
        },
        Message::MetadataRequest { payload, .. } | Message::MetadataResponse { payload, .. } => {
            if payload.len() > FRAME_BYTES_MAX {
                return Err(EncodeError::TooLong {
                    what: "metadata payload",
                    len_bytes: payload.len(),
                    max_bytes: FRAME_BYTES_MAX,
                });
            }
            out.extend_from_slice(payload);
        }
        Message::Ping { .. } | Message::Pong { .. } => {}
        Message::StreamRequest { request, .. } => {
            if request.range.start_exclusive >= request.range.end_inclusive {
                return Err(EncodeError::TooLong {
                    what: "stream range (its start must lie below its end)",
                    len_bytes: 0,
                    max_bytes: 0,
                });
            }
            put_u32(out, request.table);
            put_i64(out, request.range.start_exclusive);
            put_i64(out, request.range.end_inclusive);
            put_stream_position(out, request.after.as_ref());
            put_u32(out, request.max_bytes.min(STREAM_REQUEST_BYTES_MAX as u32));
        }
        Message::StreamResponse { result, .. } => match result {
            Ok(chunk) => {
                if chunk.bytes.len() > STREAM_CHUNK_BYTES_MAX {
                    return Err(EncodeError::TooLong {
                        what: "stream chunk",
                        len_bytes: chunk.bytes.len(),
                        max_bytes: STREAM_CHUNK_BYTES_MAX,
                    });
                }
                put_u8(out, RESULT_OK);
                put_u64(out, chunk.records);
                put_u64(out, chunk.data_bytes);
                put_stream_position(out, chunk.next.as_ref());
                put_bool(out, chunk.total.is_some());
                if let Some(total) = chunk.total {
                    put_u64(out, total.records);
                    put_u64(out, total.bytes);
                }
                put_u32(out, chunk.bytes.len() as u32);
                out.extend_from_slice(&chunk.bytes);
            }
            Err(e) => {
                put_u8(out, RESULT_ERROR);
                put_replica_error(out, e);
            }
        },
        Message::TopologyRequest { payload, .. } | Message::TopologyResponse { payload, .. } => {
            if payload.len() > TOPOLOGY_PAYLOAD_BYTES_MAX {
                return Err(EncodeError::TooLong {
                    what: "topology payload",
                    len_bytes: payload.len(),
                    max_bytes: TOPOLOGY_PAYLOAD_BYTES_MAX,
                });
            }
            out.extend_from_slice(payload);
        }
        Message::PaxosRequest { request, .. } => paxos::put_request(out, request, version)?,
        Message::PaxosResponse { result, .. } => paxos::put_result(out, result, version)?,
        Message::CounterRequest {
            timestamp_us,
            updates,
            ..
        } => {
            check_count("counter updates", updates.len(), MUTATIONS_PER_MESSAGE_MAX)?;
            put_i64(out, *timestamp_us);
            put_u32(out, updates.len() as u32);
            for u in updates {
                put_u32(out, u.table);
                put_i64(out, u.token);
                put_key(out, "partition key", &u.partition)?;
                put_key(out, "clustering key", &u.clustering)?;
                put_u32(out, u.column);
                put_i64(out, u.delta);
            }
        }
        Message::CounterResponse { result, .. } => match result {
            Ok(mutations) => {
                put_u8(out, RESULT_OK);
                put_mutations(out, mutations, version)?;
            }
            Err(e) => {
                put_u8(out, RESULT_ERROR);
                put_replica_error(out, e);
            }
        },
    }
    Ok(())
}

/// The largest topology control message: a list of ranges to fetch for a ring of many nodes.
pub const TOPOLOGY_PAYLOAD_BYTES_MAX: usize = 16 << 20;

fn put_stream_position(out: &mut Vec<u8>, position: Option<&[u8; STREAM_POSITION_BYTES]>) {
    put_bool(out, position.is_some());
    if let Some(p) = position {
        out.extend_from_slice(p);
    }
}

fn get_stream_position(
    r: &mut Reader<'_>,
    what: &'static str,
) -> Result<Option<[u8; STREAM_POSITION_BYTES]>, DecodeError> {
    if !r.bool(what)? {
        return Ok(None);
    }
    let mut p = [0u8; STREAM_POSITION_BYTES];
    p.copy_from_slice(r.take(STREAM_POSITION_BYTES, what)?);
    Ok(Some(p))
}

fn get_stream_request(r: &mut Reader<'_>) -> Result<StreamRequest, DecodeError> {
    let table = r.u32("stream table")?;
    let start_exclusive = r.i64("stream range start")?;
    let end_inclusive = r.i64("stream range end")?;
    if start_exclusive >= end_inclusive {
        return Err(DecodeError::BadTag {
            what: "stream range (its start lies at or above its end)",
            tag: 0,
        });
    }
    let after = get_stream_position(r, "stream resume position")?;
    let max_bytes = r.u32("stream chunk bytes")?;
    if max_bytes as usize > STREAM_REQUEST_BYTES_MAX {
        return Err(DecodeError::TooLong {
            what: "stream chunk asked for",
            len_bytes: u64::from(max_bytes),
            max_bytes: STREAM_REQUEST_BYTES_MAX as u64,
        });
    }
    Ok(StreamRequest {
        table,
        range: TokenRange {
            start_exclusive,
            end_inclusive,
        },
        after,
        max_bytes,
    })
}

fn get_stream_chunk(r: &mut Reader<'_>) -> Result<StreamChunk, DecodeError> {
    let records = r.u64("stream records")?;
    let data_bytes = r.u64("stream data bytes")?;
    let next = get_stream_position(r, "stream next position")?;
    let total = match r.bool("stream total flag")? {
        true => Some(RangeSize {
            records: r.u64("stream total records")?,
            bytes: r.u64("stream total bytes")?,
        }),
        false => None,
    };
    let bytes = r.bytes_u32("stream chunk", STREAM_CHUNK_BYTES_MAX)?.to_vec();
    Ok(StreamChunk {
        bytes,
        records,
        data_bytes,
        next,
        total,
    })
}

/// Decodes the payload of a frame of `kind`; `payload` is all of it.
pub(super) fn decode(kind: Kind, id: RequestId, version: u8, payload: &[u8]) -> Result<Message, DecodeError> {
    let mut r = Reader::new(payload);
    let message = match kind {
        Kind::MutationRequest => Message::MutationRequest {
            id,
            mutations: Arc::new(get_mutations(&mut r, version)?),
        },
        Kind::MutationResponse => Message::MutationResponse {
            id,
            result: match r.u8("mutation result tag")? {
                RESULT_OK => Ok(()),
                RESULT_ERROR => Err(get_replica_error(&mut r)?),
                tag => {
                    return Err(DecodeError::BadTag {
                        what: "mutation result tag",
                        tag,
                    })
                }
            },
        },
        Kind::ReadRequest => {
            let digest_only = r.bool("digest only flag")?;
            let command = get_command(&mut r)?;
            Message::ReadRequest {
                id,
                command,
                digest_only,
            }
        }
        Kind::ReadResponse => Message::ReadResponse {
            id,
            result: match r.u8("read result tag")? {
                RESULT_OK => Ok(get_reply(&mut r, version)?),
                RESULT_ERROR => Err(get_replica_error(&mut r)?),
                tag => {
                    return Err(DecodeError::BadTag {
                        what: "read result tag",
                        tag,
                    })
                }
            },
        },
        Kind::MetadataRequest => Message::MetadataRequest {
            id,
            payload: r.take_rest().to_vec(),
        },
        Kind::MetadataResponse => Message::MetadataResponse {
            id,
            payload: r.take_rest().to_vec(),
        },
        Kind::Ping => Message::Ping { id },
        Kind::Pong => Message::Pong { id },
        Kind::StreamRequest => Message::StreamRequest {
            id,
            request: get_stream_request(&mut r)?,
        },
        Kind::StreamResponse => Message::StreamResponse {
            id,
            result: match r.u8("stream result tag")? {
                RESULT_OK => Ok(get_stream_chunk(&mut r)?),
                RESULT_ERROR => Err(get_replica_error(&mut r)?),
                tag => {
                    return Err(DecodeError::BadTag {
                        what: "stream result tag",
                        tag,
                    })
                }
            },
        },
        Kind::TopologyRequest | Kind::TopologyResponse => {
            let payload = r.take_rest();
            if payload.len() > TOPOLOGY_PAYLOAD_BYTES_MAX {
                return Err(DecodeError::TooLong {
                    what: "topology payload",
                    len_bytes: payload.len() as u64,
                    max_bytes: TOPOLOGY_PAYLOAD_BYTES_MAX as u64,
                });
            }
            let payload = payload.to_vec();
            match kind {
                Kind::TopologyRequest => Message::TopologyRequest { id, payload },
                _ => Message::TopologyResponse { id, payload },
            }
        }
        Kind::PaxosRequest => Message::PaxosRequest {
            id,
            request: paxos::get_request(&mut r, version)?,
        },
        Kind::PaxosResponse => Message::PaxosResponse {
            id,
            result: paxos::get_result(&mut r, version)?,
        },
        Kind::CounterRequest => {
            let timestamp_us = r.i64("timestamp")?;
            let n = r.count_u32("counter updates", MUTATIONS_PER_MESSAGE_MAX)?;
            let mut updates = Vec::with_capacity(n.min(r.remaining() / ENCODED_ITEM_BYTES_MIN));
            for _ in 0..n {
                updates.push(CounterUpdate {
                    table: r.u32("table")?,
                    token: r.i64("token")?,
                    partition: get_key(&mut r, "partition key")?,
                    clustering: get_key(&mut r, "clustering key")?,
                    column: r.u32("column")?,
                    delta: r.i64("delta")?,
                });
            }
            Message::CounterRequest {
                id,
                timestamp_us,
                updates,
            }
        }
        Kind::CounterResponse => Message::CounterResponse {
            id,
            result: match r.u8("counter result tag")? {
                RESULT_OK => Ok(get_mutations(&mut r, version)?),
                RESULT_ERROR => Err(get_replica_error(&mut r)?),
                tag => {
                    return Err(DecodeError::BadTag {
                        what: "counter result tag",
                        tag,
                    })
                }
            },
        },
    };
    if r.remaining() != 0 {
        return Err(DecodeError::TrailingBytes {
            what: "payload",
            bytes: r.remaining(),
        });
    }
    Ok(message)
}

/// About how many payload bytes `message` encodes to (see [`Message::size_hint_bytes`]).
pub(super) fn size_hint_bytes(message: &Message) -> usize {
    match message {
        Message::MutationRequest { mutations, .. } => mutations_size_hint_bytes(mutations),
        Message::ReadResponse {
            result: Ok(ReadReply::Data(response)),
            ..
        } => read_data_size_hint_bytes(response),
        Message::ReadResponse { result: Ok(_), .. } => 18,
        Message::MutationResponse { result: Err(e), .. } | Message::ReadResponse { result: Err(e), .. } => {
            6 + e.message.len()
        }
        Message::MutationResponse { result: Ok(()), .. } => 1,
        Message::ReadRequest { command, .. } => match command {
            ReadCommand::Partition(p) => 40 + p.partition.len() + bound_len(&p.start) + bound_len(&p.end),
            ReadCommand::Range(r) => {
                let index = r
                    .index
                    .as_ref()
                    .map_or(0, |i| 10 + bound_len(&i.terms.start) + bound_len(&i.terms.end));
                40 + index
                    + match &r.start {
                        RangeStart::Token(_) => 0,
                        RangeStart::After(p) => p.partition.len() + p.clustering.as_ref().map_or(0, Vec::len),
                    }
            }
        },
        Message::MetadataRequest { payload, .. }
        | Message::MetadataResponse { payload, .. }
        | Message::TopologyRequest { payload, .. }
        | Message::TopologyResponse { payload, .. } => payload.len(),
        Message::Ping { .. } | Message::Pong { .. } => 0,
        Message::StreamRequest { .. } => 50,
        Message::StreamResponse {
            result: Ok(chunk), ..
        } => 80 + chunk.bytes.len(),
        Message::StreamResponse { result: Err(e), .. } => 6 + e.message.len(),
        Message::PaxosRequest { request, .. } => {
            64 + request.update().map_or(0, |u| mutations_size_hint_bytes(u))
        }
        Message::PaxosResponse { result, .. } => match result {
            Ok(PaxosReply::Promised {
                accepted,
                committed,
                data,
            }) => {
                64 + [accepted, committed]
                    .into_iter()
                    .flatten()
                    .map(|p| mutations_size_hint_bytes(&p.update))
                    .sum::<usize>()
                    + read_data_size_hint_bytes(data)
            }
            Ok(_) => 20,
            Err(e) => 6 + e.message.len(),
        },
        Message::CounterRequest { updates, .. } => {
            12 + updates
                .iter()
                .map(|u| 30 + u.partition.len() + u.clustering.len())
                .sum::<usize>()
        }
        Message::CounterResponse { result, .. } => match result {
            Ok(mutations) => 1 + mutations_size_hint_bytes(mutations),
            Err(e) => 6 + e.message.len(),
        },
    }
}

fn mutations_size_hint_bytes(mutations: &[Mutation]) -> usize {
    4 + mutations
        .iter()
        .map(|m| {
            16 + m.partition.len()
                + match &m.kind {
                    MutationKind::Row { clustering, update } => {
                        clustering.len() + row::row_size_hint_bytes(update)
                    }
                    MutationKind::DeleteRange { start, end, .. } => bound_len(start) + bound_len(end) + 16,
                }
        })
        .sum::<usize>()
}

fn read_data_size_hint_bytes(response: &ReadResponse) -> usize {
    6 + response
        .rows
        .iter()
        .map(|r| 20 + r.partition.len() + r.clustering.len() + row::row_size_hint_bytes(&r.row))
        .sum::<usize>()
        + response
            .tombstones
            .iter()
            .map(|t| 24 + t.partition.len() + 32 * (1 + t.tombstones.ranges.len()))
            .sum::<usize>()
}

fn bound_len(b: &Bound<Vec<u8>>) -> usize {
    match b {
        Bound::Unbounded => 1,
        Bound::Included(k) | Bound::Excluded(k) => 3 + k.len(),
    }
}

fn check_count(what: &'static str, count: usize, max: usize) -> Result<(), EncodeError> {
    if count > max {
        return Err(EncodeError::TooMany { what, count, max });
    }
    Ok(())
}

/// A row in the format of the frame's `version`.
fn put_row(out: &mut Vec<u8>, r: &Row, version: u8) -> Result<(), EncodeError> {
    if version >= VERSION_ROWS {
        return row::put_row(out, r);
    }
    row_v1::put_row(out, r);
    Ok(())
}

fn get_row(r: &mut Reader<'_>, version: u8) -> Result<Row, DecodeError> {
    if version >= VERSION_ROWS {
        return row::get_row(r);
    }
    row_v1::get_row(r)
}

pub(super) fn put_mutation(out: &mut Vec<u8>, m: &Mutation, version: u8) -> Result<(), EncodeError> {
    put_u32(out, m.table);
    put_i64(out, m.token);
    put_key(out, "partition key", &m.partition)?;
    match &m.kind {
        MutationKind::Row { clustering, update } => {
            put_u8(out, MUTATION_ROW);
            put_key(out, "clustering key", clustering)?;
            put_row(out, update, version)?;
        }
        MutationKind::DeleteRange { start, end, deletion } => {
            put_u8(out, MUTATION_DELETE_RANGE);
            put_bound(out, start)?;
            put_bound(out, end)?;
            put_deletion(out, deletion);
        }
    }
    Ok(())
}

/// A count, then the mutations (a MutationRequest's payload, a counter leader's answer, a
/// Paxos proposal's update).
pub(super) fn put_mutations(
    out: &mut Vec<u8>,
    mutations: &[Mutation],
    version: u8,
) -> Result<(), EncodeError> {
    check_count("mutations", mutations.len(), MUTATIONS_PER_MESSAGE_MAX)?;
    put_u32(out, mutations.len() as u32);
    for m in mutations {
        put_mutation(out, m, version)?;
    }
    Ok(())
}

pub(super) fn get_mutations(r: &mut Reader<'_>, version: u8) -> Result<Vec<Mutation>, DecodeError> {
    let n = r.count_u32("mutations", MUTATIONS_PER_MESSAGE_MAX)?;
    let mut mutations = Vec::with_capacity(n.min(r.remaining() / ENCODED_ITEM_BYTES_MIN));
    for _ in 0..n {
        mutations.push(get_mutation(r, version)?);
    }
    Ok(mutations)
}

pub(super) fn get_mutation(r: &mut Reader<'_>, version: u8) -> Result<Mutation, DecodeError> {
    let table = r.u32("table")?;
    let token = r.i64("token")?;
    let partition = get_key(r, "partition key")?;
    let kind = match r.u8("mutation tag")? {
        MUTATION_ROW => MutationKind::Row {
            clustering: get_key(r, "clustering key")?,
            update: get_row(r, version)?,
        },
        MUTATION_DELETE_RANGE => MutationKind::DeleteRange {
            start: get_bound(r)?,
            end: get_bound(r)?,
            deletion: get_deletion(r)?,
        },
        tag => {
            return Err(DecodeError::BadTag {
                what: "mutation tag",
                tag,
            })
        }
    };
    Ok(Mutation {
        table,
        token,
        partition,
        kind,
    })
}

/// The error message is cut to [`ERROR_MESSAGE_BYTES_MAX`] at a character boundary: a reply
/// must always encode, and the start of a message says what went wrong.
pub(super) fn put_replica_error(out: &mut Vec<u8>, e: &ReplicaError) {
    put_u8(
        out,
        match e.kind {
            ReplicaErrorKind::Refused => ERROR_REFUSED,
            ReplicaErrorKind::Invalid => ERROR_INVALID,
            ReplicaErrorKind::Failed => ERROR_FAILED,
            ReplicaErrorKind::Unreachable => ERROR_UNREACHABLE,
        },
    );
    let mut end = e.message.len().min(ERROR_MESSAGE_BYTES_MAX);
    while !e.message.is_char_boundary(end) {
        end -= 1;
    }
    put_u32(out, end as u32);
    out.extend_from_slice(&e.message.as_bytes()[..end]);
}

pub(super) fn get_replica_error(r: &mut Reader<'_>) -> Result<ReplicaError, DecodeError> {
    let kind = match r.u8("replica error kind")? {
        ERROR_REFUSED => ReplicaErrorKind::Refused,
        ERROR_INVALID => ReplicaErrorKind::Invalid,
        ERROR_FAILED => ReplicaErrorKind::Failed,
        ERROR_UNREACHABLE => ReplicaErrorKind::Unreachable,
        tag => {
            return Err(DecodeError::BadTag {
                what: "replica error kind",
                tag,
            })
        }
    };
    let what = "replica error message";
    let message = std::str::from_utf8(r.bytes_u32(what, ERROR_MESSAGE_BYTES_MAX)?)
        .map_err(|_| DecodeError::BadUtf8 { what })?;
    Ok(ReplicaError::new(kind, message))
}

pub(super) fn put_command(out: &mut Vec<u8>, command: &ReadCommand) -> Result<(), EncodeError> {
    match command {
        ReadCommand::Partition(p) => {
            put_u8(out, COMMAND_PARTITION);
            put_u32(out, p.table);
            put_i64(out, p.token);
            put_key(out, "partition key", &p.partition)?;
            put_bound(out, &p.start)?;
            put_bound(out, &p.end)?;
            put_bool(out, p.reverse);
            put_u64(out, p.limit as u64);
        }
        ReadCommand::Range(q) => {
            put_u8(
                out,
                if q.index.is_some() {
                    COMMAND_INDEXED_RANGE
                } else {
                    COMMAND_RANGE
                },
            );
            put_u32(out, q.table);
            match &q.start {
                RangeStart::Token(t) => {
                    put_u8(out, START_TOKEN);
                    put_i64(out, *t);
                }
                RangeStart::After(p) => {
                    put_u8(out, START_AFTER);
                    put_position(out, p)?;
                }
            }
            put_i64(out, q.end_token);
            put_u64(out, q.limit as u64);
            if let Some(i) = &q.index {
                put_u32(out, i.index);
                put_bound(out, &i.terms.start)?;
                put_bound(out, &i.terms.end)?;
            }
        }
    }
    Ok(())
}

/// A limit sizes no allocation here, so it is not bounded; on a 32-bit build one past `usize`
/// reads as "no limit".
fn get_limit(r: &mut Reader<'_>) -> Result<usize, DecodeError> {
    Ok(usize::try_from(r.u64("limit")?).unwrap_or(usize::MAX))
}

pub(super) fn get_command(r: &mut Reader<'_>) -> Result<ReadCommand, DecodeError> {
    Ok(match r.u8("read command tag")? {
        COMMAND_PARTITION => ReadCommand::Partition(PartitionRead {
            table: r.u32("table")?,
            token: r.i64("token")?,
            partition: get_key(r, "partition key")?,
            start: get_bound(r)?,
            end: get_bound(r)?,
            reverse: r.bool("reverse flag")?,
            limit: get_limit(r)?,
        }),
        tag @ (COMMAND_RANGE | COMMAND_INDEXED_RANGE) => {
            let table = r.u32("table")?;
            let start = match r.u8("range start tag")? {
                START_TOKEN => RangeStart::Token(r.i64("start token")?),
                START_AFTER => RangeStart::After(get_position(r)?),
                tag => {
                    return Err(DecodeError::BadTag {
                        what: "range start tag",
                        tag,
                    })
                }
            };
            let end_token = r.i64("end token")?;
            let limit = get_limit(r)?;
            let index = if tag == COMMAND_INDEXED_RANGE {
                Some(IndexRead {
                    index: r.u32("index")?,
                    terms: TermRange {
                        start: get_bound(r)?,
                        end: get_bound(r)?,
                    },
                })
            } else {
                None
            };
            ReadCommand::Range(RangeRead {
                table,
                start,
                end_token,
                limit,
                index,
            })
        }
        tag => {
            return Err(DecodeError::BadTag {
                what: "read command tag",
                tag,
            })
        }
    })
}

fn put_position(out: &mut Vec<u8>, p: &RowPosition) -> Result<(), EncodeError> {
    put_i64(out, p.token);
    put_key(out, "partition key", &p.partition)?;
    put_bool(out, p.clustering.is_some());
    if let Some(c) = &p.clustering {
        put_key(out, "clustering key", c)?;
    }
    Ok(())
}

fn get_position(r: &mut Reader<'_>) -> Result<RowPosition, DecodeError> {
    let token = r.i64("position token")?;
    let partition = get_key(r, "partition key")?;
    let clustering = if r.bool("position clustering flag")? {
        Some(get_key(r, "clustering key")?)
    } else {
        None
    };
    Ok(RowPosition {
        token,
        partition,
        clustering,
    })
}

/// One row of a read answer, in the format of frame `version`; also what [`super::digest()`]
/// hashes, row by row.
pub(super) fn put_replica_row(out: &mut Vec<u8>, row: &ReplicaRow, version: u8) -> Result<(), EncodeError> {
    put_i64(out, row.token);
    put_key(out, "partition key", &row.partition)?;
    put_key(out, "clustering key", &row.clustering)?;
    put_row(out, &row.row, version)
}

fn get_replica_row(r: &mut Reader<'_>, version: u8) -> Result<ReplicaRow, DecodeError> {
    Ok(ReplicaRow {
        token: r.i64("row token")?,
        partition: get_key(r, "partition key")?,
        clustering: get_key(r, "clustering key")?,
        row: get_row(r, version)?,
    })
}

/// A partition's tombstones, in the format of frame `version`.
pub(super) fn put_replica_tombstones(
    out: &mut Vec<u8>,
    t: &ReplicaTombstones,
    version: u8,
) -> Result<(), EncodeError> {
    put_i64(out, t.token);
    put_key(out, "partition key", &t.partition)?;
    if version >= VERSION_ROWS {
        return row::put_tombstones(out, &t.tombstones);
    }
    row_v1::put_tombstones(out, &t.tombstones);
    Ok(())
}

fn get_replica_tombstones(r: &mut Reader<'_>, version: u8) -> Result<ReplicaTombstones, DecodeError> {
    let token = r.i64("tombstones token")?;
    let partition = get_key(r, "partition key")?;
    let tombstones = match version >= VERSION_ROWS {
        true => row::get_tombstones(r)?,
        false => row_v1::get_tombstones(r)?,
    };
    Ok(ReplicaTombstones {
        token,
        partition,
        tombstones,
    })
}

/// The first frame version whose data replies carry the partition's tombstones.
const VERSION_TOMBSTONES: u8 = 2;

pub(super) fn put_reply(out: &mut Vec<u8>, reply: &ReadReply, version: u8) -> Result<(), EncodeError> {
    match reply {
        ReadReply::Data(response) => {
            put_u8(out, REPLY_DATA);
            check_count("rows", response.rows.len(), ROWS_PER_MESSAGE_MAX)?;
            put_u32(out, response.rows.len() as u32);
            for row in &response.rows {
                put_replica_row(out, row, version)?;
            }
            put_bool(out, response.more);
            // An older peer hears the rows alone: each carries the tombstone covering it
            // already, merged in as a row deletion.
            if version >= VERSION_TOMBSTONES {
                check_count("tombstones", response.tombstones.len(), ROWS_PER_MESSAGE_MAX)?;
                put_u32(out, response.tombstones.len() as u32);
                for t in &response.tombstones {
                    put_replica_tombstones(out, t, version)?;
                }
            }
        }
        ReadReply::Digest { digest, more } => {
            put_u8(out, REPLY_DIGEST);
            out.extend_from_slice(digest);
            put_bool(out, *more);
        }
    }
    Ok(())
}

pub(super) fn get_reply(r: &mut Reader<'_>, version: u8) -> Result<ReadReply, DecodeError> {
    Ok(match r.u8("read reply tag")? {
        REPLY_DATA => {
            let n = r.count_u32("rows", ROWS_PER_MESSAGE_MAX)?;
            let mut rows = Vec::with_capacity(n.min(r.remaining() / ENCODED_ITEM_BYTES_MIN));
            for _ in 0..n {
                rows.push(get_replica_row(r, version)?);
            }
            let more = r.bool("more flag")?;
            let mut tombstones = Vec::new();
            if version >= VERSION_TOMBSTONES {
                let n = r.count_u32("tombstones", ROWS_PER_MESSAGE_MAX)?;
                tombstones.reserve(n.min(r.remaining() / ENCODED_ITEM_BYTES_MIN));
                for _ in 0..n {
                    tombstones.push(get_replica_tombstones(r, version)?);
                }
            }
            ReadReply::Data(ReadResponse {
                rows,
                more,
                tombstones,
            })
        }
        REPLY_DIGEST => {
            let mut digest = [0u8; 16];
            digest.copy_from_slice(r.take(16, "digest")?);
            let more = r.bool("more flag")?;
            ReadReply::Digest { digest, more }
        }
        tag => {
            return Err(DecodeError::BadTag {
                what: "read reply tag",
                tag,
            })
        }
    })
}
