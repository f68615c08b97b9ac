//! A device in RAM, for a data-in-memory namespace without persistence, and for tests.

use std::io;
use std::sync::RwLock;

use super::Device;

pub struct MemDevice {
    bytes: RwLock<Vec<u8>>,
}

impl MemDevice {
    pub fn new(size_bytes: u64) -> MemDevice {
        MemDevice {
            bytes: RwLock::new(vec![0; size_bytes as usize]),
        }
    }
}

fn range(offset: u64, len: usize, size: usize) -> io::Result<std::ops::Range<usize>> {
    let start = offset as usize;
    match start.checked_add(len) {
        Some(end) if end <= size => Ok(start..end),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("access of {len} bytes at {offset} is past the end of a {size}-byte memory device"),
        )),
    }
}

impl Device for MemDevice {
    fn size_bytes(&self) -> u64 {
        self.bytes.read().expect("memory device lock").len() as u64
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let bytes = self.bytes.read().expect("memory device lock");
        let r = range(offset, buf.len(), bytes.len())?;
        buf.copy_from_slice(&bytes[r]);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut bytes = self.bytes.write().expect("memory device lock");
        let len = bytes.len();
        let r = range(offset, buf.len(), len)?;
        bytes[r].copy_from_slice(buf);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn name(&self) -> String {
        "memory".to_string()
    }
}

/// The device of a RAM-only namespace: it has a size, so the namespace has blocks, but writes
/// go nowhere; every block stays in the post-write cache, which a RAM namespace never evicts.
pub struct NullDevice {
    size_bytes: u64,
}

impl NullDevice {
    pub fn new(size_bytes: u64) -> NullDevice {
        NullDevice { size_bytes }
    }
}

impl Device for NullDevice {
    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn read_at(&self, _buf: &mut [u8], offset: u64) -> io::Result<()> {
        Err(io::Error::other(format!(
            "read at {offset} from a RAM-only namespace's null device: the block should have been in RAM"
        )))
    }

    fn write_at(&self, _buf: &[u8], _offset: u64) -> io::Result<()> {
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn name(&self) -> String {
        "memory".to_string()
    }
}
