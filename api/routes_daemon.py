"""``GET /chunkstore/status``: this daemon's own state, beyond what Bee's endpoints can carry.

Not a Bee endpoint, so the JavaScript client's strict response shapes are
untouched. The body is one JSON object built by :func:`daemon_status`;
fields are added there (the status page, ``/ui/``, reads it):

- ``hashBackend``: ``{"name": "numba"|"pysha3", "accelerated": bool,
  "reason": str|null}``. ``reason`` says why the ~9x slower pysha3 reference
  is in use: forced by ``CHUNKSTORE_HASH_BACKEND``, the accelerated backend
  failing at start-up, or a wrong answer caught while sampling.
- ``reserve``: ``capacity`` (entries, with doubling) and ``bins`` (stamp
  entries per proximity bin 0..31 to the overlay), from the reserve's counters.
- ``disk``: ``dataDirBytes`` allocated by the data dir's files, ``freeBytes``
  and ``sizeBytes`` of its file system.
- ``samples``: ``windowSeconds``, ``running``, ``fullReserveEstimateSeconds``
  (the last successful run's ``fullReserveEstimate.estimatedSeconds`` as
  ``?verbose=true`` gives it; null before one) and ``recent``: the last runs,
  oldest first, each ``{finishedAt, durationSeconds, ok, chunksIterated,
  chunksPerSecond}``.
- ``cache``: ``{size, capacity, evicted}``: chunks the cache keeps (uploads
  outside the storage radius), its ``--cache-capacity`` and the entries it
  dropped since start (least recently used first).
- ``pins``: ``{count, chunks}``: pinned references and their chunks (a chunk
  in two pins counts twice).
- ``batches``: ``{countedAt, entries: {batch id hex: stamp entries held}}``
  (counted over the index, cached up to a minute: see ``api.batchshare``).

Sizes, radius, depth and the batches themselves are in ``/status``,
``/reservestate`` and ``/batches``, which the page reads too: one source for
each fact.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from chunkstore.swarm.bmt import backend as hashing

from .diskuse import disk_use
from .errors import json_response
from .state import AppState, state_of

log = logging.getLogger(__name__)


def daemon_status(state: AppState) -> dict[str, Any]:
    """The ``/chunkstore/status`` object (a plain dict; extend it here). Blocking: reads the store and the disk."""
    store = state.store
    status = store.reserve.status()
    keeping = store.keeping()
    return {
        "hashBackend": hashing.backend_info().as_dict(),
        "reserve": {"capacity": status.capacity, "bins": list(status.bins)},
        "disk": disk_use(store.path).as_json(),
        "samples": {
            "windowSeconds": state.config.sampling_window,
            "running": state.sampler.busy,
            "fullReserveEstimateSeconds": state.metrics.full_reserve_estimate,
            "recent": [run.as_json() for run in state.metrics.recent_samples.runs()],
        },
        "cache": {"size": keeping.cache_size, "capacity": keeping.cache_capacity, "evicted": keeping.cache_evicted},
        "pins": {"count": keeping.pins, "chunks": keeping.pinned_chunks},
        "batches": state.batch_entries.get(store).as_json(),
    }


def log_hash_backend() -> None:
    """Say at start-up which hashing backend serves, loudly when it is the slow reference."""
    info = hashing.backend_info()
    fields = {"fields": {"hash_backend": info.name, "reason": info.reason}}
    if not hashing.settled():  # the backend logs the outcome when the load ends
        log.info("hashing backend: the numba kernels load in the background, the pysha3 reference serves until "
                 "then", extra=fields)
    elif info.accelerated:
        log.info("hashing backend", extra=fields)
    else:
        log.warning("hashing backend is the pysha3 reference, about 9x slower than numba", extra=fields)


async def chunkstore_status(request: web.Request) -> web.Response:
    st = state_of(request)
    return json_response(await st.run(daemon_status, st))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/chunkstore/status", chunkstore_status, allow_head=False)
