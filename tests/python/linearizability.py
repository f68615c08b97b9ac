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
    events = [e for e in history if not (e.op == "read" and e.outcome is UNKNOWN)]
    n = len(events)
    must = sum(1 for e in events if e.outcome is not UNKNOWN)
    seen: set[tuple[int, object]] = set()
    stack: list[tuple[int, object]] = [(0, None)]
    deepest = 0
    while stack:
        done, state = stack.pop()
        placed = sum(1 for i in range(n) if done >> i & 1 and events[i].outcome is not UNKNOWN)
        deepest = max(deepest, placed)
        if placed == must:
            return None
        if len(seen) > STATES_MAX:
            check.undecided += 1
            return None
        horizon = min((events[i].returned for i in range(n) if not done >> i & 1), default=INFINITY)
        for i in range(n):
            if done >> i & 1 or events[i].invoked > horizon:
                continue
            nxt = _step(state, events[i])
            if nxt is _NO:
                continue
            key = (done | 1 << i, nxt)
            if key not in seen:
                seen.add(key)
                stack.append(key)
    lines = "\n".join(f"  {e.invoked:12.6f} {e.returned:12.6f} {e.op} value={e.value} expect={e.expect} "
                      f"-> {e.outcome}" for e in sorted(events, key=lambda e: e.invoked))
    return (f"not linearizable: at most {deepest} of the {must} operations with a known outcome can be "
            f"ordered; history (invoked, returned, op):\n{lines}")


check.undecided = 0

