"""One reserve sample at a time for the daemon; identical concurrent requests share it.

A request for another sample waits up to ``--sample-wait`` seconds for the
running one, then gets ``SampleBusy`` (503 with ``Retry-After``: the expected
remaining time of the running sample, from the last run's duration, at
least 1 s). Every run, failed or not, is recorded in the metrics, and a
successful one's full-reserve estimate (api/estimate.py) too.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from chunkstore.reserve import ReserveStore
from chunkstore.swarm.bmt import backend as hashing
from sampler import InsufficientSample, SampleResult, SampleStats

from .errors import SampleBusy
from .estimate import estimate
from .metrics import Metrics

log = logging.getLogger(__name__)

# (anchor, depth, consensus_time_ns) -> the sample (the sampler's reserve_sample_async over the store)
SampleFn = Callable[[bytes, int, int], Awaitable[SampleResult]]

Key = tuple[int, bytes, int | None]


@dataclass(frozen=True)
class SampleRun:
    result: SampleResult
    duration: float  # seconds the sample took
    consensus_time: int


class SampleCoordinator:
    """Runs one sample at a time and lets identical concurrent requests share it."""

    def __init__(self, sample_fn: SampleFn, metrics: Metrics, wait: float) -> None:
        self._sample_fn = sample_fn
        self._metrics = metrics
        self._wait = wait
        self._lock = asyncio.Lock()
        self._inflight: dict[Key, asyncio.Task[SampleRun]] = {}
        self._running_since: float | None = None
        self._last_duration: float | None = None
        self.runs = 0  # samples actually computed (tests check sharing with it)

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    def retry_after(self) -> int:
        if self._running_since is None:
            return 1
        elapsed = time.monotonic() - self._running_since
        expected = self._last_duration if self._last_duration is not None else 2 * elapsed
        return max(1, math.ceil(expected - elapsed))

    async def sample(self, depth: int, anchor: bytes, consensus_time: int | None) -> SampleRun:
        key: Key = (depth, anchor, consensus_time)
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.ensure_future(self._run(depth, anchor, consensus_time))
            self._inflight[key] = task
            task.add_done_callback(functools.partial(self._done, key))
        # shield: one waiter going away must not cancel the sample the others share
        return await asyncio.shield(task)

    def _done(self, key: Key, task: asyncio.Task[SampleRun]) -> None:
        if self._inflight.get(key) is task:
            del self._inflight[key]
        if not task.cancelled():
            task.exception()  # retrieved here, so an unawaited failure logs no warning

    async def _acquire(self) -> None:
        if not self._lock.locked():
            await self._lock.acquire()
            return
        try:
            await asyncio.wait_for(self._lock.acquire(), timeout=self._wait)
        except TimeoutError:
            raise SampleBusy(self.retry_after()) from None

    async def _run(self, depth: int, anchor: bytes, consensus_time: int | None) -> SampleRun:
        await self._acquire()
        try:
            ct = time.time_ns() if consensus_time is None else consensus_time
            self._running_since = time.monotonic()
            self._metrics.sample_in_progress.set(1)
            self.runs += 1
            t0 = time.perf_counter()
            log.info(
                "reserve sample started",
                extra={"fields": {"depth": depth, "anchor": anchor.hex(), "consensus_time_ns": ct}},
            )
            try:
                result = await self._sample_fn(anchor, depth, ct)
            except BaseException as exc:
                duration = time.perf_counter() - t0
                short = exc if isinstance(exc, InsufficientSample) else None
                self._metrics.record_sample(duration, None if short is None else short.stats, ok=False,
                                            status=None if short is None else "insufficient")
                log.info(
                    "reserve sample failed",
                    extra={"fields": {"depth": depth, "anchor": anchor.hex(), "error": str(exc) or repr(exc),
                                      "duration_s": round(duration, 3)}},
                )
                raise
            duration = time.perf_counter() - t0
            self._last_duration = duration
            stats = result.stats
            self._metrics.record_sample(duration, stats, ok=True)
            await self._record_estimate(result, stats, duration)
            log.info(
                "reserve sample finished",
                extra={"fields": {"depth": depth, "anchor": anchor.hex(), "duration_s": round(duration, 3),
                                  "chunks_iterated": stats.total_iterated}},
            )
            return SampleRun(result, duration, ct)
        finally:
            self._running_since = None
            self._metrics.sample_in_progress.set(0)
            self._lock.release()

    async def _record_estimate(self, result: SampleResult, stats: SampleStats, duration: float) -> None:
        """Give the metric (and the status page) what ``?verbose=true`` says of this run's full-reserve time."""
        used = result.hash_backend or hashing.backend_info().name
        window = self._metrics.sampling_window
        try:
            figures = await asyncio.get_running_loop().run_in_executor(
                None, estimate, stats.as_dict(), used, duration, window
            )
        except Exception as exc:  # an estimate is advice: it must not fail the sample
            log.warning("full-reserve estimate failed", extra={"fields": {"error": repr(exc)}})
            return
        self._metrics.set_full_reserve_estimate(figures["estimatedSeconds"])

    async def close(self) -> None:
        tasks = list(self._inflight.values())
        for t in tasks:
            t.cancel()
        for t in tasks:
            try:
                await t
            except BaseException:  # noqa: S110 - cancelled or failed; shutting down either way
                pass


# The redistribution game's clock, in blocks (the reference node's storage incentives agent): a round
# of 152 blocks, commit in its first quarter, reveal in the second, claim in the rest.
BLOCKS_PER_ROUND = 152


def sample_min_balance(store: ReserveStore, override: int | None = None) -> int | None:
    """The least batch value a sample accepts: ``override`` (``--min-batch-balance``), else the reference agent's.

    The reference samples with its storage incentives agent's ``minBatchBalance()``
    (pkg/storageincentives/agent.go): the chain state's total amount plus the current
    price for the blocks from the chain state's block to the start of the round after
    next, ``(currentBlock / 152 + 2) * 152``, so batches due to run out before the claim
    could be checked are not sampled. The chain's head (``chain_tip``, else the chain
    state's block) stands for the agent's current block. No chain state: no minimum.
    """
    if override is not None:
        return override
    state = store.reserve.chainstate
    if state is None:
        return None
    next_round = (state.tip // BLOCKS_PER_ROUND + 2) * BLOCKS_PER_ROUND
    return state.total_amount + state.current_price * (next_round - state.block)
