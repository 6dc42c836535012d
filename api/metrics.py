"""Prometheus metrics of one daemon, in a registry of its own (tests build many apps).

Reserve-sample metrics carry the reference node's names (``pkg/storer/metrics.go``):

- ``bee_localstore_reserve_sample_duration_seconds{status}``: histogram,
  status ``success`` or ``failure``;
- ``bee_localstore_reserve_sample_run_summary{metric}``: gauges of the last
  run (duration_seconds, chunks_iterated, chunks_load_failed,
  stamp_validations, invalid_stamps, below_balance_ignored, workers,
  chunks_per_second, taddr_duration_seconds, chunk_load_duration_seconds,
  iteration_duration_seconds, stamp_validation_duration_seconds);
- ``bee_localstore_reserve_sample_last_run_timestamp``: Unix seconds.

Reserve metrics, read from ``store.reserve`` at scrape time, carry the
reference's names where it has one: ``bee_localstore_reserve_size`` (stamp
entries, as the reference counts), ``bee_localstore_reserve_size_within_radius``,
``bee_localstore_storage_radius``, ``bee_localstore_evicted_count`` (capacity
evictions), ``bee_localstore_expired_count`` (entries of expired batches),
``bee_localstore_expired_batch_count``, ``bee_localstore_over_cap_trigger_count``;
and this daemon's ``chunkstore_reserve_capacity``,
``chunkstore_reserve_committed_depth`` and
``chunkstore_reserve_evictions_total{reason}`` (reason ``capacity``,
``expiry`` or ``radius``: entries swept after the radius was raised by hand
or the overlay changed). Counts are since the process started; the
``bee_*`` counts are exposed as gauges so that their names are exactly the
reference's (a counter would gain a ``_total`` suffix).

Pins and the cache, read at scrape time: ``bee_localstore_cache_size``
(chunks in the cache, the reference's name), ``chunkstore_cache_capacity``,
``chunkstore_cache_evictions_total`` (entries the cache dropped, least
recently used first, since start), ``chunkstore_pins`` and
``chunkstore_pinned_chunks`` (pin rows: a chunk in two pins counts twice);
``chunkstore_upload_chunks_total{kept}`` counts the chunks uploads stored new,
by what keeps them: ``reserve`` (under their stamp), ``cache`` (outside the
storage radius) or ``pin`` (outside the radius, kept by ``Swarm-Pin``). "New"
is new data (``put_outcome``): a chunk the store held already is not counted
again when an upload re-stamps it, as the node does its own batches' chunks.

Hashing backend (this daemon's own; dashboards and alerts rely on the names):
``chunkstore_hash_backend{backend="numba"|"pysha3"}``, 1 for the backend in
use and 0 for the other, read at scrape time (so a run-time switch to the
reference shows at once), and ``chunkstore_hash_backend_mismatch_total``,
the accelerated backend's answers that the sampler caught disagreeing with
the reference (each one made it redo a sample with the reference).

Store and HTTP metrics are this daemon's own: ``chunkstore_reserve_chunks``,
``chunkstore_reserve_stamps``, ``chunkstore_reserve_bytes``,
``chunkstore_batches`` (read from the store
at scrape time), ``chunkstore_chunk_puts_total{outcome}``,
``chunkstore_chunk_gets_total{outcome}``, ``chunkstore_http_requests_total{method,route,code}``,
``chunkstore_http_request_duration_seconds{method,route}``,
``chunkstore_sample_in_progress``, and
``chunkstore_writes_refused_total{reason}``: requests whose write the store
could not commit, by cause (``disk_full``, ``map_full``: answered 507;
``io_error``: answered 500).

For the operator's dashboard and alert rules (``docker/``):
``chunkstore_sample_window_seconds`` (the window a sample must finish in),
``chunkstore_sample_full_reserve_estimate_seconds`` (how long a full
2^22-chunk neighbourhood would take, projected from the last successful run
exactly as ``/rchash?verbose=true``'s ``fullReserveEstimate``; NaN before),
``chunkstore_reserve_bin_entries{bin}`` (stamp entries per proximity bin
0..31 to the overlay), ``chunkstore_ready`` (1 while ``/readiness`` says
ready; 0 during a ``--demo`` fill, while the hashing kernels load or while
writes are refused), ``chunkstore_build_info{version,api_version,python}``
(always 1), and the data dir's disk: ``chunkstore_data_dir_bytes`` (allocated by
its files), ``chunkstore_filesystem_free_bytes`` and
``chunkstore_filesystem_size_bytes``. Every labelled series an alert or
panel selects exists from start-up (at 0), so a rule sees the first failure
as an increase.
"""

from __future__ import annotations

import logging
import math
import os
import platform
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from chunkstore import __version__

from .diskuse import disk_use
from .samplelog import SampleLog, SampleRun
from .version import API_VERSION

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# The reference node's buckets (180 s .. 1800 s) plus finer ones for small reserves.
SAMPLE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 180, 300, 600, 900, 1200, 1500, 1800)
UPLOAD_ROUTES = ("/chunks", "/soc/{owner}/{id}")
HTTP_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

# run-summary label -> attribute of the sampler's SampleStats (None: computed here)
SUMMARY_FIELDS: dict[str, str | None] = {
    "duration_seconds": None,
    "chunks_iterated": "total_iterated",
    "chunks_load_failed": "chunk_load_failed",
    "stamp_validations": "stamp_validations",
    "invalid_stamps": "invalid_stamps",
    "below_balance_ignored": "below_balance_ignored",
    "workers": "workers",
    "chunks_per_second": None,
    "taddr_duration_seconds": "taddr_duration",
    "chunk_load_duration_seconds": "chunk_load_duration",
    "iteration_duration_seconds": "iteration_duration",
    "stamp_validation_duration_seconds": "stamp_validation_duration",
}


class StoreCollector(Collector):
    """Reads the store's counts at scrape time (the scrape runs off the event loop)."""

    def __init__(
        self, stats: Callable[[], Mapping[str, Any]], batch_count: Callable[[], int], reserve_size: bool = True
    ) -> None:
        self._stats = stats
        self._batch_count = batch_count
        self._reserve_size = reserve_size  # off when a ReserveCollector reports it

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            stats = self._stats()
            batches = stats["batches"] if "batches" in stats else self._batch_count()
        except Exception as exc:  # a closed or failing store must not break the scrape
            log.warning("store stats unavailable for metrics", extra={"fields": {"error": repr(exc)}})
            return
        chunks = float(stats.get("chunks", 0))
        yield GaugeMetricFamily("chunkstore_reserve_chunks", "Chunks held in the store.", value=chunks)
        yield GaugeMetricFamily(
            "chunkstore_reserve_stamps", "Stamp entries (chunk, batch) held.", value=float(stats.get("stamps", 0))
        )
        yield GaugeMetricFamily(
            "chunkstore_reserve_bytes", "Bytes of chunk data held.", value=float(stats.get("bytes", 0))
        )
        yield GaugeMetricFamily("chunkstore_batches", "Postage batches registered.", value=float(batches))
        if self._reserve_size:
            yield GaugeMetricFamily("bee_localstore_reserve_size", "Number of chunks in reserve.", value=chunks)


REASONS = ("capacity", "expiry", "radius")
WRITE_REFUSAL_REASONS = ("disk_full", "map_full", "io_error")
HASH_BACKENDS = ("numba", "pysha3")


class HashBackendCollector(Collector):
    """Which hashing backend is in use, read at scrape time from ``info()`` (a dict with ``name``)."""

    def __init__(self, info: Callable[[], Mapping[str, Any]]) -> None:
        self._info = info

    def collect(self) -> Iterator[GaugeMetricFamily]:
        name = self._info()["name"]
        family = GaugeMetricFamily(
            "chunkstore_hash_backend",
            "Hashing backend in use (1) for BMT and transformed addresses; pysha3 is the ~9x slower reference.",
            labels=["backend"],
        )
        for backend in HASH_BACKENDS:
            family.add_metric([backend], 1.0 if backend == name else 0.0)
        yield family


class ReserveCollector(Collector):
    """The reserve's sizes, radius and eviction counts, read at scrape time (no scan)."""

    def __init__(self, reserve: Any) -> None:
        self._reserve = reserve

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        r = self._reserve
        try:
            status = r.status()
        except Exception as exc:  # a closed or failing store must not break the scrape
            log.warning("reserve status unavailable for metrics", extra={"fields": {"error": repr(exc)}})
            return
        yield GaugeMetricFamily("bee_localstore_reserve_size", "Number of chunks in reserve.", value=float(status.size))
        yield GaugeMetricFamily(
            "bee_localstore_reserve_size_within_radius", "Number of chunks in reserve with proximity >= storage radius.",
            value=float(status.size_within_radius),
        )
        yield GaugeMetricFamily("bee_localstore_storage_radius", "Radius of responsibility reserve storage.",
                                value=float(status.radius))
        yield GaugeMetricFamily("chunkstore_reserve_capacity", "Reserve capacity in chunks (with doubling).",
                                value=float(status.capacity))
        yield GaugeMetricFamily("chunkstore_reserve_committed_depth", "Storage radius plus capacity doubling.",
                                value=float(status.committed_depth))
        bins = GaugeMetricFamily(
            "chunkstore_reserve_bin_entries", "Reserve stamp entries per proximity bin to the overlay.", labels=["bin"]
        )
        for b, count in enumerate(status.bins):
            bins.add_metric([str(b)], float(count))
        yield bins
        evictions = dict(r.evictions)
        by_reason = CounterMetricFamily(
            "chunkstore_reserve_evictions", "Reserve entries evicted, by reason.", labels=["reason"]
        )
        for reason in REASONS:
            by_reason.add_metric([reason], float(evictions.get(reason, 0)))
        yield by_reason
        yield GaugeMetricFamily("bee_localstore_evicted_count", "Number of chunks evicted from reserve.",
                                  value=float(evictions.get("capacity", 0)))
        yield GaugeMetricFamily("bee_localstore_expired_count", "Number of chunks expired from reserve.",
                                  value=float(evictions.get("expiry", 0)))
        yield GaugeMetricFamily("bee_localstore_expired_batch_count", "Number of batches expired.",
                                  value=float(r.expired_batches))
        yield GaugeMetricFamily("bee_localstore_over_cap_trigger_count", "Number of times the reserve was over capacity.",
                                  value=float(r.over_capacity_triggers))


KEPT = ("reserve", "cache", "pin")


class KeepingCollector(Collector):
    """The cache's size, capacity and evictions and the pins, read at scrape time (LMDB's counts; no scan)."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        try:
            k = self._store.keeping()
        except Exception as exc:  # a closed or failing store must not break the scrape
            log.warning("pin and cache counts unavailable for metrics", extra={"fields": {"error": repr(exc)}})
            return
        yield GaugeMetricFamily("bee_localstore_cache_size", "Number of chunks in cache.", value=float(k.cache_size))
        yield GaugeMetricFamily("chunkstore_cache_capacity", "Chunks the cache keeps at most (--cache-capacity).",
                                value=float(k.cache_capacity))
        yield CounterMetricFamily("chunkstore_cache_evictions", "Cache entries dropped, least recently used first.",
                                  value=float(k.cache_evicted))
        yield GaugeMetricFamily("chunkstore_pins", "Pinned root references.", value=float(k.pins))
        yield GaugeMetricFamily("chunkstore_pinned_chunks", "Chunks of pins (a chunk in two pins counts twice).",
                                value=float(k.pinned_chunks))


class DiskCollector(Collector):
    """The data dir's allocated bytes and its file system's free and total bytes, read at scrape time."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = path

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            use = disk_use(self._path)
        except OSError as exc:  # a vanished data dir must not break the scrape
            log.warning("disk use unavailable for metrics", extra={"fields": {"error": repr(exc)}})
            return
        yield GaugeMetricFamily("chunkstore_data_dir_bytes", "Bytes allocated on disk by the data dir's files.",
                                value=float(use.data_dir_bytes))
        yield GaugeMetricFamily("chunkstore_filesystem_free_bytes",
                                "Bytes available to the daemon on the data dir's file system.", value=float(use.free_bytes))
        yield GaugeMetricFamily("chunkstore_filesystem_size_bytes", "Size of the data dir's file system in bytes.",
                                value=float(use.size_bytes))


def put_outcome(result: Any) -> str:
    """``stored`` for a chunk whose data the store did not hold, else ``duplicate``.

    A re-stamp is ``duplicate`` too: the node stamps its own batches' chunks
    anew at every upload (the same slot, a newer timestamp), which stores the
    stamp (``PutResult.stored``) but no new chunk (``PutResult.fresh``). An
    operator sweep saw three uploads of the same 100 KB count 78 new chunks.
    """
    return "stored" if result.stored and result.fresh else "duplicate"


class Metrics:
    def __init__(self, sampling_window: float = 585.0) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.sample_duration = Histogram(
            "bee_localstore_reserve_sample_duration_seconds",
            "Duration of ReserveSample operations in seconds.",
            ["status"],
            buckets=SAMPLE_BUCKETS,
            registry=r,
        )
        self.sample_summary = Gauge(
            "bee_localstore_reserve_sample_run_summary",
            "Summary metrics for the last ReserveSample run.",
            ["metric"],
            registry=r,
        )
        self.sample_last_run = Gauge(
            "bee_localstore_reserve_sample_last_run_timestamp",
            "Unix timestamp of the last ReserveSample run completion.",
            registry=r,
        )
        self.sample_in_progress = Gauge(
            "chunkstore_sample_in_progress", "1 while a reserve sample is running.", registry=r
        )
        self.sampling_window = sampling_window
        self.sample_window = Gauge(
            "chunkstore_sample_window_seconds", "Seconds a reserve sample has to finish in (the sampling window).",
            registry=r,
        )
        self.sample_window.set(sampling_window)
        self.sample_estimate = Gauge(
            "chunkstore_sample_full_reserve_estimate_seconds",
            "Projected seconds of a sample over a full 2^22-chunk neighbourhood, from the last successful run.",
            registry=r,
        )
        self.sample_estimate.set(math.nan)  # unknown until a run measures a rate; 0 would read as "fast"
        self.full_reserve_estimate: float | None = None  # seconds, the gauge's value once known
        self.ready = Gauge("chunkstore_ready", "1 while the daemon answers ready on /readiness, else 0.", registry=r)
        Info("chunkstore_build", "The daemon's version, the Bee API version it serves, and its Python.",
             registry=r).info({"version": __version__, "api_version": API_VERSION, "python": platform.python_version()})
        self.recent_samples = SampleLog()
        self.hash_mismatches = Counter(
            "chunkstore_hash_backend_mismatch",
            "Accelerated hashes that disagreed with the reference; each made a sample rerun on the reference.",
            registry=r,
        )
        self.puts = Counter("chunkstore_chunk_puts", "Single chunks uploaded through /chunks, /soc and /chunks/stream, by outcome (file uploads: chunkstore_upload_chunks).", ["outcome"], registry=r)
        self.gets = Counter("chunkstore_chunk_gets", "Chunks read through GET /chunks/{address}, by outcome (hit or miss).", ["outcome"], registry=r)
        self.upload_chunks = Counter(
            "chunkstore_upload_chunks", "Chunks uploads stored new, by what keeps them.", ["kept"], registry=r
        )
        for kept in KEPT:
            self.upload_chunks.labels(kept)
        self.http_requests = Counter(
            "chunkstore_http_requests", "HTTP requests by route and status.", ["method", "route", "code"], registry=r
        )
        self.http_duration = Histogram(
            "chunkstore_http_request_duration_seconds",
            "HTTP request latency by route.",
            ["method", "route"],
            buckets=HTTP_BUCKETS,
            registry=r,
        )
        for status in ("success", "failure"):  # a first failure must be an increase from 0 for the alert rules
            self.sample_duration.labels(status)
        self.writes_refused = Counter(
            "chunkstore_writes_refused", "Writes the store could not commit, by cause.", ["reason"], registry=r
        )
        for reason in WRITE_REFUSAL_REASONS:
            self.writes_refused.labels(reason)
        for outcome in ("stored", "duplicate", "rejected"):
            self.puts.labels(outcome)
        for outcome in ("hit", "miss"):
            self.gets.labels(outcome)
        # The upload latency panel's series exist before the first upload: a series that first appears
        # holding a burst of uploads shows Prometheus no increase, and rate() over it stays empty.
        for route in UPLOAD_ROUTES:
            self.http_duration.labels("POST", route)

    def attach_store(
        self, stats: Callable[[], Mapping[str, Any]], batch_count: Callable[[], int], reserve_size: bool = True
    ) -> None:
        self.registry.register(StoreCollector(stats, batch_count, reserve_size))

    def attach_reserve(self, reserve: Any) -> None:
        self.registry.register(ReserveCollector(reserve))

    def attach_keeping(self, store: Any) -> None:
        self.registry.register(KeepingCollector(store))

    def count_uploads(self, results: Iterable[Any]) -> None:
        """Count the chunks of an upload's durable group that were new, by ``PutResult.kept``."""
        for result in results:
            if put_outcome(result) == "stored":
                self.upload_chunks.labels(result.kept).inc()

    def count_put(self, result: Any) -> None:
        """``chunkstore_chunk_puts_total`` for one accepted chunk upload."""
        self.puts.labels(put_outcome(result)).inc()

    def attach_hash_backend(self, info: Callable[[], Mapping[str, Any]]) -> None:
        self.registry.register(HashBackendCollector(info))

    def attach_disk(self, path: str | os.PathLike[str]) -> None:
        self.registry.register(DiskCollector(path))

    def attach_readiness(self, is_ready: Callable[[], bool]) -> None:
        self.ready.set_function(lambda: 1.0 if is_ready() else 0.0)

    def set_full_reserve_estimate(self, seconds: float | None) -> None:
        """The projected full-neighbourhood sample of the last successful run (``/rchash?verbose=true``'s)."""
        self.full_reserve_estimate = seconds
        self.sample_estimate.set(math.nan if seconds is None else seconds)

    def record_sample(self, duration: float, stats: Any | None, ok: bool, status: str | None = None) -> None:
        """Record one sampling run like the reference node does (summary set on success and failure).

        ``status`` overrides the duration's label: ``insufficient`` for a sample that ran but found fewer
        than 16 chunks at its depth (a 422 any client can ask for: not a failure, which pages someone).
        """
        self.sample_duration.labels(status or ("success" if ok else "failure")).observe(duration)
        iterated = float(getattr(stats, "total_iterated", 0) or 0) if stats is not None else 0.0
        rate = iterated / duration if duration > 0 else 0.0
        now = time.time()
        self.recent_samples.add(SampleRun(now, duration, ok, int(iterated), rate))
        mismatches = int(getattr(stats, "hash_mismatches", 0) or 0)
        if mismatches > 0:
            self.hash_mismatches.inc(mismatches)
        if stats is not None:
            for label, attr in SUMMARY_FIELDS.items():
                if label == "duration_seconds":
                    value = duration
                elif label == "chunks_per_second":
                    value = rate
                else:
                    value = float(getattr(stats, attr or "", 0) or 0)
                self.sample_summary.labels(label).set(value)
        else:
            self.sample_summary.labels("duration_seconds").set(duration)
        self.sample_last_run.set(now)

    def observe_http(self, method: str, route: str, code: int, seconds: float) -> None:
        self.http_requests.labels(method, route, str(code)).inc()
        self.http_duration.labels(method, route).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
