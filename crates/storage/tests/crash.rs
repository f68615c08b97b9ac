//! A writer process killed with SIGKILL at random moments, in rounds on the same device file: after
//! each kill the parent reopens the namespace and checks what the durability settings promise.
//!
//! - `commit_to_device = true`: every acknowledged write survives.
//! - the default (`commit_to_device = false` with the write buffer in `/dev/shm`): every
//!   acknowledged write survives too, from the buffer the next open replays.
//! - `commit_to_device = false` without a write buffer: a write acknowledged well before the
//!   kill survives; the bound is the flush interval plus what was queued behind the device (see
//!   `UNBUFFERED_LOSS_BOUND`).
//!
//! The child is this test binary itself, running `child_writer` with `HAYATE_CRASH_CHILD_DIR`
//! set: several threads write keys `start, start + 1, ...` on a real file with O_DIRECT and print
//! each key once its write is acknowledged, with the monotonic clock (which parent and child
//! share) at that moment. Replay a failure with `HAYATE_SEED=<seed>`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::Rng;
use hayate_storage::{Cell, Engine, NamespaceConfig, Row, RowKey};

const CHILD_DIR_ENV: &str = "HAYATE_CRASH_CHILD_DIR";
const CHILD_START_ENV: &str = "HAYATE_CRASH_CHILD_START";
const CHILD_MODE_ENV: &str = "HAYATE_CRASH_CHILD_MODE";
/// Microseconds each child thread sleeps after a write in the modes without group commit. A slow writer takes
/// seconds to fill a block, so only the flusher's timer saves its writes; a fast one fills
/// blocks faster than the device takes them.
const CHILD_PACE_ENV: &str = "HAYATE_CRASH_CHILD_PACE_US";
const CHILD_THREADS: u64 = 4;
const ROUNDS: u32 = 4;
/// How long the parent waits for the child's next acknowledgement before giving up on it.
const ACK_TIMEOUT: Duration = Duration::from_secs(60);
const FLUSH_INTERVAL_MS: u64 = 100;
/// Without a write buffer, every write acknowledged longer than this before the kill must
/// survive: the flush interval, with a generous margin for the device write and sync that may
/// be in progress and for blocks queued ahead of the open one.
const UNBUFFERED_LOSS_BOUND: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `commit_to_device`: group commit.
    Durable,
    /// The default: acknowledged from RAM, with the write buffer in shared memory.
    Buffered,
    /// Acknowledged from RAM without a write buffer.
    Unbuffered,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Durable => "durable",
            Mode::Buffered => "buffered",
            Mode::Unbuffered => "unbuffered",
        }
    }

    fn parse(name: &str) -> Mode {
        [Mode::Durable, Mode::Buffered, Mode::Unbuffered]
            .into_iter()
            .find(|m| m.name() == name)
            .expect("a mode name")
    }

    /// Whether a write acknowledged just before the kill may be lost.
    fn may_lose_recent(self) -> bool {
        self == Mode::Unbuffered
    }
}

fn config(dir: &Path, mode: Mode) -> NamespaceConfig {
    let mut c = NamespaceConfig::with_file("crash", dir, 64 << 20);
    c.block_size_bytes = 128 << 10;
    c.post_write_cache_bytes = 1 << 20;
    c.commit_to_device = mode == Mode::Durable;
    c.flush_interval_ms = if mode == Mode::Durable {
        1_000
    } else {
        FLUSH_INTERVAL_MS
    };
    if mode == Mode::Unbuffered {
        c.write_buffer_dir = None;
    }
    c
}

fn key_bytes(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

fn value(k: u64) -> Vec<u8> {
    let unit = format!("value of key {k};").into_bytes();
    unit.iter()
        .copied()
        .cycle()
        .take(40 + (k % 7) as usize * 23)
        .collect()
}

fn row(k: u64) -> Row {
    Row {
        cells: vec![Cell::live(0, k as i64, value(k))],
        ..Row::default()
    }
}

/// The monotonic clock in nanoseconds: the same clock in every process on the machine.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid pointer to a timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The child: does nothing in a normal test run. Under the parent it writes until killed.
#[test]
fn child_writer() {
    let Ok(dir) = std::env::var(CHILD_DIR_ENV) else {
        return;
    };
    let start: u64 = std::env::var(CHILD_START_ENV)
        .expect("start key")
        .parse()
        .expect("start key is a number");
    let mode = Mode::parse(&std::env::var(CHILD_MODE_ENV).expect("mode"));
    let pace = Duration::from_micros(
        std::env::var(CHILD_PACE_ENV)
            .expect("pace")
            .parse()
            .expect("pace is a number"),
    );
    let engine = Arc::new(Engine::open(config(Path::new(&dir), mode)).expect("child opens the namespace"));
    let next = Arc::new(AtomicU64::new(start));
    let threads: Vec<_> = (0..CHILD_THREADS)
        .map(|_| {
            let (engine, next) = (Arc::clone(&engine), Arc::clone(&next));
            std::thread::spawn(move || loop {
                let k = next.fetch_add(1, Ordering::SeqCst);
                let key_bytes = key_bytes(k);
                let key = RowKey::new(1, &key_bytes, b"");
                engine.write(key, row(k)).expect("child write");
                let acked_ns = monotonic_ns();
                // One short line per write, so that a kill cannot leave half a line that parses.
                let mut out = std::io::stdout().lock();
                writeln!(out, "ack {k} {acked_ns} end").expect("stdout");
                out.flush().expect("stdout");
                drop(out);
                if !pace.is_zero() {
                    std::thread::sleep(pace);
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    panic!("the child's writer threads stopped; the parent should have killed it");
}

fn parse_ack(line: &str) -> Option<(u64, u64)> {
    // libtest may print "test child_writer ... " on the same line as the first ack.
    let rest = &line[line.find("ack ")? + 4..];
    let mut parts = rest.split(' ');
    let key = parts.next()?.parse().ok()?;
    let acked_ns = parts.next()?.parse().ok()?;
    (parts.next()? == "end").then_some((key, acked_ns))
}

/// One child run: starts it at `start`, kills it with SIGKILL when `kill_when` says so, and
/// returns every acknowledgement it printed with the time of the kill.
fn run_child(
    dir: &Path,
    start: u64,
    mode: Mode,
    pace_us: u64,
    mut kill_when: impl FnMut(usize, Duration) -> bool,
) -> (BTreeMap<u64, u64>, u64) {
    let stderr_path = dir.join(format!("child-{start}.stderr"));
    let stderr = std::fs::File::create(&stderr_path).expect("child stderr file");
    let mut child = Command::new(std::env::current_exe().expect("test binary path"))
        .args(["child_writer", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR_ENV, dir)
        .env(CHILD_START_ENV, start.to_string())
        .env(CHILD_MODE_ENV, mode.name())
        .env(CHILD_PACE_ENV, pace_us.to_string())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("spawn the child writer");
    let stdout = child.stdout.take().expect("child stdout");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(ack) = parse_ack(&line) {
                if tx.send(ack).is_err() {
                    break;
                }
            }
        }
    });
    let started = std::time::Instant::now();
    let mut acked = BTreeMap::new();
    let kill_ns = loop {
        if kill_when(acked.len(), started.elapsed()) {
            break monotonic_ns();
        }
        match rx.recv_timeout(Duration::from_millis(10)) {
            Ok((k, ns)) => {
                acked.insert(k, ns);
            }
            Err(mpsc::RecvTimeoutError::Timeout) if started.elapsed() < ACK_TIMEOUT => {}
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the child stopped acknowledging writes ({e:?}) after {} acks; its stderr:\n{}",
                    acked.len(),
                    std::fs::read_to_string(&stderr_path).unwrap_or_default()
                );
            }
        }
    };
    // `Child::kill` sends SIGKILL: no destructor, no flush, no snapshot.
    child.kill().expect("SIGKILL the child");
    let status = child.wait().expect("reap the child");
    assert!(
        !status.success(),
        "the child must die by the signal, not exit: {status:?}"
    );
    reader.join().expect("reader thread");
    // Lines written before the kill and still in the pipe were acknowledged before it too.
    acked.extend(rx.try_iter());
    (acked, kill_ns)
}

/// Opens the namespace in the parent and checks that every key in `required` reads back with
/// its value and that every key that reads back at all has its own value.
fn verify(dir: &Path, mode: Mode, required: &BTreeSet<u64>, written_up_to: u64, what: &str) -> Engine {
    let engine = Engine::open(config(dir, mode)).expect("parent reopens the namespace");
    let mut missing = Vec::new();
    for k in 0..written_up_to {
        let key_bytes = key_bytes(k);
        let key = RowKey::new(1, &key_bytes, b"");
        match engine.get(key).unwrap_or_else(|e| panic!("{what}: key {k}: {e}")) {
            Some(r) => assert_eq!(
                r.cells[0].value_at(0),
                Some(&value(k)[..]),
                "{what}: key {k} reads back a value it was never given"
            ),
            None if required.contains(&k) => missing.push(k),
            None => {}
        }
    }
    assert!(
        missing.is_empty(),
        "{what}: {} acknowledged keys are missing after the kill, first {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    engine
}

fn crash_rounds(mode: Mode, seed: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = Rng::new(seed);
    let mut required = BTreeSet::new();
    let mut next = 0u64;
    for round in 0..ROUNDS {
        let what = format!("{} mode, seed {seed}, round {round}", mode.name());
        let (acked, kill_ns) = if mode == Mode::Durable {
            let after = rng.range(1, 1_000) as usize;
            run_child(dir.path(), next, mode, 0, |acks, _| acks >= after)
        } else {
            // Slow rounds (a block takes seconds to fill) and fast ones (blocks fill faster
            // than the device takes them) alternate.
            // A fast round stops by a count too, before it fills the device.
            let pace_us = if round % 2 == 0 { 30_000 } else { 0 };
            let after = Duration::from_millis(rng.range(1_500, 3_000));
            let most = rng.range(20_000, 80_000) as usize;
            run_child(dir.path(), next, mode, pace_us, |acks, elapsed| {
                elapsed >= after || acks >= most
            })
        };
        assert!(!acked.is_empty(), "{what}: the child acknowledged nothing");
        let bound_ns = UNBUFFERED_LOSS_BOUND.as_nanos() as u64;
        let mut late = 0;
        for (&k, &acked_ns) in &acked {
            if !mode.may_lose_recent() || acked_ns + bound_ns <= kill_ns {
                required.insert(k);
            } else {
                late += 1;
            }
        }
        let written_up_to = acked.keys().max().expect("acks") + 1 + CHILD_THREADS;
        let engine = verify(dir.path(), mode, &required, written_up_to, &what);
        // What a mode without a write buffer actually lost, for the record: the oldest lost
        // acknowledgement.
        let lost: Vec<u64> = acked
            .iter()
            .filter(|(&k, _)| {
                let key_bytes = key_bytes(k);
                let key = RowKey::new(1, &key_bytes, b"");
                engine.get(key).expect("read").is_none()
            })
            .map(|(_, &ns)| kill_ns.saturating_sub(ns))
            .collect();
        eprintln!(
            "{what}: {} writes acknowledged ({late} within {UNBUFFERED_LOSS_BOUND:?} of the kill, not \
             required), {} required keys all present; {} acknowledged writes lost, the oldest {:?} \
             before the kill",
            acked.len(),
            required.len(),
            lost.len(),
            Duration::from_nanos(lost.iter().copied().max().unwrap_or(0))
        );
        // Every other round the parent closes cleanly, so the next child starts from the index
        // snapshot rather than from a scan.
        if round % 2 == 0 {
            engine.close().expect("close");
        } else {
            drop(engine);
        }
        next = written_up_to;
    }
}

#[test]
fn sigkill_loses_no_acknowledged_write_with_commit_to_device() {
    for seed in common::seeds(&[7]) {
        crash_rounds(Mode::Durable, seed);
    }
}

#[test]
fn sigkill_loses_no_acknowledged_write_with_the_default_write_buffer() {
    for seed in common::seeds(&[9]) {
        crash_rounds(Mode::Buffered, seed);
    }
}

#[test]
fn sigkill_without_a_write_buffer_loses_at_most_the_last_flush_interval() {
    for seed in common::seeds(&[8]) {
        crash_rounds(Mode::Unbuffered, seed);
    }
}

/// Regression: a node whose data directory was deleted after a SIGKILL (a lost disk, replaced
/// by a new node on the same path) replayed the dead process's write buffer, still in
/// `/dev/shm`, into its brand-new device: rows of the dead node came back in the new one.
#[test]
fn a_write_buffer_left_for_a_device_that_is_gone_is_discarded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(dir.path(), Mode::Buffered);
    let device = cfg.devices[0].path.clone();
    // Slow writes: the open block holds the last ones when the kill comes.
    let (acked, _) = run_child(dir.path(), 0, Mode::Buffered, 5_000, |acks, _| acks >= 200);
    assert!(acked.len() >= 200);
    let buffer = hayate_storage::write_buffer::path_for(
        cfg.write_buffer_dir.as_deref().expect("a write buffer"),
        &device.canonicalize().expect("the device exists"),
    );
    assert!(buffer.exists(), "the killed child left its write buffer behind");
    std::fs::remove_file(&device).expect("the disk is lost");
    let _ = std::fs::remove_file(cfg.index_snapshot_path.as_ref().expect("a snapshot path"));
    let engine = Engine::open(config(dir.path(), Mode::Buffered)).expect("a new device opens");
    for k in acked.keys() {
        let key_bytes = key_bytes(*k);
        let key = RowKey::new(1, &key_bytes, b"");
        assert_eq!(
            engine.get(key).expect("reads"),
            None,
            "key {k} of the dead process came back in the new device"
        );
    }
    engine.close().expect("close");
}
