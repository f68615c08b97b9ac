#!/usr/bin/env python3
"""Device reads per operation under three update policies, by simulation.

    python3 bench/blind-updates.py [--records 400000] [--ops-per-record 6] [--seed 1]

The question (issue 11): can updates that do not read the row first ("blind" updates, folded
later) bring workload A's device reads per operation from about 1 to 0.65, while a read still
costs one device read in the common case and RAM stays under 64 bytes per record?

The model follows the engine's own accounting (`hayate_storage_device_reads_total`): reading a
record costs one device read unless its block is still in the post-write cache, which holds the
most recently written `cache` bytes (FIFO by block, as `cache.rs`). Every write, full row or
delta, advances the write position. Defragmentation's block reads are not counted, as the
engine does not count them in that metric either, and its moves do not refill the cache.

Policies:

- `read-before-write` (hayate today, and Aerospike): an update reads the row, merges, writes
  the whole row. A read reads the row.
- `blind, fold on read`: an update of a row without a pending delta writes a delta record of the
  cells it sets and reads nothing; an update of a row with one reads that delta and writes the
  two merged (one delta per row, so the index needs one more 8-byte location per entry). A read
  of a row with a delta reads both records and writes the folded row, so the next read costs one.
- `blind, deltas in RAM (B)`: deltas are also kept in a RAM buffer of B bytes; a read takes the
  delta from RAM (one device read, for the base) and writes the folded row; a second update
  merges in RAM; when the buffer is full its oldest delta is folded in the background by reading
  the base and writing the whole row.
- `blind while ... has room` (what hayate builds, `crates/storage/src/deltas.rs`): as above, but
  nothing folds in the background: an update that finds the buffer full reads its row and
  writes it whole, and a read frees a delta by folding its row.

Sizes are those of the fair sitting scaled to `--records`: 4,000,000 rows of 1,216-byte records
with a 256 MiB post-write cache become 400,000 rows with a 25.6 MiB cache, so the cache holds the
same share of the data. A delta of one 100-byte field is 176 bytes on the device (52-byte header,
a 23-byte key, the cell, padding) and 295 in RAM, as `crates/storage/examples/delta_ram.rs`
measured it.
"""

import argparse
import random
from collections import OrderedDict

FULL_BYTES = 1216
DELTA_BYTES = 176
DELTA_RAM_BYTES = 295
SITTING_RECORDS = 4_000_000
SITTING_CACHE = 256 << 20


def keys(records, count, distribution, rng):
    """`count` row numbers drawn as YCSB draws them (uniform, or zipfian 0.99 scrambled)."""
    if distribution == "uniform":
        return [rng.randrange(records) for _ in range(count)]
    cum, total = [], 0.0
    for i in range(1, records + 1):
        total += 1.0 / i**0.99
        cum.append(total)
    ranks = rng.choices(range(records), cum_weights=cum, k=count)
    scramble = list(range(records))
    rng.shuffle(scramble)
    return [scramble[r] for r in ranks]


class Model:
    """One policy's device reads and writes over a stream of operations."""

    def __init__(self, records, cache_bytes, blind, delta_ram_bytes, fold_on_read, evict=True):
        self.blind = blind
        self.evict = evict
        self.fold_on_read = fold_on_read
        self.cache = cache_bytes
        self.written = 0
        self.base = [-(1 << 62)] * records  # write position of each row's full record (cold)
        self.delta = {}  # row -> write position of its pending delta on the device
        self.ram = OrderedDict()  # row -> None: deltas held in RAM, oldest first
        self.ram_budget = delta_ram_bytes // DELTA_RAM_BYTES
        self.reads = 0
        self.bytes_written = 0

    def read_record(self, pos):
        if self.written - pos >= self.cache:
            self.reads += 1

    def write(self, nbytes):
        pos = self.written
        self.written += nbytes
        self.bytes_written += nbytes
        return pos

    def fold(self, row):
        """Writes the whole row once base and delta are both at hand."""
        self.delta.pop(row, None)
        self.ram.pop(row, None)
        self.base[row] = self.write(FULL_BYTES)

    def read(self, row):
        self.read_record(self.base[row])
        if row in self.delta:
            if row not in self.ram:
                self.read_record(self.delta[row])
                self.fold(row)
            elif self.fold_on_read:
                self.fold(row)

    def update(self, row):
        if self.ram_budget and not self.evict and row not in self.ram and len(self.ram) >= self.ram_budget:
            # Full, and nothing folds in the background: this update reads the row first.
            self.read_record(self.base[row])
            if row in self.delta:
                self.read_record(self.delta[row])
            self.fold(row)
            return
        if not self.blind:
            self.read_record(self.base[row])
            self.base[row] = self.write(FULL_BYTES)
            return
        if row in self.delta and row not in self.ram:
            self.read_record(self.delta[row])  # one delta per row: merge with the one there
        self.delta[row] = self.write(DELTA_BYTES)
        if self.ram_budget:
            self.ram[row] = None
            while self.evict and len(self.ram) > self.ram_budget:
                oldest, _ = self.ram.popitem(last=False)
                self.read_record(self.base[oldest])  # folded in the background
                self.fold(oldest)


POLICIES = [
    # label, blind, delta RAM at 4M rows, fold on read, post-write cache at 4M rows
    ("read-before-write (today)", False, 0, False, 256 << 20),
    ("blind, one delta on the device, fold on read", True, 0, True, 256 << 20),
    ("blind, 384 MiB of deltas in RAM, fold on read", True, 384 << 20, True, 256 << 20),
    ("blind, 384 MiB of deltas in RAM, folded only when evicted", True, 384 << 20, False, 256 << 20),
    ("blind, 192 MiB of deltas in RAM + 64 MiB cache (no more RAM than before)", True, 192 << 20, True, 64 << 20),
    ("blind, 1.5 GiB of deltas in RAM, fold on read", True, 3 << 29, True, 256 << 20),
    ("blind while 384 MiB of deltas in RAM has room, fold on read (built)", True, 384 << 20, True, 256 << 20, False),
]


def run(args, workload, distribution, read_share, label, blind, delta_ram, fold_on_read, cache, evict=True):
    rng = random.Random(args.seed)
    scale = args.records / SITTING_RECORDS
    m = Model(args.records, int(cache * scale), blind, int(delta_ram * scale), fold_on_read, evict)
    warm = args.records * args.ops_per_record // 2
    total = args.records * args.ops_per_record
    rows = keys(args.records, total, distribution, rng)
    for i, row in enumerate(rows):
        if i == warm:
            m.reads = m.bytes_written = 0
        if rng.random() < read_share:
            m.read(row)
        else:
            m.update(row)
    measured = total - warm
    # With deltas only on the device, every index entry needs one more 8-byte location; with
    # a RAM buffer the buffer holds it, the entry only a flag bit, and the buffer is a fixed
    # amount like the post-write cache: shown per record at 4M and 10M rows.
    if not blind:
        ram = "-"
    elif not delta_ram:
        ram = "8 / 8"
    else:
        ram = f"{delta_ram / SITTING_RECORDS:.0f} / {delta_ram / 10_000_000:.0f}"
    print(
        f"| {workload} | {label} | {m.reads / measured:.2f} | {m.bytes_written / measured:,.0f} | {ram} |"
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=400_000)
    p.add_argument("--ops-per-record", type=int, default=6, help="half warm-up, half measured")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    print(f"{args.records:,} rows, {args.ops_per_record} operations per row (the first half warms up)\n")
    print(
        "| workload | policy | device reads per op | bytes written per op "
        "| extra RAM per record at 4M / 10M rows (B) |"
    )
    print("|---|---|---:|---:|---:|")
    for workload, distribution, read_share in [
        ("A uniform (`ref`)", "uniform", 0.5),
        ("A zipfian", "zipfian", 0.5),
        ("B zipfian (`b`)", "zipfian", 0.95),
    ]:
        for policy in POLICIES:
            run(args, workload, distribution, read_share, *policy)


if __name__ == "__main__":
    main()
