"""``GET /rchash/{depth}/{anchor1}/{anchor2}``: the reserve sample hash with its inclusion proofs.

Parameters, as the reference node parses them (``pkg/api/rchash.go``):

- ``depth``: a decimal 0..255 (Go ``uint8``); this daemon also refuses
  depths over 31 with 400, since a proximity never exceeds 31;
- ``anchor1``, ``anchor2``: hex without 0x, even length, at least one byte
  (Go ``hex.DecodeString``); this daemon caps them at 32 bytes, the size of
  the contract's seeds;
- ``consensusTime`` (query, optional): Unix nanoseconds; chunks stamped later
  are left out. Default: the time the sample starts;
- ``verbose`` (query, optional, Go boolean spelling): adds ``items``,
  ``stats``, ``storageRadius``, ``reserveSizeWithinDepth`` (distinct chunks
  the sample covered: within the depth of anchor1 and the storage radius),
  ``hashBackend`` (the backend in use, why, and the one this sample hashed
  with) and ``fullReserveEstimate`` (see ``full_reserve_estimate``).

The answer is the reference node's ``{"hash", "proofs", "durationSeconds"}``.

Concurrency: identical requests (same depth, anchor1 and consensusTime) that
arrive while their sample is being computed share that computation (each
gets its own proofs for its anchor2). One sample runs at a time; a request
for a different sample waits up to ``--sample-wait`` seconds (default 10) for
the running one and is then answered 503 with a ``Retry-After`` header (whole
seconds: the expected remaining time of the running sample, from the last
run's duration, at least 1).

A neighbourhood with fewer than 16 eligible chunks is answered 422, naming
how many were found; a sampler failure (a worker process died, a sample
failing its own integrity check) is answered 500, as the reference does. Metrics of every run are recorded in the reference
node's names (see ``api.metrics``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from chunkstore import hashing
from chunkstore.errors import SwarmError
from sampler.pipeline import default_workers, sample_scope
from sampler.proof import make_inclusion_proofs, sample_chunk
from sampler.render import render_rchash

from .errors import ApiError, ParamError, json_response
from .metrics import Metrics
from .params import decode_hex, parse_go_bool, parse_uint
from .state import SampleFn, state_of

log = logging.getLogger("chunkstore.api")

MAX_DEPTH = 31
MAX_ANCHOR_BYTES = 32
FULL_RESERVE_CHUNKS = 1 << 22
SAMPLE_SIZE = 16

Key = tuple[int, bytes, int | None]


class SampleBusy(Exception):
    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after
        super().__init__(f"another reserve sample is running; retry in {retry_after} s")


@dataclass(frozen=True)
class SampleRun:
    result: Any  # the sampler's SampleResult
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
            task.add_done_callback(lambda t, k=key: self._done(k, t))
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
                self._metrics.record_sample(duration, getattr(exc, "stats", None), ok=False)
                log.info(
                    "reserve sample failed",
                    extra={"fields": {"depth": depth, "anchor": anchor.hex(), "error": str(exc) or repr(exc),
                                      "duration_s": round(duration, 3)}},
                )
                raise
            duration = time.perf_counter() - t0
            self._last_duration = duration
            stats = getattr(result, "stats", None)
            self._metrics.record_sample(duration, stats, ok=True)
            log.info(
                "reserve sample finished",
                extra={"fields": {"depth": depth, "anchor": anchor.hex(), "duration_s": round(duration, 3),
                                  "chunks_iterated": getattr(stats, "total_iterated", None)}},
            )
            return SampleRun(result, duration, ct)
        finally:
            self._running_since = None
            self._metrics.sample_in_progress.set(0)
            self._lock.release()

    async def close(self) -> None:
        tasks = list(self._inflight.values())
        for t in tasks:
            t.cancel()
        for t in tasks:
            try:
                await t
            except BaseException:  # noqa: S110 - cancelled or failed; shutting down either way
                pass


def _prove(items: list[Any], anchor1: bytes, anchor2: bytes) -> tuple[bytes, Any]:
    address, _ = sample_chunk(items)
    return address, make_inclusion_proofs(items, anchor1, anchor2)


def _count_within(store: Any, anchor: bytes, depth: int) -> int | None:
    """Distinct chunks the sample covers (the depth of ``anchor`` within the storage radius), from the index."""
    if not hasattr(store, "shard"):
        return None
    key_range = sample_scope(store, anchor, depth).key_range()
    if key_range is None:
        return 0
    count = 0
    for i in range(int(store.shard_count)):  # a chunk lives in one shard: count each shard apart
        last = None
        for entry in store.shard(i).iter_range(*key_range):  # address order: one entry per stamp
            if entry[0] != last:
                count += 1
                last = entry[0]
    return count


MEASURED_HASHES = 50_000  # chunks a run must hash before its own hashing time is trusted over the backend's


def modelled_rate(stats: dict[str, Any], hash_seconds: float, cores: int) -> tuple[float, dict[str, Any]]:
    """Stamp entries per second a full neighbourhood would be sampled at, and the model's terms.

    A small sample's own rate is mostly start-up cost and hardly depends on
    the hashing backend, which is the cost that grows with the reserve. So:
    per entry, the backend's measured time for a full 4 KiB chunk (times the
    share of entries that load and hash a chunk) plus this run's time for
    reading and walking an entry; in parallel over the run's workers, at
    most one per core. Once a run has hashed ``MEASURED_HASHES`` chunks, its
    own hashing time per chunk replaces the backend's: it includes what the
    single-threaded measurement cannot see (workers and their read-ahead
    sharing the cores, other programs), and it is what a full sample pays
    (measured on 2^22 chunks: the backend's figure alone underestimated the
    time by 40%).
    """
    iterated = float(stats.get("total_iterated", 0) or 0)
    loads = stats.get("chunk_loads")
    taddr = float(stats.get("taddr_duration", 0) or 0)
    measured = loads is not None and loads >= MEASURED_HASHES and taddr > 0
    if measured:
        hash_seconds = taddr / float(loads)
    other = float(stats.get("iteration_duration", 0) or 0) + float(stats.get("chunk_load_duration", 0) or 0)
    hashed_share = min(1.0, float(loads) / iterated) if iterated and loads is not None else 1.0
    other_per_entry = other / iterated if iterated else 0.0
    per_entry = hash_seconds * hashed_share + other_per_entry
    parallel = max(1, min(int(stats.get("workers", 1) or 1), cores))
    rate = parallel / per_entry if per_entry > 0 else 0.0
    terms = {
        "hashMicrosecondsPerChunk": hash_seconds * 1e6,
        "hashMeasuredInRun": measured,
        "otherMicrosecondsPerEntry": other_per_entry * 1e6,
        "parallelWorkers": parallel,
    }
    return rate, terms


def full_reserve_estimate(
    chunks_per_second: float, window: float, measured_chunks: int, model: dict[str, Any] | None = None
) -> dict[str, Any]:
    """How long a full 2^22-chunk neighbourhood would take at ``chunks_per_second``, against the window.

    ``model`` (the backend and the terms of ``modelled_rate``) is added to the answer as given.
    """
    extra = dict(model or {})
    if chunks_per_second <= 0:
        return {
            "chunks": FULL_RESERVE_CHUNKS,
            "chunksPerSecond": 0.0,
            "estimatedSeconds": None,
            "samplingWindowSeconds": window,
            "fractionOfWindow": None,
            "measuredOnChunks": measured_chunks,
            "verdict": "unknown: no rate measured",
            **extra,
        }
    seconds = FULL_RESERVE_CHUNKS / chunks_per_second
    fraction = seconds / window
    if fraction <= 0.5:
        verdict = "fits: a full neighbourhood would take under half the window"
    elif fraction <= 1.0:
        verdict = "tight: a full neighbourhood would fit the window with little margin"
    else:
        verdict = "too slow: a full neighbourhood would not finish inside the window"
    if measured_chunks < 100_000:
        verdict += f" (rate measured on only {measured_chunks} chunks; fixed start-up costs make it pessimistic)"
    return {
        "chunks": FULL_RESERVE_CHUNKS,
        "chunksPerSecond": chunks_per_second,
        "estimatedSeconds": seconds,
        "samplingWindowSeconds": window,
        "fractionOfWindow": fraction,
        "measuredOnChunks": measured_chunks,
        "verdict": verdict,
        **extra,
    }


def _estimate(stats: dict[str, Any], backend: str, run_seconds: float, window: float) -> dict[str, Any]:
    """The verbose answer's ``fullReserveEstimate`` (blocking: measures the backend once per process)."""
    hash_seconds = hashing.chunk_seconds(reference=backend != "numba")
    rate, terms = modelled_rate(stats, hash_seconds, default_workers())
    iterated = int(stats.get("total_iterated", 0) or 0)
    measured = iterated / run_seconds if run_seconds > 0 else 0.0
    model = {"hashBackend": backend, **terms, "measuredChunksPerSecond": measured}
    return full_reserve_estimate(rate, window, iterated, model)


def _stats_dict(stats: Any) -> dict[str, Any]:
    if stats is None:
        return {}
    if hasattr(stats, "as_dict"):
        return dict(stats.as_dict())
    return {k: v for k, v in vars(stats).items() if not k.startswith("_")}


def _parse(request: web.Request) -> tuple[int, bytes, bytes, int | None, bool]:
    mi = request.match_info
    depth = parse_uint("path", "depth", mi["depth"], bits=8)
    if depth > MAX_DEPTH:
        raise ParamError("path", "depth", mi["depth"], f"depth must be at most {MAX_DEPTH}")
    anchor1 = decode_hex("path", "anchor1", mi["anchor1"], max_size=MAX_ANCHOR_BYTES)
    anchor2 = decode_hex("path", "anchor2", mi["anchor2"], max_size=MAX_ANCHOR_BYTES)
    q = request.query
    ct: int | None = None
    if "consensusTime" in q:
        ct = parse_uint("query", "consensusTime", q["consensusTime"])
    verbose = False
    if "verbose" in q:
        verbose = parse_go_bool("query", "verbose", q["verbose"])
    return depth, anchor1, anchor2, ct, verbose


async def rchash(request: web.Request) -> web.Response:
    st = state_of(request)
    coordinator: SampleCoordinator = st.extras["sampler"]
    depth, anchor1, anchor2, ct, verbose = _parse(request)
    try:
        run = await coordinator.sample(depth, anchor1, ct)
    except SampleBusy as exc:
        raise ApiError(503, str(exc), headers={"Retry-After": str(exc.retry_after)}) from None
    except SwarmError as exc:
        if type(exc).__name__ == "InsufficientSample":
            found = getattr(exc, "found", None)
            raise ApiError(
                422,
                f"insufficient sample: found {found} eligible chunk(s) within depth {depth} of anchor "
                f"{anchor1.hex()}; {SAMPLE_SIZE} are needed",
            ) from None
        # a worker that died or a sample that fails its own checks is the node's fault, not the request's
        log.error("reserve sample failed", extra={"fields": {"error": str(exc), "kind": type(exc).__name__}})
        raise ApiError(500, f"failed making sample with proofs: {exc}") from None
    items = list(run.result.items)
    t_proofs = time.perf_counter()
    sample_address, proofs = await st.run(_prove, items, anchor1, anchor2)
    # Like the reference: the time of the sample plus that of the proofs.
    duration = run.duration + (time.perf_counter() - t_proofs)
    body = render_rchash(sample_address, proofs, duration)
    if verbose:
        stats = getattr(run.result, "stats", None)
        stats_d = _stats_dict(stats)
        # Phase 1 counted the chunks it walked; walking the index again here would take seconds
        # of Python per million entries (and the GIL, from /health) on a full reserve.
        if "distinct_chunks" in stats_d:
            within = int(stats_d["distinct_chunks"])
        else:
            within = await st.run(_count_within, st.store, anchor1, depth)
        iterated = int(stats_d.get("total_iterated", 0) or 0)
        info = hashing.backend_info()
        used = getattr(run.result, "hash_backend", "") or info.name
        body["depth"] = depth
        body["consensusTime"] = run.consensus_time
        body["items"] = [
            {
                "chunkAddress": bytes(it.chunk_address).hex(),
                "transformedAddress": bytes(it.transformed_address).hex(),
                "batchID": bytes(it.stamp.batch_id).hex(),
                "chunkType": "SOC" if int(it.chunk_type) == 2 else "CAC",
            }
            for it in items
        ]
        body["stats"] = stats_d
        body["storageRadius"] = getattr(run.result, "storage_radius", 0)
        body["reserveSizeWithinDepth"] = within if within is not None else iterated
        body["hashBackend"] = {**info.as_dict(), "usedBySample": used}
        body["fullReserveEstimate"] = await st.run(_estimate, stats_d, used, run.duration, st.config.sampling_window)
    return json_response(body)


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    for p in prefixes:
        app.router.add_get(p + "/rchash/{depth}/{anchor1}/{anchor2}", rchash, allow_head=False)
