//! The write buffer: a copy of every write block that is not yet on the device, in a file in
//! shared memory (`/dev/shm` by default), so that a process crash (SIGKILL, the OOM killer)
//! loses no acknowledged write without costing a device write per record.
//!
//! Each block the writer opens gets a slot in the file; every record appended to the block is
//! copied into the slot at the same offset. The slot is given back as soon as the sealed block
//! has been written to the device (a process crash after that cannot lose it: the data is in
//! the kernel or on the device). The file lives in the page cache of a RAM file system, so it
//! outlives the process but not the machine: a power failure keeps the bound of the flush
//! interval, as without it. On the next start [`replay`] writes every slot still in use to its
//! block on the device, before cold start scans the devices.
//!
//! The file (little-endian, drawn in docs/storage-format.md):
//!
//! ```text
//!  page 0:   0..8 magic "HYWBUF01" | 8..12 block size | 12..16 slots | 16..20 path length |
//!            20..  the canonical path of the namespace's first device (at most 2000 bytes)
//!            2048.. slot table, 16 bytes a slot: state u32 (0 free, 1 in use) | block u32 |
//!            sequence u64
//!  then:     slot i at 4096 + i * block size, one write block each, as it will be on the device
//! ```
//!
//! The whole file is allocated (`fallocate`) and mapped with its pages present when it is
//! created, so a RAM file system without room is an error at open rather than a SIGBUS on a
//! write, and a write costs one copy with no page fault. Slots are not cleared between uses:
//! each copy is followed by 16 zero bytes, the end of records that cold start looks for, so
//! what a slot held before is never read as part of its block.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::blocks::DeviceSet;
use crate::device::{AlignedBuf, IO_ALIGN_BYTES};
use crate::format::block::{BlockHeader, BLOCK_HEADER_BYTES};
use crate::format::record::RECORD_ALIGN_BYTES;
use crate::format::{read_u32, read_u64};

const MAGIC: [u8; 8] = *b"HYWBUF01";
const PAGE: usize = IO_ALIGN_BYTES;
const PATH_MAX_BYTES: usize = 2000;
const SLOT_TABLE_OFFSET: usize = 2048;
const SLOT_ENTRY_BYTES: usize = 16;
/// Slots the header page has room for.
pub const SLOTS_MAX: u32 = ((PAGE - SLOT_TABLE_OFFSET) / SLOT_ENTRY_BYTES) as u32;

const FREE: u32 = 0;
const IN_USE: u32 = 1;

/// The buffer file of the namespace whose first device is `device` (its canonical path, as
/// every function here takes it): one per device, named from a hash of that path, in `dir`.
pub fn path_for(dir: &Path, device: &Path) -> PathBuf {
    dir.join(format!(
        "hayate-{:016x}.wbuf",
        fnv1a(device.as_os_str().as_bytes())
    ))
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// What a start found in the buffer file and wrote to the devices.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    pub blocks: u32,
    pub skipped: u32,
}

/// Writes every slot still in use in `path` (left by a process that did not shut down cleanly)
/// to its block on the devices, syncs them, and removes the file. Slots whose block the device
/// already holds in a later use are skipped. A file that belongs to another device or block
/// size is an error, and is left alone.
pub fn replay(path: &Path, device: &Path, devices: &DeviceSet) -> Result<Replayed, String> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Replayed::default()),
        Err(e) => return Err(format!("cannot open the write buffer {}: {e}", path.display())),
    };
    let what = |e: io::Error| format!("reading the write buffer {}: {e}", path.display());
    let mut page = vec![0u8; PAGE];
    file.read_exact_at(&mut page, 0).map_err(what)?;
    if page[..8] != MAGIC {
        return Err(format!(
            "{} is not a hayate write buffer (no magic); move it away to start",
            path.display()
        ));
    }
    let header = Header::decode(&page);
    if header.device != device {
        return Err(format!(
            "the write buffer {} belongs to the device {}, not {}; move it away to start",
            path.display(),
            header.device.display(),
            device.display()
        ));
    }
    if header.block_size != devices.block_size_bytes() as usize {
        return Err(format!(
            "the write buffer {} holds blocks of {} bytes and the namespace writes blocks of {}: \
             start once with write_block_size = {} so that its writes reach the device, or \
             remove it and lose them",
            path.display(),
            header.block_size,
            devices.block_size_bytes(),
            header.block_size
        ));
    }
    let mut replayed = Replayed::default();
    let mut buf = AlignedBuf::zeroed(header.block_size);
    for slot in 0..header.slots {
        let e = SLOT_TABLE_OFFSET + slot * SLOT_ENTRY_BYTES;
        let state = read_u32(&page, e);
        if state != IN_USE {
            continue;
        }
        let block = read_u32(&page, e + 4);
        let sequence = read_u64(&page, e + 8);
        file.read_exact_at(&mut buf, (PAGE + slot * header.block_size) as u64)
            .map_err(what)?;
        let valid = BlockHeader::decode(&buf[..BLOCK_HEADER_BYTES])
            .is_ok_and(|h| h.block_index == block && h.sequence == sequence && !h.free);
        // Taken but killed before its header was copied: nothing in it was acknowledged.
        if !valid || block >= devices.blocks() {
            replayed.skipped += 1;
            continue;
        }
        // A later use of the block on the device (or its free header, which keeps the
        // sequence) means this copy was written and then replaced: never bring it back.
        let on_device = crate::blocks::read_header(devices, block);
        if on_device.is_some_and(|h| h.sequence > sequence || (h.sequence == sequence && h.free)) {
            replayed.skipped += 1;
            continue;
        }
        let (dev, offset) = devices.locate(block);
        dev.write_at(&buf, offset).map_err(|e| {
            format!(
                "writing block {block} from the write buffer to {}: {e}",
                dev.name()
            )
        })?;
        replayed.blocks += 1;
    }
    if replayed.blocks > 0 {
        for d in devices.devices() {
            d.sync().map_err(|e| format!("syncing {}: {e}", d.name()))?;
        }
    }
    std::fs::remove_file(path)
        .map_err(|e| format!("removing the replayed write buffer {}: {e}", path.display()))?;
    Ok(replayed)
}

/// Removes buffer files in `dir` whose device no longer exists (a deleted data directory), so
/// that nodes killed and thrown away do not fill the RAM file system. Files of other devices
/// are left alone: their node replays them when it starts.
pub fn remove_orphans(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with("hayate-") && name.ends_with(".wbuf")) {
            continue;
        }
        let mut page = vec![0u8; PAGE];
        let readable = File::open(entry.path()).and_then(|f| f.read_exact_at(&mut page, 0));
        if readable.is_err() || page[..8] != MAGIC {
            continue;
        }
        let device = Header::decode(&page).device;
        if !device.as_os_str().is_empty() && !device.exists() && std::fs::remove_file(entry.path()).is_ok() {
            tracing::info!(
                "removed the write buffer {} of {}, which no longer exists",
                entry.path().display(),
                device.display()
            );
        }
    }
}

struct Header {
    block_size: usize,
    slots: usize,
    device: PathBuf,
}

impl Header {
    fn decode(page: &[u8]) -> Header {
        let u32_at = |o: usize| read_u32(page, o) as usize;
        let path_len = u32_at(16).min(PATH_MAX_BYTES);
        let device = std::ffi::OsStr::from_bytes(&page[20..20 + path_len]);
        Header {
            block_size: u32_at(8),
            slots: u32_at(12).min(SLOTS_MAX as usize),
            device: PathBuf::from(device),
        }
    }
}

/// The live buffer file, mapped shared into the process.
pub struct WriteBuffer {
    path: PathBuf,
    /// Kept open beside the mapping, for the life of the buffer.
    _file: File,
    map: NonNull<u8>,
    map_len: usize,
    block_size: usize,
    free: Mutex<Vec<usize>>,
    freed: Condvar,
}

// SAFETY: the mapping is owned by the buffer for its whole life; slots are handed out to one
// holder at a time through `free`, and the slot table is written with atomics.
unsafe impl Send for WriteBuffer {}
// SAFETY: as above.
unsafe impl Sync for WriteBuffer {}

impl WriteBuffer {
    /// Creates the buffer file at `path` (replacing what is there: [`replay`] has run) with
    /// `slots` slots of `block_size` bytes, for the namespace whose first device is `device`.
    pub fn create(path: &Path, device: &Path, block_size: usize, slots: u32) -> io::Result<WriteBuffer> {
        let slots = slots.clamp(2, SLOTS_MAX) as usize;
        let device_bytes = device.as_os_str().as_bytes();
        if device_bytes.len() > PATH_MAX_BYTES {
            return Err(io::Error::other(format!(
                "the device path {} is longer than {PATH_MAX_BYTES} bytes",
                device.display()
            )));
        }
        let _ = std::fs::remove_file(path);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)?;
        let map_len = PAGE + slots * block_size;
        file.set_len(map_len as u64)?;
        let mut page = vec![0u8; PAGE];
        page[..8].copy_from_slice(&MAGIC);
        page[8..12].copy_from_slice(&(block_size as u32).to_le_bytes());
        page[12..16].copy_from_slice(&(slots as u32).to_le_bytes());
        page[16..20].copy_from_slice(&(device_bytes.len() as u32).to_le_bytes());
        page[20..20 + device_bytes.len()].copy_from_slice(device_bytes);
        file.write_all_at(&page, 0)?;
        // SAFETY: a plain syscall on the file just created.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, map_len as libc::off_t) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            // A file system that cannot reserve space still takes the writes.
            if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
                let _ = std::fs::remove_file(path);
                return Err(e);
            }
        }
        // SAFETY: a fresh shared mapping of the whole file, which is `map_len` bytes long; the
        // file stays open for the mapping's life.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                file.as_raw_fd(),
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        let map = NonNull::new(raw.cast::<u8>()).expect("mmap returned a non-null address");
        Ok(WriteBuffer {
            path: path.to_path_buf(),
            _file: file,
            map,
            map_len,
            block_size,
            free: Mutex::new((0..slots).rev().collect()),
            freed: Condvar::new(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn slot_offset(&self, slot: usize) -> usize {
        PAGE + slot * self.block_size
    }

    fn state(&self, slot: usize) -> &AtomicU32 {
        // SAFETY: the slot table lies in page 0 of the mapping, 16-byte aligned entries; the
        // mapping lives as long as `self`.
        unsafe {
            &*self
                .map
                .as_ptr()
                .add(SLOT_TABLE_OFFSET + slot * SLOT_ENTRY_BYTES)
                .cast::<AtomicU32>()
        }
    }

    fn set_entry(&self, slot: usize, block: u32, sequence: u64) {
        let e = SLOT_TABLE_OFFSET + slot * SLOT_ENTRY_BYTES;
        // SAFETY: as in `state`; the entry's block and sequence fields are 4- and 8-aligned.
        unsafe {
            (*self.map.as_ptr().add(e + 4).cast::<AtomicU32>()).store(block, Ordering::Relaxed);
            (*self.map.as_ptr().add(e + 8).cast::<AtomicU64>()).store(sequence, Ordering::Relaxed);
        }
    }

    /// A free slot for `block`, holding its `header`, or `None` if every slot is in use (the
    /// device is behind: wait with [`WriteBuffer::wait_free`]).
    pub fn take(&self, block: u32, sequence: u64, header: &[u8]) -> Option<usize> {
        let slot = self.free.lock().expect("write buffer lock poisoned").pop()?;
        self.copy(slot, 0, header);
        self.set_entry(slot, block, sequence);
        fence(Ordering::Release);
        self.state(slot).store(IN_USE, Ordering::Release);
        Some(slot)
    }

    /// Copies `bytes` into `slot` at `offset` (the same offset as in the block), followed by
    /// the 16 zero bytes that end a block's records, where the slot has room.
    pub fn copy(&self, slot: usize, offset: usize, bytes: &[u8]) {
        let end = offset + bytes.len();
        assert!(end <= self.block_size, "copy past the slot's end");
        let zeros = RECORD_ALIGN_BYTES.min(self.block_size - end);
        // SAFETY: both ranges lie inside the slot, which only its holder writes.
        unsafe {
            let at = self.map.as_ptr().add(self.slot_offset(slot) + offset);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), at, bytes.len());
            std::ptr::write_bytes(at.add(bytes.len()), 0, zeros);
        }
    }

    /// Gives `slot` back once its block is on the device.
    pub fn give_back(&self, slot: usize) {
        self.state(slot).store(FREE, Ordering::Release);
        self.free.lock().expect("write buffer lock poisoned").push(slot);
        self.freed.notify_all();
    }

    /// Waits up to `timeout` for a slot to be given back.
    pub fn wait_free(&self, timeout: Duration) {
        let free = self.free.lock().expect("write buffer lock poisoned");
        if free.is_empty() {
            drop(
                self.freed
                    .wait_timeout(free, timeout)
                    .expect("write buffer lock poisoned"),
            );
        }
    }

    /// Removes the file: every block it held is on the device (a clean shutdown).
    pub fn remove(&self) {
        if let Err(e) = std::fs::remove_file(&self.path) {
            tracing::warn!("could not remove the write buffer {}: {e}", self.path.display());
        }
    }
}

impl Drop for WriteBuffer {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `create`.
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::device::{Device, MemDevice};

    const BLOCK: usize = 128 << 10;

    struct Setup {
        dir: tempfile::TempDir,
        device_path: PathBuf,
        devices: DeviceSet,
        mem: Arc<MemDevice>,
    }

    fn setup() -> Setup {
        let dir = tempfile::tempdir().expect("tempdir");
        // The buffer names its device by path; the bytes live in `mem`.
        let device_path = dir.path().join("ns.dat");
        std::fs::write(&device_path, b"").expect("device file");
        let device_path = device_path.canonicalize().expect("canonical device path");
        let mem = Arc::new(MemDevice::new(8 * BLOCK as u64));
        let devices = DeviceSet::new(vec![mem.clone() as Arc<dyn Device>], BLOCK as u32);
        Setup {
            dir,
            device_path,
            devices,
            mem,
        }
    }

    fn header(block: u32, sequence: u64, free: bool) -> [u8; BLOCK_HEADER_BYTES] {
        BlockHeader {
            sequence,
            block_index: block,
            block_size_bytes: BLOCK as u32,
            free,
            chunk: false,
        }
        .encode()
    }

    /// A buffer, dropped without `remove` as a killed process leaves it, holding block 3 at
    /// sequence 5 with a header and `payload` behind it.
    fn leave_buffer(s: &Setup, payload: &[u8]) -> PathBuf {
        let path = s.dir.path().join("buffer.wbuf");
        let buffer = WriteBuffer::create(&path, &s.device_path, BLOCK, 4).expect("create");
        // A slot given back (its block reached the device) is not replayed, and what it held
        // before is not read as part of its next block.
        let other = buffer.take(4, 6, &header(4, 6, false)).expect("a free slot");
        buffer.copy(other, BLOCK_HEADER_BYTES, &[0xee; 4096]);
        buffer.give_back(other);
        let slot = buffer.take(3, 5, &header(3, 5, false)).expect("a free slot");
        assert_eq!(slot, other, "the slot just given back is taken again");
        buffer.copy(slot, BLOCK_HEADER_BYTES, payload);
        path
    }

    fn device_block(s: &Setup, block: u64) -> Vec<u8> {
        let mut buf = AlignedBuf::zeroed(BLOCK);
        s.mem.read_at(&mut buf, block * BLOCK as u64).expect("read");
        buf.to_vec()
    }

    #[test]
    fn a_slot_in_use_is_written_to_its_block_and_the_file_removed() {
        let s = setup();
        let path = leave_buffer(&s, b"acknowledged record bytes");
        let replayed = replay(&path, &s.device_path, &s.devices).expect("replay");
        assert_eq!(
            replayed,
            Replayed {
                blocks: 1,
                skipped: 0
            }
        );
        let on_device = device_block(&s, 3);
        assert_eq!(&on_device[..BLOCK_HEADER_BYTES], &header(3, 5, false));
        let end = BLOCK_HEADER_BYTES + 25;
        assert_eq!(&on_device[BLOCK_HEADER_BYTES..end], b"acknowledged record bytes");
        assert_eq!(
            &on_device[end..end + RECORD_ALIGN_BYTES],
            &[0; RECORD_ALIGN_BYTES],
            "the end of records follows, over what the slot held before"
        );
        assert!(
            device_block(&s, 4).iter().all(|&b| b == 0),
            "a given-back slot is not replayed"
        );
        assert!(!path.exists());
        assert_eq!(replay(&path, &s.device_path, &s.devices), Ok(Replayed::default()));
    }

    #[test]
    fn a_slot_whose_block_the_device_holds_in_a_later_use_is_skipped() {
        for (sequence, free) in [(9, false), (5, true), (9, true)] {
            let s = setup();
            let path = leave_buffer(&s, b"stale");
            let mut later = AlignedBuf::zeroed(BLOCK);
            later[..BLOCK_HEADER_BYTES].copy_from_slice(&header(3, sequence, free));
            s.mem.write_at(&later, 3 * BLOCK as u64).expect("write");
            let replayed = replay(&path, &s.device_path, &s.devices).expect("replay");
            assert_eq!(
                replayed,
                Replayed {
                    blocks: 0,
                    skipped: 1
                },
                "device at {sequence}, free {free}"
            );
            assert_eq!(device_block(&s, 3), later.to_vec());
        }
    }

    #[test]
    fn a_buffer_of_another_block_size_or_device_is_refused_and_kept() {
        let s = setup();
        let path = leave_buffer(&s, b"x");
        let wider = DeviceSet::new(vec![s.mem.clone() as Arc<dyn Device>], 2 * BLOCK as u32);
        let e = replay(&path, &s.device_path, &wider).expect_err("another block size");
        assert!(e.contains("write_block_size = 131072"), "{e}");
        let other = s.dir.path().join("other.dat");
        std::fs::write(&other, b"").expect("other device");
        let e = replay(&path, &other, &s.devices).expect_err("another device");
        assert!(e.contains("belongs to the device"), "{e}");
        assert!(path.exists(), "a refused buffer stays for the operator");
    }

    #[test]
    fn writers_wait_when_every_slot_is_taken() {
        let s = setup();
        let buffer =
            WriteBuffer::create(&s.dir.path().join("b.wbuf"), &s.device_path, BLOCK, 2).expect("create");
        let a = buffer.take(0, 1, &header(0, 1, false)).expect("slot");
        let _b = buffer.take(1, 2, &header(1, 2, false)).expect("slot");
        assert_eq!(buffer.take(2, 3, &header(2, 3, false)), None);
        buffer.give_back(a);
        assert!(buffer.take(2, 3, &header(2, 3, false)).is_some());
    }

    #[test]
    fn orphans_of_deleted_devices_are_removed_and_others_kept() {
        let s = setup();
        let kept = leave_buffer(&s, b"x");
        let gone_dir = tempfile::tempdir().expect("tempdir");
        let gone_device = gone_dir.path().join("gone.dat");
        std::fs::write(&gone_device, b"").expect("device");
        let orphan = s.dir.path().join("hayate-0000000000000001.wbuf");
        drop(WriteBuffer::create(&orphan, &gone_device, BLOCK, 2).expect("create"));
        let kept_named = s.dir.path().join("hayate-0000000000000002.wbuf");
        std::fs::rename(&kept, &kept_named).expect("rename");
        drop(gone_dir);
        remove_orphans(s.dir.path());
        assert!(!orphan.exists());
        assert!(kept_named.exists());
    }
}
