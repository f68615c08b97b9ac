//! The row format: every kind of cell and deletion survives a round trip in every frame version,
//! the layout of versions 1 to 3 stays the bytes older builds send, and a decoder given cut or
//! random bytes answers with an error, never a panic. Randomized tests run fixed seeds; replay
//! one with `HAYATE_SEED=<seed> cargo test -p hayate-cluster message::row`.

use std::ops::Bound;
use std::panic::{catch_unwind, AssertUnwindSafe};

use hayate_storage::fuzzing::canonical_row;
use hayate_storage::{Cell, CellValue, Deletion, Liveness, PartitionTombstones, Row};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::super::wire::Reader;
use super::super::{row_v1, DecodeError, EncodeError, VERSION, VERSION_MIN, VERSION_ROWS};
use super::*;

const SEEDS: &[u64] = &[1, 2, 3, 42, 0xdead_beef, 7_777_777];

fn seeds() -> Vec<u64> {
    match std::env::var("HAYATE_SEED") {
        Ok(s) => vec![s.trim().parse().expect("HAYATE_SEED must be an unsigned integer")],
        Err(_) => SEEDS.to_vec(),
    }
}

fn deletion(timestamp_us: i64, deleted_at_s: u32) -> Deletion {
    Deletion {
        timestamp_us,
        deleted_at_s,
    }
}

fn cell(column: u32, path: &[u8], timestamp_us: i64, value: CellValue) -> Cell {
    Cell {
        column,
        path: path.to_vec(),
        timestamp_us,
        value,
    }
}

fn live(value: &[u8]) -> CellValue {
    CellValue::Live {
        value: value.to_vec(),
        ttl_s: 0,
        expires_at_s: 0,
    }
}

fn expiring(value: &[u8], ttl_s: u32, expires_at_s: u32) -> CellValue {
    CellValue::Live {
        value: value.to_vec(),
        ttl_s,
        expires_at_s,
    }
}

/// One row for each thing a row can hold, alone, then all of them together.
fn rows_of_every_kind() -> Vec<Row> {
    let now_us = 1_700_000_000_000_000;
    let mut rows = vec![
        Row::default(),
        Row {
            liveness: Some(Liveness {
                timestamp_us: now_us,
                ttl_s: 0,
                expires_at_s: 0,
            }),
            ..Row::default()
        },
        Row {
            liveness: Some(Liveness {
                timestamp_us: now_us,
                ttl_s: 86_400,
                expires_at_s: 1_700_086_400,
            }),
            ..Row::default()
        },
        Row::deleted(now_us, 1_700_000_000),
        Row {
            column_deletions: vec![
                (3, deletion(now_us - 1, 1_699_999_999)),
                (u32::MAX, deletion(0, 0)),
            ],
            ..Row::default()
        },
        // A live cell, an expiring one, a tombstone; an empty value; the largest column.
        Row {
            cells: vec![
                cell(1, b"", now_us, live(b"value")),
                cell(2, b"", now_us + 1, expiring(b"short-lived", 60, 1_700_000_060)),
                cell(
                    3,
                    b"",
                    now_us - 5,
                    CellValue::Tombstone {
                        deleted_at_s: 1_700_000_000,
                    },
                ),
                cell(4, b"", now_us, live(b"")),
                cell(u32::MAX, b"", now_us, live(&[0xff; 300])),
            ],
            ..Row::default()
        },
        // Collection elements (a path): live, expiring and deleted, under a column deletion, as
        // `SET m = {...}` and `UPDATE ... SET m[k] = null` write them.
        Row {
            column_deletions: vec![(7, deletion(now_us - 1, 1_700_000_000))],
            cells: vec![
                cell(7, b"a", now_us, live(b"1")),
                cell(7, b"b", now_us, expiring(b"2", 10, 1_700_000_010)),
                cell(
                    7,
                    b"c",
                    now_us,
                    CellValue::Tombstone {
                        deleted_at_s: 1_700_000_000,
                    },
                ),
                cell(7, &[0; 200], now_us, live(&[1; 200])),
            ],
            ..Row::default()
        },
        // Timestamps at the ends of i64: the deltas wrap and must come back exact.
        Row {
            liveness: Some(Liveness {
                timestamp_us: i64::MIN,
                ttl_s: u32::MAX,
                expires_at_s: u32::MAX,
            }),
            deletion: Some(deletion(i64::MAX, u32::MAX)),
            cells: vec![cell(0, b"", i64::MIN, live(b"x")), cell(1, b"", -1, live(b"y"))],
            ..Row::default()
        },
    ];
    let mut everything = Row::default();
    for r in &rows {
        let mut r = r.clone();
        everything.liveness = everything.liveness.or(r.liveness);
        everything.deletion = everything.deletion.or(r.deletion);
        everything.column_deletions.append(&mut r.column_deletions);
        everything.cells.append(&mut r.cells);
    }
    everything.normalize();
    rows.push(everything);
    rows
}

fn tombstones_of_every_kind() -> Vec<PartitionTombstones> {
    let d = deletion(1_700_000_000_000_000, 1_700_000_000);
    let mut both = PartitionTombstones::of(Bound::Unbounded, Bound::Unbounded, deletion(5, 1));
    for (start, end) in [
        (Bound::Included(b"a".to_vec()), Bound::Excluded(b"c".to_vec())),
        (Bound::Unbounded, Bound::Included(Vec::new())),
        (Bound::Excluded(b"x".to_vec()), Bound::Unbounded),
    ] {
        both.merge(PartitionTombstones::of(start, end, d));
    }
    vec![
        PartitionTombstones::default(),
        PartitionTombstones::of(Bound::Unbounded, Bound::Unbounded, d),
        PartitionTombstones::of(Bound::Included(b"k".to_vec()), Bound::Included(b"k".to_vec()), d),
        both,
    ]
}

fn encode_row(row: &Row, version: u8) -> Vec<u8> {
    let mut out = Vec::new();
    if version >= VERSION_ROWS {
        put_row(&mut out, row).expect("encodes");
    } else {
        row_v1::put_row(&mut out, row);
    }
    out
}

fn decode_row(b: &[u8], version: u8) -> Result<Row, DecodeError> {
    let mut r = Reader::new(b);
    let row = if version >= VERSION_ROWS {
        get_row(&mut r)?
    } else {
        row_v1::get_row(&mut r)?
    };
    match r.remaining() {
        0 => Ok(row),
        bytes => Err(DecodeError::TrailingBytes { what: "row", bytes }),
    }
}

fn encode_tombstones(t: &PartitionTombstones, version: u8) -> Vec<u8> {
    let mut out = Vec::new();
    if version >= VERSION_ROWS {
        put_tombstones(&mut out, t).expect("encodes");
    } else {
        row_v1::put_tombstones(&mut out, t);
    }
    out
}

fn decode_tombstones(b: &[u8], version: u8) -> Result<PartitionTombstones, DecodeError> {
    let mut r = Reader::new(b);
    let t = if version >= VERSION_ROWS {
        get_tombstones(&mut r)?
    } else {
        row_v1::get_tombstones(&mut r)?
    };
    match r.remaining() {
        0 => Ok(t),
        bytes => Err(DecodeError::TrailingBytes {
            what: "tombstones",
            bytes,
        }),
    }
}

#[test]
fn every_cell_kind_round_trips_in_every_version() {
    for version in VERSION_MIN..=VERSION {
        for row in rows_of_every_kind() {
            let bytes = encode_row(&row, version);
            assert_eq!(
                decode_row(&bytes, version).as_ref(),
                Ok(&row),
                "version {version}"
            );
        }
        for t in tombstones_of_every_kind() {
            let bytes = encode_tombstones(&t, version);
            assert_eq!(
                decode_tombstones(&bytes, version).as_ref(),
                Ok(&t),
                "version {version}"
            );
        }
    }
}

/// An expiry time under a TTL of 0 means nothing (such a cell never expires) and does not
/// travel, in any version: the row arrives with 0 there, as it always has.
#[test]
fn an_expiry_without_a_ttl_does_not_travel() {
    let row = Row {
        liveness: Some(Liveness {
            timestamp_us: 9,
            ttl_s: 0,
            expires_at_s: 77,
        }),
        cells: vec![cell(1, b"", 9, expiring(b"v", 0, 77))],
        ..Row::default()
    };
    let canonical = Row {
        liveness: Some(Liveness {
            timestamp_us: 9,
            ttl_s: 0,
            expires_at_s: 0,
        }),
        cells: vec![cell(1, b"", 9, live(b"v"))],
        ..Row::default()
    };
    for version in VERSION_MIN..=VERSION {
        assert_eq!(
            decode_row(&encode_row(&row, version), version),
            Ok(canonical.clone())
        );
    }
}

/// The row format exists to be smaller and apart from the disk: a typical row written at once
/// takes fewer bytes than in the version 1 layout (no body length, no empty column deletion
/// count).
#[test]
fn the_row_format_is_smaller_than_the_version_1_layout() {
    for row in rows_of_every_kind() {
        let new = encode_row(&row, VERSION).len();
        let old = encode_row(&row, 1).len();
        assert!(new < old, "{new} bytes against {old} for {row:?}");
    }
}

/// Versions 1 to 3 carry the storage engine's record body as it was when version 4 came: the
/// bytes a node of an older build sends and expects, and what a read digest hashes. These are
/// those bytes, so a change to the frozen layout (or to the engine's body, were it still used
/// here) shows up as a failing test rather than as replicas of two builds that no longer
/// understand each other.
#[test]
fn the_version_1_layout_is_the_bytes_older_builds_send() {
    let row = Row {
        liveness: Some(Liveness {
            timestamp_us: 1_000,
            ttl_s: 60,
            expires_at_s: 5_000,
        }),
        deletion: Some(deletion(10, 7)),
        column_deletions: vec![(3, deletion(20, 8))],
        cells: vec![
            Cell::live(1, 1_000, vec![7; 3]),
            Cell::tombstone(2, 900, 77),
            cell(3, b"key", 1_200, expiring(b"v", 9, 99)),
        ],
    };
    assert_eq!(hex(&encode_row(&row, 1)), ROW_V1_HEX);
    let t = &tombstones_of_every_kind()[3];
    assert_eq!(hex(&encode_tombstones(t, 1)), TOMBSTONES_V1_HEX);
}

const ROW_V1_HEX: &str = "00000000000004b000000035078f033c88130000cb12070000000103b712080000000301008f03030707070201d7044d0000000306000963000000036b65790176";
const TOMBSTONES_V1_HEX: &str =
    "00060a24181e40000000002701f5fff18183898506010000000304000000f1536509016101630000f153650201780000f15365";

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The decoders refuse what no encoder writes, by name.
#[test]
fn what_no_encoder_writes_is_refused() {
    let base = encode_row(&Row::default(), VERSION);
    let flags_at = 8;
    for flags in [16u8, 0x80, ROW_LIVENESS_EXPIRES] {
        let mut b = base.clone();
        b[flags_at] = flags;
        assert!(
            matches!(
                decode_row(&b, VERSION),
                Err(DecodeError::BadTag {
                    what: "row flags",
                    ..
                })
            ),
            "flags {flags:#x}"
        );
    }
    let one_cell = Row {
        cells: vec![cell(1, b"", 0, live(b"v"))],
        ..Row::default()
    };
    let b = encode_row(&one_cell, VERSION);
    let kind_at = 8 + 1 + 1 + 1; // base, flags, cell count, column
    for kind in [CELL_KIND_MASK, 8, 0x80] {
        let mut b = b.clone();
        b[kind_at] = kind;
        assert!(
            matches!(
                decode_row(&b, VERSION),
                Err(DecodeError::BadTag {
                    what: "cell kind",
                    ..
                })
            ),
            "kind {kind:#x}"
        );
    }
    // A count over the bound is refused before anything is allocated for it.
    let mut b = base.clone();
    b.truncate(9);
    super::super::wire::put_varint(&mut b, CELLS_PER_ROW_MAX as u64 + 1);
    assert!(matches!(
        decode_row(&b, VERSION),
        Err(DecodeError::TooMany { what: "cells", .. })
    ));
    // An eleven-byte varint.
    let mut b = base.clone();
    b.truncate(9);
    b.extend_from_slice(&[0xff; 10]);
    b.push(0);
    assert!(matches!(
        decode_row(&b, VERSION),
        Err(DecodeError::BadVarint { .. })
    ));
    // Too many cells to encode: refused before a byte is written that no replica could read.
    let huge = Row {
        cells: (0..=CELLS_PER_ROW_MAX as u32)
            .map(|c| Cell::live(c, 0, Vec::new()))
            .collect(),
        ..Row::default()
    };
    assert!(matches!(
        put_row(&mut Vec::new(), &huge),
        Err(EncodeError::TooMany { .. })
    ));
}

/// Every prefix of a row or of tombstones is an error, in every version: a row is
/// self-delimiting, so a cut one cannot pass for a shorter row.
#[test]
fn every_truncation_is_an_error() {
    for version in VERSION_MIN..=VERSION {
        for row in rows_of_every_kind() {
            let bytes = encode_row(&row, version);
            for cut in 0..bytes.len() {
                assert!(
                    decode_row(&bytes[..cut], version).is_err(),
                    "v{version} cut at {cut} of {row:?}"
                );
            }
        }
        for t in tombstones_of_every_kind() {
            let bytes = encode_tombstones(&t, version);
            for cut in 0..bytes.len() {
                assert!(
                    decode_tombstones(&bytes[..cut], version).is_err(),
                    "v{version} cut at {cut}"
                );
            }
        }
    }
}

/// Damaged and random bytes decode to something or to an error, never to a panic, and what
/// decodes from the row format encodes back to a row that decodes the same.
#[test]
fn garbage_never_panics() {
    for seed in seeds() {
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let mut rng = StdRng::seed_from_u64(seed);
            let samples = rows_of_every_kind();
            let tombstones = tombstones_of_every_kind();
            for _ in 0..2_000 {
                let version = rng.random_range(VERSION_MIN..=VERSION);
                let mut bytes = if rng.random_bool(0.5) {
                    encode_row(&samples[rng.random_range(0..samples.len())], version)
                } else {
                    encode_tombstones(&tombstones[rng.random_range(0..tombstones.len())], version)
                };
                if rng.random_bool(0.2) {
                    let len = rng.random_range(0..64);
                    bytes = (0..len).map(|_| rng.random()).collect();
                } else if !bytes.is_empty() {
                    for _ in 0..rng.random_range(1..4) {
                        let i = rng.random_range(0..bytes.len());
                        bytes[i] = rng.random();
                    }
                }
                if let Ok(row) = decode_row(&bytes, version) {
                    let again = encode_row(&row, version);
                    assert_eq!(decode_row(&again, version), Ok(canonical_row(row)));
                }
                if let Ok(t) = decode_tombstones(&bytes, version) {
                    let again = encode_tombstones(&t, version);
                    assert_eq!(decode_tombstones(&again, version), Ok(t));
                }
            }
        }));
        if let Err(panic) = outcome {
            eprintln!("garbage panicked at seed {seed}; replay with HAYATE_SEED={seed}");
            std::panic::resume_unwind(panic);
        }
    }
}
