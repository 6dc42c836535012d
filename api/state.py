"""What the handlers of one app share: the store, settings, metrics, the thread pool, the write queue,
the sample coordinator, the reserve worker, the node key and its stamper, and the per-batch entry counts.

``state.stamper`` (a ``chunkstore.content.NodeStamper``) is the one object that signs stamps for the
node's batches: ``stamper.stamp(batch_id, addresses) -> [Stamp]`` (blocking: run it in the thread
pool with ``state.run``), durable positions, ``NotNodeBatch``/``UnknownBatch``/``BucketFull`` as
typed errors. Content uploads go through ``state.upload_session(batch_id, options)``, which every
chunk of an upload passes (stamp, store in groups, count, observers)."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import web

from chunkstore.content import NodeStamper, UploadObserver, UploadOptions, UploadSession
from chunkstore.reserve import ReserveStore, ReserveWorker
from chunkstore.swarm.bzz import FeedPointer, MimeTable
from chunkstore.swarm.signer import Signer

from .batchshare import BatchEntriesCache
from .config import Config
from .metrics import Metrics
from .putqueue import PutQueue
from .sampling import SampleCoordinator, SampleFn

T = TypeVar("T")


@dataclass(frozen=True)
class FeedTarget:
    """What a feed manifest resolves to, for ``GET /bzz``: the content of the feed's latest update.

    ``reference`` is the manifest (or file) to serve; ``root_chunk`` its root
    chunk when the update carries it instead of the store (Bee's v2 updates
    wrap the root chunk in the SOC); ``headers`` go on the answer
    (``Swarm-Feed-Index``, ``Swarm-Feed-Resolved-Version``).
    """

    reference: bytes
    root_chunk: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


# Looks up a feed's latest update (blocking; None: the feed has no update). Set by the feeds work (issue 13).
FeedResolver = Callable[[FeedPointer], FeedTarget | None]



@dataclass
class AppState:
    store: ReserveStore
    config: Config
    overlay: bytes
    metrics: Metrics
    executor: ThreadPoolExecutor  # short blocking store calls (state.run)
    upload_executor: ThreadPoolExecutor  # one thread per running upload (api.uploads)
    sample_fn: SampleFn
    puts: PutQueue  # group commit of uploads
    sampler: SampleCoordinator  # one /rchash sample at a time
    reserve_worker: ReserveWorker | None  # eviction and expiry, for a writable store
    signer: Signer  # the node key: owns the node's batches
    stamper: NodeStamper  # signs stamps for the node's batches (see the module docstring)
    mime: MimeTable  # extension -> Content-Type for tar entries (Go's table, plus --mime-types)
    # Observers every upload session gets (tags and pins register theirs here).
    upload_observers: list[UploadObserver] = field(default_factory=list)
    feed_resolver: FeedResolver | None = None  # GET /bzz of a feed manifest: 501 until set
    batch_entries: BatchEntriesCache = field(default_factory=BatchEntriesCache)  # /chunkstore/status's counts
    # Held (in the thread pool) around each read-modify-write of a node batch's record or issuer (top-up,
    # dilution, label): two at once would each start from the same old record and one change would be lost.
    batch_changes: threading.Lock = field(default_factory=threading.Lock)
    streams: set[web.WebSocketResponse] = field(default_factory=set)  # open WebSockets: chunk streams, PSS
    # PSS subscribers by topic (api.routes_pss): a message sent here is delivered to them
    pss_topics: dict[bytes, set[web.WebSocketResponse]] = field(default_factory=dict)
    # GSOC subscribers by SOC address (api.listeners): a SOC uploaded here is delivered to them
    gsoc_addresses: dict[bytes, set[web.WebSocketResponse]] = field(default_factory=dict)
    version: str = "0.0.0"
    welcome_message: str = ""  # /welcome-message (api.routes_peers), kept in memory as the reference keeps it
    ready: bool = True
    started_at: float = field(default_factory=time.time)
    inflight: int = 0  # requests inside the handlers now
    uploads_running: int = 0  # uploads holding an upload thread (api.uploads.run_upload)
    draining: bool = False  # set on SIGTERM: answers carry Connection: close
    _idle: asyncio.Event | None = None

    def request_started(self) -> None:
        self.inflight += 1
        if self._idle is not None:
            self._idle.clear()

    def request_finished(self) -> None:
        self.inflight -= 1
        if self.inflight == 0 and self._idle is not None:
            self._idle.set()

    async def wait_idle(self, timeout: float) -> bool:
        """Wait until no request is in a handler; False if ``timeout`` passed first."""
        if self.inflight == 0:
            return True
        if self._idle is None:
            self._idle = asyncio.Event()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def upload_session(self, batch_id: bytes, options: UploadOptions | None = None) -> UploadSession:
        """A session for one upload stamped by ``batch_id`` (blocking: checks the batch; call it in the pool)."""
        return UploadSession(
            self.store, self.stamper, batch_id, options=options or UploadOptions(), observers=list(self.upload_observers)
        )

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking store call in the thread pool, keeping the event loop free."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(fn, *args, **kwargs))


STATE: web.AppKey[AppState] = web.AppKey("chunkstore_state", AppState)


def state_of(request: web.Request) -> AppState:
    return request.app[STATE]
