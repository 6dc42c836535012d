"""The aiohttp application: routes, middlewares, shared state and its clean-up.

Every endpoint is mounted at its reference-node path and, like the reference,
again under ``/v1`` (``/health``, ``/readiness``, ``/metrics`` and ``/`` only
at the root).
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aiohttp import web

import chunkstore
from chunkstore import hashing

from . import routes_batches, routes_chainstate, routes_chunks, routes_daemon, routes_rchash, routes_status, routes_ui
from .config import Config
from .errors import Handler, error_middleware
from .metrics import Metrics
from .params import check_headers, header_ok
from .putqueue import PutQueue
from .routes_rchash import SampleCoordinator
from .state import STATE, AppState, SampleFn
from .storeapi import ReserveWorker, reserve_sample

log = logging.getLogger("chunkstore.api")
access_log = logging.getLogger("chunkstore.access")

# Probes and scrapes are logged at debug level only, as the reference node suppresses them.
QUIET_PATHS = frozenset({"/health", "/readiness", "/metrics"})


def _route_name(request: web.Request) -> str:
    info = request.match_info
    route = getattr(info, "route", None)
    resource = getattr(route, "resource", None)
    if resource is None:
        return "unmatched"
    canonical = resource.canonical
    return canonical.removeprefix("/v1") or "/"


@web.middleware
async def access_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Time every request into the metrics and write one structured access-log line."""
    st = request.app[STATE]
    t0 = time.perf_counter()
    status = 500
    st.request_started()
    try:
        resp = await handler(request)
        status = resp.status
        if st.draining:
            resp.force_close()  # no further requests on this connection while shutting down
        return resp
    except web.HTTPException as exc:
        status = exc.status
        raise
    finally:
        st.request_finished()
        elapsed = time.perf_counter() - t0
        route = _route_name(request)
        st.metrics.observe_http(request.method, route, status, elapsed)
        level = logging.DEBUG if request.path in QUIET_PATHS else logging.INFO
        if access_log.isEnabledFor(level):
            access_log.log(
                level,
                "api access",
                extra={
                    "fields": {
                        "method": request.method,
                        "path": request.path,
                        "status": status,
                        "duration_ms": round(elapsed * 1000, 3),
                        "remote": request.remote,
                    }
                },
            )


CORS_ALLOWED_HEADERS = ", ".join(
    [
        "User-Agent", "Accept", "X-Requested-With", "Access-Control-Request-Headers", "Access-Control-Request-Method",
        "Accept-Ranges", "Content-Encoding", "Authorization", "Accept-Encoding", "Content-Type", "Content-Disposition",
        "Range", "Origin", "Swarm-Tag", "Swarm-Pin", "Swarm-Encrypt", "Swarm-Index-Document", "Swarm-Error-Document",
        "Swarm-Collection", "Swarm-Postage-Batch-Id", "Swarm-Postage-Stamp", "Swarm-Deferred-Upload",
        "Swarm-Redundancy-Level", "Swarm-Redundancy-Strategy", "Swarm-Redundancy-Fallback-Mode",
        "Swarm-Chunk-Retrieval-Timeout", "Swarm-Lookahead-Buffer-Size", "Swarm-Feed-Index", "Swarm-Feed-Index-Next",
        "Swarm-Soc-Signature", "Swarm-Only-Root-Chunk", "Gas-Price", "Gas-Limit", "Immutable", "Swarm-Act",
        "Swarm-Act-Timestamp", "Swarm-Act-Publisher", "Swarm-Act-History-Address",
    ]
)


def origin_allowed(request: web.Request, allowed: tuple[str, ...]) -> bool:
    """The reference node's rule: the request's own host, a listed origin, or ``*``."""
    origin = request.headers.get("Origin")
    if origin is None:
        return True
    own = f"{request.scheme}://{request.host}"
    return any(v == "*" or v.lower() == origin.lower() for v in (*allowed, own))


@web.middleware
async def cors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """CORS headers for allowed origins; ``OPTIONS`` answered 204 with ``Allow`` as the reference does."""
    resp = await handler(request)
    if request.method == "OPTIONS" and resp.status == 405:
        resp = web.Response(status=204, headers={"Allow": resp.headers.get("Allow", "")})
    origin = request.headers.get("Origin")
    # an origin with hostile bytes was answered 400 by header_middleware: never echo it back
    if origin and header_ok(origin) and origin_allowed(request, request.app[STATE].config.cors_allowed_origins):
        resp.headers["Access-Control-Allow-Credentials"] = "true"
        resp.headers["Access-Control-Allow-Origin"] = origin
        resp.headers["Access-Control-Allow-Headers"] = CORS_ALLOWED_HEADERS
        resp.headers["Access-Control-Allow-Methods"] = "GET, HEAD, OPTIONS, POST, PUT, DELETE"
        resp.headers["Access-Control-Max-Age"] = "3600"
    return resp


@web.middleware
async def header_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Hostile bytes in a header the daemon reads: a 400 naming it, before any handler runs."""
    check_headers(request.headers)
    return await handler(request)


def default_sample_fn(store: Any, config: Config) -> SampleFn:
    """The sampler over ``store``: worker processes scan the shards, the loop stays free."""

    async def run(anchor: bytes, depth: int, consensus_time: int) -> Any:
        return await reserve_sample(
            store, anchor, depth, consensus_time, min_batch_balance=config.min_batch_balance, workers=config.workers
        )

    return run


def make_app(
    store: Any,
    config: Config,
    *,
    overlay: bytes | None = None,
    sample_fn: SampleFn | None = None,
    close_store: bool = False,
    ready: bool = True,
) -> web.Application:
    """Build the daemon's application over an open store.

    ``sample_fn(anchor, depth, consensus_time_ns)`` defaults to the sampler's
    ``reserve_sample_async`` over ``store``; tests pass a fake. With
    ``close_store`` the store is closed on clean-up, after in-flight requests
    and thread-pool calls have finished.

    ``overlay`` defaults to the store's; one given that differs from it
    becomes the store's (its reserve counts proximity to it). A writable
    store's reserve worker (eviction, expiry) runs from start-up to clean-up.
    """
    metrics = Metrics(config.sampling_window)
    executor = ThreadPoolExecutor(max_workers=config.threads, thread_name_prefix="store")
    reserve = getattr(store, "reserve", None)
    writable = reserve is not None and not getattr(store, "readonly", False)
    if overlay is None:
        overlay = reserve.overlay if reserve is not None else bytes(32)
    elif writable and reserve.overlay != overlay:
        reserve.set_overlay(overlay)
    state = AppState(
        store=store,
        config=config,
        overlay=overlay,
        metrics=metrics,
        executor=executor,
        sample_fn=sample_fn or default_sample_fn(store, config),
        version=chunkstore.__version__,
        ready=ready,
    )
    state.extras["sampler"] = SampleCoordinator(state.sample_fn, metrics, config.sample_wait)
    state.extras["puts"] = PutQueue(store, executor)
    metrics.attach_store(store.stats, lambda: len(store.batches.list()), reserve_size=reserve is None)
    if reserve is not None:
        metrics.attach_reserve(reserve)
    metrics.attach_hash_backend(lambda: hashing.backend_info().as_dict())
    metrics.attach_disk(getattr(store, "path", config.data_dir))
    # the scrape runs in the thread pool, where the probe's statvfs (only while refused) may block
    metrics.attach_readiness(lambda: state.ready and routes_status.write_refusal(store) is None)
    worker = ReserveWorker(reserve) if writable else None
    state.extras["reserve_worker"] = worker

    app = web.Application(middlewares=[access_middleware, cors_middleware, error_middleware, header_middleware], client_max_size=config.max_body)
    app[STATE] = state
    routes_status.add_routes(app)
    routes_chunks.add_routes(app)
    routes_batches.add_routes(app)
    routes_rchash.add_routes(app)
    routes_chainstate.add_routes(app)
    routes_daemon.add_routes(app)
    routes_ui.add_routes(app)

    async def on_startup(app: web.Application) -> None:
        if worker is not None:
            worker.start()

    async def on_cleanup(app: web.Application) -> None:
        coordinator: SampleCoordinator = state.extras["sampler"]
        if coordinator.busy:
            log.info("cancelling the running reserve sample; its current phase finishes before the store closes")
        await coordinator.close()
        if worker is not None:  # its current step finishes; what is left resumes at the next start
            await asyncio.get_running_loop().run_in_executor(None, worker.stop)
        await asyncio.get_running_loop().run_in_executor(None, executor.shutdown, True)
        if close_store:
            store.close()
            log.info("store closed", extra={"fields": {"data_dir": str(config.data_dir)}})

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app
