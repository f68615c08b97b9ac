//! Snapshots of tables on this node, as Cassandra's: `hayate snapshot`, `listsnapshots`,
//! `clearsnapshot`, the automatic one before DROP TABLE, DROP KEYSPACE and TRUNCATE
//! (`auto_snapshot`), and putting a snapshot's rows back into the cluster
//! ([`restore`]: `hayate restore --snapshot`).
//!
//! The storage engine keeps the rows: a snapshot saves the tables' index entries and pins the
//! write blocks they are in (`hayate_storage`'s `snapshots/`), so taking one is instant
//! whatever the data size. Beside the engine's file, each snapshot's directory
//! (`<data_dir>/snapshots/<tag>/`) holds `manifest.json`: for every table in it, its keyspace
//! and name, the statements that create its keyspace, types and table, and the name of each
//! column number, so that a restore can make a table that is gone and put each cell back in
//! the column of the same name.

pub mod endpoint;
pub mod restore;
pub mod resume;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use hayate_storage::{Engine, SnapshotError, TableId};
use serde::{Deserialize, Serialize};

use crate::schema::{Keyspace, Schema, Table};
use crate::system::describe;

pub use restore::restore;

/// The manifest's name in a snapshot's directory.
pub const MANIFEST: &str = "manifest.json";
const FORMAT: u32 = 1;

/// What a snapshot holds, as `manifest.json` says.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub tag: String,
    pub taken_at_ms: u64,
    /// Why it was taken: "snapshot" (asked for), "dropped" or "truncated" (automatic).
    pub reason: String,
    pub tables: Vec<TableManifest>,
}

/// One table of a snapshot.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TableManifest {
    pub keyspace: String,
    pub table: String,
    /// The storage engine's table id when the snapshot was taken.
    pub storage_id: TableId,
    /// Index entries saved: rows, row tombstones and partitions' tombstone records.
    pub entries: u64,
    pub create_keyspace: String,
    /// The keyspace's user-defined types, in an order that creates each after those it uses.
    pub create_types: Vec<String>,
    pub create_table: String,
    /// Each column number and its name.
    pub columns: Vec<(u32, String)>,
}

impl TableManifest {
    fn of(keyspace: &Keyspace, table: &Table, entries: u64) -> TableManifest {
        TableManifest {
            keyspace: table.keyspace.clone(),
            table: table.name.clone(),
            storage_id: table.storage_id,
            entries,
            create_keyspace: describe::create_keyspace(keyspace),
            create_types: keyspace
                .types
                .values()
                .map(|t| describe::create_type(t))
                .collect(),
            create_table: describe::create_table(table),
            columns: table.columns.iter().map(|c| (c.id, c.name.clone())).collect(),
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A table chosen for a snapshot, with its keyspace.
pub type Chosen<'a> = (&'a Arc<Keyspace>, &'a Arc<Table>);

/// The tables a snapshot of `keyspace` (all user keyspaces if `None`) and `tables` (all of the
/// keyspace's if empty) takes; an unknown keyspace or table is refused by name.
pub fn select<'a>(
    schema: &'a Schema,
    keyspace: Option<&str>,
    tables: &[String],
) -> Result<Vec<Chosen<'a>>, String> {
    let keyspaces: Vec<&Arc<Keyspace>> = match keyspace {
        Some(name) => vec![schema
            .keyspace(name)
            .filter(|k| k.virtual_kind.is_none())
            .ok_or_else(|| format!("keyspace {name} does not exist"))?],
        None => schema.user_keyspaces().collect(),
    };
    let mut out = Vec::new();
    for ks in keyspaces {
        if tables.is_empty() {
            out.extend(ks.tables.values().map(|t| (ks, t)));
            continue;
        }
        for name in tables {
            let t = ks
                .tables
                .get(name)
                .ok_or_else(|| format!("table {}.{name} does not exist", ks.name))?;
            out.push((ks, t));
        }
    }
    Ok(out)
}

/// Takes snapshot `tag` of `tables` on this node: the engine pins their rows, then the
/// manifest is written beside its file. `force` takes it even if it could stop writes.
pub fn take(
    engine: &Engine,
    tag: &str,
    tables: &[Chosen<'_>],
    reason: &str,
    force: bool,
) -> Result<(Manifest, hayate_storage::SnapshotSummary), String> {
    let ids: Vec<TableId> = tables.iter().map(|(_, t)| t.storage_id).collect();
    let summary = engine
        .take_snapshot(tag, &ids, force)
        .map_err(|e| e.to_string())?;
    let manifest = Manifest {
        format: FORMAT,
        tag: tag.to_owned(),
        taken_at_ms: now_ms(),
        reason: reason.to_owned(),
        tables: tables
            .iter()
            .zip(&summary.tables)
            .map(|((ks, t), (_, entries))| TableManifest::of(ks, t, *entries))
            .collect(),
    };
    let dir = engine.snapshot_dir(tag).map_err(|e| e.to_string())?;
    let written = serde_json::to_vec_pretty(&manifest)
        .map_err(std::io::Error::other)
        .and_then(|bytes| hayate_storage::files::write_atomically(&dir.join(MANIFEST), &bytes));
    if let Err(e) = written {
        let _ = engine.clear_snapshot(tag);
        return Err(format!(
            "cannot write the snapshot's manifest in {}: {e}",
            dir.display()
        ));
    }
    Ok((manifest, summary))
}

/// The automatic snapshot of a table that DROP TABLE, DROP KEYSPACE or TRUNCATE is about to
/// forget (`truncated` for TRUNCATE), tagged `dropped-<n>-<keyspace>.<table>` or
/// `truncated-<n>-<keyspace>.<table>`, as Cassandra tags it but for `<n>`: the position of the
/// statement in the metadata log rather than a time, so that every node gives its snapshot the
/// same tag (`hayate restore --snapshot TAG --all-nodes`). Never refused for space (its blocks
/// hold dead data from now on anyway); a failure is logged, and the statement goes on, as the
/// cluster has already agreed it.
pub fn before_drop(
    engine: &Engine,
    keyspace: &Arc<Keyspace>,
    table: &Arc<Table>,
    truncated: bool,
    log_index: u64,
) {
    let reason = if truncated { "truncated" } else { "dropped" };
    let tag = format!("{reason}-{log_index}-{}.{}", table.keyspace, table.name);
    let taken = engine.snapshot_dir(&tag).is_ok_and(|d| d.exists());
    if taken || cleared_marker(engine, &tag).is_some_and(|m| m.exists()) {
        // The entry replayed at a restart: its snapshot was taken when it was first applied
        // (and maybe cleared since).
        return;
    }
    match take(engine, &tag, &[(keyspace, table)], reason, true) {
        Ok((_, summary)) => tracing::info!(
            "auto_snapshot: took snapshot {tag} of {}.{} ({} entries, {} blocks pinned); `hayate \
             restore --snapshot {tag}` brings it back, `hayate clearsnapshot -t {tag}` frees it",
            table.keyspace,
            table.name,
            summary.tables.first().map_or(0, |t| t.1),
            summary.pinned_blocks
        ),
        Err(e) => tracing::error!(
            "auto_snapshot: could not snapshot {}.{} before it was {reason}: {e}; its rows are lost \
             on this node",
            table.keyspace,
            table.name
        ),
    }
}

/// `hayate snapshot --all-nodes`: snapshot `tag` taken when the metadata log's entry `index`
/// is applied, on every node at the same log position. Refused for space as one asked of a
/// single node is; the outcome is kept for [`logged_outcome`], where the tool reads it.
pub fn by_log(engine: &Engine, tag: &str, tables: &[Chosen<'_>], index: u64) {
    let outcome = take(engine, tag, tables, "snapshot", false).map(|(manifest, summary)| {
        tracing::info!(
            "took snapshot {tag} of {} tables at metadata log entry {index} ({} blocks pinned) in {:?}",
            manifest.tables.len(),
            summary.pinned_blocks,
            summary.took
        );
        described(&manifest, &summary)
    });
    if let Err(e) = &outcome {
        tracing::error!("snapshot {tag} asked of every node at metadata log entry {index}: {e}");
    }
    let mut logged = LOGGED.lock().expect("snapshot outcomes lock poisoned");
    if logged.len() >= LOGGED_MAX {
        drop(logged.remove(0));
    }
    logged.push((tag.to_owned(), outcome));
}

/// What this node made of the snapshot `tag` the metadata log asked for, if it has applied it:
/// the snapshot taken, or why not.
pub fn logged_outcome(tag: &str) -> Option<Result<serde_json::Value, String>> {
    let logged = LOGGED.lock().expect("snapshot outcomes lock poisoned");
    logged
        .iter()
        .rev()
        .find(|(t, _)| t == tag)
        .map(|(_, o)| o.clone())
}

/// The outcomes of the last snapshots the metadata log asked for (one node per process).
static LOGGED: Mutex<Vec<(String, Result<serde_json::Value, String>)>> = Mutex::new(Vec::new());
const LOGGED_MAX: usize = 64;

/// A snapshot just taken, as the endpoint answers it.
pub fn described(manifest: &Manifest, summary: &hayate_storage::SnapshotSummary) -> serde_json::Value {
    serde_json::json!({
        "tag": manifest.tag,
        "tables": manifest.tables.iter().map(|t| serde_json::json!({
            "keyspace": t.keyspace, "table": t.table, "entries": t.entries,
        })).collect::<Vec<_>>(),
        "pinned_bytes": summary.pinned_bytes(),
        "newly_pinned_bytes": summary.newly_pinned_blocks * u64::from(summary.block_size_bytes),
        "took_ms": summary.took.as_secs_f64() * 1000.0,
    })
}

/// For an automatic snapshot's tag, the file that says it was cleared (a file, not a folder:
/// listings skip it).
fn cleared_marker(engine: &Engine, tag: &str) -> Option<std::path::PathBuf> {
    let automatic = tag.starts_with("dropped-") || tag.starts_with("truncated-");
    automatic
        .then(|| {
            engine
                .snapshots_root()
                .map(|root| root.join(format!(".cleared-{tag}")))
        })
        .flatten()
}

/// A snapshot as `hayate listsnapshots` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct Listing {
    pub tag: String,
    pub taken_at_ms: u64,
    pub reason: String,
    pub tables: Vec<(String, String, u64)>,
    /// The most device space it can hold (its pinned blocks).
    pub pinned_bytes: u64,
    /// A manifest that cannot be read, or an engine file that does not verify.
    pub problem: Option<String>,
}

/// Every snapshot on this node, oldest first.
pub fn list(engine: &Engine) -> Vec<Listing> {
    let Some(root) = engine.snapshots_root() else {
        return Vec::new();
    };
    let Ok(dirs) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<Listing> = dirs
        .flatten()
        .filter(|d| d.path().is_dir())
        .map(|d| listing(engine, &d.file_name().to_string_lossy(), &d.path()))
        .collect();
    out.sort_by(|a, b| (a.taken_at_ms, &a.tag).cmp(&(b.taken_at_ms, &b.tag)));
    out
}

fn listing(engine: &Engine, tag: &str, dir: &Path) -> Listing {
    let mut l = Listing {
        tag: tag.to_owned(),
        taken_at_ms: 0,
        reason: String::new(),
        tables: Vec::new(),
        pinned_bytes: 0,
        problem: None,
    };
    match read_manifest(dir) {
        Ok(m) => {
            l.taken_at_ms = m.taken_at_ms;
            l.reason = m.reason;
            l.tables = m
                .tables
                .into_iter()
                .map(|t| (t.keyspace, t.table, t.entries))
                .collect();
        }
        Err(e) => l.problem = Some(e),
    }
    match engine.open_snapshot(tag) {
        Ok(s) => l.pinned_bytes = s.pinned_blocks() * u64::from(engine.snapshot_space().block_size_bytes),
        Err(e) => l.problem = Some(e.to_string()),
    }
    l
}

pub fn read_manifest(dir: &Path) -> Result<Manifest, String> {
    let path = dir.join(MANIFEST);
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let m: Manifest = serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    if m.format != FORMAT {
        return Err(format!(
            "{}: unknown manifest format {}",
            path.display(),
            m.format
        ));
    }
    Ok(m)
}

/// Clears snapshot `tag`, or every snapshot if `None`; the tags cleared.
pub fn clear(engine: &Engine, tag: Option<&str>) -> Result<Vec<String>, String> {
    let tags: Vec<String> = match tag {
        Some(t) => vec![t.to_owned()],
        None => list(engine).into_iter().map(|l| l.tag).collect(),
    };
    for t in &tags {
        match engine.clear_snapshot(t) {
            Ok(()) => {
                tracing::info!("cleared snapshot {t}");
                if let Some(marker) = cleared_marker(engine, t) {
                    // The DROP's entry, replayed at a restart, must not take it again.
                    if let Err(e) = std::fs::write(&marker, b"") {
                        tracing::warn!("cannot write {}: {e}", marker.display());
                    }
                }
            }
            Err(SnapshotError::NotFound(_)) if tag.is_none() => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(tags)
}
