"""The aiohttp application: routes, middlewares, shared state and its clean-up.

Every endpoint is mounted at its reference-node path and, like the reference,
again under ``/v1`` (``/health``, ``/readiness``, ``/metrics`` and ``/`` only
at the root).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from aiohttp import web

import chunkstore
from chunkstore.content import NodeStamper
from chunkstore.reserve import ReserveStore, ReserveWorker
from chunkstore.store.store import PutResult
from chunkstore.swarm.bmt import backend as hashing
from chunkstore.swarm.bzz import MimeTable
from chunkstore.swarm.signer import Signer
from sampler import SampleResult, reserve_sample_async

from . import (
    routes_act,
    routes_batches,
    routes_bytes,
    routes_bzz,
    routes_chainstate,
    routes_chunks,
    routes_chunkstream,
    routes_daemon,
    routes_debug,
    routes_envelope,
    routes_feeds,
    routes_node,
    routes_peers,
    routes_pins,
    routes_pss,
    routes_rchash,
    routes_stamps,
    routes_status,
    routes_stewardship,
    routes_tags,
    routes_ui,
)
from .config import Config
from .feedread import feed_target
from .metrics import Metrics
from .middleware import (
    access_middleware,
    clean_path_middleware,
    cors_middleware,
    cors_on_prepare,
    error_middleware,
    header_middleware,
)
from .putqueue import PutQueue
from .sampling import SampleCoordinator, SampleFn, sample_min_balance
from .state import STATE, AppState

log = logging.getLogger(__name__)


class UploadMetrics:
    """An upload observer: counts what each durable group stored, by what keeps it (``/metrics``)."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def stored(self, session: object, addresses: Sequence[bytes], results: Sequence[PutResult]) -> None:
        self.metrics.count_uploads(results)

    def finished(self, session: object, reference: bytes) -> None:
        return None

    def aborted(self, session: object, error: BaseException | None) -> None:
        return None


def default_sample_fn(store: ReserveStore, config: Config) -> SampleFn:
    """The sampler over ``store``: worker processes scan the shards, the loop stays free."""

    async def run(anchor: bytes, depth: int, consensus_time: int) -> SampleResult:
        min_balance = sample_min_balance(store, config.min_batch_balance)  # per sample, as the agent does
        return await reserve_sample_async(
            store, anchor, depth, consensus_time, min_batch_balance=min_balance, workers=config.workers
        )

    return run


def make_app(
    store: ReserveStore,
    config: Config,
    *,
    overlay: bytes | None = None,
    sample_fn: SampleFn | None = None,
    close_store: bool = False,
    ready: bool = True,
    signer: Signer | None = None,
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
    # Uploads hold a thread for as long as their body arrives: a pool of their own, so that they never
    # starve the short store calls every other request makes, and one thread per upload (up to
    # --max-uploads, then a 503), so that clients whose bodies stall hold up only themselves.
    upload_executor = ThreadPoolExecutor(max_workers=config.max_uploads, thread_name_prefix="upload")
    reserve = store.reserve
    if overlay is None:
        overlay = reserve.overlay
    elif not store.readonly and reserve.overlay != overlay:
        reserve.set_overlay(overlay)
    sample_fn = sample_fn or default_sample_fn(store, config)
    worker = None if store.readonly else ReserveWorker(reserve)
    if signer is None:
        signer = Signer.generate()
    mime = MimeTable()
    if config.mime_types is not None:
        mime.load_mime_types(config.mime_types)
    state = AppState(
        store=store,
        config=config,
        overlay=overlay,
        metrics=metrics,
        executor=executor,
        upload_executor=upload_executor,
        sample_fn=sample_fn,
        puts=PutQueue(store, executor),
        sampler=SampleCoordinator(sample_fn, metrics, config.sample_wait),
        reserve_worker=worker,
        signer=signer,
        stamper=NodeStamper(store, signer),
        mime=mime,
        feed_resolver=functools.partial(feed_target, store),
        version=chunkstore.__version__,
        ready=ready,
    )
    metrics.attach_store(store.stats, lambda: len(store.batches.list()), reserve_size=False)
    metrics.attach_reserve(reserve)
    metrics.attach_keeping(store)
    state.upload_observers.append(UploadMetrics(metrics))
    metrics.attach_hash_backend(lambda: hashing.backend_info().as_dict())
    metrics.attach_disk(store.path)
    # the scrape runs in the thread pool, where the probe's statvfs (only while refused) may block
    metrics.attach_readiness(lambda: routes_status.not_ready_reason(state) is None)

    # Bodies are stored as sent, Content-Encoding or not, as the reference's Go server leaves them: aiohttp's
    # decoding gave a cut-off gzip stream's prefix a reference, and a body that did not decode a 500.
    middlewares = [access_middleware, cors_middleware, clean_path_middleware, error_middleware, header_middleware]
    app = web.Application(middlewares=middlewares,
                          client_max_size=config.max_body, handler_args={"auto_decompress": False})
    app[STATE] = state
    app.on_response_prepare.append(cors_on_prepare)
    routes_status.add_routes(app)
    routes_chunkstream.add_routes(app)  # before /chunks/{address}, which would take "stream" for an address
    routes_chunks.add_routes(app)
    routes_feeds.add_routes(app)
    routes_batches.add_routes(app)
    routes_rchash.add_routes(app)
    routes_chainstate.add_routes(app)
    routes_daemon.add_routes(app)
    routes_debug.add_routes(app)
    routes_node.add_routes(app)
    routes_peers.add_routes(app)
    routes_stamps.add_routes(app)
    routes_envelope.add_routes(app)
    routes_bytes.add_routes(app)
    routes_bzz.add_routes(app)
    routes_tags.add_routes(app)
    routes_pins.add_routes(app)
    routes_stewardship.add_routes(app)
    routes_act.add_routes(app)
    routes_pss.add_routes(app)
    routes_ui.add_routes(app)

    async def on_startup(app: web.Application) -> None:
        if worker is not None:
            worker.start()

    async def on_shutdown(app: web.Application) -> None:
        await routes_chunkstream.close_streams(state)

    async def on_cleanup(app: web.Application) -> None:
        coordinator = state.sampler
        if coordinator.busy:
            log.info("cancelling the running reserve sample; its current phase finishes before the store closes")
        await coordinator.close()
        if worker is not None:  # its current step finishes; what is left resumes at the next start
            await asyncio.get_running_loop().run_in_executor(None, worker.stop)
        await asyncio.get_running_loop().run_in_executor(None, upload_executor.shutdown, True)
        await asyncio.get_running_loop().run_in_executor(None, executor.shutdown, True)
        if close_store:
            store.close()
            log.info("store closed", extra={"fields": {"data_dir": str(config.data_dir)}})

    app.on_startup.append(on_startup)
    app.on_shutdown.append(on_shutdown)
    app.on_cleanup.append(on_cleanup)
    return app
