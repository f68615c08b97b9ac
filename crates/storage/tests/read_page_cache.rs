//! Reading records through the page cache (`read_page_cache`): record reads leave their pages
//! in the kernel's cache, and a page the device has since overwritten (a direct write whose
//! invalidation a racing buffered read defeated) is caught by the record checks and read again
//! from the device, never served.

use std::collections::HashMap;
use std::io;
use std::os::unix::io::AsRawFd;
use std::sync::{Arc, Mutex};

mod common;

use common::{key, row, value};
use hayate_storage::device::{Device, MemDevice, IO_ALIGN_BYTES};
use hayate_storage::{Engine, ManualClock, NamespaceConfig};

const BLOCK: usize = 128 << 10;

fn small_cache(mut c: NamespaceConfig) -> NamespaceConfig {
    c.block_size_bytes = BLOCK as u32;
    // Room for two blocks only, so that most rows are read from the device.
    c.post_write_cache_bytes = 2 * BLOCK as u64;
    c.defrag_sleep_us = 0;
    c
}

/// A device in RAM with a page cache in front of its record reads that writes never
/// invalidate: the worst a racing buffered read could leave behind, on every page.
struct NeverInvalidated {
    device: MemDevice,
    pages: Mutex<HashMap<u64, Vec<u8>>>,
}

impl Device for NeverInvalidated {
    fn size_bytes(&self) -> u64 {
        self.device.size_bytes()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.device.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.device.write_at(buf, offset)
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn name(&self) -> String {
        "never-invalidated".to_string()
    }

    fn read_record_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let mut pages = self.pages.lock().expect("pages lock");
        for (i, out) in buf.chunks_mut(IO_ALIGN_BYTES).enumerate() {
            let at = offset + (i * IO_ALIGN_BYTES) as u64;
            let page = match pages.get(&at) {
                Some(page) => page,
                None => {
                    let mut page = vec![0u8; IO_ALIGN_BYTES];
                    self.device.read_at(&mut page, at)?;
                    pages.entry(at).or_insert(page)
                }
            };
            out.copy_from_slice(page);
        }
        Ok(())
    }

    fn forget_cached(&self, offset: u64, len: usize) -> bool {
        let mut pages = self.pages.lock().expect("pages lock");
        let mut at = offset;
        while at < offset + len as u64 {
            pages.remove(&at);
            at += IO_ALIGN_BYTES as u64;
        }
        true
    }
}

#[test]
fn a_stale_page_is_read_again_from_the_device_and_never_served() {
    // 48 blocks: a block defragmented in one round is free again only after the next round's
    // sync and the flusher's wipe, which runs after that sync has returned. So a round's
    // writes (about 3.5 blocks) can meet the blocks of the two rounds before it not yet free,
    // beside the background defragmenter's moves and the reserve. With 24 blocks, 18 runs in
    // 100 failed with DeviceFull when two busy loops kept the flusher off the CPU.
    let device = Arc::new(NeverInvalidated {
        device: MemDevice::new(48 * BLOCK as u64),
        pages: Mutex::new(HashMap::new()),
    });
    let config = small_cache(common::device_config(None));
    let clock = Arc::new(ManualClock::new(1_000_000));
    let e =
        Engine::open_on_devices(config, vec![Arc::clone(&device) as Arc<dyn Device>], clock).expect("open");
    // 400 rows of 1 KB rewritten round after round on a device of 24 blocks: blocks are
    // defragmented, freed and written again, while the cache keeps their old pages.
    let mut latest = HashMap::new();
    for round in 0..30u8 {
        for i in 0..400u32 {
            let k = format!("k{i}");
            let v = vec![round; 1000 + (i % 7) as usize];
            e.write(key(k.as_bytes()), row(i64::from(round) + 1, &v))
                .expect("write");
            latest.insert(k, v);
        }
        e.sync().expect("sync");
        e.defrag_now();
        for (k, v) in &latest {
            assert_eq!(
                value(&e, k.as_bytes()).as_ref(),
                Some(v),
                "{k} after round {round}"
            );
        }
    }
    let s = e.stats();
    assert_eq!(s.read_errors, 0);
    assert!(
        s.cached_rereads > 0,
        "no stale page was met; the test did not test what it says"
    );
    assert!(s.defrag_blocks > 0);
}

/// Pages of `file` in the page cache.
fn resident_pages(file: &std::path::Path) -> usize {
    let f = std::fs::File::open(file).expect("open data file");
    let len = f.metadata().expect("metadata").len() as usize;
    // SAFETY: a read-only shared mapping of a file we keep open for its lifetime; only its
    // residency is asked, never its bytes.
    unsafe {
        let map = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(map, libc::MAP_FAILED, "mmap");
        let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
        let mut vec = vec![0u8; len.div_ceil(page)];
        assert_eq!(libc::mincore(map, len, vec.as_mut_ptr()), 0, "mincore");
        libc::munmap(map, len);
        vec.iter().filter(|b| **b & 1 == 1).count()
    }
}

/// Writes 2,000 rows, reads them back from the device (and through the ring when there is
/// one), and gives the pages of the data file the page cache then holds.
fn pages_after_reads(read_page_cache: bool) -> usize {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut c = small_cache(NamespaceConfig::with_file("test", dir.path(), 32 << 20));
    c.read_page_cache = read_page_cache;
    let e = Engine::open(c).expect("open");
    for i in 0..2000u32 {
        e.write(key(format!("k{i}").as_bytes()), row(1, &[i as u8; 1000]))
            .expect("write");
    }
    e.sync().expect("sync");
    for i in 0..2000u32 {
        assert_eq!(value(&e, format!("k{i}").as_bytes()), Some(vec![i as u8; 1000]));
    }
    assert!(
        e.stats().device_reads > 1000,
        "the rows were read from the device"
    );
    assert_eq!(e.stats().read_errors, 0);
    resident_pages(&dir.path().join("test.dat"))
}

#[test]
fn record_reads_fill_the_page_cache_only_when_asked() {
    // Direct reads and writes leave nothing in the page cache; the file was preallocated.
    assert_eq!(pages_after_reads(false), 0, "O_DIRECT reads left pages cached");
    assert!(
        pages_after_reads(true) > 100,
        "reads through the page cache left nothing cached"
    );
}
