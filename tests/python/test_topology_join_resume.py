"""A node SIGKILLed while it streams its join resumes when started again, from its checkpoint,
not from scratch (docs/topology-changes.md, "Streaming: resuming").

Three nodes hold DATA_ROWS rows (RF 3) and send at most STREAM_THROUGHPUT each, so that a
fourth node's join streams for several seconds. A writer runs at QUORUM throughout. Once the new
node's checkpoint (`<data_dir>/streams/change-<epoch>.json`) records at least half of its
ranges done, and while it still streams, it is SIGKILLed; then started again. It resumes
(it says so), streams fewer bytes than its first attempt had to stream in all, ends normal,
and: no client error, every acknowledged row at ALL, the loads even once the others cleaned up.
"""

from __future__ import annotations

import json
import re
import time

from hayate_cluster import ClusterError
from topology import (CHANGE_TIMEOUT_S, REPLICATION_FACTOR, CLEANUP_LOG, CLEANUP_TIMEOUT_S, Writer, assert_even_loads,
                      assert_rows_read_back, bytes_per_row, create_table, load, log_offsets, logged_since, netstats,
                      stream_bytes_in, topology_cluster, wait_logged)

DATA_ROWS = 20_000
STREAM_THROUGHPUT = "256KiB"
# The share of its ranges the checkpoint must record done before the kill.
DONE_BEFORE_KILL = 0.5
# A resumed join streams less than this share of a whole one (about 1 - DONE_BEFORE_KILL,
# give or take the sizes of the ranges).
RESUMED_SHARE_MAX = 0.85
RESUME_LOG = "resuming the streams of a topology change from its checkpoint"


def checkpointed(data_dir) -> tuple[int, int]:
    """(ranges recorded done, ranges listed) in the node's stream checkpoint; (0, 0) if none."""
    done = listed = 0
    for path in (data_dir / "streams").glob("change-*.json"):
        try:
            spans = json.loads(path.read_text())["spans"]
        except (OSError, ValueError, KeyError):
            continue  # replaced while read: the next look sees it whole
        listed += len(spans)
        done += sum(1 for s in spans if s["done"])
    return done, listed


def test_a_join_killed_mid_stream_resumes_from_its_checkpoint():
    with topology_cluster("resume", stream_throughput=STREAM_THROUGHPUT) as cluster:
        cluster.start()
        session = cluster.session()
        create_table(session)
        acked = load(session, range(DATA_ROWS))
        row_bytes = bytes_per_row(cluster, DATA_ROWS)
        old = cluster.live_nodes()
        writer = Writer(session, 10_000_000).start()
        try:
            writer.wait_acked(50)
            offsets = log_offsets(old)
            new = cluster.add_node()
            new.proc = new.spawn()
            # Watch the first attempt until its checkpoint (which lists every range of the
            # join) records half of them done.
            deadline = time.monotonic() + CHANGE_TIMEOUT_S
            while True:
                cluster.check_alive()
                done, ranges = checkpointed(new.data_dir)
                if ranges and done >= DONE_BEFORE_KILL * ranges:
                    break
                if time.monotonic() > deadline:
                    raise ClusterError(f"the join recorded {done} of {ranges} ranges done in {CHANGE_TIMEOUT_S} s\n"
                                       f"{new.log_tail(40)}")
                time.sleep(0.05)
            first_done = stream_bytes_in(new)
            cluster.kill(new.index)
            # What a whole join of this ring streams: the new node's even share of the rows.
            rows_at_kill = len(acked) + writer.count()
            full_join = row_bytes * rows_at_kill * REPLICATION_FACTOR / len(cluster.nodes)
            print(f"\nSIGKILLed the joining node with {done} of {ranges} ranges checkpointed done, "
                  f"{first_done:.0f} bytes streamed in of about {full_join:.0f} for a whole join")
            assert done < ranges, "the join finished before it could be killed mid-stream (lower STREAM_THROUGHPUT)"
            writer.wait_acked(50)  # writes while it is down: hinted for it
            log_start = new.log_path.stat().st_size
            cluster.start_node(new.index)
            second = stream_bytes_in(new)
            mode = netstats(new)["mode"]
            wait_logged(cluster, old, CLEANUP_LOG, offsets, CLEANUP_TIMEOUT_S)
            writer.wait_acked(50)
        finally:
            writer.stop()
        what = "the join killed mid-stream and resumed"
        print(f"{what}: {writer.summary()}; after the restart it streamed in {second:.0f} bytes")
        resumed = [line for line in logged_since(new, log_start).splitlines() if RESUME_LOG in line]
        assert resumed, f"the restarted node did not say it resumed its streams\n{new.log_tail(40)}"
        print(resumed[0])
        counts = dict(re.findall(r"(resumed|left)=(\d+)", resumed[0]))
        assert int(counts.get("resumed", 0)) >= done, (
            f"the checkpoint had {done} ranges done at the kill; the restarted node resumed {counts}")
        assert mode == "NORMAL", f"the node is {mode} after its join\n{new.log_tail(40)}"
        # Half of the ranges were done: a resumed join streams about half of a whole one; one
        # that started over streams all of it, and more (the rows written since).
        assert 0 < second < RESUMED_SHARE_MAX * full_join, (
            f"after the restart the node streamed {second:.0f} bytes, a whole join about {full_join:.0f}: "
            f"it did not resume from its checkpoint\n{new.log_tail(40)}")
        writer.assert_no_errors(cluster, what)
        acked |= writer.acked
        assert_rows_read_back(cluster, session, acked, what, maybe_written=writer.failed_keys(), each=writer.acked)
        assert_even_loads(cluster, what, len(acked), row_bytes)
