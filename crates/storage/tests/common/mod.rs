//! Helpers shared by the storage integration tests: a seeded random source, the seeds to run, a
//! device that loses or tears unsynced writes the way a power failure does, and a log capture
//! to check that damage is reported.

#![allow(dead_code, reason = "each test binary uses a different part of this module")]

use std::fmt::Write as _;
use std::io;
use std::sync::{Arc, Mutex};

use hayate_storage::device::{Device, MemDevice, IO_ALIGN_BYTES};
use hayate_storage::{Cell, Engine, NamespaceConfig, Row, RowKey};

/// The table of the tests that need only one, with one column.
pub const TABLE: u32 = 1;

/// The row of `k` in [`TABLE`], with no clustering key.
pub fn key(k: &[u8]) -> RowKey<'_> {
    RowKey::new(TABLE, k, b"")
}

/// A row whose column 0 holds `v`, written at `ts`.
pub fn row(ts: i64, v: &[u8]) -> Row {
    Row {
        cells: vec![Cell::live(0, ts, v.to_vec())],
        ..Row::default()
    }
}

/// Column 0 of `k`'s row as read now, if the row and the cell are there.
pub fn value(e: &Engine, k: &[u8]) -> Option<Vec<u8>> {
    column(e, k, 0)
}

/// Column `c` of `k`'s row as read now, if the row and the cell are there.
pub fn column(e: &Engine, k: &[u8], c: u32) -> Option<Vec<u8>> {
    let r = e.get(key(k)).expect("read")?;
    r.cells
        .iter()
        .find(|cell| cell.column == c)
        .and_then(|cell| cell.value_at(0))
        .map(<[u8]>::to_vec)
}

/// xorshift64*: small, seeded, and the same on every platform.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // Spread small seeds so that seeds 1, 2, 3 do not start out alike; never zero.
        Rng((seed ^ 0x9e37_79b9_7f4a_7c15).wrapping_mul(0xbf58_476d_1ce4_e5b9) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        self.next_u64() % n
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}

/// The seeds a randomized test runs: `HAYATE_SEED` alone if it is set (to replay a failure),
/// otherwise the fixed list.
pub fn seeds(fixed: &[u64]) -> Vec<u64> {
    match std::env::var("HAYATE_SEED") {
        Ok(s) => vec![s.trim().parse().expect("HAYATE_SEED must be an unsigned integer")],
        Err(_) => fixed.to_vec(),
    }
}

/// A namespace config for [`hayate_storage::Engine::open_on_devices`]: 128 KiB blocks, reads
/// served by the device (not data-in-memory, a post-write cache of a few blocks), and background
/// passes that never act on their own timer during a test, so that what is durable at a crash
/// is exactly what the last `Engine::sync` made durable.
pub fn device_config(snapshot: Option<std::path::PathBuf>) -> NamespaceConfig {
    let mut c = NamespaceConfig::in_memory("test", 0);
    c.devices = Vec::new();
    c.data_in_memory = false;
    c.block_size_bytes = 128 << 10;
    c.post_write_cache_bytes = 4 * (128 << 10);
    c.flush_interval_ms = 3_600_000;
    c.expiry_period_ms = 3_600_000;
    c.defrag_sleep_us = 0;
    c.index_snapshot_path = snapshot;
    c
}

/// How a [`FaultyDevice`] crashes.
#[derive(Clone, Copy, Debug)]
pub enum Crash {
    /// Every write since the last sync is lost.
    LoseUnsynced,
    /// A device that completes writes in order: a seeded prefix of the unsynced writes landed,
    /// the next one is torn (some of its 4 KiB sectors landed, others not), the rest are lost.
    TornTail(u64),
    /// A device that reorders: every 4 KiB sector of every unsynced write landed or not, at
    /// random.
    Scrambled(u64),
}

struct Pending {
    offset: u64,
    data: Vec<u8>,
}

/// A device in RAM that keeps what a power failure would keep apart from what it would lose:
/// writes land in a volatile copy; `sync` makes them durable; [`FaultyDevice::crash`] returns a
/// new device holding only the durable copy, plus, if asked, some unsynced sectors. Writes and
/// syncs can also be made to fail.
pub struct FaultyDevice {
    volatile: MemDevice,
    durable: MemDevice,
    size_bytes: u64,
    state: Mutex<FaultState>,
}

#[derive(Default)]
struct FaultState {
    /// Writes since the last sync, in the order they completed.
    unsynced: Vec<Pending>,
    syncs: u64,
    fail_io: bool,
}

impl FaultyDevice {
    pub fn new(size_bytes: u64) -> FaultyDevice {
        FaultyDevice {
            volatile: MemDevice::new(size_bytes),
            durable: MemDevice::new(size_bytes),
            size_bytes,
            state: Mutex::new(FaultState::default()),
        }
    }

    fn from_image(image: &[u8]) -> FaultyDevice {
        let d = FaultyDevice::new(image.len() as u64);
        d.volatile.write_at(image, 0).expect("image fits");
        d.durable.write_at(image, 0).expect("image fits");
        d
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FaultState> {
        self.state.lock().expect("fault state lock poisoned")
    }

    /// From now on every write and sync fails with an I/O error (a dying device).
    pub fn fail_io(&self, fail: bool) {
        self.lock().fail_io = fail;
    }

    pub fn syncs(&self) -> u64 {
        self.lock().syncs
    }

    pub fn unsynced_writes(&self) -> usize {
        self.lock().unsynced.len()
    }

    /// The whole durable contents.
    pub fn durable_image(&self) -> Vec<u8> {
        let mut image = vec![0u8; self.size_bytes as usize];
        self.durable.read_at(&mut image, 0).expect("whole device");
        image
    }

    /// What the device holds after a power failure now. The engine that used this device must
    /// be dropped (not closed: a clean close would save an index snapshot for the old contents).
    pub fn crash(&self, how: Crash) -> FaultyDevice {
        let st = self.lock();
        let mut image = self.durable_image();
        let apply_sectors = |image: &mut [u8], p: &Pending, rng: &mut Rng| {
            for (i, sector) in p.data.chunks(IO_ALIGN_BYTES).enumerate() {
                if rng.chance(1, 2) {
                    let at = p.offset as usize + i * IO_ALIGN_BYTES;
                    image[at..at + sector.len()].copy_from_slice(sector);
                }
            }
        };
        match how {
            Crash::LoseUnsynced => {}
            Crash::TornTail(seed) => {
                let mut rng = Rng::new(seed);
                let landed = rng.below(st.unsynced.len() as u64 + 1) as usize;
                for p in &st.unsynced[..landed] {
                    let at = p.offset as usize;
                    image[at..at + p.data.len()].copy_from_slice(&p.data);
                }
                if let Some(torn) = st.unsynced.get(landed) {
                    apply_sectors(&mut image, torn, &mut rng);
                }
            }
            Crash::Scrambled(seed) => {
                let mut rng = Rng::new(seed);
                for p in &st.unsynced {
                    apply_sectors(&mut image, p, &mut rng);
                }
            }
        }
        FaultyDevice::from_image(&image)
    }
}

impl Device for FaultyDevice {
    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        assert_eq!(offset % IO_ALIGN_BYTES as u64, 0, "unaligned read at {offset}");
        assert_eq!(buf.len() % IO_ALIGN_BYTES, 0, "unaligned read of {}", buf.len());
        self.volatile.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        assert_eq!(offset % IO_ALIGN_BYTES as u64, 0, "unaligned write at {offset}");
        assert_eq!(buf.len() % IO_ALIGN_BYTES, 0, "unaligned write of {}", buf.len());
        let mut st = self.lock();
        if st.fail_io {
            return Err(io::Error::other("injected write failure"));
        }
        self.volatile.write_at(buf, offset)?;
        st.unsynced.push(Pending {
            offset,
            data: buf.to_vec(),
        });
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut st = self.lock();
        if st.fail_io {
            return Err(io::Error::other("injected sync failure"));
        }
        for p in st.unsynced.drain(..) {
            self.durable.write_at(&p.data, p.offset)?;
        }
        st.syncs += 1;
        Ok(())
    }

    fn name(&self) -> String {
        "faulty-memory".to_string()
    }
}

/// Log lines captured on this thread, as "LEVEL message field=value ...".
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<String>>>);

impl Logs {
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().expect("log lock poisoned").clone()
    }

    /// How many captured lines contain `needle`.
    pub fn count(&self, needle: &str) -> usize {
        self.lines().iter().filter(|l| l.contains(needle)).count()
    }
}

/// Runs `f` with every `tracing` event on this thread captured (the engine logs recovery and
/// read errors on the calling thread).
pub fn capture_logs<R>(f: impl FnOnce() -> R) -> (R, Logs) {
    let logs = Logs::default();
    let subscriber = Capture(logs.clone());
    let r = tracing::subscriber::with_default(subscriber, f);
    (r, logs)
}

struct Capture(Logs);

struct Line(String);

impl tracing::field::Visit for Line {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, " {value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let mut line = Line(event.metadata().level().to_string());
        event.record(&mut line);
        (self.0).0.lock().expect("log lock poisoned").push(line.0);
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

/// Opens an engine on `device` with a manual clock. Regression: `Engine::open_on_devices`
/// refused a config without device paths unless it was data-in-memory, and with one it skipped
/// recovery, so an engine reopened on a crashed device came up empty.
pub fn open_on(
    config: &NamespaceConfig,
    device: &Arc<FaultyDevice>,
    clock: &Arc<hayate_storage::ManualClock>,
) -> hayate_storage::Engine {
    let dev: Arc<dyn Device> = Arc::clone(device) as Arc<dyn Device>;
    hayate_storage::Engine::open_on_devices(config.clone(), vec![dev], Arc::clone(clock) as _)
        .expect("open on the fault-injecting device")
}
