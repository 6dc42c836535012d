"""What the handlers of one app share: the store, settings, metrics, the thread pool, the write queue,
the sample coordinator, the reserve worker and the per-batch entry counts."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import web

from chunkstore.reserve import ReserveStore, ReserveWorker

from .batchshare import BatchEntriesCache
from .config import Config
from .metrics import Metrics
from .putqueue import PutQueue
from .sampling import SampleCoordinator, SampleFn

T = TypeVar("T")

API_VERSION = "8.1.0"  # the reference node's OpenAPI version whose endpoints this daemon serves


@dataclass
class AppState:
    store: ReserveStore
    config: Config
    overlay: bytes
    metrics: Metrics
    executor: ThreadPoolExecutor
    sample_fn: SampleFn
    puts: PutQueue  # group commit of uploads
    sampler: SampleCoordinator  # one /rchash sample at a time
    reserve_worker: ReserveWorker | None  # eviction and expiry, for a writable store
    batch_entries: BatchEntriesCache = field(default_factory=BatchEntriesCache)  # /chunkstore/status's counts
    version: str = "0.0.0"
    ready: bool = True
    started_at: float = field(default_factory=time.time)
    inflight: int = 0  # requests inside the handlers now
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

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking store call in the thread pool, keeping the event loop free."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(fn, *args, **kwargs))


STATE: web.AppKey[AppState] = web.AppKey("chunkstore_state", AppState)


def state_of(request: web.Request) -> AppState:
    return request.app[STATE]
