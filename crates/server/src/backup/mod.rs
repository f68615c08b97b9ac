//! Backups: `hayate backup --to DIR` exports a snapshot of this node's tables as files a user
//! can keep anywhere (Cassandra operators copy snapshot directories; Aerospike's `asbackup`
//! writes files of its own), and `hayate restore --from DIR/TAG` loads them into a running
//! cluster of any size and replication factor. Formats in `docs/backups.md`. DIR may be a
//! directory or an S3-compatible bucket (`s3://BUCKET/PREFIX`), with the same layout in both
//! (`store.rs`):
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
pub mod store;

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::node::Node;
use crate::snapshots::restore::{choose, resuming, Progress, RestoreRequest, Target};
use crate::snapshots::resume::Checkpoint;
use crate::snapshots::TableManifest;
use format::Record;
use store::{Store, StoreError, Upload};

const MANIFEST: &str = "manifest.json";
const FORMAT: u32 = 1;
/// Snapshot entries read at once while a backup writes.
const PAGE_ENTRIES: usize = 1024;
/// A data file is handed to its store in pieces of about this size as it is encoded.
const WRITE_BYTES: usize = 1 << 20;

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
    /// A directory, or `s3://BUCKET/PREFIX`.
    pub to: String,
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

/// This node's newest backup in `store` other than `tag`, if any.
async fn newest_backup(store: &Store, host: &str, tag: &str) -> Result<Option<BackupManifest>, StoreError> {
    let mut newest: Option<BackupManifest> = None;
    for other in store.children("").await? {
        if other == tag {
            continue;
        }
        match read_manifest(store, &format!("{other}/{host}")).await {
            Ok(m) if newest.as_ref().is_none_or(|n| m.taken_at_ms > n.taken_at_ms) => newest = Some(m),
            _ => {}
        }
    }
    Ok(newest)
}

/// The manifest of the node's part at `dir` (`TAG/HOST_ID`).
pub async fn read_manifest(store: &Store, dir: &str) -> Result<BackupManifest, String> {
    let key = format!("{dir}/{MANIFEST}");
    let bytes = store.get(&key).await?;
    let m: BackupManifest =
        serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", store.name(&key)))?;
    if m.format != FORMAT {
        return Err(format!(
            "{}: backup format {}, which this hayate does not read",
            store.name(&key),
            m.format
        ));
    }
    Ok(m)
}

/// Writes this node's part of backup `request.tag` under `request.to`. It runs on the caller's
/// thread (reading the snapshot blocks), the store's requests on the node's runtime.
pub async fn backup(node: &Node, request: &BackupRequest) -> Result<BackupManifest, String> {
    if !hayate_storage::valid_snapshot_tag(&request.tag) {
        return Err(format!("backup tag {:?} is not a plain name", request.tag));
    }
    let store = Store::open(&request.to, &node.config.backup)?;
    // A bucket that is missing or refuses the node fails the backup before a snapshot is taken.
    store.check().await?;
    let host = host_hex(node);
    let dir = format!("{}/{host}", request.tag);
    if store.exists(&format!("{dir}/{MANIFEST}")).await? {
        return Err(format!(
            "{} already holds backup {} of this node",
            store.name(""),
            request.tag
        ));
    }
    let base = match request.incremental {
        false => None,
        true => Some(newest_backup(&store, &host, &request.tag).await?.ok_or_else(|| {
            format!(
                "--incremental: {} holds no earlier backup of this node ({host}) to build on; take a full one first",
                store.name("")
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
    let written = write_backup(node, request, &snapshot_tag, &store, &host, base.as_ref()).await;
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

async fn write_backup(
    node: &Node,
    request: &BackupRequest,
    snapshot_tag: &str,
    store: &Store,
    host: &str,
    base: Option<&BackupManifest>,
) -> Result<BackupManifest, String> {
    let dir = format!("{}/{host}", request.tag);
    let engine = &node.engine;
    let snapshot_dir = engine.snapshot_dir(snapshot_tag).map_err(|e| e.to_string())?;
    let snapshot_manifest = crate::snapshots::read_manifest(&snapshot_dir)?;
    let snapshot = engine.open_snapshot(snapshot_tag).map_err(|e| e.to_string())?;
    let since = base.map_or(0, |b| b.max_sequence);
    let mut tables = Vec::new();
    for t in &snapshot_manifest.tables {
        let file = format!("{}.{}.hyb", t.keyspace, t.table);
        let key = format!("{dir}/{file}");
        let mut upload = store.create(&key)?;
        let (records, bytes, crc32c) = match write_table(node, &snapshot, t, since, &mut upload).await {
            Ok(written) => written,
            Err(e) => {
                upload.abort().await;
                return Err(e);
            }
        };
        upload.finish().await?;
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
    // Last: a node's part without its manifest is a backup that did not finish.
    store.put(&format!("{dir}/{MANIFEST}"), bytes).await?;
    Ok(manifest)
}

/// Encodes one table's records from the snapshot into `upload`, a piece at a time; the file's
/// record count, length and crc32c.
async fn write_table(
    node: &Node,
    snapshot: &hayate_storage::Snapshot,
    t: &TableManifest,
    since: u64,
    upload: &mut Upload,
) -> Result<(u64, u64, u32), String> {
    let encode = |e: std::io::Error| format!("encoding {}.{}: {e}", t.keyspace, t.table);
    let mut w = format::Writer::new(Vec::with_capacity(2 * WRITE_BYTES)).map_err(encode)?;
    let mut from = Some(0);
    while let Some(at) = from {
        let (records, next) = node
            .engine
            .read_snapshot(snapshot, t.storage_id, at, PAGE_ENTRIES, since)
            .map_err(|e| e.to_string())?;
        from = next;
        for r in records {
            w.add(&Record::from(r)).map_err(encode)?;
        }
        if w.out_mut().len() >= WRITE_BYTES {
            upload.write(w.out_mut()).await?;
            w.out_mut().clear();
        }
    }
    let (rest, records, bytes, crc32c) = w.finish().map_err(encode)?;
    upload.write(&rest).await?;
    Ok((records, bytes, crc32c))
}

/// One file a restore loads: its node's part (`TAG/HOST_ID`), and its entry in that node's
/// manifest.
struct Part {
    dir: String,
    table: BackedUpTable,
}

impl Part {
    fn key(&self) -> String {
        format!("{}/{}", self.dir, self.table.file)
    }
}

/// The files of backup `tag` in `store` for `request`, every node's, with the bases of
/// incremental ones.
async fn parts(store: &Store, tag: &str, request: &RestoreRequest) -> Result<Vec<Part>, String> {
    let hosts = store
        .children(tag)
        .await
        .map_err(|e| format!("no backup at {e}"))?;
    if hosts.is_empty() {
        return Err(format!(
            "no backup at {}: it holds no node's directory",
            store.name(tag)
        ));
    }
    let mut parts = Vec::new();
    for host in hosts {
        let mut dir = format!("{tag}/{host}");
        let mut manifest = read_manifest(store, &dir)
            .await
            .map_err(|e| format!("{e} (a node's part of the backup did not finish, or is damaged)"))?;
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
            dir = format!("{base}/{}", manifest.host_id);
            manifest = read_manifest(store, &dir).await.map_err(|e| {
                format!(
                    "incremental backup {} needs its base {base}, which is missing or damaged: {e}",
                    manifest.tag
                )
            })?;
        }
    }
    Ok(parts)
}

/// Loads backup `from` (`DIR/TAG` or `s3://BUCKET/PREFIX/TAG`) into the cluster, as
/// [`crate::snapshots::restore`] does a snapshot, after checking every file it needs.
pub async fn restore(
    node: &Node,
    from: &str,
    request: &RestoreRequest,
    progress: &Mutex<Progress>,
) -> Result<(), String> {
    let (root, tag) = store::split_tag(from).ok_or_else(|| format!("{from}: give the backup as DIR/TAG"))?;
    let store = Store::open(root, &node.config.backup)?;
    store.check().await?;
    let parts = parts(&store, tag, request).await?;
    // Everything is checked before anything is written.
    for p in &parts {
        let bytes = read_part(&store, p).await?;
        format::check(&bytes).map_err(|e| format!("{}: {e}; nothing was restored", store.name(&p.key())))?;
    }
    let mut checkpoint = Checkpoint::open(&node.config.data_dir, request.describe("backup", from));
    resuming(&checkpoint, from, progress);
    for p in &parts {
        let unit = p.key();
        let Some(start) = checkpoint.start(&unit) else {
            continue; // restored whole by the run this one goes on from
        };
        let bytes = read_part(&store, p).await?;
        let mut target = Target::prepare(node, &p.table.table, request, progress).await?;
        let frames = format::frames(&bytes).map_err(|e| e.to_string())?;
        for (i, frame) in frames.enumerate().skip(start as usize) {
            target.write(node, frame.map_err(|e| e.to_string())?).await?;
            checkpoint.advance(&unit, i as u64 + 1)?;
        }
        target.finish(&p.table.table.keyspace, &p.table.table.table, from);
        checkpoint.finish_unit(&unit)?;
    }
    checkpoint.finish();
    Ok(())
}

/// A part's bytes, checked against its manifest's length and checksum.
async fn read_part(store: &Store, p: &Part) -> Result<Vec<u8>, String> {
    let name = store.name(&p.key());
    let bytes = store
        .get(&p.key())
        .await
        .map_err(|e| format!("{e}; nothing was restored"))?;
    if bytes.len() as u64 != p.table.bytes || crc32c::crc32c(&bytes) != p.table.crc32c {
        return Err(format!(
            "{name}: {} bytes, checksum {:08x}, where the manifest says {} bytes, {:08x} (damaged or cut \
             short); nothing was restored",
            bytes.len(),
            crc32c::crc32c(&bytes),
            p.table.bytes,
            p.table.crc32c
        ));
    }
    Ok(bytes)
}
