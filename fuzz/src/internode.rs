//! The internode message decoders (`hayate_cluster::message`): frames, the handshake, and a
//! reader's cutting of a byte stream into frames, with the round trips that must hold.
//!
//! Input: `mode (u8) | bytes`. Mode bits:
//!
//! - [`MODE_SEAL`]: rewrite the frame's length field and checksum to fit the bytes before
//!   decoding, so the fuzzer explores the payload decoders behind the checksum;
//! - [`MODE_STREAM`]: read the bytes as a connection's stream, frame after frame, as the TCP
//!   reader does (stopping at the first bad one);
//! - [`MODE_HANDSHAKE`]: read the bytes as a hello, then as a hello reply.

use hayate_cluster::message::handshake::{Hello, HelloReply, HELLO_REPLY_BYTES};
use hayate_cluster::message::{
    self, decode, digest, encode, frame_bytes, Lane, Message, ReadReply, FRAME_BYTES_MAX, VERSION,
};
use hayate_cluster::node::HostId;
use hayate_cluster::replica::{
    Mutation, MutationKind, PartitionRead, RangeRead, RangeStart, ReadCommand, ReadResponse, ReplicaError,
    ReplicaErrorKind, ReplicaRow, RowPosition,
};
use hayate_storage::row::{Cell, Deletion, Row};

pub const MODE_SEAL: u8 = 1;
pub const MODE_STREAM: u8 = 2;
pub const MODE_HANDSHAKE: u8 = 4;

/// Runs the decoders the mode asks for on `data`; returns how many messages decoded.
pub fn check_internode(data: &[u8]) -> usize {
    let Some((&mode, bytes)) = data.split_first() else {
        return 0;
    };
    if mode & MODE_HANDSHAKE != 0 {
        check_handshake(bytes);
        return 0;
    }
    if mode & MODE_STREAM != 0 {
        return check_stream(bytes);
    }
    let mut frame = bytes.to_vec();
    if mode & MODE_SEAL != 0 {
        message::seal(&mut frame);
    }
    usize::from(check_frame(&frame).is_some())
}

/// Decodes one frame and, if it decodes, checks the round trip.
///
/// A frame does not always re-encode to its own bytes (a row's timestamps may be deltas from
/// another base than the newest timestamp, varints may be longer than needed, an expiry time
/// under a zero TTL is not written), so the properties are: what `encode` writes decodes to a
/// message of the same kind and id, encoding that again gives the same bytes, and a read
/// answer's digest survives the trip.
pub fn check_frame(frame: &[u8]) -> Option<Message> {
    let m = decode(frame).ok()?;
    let mut encoded = Vec::new();
    let n = encode(&m, VERSION, &mut encoded).expect("a decoded message encodes");
    assert_eq!(n, encoded.len());
    assert_eq!(frame_bytes(&encoded), Ok(Some(n)));
    let again = decode(&encoded).expect("a freshly encoded frame decodes");
    assert_eq!(again.id(), m.id());
    assert_eq!(again.kind(), m.kind());
    let mut encoded_again = Vec::new();
    encode(&again, VERSION, &mut encoded_again).expect("encodes");
    assert_eq!(
        encoded, encoded_again,
        "encoding is a fixed point after one round"
    );
    if let Message::ReadResponse {
        result: Ok(ReadReply::Data(response)),
        ..
    } = &m
    {
        let Message::ReadResponse {
            result: Ok(ReadReply::Data(again)),
            ..
        } = &again
        else {
            panic!("a read response came back as something else");
        };
        assert_eq!(digest(response), digest(again), "a round trip changed the digest");
    }
    Some(m)
}

/// Cuts frames off the front of `bytes` the way the TCP reader does.
fn check_stream(mut bytes: &[u8]) -> usize {
    let mut decoded = 0;
    loop {
        match frame_bytes(bytes) {
            Ok(Some(n)) => {
                assert!(n <= FRAME_BYTES_MAX);
                if bytes.len() < n {
                    return decoded;
                }
                if check_frame(&bytes[..n]).is_none() {
                    return decoded;
                }
                decoded += 1;
                bytes = &bytes[n..];
            }
            Ok(None) | Err(_) => return decoded,
        }
    }
}

fn check_handshake(bytes: &[u8]) {
    if let Ok(hello) = Hello::decode(bytes) {
        let mut out = Vec::new();
        hello.encode(&mut out);
        assert_eq!(out, bytes, "a hello re-encodes to its bytes");
        let _ = hello.accept("Test Cluster");
    }
    if let Some(reply) = bytes.first_chunk::<HELLO_REPLY_BYTES>() {
        if let Ok(version) = HelloReply::decode(reply) {
            assert_eq!(HelloReply { version }.encode(), *reply);
        }
    }
}

/// The seed corpus of `internode_message`: `(file name, contents)`.
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let frame = |mode: u8, m: &Message| {
        let mut out = vec![mode];
        encode(m, VERSION, &mut out).expect("seed encodes");
        out
    };
    let mut out = vec![
        ("mutation", frame(0, &mutation_request())),
        ("read-request", frame(0, &read_request())),
        ("range-read", frame(0, &range_read())),
        ("read-response", frame(0, &read_response())),
        ("stream-request", frame(0, &stream_request())),
        ("stream-response", frame(0, &stream_response())),
        (
            "topology-request",
            frame(
                0,
                &Message::TopologyRequest {
                    id: 9,
                    payload: br#"{"drain":{"epoch":42}}"#.to_vec(),
                },
            ),
        ),
        ("paxos-propose", frame(0, &paxos_propose())),
        ("paxos-promise", frame(0, &paxos_promise())),
        (
            "counter-request",
            frame(
                0,
                &Message::CounterRequest {
                    id: 12,
                    timestamp_us: 1_700_000_000_000_000,
                    updates: vec![hayate_cluster::counter::CounterUpdate {
                        table: 7,
                        token: -5,
                        partition: b"views".to_vec(),
                        clustering: b"ck".to_vec(),
                        column: 3,
                        delta: -42,
                    }],
                },
            ),
        ),
    ];
    // A frame whose checksum is stale: valid only when the target reseals it.
    let mut stale = frame(MODE_SEAL, &mutation_request());
    let last = stale.len() - 1;
    stale[last] ^= 0x01;
    out.push(("resealed", stale));
    let mut stream = vec![MODE_STREAM];
    for m in [
        mutation_request(),
        Message::MutationResponse {
            id: 2,
            result: Err(ReplicaError::new(ReplicaErrorKind::Refused, "device full")),
        },
        read_request(),
        Message::ReadResponse {
            id: 4,
            result: Ok(ReadReply::Digest {
                digest: [7; 16],
                more: true,
            }),
        },
        Message::MetadataRequest {
            id: 5,
            payload: b"raft".to_vec(),
        },
        Message::Ping { id: 6 },
    ] {
        encode(&m, VERSION, &mut stream).expect("seed encodes");
    }
    out.push(("stream", stream));
    let mut hello = vec![MODE_HANDSHAKE];
    Hello {
        max_version: VERSION,
        lane: Lane::Bulk,
        sender: HostId([3; 16]),
        cluster_name: "Test Cluster".to_owned(),
    }
    .encode(&mut hello);
    out.push(("hello", hello));
    out
}

fn stream_request() -> Message {
    Message::StreamRequest {
        id: 7,
        request: hayate_cluster::replica::StreamRequest {
            table: 3,
            range: hayate_cluster::ring::TokenRange {
                start_exclusive: -100,
                end_inclusive: 5000,
            },
            after: Some([4; hayate_cluster::replica::STREAM_POSITION_BYTES]),
            max_bytes: 16 << 20,
        },
    }
}

fn stream_response() -> Message {
    Message::StreamResponse {
        id: 8,
        result: Ok(hayate_cluster::replica::StreamChunk {
            bytes: b"HSTC a chunk the storage engine decodes".to_vec(),
            records: 2,
            data_bytes: 40,
            next: None,
            total: Some(hayate_cluster::replica::RangeSize {
                records: 2,
                bytes: 40,
            }),
        }),
    }
}

/// The mutations of the mutation seed, proposed in a Paxos round.
fn proposal() -> hayate_cluster::paxos::Proposal {
    let Message::MutationRequest { mutations, .. } = mutation_request() else {
        unreachable!("mutation_request makes a mutation request");
    };
    hayate_cluster::paxos::Proposal {
        ballot: hayate_cluster::paxos::Ballot {
            micros: 1_700_000_000_000_000,
            node: 3,
        },
        update: mutations,
    }
}

fn paxos_propose() -> Message {
    let p = proposal();
    let m = &p.update[0];
    Message::PaxosRequest {
        id: 10,
        request: hayate_cluster::paxos::PaxosRequest::Propose {
            key: hayate_cluster::paxos::PaxosKey {
                table: m.table,
                token: m.token,
                partition: m.partition.clone(),
            },
            proposal: p,
        },
    }
}

fn paxos_promise() -> Message {
    let Message::ReadResponse {
        result: Ok(ReadReply::Data(data)),
        ..
    } = read_response()
    else {
        unreachable!("read_response makes a data reply");
    };
    Message::PaxosResponse {
        id: 11,
        result: Ok(hayate_cluster::paxos::PaxosReply::Promised {
            accepted: Some(proposal()),
            committed: None,
            data,
        }),
    }
}

fn mutation_request() -> Message {
    let mut row = Row {
        deletion: Some(Deletion {
            timestamp_us: 10,
            deleted_at_s: 7,
        }),
        column_deletions: vec![(
            4,
            Deletion {
                timestamp_us: 20,
                deleted_at_s: 8,
            },
        )],
        cells: vec![
            Cell::live(1, 1_000, b"value".to_vec()),
            Cell::expiring(2, 1_000, b"ttl".to_vec(), 60, 100),
            Cell::tombstone(3, 900, 77),
            Cell {
                path: b"key".to_vec(),
                ..Cell::live(4, 1_200, b"element".to_vec())
            },
        ],
        ..Row::default()
    };
    row.normalize();
    Message::MutationRequest {
        id: 1,
        mutations: vec![
            Mutation {
                table: 9,
                token: -42,
                partition: b"partition".to_vec(),
                kind: MutationKind::Row {
                    clustering: b"clustering".to_vec(),
                    update: row,
                },
            },
            Mutation {
                table: 9,
                token: -42,
                partition: b"partition".to_vec(),
                kind: MutationKind::DeleteRange {
                    start: std::ops::Bound::Included(b"a".to_vec()),
                    end: std::ops::Bound::Excluded(b"b".to_vec()),
                    deletion: Deletion {
                        timestamp_us: 30,
                        deleted_at_s: 9,
                    },
                },
            },
        ]
        .into(),
    }
}

fn read_request() -> Message {
    Message::ReadRequest {
        id: 3,
        command: ReadCommand::Partition(PartitionRead {
            table: 9,
            token: -42,
            partition: b"partition".to_vec(),
            start: std::ops::Bound::Unbounded,
            end: std::ops::Bound::Included(b"z".to_vec()),
            reverse: true,
            limit: 100,
        }),
        digest_only: false,
    }
}

fn range_read() -> Message {
    Message::ReadRequest {
        id: 7,
        command: ReadCommand::Range(RangeRead {
            table: 9,
            start: RangeStart::After(RowPosition {
                token: 1,
                partition: b"partition".to_vec(),
                clustering: Some(b"a".to_vec()),
            }),
            end_token: i64::MAX,
            limit: 1000,
            // A read by a secondary index: the seed carries the indexed range read's tag.
            index: Some(hayate_cluster::replica::IndexRead {
                index: 2,
                terms: hayate_storage::TermRange {
                    start: std::ops::Bound::Included(b"a".to_vec()),
                    end: std::ops::Bound::Unbounded,
                },
            }),
        }),
        digest_only: true,
    }
}

fn read_response() -> Message {
    Message::ReadResponse {
        id: 4,
        result: Ok(ReadReply::Data(ReadResponse {
            rows: vec![
                ReplicaRow {
                    token: -42,
                    partition: b"partition".to_vec(),
                    clustering: b"a".to_vec(),
                    row: Row::deleted(1_000, 50),
                },
                ReplicaRow {
                    token: -42,
                    partition: b"partition".to_vec(),
                    clustering: b"b".to_vec(),
                    row: Row {
                        cells: vec![Cell::live(1, 2_000, b"v".to_vec())],
                        ..Row::default()
                    },
                },
            ],
            more: true,
            tombstones: vec![hayate_cluster::replica::ReplicaTombstones {
                token: -42,
                partition: b"partition".to_vec(),
                tombstones: hayate_storage::PartitionTombstones::of(
                    std::ops::Bound::Included(b"a".to_vec()),
                    std::ops::Bound::Excluded(b"c".to_vec()),
                    hayate_storage::Deletion {
                        timestamp_us: 1_500,
                        deleted_at_s: 50,
                    },
                ),
            }],
        })),
    }
}
