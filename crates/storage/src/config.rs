//! A namespace's configuration: where its devices are and how it writes.
//!
//! Defaults follow Aerospike's (1 MiB write blocks, 1 s flush of a partly filled block, a 256 MiB
//! post-write cache, defragmentation below 50% live, writes stopped below 5% free) and
//! Cassandra's (10 days of tombstone grace, as `gc_grace_seconds`).

use std::path::PathBuf;

pub const BLOCK_SIZE_MIN_BYTES: u32 = 128 << 10;
pub const BLOCK_SIZE_MAX_BYTES: u32 = 8 << 20;
/// Where a file namespace keeps its write buffer by default: RAM that outlives the process.
pub const WRITE_BUFFER_DIR_DEFAULT: &str = "/dev/shm";

#[derive(Clone, Debug)]
pub struct DeviceConfig {
    /// A plain file (created and preallocated if missing) or a raw block device.
    pub path: PathBuf,
    /// The size of a file to create; ignored for a block device or a larger existing file.
    pub size_bytes: u64,
}

#[derive(Clone, Debug)]
pub struct NamespaceConfig {
    pub name: String,
    /// Where records live. Empty with `data_in_memory` means RAM only, without persistence.
    pub devices: Vec<DeviceConfig>,
    /// Keep every block in RAM as well, so reads never touch a device (Aerospike's
    /// data-in-memory). With devices, they persist the data and cold start reads them back.
    pub data_in_memory: bool,
    /// The RAM to give a data-in-memory namespace that has no device.
    pub memory_size_bytes: u64,
    pub block_size_bytes: u32,
    /// How long a partly filled write block may wait before it is written to the device.
    pub flush_interval_ms: u64,
    /// Acknowledge a write only once it is durable on the device (group commit).
    pub commit_to_device: bool,
    /// RAM for recently written blocks, so fresh records are read without a device read.
    pub post_write_cache_bytes: u64,
    /// Blocks whose live data falls below this share of the block are defragmented.
    pub defrag_lwm_pct: u32,
    /// Pause after each defragmented block, to keep the cost to foreground traffic flat.
    pub defrag_sleep_us: u64,
    /// Client writes fail with "device full" when fewer than this share of blocks are free;
    /// the rest is defragmentation's reserve.
    pub stop_writes_free_pct: u32,
    /// How long a tombstone outlives its deletion, so every replica learns of it first; a table
    /// may have its own ([`crate::Engine::set_tombstone_grace`], Cassandra's `gc_grace_seconds`).
    pub tombstone_grace_s: u32,
    /// How often the background expiry pass walks the whole index.
    pub expiry_period_ms: u64,
    /// Open devices with `O_DIRECT` (turn off only on file systems that refuse it, e.g. tmpfs).
    pub direct_io: bool,
    /// Where a clean shutdown saves the index for a fast restart; `None` disables it.
    pub index_snapshot_path: Option<PathBuf>,
    /// Where table snapshots live, one directory each (`snapshots/`); `None`: none are taken.
    pub snapshots_dir: Option<PathBuf>,
    /// A directory on a RAM file system for the write buffer: a copy of the blocks not yet on
    /// the device that survives a process crash ([`crate::write_buffer`]). `None` (or
    /// `commit_to_device`, which does not need it) goes without: a process crash may then lose
    /// up to `flush_interval_ms` of acknowledged writes, as a power failure may either way.
    pub write_buffer_dir: Option<PathBuf>,
    /// Write blocks the buffer holds: how many may wait for the device before writers wait.
    pub write_buffer_blocks: u32,
    /// Let callers read ahead through io_uring ([`crate::Engine::read_ahead`]); off, or where
    /// the kernel refuses io_uring, every device read is a blocking `pread`.
    pub io_uring: bool,
    /// Read records through the page cache rather than past it (Aerospike's
    /// `read-page-cache`), so memory the process leaves unused holds recently read pages;
    /// writes and block reads stay direct. Off by default, as in Aerospike.
    pub read_page_cache: bool,
    /// RAM for deltas: updates that only set cells are written without reading the row, and
    /// their cells kept here until the row is folded (`deltas.rs`). 0 turns blind updates off:
    /// every update reads its row first.
    pub delta_buffer_bytes: u64,
}

impl NamespaceConfig {
    /// One file-backed device of `size_bytes` at `dir/<name>.dat`, other settings default.
    pub fn with_file(name: &str, dir: &std::path::Path, size_bytes: u64) -> NamespaceConfig {
        NamespaceConfig {
            devices: vec![DeviceConfig {
                path: dir.join(format!("{name}.dat")),
                size_bytes,
            }],
            index_snapshot_path: Some(dir.join(format!("{name}.index"))),
            snapshots_dir: Some(dir.join("snapshots")),
            write_buffer_dir: Some(PathBuf::from(WRITE_BUFFER_DIR_DEFAULT)),
            // Bug fixed here: this inherited `data_in_memory = true` from `in_memory`, so every
            // file namespace kept all its blocks in RAM, never evicted them and never read the
            // device (a damaged record on the device went unnoticed). Aerospike's default, and
            // this engine's design, is the index in RAM and the data on the device.
            data_in_memory: false,
            ..NamespaceConfig::in_memory(name, 0)
        }
    }

    /// A RAM-only namespace of `memory_size_bytes`.
    pub fn in_memory(name: &str, memory_size_bytes: u64) -> NamespaceConfig {
        NamespaceConfig {
            name: name.to_string(),
            devices: Vec::new(),
            data_in_memory: true,
            memory_size_bytes,
            block_size_bytes: 1 << 20,
            flush_interval_ms: 1000,
            commit_to_device: false,
            post_write_cache_bytes: 256 << 20,
            defrag_lwm_pct: 50,
            defrag_sleep_us: 1000,
            stop_writes_free_pct: 5,
            tombstone_grace_s: 864_000,
            expiry_period_ms: 60_000,
            direct_io: true,
            index_snapshot_path: None,
            snapshots_dir: None,
            write_buffer_dir: None,
            write_buffer_blocks: 8,
            io_uring: true,
            read_page_cache: false,
            delta_buffer_bytes: 384 << 20,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        self.validate_settings()?;
        let b = self.block_size_bytes;
        if self.devices.is_empty() && !self.data_in_memory {
            return Err("no devices: configure at least one device, or data_in_memory".into());
        }
        if self.devices.is_empty() && self.memory_size_bytes < 4 * u64::from(b) {
            return Err(format!(
                "memory_size_bytes = {}: a RAM namespace needs at least four blocks",
                self.memory_size_bytes
            ));
        }
        Ok(())
    }

    /// Everything but where the data lives: what a caller that brings its own devices
    /// ([`crate::Engine::open_on_devices`]) must still get right.
    pub(crate) fn validate_settings(&self) -> Result<(), String> {
        let b = self.block_size_bytes;
        if !(BLOCK_SIZE_MIN_BYTES..=BLOCK_SIZE_MAX_BYTES).contains(&b) || !b.is_power_of_two() {
            return Err(format!(
                "block_size_bytes = {b}: must be a power of two from {BLOCK_SIZE_MIN_BYTES} to {BLOCK_SIZE_MAX_BYTES}"
            ));
        }
        if !(1..=99).contains(&self.defrag_lwm_pct) {
            return Err(format!("defrag_lwm_pct = {}: must be 1..99", self.defrag_lwm_pct));
        }
        let slots_max = crate::write_buffer::SLOTS_MAX;
        if !(2..=slots_max).contains(&self.write_buffer_blocks) {
            return Err(format!(
                "write_buffer_blocks = {}: must be 2..{slots_max}",
                self.write_buffer_blocks
            ));
        }
        if self.stop_writes_free_pct > 50 {
            return Err(format!(
                "stop_writes_free_pct = {}: must be at most 50",
                self.stop_writes_free_pct
            ));
        }
        Ok(())
    }
}
