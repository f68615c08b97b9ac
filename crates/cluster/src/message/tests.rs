//! Every message kind survives a round trip; damaged, truncated and oversized frames are refused
//! with the error that says so, never a panic. Randomized tests run fixed seeds; replay one with
//! `HAYATE_SEED=<seed> cargo test -p hayate-cluster message::`.

use std::ops::Bound;
use std::panic::{catch_unwind, AssertUnwindSafe};

use hayate_storage::{Cell, CellValue, Deletion, Liveness, Row};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::node::HostId;
use crate::replica::{
    MutationKind, PartitionRead, RangeRead, RangeSize, RangeStart, ReplicaErrorKind, ReplicaRow, RowPosition,
    STREAM_POSITION_BYTES, STREAM_REQUEST_BYTES_MAX,
};
use crate::ring::TokenRange;

const SEEDS: &[u64] = &[1, 2, 3, 42, 0xdead_beef, 7_777_777];

fn seeds() -> Vec<u64> {
    match std::env::var("HAYATE_SEED") {
        Ok(s) => vec![s.trim().parse().expect("HAYATE_SEED must be an unsigned integer")],
        Err(_) => SEEDS.to_vec(),
    }
}

fn round_trip(message: &Message) -> Vec<u8> {
    let mut out = vec![0xaa; 3]; // encode appends: bytes already there stay
    let n = encode(message, VERSION, &mut out).expect("encodes");
    assert_eq!(out.len(), 3 + n);
    assert_eq!(&out[..3], &[0xaa; 3]);
    let frame = out.split_off(3);
    assert_eq!(frame_bytes(&frame), Ok(Some(n)));
    assert_eq!(decode(&frame).as_ref(), Ok(message));
    frame
}

/// A row with every part the body encoding has: liveness with a TTL, a row deletion, column
/// deletions, a live cell, an expiring cell, a cell tombstone and collection elements.
fn rich_row() -> Row {
    let mut row = Row {
        liveness: Some(Liveness {
            timestamp_us: 1_700_000_000_000_000,
            ttl_s: 3600,
            expires_at_s: 1_700_003_600,
        }),
        deletion: Some(Deletion {
            timestamp_us: 1_600_000_000_000_000,
            deleted_at_s: 1_600_000_000,
        }),
        column_deletions: vec![
            (
                4,
                Deletion {
                    timestamp_us: 1_650_000_000_000_000,
                    deleted_at_s: 1_650_000_000,
                },
            ),
            (
                9,
                Deletion {
                    timestamp_us: -5,
                    deleted_at_s: 0,
                },
            ),
        ],
        cells: vec![
            Cell::live(1, 1_700_000_000_000_001, b"plain".to_vec()),
            Cell::expiring(2, 1_700_000_000_000_002, vec![0; 300], 60, 1_700_000_000),
            Cell::tombstone(3, 1_700_000_000_000_003, 1_700_000_000),
            Cell {
                column: 4,
                path: b"map key".to_vec(),
                timestamp_us: 1_700_000_000_000_004,
                value: CellValue::Live {
                    value: b"map value".to_vec(),
                    ttl_s: 0,
                    expires_at_s: 0,
                },
            },
            Cell {
                column: 4,
                path: b"gone key".to_vec(),
                timestamp_us: 1_700_000_000_000_005,
                value: CellValue::Tombstone {
                    deleted_at_s: 1_700_000_001,
                },
            },
        ],
    };
    row.normalize();
    row
}

fn mutation(kind: MutationKind) -> Mutation {
    Mutation {
        table: 7,
        token: -1_234_567_890_123,
        partition: b"partition".to_vec(),
        kind,
    }
}

#[test]
fn every_kind_round_trips() {
    let bounds = [
        Bound::Unbounded,
        Bound::Included(b"from".to_vec()),
        Bound::Excluded(Vec::new()),
    ];
    let mut mutations = vec![
        mutation(MutationKind::Row {
            clustering: b"ck".to_vec(),
            update: rich_row(),
        }),
        mutation(MutationKind::Row {
            clustering: Vec::new(),
            update: Row::deleted(99, 98),
        }),
        mutation(MutationKind::Row {
            clustering: Vec::new(),
            update: Row::default(),
        }),
    ];
    for start in &bounds {
        for end in &bounds {
            mutations.push(mutation(MutationKind::DeleteRange {
                start: start.clone(),
                end: end.clone(),
                deletion: Deletion {
                    timestamp_us: i64::MIN,
                    deleted_at_s: u32::MAX,
                },
            }));
        }
    }
    let rows = vec![
        ReplicaRow {
            token: i64::MIN,
            partition: b"p1".to_vec(),
            clustering: b"c1".to_vec(),
            row: rich_row(),
        },
        ReplicaRow {
            token: i64::MAX,
            partition: vec![0xff; KEY_BYTES_MAX],
            clustering: Vec::new(),
            row: Row::deleted(5, 6),
        },
    ];
    let messages = vec![
        Message::MutationRequest {
            id: 1,
            mutations: mutations.into(),
        },
        Message::MutationRequest {
            id: 2,
            mutations: Vec::new().into(),
        },
        Message::MutationResponse {
            id: 3,
            result: Ok(()),
        },
        Message::MutationResponse {
            id: 4,
            result: Err(ReplicaError::new(
                ReplicaErrorKind::Refused,
                "device full: añadir",
            )),
        },
        Message::ReadRequest {
            id: 5,
            command: ReadCommand::Partition(PartitionRead {
                table: 1,
                token: 2,
                partition: b"p".to_vec(),
                start: Bound::Included(b"a".to_vec()),
                end: Bound::Excluded(b"z".to_vec()),
                reverse: true,
                limit: 100,
            }),
            digest_only: false,
        },
        Message::ReadRequest {
            id: 6,
            command: ReadCommand::Range(RangeRead {
                table: 1,
                start: RangeStart::Token(i64::MIN),
                end_token: i64::MAX,
                limit: usize::MAX,
                index: None,
            }),
            digest_only: true,
        },
        Message::ReadRequest {
            id: 7,
            command: ReadCommand::Range(RangeRead {
                table: 1,
                start: RangeStart::After(RowPosition {
                    token: 3,
                    partition: b"p".to_vec(),
                    clustering: Some(b"c".to_vec()),
                }),
                end_token: 4,
                limit: 0,
                index: None,
            }),
            digest_only: false,
        },
        Message::ReadRequest {
            id: 8,
            command: ReadCommand::Range(RangeRead {
                table: 1,
                start: RangeStart::After(RowPosition {
                    token: 3,
                    partition: b"p".to_vec(),
                    clustering: None,
                }),
                end_token: 4,
                limit: 10,
                index: Some(crate::replica::IndexRead {
                    index: 3,
                    terms: hayate_storage::TermRange {
                        start: Bound::Included(b"a".to_vec()),
                        end: Bound::Unbounded,
                    },
                }),
            }),
            digest_only: false,
        },
        Message::ReadResponse {
            id: 9,
            result: Ok(ReadReply::Data(ReadResponse {
                rows: rows.clone(),
                more: true,
                tombstones: vec![sample_tombstones()],
            })),
        },
        Message::ReadResponse {
            id: 10,
            result: Ok(ReadReply::Data(ReadResponse::default())),
        },
        Message::ReadResponse {
            id: 11,
            result: Ok(ReadReply::Digest {
                digest: digest(&ReadResponse {
                    rows,
                    more: false,
                    tombstones: Vec::new(),
                }),
                more: false,
            }),
        },
        Message::ReadResponse {
            id: 12,
            result: Err(ReplicaError::new(ReplicaErrorKind::Failed, "I/O error")),
        },
        Message::ReadResponse {
            id: 13,
            result: Err(ReplicaError::new(ReplicaErrorKind::Invalid, "")),
        },
        Message::MetadataRequest {
            id: 14,
            payload: b"raft append entries".to_vec(),
        },
        Message::MetadataResponse {
            id: 15,
            payload: Vec::new(),
        },
        Message::Ping { id: 16 },
        Message::Pong { id: u64::MAX },
        Message::StreamRequest {
            id: 17,
            request: StreamRequest {
                table: 7,
                range: TokenRange {
                    start_exclusive: i64::MIN,
                    end_inclusive: i64::MAX,
                },
                after: Some([9; STREAM_POSITION_BYTES]),
                max_bytes: 4 << 20,
            },
        },
        Message::StreamResponse {
            id: 18,
            result: Ok(StreamChunk {
                bytes: b"a stream chunk".to_vec(),
                records: 3,
                data_bytes: 300,
                next: None,
                total: Some(RangeSize {
                    records: 30,
                    bytes: 3000,
                }),
            }),
        },
        Message::StreamResponse {
            id: 19,
            result: Err(ReplicaError::new(ReplicaErrorKind::Refused, "device full")),
        },
        Message::TopologyRequest {
            id: 20,
            payload: b"{\"drain\":{\"epoch\":7}}".to_vec(),
        },
        Message::TopologyResponse {
            id: 21,
            payload: Vec::new(),
        },
    ];
    for m in &messages {
        round_trip(m);
    }
    // The stream and topology messages do not travel to a peer of an older frame version.
    for m in &messages[messages.len() - 5..] {
        let mut out = Vec::new();
        assert_eq!(
            encode(m, VERSION_STREAMS - 1, &mut out),
            Err(EncodeError::NotInVersion {
                kind: m.kind(),
                version: VERSION_STREAMS - 1
            })
        );
        assert!(out.is_empty());
    }
    // Many frames in one buffer come apart again.
    let mut stream = Vec::new();
    for m in &messages {
        encode(m, VERSION, &mut stream).expect("encodes");
    }
    let mut rest = &stream[..];
    let mut decoded = Vec::new();
    while let Some(n) = frame_bytes(rest).expect("valid length") {
        decoded.push(decode(&rest[..n]).expect("valid frame"));
        rest = &rest[n..];
    }
    assert!(rest.is_empty());
    assert_eq!(decoded, messages);
}

/// The frame header is drawn in the module comment and in docs/internode-protocol.md; this
/// pins it to the bytes.
#[test]
fn a_ping_is_the_drawn_header_and_nothing_else() {
    let frame = round_trip(&Message::Ping {
        id: 0x0102_0304_0506_0708,
    });
    assert_eq!(frame.len(), FRAME_HEADER_BYTES);
    assert_eq!(&frame[0..4], &14u32.to_be_bytes());
    assert_eq!(&frame[4..8], &crc32c::crc32c(&frame[8..]).to_be_bytes());
    assert_eq!(frame[8], VERSION);
    assert_eq!(frame[9], Kind::Ping as u8);
    assert_eq!(&frame[10..18], &[1, 2, 3, 4, 5, 6, 7, 8]);
}

#[test]
fn every_truncation_and_bit_flip_is_refused() {
    let frame = round_trip(&Message::MutationRequest {
        id: 77,
        mutations: vec![mutation(MutationKind::Row {
            clustering: b"ck".to_vec(),
            update: rich_row(),
        })]
        .into(),
    });
    for cut in 0..frame.len() {
        assert!(decode(&frame[..cut]).is_err(), "cut at {cut}");
    }
    let mut longer = frame.clone();
    longer.push(0);
    assert!(matches!(
        decode(&longer),
        Err(DecodeError::TrailingBytes { bytes: 1, .. })
    ));
    for i in 0..frame.len() {
        for bit in 0..8 {
            let mut damaged = frame.clone();
            damaged[i] ^= 1 << bit;
            assert!(decode(&damaged).is_err(), "flip of bit {bit} in byte {i}");
        }
    }
}

/// Behind a good checksum, the payload decoder must still refuse (not panic on) anything that
/// is not what an encoder writes: every prefix and every byte value at every place.
#[test]
fn resealed_damage_is_refused_or_decodes_without_panicking() {
    let frame = round_trip(&Message::ReadResponse {
        id: 1,
        result: Ok(ReadReply::Data(ReadResponse {
            rows: vec![ReplicaRow {
                token: 1,
                partition: b"p".to_vec(),
                clustering: b"c".to_vec(),
                row: rich_row(),
            }],
            more: false,
            tombstones: vec![sample_tombstones()],
        })),
    });
    for cut in FRAME_HEADER_BYTES..frame.len() {
        let mut short = frame[..cut].to_vec();
        seal(&mut short);
        assert!(decode(&short).is_err(), "payload cut at {cut} decoded");
    }
    for i in OFFSET_VERSION..frame.len() {
        for value in [0u8, 1, 2, 3, 0x7f, 0x80, 0xff] {
            let mut damaged = frame.clone();
            damaged[i] = value;
            seal(&mut damaged);
            let outcome = catch_unwind(AssertUnwindSafe(|| decode(&damaged)));
            assert!(outcome.is_ok(), "byte {i} = {value:#x} panicked the decoder");
        }
    }
}

#[test]
fn an_unknown_version_is_refused_by_name() {
    let mut frame = round_trip(&Message::Ping { id: 1 });
    frame[OFFSET_VERSION] = VERSION + 1;
    seal(&mut frame);
    let e = decode(&frame).expect_err("version from the future");
    assert_eq!(e, DecodeError::UnknownVersion { version: VERSION + 1 });
    assert!(e.to_string().contains("upgrade"), "{e}");
    frame[OFFSET_VERSION] = 0;
    seal(&mut frame);
    assert_eq!(decode(&frame), Err(DecodeError::UnknownVersion { version: 0 }));
    frame[OFFSET_VERSION] = VERSION;
    frame[OFFSET_KIND] = 200;
    seal(&mut frame);
    assert_eq!(decode(&frame), Err(DecodeError::UnknownKind { kind: 200 }));
}

#[test]
fn lengths_are_checked_before_anything_is_allocated() {
    // A length field claiming 4 GiB: refused from its first four bytes.
    assert!(matches!(
        frame_bytes(&[0xff, 0xff, 0xff, 0xff]),
        Err(DecodeError::FrameTooLarge { .. })
    ));
    let just_over = (FRAME_BYTES_MAX - 4 + 1) as u32;
    assert!(matches!(
        frame_bytes(&just_over.to_be_bytes()),
        Err(DecodeError::FrameTooLarge { .. })
    ));
    assert_eq!(
        frame_bytes(&((FRAME_BYTES_MAX - 4) as u32).to_be_bytes()),
        Ok(Some(FRAME_BYTES_MAX))
    );
    assert_eq!(
        frame_bytes(&13u32.to_be_bytes()),
        Err(DecodeError::FrameTooShort { length_bytes: 13 })
    );
    assert_eq!(frame_bytes(&[0, 0, 0]), Ok(None));

    // Counts over their bound, behind a valid checksum.
    let mut frame = round_trip(&Message::MutationRequest {
        id: 1,
        mutations: Vec::new().into(),
    });
    let count = FRAME_HEADER_BYTES;
    frame[count..count + 4].copy_from_slice(&(MUTATIONS_PER_MESSAGE_MAX as u32 + 1).to_be_bytes());
    seal(&mut frame);
    assert!(matches!(
        decode(&frame),
        Err(DecodeError::TooMany {
            what: "mutations",
            ..
        })
    ));
    // A count within the bound but far beyond the bytes present: truncated, not a big
    // allocation.
    frame[count..count + 4].copy_from_slice(&(MUTATIONS_PER_MESSAGE_MAX as u32).to_be_bytes());
    seal(&mut frame);
    assert!(matches!(decode(&frame), Err(DecodeError::Truncated { .. })));
}

#[test]
fn what_cannot_be_encoded_is_refused_and_leaves_the_buffer_as_it_was() {
    let mut out = b"earlier frames".to_vec();
    let too_long_key = Message::MutationRequest {
        id: 1,
        mutations: vec![Mutation {
            table: 1,
            token: 1,
            partition: vec![0; KEY_BYTES_MAX + 1],
            kind: MutationKind::Row {
                clustering: Vec::new(),
                update: Row::default(),
            },
        }]
        .into(),
    };
    assert!(matches!(
        encode(&too_long_key, VERSION, &mut out),
        Err(EncodeError::TooLong {
            what: "partition key",
            ..
        })
    ));
    assert_eq!(out, b"earlier frames");
    let too_large = Message::MetadataRequest {
        id: 2,
        payload: vec![0; FRAME_BYTES_MAX],
    };
    assert!(matches!(
        encode(&too_large, VERSION, &mut out),
        Err(EncodeError::FrameTooLarge { .. })
    ));
    assert_eq!(out, b"earlier frames");
}

#[test]
fn a_long_error_message_is_cut_at_a_character_boundary() {
    let message = "é".repeat(ERROR_MESSAGE_BYTES_MAX); // two bytes each
    let mut frame = Vec::new();
    encode(
        &Message::MutationResponse {
            id: 1,
            result: Err(ReplicaError::new(ReplicaErrorKind::Failed, message.clone())),
        },
        VERSION,
        &mut frame,
    )
    .expect("encodes");
    let Ok(Message::MutationResponse { result: Err(e), .. }) = decode(&frame) else {
        panic!("not a mutation error");
    };
    assert_eq!(e.message.len(), ERROR_MESSAGE_BYTES_MAX);
    assert!(message.starts_with(&e.message));
}

#[test]
fn digests_see_rows_but_not_the_more_flag() {
    let rows = vec![
        ReplicaRow {
            token: 1,
            partition: b"p".to_vec(),
            clustering: b"a".to_vec(),
            row: rich_row(),
        },
        ReplicaRow {
            token: 1,
            partition: b"p".to_vec(),
            clustering: b"b".to_vec(),
            row: Row::deleted(10, 11),
        },
    ];
    let a = ReadResponse {
        rows: rows.clone(),
        more: false,
        tombstones: Vec::new(),
    };
    let b = ReadResponse {
        rows,
        more: true,
        tombstones: Vec::new(),
    };
    let mut with_tombstones = a.clone();
    with_tombstones.tombstones.push(sample_tombstones());
    assert_ne!(
        digest(&a),
        digest(&with_tombstones),
        "a replica that missed a range delete answers with another digest"
    );
    assert_eq!(digest(&a), digest(&b));
    assert_eq!(
        digest(&a),
        digest(&a.clone()),
        "a digest is a function of the rows"
    );
    assert_ne!(digest(&a), digest(&ReadResponse::default()));

    let mut newer = a.clone();
    newer.rows[1].row = Row::deleted(12, 11);
    assert_ne!(digest(&a), digest(&newer), "a newer tombstone changes the digest");
    let mut moved = a.clone();
    moved.rows[0].clustering = b"ab".to_vec();
    moved.rows[1].clustering = b"".to_vec();
    assert_ne!(
        digest(&a),
        digest(&moved),
        "keys are length-prefixed, not concatenated"
    );
    let mut reordered = a.clone();
    reordered.rows.reverse();
    assert_ne!(digest(&a), digest(&reordered));
    // An expiry time under a zero TTL means nothing and is not encoded: replicas that differ
    // only there agree.
    let mut x = ReadResponse {
        rows: vec![a.rows[0].clone()],
        more: false,
        tombstones: Vec::new(),
    };
    let y = x.clone();
    x.rows[0].row.cells[0].value = CellValue::Live {
        value: b"plain".to_vec(),
        ttl_s: 0,
        expires_at_s: 12345,
    };
    assert_eq!(digest(&x), digest(&y));
}

#[test]
fn size_hints_are_close_to_the_encoded_size() {
    let m = Message::MutationRequest {
        id: 1,
        mutations: (0..50)
            .map(|i| {
                mutation(MutationKind::Row {
                    clustering: vec![i; 10],
                    update: rich_row(),
                })
            })
            .collect::<Vec<_>>()
            .into(),
    };
    let mut out = Vec::new();
    let n = encode(&m, VERSION, &mut out).expect("encodes");
    let hint = m.size_hint_bytes();
    assert!(hint >= n / 2 && hint <= n * 2, "hint {hint} for {n} bytes");
}

// Random messages.

fn random_bytes(rng: &mut StdRng, max: usize) -> Vec<u8> {
    let len = if rng.random_bool(0.2) {
        0
    } else {
        rng.random_range(0..=max)
    };
    (0..len).map(|_| rng.random()).collect()
}

fn random_ts(rng: &mut StdRng) -> i64 {
    match rng.random_range(0..10) {
        0 => i64::MIN,
        1 => i64::MAX,
        2 => rng.random(),
        _ => 1_700_000_000_000_000 + rng.random_range(-1_000_000..1_000_000),
    }
}

fn random_deletion(rng: &mut StdRng) -> Deletion {
    Deletion {
        timestamp_us: random_ts(rng),
        deleted_at_s: rng.random(),
    }
}

fn random_row(rng: &mut StdRng) -> Row {
    let mut row = Row::default();
    if rng.random_bool(0.5) {
        let ttl_s = if rng.random_bool(0.5) {
            0
        } else {
            rng.random_range(1..=u32::MAX)
        };
        row.liveness = Some(Liveness {
            timestamp_us: random_ts(rng),
            ttl_s,
            // An expiry without a TTL is not encoded (it means nothing); see rich_row's test.
            expires_at_s: if ttl_s == 0 { 0 } else { rng.random() },
        });
    }
    if rng.random_bool(0.3) {
        row.deletion = Some(random_deletion(rng));
    }
    for _ in 0..rng.random_range(0..3) {
        row.column_deletions
            .push((rng.random_range(0..20), random_deletion(rng)));
    }
    for _ in 0..rng.random_range(0..8) {
        let column = rng.random_range(0..20);
        let timestamp_us = random_ts(rng);
        let path = if rng.random_bool(0.3) {
            random_bytes(rng, 12)
        } else {
            Vec::new()
        };
        let value = match rng.random_range(0..3) {
            0 => CellValue::Tombstone {
                deleted_at_s: rng.random(),
            },
            1 => CellValue::Live {
                value: random_bytes(rng, 64),
                ttl_s: rng.random_range(1..=u32::MAX),
                expires_at_s: rng.random(),
            },
            _ => CellValue::Live {
                value: random_bytes(rng, 64),
                ttl_s: 0,
                expires_at_s: 0,
            },
        };
        row.cells.push(Cell {
            column,
            path,
            timestamp_us,
            value,
        });
    }
    if rng.random_bool(0.8) {
        row.normalize();
    }
    row
}

fn random_bound(rng: &mut StdRng) -> Bound<Vec<u8>> {
    match rng.random_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(random_bytes(rng, 16)),
        _ => Bound::Excluded(random_bytes(rng, 16)),
    }
}

fn random_error(rng: &mut StdRng) -> ReplicaError {
    let kind = [
        ReplicaErrorKind::Refused,
        ReplicaErrorKind::Invalid,
        ReplicaErrorKind::Failed,
    ][rng.random_range(0..3)];
    let len = rng.random_range(0..40);
    let message: String = (0..len).map(|_| rng.random_range('a'..='ü')).collect();
    ReplicaError::new(kind, message)
}

fn random_message(rng: &mut StdRng) -> Message {
    let id = rng.random();
    match rng.random_range(0..12) {
        0 => Message::MutationRequest {
            id,
            mutations: (0..rng.random_range(0..6))
                .map(|_| Mutation {
                    table: rng.random(),
                    token: rng.random(),
                    partition: random_bytes(rng, 32),
                    kind: if rng.random_bool(0.7) {
                        MutationKind::Row {
                            clustering: random_bytes(rng, 16),
                            update: random_row(rng),
                        }
                    } else {
                        MutationKind::DeleteRange {
                            start: random_bound(rng),
                            end: random_bound(rng),
                            deletion: random_deletion(rng),
                        }
                    },
                })
                .collect::<Vec<_>>()
                .into(),
        },
        1 => Message::MutationResponse {
            id,
            result: if rng.random_bool(0.5) {
                Ok(())
            } else {
                Err(random_error(rng))
            },
        },
        2 => Message::ReadRequest {
            id,
            command: if rng.random_bool(0.5) {
                ReadCommand::Partition(PartitionRead {
                    table: rng.random(),
                    token: rng.random(),
                    partition: random_bytes(rng, 32),
                    start: random_bound(rng),
                    end: random_bound(rng),
                    reverse: rng.random(),
                    limit: rng.random::<u64>() as usize,
                })
            } else {
                ReadCommand::Range(RangeRead {
                    table: rng.random(),
                    start: if rng.random_bool(0.5) {
                        RangeStart::Token(rng.random())
                    } else {
                        RangeStart::After(RowPosition {
                            token: rng.random(),
                            partition: random_bytes(rng, 32),
                            clustering: rng.random_bool(0.5).then(|| random_bytes(rng, 16)),
                        })
                    },
                    end_token: rng.random(),
                    limit: rng.random::<u64>() as usize,
                    index: None,
                })
            },
            digest_only: rng.random(),
        },
        3 => Message::ReadResponse {
            id,
            result: match rng.random_range(0..3) {
                0 => Ok(ReadReply::Data(ReadResponse {
                    rows: (0..rng.random_range(0..6))
                        .map(|_| ReplicaRow {
                            token: rng.random(),
                            partition: random_bytes(rng, 32),
                            clustering: random_bytes(rng, 16),
                            row: random_row(rng),
                        })
                        .collect(),
                    more: rng.random(),
                    tombstones: if rng.random() {
                        vec![sample_tombstones()]
                    } else {
                        Vec::new()
                    },
                })),
                1 => Ok(ReadReply::Digest {
                    digest: rng.random(),
                    more: rng.random(),
                }),
                _ => Err(random_error(rng)),
            },
        },
        4 => Message::MetadataRequest {
            id,
            payload: random_bytes(rng, 100),
        },
        5 => Message::MetadataResponse {
            id,
            payload: random_bytes(rng, 100),
        },
        6 => Message::Ping { id },
        7 => Message::StreamRequest {
            id,
            request: StreamRequest {
                table: rng.random(),
                range: TokenRange {
                    start_exclusive: rng.random_range(i64::MIN..0),
                    end_inclusive: rng.random_range(0..i64::MAX),
                },
                after: rng.random_bool(0.5).then(|| rng.random()),
                max_bytes: rng.random_range(0..=STREAM_REQUEST_BYTES_MAX as u32),
            },
        },
        8 => Message::StreamResponse {
            id,
            result: if rng.random_bool(0.7) {
                Ok(StreamChunk {
                    bytes: random_bytes(rng, 200),
                    records: rng.random(),
                    data_bytes: rng.random(),
                    next: rng.random_bool(0.5).then(|| rng.random()),
                    total: rng.random_bool(0.5).then(|| RangeSize {
                        records: rng.random(),
                        bytes: rng.random(),
                    }),
                })
            } else {
                Err(random_error(rng))
            },
        },
        9 => Message::TopologyRequest {
            id,
            payload: random_bytes(rng, 100),
        },
        10 => Message::TopologyResponse {
            id,
            payload: random_bytes(rng, 100),
        },
        _ => Message::Pong { id },
    }
}

#[test]
fn random_messages_round_trip() {
    for seed in seeds() {
        let outcome = catch_unwind(|| {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut stream = Vec::new();
            let mut sent = Vec::new();
            for _ in 0..500 {
                let m = random_message(&mut rng);
                round_trip(&m);
                encode(&m, VERSION, &mut stream).expect("encodes");
                sent.push(m);
            }
            // The same messages cut out of one stream, as a reader does.
            let mut rest = &stream[..];
            for m in &sent {
                let n = frame_bytes(rest).expect("length").expect("whole frame");
                assert_eq!(&decode(&rest[..n]).expect("decodes"), m);
                rest = &rest[n..];
            }
            assert!(rest.is_empty());
        });
        if let Err(panic) = outcome {
            eprintln!("random round trip failed at seed {seed}; replay with HAYATE_SEED={seed}");
            std::panic::resume_unwind(panic);
        }
    }
}

#[test]
fn random_damage_never_panics() {
    for seed in seeds() {
        let outcome = catch_unwind(|| {
            let mut rng = StdRng::seed_from_u64(seed);
            for _ in 0..300 {
                let mut frame = Vec::new();
                encode(&random_message(&mut rng), VERSION, &mut frame).expect("encodes");
                for _ in 0..rng.random_range(1..4) {
                    let i = rng.random_range(OFFSET_VERSION..frame.len());
                    frame[i] = rng.random();
                }
                if rng.random_bool(0.3) {
                    let cut = rng.random_range(FRAME_HEADER_BYTES..=frame.len());
                    frame.truncate(cut);
                }
                seal(&mut frame);
                let _ = decode(&frame);
            }
        });
        if let Err(panic) = outcome {
            eprintln!("random damage panicked at seed {seed}; replay with HAYATE_SEED={seed}");
            std::panic::resume_unwind(panic);
        }
    }
}

// The handshake.

fn hello() -> Hello {
    Hello {
        max_version: VERSION,
        lane: Lane::Bulk,
        sender: HostId([7; 16]),
        cluster_name: "Test Cluster".to_owned(),
    }
}

#[test]
fn a_hello_round_trips_and_agrees_on_a_version() {
    let mut out = Vec::new();
    hello().encode(&mut out);
    assert_eq!(out.len(), handshake::HELLO_FIXED_BYTES + "Test Cluster".len());
    assert_eq!(&out[..4], b"HYT1");
    assert_eq!(Hello::decode(&out), Ok(hello()));
    let reply = hello().accept("Test Cluster").expect("same cluster");
    assert_eq!(reply.version, VERSION);
    assert_eq!(HelloReply::decode(&reply.encode()), Ok(VERSION));

    // A newer caller is answered with our version.
    let newer = Hello {
        max_version: VERSION + 3,
        ..hello()
    };
    assert_eq!(newer.accept("Test Cluster").map(|r| r.version), Ok(VERSION));
}

#[test]
fn a_hello_from_another_cluster_or_protocol_is_refused() {
    let e = hello().accept("Other").expect_err("another cluster");
    assert_eq!(
        e,
        HandshakeError::OtherCluster {
            ours: "Other".to_owned(),
            theirs: "Test Cluster".to_owned()
        }
    );
    let text = e.to_string();
    assert!(
        text.contains("'Other'") && text.contains("'Test Cluster'"),
        "{text}"
    );
    let ancient = Hello {
        max_version: 0,
        ..hello()
    };
    assert!(matches!(
        ancient.accept("Test Cluster"),
        Err(HandshakeError::NoCommonVersion { theirs_max: 0 })
    ));
    assert_eq!(
        HelloReply::decode(&HelloReply::REFUSED.encode()),
        Err(HandshakeError::Refused)
    );

    let mut out = Vec::new();
    hello().encode(&mut out);
    let mut http = out.clone();
    http[..4].copy_from_slice(b"GET ");
    assert!(matches!(
        Hello::decode(&http),
        Err(HandshakeError::BadMagic { .. })
    ));
    let mut lane = out.clone();
    lane[5] = 9;
    assert_eq!(Hello::decode(&lane), Err(HandshakeError::UnknownLane { tag: 9 }));
    let mut long = out.clone();
    long[22..24].copy_from_slice(&(handshake::CLUSTER_NAME_BYTES_MAX as u16 + 1).to_be_bytes());
    assert!(matches!(
        Hello::decode(&long),
        Err(HandshakeError::ClusterNameTooLong { .. })
    ));
    for cut in 0..out.len() {
        assert!(Hello::decode(&out[..cut]).is_err(), "cut at {cut}");
    }
    let mut latin1 = out.clone();
    let last = latin1.len() - 1;
    latin1[last] = 0xff;
    assert_eq!(Hello::decode(&latin1), Err(HandshakeError::BadUtf8));
}

fn sample_tombstones() -> crate::replica::ReplicaTombstones {
    let mut t = hayate_storage::PartitionTombstones::of(
        std::ops::Bound::Unbounded,
        std::ops::Bound::Unbounded,
        Deletion {
            timestamp_us: 50,
            deleted_at_s: 7,
        },
    );
    t.merge(hayate_storage::PartitionTombstones::of(
        std::ops::Bound::Included(b"a".to_vec()),
        std::ops::Bound::Excluded(b"c".to_vec()),
        Deletion {
            timestamp_us: 90,
            deleted_at_s: 8,
        },
    ));
    crate::replica::ReplicaTombstones {
        token: 3,
        partition: b"p".to_vec(),
        tombstones: t,
    }
}

/// A peer that speaks only version 1 hears a data reply without the tombstones (its rows carry
/// the deletions covering them already); version 2 carries them.
#[test]
fn a_version_1_data_reply_leaves_the_tombstones_out() {
    let message = Message::ReadResponse {
        id: 4,
        result: Ok(ReadReply::Data(ReadResponse {
            rows: Vec::new(),
            more: false,
            tombstones: vec![sample_tombstones()],
        })),
    };
    let mut v1 = Vec::new();
    encode(&message, 1, &mut v1).expect("encodes");
    match decode(&v1).expect("decodes") {
        Message::ReadResponse {
            result: Ok(ReadReply::Data(r)),
            ..
        } => assert!(r.tombstones.is_empty()),
        other => panic!("unexpected {other:?}"),
    }
    let mut v2 = Vec::new();
    encode(&message, 2, &mut v2).expect("encodes");
    assert_eq!(decode(&v2).expect("decodes"), message);
}

#[test]
fn paxos_messages_round_trip_and_travel_only_from_version_5() {
    use crate::paxos::acceptor::PaxosState;
    use crate::paxos::{Ballot, PaxosKey, PaxosReply, PaxosRequest, Proposal};
    use std::sync::Arc;

    let ballot = Ballot {
        micros: 1_700_000_000_123_456,
        node: 0x0123_4567_89ab_cdef,
    };
    let update = Arc::new(vec![mutation(MutationKind::Row {
        clustering: b"ck".to_vec(),
        update: rich_row(),
    })]);
    let proposal = Proposal { ballot, update };
    let key = PaxosKey {
        table: 7,
        token: -1_234_567_890_123,
        partition: b"partition".to_vec(),
    };
    let read = PartitionRead {
        table: 7,
        token: -1_234_567_890_123,
        partition: b"partition".to_vec(),
        start: Bound::Included(b"ck".to_vec()),
        end: Bound::Unbounded,
        reverse: false,
        limit: 10,
    };
    let data = ReadResponse {
        rows: vec![ReplicaRow {
            token: -1_234_567_890_123,
            partition: b"partition".to_vec(),
            clustering: b"ck".to_vec(),
            row: rich_row(),
        }],
        more: false,
        tombstones: Vec::new(),
    };
    let messages = vec![
        Message::PaxosRequest {
            id: 1,
            request: PaxosRequest::Prepare { ballot, read },
        },
        Message::PaxosRequest {
            id: 2,
            request: PaxosRequest::Propose {
                key: key.clone(),
                proposal: proposal.clone(),
            },
        },
        Message::PaxosRequest {
            id: 3,
            request: PaxosRequest::Commit {
                key,
                proposal: proposal.clone(),
            },
        },
        Message::PaxosResponse {
            id: 4,
            result: Ok(PaxosReply::Promised {
                accepted: Some(proposal.clone()),
                committed: None,
                data,
            }),
        },
        Message::PaxosResponse {
            id: 5,
            result: Ok(PaxosReply::Refused { promised: ballot }),
        },
        Message::PaxosResponse {
            id: 6,
            result: Ok(PaxosReply::Accepted),
        },
        Message::PaxosResponse {
            id: 7,
            result: Ok(PaxosReply::Committed),
        },
        Message::PaxosResponse {
            id: 8,
            result: Err(ReplicaError::new(ReplicaErrorKind::Failed, "disk on fire")),
        },
    ];
    for m in &messages {
        let frame = round_trip(m);
        // Every truncation is refused, never a panic.
        for cut in 0..frame.len() {
            assert!(decode(&frame[..cut]).is_err(), "a frame cut at {cut} decoded");
        }
        let mut out = Vec::new();
        assert_eq!(
            encode(m, VERSION_PAXOS - 1, &mut out),
            Err(EncodeError::NotInVersion {
                kind: m.kind(),
                version: VERSION_PAXOS - 1
            })
        );
        assert!(out.is_empty());
    }
    // The replica's state record.
    let state = PaxosState {
        promised: ballot,
        accepted: Some(proposal.clone()),
        committed: Some(proposal),
    };
    let bytes = paxos::encode_state(&state).expect("encodes");
    assert_eq!(paxos::decode_state(&bytes), Ok(state));
    assert!(paxos::decode_state(&bytes[..bytes.len() - 1]).is_err());
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(paxos::decode_state(&longer).is_err());
    assert!(
        paxos::decode_state(&[9]).is_err(),
        "an unknown state format is refused"
    );
}

#[test]
fn counter_messages_round_trip_and_travel_only_from_version_5() {
    use crate::counter::CounterUpdate;

    let messages = vec![
        Message::CounterRequest {
            id: 1,
            timestamp_us: 1_700_000_000_000_000,
            updates: vec![
                CounterUpdate {
                    table: 7,
                    token: -5,
                    partition: b"views".to_vec(),
                    clustering: b"ck".to_vec(),
                    column: 3,
                    delta: -42,
                },
                CounterUpdate {
                    table: 7,
                    token: -5,
                    partition: b"views".to_vec(),
                    clustering: Vec::new(),
                    column: 4,
                    delta: i64::MAX,
                },
            ],
        },
        Message::CounterResponse {
            id: 2,
            result: Ok(vec![mutation(MutationKind::Row {
                clustering: b"ck".to_vec(),
                update: rich_row(),
            })]),
        },
        Message::CounterResponse {
            id: 3,
            result: Err(ReplicaError::new(ReplicaErrorKind::Refused, "device full")),
        },
    ];
    for m in &messages {
        let frame = round_trip(m);
        for cut in 0..frame.len() {
            assert!(decode(&frame[..cut]).is_err(), "a frame cut at {cut} decoded");
        }
        let mut out = Vec::new();
        assert_eq!(
            encode(m, VERSION_PAXOS - 1, &mut out),
            Err(EncodeError::NotInVersion {
                kind: m.kind(),
                version: VERSION_PAXOS - 1
            })
        );
    }
}
