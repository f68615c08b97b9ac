//! What the simulation knows the cluster should hold: every write it issued with its outcome,
//! and for every key the versions a later read is bound to see.
//!
//! Judged by timestamp, never by real order: under clock skew a write acknowledged later may
//! carry an older timestamp and lose, which is last-write-wins working as designed. So "a read
//! sees an acknowledged write" means: the version the read returned, merged with the write's
//! row by the engine's own [`Row::merge`], is unchanged (the read's version already wins or
//! equals it, tombstones winning ties as in Cassandra).
//!
//! Rows are compared after a merge at one common second, the latest any node's clock shows: a
//! TTL cell one node still serves and another already turned into a tombstone is then the same
//! version on both.

use std::collections::BTreeMap;
use std::ops::Bound;

use hayate_cluster::consistency::{quorum_for, ConsistencyLevel, Replication};
use hayate_cluster::replica::{RangeRead, RangeStart, ReadCommand, ReplicaRow};
use hayate_storage::{CellValue, Row, TableId};

pub const TABLE: TableId = 1;
/// Every write sets this one column; its value is the write's id, so a value read names the
/// write that made it.
pub const COLUMN: u32 = 1;

/// A row's place in a table's read order: token, partition key bytes, clustering key bytes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub token: i64,
    pub partition: Vec<u8>,
    pub clustering: Vec<u8>,
}

impl Key {
    pub fn of(row: &ReplicaRow) -> Key {
        Key {
            token: row.token,
            partition: row.partition.clone(),
            clustering: row.clustering.clone(),
        }
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{}",
            String::from_utf8_lossy(&self.partition),
            self.clustering.first().copied().unwrap_or(0)
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    Upsert,
    /// An upsert whose cell expires.
    Ttl,
    Delete,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Not answered yet: it may be applied, or not yet.
    Pending,
    Acked,
    /// Timed out or failed: it may or may not be applied (and, through hints, will be).
    Maybe(String),
    /// Refused before anything was sent (Unavailable): never applied anywhere.
    Refused,
}

pub struct WriteRecord {
    pub key: Key,
    pub row: Row,
    pub kind: WriteKind,
    pub outcome: Outcome,
}

/// How many of a key's replicas an operation at a level is sure to have reached: in total, and
/// per data center. A write acknowledged at `w` and a later read at `r` must meet on some
/// replica when `w.total + r.total > RF`, or, in some data center, `w.dc + r.dc > RF_dc`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Guarantee {
    pub total: usize,
    pub per_dc: BTreeMap<String, usize>,
}

impl Guarantee {
    /// One copy fewer, in total and in `dc`.
    pub fn lose_one(&mut self, dc: &str) {
        self.total = self.total.saturating_sub(1);
        if let Some(n) = self.per_dc.get_mut(dc) {
            *n = n.saturating_sub(1);
        }
    }
}

/// Every data center with its replication factor (SimpleStrategy runs in one data center).
pub fn factors(replication: &Replication, dcs: &[String]) -> BTreeMap<String, usize> {
    match replication {
        Replication::NetworkTopology { factors } => factors.clone(),
        _ => dcs
            .iter()
            .map(|dc| (dc.clone(), replication.total_factor()))
            .collect(),
    }
}

pub fn guarantee(
    cl: ConsistencyLevel,
    replication: &Replication,
    dcs: &[String],
    local_dc: &str,
) -> Guarantee {
    let rf = factors(replication, dcs);
    let rf_total = replication.total_factor();
    let rf_local = rf.get(local_dc).copied().unwrap_or(0);
    let only_local = |n: usize| Guarantee {
        total: n,
        per_dc: [(local_dc.to_string(), n)].into_iter().collect(),
    };
    let total = |n: usize| Guarantee {
        total: n,
        per_dc: BTreeMap::new(),
    };
    match cl {
        ConsistencyLevel::Any => total(0),
        ConsistencyLevel::One => total(1),
        ConsistencyLevel::Two => total(2),
        ConsistencyLevel::Three => total(3),
        ConsistencyLevel::LocalOne => only_local(1),
        ConsistencyLevel::Quorum | ConsistencyLevel::Serial => total(quorum_for(rf_total)),
        ConsistencyLevel::LocalQuorum | ConsistencyLevel::LocalSerial => only_local(quorum_for(rf_local)),
        ConsistencyLevel::All => Guarantee {
            total: rf_total,
            per_dc: rf.clone(),
        },
        ConsistencyLevel::EachQuorum => match replication {
            Replication::NetworkTopology { factors } => {
                let per_dc: BTreeMap<String, usize> = factors
                    .iter()
                    .map(|(dc, &f)| (dc.clone(), quorum_for(f)))
                    .collect();
                Guarantee {
                    total: per_dc.values().sum(),
                    per_dc,
                }
            }
            _ => total(quorum_for(rf_total)),
        },
    }
}

/// True if an operation with guarantee `a` and one with `b` must have a replica in common.
pub fn overlap(a: &Guarantee, b: &Guarantee, rf: &BTreeMap<String, usize>, rf_total: usize) -> bool {
    if a.total + b.total > rf_total {
        return true;
    }
    rf.iter().any(|(dc, &f)| {
        let got = |g: &Guarantee| g.per_dc.get(dc).copied().unwrap_or(0);
        got(a) + got(b) > f
    })
}

/// A short form of a row for logs: its deletion, and its cell's write id and timestamp.
pub fn version(row: &Row) -> String {
    let mut parts = Vec::new();
    if let Some(d) = row.deletion {
        parts.push(format!("deleted@{}", d.timestamp_us));
    }
    for c in &row.cells {
        match &c.value {
            CellValue::Live { value, ttl_s, .. } => {
                let id = value
                    .as_slice()
                    .try_into()
                    .map(u64::from_be_bytes)
                    .unwrap_or(u64::MAX);
                let ttl = if *ttl_s > 0 {
                    format!(" ttl {ttl_s}")
                } else {
                    String::new()
                };
                parts.push(format!("#{id}@{}{ttl}", c.timestamp_us));
            }
            CellValue::Tombstone { .. } => parts.push(format!("expired@{}", c.timestamp_us)),
        }
    }
    if parts.is_empty() {
        "empty".into()
    } else {
        parts.join("+")
    }
}

/// The row as every node will see it once its clock reaches `now_s`: expired cells turned into
/// tombstones, nothing purged.
pub fn normalize(row: &Row, now_s: u32) -> Row {
    let mut out = Row::default();
    out.merge(row.clone(), now_s, 0);
    out
}

/// True if `seen` already holds `floor` or something that wins over it.
pub fn dominates(seen: &Row, floor: &Row, now_s: u32) -> bool {
    let seen = normalize(seen, now_s);
    let mut merged = seen.clone();
    merged.merge(floor.clone(), now_s, 0);
    merged == seen
}

/// One thing a later read must see: an acknowledged write, or what an earlier read returned
/// (its blocking read repair left that version on as many replicas as the read's level).
struct Floor {
    row: Row,
    guarantee: Guarantee,
    /// The event after which it holds.
    seq: u64,
    what: String,
}

/// A read to check: what it asked, where it may return rows, and when it started.
pub struct ReadCheck<'a> {
    pub what: &'a str,
    /// The keys the read covers, in its read order.
    pub scope: Vec<Key>,
    pub guarantee: Guarantee,
    pub started_seq: u64,
    pub finished_seq: u64,
}

pub struct Model {
    pub writes: Vec<WriteRecord>,
    floors: BTreeMap<Key, Vec<Floor>>,
    pub keys: Vec<Key>,
    rf: BTreeMap<String, usize>,
    rf_total: usize,
}

impl Model {
    pub fn new(keys: Vec<Key>, replication: &Replication, dcs: &[String]) -> Model {
        Model {
            writes: Vec::new(),
            floors: BTreeMap::new(),
            keys,
            rf: factors(replication, dcs),
            rf_total: replication.total_factor(),
        }
    }

    /// Registers a write about to be sent; returns its id (the value its cell carries).
    pub fn issue(&mut self, key: Key, row: Row, kind: WriteKind) -> u64 {
        self.writes.push(WriteRecord {
            key,
            row,
            kind,
            outcome: Outcome::Pending,
        });
        (self.writes.len() - 1) as u64
    }

    /// Marks the id the next [`Model::issue`] returns (writes build their value from it first).
    pub fn next_id(&self) -> u64 {
        self.writes.len() as u64
    }

    pub fn acknowledge(&mut self, id: u64, guarantee: &Guarantee, seq: u64, what: &str) {
        let w = &mut self.writes[id as usize];
        w.outcome = Outcome::Acked;
        let floor = Floor {
            row: w.row.clone(),
            guarantee: guarantee.clone(),
            seq,
            what: format!("write #{id} ({what})"),
        };
        self.floors.entry(w.key.clone()).or_default().push(floor);
    }

    pub fn fail(&mut self, id: u64, outcome: Outcome) {
        self.writes[id as usize].outcome = outcome;
    }

    /// A node was killed for good, its data lost: every version it held (as `held` says) is
    /// now on one replica fewer, in total and in its data center `dc`, than when it was
    /// promised. Returns how many versions lost a copy.
    pub fn lose_copies(&mut self, dc: &str, held: impl Fn(&Key, &Row) -> bool) -> usize {
        let mut lost = 0;
        for (key, floors) in &mut self.floors {
            for f in floors.iter_mut().filter(|f| held(key, &f.row)) {
                f.guarantee.lose_one(dc);
                lost += 1;
            }
        }
        lost
    }

    /// Lowers what the versions recorded for `key` at event `seq` (a read's) promise to
    /// `promised`, where that is less (copies on nodes killed for good do not count).
    pub fn promise(&mut self, key: &Key, seq: u64, promised: &Guarantee) {
        for f in self
            .floors
            .get_mut(key)
            .into_iter()
            .flatten()
            .filter(|f| f.seq == seq)
        {
            f.guarantee.total = f.guarantee.total.min(promised.total);
            for (dc, n) in &mut f.guarantee.per_dc {
                *n = (*n).min(promised.per_dc.get(dc).copied().unwrap_or(*n));
            }
        }
    }

    /// Every version a read is bound to see for `key` after event `seq`: the row, how many
    /// replicas must hold it, and what it came from.
    pub fn promised(&self, key: &Key, seq: u64) -> Vec<(&Row, &Guarantee, &str)> {
        self.floors
            .get(key)
            .into_iter()
            .flatten()
            .filter(|f| f.seq < seq)
            .map(|f| (&f.row, &f.guarantee, f.what.as_str()))
            .collect()
    }

    /// The versions a read that started after event `seq` with guarantee `g` must see for
    /// `key`: each with what it came from.
    fn floors(&self, key: &Key, seq: u64, g: &Guarantee) -> Vec<&Floor> {
        self.floors
            .get(key)
            .into_iter()
            .flatten()
            .filter(|f| f.seq < seq && overlap(&f.guarantee, g, &self.rf, self.rf_total))
            .collect()
    }

    /// Checks that a row a replica or a read returned was made of writes that were issued for
    /// that key and not refused: nothing is invented, nothing moves between keys.
    pub fn check_written(&self, key: &Key, row: &Row) -> Result<(), String> {
        let find = |ok: &dyn Fn(&WriteRecord) -> bool| {
            self.writes
                .iter()
                .any(|w| w.key == *key && w.outcome != Outcome::Refused && ok(w))
        };
        if row.liveness.is_some() || !row.column_deletions.is_empty() {
            return Err(format!(
                "{key}: a row marker or column deletion no write made: {row:?}"
            ));
        }
        if let Some(d) = row.deletion {
            if !find(&|w| w.kind == WriteKind::Delete && w.row.deletion == Some(d)) {
                return Err(format!("{key}: a row deletion no delete of this key made: {d:?}"));
            }
        }
        for cell in &row.cells {
            if cell.column != COLUMN || !cell.path.is_empty() {
                return Err(format!("{key}: a cell no write made: {cell:?}"));
            }
            match &cell.value {
                CellValue::Live { value, .. } => {
                    let id = value
                        .as_slice()
                        .try_into()
                        .map(u64::from_be_bytes)
                        .map_err(|_| format!("{key}: a value no write made: {value:?}"))?;
                    let w = self
                        .writes
                        .get(id as usize)
                        .ok_or_else(|| format!("{key}: value of write #{id}, never issued"))?;
                    if w.key != *key || w.row.cells.first() != Some(cell) {
                        return Err(format!(
                            "{key}: the cell {cell:?} is not what write #{id} wrote ({} {:?})",
                            w.key, w.row
                        ));
                    }
                    if w.outcome == Outcome::Refused {
                        return Err(format!(
                            "{key}: write #{id} was refused as unavailable, yet its value was read"
                        ));
                    }
                }
                CellValue::Tombstone { deleted_at_s } => {
                    // An expired TTL cell, as a merge turns it.
                    let expired = |w: &WriteRecord| {
                        w.kind == WriteKind::Ttl
                            && w.row.cells.first().is_some_and(|c| {
                                c.timestamp_us == cell.timestamp_us
                                    && matches!(c.value, CellValue::Live { expires_at_s, .. } if expires_at_s == *deleted_at_s)
                            })
                    };
                    if !find(&expired) {
                        return Err(format!(
                            "{key}: a cell tombstone no TTL write of this key explains: {cell:?}"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Checks a read's answer: rows in read order and inside what was asked, each made of
    /// issued writes, and, for every key up to where the answer is complete, at least every
    /// version the read was bound to see. Then records what it saw for later reads.
    pub fn check_read(
        &mut self,
        read: &ReadCheck<'_>,
        rows: &[ReplicaRow],
        more: bool,
        now_s: u32,
    ) -> Result<(), String> {
        let mut returned: BTreeMap<&Key, &Row> = BTreeMap::new();
        let mut last: Option<usize> = None;
        for row in rows {
            let key = Key::of(row);
            let Some(i) = read.scope.iter().position(|k| *k == key) else {
                return Err(format!("{}: returned {key}, which it did not ask for", read.what));
            };
            if last.is_some_and(|l| i <= l) {
                return Err(format!("{}: returned {key} out of order or twice", read.what));
            }
            last = Some(i);
            self.check_written(&key, &row.row)
                .map_err(|e| format!("{}: {e}", read.what))?;
            returned.insert(&read.scope[i], &row.row);
        }
        // With `more`, keys after the last row returned were not read yet.
        let complete = match (more, last) {
            (false, _) => read.scope.len(),
            (true, Some(l)) => l + 1,
            (true, None) => 0,
        };
        for key in &read.scope[..complete] {
            let seen = returned.get(key).copied();
            let missed: Vec<&Floor> = self
                .floors(key, read.started_seq, &read.guarantee)
                .into_iter()
                .filter(|f| !seen.is_some_and(|seen| dominates(seen, &f.row, now_s)))
                .collect();
            if let Some(newest) = missed.last() {
                let kind = if seen.is_some_and(|s| s.is_live(now_s)) && !newest.row.is_live(now_s) {
                    "a resurrection (a row deleted before the read began was returned)"
                } else {
                    "a stale read"
                };
                let what: Vec<&str> = missed.iter().rev().take(3).map(|f| f.what.as_str()).collect();
                return Err(format!(
                    "{}: {kind} of {key}: returned {}, which misses {} ({} in all; the latest: {})",
                    read.what,
                    seen.map_or("nothing".into(), version),
                    version(&newest.row),
                    missed.len(),
                    what.join("; ")
                ));
            }
        }
        for (key, row) in returned {
            let floor = Floor {
                row: row.clone(),
                guarantee: read.guarantee.clone(),
                seq: read.finished_seq,
                what: format!("what {} returned", read.what),
            };
            self.floors.entry(key.clone()).or_default().push(floor);
        }
        Ok(())
    }

    /// What every replica of `key` must hold once hints are replayed: every write that was not
    /// refused, merged.
    pub fn expected(&self, key: &Key, now_s: u32) -> Option<Row> {
        let mut merged: Option<Row> = None;
        for w in self
            .writes
            .iter()
            .filter(|w| w.key == *key && w.outcome != Outcome::Refused)
        {
            match &mut merged {
                None => merged = Some(normalize(&w.row, now_s)),
                Some(m) => m.merge(w.row.clone(), now_s, 0),
            }
        }
        merged
    }

    /// The keys a read command covers, in its read order.
    pub fn scope(&self, command: &ReadCommand) -> Vec<Key> {
        match command {
            ReadCommand::Partition(p) => {
                let mut keys: Vec<Key> = self
                    .keys
                    .iter()
                    .filter(|k| k.partition == p.partition && in_bounds(&k.clustering, &p.start, &p.end))
                    .cloned()
                    .collect();
                keys.sort_by(|a, b| a.clustering.cmp(&b.clustering));
                if p.reverse {
                    keys.reverse();
                }
                keys
            }
            ReadCommand::Range(RangeRead { start, end_token, .. }) => self
                .keys
                .iter()
                .filter(|k| {
                    k.token <= *end_token
                        && match start {
                            RangeStart::Token(t) => k.token >= *t,
                            RangeStart::After(p) => {
                                (k.token, &k.partition, Some(&k.clustering))
                                    > (p.token, &p.partition, p.clustering.as_ref())
                            }
                        }
                })
                .cloned()
                .collect(),
        }
    }
}

fn in_bounds(c: &[u8], start: &Bound<Vec<u8>>, end: &Bound<Vec<u8>>) -> bool {
    let after_start = match start {
        Bound::Included(s) => c >= s.as_slice(),
        Bound::Excluded(s) => c > s.as_slice(),
        Bound::Unbounded => true,
    };
    let before_end = match end {
        Bound::Included(e) => c <= e.as_slice(),
        Bound::Excluded(e) => c < e.as_slice(),
        Bound::Unbounded => true,
    };
    after_start && before_end
}
