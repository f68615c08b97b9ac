//! Opening a namespace (devices, the write buffer left by a crash, recovery, the core, the
//! background threads) and closing it (the index snapshot).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::blocks::{BlockTable, DeviceSet};
use crate::cache::PostWriteCache;
use crate::clock::{Clock, SystemClock};
use crate::config::NamespaceConfig;
use crate::deltas::Deltas;
use crate::device::{Device, FileDevice, NullDevice, ReadRing};
use crate::error::{OpenError, WriteError};
use crate::namespace::{Namespace, Recovered};
use crate::stats::Stats;
use crate::write_buffer::WriteBuffer;
use crate::writer::{spawn_flusher, Writer};

use super::Engine;

/// Where a file namespace's write buffer lives, and the device it belongs to.
struct BufferAt {
    dir: std::path::PathBuf,
    file: std::path::PathBuf,
    device: std::path::PathBuf,
}

impl Engine {
    /// Opens a namespace with the system clock.
    pub fn open(config: NamespaceConfig) -> Result<Engine, OpenError> {
        Engine::open_with_clock(config, Arc::new(SystemClock))
    }

    /// Opens a namespace: opens (or creates) its devices, rebuilds the index from the index
    /// snapshot if a clean shutdown left a current one, otherwise by scanning every block, and
    /// starts the flusher, defragmenter and expiry threads.
    pub fn open_with_clock(config: NamespaceConfig, clock: Arc<dyn Clock>) -> Result<Engine, OpenError> {
        config.validate().map_err(OpenError::Config)?;
        let mut devices: Vec<Arc<dyn Device>> = Vec::new();
        let mut locks = Vec::new();
        // A device file made now is a new device: whatever write buffer names its path was left
        // by a process whose device is gone (its data directory deleted, a disk lost), and must
        // not be written into this one.
        let new_device = config.devices.first().is_some_and(|d| !d.path.exists());
        for d in &config.devices {
            locks.push(lock_device(&d.path)?);
            let dev = FileDevice::open(&d.path, d.size_bytes, config.direct_io, config.read_page_cache)
                .map_err(|source| OpenError::Device {
                    path: d.path.clone(),
                    source,
                })?;
            devices.push(Arc::new(dev));
        }
        let in_ram_only = devices.is_empty();
        if in_ram_only {
            devices.push(Arc::new(NullDevice::new(config.memory_size_bytes)));
        }
        // A group commit makes every acknowledged write durable already: no buffer needed.
        let buffer = match (&config.write_buffer_dir, config.devices.first()) {
            (Some(dir), Some(first)) if !config.commit_to_device => {
                // Named after the device's canonical path, so that a restart naming the device
                // another way finds the same buffer.
                let device = first.path.canonicalize().map_err(|source| OpenError::Device {
                    path: first.path.clone(),
                    source,
                })?;
                Some(BufferAt {
                    dir: dir.clone(),
                    file: crate::write_buffer::path_for(dir, &device),
                    device,
                })
            }
            _ => None,
        };
        Engine::open_on(config, devices, clock, locks, in_ram_only, buffer, new_device)
    }

    /// Opens a namespace on devices the caller made (tests put fault-injecting devices here).
    /// `config.devices` is ignored (it may be empty): the devices given are the namespace's, and
    /// the index is rebuilt from them as from files.
    pub fn open_on_devices(
        config: NamespaceConfig,
        devices: Vec<Arc<dyn Device>>,
        clock: Arc<dyn Clock>,
    ) -> Result<Engine, OpenError> {
        // Bug fixed here: this used to run the full `validate()` and then decide "RAM only, skip
        // recovery" from `config.devices.is_empty()`. A config without device paths was refused
        // unless `data_in_memory`, and with one the engine never recovered what the given
        // devices held, so a crash test on a fault-injecting device could not reopen its data.
        config.validate_settings().map_err(OpenError::Config)?;
        if devices.is_empty() {
            return Err(OpenError::Config("open_on_devices: no devices given".into()));
        }
        Engine::open_on(config, devices, clock, Vec::new(), false, None, false)
    }

    fn open_on(
        config: NamespaceConfig,
        devices: Vec<Arc<dyn Device>>,
        clock: Arc<dyn Clock>,
        locks: Vec<std::fs::File>,
        in_ram_only: bool,
        buffer_at: Option<BufferAt>,
        new_device: bool,
    ) -> Result<Engine, OpenError> {
        let devices = Arc::new(DeviceSet::new(devices, config.block_size_bytes));
        if devices.blocks() < 4 {
            return Err(OpenError::Config(format!(
                "the devices hold {} write blocks of {} bytes; at least 4 are needed",
                devices.blocks(),
                config.block_size_bytes
            )));
        }
        let blocks = Arc::new(BlockTable::new(devices.blocks(), config.stop_writes_free_pct));
        // Before recovery, which would otherwise free blocks only snapshots still need.
        let pins = match &config.snapshots_dir {
            Some(root) => crate::snapshots::pin_all(root, &blocks),
            None => Vec::new(),
        };
        let cache = Arc::new(PostWriteCache::new(
            config.post_write_cache_bytes,
            !config.data_in_memory,
        ));
        let stats = Arc::new(Stats::default());
        let tables = RwLock::new(HashMap::new());
        let deltas = Deltas::new(config.delta_buffer_bytes);

        // What a crashed process left in its write buffer goes to the devices before the scan.
        if let Some(at) = buffer_at.as_ref().filter(|_| new_device) {
            if at.file.exists() {
                tracing::warn!(
                    "discarding the write buffer {}: it was left by a process whose device {} no longer \
                     exists (this device file is new), so its blocks belong to no device here",
                    at.file.display(),
                    at.device.display()
                );
                let _ = std::fs::remove_file(&at.file);
            }
        }
        if let Some(at) = &buffer_at {
            crate::write_buffer::remove_orphans(&at.dir);
            let replayed = crate::write_buffer::replay(&at.file, &at.device, &devices)
                .map_err(OpenError::WriteBuffer)?;
            if replayed.blocks > 0 || replayed.skipped > 0 {
                tracing::info!(
                    blocks = replayed.blocks,
                    skipped = replayed.skipped,
                    "replayed the write buffer {} left by a process that did not shut down cleanly",
                    at.file.display()
                );
            }
            if replayed.blocks > 0 {
                // The devices changed under any snapshot (a clean shutdown leaves none to
                // replay, so this is defence only).
                if let Some(snapshot) = &config.index_snapshot_path {
                    let _ = std::fs::remove_file(snapshot);
                }
            }
        }
        let recovered = if in_ram_only {
            for b in 0..devices.blocks() {
                blocks.release(b);
            }
            Recovered {
                next_sequence: 1,
                chunks: HashMap::new(),
            }
        } else {
            crate::recovery::recover(&config, &devices, &blocks, &cache, &tables, &deltas)
        };

        crate::snapshots::check_pins(&pins, &blocks);
        let buffer = match &buffer_at {
            None => None,
            Some(at) => Some(
                WriteBuffer::create(
                    &at.file,
                    &at.device,
                    config.block_size_bytes as usize,
                    config.write_buffer_blocks,
                )
                .map_err(|e| {
                    OpenError::WriteBuffer(format!(
                        "cannot create {} ({e}): write_buffer_dir must be a writable directory on \
                         a RAM file system with room for write_buffer_blocks blocks; set it to \
                         \"\" to go without (a process crash may then lose up to \
                         flush_interval_ms of acknowledged writes)",
                        at.file.display()
                    ))
                })?,
            ),
        };
        let writer = Arc::new(Writer::new(
            Arc::clone(&devices),
            Arc::clone(&blocks),
            Arc::clone(&cache),
            recovered.next_sequence,
            Duration::from_millis(config.flush_interval_ms.max(1)),
            Arc::clone(&stats),
            buffer,
        ));
        let ring = read_ring(&config, &devices);
        let inner = Arc::new(Namespace::new(
            config,
            clock,
            devices,
            blocks,
            cache,
            Arc::clone(&writer),
            tables,
            stats,
            recovered.chunks,
            deltas,
            ring,
        ));
        let threads = vec![
            spawn_flusher(writer),
            crate::defrag::spawn(Arc::clone(&inner)),
            crate::expiry::spawn(Arc::clone(&inner)),
        ];
        Ok(Engine {
            inner,
            threads: Mutex::new(threads),
            _locks: locks,
        })
    }

    /// Clean shutdown: stops the background threads, writes the open block, syncs, and saves
    /// the index snapshot for a fast restart.
    pub fn close(self) -> Result<(), WriteError> {
        self.shutdown_threads();
        if let Some(path) = &self.inner.config().index_snapshot_path {
            if let Err(e) = crate::snapshot::save(&self.inner, path) {
                tracing::warn!(
                    "could not save the index snapshot to {}: {e}; the next start will scan the devices",
                    path.display()
                );
            }
        }
        Ok(())
    }

    /// Stops the background threads, writes the open block, syncs and removes the write buffer,
    /// without an index snapshot: for a node that will not serve after all (its start failed)
    /// while parts of it may still hold the engine. The engine must take no write after it.
    pub fn shutdown(&self) {
        self.shutdown_threads();
    }

    fn shutdown_threads(&self) {
        let inner = &self.inner;
        if !inner.begin_shutdown() {
            return;
        }
        let mut threads = std::mem::take(&mut *self.threads.lock().expect("threads lock poisoned"));
        let flusher = threads.remove(0);
        // Defragmentation appends too: stop it before the flusher's last round.
        for t in threads {
            let _ = t.join();
        }
        inner.writer().shutdown();
        let _ = flusher.join();
        inner.writer().remove_buffer();
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Without `close`, the open block is still written and synced, but no snapshot is saved.
        self.shutdown_threads();
    }
}

/// The ring for a namespace whose records are read from devices that allow it, if io_uring is
/// on and the kernel allows it.
fn read_ring(config: &NamespaceConfig, devices: &DeviceSet) -> Option<Arc<ReadRing>> {
    if !config.io_uring || config.data_in_memory || devices.devices().iter().all(|d| d.record_fd().is_none())
    {
        return None;
    }
    match ReadRing::new() {
        Ok(ring) => Some(Arc::new(ring)),
        Err(e) => {
            tracing::info!(
                "device reads block their thread: io_uring is not available ({e}); \
                 allow the io_uring system calls to the process to read ahead"
            );
            None
        }
    }
}

fn lock_device(path: &std::path::Path) -> Result<std::fs::File, OpenError> {
    use std::os::unix::io::AsRawFd;
    let lock_path = PathBuf::from(format!("{}.lock", path.display()));
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|source| OpenError::Device {
            path: lock_path.clone(),
            source,
        })?;
    // SAFETY: a valid descriptor; flock has no memory effects.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(OpenError::DeviceInUse {
            path: path.to_path_buf(),
        });
    }
    Ok(f)
}
