//! Backups: `hayate backup --to DIR` exports a snapshot of this node's tables as files a user
//! can keep anywhere (Cassandra operators copy snapshot directories; Aerospike's `asbackup`
//! writes files of its own), and `hayate restore --from DIR/TAG` loads them into a running
//! cluster of any size and replication factor. Formats in `docs/backups.md`.
//!
//! ```text
//! DIR/TAG/HOST_ID/manifest.json          what this node's part holds (written last)
//! DIR/TAG/HOST_ID/<keyspace>.<table>.hyb  each table's rows (`format.rs`)
//! ```
//!
//! A backup is of a snapshot: of one taken for it (and cleared after) or of one named with
//! `--snapshot`. `--incremental` writes only what this node wrote since its newest backup in
//! DIR: the records in blocks of that backup's newest block sequence or later (rows rewritten
//! since, rows defragmentation moved since, and every row with a pending delta), and names
//! that backup as its base; a restore of it loads the whole chain. A restore checks every file
//! of every node (its length and checksum against the manifest, each frame's checksum) before
//! it writes anything, so a damaged backup loads nothing.

pub mod format;

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::node::Node;
use crate::snapshots::restore::{choose, Progress, RestoreRequest, Target};
use crate::snapshots::TableManifest;
use format::Record;

const MANIFEST: &str = "manifest.json";
const FORMAT: u32 = 1;
/// Snapshot entries read at once while a backup writes.
const PAGE_ENTRIES: usize = 1024;

/// One node's part of a backup.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BackupManifest {
    pub format: u32,
    pub tag: String,
    pub host_id: String,
    pub taken_at_ms: u64,
    /// The backup this one holds only the changes since (`--incremental`).
    pub base: Option<String>,
    /// Records in blocks of this sequence or later are in it (0: all).
    pub since_sequence: u64,
    /// The newest block sequence of its snapshot: an incremental backup over this one starts
    /// there.
    pub max_sequence: u64,
    pub tables: Vec<BackedUpTable>,
}

/// One table's file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BackedUpTable {
    #[serde(flatten)]
    pub table: TableManifest,
    pub file: String,
    pub records: u64,
    pub bytes: u64,
    pub crc32c: u32,
}

/// What to back up.
#[derive(Clone, Debug, Default)]
pub struct BackupRequest {
    pub to: PathBuf,
    pub tag: String,
    /// Export this snapshot (else one is taken for the backup and cleared after).
    pub snapshot: Option<String>,
    pub keyspace: Option<String>,
    pub tables: Vec<String>,
    pub incremental: bool,
}

fn host_hex(node: &Node) -> String {
    node.local.host_id.iter().map(|b| format!("{b:02x}")).collect()
}

/// This node's newest backup in `root` other than `tag`, if any.
fn newest_backup(root: &Path, host: &str, tag: &str) -> Option<BackupManifest> {
    std::fs::read_dir(root)
        .ok()?
        .flatten()
        .filter(|d| d.file_name().to_string_lossy() != tag)
        .filter_map(|d| read_manifest(&d.path().join(host)).ok())
        .max_by_key(|m| m.taken_at_ms)
}

pub fn read_manifest(dir: &Path) -> Result<BackupManifest, String> {
    let path = dir.join(MANIFEST);
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let m: BackupManifest = serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    if m.format != FORMAT {
        return Err(format!(
            "{}: backup format {}, which this hayate does not read",
            path.display(),
            m.format
        ));
    }
    Ok(m)
}

/// Writes this node's part of backup `request.tag` under `request.to`.
pub fn backup(node: &Node, request: &BackupRequest) -> Result<BackupManifest, String> {
    if !hayate_storage::valid_snapshot_tag(&request.tag) {
        return Err(format!("backup tag {:?} is not a plain name", request.tag));
    }
    let host = host_hex(node);
    let dir = request.to.join(&request.tag).join(&host);
    if dir.join(MANIFEST).exists() {
        return Err(format!(
            "{} already holds backup {} of this node",
            request.to.display(),
            request.tag
        ));
    }
    let base = match request.incremental {
        false => None,
        true => Some(newest_backup(&request.to, &host, &request.tag).ok_or_else(|| {
            format!(
                "--incremental: {} holds no earlier backup of this node ({host}) to build on; take a full one first",
                request.to.display()
            )
        })?),
    };
    let engine = &node.engine;
    let (snapshot_tag, ours) = match &request.snapshot {
        Some(tag) => (tag.clone(), false),
        None => {
            let tag = format!("backup-{}", request.tag);
            let schema = node.schema.current();
            let chosen = crate::snapshots::select(&schema, request.keyspace.as_deref(), &request.tables)?;
            if chosen.is_empty() {
                return Err("no table to back up".to_owned());
            }
            crate::snapshots::take(engine, &tag, &chosen, "backup", false)?;
            (tag, true)
        }
    };
    let written = write_backup(node, request, &snapshot_tag, &dir, &host, base.as_ref());
    if ours {
        if let Err(e) = engine.clear_snapshot(&snapshot_tag) {
            tracing::warn!(
                "backup {}: could not clear its snapshot {snapshot_tag}: {e}",
                request.tag
            );
        }
    }
    written
}

fn write_backup(
    node: &Node,
    request: &BackupRequest,
    snapshot_tag: &str,
    dir: &Path,
    host: &str,
    base: Option<&BackupManifest>,
) -> Result<BackupManifest, String> {
    let engine = &node.engine;
    let snapshot_dir = engine.snapshot_dir(snapshot_tag).map_err(|e| e.to_string())?;
    let snapshot_manifest = crate::snapshots::read_manifest(&snapshot_dir)?;
    let snapshot = engine.open_snapshot(snapshot_tag).map_err(|e| e.to_string())?;
    let since = base.map_or(0, |b| b.max_sequence);
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut tables = Vec::new();
    for t in &snapshot_manifest.tables {
        let file = format!("{}.{}.hyb", t.keyspace, t.table);
        let path = dir.join(&file);
        let tmp = dir.join(format!("{file}.tmp"));
        let io = |e: std::io::Error| format!("{}: {e}", tmp.display());
        let mut w = format::Writer::new(BufWriter::with_capacity(1 << 20, File::create(&tmp).map_err(io)?))
            .map_err(io)?;
        let mut from = Some(0);
        while let Some(at) = from {
            let (records, next) = engine
                .read_snapshot(&snapshot, t.storage_id, at, PAGE_ENTRIES, since)
                .map_err(|e| e.to_string())?;
            from = next;
            for r in records {
                w.add(&Record::from(r)).map_err(io)?;
            }
        }
        let (out, records, bytes, crc32c) = w.finish().map_err(io)?;
        let file_handle = out.into_inner().map_err(|e| io(e.into_error()))?;
        file_handle.sync_all().map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)?;
        tables.push(BackedUpTable {
            table: t.clone(),
            file,
            records,
            bytes,
            crc32c,
        });
    }
    let manifest = BackupManifest {
        format: FORMAT,
        tag: request.tag.clone(),
        host_id: host.to_owned(),
        taken_at_ms: snapshot_manifest.taken_at_ms,
        base: base.map(|b| b.tag.clone()),
        since_sequence: since,
        max_sequence: snapshot.max_sequence(),
        tables,
    };
    let bytes = serde_json::to_vec_pretty(&manifest).map_err(|e| e.to_string())?;
    // Last: a directory without its manifest is a backup that did not finish.
    hayate_storage::files::write_atomically(&dir.join(MANIFEST), &bytes)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(manifest)
}

/// One file a restore loads: its node's directory, and its entry in that node's manifest.
struct Part {
    dir: PathBuf,
    table: BackedUpTable,
}

/// The files of backup `from` (a `DIR/TAG` directory) for `request`, every node's, with the
/// bases of incremental ones.
fn parts(from: &Path, request: &RestoreRequest) -> Result<Vec<Part>, String> {
    let root = from
        .parent()
        .ok_or_else(|| format!("{}: give the backup as DIR/TAG", from.display()))?;
    let hosts: Vec<PathBuf> = std::fs::read_dir(from)
        .map_err(|e| format!("no backup at {}: {e}", from.display()))?
        .flatten()
        .map(|d| d.path())
        .filter(|p| p.is_dir())
        .collect();
    if hosts.is_empty() {
        return Err(format!(
            "no backup at {}: it holds no node's directory",
            from.display()
        ));
    }
    let mut parts = Vec::new();
    for host_dir in hosts {
        let mut manifest = read_manifest(&host_dir)
            .map_err(|e| format!("{e} (a node's part of the backup did not finish, or is damaged)"))?;
        let mut dir = host_dir.clone();
        loop {
            let tables: Vec<TableManifest> = manifest.tables.iter().map(|t| t.table.clone()).collect();
            let chosen = choose(&tables, request, "backup")?;
            for t in &manifest.tables {
                if chosen
                    .iter()
                    .any(|c| c.keyspace == t.table.keyspace && c.table == t.table.table)
                {
                    parts.push(Part {
                        dir: dir.clone(),
                        table: t.clone(),
                    });
                }
            }
            let Some(base) = manifest.base.clone() else { break };
            dir = root.join(&base).join(&manifest.host_id);
            manifest = read_manifest(&dir).map_err(|e| {
                format!(
                    "incremental backup {} needs its base {base}, which is missing or damaged: {e}",
                    manifest.tag
                )
            })?;
        }
    }
    Ok(parts)
}

/// Loads backup `from` (`DIR/TAG`) into the cluster, as [`crate::snapshots::restore`] does a
/// snapshot, after checking every file it needs.
pub async fn restore(
    node: &Node,
    from: &Path,
    request: &RestoreRequest,
    progress: &Mutex<Progress>,
) -> Result<(), String> {
    let parts = parts(from, request)?;
    // Everything is checked before anything is written.
    for p in &parts {
        let bytes = read_part(p)?;
        format::check(&bytes).map_err(|e| {
            format!(
                "{}: {e}; nothing was restored",
                p.dir.join(&p.table.file).display()
            )
        })?;
    }
    for p in &parts {
        let bytes = read_part(p)?;
        let mut target = Target::prepare(node, &p.table.table, request, progress).await?;
        let frames = format::frames(&bytes).map_err(|e| e.to_string())?;
        for frame in frames {
            target.write(node, frame.map_err(|e| e.to_string())?).await?;
        }
        target.finish(
            &p.table.table.keyspace,
            &p.table.table.table,
            &from.display().to_string(),
        );
    }
    Ok(())
}

/// A part's bytes, checked against its manifest's length and checksum.
fn read_part(p: &Part) -> Result<Vec<u8>, String> {
    let path = p.dir.join(&p.table.file);
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}; nothing was restored", path.display()))?;
    if bytes.len() as u64 != p.table.bytes || crc32c::crc32c(&bytes) != p.table.crc32c {
        return Err(format!(
            "{}: {} bytes, checksum {:08x}, where the manifest says {} bytes, {:08x} (damaged or cut \
             short); nothing was restored",
            path.display(),
            bytes.len(),
            crc32c::crc32c(&bytes),
            p.table.bytes,
            p.table.crc32c
        ));
    }
    Ok(bytes)
}
