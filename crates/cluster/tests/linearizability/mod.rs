//! A linearizability checker for histories of one compare-and-set register (Wing and Gong's
//! search, with Lowe's memo of the states already tried): is there an order of the operations,
//! each placed between its invocation and its response, in which every result is what a
//! register would have answered? An operation whose outcome the client never learned (a
//! timeout) may take effect at any moment after its invocation, or never.
//!
//! Registers are independent, so a history over several is checked register by register.

use std::collections::HashSet;

/// A register's value: `None` before the first write.
pub type Value = Option<u32>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    Write(u32),
    Cas { expect: u32, new: u32 },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A read's value.
    Read(Value),
    /// A write's acknowledgement, or a compare-and-set's `[applied]`.
    Done(bool),
    /// The client does not know (a timeout): it may have happened, or not.
    Unknown,
}

#[derive(Clone, Debug)]
pub struct Event {
    pub op: Op,
    pub outcome: Outcome,
    /// Virtual time of the invocation and of the response (`u64::MAX` for an unknown
    /// outcome).
    pub invoked: u64,
    pub returned: u64,
}

/// What `op` does to `state`, if `outcome` is one it can have there.
fn step(state: Value, op: &Op, outcome: &Outcome) -> Option<Value> {
    match (op, outcome) {
        (Op::Read, Outcome::Read(v)) => (*v == state).then_some(state),
        (Op::Read, Outcome::Unknown) => Some(state),
        (Op::Write(v), Outcome::Done(true) | Outcome::Unknown) => Some(Some(*v)),
        (Op::Cas { expect, new }, Outcome::Done(true)) => (state == Some(*expect)).then_some(Some(*new)),
        (Op::Cas { expect, .. }, Outcome::Done(false)) => (state != Some(*expect)).then_some(state),
        (Op::Cas { expect, new }, Outcome::Unknown) => {
            Some(if state == Some(*expect) { Some(*new) } else { state })
        }
        _ => None,
    }
}

/// The most search states one history may take: a history with many operations of unknown
/// outcome can take exponential time, and is then reported undecided rather than judged.
pub const STATES_MAX: usize = 2_000_000;

/// What the search found.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Linearizable,
    /// The search gave up after [`STATES_MAX`] states.
    Undecided,
}

/// Checks one register's history; `Err` shows the history that cannot be ordered.
pub fn check(history: &[Event]) -> Result<Verdict, String> {
    // Reads of unknown outcome say nothing: leave them out.
    let events: Vec<&Event> = history
        .iter()
        .filter(|e| !(e.op == Op::Read && e.outcome == Outcome::Unknown))
        .collect();
    let n = events.len();
    let words = n.div_ceil(64).max(1);
    let must = events.iter().filter(|e| e.outcome != Outcome::Unknown).count();
    let mut seen: HashSet<(Vec<u64>, Value)> = HashSet::new();
    // Depth-first over (linearized set, state), as an explicit stack.
    let mut stack: Vec<(Vec<u64>, Value, usize)> = vec![(vec![0; words], None, 0)];
    let mut deepest = 0;
    while let Some((done, state, placed)) = stack.pop() {
        let is_done = |i: usize| done[i / 64] & (1 << (i % 64)) != 0;
        let placed_known = (0..n)
            .filter(|&i| is_done(i) && events[i].outcome != Outcome::Unknown)
            .count();
        deepest = deepest.max(placed_known);
        if placed_known == must {
            return Ok(Verdict::Linearizable);
        }
        if seen.len() > STATES_MAX {
            return Ok(Verdict::Undecided);
        }
        // An operation may go next only if it was invoked before every pending operation
        // returned.
        let horizon = (0..n)
            .filter(|&i| !is_done(i))
            .map(|i| events[i].returned)
            .min()
            .unwrap_or(u64::MAX);
        for i in 0..n {
            if is_done(i) || events[i].invoked > horizon {
                continue;
            }
            let Some(next) = step(state, &events[i].op, &events[i].outcome) else {
                continue;
            };
            let mut d = done.clone();
            d[i / 64] |= 1 << (i % 64);
            if seen.insert((d.clone(), next)) {
                stack.push((d, next, placed + 1));
            }
        }
    }
    Err(format!(
        "not linearizable: at most {deepest} of the {must} operations with a known outcome can be \
         ordered; history (invoked, returned, op, outcome):\n{}",
        events
            .iter()
            .map(|e| format!(
                "  {:>10} {:>20} {:?} {:?}",
                e.invoked, e.returned, e.op, e.outcome
            ))
            .collect::<Vec<_>>()
            .join("\n")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(op: Op, outcome: Outcome, invoked: u64, returned: u64) -> Event {
        Event {
            op,
            outcome,
            invoked,
            returned,
        }
    }

    #[test]
    fn the_checker_accepts_overlaps_and_refuses_stale_reads() {
        // Two overlapping writes, and reads that see them in either order: fine.
        let ok = [
            ev(Op::Write(1), Outcome::Done(true), 0, 10),
            ev(Op::Write(2), Outcome::Done(true), 5, 15),
            ev(Op::Read, Outcome::Read(Some(1)), 12, 20),
        ];
        assert_eq!(check(&ok), Ok(Verdict::Linearizable));
        // A read after both writes returned sees the one ordered last; 1 then 2 then a read
        // of 1 cannot be.
        let stale = [
            ev(Op::Write(1), Outcome::Done(true), 0, 10),
            ev(Op::Write(2), Outcome::Done(true), 11, 15),
            ev(Op::Read, Outcome::Read(Some(1)), 16, 20),
        ];
        assert!(check(&stale).is_err());
        // Two compare-and-sets from the same value cannot both apply.
        let double = [
            ev(Op::Write(1), Outcome::Done(true), 0, 1),
            ev(Op::Cas { expect: 1, new: 2 }, Outcome::Done(true), 2, 10),
            ev(Op::Cas { expect: 1, new: 3 }, Outcome::Done(true), 2, 10),
        ];
        assert!(check(&double).is_err());
        // A timed-out write may take effect late, or never.
        let late = [
            ev(Op::Write(1), Outcome::Unknown, 0, u64::MAX),
            ev(Op::Read, Outcome::Read(None), 5, 6),
            ev(Op::Read, Outcome::Read(Some(1)), 7, 8),
        ];
        assert_eq!(check(&late), Ok(Verdict::Linearizable));
        let never = [
            ev(Op::Write(1), Outcome::Unknown, 0, u64::MAX),
            ev(Op::Read, Outcome::Read(Some(1)), 5, 6),
            ev(Op::Read, Outcome::Read(None), 7, 8),
        ];
        assert!(check(&never).is_err(), "once seen, a write cannot be unseen");
    }
}
