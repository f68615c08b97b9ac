//! The database a workload runs against: YCSB's `DB` interface, asynchronous. The CQL binding is
//! in `cql.rs`; tests use [`MemoryDb`], so that the runner, the measurements and the output files
//! are checked without a server.

use std::future::Future;

use super::measure::Status;
use super::workload::{FieldSet, Values};

pub trait Db: Send + Sync + 'static {
    /// Reads one record; `NotFound` when there is none.
    fn read(&self, key: &str, fields: FieldSet) -> impl Future<Output = Status> + Send;
    /// Reads up to `record_count` records from `start_key` on, in the store's key order.
    fn scan(
        &self,
        start_key: &str,
        record_count: i32,
        fields: FieldSet,
    ) -> impl Future<Output = Status> + Send;
    fn update(&self, key: &str, values: Values<'_>) -> impl Future<Output = Status> + Send;
    fn insert(&self, key: &str, values: Values<'_>) -> impl Future<Output = Status> + Send;
    #[expect(
        dead_code,
        reason = "CoreWorkload never deletes; the binding keeps YCSB's DB interface whole"
    )]
    fn delete(&self, key: &str) -> impl Future<Output = Status> + Send;
}

#[cfg(test)]
pub use memory::MemoryDb;

#[cfg(test)]
mod memory {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;

    use super::*;

    /// An in-memory table that can be told to fail every `fail_every`-th call.
    #[derive(Debug, Default)]
    pub struct MemoryDb {
        pub rows: Mutex<BTreeMap<String, Vec<String>>>,
        pub field_count: usize,
        pub fail_every: u64,
        calls: AtomicU64,
    }

    impl MemoryDb {
        pub fn new(field_count: usize, fail_every: u64) -> MemoryDb {
            MemoryDb {
                field_count,
                fail_every,
                ..MemoryDb::default()
            }
        }

        fn fails(&self) -> bool {
            let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
            self.fail_every != 0 && n.is_multiple_of(self.fail_every)
        }

        fn write(&self, key: &str, values: Values<'_>) -> Status {
            if self.fails() {
                return Status::Error;
            }
            let mut rows = self.rows.lock().expect("lock");
            let row = rows
                .entry(key.to_string())
                .or_insert_with(|| vec![String::new(); self.field_count]);
            match values {
                Values::One { field, value } => row[field] = value.to_string(),
                Values::All(all) => {
                    for (f, cell) in row.iter_mut().enumerate().take(all.len()) {
                        *cell = all.get(f).to_string();
                    }
                }
            }
            Status::Ok
        }
    }

    impl Db for MemoryDb {
        async fn read(&self, key: &str, _fields: FieldSet) -> Status {
            if self.fails() {
                return Status::Error;
            }
            if self.rows.lock().expect("lock").contains_key(key) {
                Status::Ok
            } else {
                Status::NotFound
            }
        }

        async fn scan(&self, start_key: &str, record_count: i32, _fields: FieldSet) -> Status {
            if self.fails() {
                return Status::Error;
            }
            let rows = self.rows.lock().expect("lock");
            let _n = rows
                .range(start_key.to_string()..)
                .take(record_count.max(0) as usize)
                .count();
            Status::Ok
        }

        async fn update(&self, key: &str, values: Values<'_>) -> Status {
            self.write(key, values)
        }

        async fn insert(&self, key: &str, values: Values<'_>) -> Status {
            self.write(key, values)
        }

        async fn delete(&self, key: &str) -> Status {
            self.rows.lock().expect("lock").remove(key);
            Status::Ok
        }
    }
}
