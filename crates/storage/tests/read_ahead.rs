//! Reading ahead through io_uring (`read_ahead.rs`): a read or write finds the record read
//! ahead instead of reading the device itself, a read takes the index entry its read ahead
//! looked up (a write never does), and bytes read ahead that went stale (the row moved by
//! defragmentation since) are never served.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

mod common;

use common::{key, row, value};
use hayate_storage::{Engine, NamespaceConfig, ReadsAhead, ReadsDone};

const BLOCK: usize = 128 << 10;

/// Small blocks, and a post-write cache with room for a few only, so that older rows are read
/// from the device.
fn config(dir: &std::path::Path) -> NamespaceConfig {
    let mut c = NamespaceConfig::with_file("test", dir, 64 << 20);
    c.block_size_bytes = BLOCK as u32;
    c.post_write_cache_bytes = 4 * BLOCK as u64;
    c
}

fn open(dir: &std::path::Path) -> Engine {
    let mut c = config(dir);
    c.defrag_sleep_us = 0;
    let e = Engine::open(c).expect("open");
    // The test drives the ring by hand (`finish`): a driver must be attached for reads to start.
    if let Some(ring) = e.read_ring() {
        ring.on_queued(|| {});
    }
    e
}

/// Writes `k`, then enough other rows that `k`'s block leaves the post-write cache.
fn write_then_push_out(e: &Engine, k: &[u8], v: &[u8]) {
    e.write(key(k), row(1, v)).expect("write");
    for i in 0..(8 * BLOCK / 1024) {
        e.write(key(format!("filler-{i}").as_bytes()), row(1, &[7u8; 1000]))
            .expect("write");
    }
    e.sync().expect("sync");
}

struct Nothing;
impl Wake for Nothing {
    fn wake(self: Arc<Self>) {}
}

/// Waits for the reads as the server's driver would: submit, then reap until they finish.
fn finish(e: &Engine, ahead: ReadsAhead) -> ReadsDone {
    let ring = e.read_ring().expect("a ring").clone();
    let waker = Waker::from(Arc::new(Nothing));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(ahead.finish());
    loop {
        if let Poll::Ready(done) = fut.as_mut().poll(&mut cx) {
            return done;
        }
        ring.submit().expect("submit");
        ring.reap();
        std::thread::yield_now();
    }
}

#[test]
fn a_read_and_a_write_use_the_read_ahead_instead_of_the_device() {
    let dir = tempfile::tempdir().expect("temp dir");
    let e = open(dir.path());
    if e.read_ring().is_none() {
        eprintln!("io_uring is not available here; nothing to test");
        return;
    }
    write_then_push_out(&e, b"a", b"first");
    let before = e.stats().device_reads;
    assert_eq!(value(&e, b"a").as_deref(), Some(&b"first"[..]));
    assert_eq!(
        e.stats().device_reads,
        before + 1,
        "the row is on the device, not in a cache"
    );

    // A read: one read ahead, and the call makes none of its own.
    let ahead = e.read_ahead([key(b"a")]).expect("a device read to make");
    assert_eq!(ahead.len(), 1);
    let done = finish(&e, ahead);
    let before = e.stats().device_reads;
    {
        let _installed = done.install();
        assert_eq!(value(&e, b"a").as_deref(), Some(&b"first"[..]));
    }
    assert_eq!(e.stats().device_reads, before, "the read took the read ahead");

    // A write merges into the row read ahead, without a device read of its own.
    let ahead = e
        .read_ahead([key(b"a"), key(b"absent")])
        .expect("a device read to make");
    assert_eq!(ahead.len(), 1, "a row that does not exist needs no read");
    let done = finish(&e, ahead);
    let before = e.stats().device_reads;
    {
        let _installed = done.install();
        let mut update = row(2, b"second");
        update.cells[0].column = 1;
        e.write(key(b"a"), update).expect("write");
    }
    assert_eq!(e.stats().device_reads, before);
    let r = e.get(key(b"a")).expect("read").expect("the row");
    assert_eq!(r.cells.len(), 2, "the merge kept the cell read ahead: {r:?}");

    // A row in the open block or the post-write cache needs nothing read from the device (its
    // read still takes the entry looked up).
    assert_eq!(e.read_ahead([key(b"a")]).map_or(0, |a| a.len()), 0);
}

/// How many times the RAM index of the test's table was looked up so far.
fn lookups(e: &Engine) -> u64 {
    e.table_stats()
        .iter()
        .find(|t| t.table == common::TABLE)
        .map_or(0, |t| t.index_lookups)
}

#[test]
fn a_read_takes_the_lookup_its_read_ahead_made_and_a_write_never_does() {
    let dir = tempfile::tempdir().expect("temp dir");
    let e = open(dir.path());
    if e.read_ring().is_none() {
        eprintln!("io_uring is not available here; nothing to test");
        return;
    }
    write_then_push_out(&e, b"a", b"first");

    // A read: the read ahead looks the row up once, and the read does not look again.
    let before = lookups(&e);
    let done = finish(&e, e.read_ahead([key(b"a")]).expect("a device read to make"));
    {
        let _installed = done.install();
        assert_eq!(value(&e, b"a").as_deref(), Some(&b"first"[..]));
    }
    assert_eq!(lookups(&e) - before, 1, "one index lookup for a read read ahead");

    // A row rewritten after its read ahead started: the read returns the version its read
    // ahead looked up (current when the request came), and the next read the new one.
    let done = finish(&e, e.read_ahead([key(b"a")]).expect("a device read to make"));
    e.write(key(b"a"), row(5, b"newer")).expect("write");
    {
        let _installed = done.install();
        assert_eq!(value(&e, b"a").as_deref(), Some(&b"first"[..]));
    }
    assert_eq!(value(&e, b"a").as_deref(), Some(&b"newer"[..]));

    // A write never takes a read's entry: it merges with the version current under its lock.
    write_then_push_out(&e, b"b", b"one");
    let done = finish(&e, e.read_ahead([key(b"b")]).expect("a device read to make"));
    e.write(key(b"b"), row(6, b"two")).expect("write");
    {
        let _installed = done.install();
        let mut update = row(7, b"three");
        update.cells[0].column = 1;
        e.write(key(b"b"), update).expect("write");
    }
    let r = e.get(key(b"b")).expect("read").expect("the row");
    assert_eq!(r.cells.len(), 2, "the write merged with the row: {r:?}");
    assert_eq!(
        value(&e, b"b").as_deref(),
        Some(&b"two"[..]),
        "the newest version: {r:?}"
    );
}

#[test]
fn a_stale_read_ahead_is_never_served() {
    let dir = tempfile::tempdir().expect("temp dir");
    let e = open(dir.path());
    if e.read_ring().is_none() {
        return;
    }
    // (A row rewritten after its read ahead started is read as its read ahead looked it up:
    // `a_read_takes_the_lookup_its_read_ahead_made_and_a_write_never_does`.)

    // Moved by defragmentation after the read ahead, its old block freed: the read goes to
    // where the row is now. (The old block is not written again here: the free list is first
    // in, first out, and the device has hundreds of blocks.)
    write_then_push_out(&e, b"b", b"kept");
    let done = finish(&e, e.read_ahead([key(b"b")]).expect("a device read"));
    let defragmented = e.stats().defrag_blocks;
    for i in 0..(8 * BLOCK / 1024) {
        e.delete(key(format!("filler-{i}").as_bytes()), 10)
            .expect("delete");
    }
    e.sync().expect("sync");
    e.defrag_now();
    // By this pass or by the background one (which runs without sleeping here, and may have
    // taken the blocks first).
    assert!(e.stats().defrag_blocks > defragmented, "blocks were defragmented");
    for i in 0..(40 * BLOCK / 1024) {
        e.write(key(format!("more-{i}").as_bytes()), row(1, &[9u8; 1000]))
            .expect("write");
    }
    e.sync().expect("sync");
    {
        let _installed = done.install();
        assert_eq!(value(&e, b"b").as_deref(), Some(&b"kept"[..]));
    }
    // What no call used is taken back with the guard. This needs a row that stays on the
    // device from the read ahead to the read, and `b` may not: when the background pass (every
    // 200 ms) came during the deletes, it moved `b` into the open block among filler versions
    // that the deletes then killed, and that block, once sealed, is itself below the low-water
    // mark, so the next pass moves `b` again, into the open block, at any moment. A row in the
    // middle of the `more-*` rows sits in a block whose rows all stay live: nothing moves it.
    let unmoved = format!("more-{}", 20 * BLOCK / 1024);
    let unmoved = unmoved.as_bytes();
    let done = finish(&e, e.read_ahead([key(unmoved)]).expect("a device read"));
    drop(done.install());
    let before = e.stats().device_reads;
    assert_eq!(value(&e, unmoved).as_deref(), Some(&[9u8; 1000][..]));
    assert_eq!(
        e.stats().device_reads,
        before + 1,
        "the read read the device itself"
    );
}

#[test]
fn nothing_is_read_ahead_without_a_driver_or_with_io_uring_off() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut c = config(dir.path());
    let e = Engine::open(c.clone()).expect("open");
    write_then_push_out(&e, b"a", b"v");
    // No driver attached: a read started now would never be submitted.
    assert!(e.read_ahead([key(b"a")]).is_none());
    e.close().expect("close");
    c.io_uring = false;
    let e = Engine::open(c).expect("open");
    assert!(e.read_ring().is_none());
    assert!(e.read_ahead([key(b"a")]).is_none());
    assert_eq!(value(&e, b"a").as_deref(), Some(&b"v"[..]));
}

/// An update that will find the delta buffer full reads its row, so its row is read ahead; one
/// that will be written as a delta is not, and a row that already has a delta still takes an
/// update into it when the buffer is full for new ones.
#[test]
fn a_write_that_will_find_the_delta_buffer_full_has_its_row_read_ahead() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut c = config(dir.path());
    // Room for one small delta, not two.
    c.delta_buffer_bytes = 400;
    let e = Engine::open(c).expect("open");
    let Some(ring) = e.read_ring() else {
        return;
    };
    ring.on_queued(|| {});
    write_then_push_out(&e, b"a", b"first");
    write_then_push_out(&e, b"b", b"first");
    let mut update = row(2, b"second");
    update.cells[0].column = 1;

    // With room, an update is written as a delta: nothing to read.
    assert!(e.read_ahead_for_writes([(key(b"a"), &update)]).is_none());
    let before = e.stats();
    e.write(key(b"a"), update.clone()).expect("write");
    assert_eq!(e.stats().blind_writes, before.blind_writes + 1);
    assert_eq!(e.stats().device_reads, before.device_reads);

    // Full for a new delta: `b` is read ahead, and its write reads nothing itself.
    let ahead = e
        .read_ahead_for_writes([(key(b"b"), &update), (key(b"a"), &update)])
        .expect("b's row read ahead");
    assert_eq!(ahead.len(), 1, "a, which has a delta, takes the update into it");
    let done = finish(&e, ahead);
    let before = e.stats();
    {
        let _installed = done.install();
        e.write(key(b"b"), update.clone()).expect("write b");
        e.write(key(b"a"), row(3, b"third")).expect("write a");
    }
    let after = e.stats();
    assert_eq!(after.device_reads, before.device_reads, "b's read was read ahead");
    assert_eq!(
        after.blind_writes,
        before.blind_writes + 1,
        "only a's update is a delta"
    );
    assert_eq!(common::column(&e, b"b", 1).as_deref(), Some(&b"second"[..]));
    assert_eq!(common::column(&e, b"b", 0).as_deref(), Some(&b"first"[..]));
    assert_eq!(common::column(&e, b"a", 0).as_deref(), Some(&b"third"[..]));
    assert_eq!(common::column(&e, b"a", 1).as_deref(), Some(&b"second"[..]));
}
