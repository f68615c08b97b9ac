"""A linearizability checker for histories of one register that clients read, insert if absent
and compare-and-set (Wing and Gong's search with Lowe's memo of the states already tried).

An operation is placed at some moment between its invocation and its response; the history is
linearizable if some such order makes every result what one register would have answered. An
operation whose outcome the client never learned (a timeout) may take effect at any moment after
its invocation, or never: its response time is infinite and its result unknown. Registers are
independent: check a history over several one register at a time.

The crate test in crates/cluster/tests/linearizability is the same search over the coordinator's
simulation; this one judges histories a real cluster made through a real driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

UNKNOWN = "unknown"
INFINITY = float("inf")
STATES_MAX = 2_000_000


@dataclass(frozen=True)
class Event:
    op: str  # "read", "insert" (IF NOT EXISTS) or "cas" (IF v = expect)
    value: Optional[int]  # the value read, inserted or set
    expect: Optional[int]  # cas: the value the condition names
    outcome: object  # read: the value (None: no row); insert/cas: True/False; UNKNOWN
    invoked: float
    returned: float  # INFINITY when the outcome is unknown


def _step(state, e: Event):
    """The state after `e` if `e` can have its outcome in `state`, else the marker _NO."""
    if e.op == "read":
        if e.outcome is UNKNOWN or e.outcome == state:
            return state
        return _NO
    applies = (state is None) if e.op == "insert" else (state == e.expect)
    if e.outcome is UNKNOWN:
        return e.value if applies else state
    if e.outcome is True:
        return e.value if applies else _NO
    return state if not applies else _NO


_NO = object()


def check(history: list[Event]) -> str | None:
    """None if the history is linearizable (or too large to judge: see `undecided`); otherwise
    a description of it."""
    # In invocation order, so that the operations that may come next (those invoked before the
    # earliest response still pending) are found from the first not yet placed, without
    # scanning the whole history at each step: the search then takes time about linear in a
    # history's length, and a soak's hundreds of thousands of operations are judged.
    events = sorted((e for e in history if not (e.op == "read" and e.outcome is UNKNOWN)),
                    key=lambda e: e.invoked)
    n = len(events)
    everything = (1 << n) - 1
    must = sum(1 for e in events if e.outcome is not UNKNOWN)
    seen: set[tuple[int, object]] = set()
    # (operations placed, as a bit mask; the register's state; how many of them had a known outcome)
    stack: list[tuple[int, object, int]] = [(0, None, 0)]
    deepest = 0
    while stack:
        done, state, placed = stack.pop()
        deepest = max(deepest, placed)
        if placed == must:
            return None
        if len(seen) > STATES_MAX:
            check.undecided += 1
            return None
        candidates = []
        horizon = INFINITY
        free = everything & ~done
        while free:
            lowest = free & -free
            i = lowest.bit_length() - 1
            # Every later operation was invoked after this one, so after the horizon too.
            if events[i].invoked > horizon:
                break
            candidates.append(i)
            horizon = min(horizon, events[i].returned)
            free ^= lowest
        for i in candidates:
            if events[i].invoked > horizon:
                continue
            nxt = _step(state, events[i])
            if nxt is _NO:
                continue
            key = (done | 1 << i, nxt)
            if key not in seen:
                seen.add(key)
                stack.append((done | 1 << i, nxt, placed + (events[i].outcome is not UNKNOWN)))
    lines = "\n".join(f"  {e.invoked:12.6f} {e.returned:12.6f} {e.op} value={e.value} expect={e.expect} "
                      f"-> {e.outcome}" for e in sorted(events, key=lambda e: e.invoked))
    return (f"not linearizable: at most {deepest} of the {must} operations with a known outcome can be "
            f"ordered; history (invoked, returned, op):\n{lines}")


check.undecided = 0

