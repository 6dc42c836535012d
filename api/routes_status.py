"""Node state: ``/``, ``/health``, ``/readiness``, ``/status``, ``/reservestate``, ``/metrics``.

Shapes and JSON types are the reference node's (``pkg/api/status.go``,
``health.go``, ``readiness.go``, ``postage.go``), which the JavaScript client
checks field by field. This daemon stores and samples chunks but joins no
network and follows no chain, so several fields have fixed, honest values:

``/status``
  - ``overlay``: the configured overlay, or the one generated on first start
    and kept in the data dir;
  - ``proximity``: 256, as the reference node reports for itself;
  - ``beeMode``: ``"full"`` (the node keeps a reserve and can sample it);
  - ``reserveSize``: chunks in the store;
  - ``reserveSizeWithinRadius``: the same number, since the radius is 0;
  - ``pullsyncRate``: 0 (no syncing);
  - ``storageRadius``: 0 (no network; the whole address space is ours);
  - ``connectedPeers``, ``neighborhoodSize``: 0 (no peers);
  - ``batchCommitment``: sum of ``2^depth`` over registered batches (the reference's rule);
  - ``isReachable``: false (no p2p listener);
  - ``lastSyncedBlock``: 0 (no chain);
  - ``committedDepth``: 0 (radius 0, no capacity doubling);
  - ``isWarmingUp``: false.

``/reservestate``: ``radius`` 0, ``storageRadius`` 0, ``commitment`` as
``batchCommitment`` above, ``reserveCapacityDoubling`` 0.

``/health`` always answers ``"ok"`` while the process serves; ``/readiness``
answers ``"ready"`` (200) once the store is open and any ``--demo`` fill is
done, ``"notReady"`` (400, as the reference does) before. ``version`` is this
package's version; ``apiVersion`` the reference API version whose endpoints are
served.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .errors import json_response
from .metrics import CONTENT_TYPE
from .state import API_VERSION, state_of

WELCOME = "chunkstore: Swarm chunk store (a subset of the Bee API)\n"


async def root(request: web.Request) -> web.Response:
    return web.Response(text=WELCOME, content_type="text/plain")


async def health(request: web.Request) -> web.Response:
    st = state_of(request)
    return json_response({"status": "ok", "version": st.version, "apiVersion": API_VERSION})


async def readiness(request: web.Request) -> web.Response:
    st = state_of(request)
    if st.ready:
        return json_response({"status": "ready", "version": st.version, "apiVersion": API_VERSION})
    return json_response({"status": "notReady", "version": st.version, "apiVersion": API_VERSION}, status=400)


def _reserve_numbers(store: Any) -> tuple[int, int]:
    """(chunks in the store, batch commitment)."""
    stats = store.stats()
    commitment = sum(1 << int(b.depth) for b in store.batches.list())
    return int(stats.get("chunks", 0)), commitment


async def status(request: web.Request) -> web.Response:
    st = state_of(request)
    chunks, commitment = await st.run(_reserve_numbers, st.store)
    return json_response(
        {
            "overlay": st.overlay.hex(),
            "proximity": 256,
            "beeMode": "full",
            "reserveSize": chunks,
            "reserveSizeWithinRadius": chunks,
            "pullsyncRate": 0,
            "storageRadius": 0,
            "connectedPeers": 0,
            "neighborhoodSize": 0,
            "batchCommitment": commitment,
            "isReachable": False,
            "lastSyncedBlock": 0,
            "committedDepth": 0,
            "isWarmingUp": False,
        }
    )


async def reserve_state(request: web.Request) -> web.Response:
    st = state_of(request)
    _, commitment = await st.run(_reserve_numbers, st.store)
    return json_response({"radius": 0, "storageRadius": 0, "commitment": commitment, "reserveCapacityDoubling": 0})


async def metrics(request: web.Request) -> web.Response:
    st = state_of(request)
    body = await st.run(st.metrics.render)
    resp = web.Response(body=body)
    resp.headers["Content-Type"] = CONTENT_TYPE
    return resp


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    app.router.add_get("/", root)
    app.router.add_get("/metrics", metrics, allow_head=False)
    app.router.add_get("/health", health)
    app.router.add_get("/readiness", readiness)
    for p in prefixes:
        app.router.add_get(p + "/status", status, allow_head=False)
        app.router.add_get(p + "/reservestate", reserve_state, allow_head=False)
