"""How long a full neighbourhood would take to sample, from a smaller sample's run: ``fullReserveEstimate``.

``/rchash?verbose=true`` answers it, and every sample the daemon runs records
its figure for ``/metrics`` and ``/chunkstore/status`` (api/sampling.py).
"""

from __future__ import annotations

from typing import Any

from chunkstore.swarm.bmt import backend as hashing
from chunkstore.swarm.constants import RESERVE_CAPACITY
from sampler.pipeline import default_workers

FULL_RESERVE_CHUNKS = RESERVE_CAPACITY  # a full neighbourhood: one reserve's worth of chunks


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
    hashed = float(loads) if loads is not None else 0.0
    measured = hashed >= MEASURED_HASHES and taddr > 0
    if measured:
        hash_seconds = taddr / hashed
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


def estimate(stats: dict[str, Any], backend: str, run_seconds: float, window: float) -> dict[str, Any]:
    """The verbose answer's ``fullReserveEstimate`` (blocking: measures the backend once per process)."""
    hash_seconds = hashing.chunk_seconds(reference=backend != "numba")
    rate, terms = modelled_rate(stats, hash_seconds, default_workers())
    iterated = int(stats.get("total_iterated", 0) or 0)
    measured = iterated / run_seconds if run_seconds > 0 else 0.0
    model = {"hashBackend": backend, **terms, "measuredChunksPerSecond": measured}
    return full_reserve_estimate(rate, window, iterated, model)
