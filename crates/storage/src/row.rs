//! The contents of one stored row, and how two versions of it merge.
//!
//! A row is what Cassandra calls a `Row` of an `UnfilteredRowIterator`: a primary-key liveness
//! (the "row marker" an `INSERT` writes), an optional row deletion, per-column deletions of
//! collections, and cells. Every piece carries its write timestamp in microseconds, so replicas
//! that receive the same writes in any order converge on the same row (last write wins, with
//! Cassandra's tie-breaks; see [`reconcile`]).
//!
//! The storage engine knows nothing of CQL types: a column is a number the schema assigns, a
//! value and a collection path are bytes.

use std::cmp::Ordering;

/// Seconds since the Unix epoch, as Cassandra's "local deletion time".
pub type EpochSeconds = u32;

/// The row marker written by `INSERT`: the row exists even if every column is null.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Liveness {
    pub timestamp_us: i64,
    /// 0 when the marker does not expire.
    pub ttl_s: u32,
    /// When the marker expires (meaningful only with a TTL).
    pub expires_at_s: EpochSeconds,
}

/// A deletion: of a row, of a whole collection column, or (inside a cell) of one cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deletion {
    /// Everything written at or before this timestamp is deleted.
    pub timestamp_us: i64,
    /// When the deletion happened, by the clock of the node that took it; the tombstone may be
    /// purged `tombstone_grace_s` after this.
    pub deleted_at_s: EpochSeconds,
}

impl Deletion {
    fn supersedes(&self, other: &Deletion) -> bool {
        (self.timestamp_us, self.deleted_at_s) > (other.timestamp_us, other.deleted_at_s)
    }

    /// True if data written at `timestamp_us` is deleted by this.
    pub fn shadows(&self, timestamp_us: i64) -> bool {
        timestamp_us <= self.timestamp_us
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CellValue {
    Live {
        value: Vec<u8>,
        /// 0 when the cell does not expire.
        ttl_s: u32,
        expires_at_s: EpochSeconds,
    },
    Tombstone {
        deleted_at_s: EpochSeconds,
    },
}

/// One column value, or one element of a non-frozen collection (then `path` is the element's
/// key: the list cell id, the set element or the map key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    pub column: u32,
    pub path: Vec<u8>,
    pub timestamp_us: i64,
    pub value: CellValue,
}

impl Cell {
    pub fn live(column: u32, timestamp_us: i64, value: Vec<u8>) -> Cell {
        Cell {
            column,
            path: Vec::new(),
            timestamp_us,
            value: CellValue::Live {
                value,
                ttl_s: 0,
                expires_at_s: 0,
            },
        }
    }

    pub fn expiring(column: u32, timestamp_us: i64, value: Vec<u8>, ttl_s: u32, now_s: EpochSeconds) -> Cell {
        Cell {
            column,
            path: Vec::new(),
            timestamp_us,
            value: CellValue::Live {
                value,
                ttl_s,
                expires_at_s: now_s.saturating_add(ttl_s),
            },
        }
    }

    pub fn tombstone(column: u32, timestamp_us: i64, deleted_at_s: EpochSeconds) -> Cell {
        Cell {
            column,
            path: Vec::new(),
            timestamp_us,
            value: CellValue::Tombstone { deleted_at_s },
        }
    }

    /// The live value at `now_s`, or `None` for a tombstone or an expired cell.
    pub fn value_at(&self, now_s: EpochSeconds) -> Option<&[u8]> {
        match &self.value {
            CellValue::Live {
                value,
                ttl_s,
                expires_at_s,
            } if *ttl_s == 0 || *expires_at_s > now_s => Some(value),
            _ => None,
        }
    }

    /// Cassandra's "local deletion time": when a tombstone was written, or when an expiring
    /// cell expires; `None` for a cell that lives forever.
    fn local_deletion_time(&self) -> Option<EpochSeconds> {
        match &self.value {
            CellValue::Live { ttl_s: 0, .. } => None,
            CellValue::Live { expires_at_s, .. } => Some(*expires_at_s),
            CellValue::Tombstone { deleted_at_s } => Some(*deleted_at_s),
        }
    }

    fn key_cmp(&self, other: &Cell) -> Ordering {
        (self.column, &self.path).cmp(&(other.column, &other.path))
    }
}

/// Which of two versions of the same cell survives: Cassandra's `Cells.reconcile`.
///
/// The higher timestamp wins. On a tie, a tombstone or an expiring cell beats a cell that lives
/// forever; a tombstone beats an expiring cell; between two of a kind the later local deletion
/// time wins; and last, the greater value (compared as unsigned bytes). Returns true if `a` wins.
pub fn reconcile(a: &Cell, b: &Cell) -> bool {
    if a.timestamp_us != b.timestamp_us {
        return a.timestamp_us > b.timestamp_us;
    }
    let (a_ldt, b_ldt) = (a.local_deletion_time(), b.local_deletion_time());
    if a_ldt.is_some() || b_ldt.is_some() {
        if a_ldt.is_some() != b_ldt.is_some() {
            return a_ldt.is_some();
        }
        let a_tomb = matches!(a.value, CellValue::Tombstone { .. });
        let b_tomb = matches!(b.value, CellValue::Tombstone { .. });
        if a_tomb != b_tomb {
            return a_tomb;
        }
        if a_ldt != b_ldt {
            return a_ldt > b_ldt;
        }
    }
    let value = |c: &Cell| match &c.value {
        CellValue::Live { value, .. } => value.clone(),
        CellValue::Tombstone { .. } => Vec::new(),
    };
    value(a) >= value(b)
}

/// One row's contents. Cells are kept sorted by (column, path) and unique.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Row {
    pub liveness: Option<Liveness>,
    pub deletion: Option<Deletion>,
    /// Deletions of whole non-frozen collection columns (`SET m = {...}` writes one before the
    /// new elements), sorted by column.
    pub column_deletions: Vec<(u32, Deletion)>,
    pub cells: Vec<Cell>,
}

impl Row {
    /// A row deletion, as `DELETE FROM t WHERE <full primary key>` writes.
    pub fn deleted(timestamp_us: i64, deleted_at_s: EpochSeconds) -> Row {
        Row {
            deletion: Some(Deletion {
                timestamp_us,
                deleted_at_s,
            }),
            ..Row::default()
        }
    }

    /// Sorts the cells and keeps one per (column, path), as [`reconcile`] decides. Callers that
    /// build a row by hand call this (or build it sorted).
    pub fn normalize(&mut self) {
        self.cells
            .sort_by(|a, b| a.key_cmp(b).then(b.timestamp_us.cmp(&a.timestamp_us)));
        let mut out: Vec<Cell> = Vec::with_capacity(self.cells.len());
        for cell in self.cells.drain(..) {
            match out.last_mut() {
                Some(last) if last.key_cmp(&cell) == Ordering::Equal => {
                    if !reconcile(last, &cell) {
                        *last = cell;
                    }
                }
                _ => out.push(cell),
            }
        }
        self.cells = out;
        self.column_deletions.sort_by_key(|(c, _)| *c);
        self.column_deletions.dedup_by(|later, kept| {
            if later.0 == kept.0 {
                if later.1.supersedes(&kept.1) {
                    kept.1 = later.1;
                }
                true
            } else {
                false
            }
        });
    }

    /// The newest timestamp anywhere in the row.
    pub fn max_timestamp_us(&self) -> i64 {
        let mut ts = i64::MIN;
        if let Some(l) = &self.liveness {
            ts = ts.max(l.timestamp_us);
        }
        if let Some(d) = &self.deletion {
            ts = ts.max(d.timestamp_us);
        }
        for (_, d) in &self.column_deletions {
            ts = ts.max(d.timestamp_us);
        }
        for c in &self.cells {
            ts = ts.max(c.timestamp_us);
        }
        ts
    }

    /// True if the row has anything a read would return at `now_s`: the same answer as
    /// `self.visible(now_s).is_live(now_s)`, without the copy (scans ask it of every row).
    pub fn is_live(&self, now_s: EpochSeconds) -> bool {
        self.liveness
            .is_some_and(|l| l.ttl_s == 0 || l.expires_at_s > now_s)
            || self.cells.iter().any(|c| c.value_at(now_s).is_some())
    }

    /// When the row stops having live content: `None` if some of it lives forever, otherwise
    /// the latest expiry among its live parts (or 0 if it has none at all).
    pub fn live_until_s(&self) -> Option<EpochSeconds> {
        let mut until: EpochSeconds = 0;
        if let Some(l) = &self.liveness {
            if l.ttl_s == 0 {
                return None;
            }
            until = until.max(l.expires_at_s);
        }
        for c in &self.cells {
            match &c.value {
                CellValue::Live { ttl_s: 0, .. } => return None,
                CellValue::Live { expires_at_s, .. } => until = until.max(*expires_at_s),
                CellValue::Tombstone { .. } => {}
            }
        }
        Some(until)
    }

    /// True if the row only sets content that never expires: no deletion of any kind and no
    /// TTL. Such an update can be written as a delta without reading the row it updates.
    pub fn sets_only(&self) -> bool {
        self.deletion.is_none()
            && self.column_deletions.is_empty()
            && self.liveness.is_none_or(|l| l.ttl_s == 0)
            && self
                .cells
                .iter()
                .all(|c| matches!(c.value, CellValue::Live { ttl_s: 0, .. }))
    }

    /// True if the row carries a deletion: of the row, of a column or of a cell. (Expiring
    /// content is not counted: a row that only expires is reclaimed when it does, as Aerospike
    /// reclaims it, unless an older version of it may still be on the device.)
    pub fn has_deletions(&self) -> bool {
        self.deletion.is_some()
            || !self.column_deletions.is_empty()
            || self
                .cells
                .iter()
                .any(|c| matches!(c.value, CellValue::Tombstone { .. }))
    }

    /// The latest local deletion time of any tombstone in the row (0 if none).
    pub fn latest_deletion_s(&self) -> EpochSeconds {
        let mut at = self.deletion.map_or(0, |d| d.deleted_at_s);
        for (_, d) in &self.column_deletions {
            at = at.max(d.deleted_at_s);
        }
        for c in &self.cells {
            if let CellValue::Tombstone { deleted_at_s } = c.value {
                at = at.max(deleted_at_s);
            }
        }
        at
    }

    /// The row as a read returns it at `now_s`, without copying: expired and deleted cells
    /// removed, deletions dropped.
    pub fn into_visible(mut self, now_s: EpochSeconds) -> Row {
        self.liveness = self.liveness.filter(|l| l.ttl_s == 0 || l.expires_at_s > now_s);
        self.deletion = None;
        self.column_deletions.clear();
        self.cells.retain(|c| c.value_at(now_s).is_some());
        self
    }

    /// The row as a read returns it at `now_s`: expired and deleted cells removed, deletions
    /// dropped.
    pub fn visible(&self, now_s: EpochSeconds) -> Row {
        self.clone().into_visible(now_s)
    }

    /// Merges `other` into `self` by last-write-wins per cell; the order of the two arguments
    /// does not change the result. Data shadowed by a deletion is dropped, cells expired by
    /// `now_s` become tombstones (as Cassandra's compaction turns them), and tombstones whose
    /// grace period ended before `purge_before_s` are dropped.
    pub fn merge(&mut self, other: Row, now_s: EpochSeconds, purge_before_s: EpochSeconds) {
        let deletion = match (self.deletion, other.deletion) {
            (Some(a), Some(b)) => Some(if b.supersedes(&a) { b } else { a }),
            (a, b) => a.or(b),
        };
        let liveness = match (self.liveness, other.liveness) {
            (Some(a), Some(b)) => Some(pick_liveness(a, b)),
            (a, b) => a.or(b),
        };
        let mut column_deletions = std::mem::take(&mut self.column_deletions);
        column_deletions.extend(other.column_deletions);
        let mut cells = std::mem::take(&mut self.cells);
        cells.extend(other.cells);
        let mut merged = Row {
            liveness,
            deletion,
            column_deletions,
            cells,
        };
        merged.normalize();
        merged.drop_shadowed(now_s, purge_before_s);
        *self = merged;
    }

    fn drop_shadowed(&mut self, now_s: EpochSeconds, purge_before_s: EpochSeconds) {
        for c in &mut self.cells {
            if let CellValue::Live {
                ttl_s, expires_at_s, ..
            } = c.value
            {
                if ttl_s != 0 && expires_at_s <= now_s {
                    c.value = CellValue::Tombstone {
                        deleted_at_s: expires_at_s,
                    };
                }
            }
        }
        if self
            .liveness
            .is_some_and(|l| l.ttl_s != 0 && l.expires_at_s <= now_s)
        {
            self.liveness = None;
        }
        if let Some(d) = self.deletion {
            if self.liveness.is_some_and(|l| d.shadows(l.timestamp_us)) {
                self.liveness = None;
            }
            self.column_deletions
                .retain(|(_, cd)| !d.shadows(cd.timestamp_us));
            self.cells.retain(|c| !d.shadows(c.timestamp_us));
        }
        let column_deletions = &self.column_deletions;
        self.cells.retain(|c| {
            !column_deletions
                .iter()
                .any(|(col, cd)| *col == c.column && cd.shadows(c.timestamp_us))
        });
        // Tombstones past their grace period have done their job on every replica.
        if self.deletion.is_some_and(|d| d.deleted_at_s < purge_before_s) {
            self.deletion = None;
        }
        self.column_deletions
            .retain(|(_, cd)| cd.deleted_at_s >= purge_before_s);
        self.cells.retain(|c| match c.value {
            CellValue::Tombstone { deleted_at_s } => deleted_at_s >= purge_before_s,
            CellValue::Live { .. } => true,
        });
    }
}

/// Liveness infos reconcile like cells: newer timestamp, then expiring over permanent, then the
/// later expiry (Cassandra's `LivenessInfo.supersedes`).
fn pick_liveness(a: Liveness, b: Liveness) -> Liveness {
    if a.timestamp_us != b.timestamp_us {
        return if a.timestamp_us > b.timestamp_us { a } else { b };
    }
    if (a.ttl_s != 0) != (b.ttl_s != 0) {
        return if a.ttl_s != 0 { a } else { b };
    }
    if a.expires_at_s >= b.expires_at_s {
        a
    } else {
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cells: Vec<Cell>) -> Row {
        let mut r = Row {
            cells,
            ..Row::default()
        };
        r.normalize();
        r
    }

    #[test]
    fn newer_timestamp_wins_in_either_order() {
        let old = row(vec![Cell::live(1, 10, b"old".to_vec())]);
        let new = row(vec![Cell::live(1, 20, b"new".to_vec())]);
        let mut a = old.clone();
        a.merge(new.clone(), 0, 0);
        let mut b = new;
        b.merge(old, 0, 0);
        assert_eq!(a, b);
        assert_eq!(a.cells[0].value_at(0), Some(&b"new"[..]));
    }

    #[test]
    fn ties_prefer_tombstone_then_greater_value() {
        let live = Cell::live(1, 10, b"x".to_vec());
        let tomb = Cell::tombstone(1, 10, 100);
        assert!(reconcile(&tomb, &live));
        assert!(!reconcile(&live, &tomb));
        let small = Cell::live(1, 10, b"a".to_vec());
        let big = Cell::live(1, 10, b"b".to_vec());
        assert!(reconcile(&big, &small));
        assert!(!reconcile(&small, &big));
        let expiring = Cell::expiring(1, 10, b"a".to_vec(), 5, 100);
        assert!(reconcile(&expiring, &big), "expiring beats permanent on a tie");
        assert!(reconcile(&tomb, &expiring), "tombstone beats expiring on a tie");
    }

    #[test]
    fn row_deletion_shadows_older_cells_only() {
        let mut r = row(vec![
            Cell::live(1, 10, b"a".to_vec()),
            Cell::live(2, 30, b"b".to_vec()),
        ]);
        r.merge(Row::deleted(20, 1000), 1000, 0);
        assert_eq!(r.cells.len(), 1);
        assert_eq!(r.cells[0].column, 2);
        assert!(r.is_live(1000));
    }

    #[test]
    fn tombstones_past_grace_are_purged() {
        let mut r = Row::deleted(20, 1000);
        r.merge(Row::default(), 2000, 999);
        assert!(r.deletion.is_some());
        r.merge(Row::default(), 2000, 1001);
        assert!(r.deletion.is_none());
    }

    #[test]
    fn is_live_answers_as_the_visible_row_does() {
        // Scans count live rows with `is_live` on the stored row; before 2026-12-02 they made
        // each row visible first, a copy of every cell, to ask the same question.
        let expiring = Liveness {
            timestamp_us: 10,
            ttl_s: 5,
            expires_at_s: 105,
        };
        let rows = [
            Row::default(),
            Row::deleted(20, 100),
            row(vec![Cell::tombstone(1, 10, 100)]),
            row(vec![
                Cell::expiring(1, 10, b"a".to_vec(), 5, 100),
                Cell::tombstone(2, 10, 100),
            ]),
            row(vec![Cell::live(1, 10, b"a".to_vec())]),
            Row {
                liveness: Some(expiring),
                ..Row::default()
            },
            Row {
                liveness: Some(expiring),
                deletion: Row::deleted(5, 100).deletion,
                ..row(vec![Cell::tombstone(1, 10, 100)])
            },
        ];
        for r in &rows {
            for now_s in [100, 104, 105, 200] {
                assert_eq!(
                    r.is_live(now_s),
                    r.visible(now_s).is_live(now_s),
                    "{r:?} at {now_s}"
                );
            }
        }
    }

    #[test]
    fn expiring_cells_vanish_at_their_time() {
        let r = row(vec![Cell::expiring(1, 10, b"a".to_vec(), 5, 100)]);
        assert!(r.is_live(104));
        assert!(!r.is_live(105));
        assert_eq!(r.live_until_s(), Some(105));
    }
}
