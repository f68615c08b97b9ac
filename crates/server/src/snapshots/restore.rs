//! `hayate restore --snapshot TAG`: puts the rows a snapshot on this node holds back into the
//! cluster, as Cassandra's `sstableloader` does with a snapshot's files: each row goes to its
//! current replicas through the coordinator, with the timestamps, TTLs and deletions it had,
//! so a row written since (a newer timestamp) wins over the restored one, and restoring twice
//! changes nothing. A table that no longer exists (the automatic snapshot of a DROP) is made
//! again from the snapshot's manifest, and its keyspace and types too when they are gone;
//! `--to-table ks.t` loads a table into another one (made like the original if missing).
//! Cells go to the column of the same name; a column the target does not have is skipped and
//! counted.
//!
//! Every node holds a snapshot of its own replicas, so a cluster's restore runs on each node
//! (`hayate restore --all-nodes`); the replicas of a row then receive it once from each node
//! that held it, which the merge makes harmless. Writes are at ALL by default (every replica
//! has the row when the restore says done), in pages of [`PAGE_ROWS`]. An interrupted restore,
//! asked again, goes on from the page it had reached (`resume.rs`).

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex};

use hayate_cluster::consistency::ConsistencyLevel;
use hayate_cluster::coordinator::{WriteRequest, WriteType};
use hayate_cluster::replica::{Mutation, MutationKind};
use hayate_storage::{Row, SnapshotRecord};

use crate::backup::format::Record;
use serde::Serialize;

use super::resume::Checkpoint;
use super::{read_manifest, TableManifest};
use crate::error::QueryError;
use crate::node::Node;
use crate::schema::machine::{decode_answer, statement_command};
use crate::schema::{Keyspace, Table};

/// Rows a restore reads from the snapshot and writes at once.
const PAGE_ROWS: usize = 256;

/// What to restore.
#[derive(Clone, Debug, Default)]
pub struct RestoreRequest {
    pub tag: String,
    pub keyspace: Option<String>,
    pub table: Option<String>,
    /// `ks.table`: load into this table instead.
    pub to_table: Option<(String, String)>,
    pub consistency: Option<ConsistencyLevel>,
}

/// What a restore did, per table.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Restored {
    pub keyspace: String,
    pub table: String,
    /// Created from the snapshot's schema (it did not exist).
    pub created: bool,
    pub rows: u64,
    pub partition_tombstones: u64,
    /// Cells of columns the target table does not have.
    pub cells_skipped: u64,
}

/// A restore as `GET /restore` shows it while it runs and after.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Progress {
    pub tag: String,
    /// "running", "done" or "failed".
    pub state: String,
    /// The tables done, and the one being restored last.
    pub tables: Vec<Restored>,
    /// Went on from an interrupted run of the same restore (`resume.rs`): the counts are of
    /// this run only.
    pub resumed: bool,
    pub error: Option<String>,
}

/// Restores `request` from this node's snapshot, keeping `progress` up to date.
pub async fn restore(
    node: &Node,
    request: &RestoreRequest,
    progress: &Mutex<Progress>,
) -> Result<(), String> {
    let engine = &node.engine;
    let dir = engine.snapshot_dir(&request.tag).map_err(|e| e.to_string())?;
    if !dir.exists() {
        return Err(format!("no snapshot tagged {} on this node", request.tag));
    }
    let manifest = read_manifest(&dir)?;
    let snapshot = engine.open_snapshot(&request.tag).map_err(|e| e.to_string())?;
    let chosen = choose(&manifest.tables, request, "snapshot")?;
    // The time it was taken too: a snapshot cleared and taken again under the same tag is
    // another one.
    let source = format!("{} taken at {} ms", request.tag, manifest.taken_at_ms);
    let mut checkpoint = Checkpoint::open(&node.config.data_dir, request.describe("snapshot", &source));
    resuming(&checkpoint, &request.tag, progress);
    for source in chosen {
        let unit = format!("{}.{}", source.keyspace, source.table);
        let Some(start) = checkpoint.start(&unit) else {
            continue; // restored whole by the run this one goes on from
        };
        let mut target = Target::prepare(node, source, request, progress).await?;
        let mut from = Some(start as usize);
        while let Some(at) = from {
            let (records, next) = engine
                .read_snapshot(&snapshot, source.storage_id, at, PAGE_ROWS, 0)
                .map_err(|e| e.to_string())?;
            from = next;
            target
                .write(node, records.into_iter().map(Record::from).collect())
                .await?;
            if let Some(next) = next {
                checkpoint.advance(&unit, next as u64)?;
            }
        }
        target.finish(&source.keyspace, &source.table, &request.tag);
        checkpoint.finish_unit(&unit)?;
    }
    checkpoint.finish();
    Ok(())
}

/// Says, in the log and the progress, that a restore goes on from an interrupted run.
pub fn resuming(checkpoint: &Checkpoint, from: &str, progress: &Mutex<Progress>) {
    if checkpoint.resumed() {
        tracing::info!("restore from {from}: going on from where an interrupted run of it stopped");
        progress.lock().expect("restore progress lock poisoned").resumed = true;
    }
}

impl RestoreRequest {
    /// What the request restores, from where (`what` and `from`) into what: a restore asked
    /// again with the same description goes on from an interrupted run of it.
    pub fn describe(&self, what: &str, from: &str) -> String {
        format!(
            "{what} {from} keyspace {:?} table {:?} into {:?}",
            self.keyspace, self.table, self.to_table
        )
    }
}

/// The tables of `tables` that `request` names; refused if none, or several with `--to-table`.
pub fn choose<'a>(
    tables: &'a [TableManifest],
    request: &RestoreRequest,
    what: &str,
) -> Result<Vec<&'a TableManifest>, String> {
    let chosen: Vec<&TableManifest> = tables
        .iter()
        .filter(|t| request.keyspace.as_ref().is_none_or(|k| *k == t.keyspace))
        .filter(|t| request.table.as_ref().is_none_or(|n| *n == t.table))
        .collect();
    if chosen.is_empty() {
        return Err(format!(
            "{what} {} holds no table matching {}.{}",
            request.tag,
            request.keyspace.as_deref().unwrap_or("*"),
            request.table.as_deref().unwrap_or("*")
        ));
    }
    let distinct: std::collections::BTreeSet<(&str, &str)> = chosen
        .iter()
        .map(|t| (t.keyspace.as_str(), t.table.as_str()))
        .collect();
    if request.to_table.is_some() && distinct.len() > 1 {
        return Err("--to-table needs one table: name it (KEYSPACE TABLE)".to_owned());
    }
    Ok(chosen)
}

impl From<SnapshotRecord> for Record {
    fn from(r: SnapshotRecord) -> Record {
        match r {
            SnapshotRecord::Row(r) => Record::Row {
                token: r.token,
                partition: r.partition_key,
                clustering: r.clustering_key,
                row: r.row,
            },
            SnapshotRecord::Tombstones {
                token,
                partition_key,
                tombstones,
            } => Record::Tombstones {
                token,
                partition: partition_key,
                tombstones,
            },
        }
    }
}

/// The table a restore writes into, made if missing, with its column numbers mapped.
pub struct Target<'p> {
    keyspace: Arc<Keyspace>,
    table: Arc<Table>,
    columns: HashMap<u32, u32>,
    consistency: ConsistencyLevel,
    done: Restored,
    progress: &'p Mutex<Progress>,
}

impl<'p> Target<'p> {
    /// The table `source`'s rows go into (made like it if it does not exist).
    pub async fn prepare(
        node: &Node,
        source: &TableManifest,
        request: &RestoreRequest,
        progress: &'p Mutex<Progress>,
    ) -> Result<Target<'p>, String> {
        let (ks, name) = request
            .to_table
            .clone()
            .unwrap_or_else(|| (source.keyspace.clone(), source.table.clone()));
        let created = ensure_table(node, source, &ks, &name).await?;
        let schema = node.schema.current();
        let keyspace = schema
            .keyspace(&ks)
            .ok_or_else(|| format!("keyspace {ks} is gone"))?
            .clone();
        let table = keyspace
            .tables
            .get(&name)
            .ok_or_else(|| format!("table {ks}.{name} is gone"))?
            .clone();
        let columns = column_map(source, &table);
        let mut done = Restored {
            keyspace: ks,
            table: name,
            created,
            ..Restored::default()
        };
        // A table loaded from several files (a backup's nodes) is shown once.
        if let Some(before) = progress
            .lock()
            .expect("restore progress lock poisoned")
            .tables
            .iter()
            .find(|t| t.keyspace == done.keyspace && t.table == done.table)
        {
            done = Restored {
                created: before.created || created,
                ..before.clone()
            };
        }
        Ok(Target {
            keyspace,
            table,
            columns,
            consistency: request.consistency.unwrap_or(ConsistencyLevel::All),
            done,
            progress,
        })
    }

    /// Writes `records` to their current replicas.
    pub async fn write(&mut self, node: &Node, records: Vec<Record>) -> Result<(), String> {
        let mut mutations = Vec::with_capacity(records.len());
        let table = self.table.storage_id;
        for record in records {
            match record {
                Record::Row {
                    token,
                    partition,
                    clustering,
                    row,
                } => {
                    self.done.rows += 1;
                    let update = remap(row, &self.columns, &mut self.done.cells_skipped);
                    mutations.push(Mutation {
                        table,
                        token,
                        partition,
                        kind: MutationKind::Row { clustering, update },
                    });
                }
                Record::Tombstones {
                    token,
                    partition,
                    tombstones,
                } => {
                    self.done.partition_tombstones += 1;
                    let ranges = tombstones
                        .partition
                        .map(|d| (Bound::Unbounded, Bound::Unbounded, d))
                        .into_iter()
                        .chain(
                            tombstones
                                .ranges
                                .into_iter()
                                .map(|r| (r.start, r.end, r.deletion)),
                        );
                    for (start, end, deletion) in ranges {
                        mutations.push(Mutation {
                            table,
                            token,
                            partition: partition.clone(),
                            kind: MutationKind::DeleteRange { start, end, deletion },
                        });
                    }
                }
            }
        }
        self.show();
        if mutations.is_empty() {
            return Ok(());
        }
        node.coordinator
            .write(WriteRequest {
                replication: self.keyspace.strategy(),
                consistency: self.consistency,
                mutations,
                write_type: WriteType::UnloggedBatch,
            })
            .await
            .map_err(|e| {
                format!(
                    "restoring {}.{}: a write at {} failed after {} rows: {e}; run the restore again \
                     once every replica is up (rows written twice are the same rows)",
                    self.done.keyspace,
                    self.done.table,
                    self.consistency.name(),
                    self.done.rows
                )
            })
    }

    fn show(&self) {
        let mut p = self.progress.lock().expect("restore progress lock poisoned");
        let done = &self.done;
        match p
            .tables
            .iter_mut()
            .find(|t| t.keyspace == done.keyspace && t.table == done.table)
        {
            Some(t) => *t = done.clone(),
            None => p.tables.push(done.clone()),
        }
    }

    /// Logs what was restored from `source_keyspace.source_table` of `from`.
    pub fn finish(self, source_keyspace: &str, source_table: &str, from: &str) {
        self.show();
        tracing::info!(
            "restored {} rows and {} partitions' tombstones of {source_keyspace}.{source_table} from {from} \
             into {}.{} (so far)",
            self.done.rows,
            self.done.partition_tombstones,
            self.done.keyspace,
            self.done.table
        );
    }
}

/// For each column number of the snapshot's table, the target's column of the same name.
fn column_map(source: &TableManifest, target: &Table) -> HashMap<u32, u32> {
    source
        .columns
        .iter()
        .filter_map(|(id, name)| target.column(name).map(|c| (*id, c.id)))
        .collect()
}

/// The row with its cells renumbered for the target table; cells of columns it lacks dropped.
fn remap(mut row: Row, columns: &HashMap<u32, u32>, skipped: &mut u64) -> Row {
    let before = row.cells.len() as u64;
    row.cells.retain_mut(|c| match columns.get(&c.column) {
        Some(&to) => {
            c.column = to;
            true
        }
        None => false,
    });
    *skipped += before - row.cells.len() as u64;
    row.column_deletions.retain_mut(|(c, _)| match columns.get(c) {
        Some(&to) => {
            *c = to;
            true
        }
        None => false,
    });
    row.column_deletions.sort_by_key(|(c, _)| *c);
    row.normalize();
    row
}

/// Makes `ks.name` from the snapshot's schema if it does not exist (its keyspace and types
/// too); true if it made the table.
async fn ensure_table(node: &Node, source: &TableManifest, ks: &str, name: &str) -> Result<bool, String> {
    let schema = node.schema.current();
    if schema.keyspace(ks).is_some_and(|k| k.tables.contains_key(name)) {
        return Ok(false);
    }
    if schema.keyspace(ks).is_none() {
        if ks != source.keyspace {
            return Err(format!("keyspace {ks} does not exist: create it first"));
        }
        run(node, &source.create_keyspace).await?;
    }
    // Each type after those it uses: try them all until a round makes no progress.
    let mut types: Vec<&String> = source.create_types.iter().collect();
    while !types.is_empty() {
        let before = types.len();
        let mut left = Vec::new();
        for t in types {
            let cql = t.replacen(
                &format!("{}.", quoted(&source.keyspace)),
                &format!("{}.", quoted(ks)),
                1,
            );
            if run(node, &cql).await.is_err() {
                left.push(t);
            }
        }
        if left.len() == before {
            break;
        }
        types = left;
    }
    let from = format!("{}.{}", quoted(&source.keyspace), quoted(&source.table));
    let cql = source
        .create_table
        .replacen(&from, &format!("{}.{}", quoted(ks), quoted(name)), 1);
    run(node, &cql).await?;
    Ok(true)
}

fn quoted(name: &str) -> String {
    crate::schema::quote_identifier(name)
}

/// Runs one schema statement through the metadata log; an "already exists" answer is fine.
async fn run(node: &Node, cql: &str) -> Result<(), String> {
    let command = statement_command(cql, None, &node.schema_log.data_centers());
    match node
        .schema_log
        .propose(command)
        .await
        .and_then(|a| decode_answer(&a))
    {
        Ok(_) | Err(QueryError::AlreadyExists { .. }) => Ok(()),
        Err(e) => Err(format!("{cql}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hayate_storage::{Cell, Deletion};

    #[test]
    fn cells_move_to_the_column_of_the_same_name_and_others_are_counted() {
        let columns: HashMap<u32, u32> = [(0, 0), (2, 5)].into_iter().collect();
        let row = Row {
            cells: vec![
                Cell::live(0, 1, b"k".to_vec()),
                Cell::live(1, 1, b"gone".to_vec()),
                Cell::live(2, 1, b"moved".to_vec()),
            ],
            column_deletions: vec![(
                2,
                Deletion {
                    timestamp_us: 1,
                    deleted_at_s: 1,
                },
            )],
            ..Row::default()
        };
        let mut skipped = 0;
        let out = remap(row, &columns, &mut skipped);
        assert_eq!(skipped, 1);
        let cols: Vec<u32> = out.cells.iter().map(|c| c.column).collect();
        assert_eq!(cols, vec![0, 5]);
        assert_eq!(out.column_deletions[0].0, 5);
    }
}
