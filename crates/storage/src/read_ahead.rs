//! Reading ahead: the device reads that a row's read or write would make, started through the
//! ring ([`ReadRing`]) before the call, so that the call finds the bytes in memory instead of
//! blocking its thread on `pread`.
//!
//! The engine's calls stay synchronous. A caller on an async runtime asks for the reads a set
//! of rows needs ([`crate::Engine::read_ahead`]), awaits them ([`ReadsAhead::finish`]), and makes the
//! call with the finished reads installed on its thread ([`ReadsDone::install`]). A record read
//! takes an installed buffer only if it is for the same block, the same block sequence and
//! the same span of the device that it would read itself; a row that moved in the meantime
//! (defragmentation, a newer write) is read as before. What it then decodes is checked as any
//! device read is (sequence, key, CRC).
//!
//! A one-row read also takes the index entry its read ahead looked up ([`take_entry`]), so the
//! row is looked up once: the version read is the one current when the read ahead started,
//! after the request arrived, as a read that looked up then and blocked on the device would
//! return. A write never takes one: it merges with the version current under its row lock.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::device::{align_down, align_up, AlignedBuf, RingRead};
use crate::index::{Entry, IndexKey, Location};
use crate::stats::Stats;
use crate::TableId;

/// What one read ahead covers: a span of one block, at one sequence of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub block: u32,
    pub sequence: u64,
    /// Offset within the block, aligned.
    pub start: usize,
    /// Aligned length.
    pub len: usize,
}

impl Span {
    /// The aligned span a device read of the record at `loc` covers, in its block at `sequence`.
    pub fn of(loc: Location, sequence: u64) -> Span {
        let start = align_down(loc.offset() as usize);
        Span {
            block: loc.block(),
            sequence,
            start,
            len: align_up(loc.offset() as usize + loc.len() as usize) - start,
        }
    }
}

/// Reads started in the ring; [`ReadsAhead::finish`] waits for them.
pub struct ReadsAhead {
    pub(crate) reads: Vec<(Span, RingRead)>,
    /// The entries looked up for reads (not writes) whose records are read ahead.
    pub(crate) entries: Vec<(TableId, Entry)>,
    pub(crate) stats: Arc<Stats>,
}

/// Reads finished; [`ReadsDone::install`] lends them to the engine calls on this thread.
pub struct ReadsDone {
    reads: Vec<(Span, AlignedBuf)>,
    entries: Vec<(TableId, Entry)>,
}

impl ReadsAhead {
    /// How many reads were started.
    pub fn len(&self) -> usize {
        self.reads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.reads.is_empty()
    }

    /// Waits for every read. One that failed is left out: the call reads that record itself,
    /// and reports the error as it would have.
    pub async fn finish(self) -> ReadsDone {
        let mut done = Vec::with_capacity(self.reads.len());
        for (span, read) in self.reads {
            if let Ok(buf) = read.await {
                self.stats.add_device_read();
                done.push((span, buf));
            }
        }
        ReadsDone {
            reads: done,
            entries: self.entries,
        }
    }
}

thread_local! {
    static INSTALLED: RefCell<Vec<(Span, AlignedBuf)>> = const { RefCell::new(Vec::new()) };
    static INSTALLED_ENTRIES: RefCell<Vec<(TableId, Entry)>> = const { RefCell::new(Vec::new()) };
}

impl ReadsDone {
    /// Lends the reads to engine calls on this thread until the guard is dropped. The guard
    /// cannot leave the thread, so an `.await` cannot come between the install and the calls.
    pub fn install(self) -> Installed {
        INSTALLED.with(|cell| cell.borrow_mut().extend(self.reads));
        INSTALLED_ENTRIES.with(|cell| cell.borrow_mut().extend(self.entries));
        Installed {
            _on_this_thread: PhantomData,
        }
    }
}

/// Reads installed on this thread; dropping it takes back what no call used.
pub struct Installed {
    _on_this_thread: PhantomData<*const ()>,
}

impl Drop for Installed {
    fn drop(&mut self) {
        INSTALLED.with(|cell| cell.borrow_mut().clear());
        INSTALLED_ENTRIES.with(|cell| cell.borrow_mut().clear());
    }
}

/// The index entry of `key` in `table` that an installed read ahead looked up, if there is one; it is
/// used once. Only a read takes it (see the module's doc).
pub(crate) fn take_entry(table: TableId, key: &IndexKey) -> Option<Entry> {
    INSTALLED_ENTRIES.with(|cell| {
        let mut entries = cell.borrow_mut();
        let i = entries.iter().position(|(t, e)| *t == table && e.key == *key)?;
        Some(entries.swap_remove(i).1)
    })
}

/// The installed read of exactly this span, if there is one; it is used once.
pub(crate) fn take(span: Span) -> Option<AlignedBuf> {
    INSTALLED.with(|cell| {
        let mut reads = cell.borrow_mut();
        let i = reads.iter().position(|(s, _)| *s == span)?;
        Some(reads.swap_remove(i).1)
    })
}
