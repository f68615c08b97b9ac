//! Warnings a request gathers while it runs, sent back with its response: the frame's warning
//! flag and a [string list] before the body, which drivers show as the query's warnings
//! (the Python driver's `ResponseFuture.warnings`), as Cassandra's `ClientWarn` does.
//!
//! One [`Warnings`] lives as long as one request. Nearly every request adds none, so the lock is
//! taken only by a request that warns and once when its response is framed.

use std::sync::Mutex;

/// Warnings one response carries at most; further ones are dropped (the node's log has them).
pub const WARNINGS_MAX: usize = 16;
/// Bytes of one warning at most, well inside the [string] a warning travels as.
pub const WARNING_MAX_BYTES: usize = 4096;

#[derive(Debug, Default)]
pub struct Warnings {
    list: Mutex<Vec<String>>,
}

impl Warnings {
    /// Adds a warning for the client, cut to [`WARNING_MAX_BYTES`].
    pub fn add(&self, mut warning: String) {
        if warning.len() > WARNING_MAX_BYTES {
            let mut end = WARNING_MAX_BYTES;
            while !warning.is_char_boundary(end) {
                end -= 1;
            }
            warning.truncate(end);
        }
        let mut list = self.list.lock().expect("warnings lock poisoned");
        if list.len() < WARNINGS_MAX {
            list.push(warning);
        }
    }

    /// The warnings gathered so far, leaving none.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.list.lock().expect("warnings lock poisoned"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_bounded_in_number_and_length() {
        let w = Warnings::default();
        for i in 0..WARNINGS_MAX + 3 {
            w.add(format!("warning {i}"));
        }
        w.add("é".repeat(WARNING_MAX_BYTES));
        let list = w.take();
        assert_eq!(list.len(), WARNINGS_MAX);
        assert_eq!(list[0], "warning 0");
        assert!(w.take().is_empty(), "take leaves none");

        w.add("é".repeat(WARNING_MAX_BYTES));
        let long = w.take().remove(0);
        assert!(long.len() <= WARNING_MAX_BYTES && long.len() > WARNING_MAX_BYTES - 2);
    }
}
