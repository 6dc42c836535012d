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

Store and HTTP metrics are this daemon's own: ``chunkstore_reserve_chunks``,
``chunkstore_reserve_stamps``, ``chunkstore_reserve_bytes``,
``chunkstore_batches`` and ``bee_localstore_reserve_size`` (read from the store
at scrape time), ``chunkstore_chunk_puts_total{outcome}``,
``chunkstore_chunk_gets_total{outcome}``, ``chunkstore_http_requests_total{method,route,code}``,
``chunkstore_http_request_duration_seconds{method,route}``,
``chunkstore_sample_in_progress``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger("chunkstore.api")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# The reference node's buckets (180 s .. 1800 s) plus finer ones for small reserves.
SAMPLE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 180, 300, 600, 900, 1200, 1500, 1800)
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

    def __init__(self, stats: Callable[[], Mapping[str, Any]], batch_count: Callable[[], int]) -> None:
        self._stats = stats
        self._batch_count = batch_count

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
        yield GaugeMetricFamily("bee_localstore_reserve_size", "Number of chunks in reserve.", value=chunks)


class Metrics:
    def __init__(self) -> None:
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
        self.puts = Counter("chunkstore_chunk_puts", "Chunk uploads by outcome.", ["outcome"], registry=r)
        self.gets = Counter("chunkstore_chunk_gets", "Chunk reads by outcome.", ["outcome"], registry=r)
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
        for outcome in ("stored", "duplicate", "rejected"):
            self.puts.labels(outcome)
        for outcome in ("hit", "miss"):
            self.gets.labels(outcome)

    def attach_store(self, stats: Callable[[], Mapping[str, Any]], batch_count: Callable[[], int]) -> None:
        self.registry.register(StoreCollector(stats, batch_count))

    def record_sample(self, duration: float, stats: Any | None, ok: bool) -> None:
        """Record one sampling run like the reference node does (summary set on success and failure)."""
        self.sample_duration.labels("success" if ok else "failure").observe(duration)
        if stats is not None:
            iterated = float(getattr(stats, "total_iterated", 0) or 0)
            for label, attr in SUMMARY_FIELDS.items():
                if label == "duration_seconds":
                    value = duration
                elif label == "chunks_per_second":
                    value = iterated / duration if duration > 0 else 0.0
                else:
                    value = float(getattr(stats, attr or "", 0) or 0)
                self.sample_summary.labels(label).set(value)
        else:
            self.sample_summary.labels("duration_seconds").set(duration)
        self.sample_last_run.set(time.time())

    def observe_http(self, method: str, route: str, code: int, seconds: float) -> None:
        self.http_requests.labels(method, route, str(code)).inc()
        self.http_duration.labels(method, route).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
