//! The engine beside a model: a `BTreeMap` of rows that implements last-write-wins per cell (with
//! Cassandra's tie-breaks), row and collection deletions and TTLs in the simplest form that can
//! be right, written without the engine's `row` module. A seeded random walk drives both through
//! writes, partial updates with older, newer and equal timestamps, deletes, TTLs and a moving
//! clock, defragmentation and expiry passes, and reopens: clean (index snapshot), unclean (scan)
//! and a power failure that loses every unsynced write. After each group of steps every row, a
//! paged scan of each table, a token-range scan and a clustering-range partition read must agree
//! with the model.
//!
//! Replay a failure with `HAYATE_SEED=<seed> cargo test -p hayate-storage --test model`.
//!
//! Two more tests share the fault-injecting device: concurrent writers to disjoint cells of the
//! same rows lose no update, and crashes that tear or reorder unsynced writes lose nothing that
//! was synced and serve nothing that was never written.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{device_config, open_on, Crash, FaultyDevice, Rng};
use hayate_storage::token::token;
use hayate_storage::{
    Cell, CellValue, Clock, Deletion, Engine, Liveness, ManualClock, NamespaceConfig, PartitionKey, Row,
    RowKey, RowsFrom, ScanFrom, WriteError,
};

const BLOCK_BYTES: u64 = 128 << 10;
/// Small enough that the writes of one seed wrap around it several times: defragmentation has
/// to free blocks for the test to get through.
const DEVICE_BLOCKS: u64 = 48;
const STEPS: u64 = 6_000;
const CHECK_EVERY: u64 = 100;
const SEEDS: &[u64] = &[1, 2, 3, 0x5eed_cafe];
const START_US: i64 = 1_700_000_000_000_000;

/// Rows of this table take timestamps older than, equal to and newer than what they hold, and
/// never expire.
const LWW: u32 = 1;
/// Rows of this table take TTLs; their timestamps only grow. The engine drops expired data for
/// good (an expired row's entry is reclaimed at once, as Aerospike does, not after a grace
/// period), so a write with an older timestamp than expired data may be kept by the engine where
/// Cassandra would drop it; the model does not go there.
const TTL: u32 = 2;
/// A non-frozen collection: its cells have paths, and whole-column deletions clear it.
const COLLECTION: u32 = 9;

const LWW_PARTITIONS: u64 = 12;
const TTL_PARTITIONS: u64 = 8;
/// Clustering keys of the LWW table: different lengths, and three that share their first eight
/// bytes so that only the digest and the full key order them in the index.
const CLUSTERINGS: &[&[u8]] = &[
    b"",
    b"\x01",
    b"\x02\x00",
    b"abcdefgh",
    b"abcdefgh-1",
    b"abcdefgh-2",
    b"zz",
];
const TTL_CLUSTERINGS: &[&[u8]] = &[b"", b"c"];

type Key = (u32, Vec<u8>, Vec<u8>);

// ---------------------------------------------------------------------------------------------
// The model.

#[derive(Clone, Debug)]
enum MValue {
    Live {
        value: Vec<u8>,
        expires_at_s: Option<u32>,
    },
    Tombstone {
        deleted_at_s: u32,
    },
}

#[derive(Clone, Debug)]
struct MCell {
    ts: i64,
    value: MValue,
}

impl MCell {
    /// Which version of a cell wins, as one ordering (the greater wins): the timestamp; on a
    /// tie a tombstone beats an expiring cell, which beats a permanent one; then the later
    /// deletion or expiry time; last the greater value.
    fn rank(&self) -> (i64, u8, u32, &[u8]) {
        match &self.value {
            MValue::Live {
                value,
                expires_at_s: None,
            } => (self.ts, 0, 0, value),
            MValue::Live {
                value,
                expires_at_s: Some(at),
            } => (self.ts, 1, *at, value),
            MValue::Tombstone { deleted_at_s } => (self.ts, 2, *deleted_at_s, &[]),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct MLiveness {
    ts: i64,
    expires_at_s: Option<u32>,
}

impl MLiveness {
    /// Newer timestamp; on a tie expiring beats permanent, then the later expiry.
    fn rank(&self) -> (i64, bool, u32) {
        (
            self.ts,
            self.expires_at_s.is_some(),
            self.expires_at_s.unwrap_or(0),
        )
    }
}

/// Everything ever written to a row, reduced to the winners: a deletion's timestamp shadows
/// everything at or before it, forever (the model never reaches the tombstone grace period).
#[derive(Clone, Debug, Default)]
struct MRow {
    liveness: Option<MLiveness>,
    deleted_ts: Option<i64>,
    column_deleted_ts: BTreeMap<u32, i64>,
    cells: BTreeMap<(u32, Vec<u8>), MCell>,
}

/// A live cell as a read returns it: column, path, timestamp, value, expiry.
type VisibleCell = (u32, Vec<u8>, i64, Vec<u8>, Option<u32>);

/// What a read returns: the row marker and the live cells, with timestamps and expiry.
#[derive(Clone, PartialEq, Eq)]
struct Visible {
    liveness: Option<(i64, Option<u32>)>,
    cells: Vec<VisibleCell>,
}

impl std::fmt::Debug for Visible {
    /// Values as their length and first bytes, so that a failure message stays readable.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "marker {:?}, cells [", self.liveness)?;
        for (column, path, ts, value, expires) in &self.cells {
            let head = &value[..value.len().min(4)];
            write!(
                f,
                " {column}{path:?}@{ts} = {} bytes {head:02x?}.. expires {expires:?};",
                value.len()
            )?;
        }
        write!(f, " ]")
    }
}

/// One write: the pieces a CQL statement would produce.
#[derive(Clone, Debug, Default)]
struct Update {
    liveness: Option<MLiveness>,
    deletion_ts: Option<i64>,
    column_deletion: Option<(u32, i64)>,
    cells: Vec<((u32, Vec<u8>), MCell)>,
}

impl MRow {
    fn apply(&mut self, u: &Update) {
        if let Some(l) = u.liveness {
            if self.liveness.is_none_or(|old| l.rank() > old.rank()) {
                self.liveness = Some(l);
            }
        }
        if let Some(ts) = u.deletion_ts {
            self.deleted_ts = Some(self.deleted_ts.map_or(ts, |d| d.max(ts)));
        }
        if let Some((column, ts)) = u.column_deletion {
            let d = self.column_deleted_ts.entry(column).or_insert(ts);
            *d = (*d).max(ts);
        }
        for (k, c) in &u.cells {
            match self.cells.get(k) {
                Some(old) if old.rank() >= c.rank() => {}
                _ => {
                    self.cells.insert(k.clone(), c.clone());
                }
            }
        }
    }

    fn visible(&self, now_s: u32) -> Option<Visible> {
        let shadowed = |ts: i64, column: Option<u32>| {
            self.deleted_ts.is_some_and(|d| ts <= d)
                || column
                    .and_then(|c| self.column_deleted_ts.get(&c))
                    .is_some_and(|d| ts <= *d)
        };
        let alive = |expires_at_s: Option<u32>| expires_at_s.is_none_or(|at| at > now_s);
        let liveness = self
            .liveness
            .filter(|l| !shadowed(l.ts, None) && alive(l.expires_at_s))
            .map(|l| (l.ts, l.expires_at_s));
        let mut cells = Vec::new();
        for ((column, path), c) in &self.cells {
            if let MValue::Live { value, expires_at_s } = &c.value {
                if !shadowed(c.ts, Some(*column)) && alive(*expires_at_s) {
                    cells.push((*column, path.clone(), c.ts, value.clone(), *expires_at_s));
                }
            }
        }
        (liveness.is_some() || !cells.is_empty()).then_some(Visible { liveness, cells })
    }
}

/// The engine's answer in the model's terms.
fn seen(row: &Row) -> Visible {
    Visible {
        liveness: row
            .liveness
            .map(|l| (l.timestamp_us, (l.ttl_s != 0).then_some(l.expires_at_s))),
        cells: row
            .cells
            .iter()
            .map(|c| match &c.value {
                CellValue::Live {
                    value,
                    ttl_s,
                    expires_at_s,
                } => (
                    c.column,
                    c.path.clone(),
                    c.timestamp_us,
                    value.clone(),
                    (*ttl_s != 0).then_some(*expires_at_s),
                ),
                CellValue::Tombstone { .. } => panic!("a read returned a tombstone cell: {c:?}"),
            })
            .collect(),
    }
}

/// The update as the engine takes it.
fn to_engine_row(u: &Update, now_s: u32) -> Row {
    let ttl = |at: u32| {
        assert!(at > now_s, "TTLs are at least a second");
        at - now_s
    };
    let mut row = Row {
        liveness: u.liveness.map(|l| Liveness {
            timestamp_us: l.ts,
            ttl_s: l.expires_at_s.map_or(0, ttl),
            expires_at_s: l.expires_at_s.unwrap_or(0),
        }),
        deletion: u.deletion_ts.map(|ts| Deletion {
            timestamp_us: ts,
            deleted_at_s: now_s,
        }),
        column_deletions: u
            .column_deletion
            .map(|(c, ts)| {
                vec![(
                    c,
                    Deletion {
                        timestamp_us: ts,
                        deleted_at_s: now_s,
                    },
                )]
            })
            .unwrap_or_default(),
        cells: u
            .cells
            .iter()
            .map(|((column, path), c)| Cell {
                column: *column,
                path: path.clone(),
                timestamp_us: c.ts,
                value: match &c.value {
                    MValue::Live { value, expires_at_s } => CellValue::Live {
                        value: value.clone(),
                        ttl_s: expires_at_s.map_or(0, ttl),
                        expires_at_s: expires_at_s.unwrap_or(0),
                    },
                    MValue::Tombstone { deleted_at_s } => CellValue::Tombstone {
                        deleted_at_s: *deleted_at_s,
                    },
                },
            })
            .collect(),
    };
    row.normalize();
    row
}

fn in_range(c: &[u8], start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
    let after_start = match start {
        Bound::Included(s) => c >= s,
        Bound::Excluded(s) => c > s,
        Bound::Unbounded => true,
    };
    let before_end = match end {
        Bound::Included(e) => c <= e,
        Bound::Excluded(e) => c < e,
        Bound::Unbounded => true,
    };
    after_start && before_end
}

fn universe() -> Vec<Key> {
    let mut keys = Vec::new();
    for p in 0..LWW_PARTITIONS {
        for c in CLUSTERINGS {
            keys.push((LWW, format!("p{p}").into_bytes(), c.to_vec()));
        }
    }
    for p in 0..TTL_PARTITIONS {
        for c in TTL_CLUSTERINGS {
            keys.push((TTL, format!("t{p}").into_bytes(), c.to_vec()));
        }
    }
    keys
}

fn row_key(k: &Key) -> RowKey<'_> {
    RowKey::new(k.0, &k.1, &k.2)
}

// ---------------------------------------------------------------------------------------------
// The walk.

struct Run {
    seed: u64,
    step: u64,
    rng: Rng,
    clock: Arc<ManualClock>,
    config: NamespaceConfig,
    device: Arc<FaultyDevice>,
    engine: Option<Engine>,
    model: BTreeMap<Key, MRow>,
    /// The model as of the last `sync`: what a power failure must leave.
    model_at_sync: BTreeMap<Key, MRow>,
    keys: Vec<Key>,
    /// Recent operations, printed when the run fails.
    log: Vec<String>,
    device_full: u64,
    defrag_freed: u64,
    expired: u64,
    reopens: [u64; 3],
    /// Updates written as deltas, rows folded over theirs, and deltas found again by a reopen.
    deltas: [u64; 3],
    _dir: tempfile::TempDir,
}

impl Run {
    fn new(seed: u64) -> Run {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = device_config(Some(dir.path().join("model.index")));
        if seed % 2 == 1 {
            // A delta buffer of a few deltas: most updates find it full and read their row.
            config.delta_buffer_bytes = 1 << 10;
        }
        let clock = Arc::new(ManualClock::new(START_US));
        let device = Arc::new(FaultyDevice::new(DEVICE_BLOCKS * BLOCK_BYTES));
        let engine = open_on(&config, &device, &clock);
        Run {
            seed,
            step: 0,
            rng: Rng::new(seed),
            clock,
            config,
            device,
            engine: Some(engine),
            model: BTreeMap::new(),
            model_at_sync: BTreeMap::new(),
            keys: universe(),
            log: Vec::new(),
            device_full: 0,
            defrag_freed: 0,
            expired: 0,
            reopens: [0; 3],
            deltas: [0; 3],
            _dir: dir,
        }
    }

    fn engine(&self) -> &Engine {
        self.engine.as_ref().expect("engine open")
    }

    fn now_s(&self) -> u32 {
        self.clock.now_s()
    }

    fn note(&mut self, what: String) {
        if self.log.len() >= 40 {
            self.log.remove(0);
        }
        self.log.push(format!("step {}: {what}", self.step));
    }

    fn value(&mut self) -> Vec<u8> {
        let len = match self.rng.below(20) {
            0 => self.rng.range(6_000, 12_000),
            1..=3 => self.rng.range(600, 3_000),
            _ => self.rng.below(600),
        };
        self.rng.bytes(len as usize)
    }

    /// A timestamp for the LWW table: mostly newer than anything before, often older, and
    /// sometimes exactly the timestamp of what a cell holds (so that the tie-breaks decide).
    fn lww_ts(&mut self, key: &Key, column: (u32, Vec<u8>)) -> i64 {
        let now = self.step as i64 * 1_000;
        match self.rng.below(10) {
            0..=5 => now,
            6..=8 => now - self.rng.below(300_000) as i64,
            _ => self
                .model
                .get(key)
                .and_then(|r| r.cells.get(&column))
                .map_or(now, |c| c.ts),
        }
    }

    fn lww_update(&mut self, key: &Key) -> Update {
        let mut u = Update::default();
        let pick_column = |rng: &mut Rng| -> (u32, Vec<u8>) {
            if rng.chance(1, 5) {
                (COLLECTION, rng.pick(&[&b"a"[..], b"b", b"c"]).to_vec())
            } else {
                (rng.below(5) as u32, Vec::new())
            }
        };
        match self.rng.below(100) {
            // INSERT: a row marker and several cells at one timestamp.
            0..=29 => {
                let first = pick_column(&mut self.rng);
                let ts = self.lww_ts(key, first.clone());
                u.liveness = Some(MLiveness {
                    ts,
                    expires_at_s: None,
                });
                let mut columns = BTreeSet::from([first]);
                for _ in 0..self.rng.below(4) {
                    columns.insert(pick_column(&mut self.rng));
                }
                for c in columns {
                    let value = self.value();
                    u.cells.push((
                        c,
                        MCell {
                            ts,
                            value: MValue::Live {
                                value,
                                expires_at_s: None,
                            },
                        },
                    ));
                }
            }
            // UPDATE of one or two cells.
            30..=64 => {
                for _ in 0..self.rng.range(1, 2) {
                    let c = pick_column(&mut self.rng);
                    if u.cells.iter().any(|(k, _)| *k == c) {
                        continue;
                    }
                    let ts = self.lww_ts(key, c.clone());
                    let value = self.value();
                    u.cells.push((
                        c,
                        MCell {
                            ts,
                            value: MValue::Live {
                                value,
                                expires_at_s: None,
                            },
                        },
                    ));
                }
            }
            // DELETE of one cell.
            65..=79 => {
                let c = pick_column(&mut self.rng);
                let ts = self.lww_ts(key, c.clone());
                let deleted_at_s = self.now_s();
                u.cells.push((
                    c,
                    MCell {
                        ts,
                        value: MValue::Tombstone { deleted_at_s },
                    },
                ));
            }
            // SET m = {...}: the collection cleared just before its new elements.
            80..=87 => {
                let ts = self.lww_ts(key, (COLLECTION, b"a".to_vec()));
                u.column_deletion = Some((COLLECTION, ts - 1));
                for path in [&b"a"[..], b"c"] {
                    if self.rng.chance(1, 2) {
                        let value = self.value();
                        u.cells.push((
                            (COLLECTION, path.to_vec()),
                            MCell {
                                ts,
                                value: MValue::Live {
                                    value,
                                    expires_at_s: None,
                                },
                            },
                        ));
                    }
                }
            }
            // DELETE of the row.
            _ => {
                let ts = self.lww_ts(key, (0, Vec::new()));
                u.deletion_ts = Some(ts);
            }
        }
        u
    }

    /// The timestamp of a cell a read sees now. Only such a cell is safe to tie with in the TTL
    /// table: once all of a row has expired the engine forgets it, tombstones included, while
    /// the model remembers everything, so an older or equal timestamp written over an expired
    /// row could win in one and lose in the other.
    fn visible_cell_ts(&self, key: &Key, column: u32) -> Option<i64> {
        self.expected(key)?
            .cells
            .iter()
            .find(|c| c.0 == column && c.1.is_empty())
            .map(|c| c.2)
    }

    fn ttl_update(&mut self, key: &Key) -> Update {
        let ts = self.step as i64 * 1_000 + 500;
        let now = self.now_s();
        let mut u = Update::default();
        let expiry = |rng: &mut Rng| (!rng.chance(1, 4)).then(|| now + rng.range(1, 40) as u32);
        match self.rng.below(10) {
            0..=3 => {
                u.liveness = Some(MLiveness {
                    ts,
                    expires_at_s: expiry(&mut self.rng),
                });
                for column in 0..self.rng.range(1, 3) as u32 {
                    let expires_at_s = expiry(&mut self.rng);
                    let value = self.value();
                    u.cells.push((
                        (column, Vec::new()),
                        MCell {
                            ts,
                            value: MValue::Live { value, expires_at_s },
                        },
                    ));
                }
            }
            4..=6 => {
                let column = self.rng.below(3) as u32;
                let expires_at_s = expiry(&mut self.rng);
                let value = self.value();
                // Sometimes the timestamp of what the cell holds, so that the tie-breaks between
                // permanent, expiring and deleted cells decide.
                let tie = self.visible_cell_ts(key, column);
                let ts = match tie {
                    Some(t) if self.rng.chance(1, 3) => t,
                    _ => ts,
                };
                u.cells.push((
                    (column, Vec::new()),
                    MCell {
                        ts,
                        value: MValue::Live { value, expires_at_s },
                    },
                ));
            }
            7 if self.rng.chance(1, 2) => {
                // A tombstone at the timestamp of what the cell holds (see above).
                let column = self.rng.below(3) as u32;
                let tie = self.visible_cell_ts(key, column).unwrap_or(ts);
                u.cells.push((
                    (column, Vec::new()),
                    MCell {
                        ts: tie,
                        value: MValue::Tombstone { deleted_at_s: now },
                    },
                ));
            }
            7 => {
                let column = self.rng.below(3) as u32;
                u.cells.push((
                    (column, Vec::new()),
                    MCell {
                        ts,
                        value: MValue::Tombstone { deleted_at_s: now },
                    },
                ));
            }
            _ => u.deletion_ts = Some(ts),
        }
        u
    }

    /// Applies one write to the engine and, if the engine took it, to the model.
    fn write(&mut self, key: Key, u: Update) {
        let now_s = self.now_s();
        let row = to_engine_row(&u, now_s);
        let is_row_delete = u.deletion_ts.is_some()
            && u.cells.is_empty()
            && u.liveness.is_none()
            && u.column_deletion.is_none();
        self.note(format!("write {key:?} {u:?}"));
        let attempt = |engine: &Engine| {
            if is_row_delete {
                engine.delete(row_key(&key), u.deletion_ts.expect("a row delete"))
            } else {
                engine.write(row_key(&key), row.clone())
            }
        };
        let mut result = attempt(self.engine());
        if let Err(WriteError::DeviceFull { .. }) = result {
            // Blocks freed by defragmentation come back once their replacements are durable.
            self.device_full += 1;
            self.sync();
            self.defrag_freed += self.engine().defrag_now() as u64;
            self.sync();
            result = attempt(self.engine());
        }
        match result {
            Ok(()) => self.model.entry(key).or_default().apply(&u),
            Err(WriteError::DeviceFull { .. }) => self.note("device full: not applied".into()),
            Err(e) => panic!("write failed: {e}"),
        }
    }

    /// A range or partition delete in the LWW table. The model writes the deletion into every
    /// key of the range, present or not: its rows keep a deletion forever, so a later write
    /// with an older timestamp stays shadowed there, as the engine's one range tombstone must
    /// keep it.
    fn delete_range(&mut self) {
        let p = format!("p{}", self.rng.below(LWW_PARTITIONS)).into_bytes();
        let bound = |rng: &mut Rng| -> Bound<Vec<u8>> {
            match rng.below(5) {
                0 => Bound::Unbounded,
                1 | 2 => Bound::Included(rng.pick(CLUSTERINGS).to_vec()),
                _ => Bound::Excluded(rng.pick(CLUSTERINGS).to_vec()),
            }
        };
        let (start, end) = (bound(&mut self.rng), bound(&mut self.rng));
        let now = self.step as i64 * 1_000;
        let ts = if self.rng.chance(1, 3) {
            now - self.rng.below(300_000) as i64
        } else {
            now
        };
        let deletion = Deletion {
            timestamp_us: ts,
            deleted_at_s: self.now_s(),
        };
        self.note(format!("delete range {p:?} {start:?}..{end:?} at {ts}"));
        fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
            match b {
                Bound::Included(v) => Bound::Included(v.as_slice()),
                Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
                Bound::Unbounded => Bound::Unbounded,
            }
        }
        let attempt = |engine: &Engine| {
            engine.delete_range(PartitionKey::new(LWW, &p), as_ref(&start), as_ref(&end), deletion)
        };
        let mut result = attempt(self.engine());
        if let Err(WriteError::DeviceFull { .. }) = result {
            self.device_full += 1;
            self.sync();
            self.defrag_freed += self.engine().defrag_now() as u64;
            self.sync();
            result = attempt(self.engine());
        }
        match result {
            Ok(()) => {
                let u = Update {
                    deletion_ts: Some(ts),
                    ..Update::default()
                };
                for c in CLUSTERINGS {
                    if in_range(c, as_ref(&start), as_ref(&end)) {
                        self.model
                            .entry((LWW, p.clone(), c.to_vec()))
                            .or_default()
                            .apply(&u);
                    }
                }
            }
            Err(WriteError::DeviceFull { .. }) => self.note("device full: not applied".into()),
            Err(e) => panic!("delete range failed: {e}"),
        }
    }

    fn sync(&mut self) {
        self.engine().sync().expect("sync");
        self.model_at_sync = self.model.clone();
    }

    /// Counts the closing engine's deltas, before it goes.
    fn tally_deltas(&mut self) {
        let s = self.engine().stats();
        self.deltas[0] += s.blind_writes;
        self.deltas[1] += s.delta_folds;
    }

    fn reopened(&mut self, engine: Engine) {
        self.deltas[2] += engine.stats().deltas;
        self.engine = Some(engine);
    }

    fn reopen_clean(&mut self) {
        self.note("close and reopen from the index snapshot".into());
        self.tally_deltas();
        self.engine.take().expect("engine open").close().expect("close");
        self.model_at_sync = self.model.clone();
        self.reopened(open_on(&self.config, &self.device, &self.clock));
        self.reopens[0] += 1;
    }

    fn reopen_unclean(&mut self) {
        self.note("drop without close and reopen by scanning".into());
        self.tally_deltas();
        drop(self.engine.take());
        self.model_at_sync = self.model.clone();
        self.reopened(open_on(&self.config, &self.device, &self.clock));
        self.reopens[1] += 1;
    }

    fn power_failure(&mut self) {
        self.note(format!(
            "power failure losing {} unsynced writes",
            self.device.unsynced_writes()
        ));
        let survivor = Arc::new(self.device.crash(Crash::LoseUnsynced));
        self.tally_deltas();
        // The old engine still runs on the old device; it must not save a snapshot.
        drop(self.engine.take());
        self.device = survivor;
        self.model = self.model_at_sync.clone();
        self.reopened(open_on(&self.config, &self.device, &self.clock));
        self.reopens[2] += 1;
    }

    fn step(&mut self) {
        match self.rng.below(100) {
            0..=41 => {
                let p = self.rng.below(LWW_PARTITIONS);
                let c = self.rng.pick(CLUSTERINGS).to_vec();
                let key = (LWW, format!("p{p}").into_bytes(), c);
                let u = self.lww_update(&key);
                self.write(key, u);
            }
            42..=44 => self.delete_range(),
            45..=74 => {
                let p = self.rng.below(TTL_PARTITIONS);
                let c = self.rng.pick(TTL_CLUSTERINGS).to_vec();
                let key = (TTL, format!("t{p}").into_bytes(), c);
                let u = self.ttl_update(&key);
                self.write(key, u);
            }
            75..=80 => {
                let s = self.rng.range(1, 12) as u32;
                self.note(format!("clock +{s} s"));
                self.clock.advance_s(s);
            }
            81..=84 => {
                self.note("sync".into());
                self.sync();
            }
            85..=89 => {
                let freed = self.engine().defrag_now();
                self.defrag_freed += freed as u64;
                self.note(format!("defrag freed {freed} blocks"));
            }
            90..=94 => {
                let n = self.engine().expire_now();
                self.expired += n as u64;
                self.note(format!("expiry removed {n} entries"));
            }
            95 => self.reopen_clean(),
            96 | 97 => self.reopen_unclean(),
            _ => self.power_failure(),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Checks.

    fn expected(&self, key: &Key) -> Option<Visible> {
        self.model.get(key).and_then(|r| r.visible(self.now_s()))
    }

    fn check(&mut self) -> Result<(), String> {
        let now_s = self.now_s();
        for key in &self.keys {
            let got = self
                .engine()
                .get(row_key(key))
                .map_err(|e| format!("get {key:?}: {e}"))?
                .map(|r| seen(&r));
            let want = self.expected(key);
            if got != want {
                return Err(format!(
                    "get {key:?} at {now_s} s:\n  engine {got:?}\n  model  {want:?}"
                ));
            }
        }
        for table in [LWW, TTL] {
            let page = self.rng.range(1, 40) as usize;
            let rows = self.scan_all(table, i64::MIN, i64::MAX, page)?;
            self.compare_scan(table, i64::MIN, i64::MAX, &rows)?;
        }
        // A token range between the tokens of two of the keys.
        let a = token(&self.rng.pick(&self.keys).1);
        let b = token(&self.rng.pick(&self.keys).1);
        let (from, to) = (a.min(b), a.max(b));
        let page = self.rng.range(1, 10) as usize;
        let rows = self.scan_all(LWW, from, to, page)?;
        self.compare_scan(LWW, from, to, &rows)?;
        for _ in 0..3 {
            self.check_partition_read()?;
        }
        let page = self.rng.range(1, 40) as usize;
        self.check_ordered_scan(LWW, page)?;
        Ok(())
    }

    /// Pages through a table with `scan_rows`, resuming after the last row returned as a
    /// paging state does, and checks that the live rows come exactly once, in (token,
    /// partition key, clustering key) order, with the model's contents.
    fn check_ordered_scan(&mut self, table: u32, page: usize) -> Result<(), String> {
        let now_s = self.now_s();
        let mut got: Vec<(Key, Visible)> = Vec::new();
        let mut last: Option<(i64, Vec<u8>, Vec<u8>)> = None;
        for _ in 0..10_000 {
            let from = match &last {
                None => RowsFrom::Token(i64::MIN),
                Some((t, p, c)) => RowsFrom::After {
                    token: *t,
                    partition: p,
                    clustering: Some(c),
                },
            };
            let result = self
                .engine()
                .scan_rows(table, from, i64::MAX, page)
                .map_err(|e| format!("scan_rows of table {table}: {e}"))?;
            for r in &result.rows {
                let here = (r.token, r.partition_key.clone(), r.clustering_key.clone());
                if last.as_ref().is_some_and(|l| *l >= here) {
                    return Err(format!("scan_rows: {here:?} came after {last:?}"));
                }
                last = Some(here);
                let visible = r.row.visible(now_s);
                if visible.is_live(now_s) {
                    got.push((
                        (table, r.partition_key.clone(), r.clustering_key.clone()),
                        seen(&visible),
                    ));
                }
            }
            if !result.more {
                break;
            }
        }
        let mut want: Vec<(Key, Visible)> = self
            .keys
            .iter()
            .filter(|k| k.0 == table)
            .filter_map(|k| self.expected(k).map(|v| (k.clone(), v)))
            .collect();
        want.sort_by(|a, b| (token(&a.0 .1), &a.0 .1, &a.0 .2).cmp(&(token(&b.0 .1), &b.0 .1, &b.0 .2)));
        want.dedup_by(|a, b| a.0 == b.0);
        if got != want {
            let keys = |v: &[(Key, Visible)]| v.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
            return Err(format!(
                "scan_rows of table {table} in pages of {page}: engine {:?}, model {:?} (or contents differ)",
                keys(&got),
                keys(&want)
            ));
        }
        Ok(())
    }

    /// Pages through `[from, to]` of a table; checks the order and that no row comes twice.
    fn scan_all(
        &mut self,
        table: u32,
        from: i64,
        to: i64,
        page: usize,
    ) -> Result<Vec<(Key, Visible)>, String> {
        let mut out = Vec::new();
        let mut at = ScanFrom::Token(from);
        let mut last: Option<i64> = None;
        let mut seen_keys = BTreeSet::new();
        for _ in 0..10_000 {
            let rows = self
                .engine()
                .scan(table, at, to, page)
                .map_err(|e| format!("scan of table {table}: {e}"))?;
            if rows.len() > page {
                return Err(format!("scan returned {} rows for a page of {page}", rows.len()));
            }
            for r in &rows {
                if r.token != token(&r.partition_key) {
                    return Err(format!(
                        "scan: row {:?} carries token {}",
                        r.partition_key, r.token
                    ));
                }
                if last.is_some_and(|t| r.token < t) || r.token < from || r.token > to {
                    return Err(format!("scan: token {} out of order or range", r.token));
                }
                last = Some(r.token);
                let key = (table, r.partition_key.clone(), r.clustering_key.clone());
                if !seen_keys.insert(key.clone()) {
                    return Err(format!("scan returned {key:?} twice"));
                }
                out.push((key, seen(&r.row)));
            }
            match rows.last() {
                Some(r) if rows.len() == page => at = ScanFrom::After(r.position),
                _ => return Ok(out),
            }
        }
        Err("scan never ended".into())
    }

    fn compare_scan(&self, table: u32, from: i64, to: i64, rows: &[(Key, Visible)]) -> Result<(), String> {
        let got: BTreeMap<&Key, &Visible> = rows.iter().map(|(k, v)| (k, v)).collect();
        let want: BTreeMap<&Key, Visible> = self
            .keys
            .iter()
            .filter(|k| k.0 == table && (from..=to).contains(&token(&k.1)))
            .filter_map(|k| self.expected(k).map(|v| (k, v)))
            .collect();
        let want: BTreeMap<&Key, &Visible> = want.iter().map(|(k, v)| (*k, v)).collect();
        if got != want {
            let missing: Vec<_> = want.keys().filter(|k| !got.contains_key(*k)).collect();
            let extra: Vec<_> = got.keys().filter(|k| !want.contains_key(*k)).collect();
            return Err(format!(
                "scan of table {table} over [{from}, {to}]: missing {missing:?}, extra {extra:?}, \
                 or contents differ"
            ));
        }
        Ok(())
    }

    fn check_partition_read(&mut self) -> Result<(), String> {
        let p = format!("p{}", self.rng.below(LWW_PARTITIONS)).into_bytes();
        let bound = |rng: &mut Rng| -> Bound<&'static [u8]> {
            match rng.below(3) {
                0 => Bound::Unbounded,
                1 => Bound::Included(*rng.pick(CLUSTERINGS)),
                _ => Bound::Excluded(*rng.pick(CLUSTERINGS)),
            }
        };
        let (start, end) = (bound(&mut self.rng), bound(&mut self.rng));
        let reverse = self.rng.chance(1, 2);
        let limit = self.rng.range(1, 8) as usize;
        let got: Vec<(Vec<u8>, Visible)> = self
            .engine()
            .read_partition(PartitionKey::new(LWW, &p), start, end, reverse, limit)
            .map_err(|e| format!("read_partition: {e}"))?
            .into_iter()
            .map(|r| (r.clustering_key.clone(), seen(&r.row)))
            .collect();
        let mut want: Vec<(Vec<u8>, Visible)> = CLUSTERINGS
            .iter()
            .filter(|c| in_range(c, start, end))
            .filter_map(|c| {
                self.expected(&(LWW, p.clone(), c.to_vec()))
                    .map(|v| (c.to_vec(), v))
            })
            .collect();
        want.sort_by(|a, b| a.0.cmp(&b.0));
        if reverse {
            want.reverse();
        }
        want.truncate(limit);
        // The raw read a replica answers: its live rows, made visible, must be the same.
        let now_s = self.now_s();
        let raw: Vec<(Vec<u8>, Visible)> = self
            .engine()
            .read_partition_raw(PartitionKey::new(LWW, &p), start, end, reverse, limit)
            .map_err(|e| format!("read_partition_raw: {e}"))?
            .rows
            .into_iter()
            .map(|r| (r.clustering_key.clone(), r.row.visible(now_s)))
            .filter(|(_, r)| r.is_live(now_s))
            .map(|(c, r)| (c, seen(&r)))
            .collect();
        if raw != want {
            let keys = |v: &[(Vec<u8>, Visible)]| v.iter().map(|(c, _)| c.clone()).collect::<Vec<_>>();
            return Err(format!(
                "read_partition_raw {p:?} {start:?}..{end:?} reverse {reverse} limit {limit}: engine {:?}, \
                 model {:?} (or contents differ)",
                keys(&raw),
                keys(&want)
            ));
        }
        if got != want {
            let keys = |v: &[(Vec<u8>, Visible)]| v.iter().map(|(c, _)| c.clone()).collect::<Vec<_>>();
            return Err(format!(
                "read_partition {p:?} {start:?}..{end:?} reverse {reverse} limit {limit}: engine {:?}, \
                 model {:?} (or contents differ)",
                keys(&got),
                keys(&want)
            ));
        }
        Ok(())
    }

    fn run(&mut self) {
        for step in 1..=STEPS {
            self.step = step;
            let reopens = self.reopens;
            self.step();
            if step % CHECK_EVERY == 0 || self.reopens != reopens {
                if let Err(e) = self.check() {
                    panic!(
                        "seed {} step {step}: engine and model disagree: {e}\nrecent steps:\n  {}",
                        self.seed,
                        self.log.join("\n  ")
                    );
                }
            }
        }
        // A last reopen of each kind, each checked.
        self.reopen_clean();
        self.check()
            .unwrap_or_else(|e| panic!("seed {}: after the last clean reopen: {e}", self.seed));
        self.power_failure();
        self.check()
            .unwrap_or_else(|e| panic!("seed {}: after the last power failure: {e}", self.seed));
    }
}

#[test]
fn engine_matches_model() {
    for seed in common::seeds(SEEDS) {
        let started = std::time::Instant::now();
        let mut run = Run::new(seed);
        let outcome = catch_unwind(AssertUnwindSafe(|| run.run()));
        if let Err(panic) = outcome {
            eprintln!(
                "model test failed at seed {seed}, step {}; replay with HAYATE_SEED={seed}",
                run.step
            );
            std::panic::resume_unwind(panic);
        }
        eprintln!(
            "seed {seed}: {STEPS} steps in {:?}; defrag freed {} blocks, expiry removed {} entries, \
             reopens clean/unclean/power-failure {:?}, {} writes met a full device, \
             deltas written/folded/found by a reopen {:?}",
            started.elapsed(),
            run.defrag_freed,
            run.expired,
            run.reopens,
            run.device_full,
            run.deltas
        );
        assert!(
            run.deltas.iter().all(|&n| n > 0),
            "seed {seed}: deltas were not written, folded and reopened; the test no longer exercises them"
        );
        assert!(
            run.defrag_freed > 0,
            "seed {seed}: defragmentation never freed a block; the test no longer exercises it"
        );
        assert!(
            run.reopens.iter().all(|&n| n > 0),
            "seed {seed}: some kind of reopen never happened"
        );
    }
}

// ---------------------------------------------------------------------------------------------

/// Several threads update disjoint cells of the same rows while defragmentation moves them: every
/// write reads, merges and rewrites the whole row, so a merge that raced another writer's would
/// drop that writer's cell. Afterwards, and after a power failure that follows a sync, every
/// row holds every thread's last value.
#[test]
fn concurrent_writers_to_disjoint_cells_lose_no_update() {
    const THREADS: u32 = 4;
    const ROUNDS: u32 = 40;
    const KEYS: u32 = 50;
    let clock = Arc::new(ManualClock::new(START_US));
    let config = device_config(None);
    let device = Arc::new(FaultyDevice::new(64 * BLOCK_BYTES));
    let engine = Arc::new(open_on(&config, &device, &clock));
    let value = |t: u32, round: u32| {
        let mut v = format!("thread {t} round {round} ").into_bytes();
        v.resize(200, b'.');
        v
    };
    let done = Arc::new(AtomicBool::new(false));
    let defragger = {
        let (engine, done) = (Arc::clone(&engine), Arc::clone(&done));
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                engine.defrag_now();
                engine.sync().expect("sync");
                std::thread::yield_now();
            }
        })
    };
    let writers: Vec<_> = (0..THREADS)
        .map(|t| {
            let engine = Arc::clone(&engine);
            std::thread::spawn(move || {
                for round in 0..ROUNDS {
                    for k in 0..KEYS {
                        let row = Row {
                            cells: vec![Cell::live(t, i64::from(round), value(t, round))],
                            ..Row::default()
                        };
                        let partition = k.to_be_bytes();
                        let key = RowKey::new(1, &partition, b"");
                        let mut tries = 0;
                        loop {
                            match engine.write(key, row.clone()) {
                                Ok(()) => break,
                                Err(WriteError::DeviceFull { .. }) if tries < 1_000 => {
                                    tries += 1;
                                    std::thread::sleep(std::time::Duration::from_millis(1));
                                }
                                Err(e) => panic!("thread {t} key {k}: {e}"),
                            }
                        }
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer thread");
    }
    done.store(true, Ordering::SeqCst);
    defragger.join().expect("defrag thread");
    let check = |engine: &Engine, when: &str| {
        for k in 0..KEYS {
            let partition = k.to_be_bytes();
            let key = RowKey::new(1, &partition, b"");
            let row = engine
                .get(key)
                .expect("read")
                .unwrap_or_else(|| panic!("{when}: key {k} missing"));
            let values: Vec<(u32, Option<Vec<u8>>)> = row
                .cells
                .iter()
                .map(|c| (c.column, c.value_at(0).map(<[u8]>::to_vec)))
                .collect();
            let want: Vec<(u32, Option<Vec<u8>>)> =
                (0..THREADS).map(|t| (t, Some(value(t, ROUNDS - 1)))).collect();
            assert_eq!(values, want, "{when}: key {k} lost an update");
        }
    };
    check(&engine, "after the writers");
    engine.sync().expect("sync");
    let survivor = Arc::new(device.crash(Crash::LoseUnsynced));
    drop(Arc::try_unwrap(engine).unwrap_or_else(|_| panic!("engine still shared")));
    let engine = open_on(&config, &survivor, &clock);
    check(&engine, "after a power failure");
}

// ---------------------------------------------------------------------------------------------

/// A row's history since the last sync, for the torn-crash test: `None` is a deletion.
#[derive(Clone, Debug, Default)]
struct History {
    synced: Option<u64>,
    since: Vec<Option<u64>>,
}

fn versioned_value(key: u32, version: u64) -> Vec<u8> {
    let unit = format!("k{key}v{version};").into_bytes();
    unit.iter()
        .copied()
        .cycle()
        .take(40 + (version % 13) as usize * 37)
        .collect()
}

/// Power failures that tear the last unsynced write, or land a random subset of the sectors of
/// every unsynced write, in rounds on the same device: after each, every row must be as the last
/// sync left it or as one of the writes after it made it (never older, never garbage), and reads
/// must not fail.
#[test]
fn torn_and_reordered_crashes_keep_every_synced_write() {
    const KEYS: u32 = 300;
    const ROUNDS: u32 = 8;
    for seed in common::seeds(&[11, 12, 13]) {
        let mut rng = Rng::new(seed);
        let clock = Arc::new(ManualClock::new(START_US));
        let config = device_config(None);
        let mut device = Arc::new(FaultyDevice::new(64 * BLOCK_BYTES));
        let mut engine = open_on(&config, &device, &clock);
        let mut rows: Vec<History> = vec![History::default(); KEYS as usize];
        let mut version = 0u64;
        for round in 0..ROUNDS {
            for _ in 0..rng.range(50, 800) {
                let k = rng.below(u64::from(KEYS)) as u32;
                version += 1;
                let partition = k.to_be_bytes();
                let key = RowKey::new(1, &partition, b"");
                if rng.chance(1, 8) {
                    engine.delete(key, version as i64).expect("delete");
                    rows[k as usize].since.push(None);
                } else {
                    let row = Row {
                        cells: vec![Cell::live(0, version as i64, versioned_value(k, version))],
                        ..Row::default()
                    };
                    engine.write(key, row).expect("write");
                    rows[k as usize].since.push(Some(version));
                }
                if rng.chance(1, 100) {
                    engine.sync().expect("sync");
                    for h in &mut rows {
                        if let Some(last) = h.since.pop() {
                            h.synced = last;
                        }
                        h.since.clear();
                    }
                }
                if rng.chance(1, 200) {
                    engine.defrag_now();
                }
            }
            let how = if round % 2 == 0 {
                Crash::TornTail(rng.next_u64())
            } else {
                Crash::Scrambled(rng.next_u64())
            };
            let survivor = Arc::new(device.crash(how));
            drop(engine);
            device = survivor;
            engine = open_on(&config, &device, &clock);
            for (k, h) in rows.iter_mut().enumerate() {
                let partition = (k as u32).to_be_bytes();
                let key = RowKey::new(1, &partition, b"");
                let got = engine
                    .get(key)
                    .unwrap_or_else(|e| panic!("seed {seed} round {round}: key {k}: {e}"));
                let got = got.map(|row| {
                    let c = &row.cells[0];
                    let v = c.timestamp_us as u64;
                    assert_eq!(
                        c.value_at(0),
                        Some(&versioned_value(k as u32, v)[..]),
                        "seed {seed} round {round} ({how:?}): key {k} holds a value it was never given"
                    );
                    v
                });
                let allowed: Vec<Option<u64>> =
                    std::iter::once(h.synced).chain(h.since.iter().copied()).collect();
                assert!(
                    allowed.contains(&got),
                    "seed {seed} round {round} ({how:?}): key {k} reads {got:?}; the last sync left \
                     {:?} and the writes since were {:?}",
                    h.synced,
                    h.since
                );
                h.synced = got;
                h.since.clear();
            }
        }
    }
}
