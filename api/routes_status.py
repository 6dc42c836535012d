"""Node state: ``/``, ``/health``, ``/readiness``, ``/status``, ``/status/neighborhoods``, ``/reservestate``, ``/metrics``.

Shapes and JSON types are the reference node's (``pkg/api/status.go``,
``health.go``, ``readiness.go``, ``postage.go``), which the JavaScript client
checks field by field. This daemon stores and samples chunks but joins no
network and follows no chain, so several fields have fixed, honest values:

``/status``
  - ``overlay``: the configured overlay, or the one generated on first start
    and kept in the data dir;
  - ``proximity``: 256, as the reference node reports for itself;
  - ``beeMode``: ``"full"`` (the node keeps a reserve and can sample it);
  - ``reserveSize``: stamp entries in the reserve (one per chunk and stamp,
    as the reference counts; equal to the chunk count when each chunk has
    one stamp);
  - ``reserveSizeWithinRadius``: those at proximity >= the storage radius to
    the overlay (from per-bin counters; no scan);
  - ``pullsyncRate``: 0 (no syncing);
  - ``storageRadius``: the reserve's radius (0 on a fresh store; raised by
    capacity eviction or ``--minimum-storage-radius``);
  - ``connectedPeers``, ``neighborhoodSize``: 0 (no peers);
  - ``batchCommitment``: sum of ``2^depth`` over registered batches (the reference's rule);
  - ``isReachable``: false (no p2p listener);
  - ``lastSyncedBlock``: the block of the chain state set by the operator (0 before);
  - ``committedDepth``: storage radius + capacity doubling;
  - ``isWarmingUp``: false.

``/status/neighborhoods``: the ``2^doubling`` neighbourhoods the reserve
answers for at the committed depth, each with its bit string, the reserve
entries within it and its proximity to the overlay (see
``chunkstore.reserve.neighborhoods``; counted from the per-bin counters).

``/reservestate``: ``radius`` is the batch store's radius, the reference's
``ceil(log2(commitment / capacity))`` (0 while the commitment fits);
``storageRadius`` the reserve's; ``commitment`` as ``batchCommitment``
above; ``reserveCapacityDoubling`` the configured doubling.

``/health`` always answers ``"ok"`` while the process serves; ``/readiness``
answers ``"ready"`` (200) once the store is open and any ``--demo`` fill is
done, ``"notReady"`` (400, as the reference does) before, and also while the
store refuses writes (a full disk or LMDB map, an I/O error: the last write
failed and none has succeeded since, or the full disk has not gained room
yet); then ``"reason"`` says why. Reads and ``/rchash`` go on meanwhile.
``version`` is this package's version; ``apiVersion`` the reference API
version whose endpoints are served.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from chunkstore.reserve import ReserveStore
from chunkstore.reserve.neighborhoods import neighborhoods
from chunkstore.swarm.bmt import backend as hashing
from chunkstore.swarm.constants import UINT8_MAX

from .errors import json_response
from .metrics import CONTENT_TYPE
from .state import AppState, state_of
from .version import API_VERSION

WELCOME = "chunkstore: Swarm chunk store (a subset of the Bee API)\n"


async def root(request: web.Request) -> web.Response:
    return web.Response(text=WELCOME, content_type="text/plain")


async def health(request: web.Request) -> web.Response:
    st = state_of(request)
    return json_response({"status": "ok", "version": st.version, "apiVersion": API_VERSION})


def not_ready_reason(st: AppState) -> str | None:
    """Why ``/readiness`` says notReady now (None: ready); ``chunkstore_ready`` reads the same. Blocking: the
    write probe's statvfs runs while writes are refused."""
    if not st.ready:
        return "starting up (a --demo fill is running)"
    if not hashing.settled():
        return "starting up (the hashing kernels are loading; the slower reference serves meanwhile)"
    refusal = st.store.write_refusal()
    if refusal is not None:
        return f"writes refused ({refusal.reason}): {refusal.message}"
    return None


async def readiness(request: web.Request) -> web.Response:
    st = state_of(request)
    body = {"status": "ready", "version": st.version, "apiVersion": API_VERSION}
    reason = await st.run(not_ready_reason, st)  # off the loop: the probe may statvfs
    if reason is not None:
        body["status"] = "notReady"
        body["reason"] = reason
        return json_response(body, status=400)
    return json_response(body)


@dataclass(frozen=True)
class ReserveNumbers:
    size: int
    size_within_radius: int
    radius: int
    doubling: int
    capacity: int
    commitment: int
    last_block: int

    @property
    def batchstore_radius(self) -> int:
        """The reference batch store's radius: the least r with commitment <= capacity * 2^r."""
        r = 0
        while r < UINT8_MAX and self.capacity << r < self.commitment:  # the reference keeps r in a uint8
            r += 1
        return r


def reserve_numbers(store: ReserveStore) -> ReserveNumbers:
    """Everything ``/status`` and ``/reservestate`` show, read without scanning the chunks."""
    commitment = sum(1 << int(b.depth) for b in store.batches.list())
    reserve = store.reserve
    status = reserve.status()
    chain = reserve.chainstate
    return ReserveNumbers(
        size=status.size,
        size_within_radius=status.size_within_radius,
        radius=status.radius,
        doubling=status.doubling,
        capacity=status.capacity,
        commitment=commitment,
        last_block=0 if chain is None else chain.block,
    )


async def status(request: web.Request) -> web.Response:
    st = state_of(request)
    n = await st.run(reserve_numbers, st.store)
    return json_response(
        {
            "overlay": st.overlay.hex(),
            "proximity": 256,
            "beeMode": "full",
            "reserveSize": n.size,
            "reserveSizeWithinRadius": n.size_within_radius,
            "pullsyncRate": 0,
            "storageRadius": n.radius,
            "connectedPeers": 0,
            "neighborhoodSize": 0,
            "batchCommitment": n.commitment,
            "isReachable": False,
            "lastSyncedBlock": n.last_block,
            "committedDepth": n.radius + n.doubling,
            "isWarmingUp": False,
        }
    )


async def reserve_state(request: web.Request) -> web.Response:
    st = state_of(request)
    n = await st.run(reserve_numbers, st.store)
    return json_response(
        {
            "radius": n.batchstore_radius,
            "storageRadius": n.radius,
            "commitment": n.commitment,
            "reserveCapacityDoubling": n.doubling,
        }
    )


async def status_neighborhoods(request: web.Request) -> web.Response:
    st = state_of(request)
    status = await st.run(st.store.reserve.status)
    found = neighborhoods(status.overlay, status.radius, status.doubling, status.bins)
    return json_response({"neighborhoods": [n.as_json() for n in found]})


async def metrics(request: web.Request) -> web.Response:
    st = state_of(request)
    body = await st.run(st.metrics.render)
    resp = web.Response(body=body)
    resp.headers["Content-Type"] = CONTENT_TYPE
    return resp


ROBOTS = "User-agent: *\nDisallow: /\n"  # the reference's /robots.txt: a node's content is not for crawlers


async def robots(request: web.Request) -> web.Response:
    return web.Response(text=ROBOTS, content_type="text/plain")


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    # Plain handlers on the reference's router (no jsonhttp.MethodHandler): every method gets their answer.
    app.router.add_route("*", "/", root)
    app.router.add_route("*", "/robots.txt", robots)
    app.router.add_route("*", "/metrics", metrics)
    app.router.add_route("*", "/health", health)
    app.router.add_route("*", "/readiness", readiness)
    for p in prefixes:
        app.router.add_get(p + "/status", status, allow_head=False)
        app.router.add_get(p + "/status/neighborhoods", status_neighborhoods, allow_head=False)
        app.router.add_get(p + "/reservestate", reserve_state, allow_head=False)
