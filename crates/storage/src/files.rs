//! Replacing small files so that a crash leaves the old one or the new one, whole: the engine's
//! index snapshot, and the node's own small files (roles, node identity, the metadata log's
//! vote and snapshot) use this one way of doing it.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Where `path`'s replacement is written before it is renamed over it: beside it, `.tmp` added.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Replaces `path` with `bytes`: writes a temporary file beside it, syncs it, renames it over,
/// and syncs the directory (the rename is only durable once the directory is). Creates the
/// directory if it is missing.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir)?;
    }
    let tmp = tmp_path(path);
    {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    sync_dir(path)
}

/// Syncs the directory holding `path`, so that a file created, renamed or removed there
/// stays so after a crash.
pub fn sync_dir(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => File::open(dir)?.sync_all(),
        _ => File::open(".")?.sync_all(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replacement_leaves_only_the_new_file() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("sub").join("state.json");
        write_atomically(&path, b"one").expect("first write");
        write_atomically(&path, b"two").expect("second write");
        assert_eq!(fs::read(&path).expect("readable"), b"two");
        assert!(!tmp_path(&path).exists());
    }
}
