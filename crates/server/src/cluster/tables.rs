//! The schema as topology changes see it: every table with its keyspace's replication.

use std::sync::Arc;

use hayate_cluster::consistency::Replication;
use hayate_cluster::topology::TableSource;
use hayate_storage::TableId;

use crate::schema::SchemaStore;

pub struct SchemaTables(pub Arc<SchemaStore>);

impl TableSource for SchemaTables {
    fn tables(&self) -> Vec<(TableId, Replication)> {
        self.0
            .current()
            .user_keyspaces()
            .flat_map(|k| {
                let replication = k.strategy().clone();
                k.tables
                    .values()
                    .map(move |t| (t.storage_id, replication.clone()))
            })
            .collect()
    }
}
