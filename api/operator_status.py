"""What the status page shows that no reference-node endpoint gives: the daemon-specific part of
``GET /chunkstore/status``.

- ``reserve``: ``capacity`` (entries, with doubling) and ``bins`` (stamp entries per proximity
  bin 0..31 to the overlay), from the reserve's counters;
- ``disk``: ``dataDirBytes`` allocated by the data dir's files, ``freeBytes`` and ``sizeBytes``
  of its file system;
- ``samples``: ``windowSeconds``, ``running``, ``fullReserveEstimateSeconds`` (a full 2^22-chunk
  neighbourhood at the last successful run's rate, null before one) and ``recent``: the last
  runs, oldest first, each ``{finishedAt, durationSeconds, ok, chunksIterated, chunksPerSecond}``;
- ``batches``: ``{countedAt, entries: {batch id hex: stamp entries held}}`` (counted, cached up
  to a minute: see ``api.batchshare``).

Sizes, radius, depth and batches themselves come from ``/status``, ``/reservestate`` and
``/batches``, which the page reads too: one source for each fact.
"""

from __future__ import annotations

from typing import Any

from .batchshare import BatchEntriesCache
from .diskuse import disk_use
from .state import AppState

CACHE_KEY = "batch_entries"


def operator_status(st: AppState, sampling: bool) -> dict[str, Any]:
    """Blocking (reads the store and the disk): run it in the thread pool."""
    store = st.store
    reserve = getattr(store, "reserve", None)
    if reserve is not None:
        status = reserve.status()
        capacity, bins = status.capacity, list(status.bins)
    else:  # a store without a reserve view: no bins to show
        capacity, bins = st.config.reserve_capacity << st.config.reserve_capacity_doubling, None
    cache = st.extras.setdefault(CACHE_KEY, BatchEntriesCache())
    return {
        "reserve": {"capacity": capacity, "bins": bins},
        "disk": disk_use(getattr(store, "path", st.config.data_dir)).as_json(),
        "samples": {
            "windowSeconds": st.config.sampling_window,
            "running": sampling,
            "fullReserveEstimateSeconds": st.metrics.full_reserve_estimate,
            "recent": [run.as_json() for run in st.metrics.recent_samples.runs()],
        },
        "batches": cache.get(store).as_json(),
    }
