"""The hashing backend, where an operator looks: /chunkstore/status, /metrics, /rchash?verbose=true.

A pysha3 fallback (about 9x slower) must be visible and must show in the
full-reserve estimate; a wrong accelerated hash caught while sampling must be
counted, switch the backend, and still give the right answer.
"""

from __future__ import annotations

import re

import pytest
from aiohttp.test_utils import TestClient, TestServer

import tests.sampler.textbook as textbook
from api.estimate import estimate as _estimate
from chunkstore.swarm.bmt import backend as hashing
from chunkstore.swarm.constants import ChunkType
from tests.api.test_api import build
from tests.api.test_api_rchash import filled_store
from tests.sampler.helpers import faulty_backend

REASON = "numba backend unavailable at start-up: ImportError: no numba here"


@pytest.fixture
def fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as it is after the accelerated backend failed at start-up."""
    monkeypatch.setattr(hashing, "BACKEND", "pysha3")
    monkeypatch.setattr(hashing, "_kn", None)
    monkeypatch.setattr(hashing, "_reason", REASON)


def gauge(text: str, backend: str) -> float:
    m = re.search(rf'^chunkstore_hash_backend{{backend="{backend}"}} (\S+)$', text, re.M)
    assert m, text
    return float(m.group(1))


async def test_status_and_metrics_name_the_backend(tmp_path):
    app, _ = build(tmp_path)
    async with TestClient(TestServer(app)) as client:
        r = await client.get("/chunkstore/status")
        assert r.status == 200
        body = await r.json()
        info = hashing.backend_info()
        assert body["hashBackend"] == {"name": info.name, "accelerated": info.accelerated, "reason": info.reason}
        text = await (await client.get("/metrics")).text()
        assert gauge(text, info.name) == 1.0
        assert gauge(text, "pysha3" if info.name == "numba" else "numba") == 0.0
        assert "chunkstore_hash_backend_mismatch_total 0.0" in text


async def test_fallback_is_visible_everywhere(tmp_path, fallback):
    store, _ = filled_store(tmp_path)
    app, _ = build(tmp_path, store=store, own=True)
    async with TestClient(TestServer(app)) as client:
        body = await (await client.get("/chunkstore/status")).json()
        assert body["hashBackend"] == {"name": "pysha3", "accelerated": False, "reason": REASON}
        text = await (await client.get("/metrics")).text()
        assert gauge(text, "pysha3") == 1.0 and gauge(text, "numba") == 0.0

        body = await (await client.get("/rchash/0/aa/bb?verbose=true")).json()
        assert body["hashBackend"] == {"name": "pysha3", "accelerated": False, "reason": REASON,
                                       "usedBySample": "pysha3"}  # fmt: skip
        est = body["fullReserveEstimate"]
        assert est["hashBackend"] == "pysha3"
        assert est["hashMicrosecondsPerChunk"] == pytest.approx(hashing.chunk_seconds(reference=True) * 1e6)
        assert est["estimatedSeconds"] == pytest.approx((1 << 22) / est["chunksPerSecond"])


def test_estimate_reflects_the_backend():
    """Same run, other backend: the pysha3 estimate is several times the numba one."""
    stats = {"total_iterated": 2000, "chunk_loads": 2000, "workers": 2,
             "iteration_duration": 0.01, "chunk_load_duration": 0.01}  # fmt: skip
    slow = _estimate(stats, "pysha3", 1.0, 585)
    assert slow["hashBackend"] == "pysha3"
    per_entry = slow["hashMicrosecondsPerChunk"] + slow["otherMicrosecondsPerEntry"]
    assert slow["otherMicrosecondsPerEntry"] == pytest.approx(10.0)
    assert slow["chunksPerSecond"] == pytest.approx(slow["parallelWorkers"] / per_entry * 1e6)
    assert slow["measuredChunksPerSecond"] == 2000
    if not hashing.accelerated():
        pytest.skip("no accelerated backend to compare with")
    fast = _estimate(stats, "numba", 1.0, 585)
    assert fast["hashBackend"] == "numba"
    assert slow["estimatedSeconds"] > 2 * fast["estimatedSeconds"]


def test_estimate_of_a_large_run_uses_its_own_hashing_time():
    """A run that hashed many chunks is estimated from its own hashing time, not the backend's.

    Measured on a 2^22-chunk store (bench/bench_scale.py), the backend's
    single-threaded time per chunk made the estimate 40% short of the sample;
    before, a run's own hashing time was never used.
    """
    from sampler.pipeline import default_workers

    stats = {"total_iterated": 1_000_000, "chunk_loads": 1_000_000, "workers": 2,
             "taddr_duration": 20.0, "iteration_duration": 2.0, "chunk_load_duration": 3.0}  # fmt: skip
    est = _estimate(stats, "numba", 10.0, 585)
    assert est["hashMeasuredInRun"] is True
    assert est["hashMicrosecondsPerChunk"] == pytest.approx(20.0)
    # 25 us of work per entry in all (20 hashing, 5 reading and walking), on the run's workers
    parallel = min(2, default_workers())
    assert est["estimatedSeconds"] == pytest.approx((1 << 22) * 25e-6 / parallel)
    small = _estimate({**stats, "total_iterated": 2000, "chunk_loads": 2000}, "numba", 1.0, 585)
    assert small["hashMeasuredInRun"] is False  # too few chunks: start-up costs would dominate


def _textbook_hash(store, anchor: bytes) -> str:
    pairs = []
    for address, ctype, _, _ in store.iter_neighbourhood(b"", 0):
        data = store.get(address)
        pairs.append((textbook.transformed_address(address, data, ctype == ChunkType.SOC, anchor), address))
    pairs.sort()
    return textbook.sample_hash([(a, t) for t, a in pairs[:16]]).hex()


async def test_mismatch_through_the_daemon(tmp_path, monkeypatch):
    """The real sampler in the daemon meets a wrong accelerated hash: right answer, counted, backend switched."""
    from api.app import make_app
    from api.config import Config

    if not hashing.accelerated():
        pytest.skip("the accelerated backend is not available here")
    for name in ("BACKEND", "_kn", "_reason"):
        monkeypatch.setattr(hashing, name, getattr(hashing, name))
    store, _ = filled_store(tmp_path)
    anchor = b"\xaa"
    taddrs = sorted(
        textbook.transformed_address(a, store.get(a), t == ChunkType.SOC, anchor)
        for a, t, _, _ in store.iter_neighbourhood(b"", 0)
    )
    faulty_backend(monkeypatch, {taddrs[2]: b"\xff" * 32, taddrs[-1]: bytes(32)})
    # workers=0: phase 1 runs in this process, where the faulty backend is patched in
    app = make_app(store, Config(data_dir=tmp_path, workers=0), close_store=True)
    async with TestClient(TestServer(app)) as client:
        r = await client.get("/rchash/0/aa/bb?verbose=true")
        assert r.status == 200, await r.text()
        body = await r.json()
        assert body["hash"] == _textbook_hash(store, anchor)
        assert body["stats"]["hash_mismatches"] == 1
        assert body["hashBackend"]["name"] == "pysha3" and body["hashBackend"]["usedBySample"] == "pysha3"
        assert "accelerated hashing backend gave" in body["hashBackend"]["reason"]
        text = await (await client.get("/metrics")).text()
        assert "chunkstore_hash_backend_mismatch_total 1.0" in text
        assert gauge(text, "pysha3") == 1.0 and gauge(text, "numba") == 0.0
        status = await (await client.get("/chunkstore/status")).json()
        assert status["hashBackend"]["accelerated"] is False
