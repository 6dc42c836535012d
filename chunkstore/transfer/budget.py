"""How an import divides its memory budget, sized once before the first byte is read.

``--memory-budget`` bounds the importing process's resident memory. What the
interpreter and its libraries already hold (measured at the start) and a
fixed slack for small objects come off the top; the rest is split between

- the **ring** of frames in flight (compressed input and decoded output of
  every frame the workers have, together; chunkstore/transfer/bufferpool.py),
- the **run buffer** (arena and index, chunkstore/transfer/runs.py), which stays
  through the publish phase as the last, in-memory run,
- the **publish phase**: read windows over the spilled runs and the dirty
  pages of one LMDB commit. The ring is gone by then and this reuses its share.

Worker processes are separate: each holds its interpreter, the numba
kernels and one frame's scratch rows, and maps the ring (shared, not copied).
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass

from .errors import BudgetTooSmall
from .runs import INDEX, ROW_DATA, SLOT
from .snapformat import RECORD_FIXED, compress_bound
from .tarformat import MAX_RECORD

MiB = 1 << 20
SLACK = 32 * MiB  # Python objects, zstd contexts, LMDB's own allocations, the progress bar
ROW_COST = 2 * INDEX.itemsize + 2 * SLOT.itemsize + 16  # index, sorted copy, slot rows and their sort, orders
WINDOW_ROW = INDEX.itemsize + ROW_DATA  # a publish cursor's row plus its data
TAR_TASK_BYTES = 1 * MiB  # tar entries per validation task


def rss_bytes() -> int:
    """Resident set size of this process now."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):  # pragma: no cover - non-Linux
        return peak_rss_bytes()


def peak_rss_bytes() -> int:
    """Peak resident set size of this process since it started its program.

    VmHWM, not getrusage: a child made by fork and exec inherits in ru_maxrss
    the size of the parent it was forked from.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):  # pragma: no cover - non-Linux
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@dataclass(frozen=True)
class Sizes:
    budget: int
    baseline: int
    ring: int
    arena: int
    rows: int
    phase2: int

    def commit_bytes(self, shards: int) -> int:
        """Chunk data per publish commit: LMDB keeps every environment's largest dirty set for reuse."""
        return max(2 * MiB, self.phase2 // 2 // max(1, shards))

    def window(self, runs: int, run_buffer_free: bool = False) -> int:
        """Rows per publish cursor when ``runs`` runs are merged.

        ``run_buffer_free``: every run is on disk and the run buffer was let
        go of, so its memory goes to the cursors too.
        """
        pool = self.phase2 * 2 // 5
        if run_buffer_free:
            pool += (self.arena + self.rows * ROW_COST) * 4 // 5
        share = pool // max(1, runs)
        return int(min(4096, max(16, share // WINDOW_ROW)))


@dataclass(frozen=True)
class FrameShape:
    """The largest unit of work the input can hand a worker."""

    ring_bytes: int  # ring space it takes while in flight (compressed input and decoded output)
    data_bytes: int  # decoded bytes it can add to the run buffer
    records: int  # records it can hold


def snapshot_shape(frame_limit: int) -> FrameShape:
    return FrameShape(frame_limit + compress_bound(frame_limit), frame_limit, frame_limit // RECORD_FIXED + 1)


TAR_TASK_ENTRIES = 256
TAR_SHAPE = FrameShape(TAR_TASK_BYTES + MAX_RECORD, TAR_TASK_BYTES + MAX_RECORD, TAR_TASK_ENTRIES)


def plan_sizes(budget: int, baseline: int, workers: int, shape: FrameShape) -> Sizes:
    """Split ``budget`` bytes; ``BudgetTooSmall`` if even the minimum does not fit."""
    in_flight = 2 * max(1, workers) + 1  # two per worker keeps each busy while one is consumed
    ring_min = in_flight * shape.ring_bytes
    run_min = 2 * shape.data_bytes + 2 * shape.records * ROW_COST
    avail = budget - baseline - SLACK
    phase2_min = max(ring_min, 16 * MiB)
    if avail < phase2_min + run_min:
        need = (baseline + SLACK + phase2_min + run_min + MiB - 1) // MiB
        raise BudgetTooSmall(
            f"a memory budget of {budget // MiB} MiB is too small: this process already uses "
            f"{baseline // MiB} MiB, and frames of up to {shape.ring_bytes // 1024} KiB with {workers} "
            f"worker(s) need about {need} MiB in all"
        )
    phase2 = max(phase2_min, avail // 4)
    # The publish's share is idle while validating, and the ring is gone before publishing: the ring
    # takes all of it, room for the verdicts that wait there while a full run buffer is spilled.
    ring = phase2
    run_total = avail - phase2
    arena = run_total * 4 // 5
    rows = max(2 * shape.records, (run_total - arena) // ROW_COST)
    return Sizes(budget=budget, baseline=baseline, ring=ring, arena=arena, rows=rows, phase2=phase2)
