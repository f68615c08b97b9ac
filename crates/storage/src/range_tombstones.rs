//! Range and partition tombstones: `DELETE FROM t WHERE k = 1 AND c >= 2 AND c < 5` and
//! `DELETE FROM t WHERE k = 1`.
//!
//! Such a delete writes ONE record, not one per row: the partition's tombstones, kept in the
//! index under a key of their own ([`crate::token::tombstones_digest`]) beside the partition's
//! rows. Every read of a row of the partition merges the tombstone that covers it into the row
//! as a row deletion ([`PartitionTombstones::shadow`]), so a tombstone hides every older row in
//! its range whenever that row arrived: before the delete, after it with an older
//! `USING TIMESTAMP`, or later from a replica, a hint or a repair. Merging is last-write-wins
//! both ways (a new tombstone joins the record; a row never changes the record), so the order in
//! which a replica receives rows and tombstones does not change what a read returns.
//!
//! A partition's tombstones are kept until the latest of them is `tombstone_grace_s` old. The
//! expiry pass then writes each covering deletion into the rows it shadows, where the ordinary
//! row merge purges it together with the data it shadowed, and only after that drops the record
//! (`expiry.rs`). Until then the record stays in the index and on the device, so a cold start
//! finds it with the rows.

use std::cmp::Ordering;
use std::ops::Bound;

use crate::row::{Deletion, EpochSeconds, Row};

/// The range tombstones one partition may hold at once. Ranges inside a newer one are folded
/// into it; past this many distinct ranges a delete is refused (delete the partition instead).
pub const RANGE_TOMBSTONES_PER_PARTITION_MAX: usize = 10_000;

/// Every row of a partition whose clustering key lies between the bounds (byte order), deleted
/// as of `deletion`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeTombstone {
    pub start: Bound<Vec<u8>>,
    pub end: Bound<Vec<u8>>,
    pub deletion: Deletion,
}

impl RangeTombstone {
    /// True if the row at `clustering` lies inside the range.
    pub fn covers(&self, clustering: &[u8]) -> bool {
        let after_start = match &self.start {
            Bound::Included(s) => clustering >= s.as_slice(),
            Bound::Excluded(s) => clustering > s.as_slice(),
            Bound::Unbounded => true,
        };
        let before_end = match &self.end {
            Bound::Included(e) => clustering <= e.as_slice(),
            Bound::Excluded(e) => clustering < e.as_slice(),
            Bound::Unbounded => true,
        };
        after_start && before_end
    }

    /// True if every key in `other` is also in `self`.
    fn contains(&self, other: &RangeTombstone) -> bool {
        cmp_start(&self.start, &other.start) != Ordering::Greater
            && cmp_end(&self.end, &other.end) != Ordering::Less
    }
}

/// Orders start bounds by the first key they admit.
fn cmp_start(a: &Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> Ordering {
    fn rank(x: &Bound<Vec<u8>>) -> (u8, &[u8], u8) {
        match x {
            Bound::Unbounded => (0, &[], 0),
            Bound::Included(v) => (1, v, 0),
            Bound::Excluded(v) => (1, v, 1),
        }
    }
    rank(a).cmp(&rank(b))
}

/// Orders end bounds by the last key they admit.
fn cmp_end(a: &Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> Ordering {
    fn rank(x: &Bound<Vec<u8>>) -> (u8, &[u8], u8) {
        match x {
            Bound::Unbounded => (1, &[], 0),
            Bound::Excluded(v) => (0, v, 0),
            Bound::Included(v) => (0, v, 1),
        }
    }
    rank(a).cmp(&rank(b))
}

/// True if `a` wins over `b` as a deletion: the later timestamp, then the later local time.
fn supersedes(a: &Deletion, b: &Deletion) -> bool {
    (a.timestamp_us, a.deleted_at_s) > (b.timestamp_us, b.deleted_at_s)
}

fn later(a: Option<Deletion>, b: Deletion) -> Deletion {
    match a {
        Some(a) if supersedes(&a, &b) => a,
        _ => b,
    }
}

/// The tombstones of one partition: a partition deletion and range tombstones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionTombstones {
    /// `DELETE FROM t WHERE k = ?`: every row of the partition.
    pub partition: Option<Deletion>,
    /// Sorted by start bound, then end bound; none inside another with a deletion as new.
    pub ranges: Vec<RangeTombstone>,
}

impl PartitionTombstones {
    /// The tombstones of one delete: a range, or the whole partition when both bounds are open.
    pub fn of(start: Bound<Vec<u8>>, end: Bound<Vec<u8>>, deletion: Deletion) -> PartitionTombstones {
        if matches!((&start, &end), (Bound::Unbounded, Bound::Unbounded)) {
            return PartitionTombstones {
                partition: Some(deletion),
                ranges: Vec::new(),
            };
        }
        PartitionTombstones {
            partition: None,
            ranges: vec![RangeTombstone { start, end, deletion }],
        }
    }

    pub fn is_empty(&self) -> bool {
        self.partition.is_none() && self.ranges.is_empty()
    }

    /// Joins `other` into `self`. The result does not depend on the order of the two, and a
    /// range that a newer range or the partition deletion already covers is folded away.
    pub fn merge(&mut self, other: PartitionTombstones) {
        if let Some(d) = other.partition {
            self.partition = Some(later(self.partition, d));
        }
        let mut all = std::mem::take(&mut self.ranges);
        all.extend(other.ranges);
        // Newest first, so that a range is compared with every range that could cover it.
        all.sort_by(|a, b| {
            (b.deletion.timestamp_us, b.deletion.deleted_at_s)
                .cmp(&(a.deletion.timestamp_us, a.deletion.deleted_at_s))
                .then_with(|| cmp_start(&a.start, &b.start))
                .then_with(|| cmp_end(&a.end, &b.end))
        });
        let partition = self.partition;
        let mut kept: Vec<RangeTombstone> = Vec::with_capacity(all.len());
        for r in all {
            let shadowed_by_partition = partition.is_some_and(|p| !supersedes(&r.deletion, &p));
            let shadowed_by_range = kept
                .iter()
                .any(|k| k.contains(&r) && !supersedes(&r.deletion, &k.deletion));
            if !shadowed_by_partition && !shadowed_by_range {
                kept.push(r);
            }
        }
        kept.sort_by(|a, b| cmp_start(&a.start, &b.start).then_with(|| cmp_end(&a.end, &b.end)));
        self.ranges = kept;
    }

    /// The newest deletion that covers the row at `clustering`, if any.
    pub fn covering(&self, clustering: &[u8]) -> Option<Deletion> {
        let mut best = self.partition;
        for r in &self.ranges {
            if r.covers(clustering) {
                best = Some(later(best, r.deletion));
            }
        }
        best
    }

    /// Merges the deletion covering `clustering` into `row` (what a read returns); tombstones
    /// are not purged here.
    pub fn shadow(&self, clustering: &[u8], row: &mut Row, now_s: EpochSeconds) {
        if let Some(d) = self.covering(clustering) {
            row.merge(Row::deleted(d.timestamp_us, d.deleted_at_s), now_s, 0);
        }
    }

    /// The newest timestamp of any of the tombstones (`i64::MIN` if there are none).
    pub fn max_timestamp_us(&self) -> i64 {
        self.deletions().map(|d| d.timestamp_us).max().unwrap_or(i64::MIN)
    }

    /// The latest local deletion time: the grace period of the record runs from here.
    pub fn latest_deleted_at_s(&self) -> EpochSeconds {
        self.deletions().map(|d| d.deleted_at_s).max().unwrap_or(0)
    }

    fn deletions(&self) -> impl Iterator<Item = Deletion> + '_ {
        self.partition
            .iter()
            .copied()
            .chain(self.ranges.iter().map(|r| r.deletion))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row::Cell;

    fn del(ts: i64) -> Deletion {
        Deletion {
            timestamp_us: ts,
            deleted_at_s: 100,
        }
    }

    fn range(a: u8, b: u8, ts: i64) -> PartitionTombstones {
        PartitionTombstones::of(Bound::Included(vec![a]), Bound::Excluded(vec![b]), del(ts))
    }

    #[test]
    fn a_range_shadows_older_rows_inside_it_only() {
        let t = range(2, 5, 50);
        for (ck, ts, hidden) in [
            (1u8, 10, false),
            (2, 10, true),
            (4, 50, true),
            (4, 51, false),
            (5, 10, false),
        ] {
            let mut row = Row {
                cells: vec![Cell::live(1, ts, b"v".to_vec())],
                ..Row::default()
            };
            t.shadow(&[ck], &mut row, 1000);
            assert_eq!(!row.is_live(1000), hidden, "row {ck} at {ts}");
        }
    }

    #[test]
    fn merging_is_order_free_and_folds_covered_ranges() {
        let parts = [range(2, 5, 50), range(3, 4, 40), range(3, 4, 60), range(0, 9, 30)];
        let mut forward = PartitionTombstones::default();
        for p in parts.iter().cloned() {
            forward.merge(p);
        }
        let mut backward = PartitionTombstones::default();
        for p in parts.iter().rev().cloned() {
            backward.merge(p);
        }
        assert_eq!(forward, backward);
        // (3,4)@40 lies inside (2,5)@50; the others each have something of their own.
        assert_eq!(forward.ranges.len(), 3);
        assert_eq!(forward.covering(&[3]).map(|d| d.timestamp_us), Some(60));
        assert_eq!(forward.covering(&[2]).map(|d| d.timestamp_us), Some(50));
        assert_eq!(forward.covering(&[8]).map(|d| d.timestamp_us), Some(30));
        let mut with_partition = forward.clone();
        with_partition.merge(PartitionTombstones::of(
            Bound::Unbounded,
            Bound::Unbounded,
            del(55),
        ));
        assert_eq!(
            with_partition.ranges.len(),
            1,
            "only the range newer than the partition deletion"
        );
        assert_eq!(with_partition.covering(&[8]).map(|d| d.timestamp_us), Some(55));
    }
}
