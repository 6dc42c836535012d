"""GET /rchash: shape, parameters, sharing of identical requests, one sample at a time, metrics."""

from __future__ import annotations

import asyncio
import re

import pytest
from aiohttp.test_utils import TestClient, TestServer

import tests.sampler.textbook as textbook
from api.estimate import full_reserve_estimate
from api.state import STATE
from chunkstore.reserve import ReserveStore
from chunkstore.swarm.keccak import keccak256
from tests.api.helpers import Uploader, simple_sample
from tests.api.test_api import build, expect_error

HEX64 = re.compile("[0-9a-f]{64}")
PROOF_KEYS = [
    "proofSegments", "proveSegment", "proofSegments2", "proveSegment2", "chunkSpan", "proofSegments3",
    "postageProof", "socProof",
]


def filled_store(tmp_path, n_cac: int = 40, n_soc: int = 10) -> tuple[ReserveStore, Uploader]:
    store = ReserveStore(tmp_path / "filled")
    up = Uploader(seed=b"rchash")
    store.batches.add(up.batch())
    for i in range(n_cac):
        addr, data, stamp = up.cac(b"cac %d" % i)
        store.put(data, stamp)
    for i in range(n_soc):
        # fixed ids: with random ones the neighbourhood sizes the tests rely on would vary
        soc, stamp = up.soc(b"soc %d" % i, soc_id=keccak256(b"soc id %d" % i))
        store.put(soc.data, stamp)
    return store, up


def expected_hash(store: ReserveStore, anchor: bytes, depth: int) -> bytes:
    """The sample hash by SPEC.md's rule, with the tests' textbook primitives (one stamp per chunk here)."""
    pairs = []
    for addr, ctype, _, _ in store.iter_neighbourhood(b"", 0):
        if textbook.proximity(addr, anchor) < depth:
            continue
        pairs.append((textbook.transformed_address(addr, store.get(addr), ctype == 2, anchor), addr))
    pairs.sort()
    return textbook.sample_hash([(a, t) for t, a in pairs[:16]])


def check_proof(p: dict) -> None:
    assert list(p) == PROOF_KEYS
    for k in ("proofSegments", "proofSegments2", "proofSegments3"):
        assert len(p[k]) == 7 and all(HEX64.fullmatch(x) for x in p[k])
    assert HEX64.fullmatch(p["proveSegment"]) and HEX64.fullmatch(p["proveSegment2"])
    assert type(p["chunkSpan"]) is int
    pp = p["postageProof"]
    assert list(pp) == ["signature", "postageId", "index", "timeStamp"]
    assert re.fullmatch("[0-9a-f]{130}", pp["signature"]) and HEX64.fullmatch(pp["postageId"])
    assert re.fullmatch("0|[1-9a-f][0-9a-f]*", pp["index"])
    assert re.fullmatch("[1-9a-f][0-9a-f]*", pp["timeStamp"])
    if p["socProof"] is not None:
        assert len(p["socProof"]) == 1
        assert list(p["socProof"][0]) == ["signer", "signature", "identifier", "chunkAddr"]


async def test_rchash_shape_and_hash(tmp_path):
    store, _ = filled_store(tmp_path)
    app, _ = build(tmp_path, store=store, own=True)
    async with TestClient(TestServer(app)) as client:
        r = await client.get("/rchash/0/aa/bb")
        assert r.status == 200, await r.text()
        body = await r.json()
        assert list(body) == ["hash", "proofs", "durationSeconds"]
        assert body["hash"] == expected_hash(store, b"\xaa", 0).hex()
        assert list(body["proofs"]) == ["proof1", "proof2", "proofLast"]
        for p in body["proofs"].values():
            check_proof(p)
        assert isinstance(body["durationSeconds"], float) and body["durationSeconds"] >= 0

        r = await client.get("/v1/rchash/1/aa/bb")
        assert r.status == 200
        assert (await r.json())["hash"] == expected_hash(store, b"\xaa", 1).hex()


async def test_rchash_verbose(tmp_path):
    store, up = filled_store(tmp_path)
    app, _ = build(tmp_path, store=store, own=True)
    async with TestClient(TestServer(app)) as client:
        r = await client.get("/rchash/0/0123/ff?verbose=true")
        assert r.status == 200
        body = await r.json()
        assert body["hash"] == expected_hash(store, b"\x01\x23", 0).hex()
        items = body["items"]
        assert len(items) == 16
        for it in items:
            assert HEX64.fullmatch(it["chunkAddress"]) and HEX64.fullmatch(it["transformedAddress"])
            assert it["batchID"] == up.batch_id.hex()
            assert it["chunkType"] in ("CAC", "SOC")
        assert [it["transformedAddress"] for it in items] == sorted(it["transformedAddress"] for it in items)
        assert body["reserveSizeWithinDepth"] == 50
        assert body["stats"]["total_iterated"] == 50
        assert body["storageRadius"] == 0
        assert body["hashBackend"]["name"] in ("numba", "pysha3")
        est = body["fullReserveEstimate"]
        assert est["chunks"] == 1 << 22 and est["samplingWindowSeconds"] == 585
        assert est["verdict"].split(":")[0] in ("fits", "tight", "too slow")
        assert est["estimatedSeconds"] == pytest.approx((1 << 22) / est["chunksPerSecond"])

        r = await client.get("/rchash/0/0123/ff?verbose=0")
        assert list(await r.json()) == ["hash", "proofs", "durationSeconds"]


def test_estimate_verdicts():
    assert full_reserve_estimate(100_000, 585, 10**6)["verdict"].startswith("fits")
    assert full_reserve_estimate(8_000, 585, 10**6)["verdict"].startswith("tight")
    assert full_reserve_estimate(1_000, 585, 10**6)["verdict"].startswith("too slow")
    assert full_reserve_estimate(0, 585, 0)["verdict"].startswith("unknown")
    assert "only 50 chunks" in full_reserve_estimate(1000, 585, 50)["verdict"]


@pytest.mark.parametrize(
    "path, field, pattern",
    [
        ("/rchash/32/aa/bb", "depth", "at most 31"),
        ("/rchash/256/aa/bb", "depth", "out of range"),
        ("/rchash/-1/aa/bb", "depth", "invalid syntax"),
        ("/rchash/x/aa/bb", "depth", "invalid syntax"),
        ("/rchash/0/a/bb", "anchor1", "odd length"),
        ("/rchash/0/zz/bb", "anchor1", "invalid hex"),
        ("/rchash/0/aa/bbb", "anchor2", "odd length"),
        ("/rchash/0/" + "aa" * 33 + "/bb", "anchor1", "at most 32 bytes"),
        ("/rchash/0/aa/bb?consensusTime=abc", "consensusTime", "invalid syntax"),
        ("/rchash/0/aa/bb?consensusTime=-5", "consensusTime", "invalid syntax"),
        ("/rchash/0/aa/bb?verbose=yes", "verbose", "invalid syntax"),
    ],
)
async def test_rchash_bad_params(tmp_path, path, field, pattern):
    store, _ = filled_store(tmp_path, 20, 0)
    app, _ = build(tmp_path, store=store, own=True)
    async with TestClient(TestServer(app)) as client:
        r = await client.get(path)
        body = await expect_error(r, 400, pattern)
        assert body["reasons"][0]["field"] == field
        assert app[STATE].sampler.runs == 0


async def test_rchash_insufficient_sample_names_the_count(tmp_path):
    store, _ = filled_store(tmp_path, 10, 2)
    app, _ = build(tmp_path, store=store, own=True)
    async with TestClient(TestServer(app)) as client:
        r = await client.get("/rchash/0/aa/bb")
        await expect_error(r, 422, "found 12 eligible")
        # nothing was stamped before 1970 + 1 ns
        r = await client.get("/rchash/0/aa/bb?consensusTime=1")
        await expect_error(r, 422, "found 0 eligible")
        text = await (await client.get("/metrics")).text()
        # An operator's sweep: any client's deep /rchash counted as a failure and fired the critical alert
        # ChunkstoreSampleFailing ("a worker died"). The sample ran; it found too few chunks.
        assert 'bee_localstore_reserve_sample_duration_seconds_count{status="insufficient"} 2.0' in text
        assert 'bee_localstore_reserve_sample_duration_seconds_count{status="failure"} 0.0' in text


async def test_rchash_consensus_time_filters(tmp_path):
    store, up = filled_store(tmp_path, 20, 0)
    app, _ = build(tmp_path, store=store, own=True)
    async with TestClient(TestServer(app)) as client:
        import time

        r = await client.get(f"/rchash/0/aa/bb?consensusTime={time.time_ns()}")
        assert r.status == 200


def slow_sampler(store: ReserveStore, delay: float, calls: list):
    async def run(anchor: bytes, depth: int, ct: int):
        calls.append((anchor, depth, ct))
        await asyncio.sleep(delay)
        return simple_sample(store, anchor, depth, ct)

    return run


async def test_identical_requests_share_one_sample(tmp_path):
    store, _ = filled_store(tmp_path)
    calls: list = []
    app, _ = build(tmp_path, store=store, own=True, sample_fn=slow_sampler(store, 0.3, calls))
    async with TestClient(TestServer(app)) as client:
        urls = ["/rchash/0/aa/bb"] * 4 + ["/rchash/0/aa/cc"]  # anchor2 differs: same sample, other proofs
        rs = await asyncio.gather(*(client.get(u) for u in urls))
        bodies = [await r.json() for r in rs]
        assert all(r.status == 200 for r in rs)
        assert len(calls) == 1
        assert len({b["hash"] for b in bodies}) == 1
        assert bodies[0]["proofs"] == bodies[1]["proofs"]
        # a later identical request computes afresh
        r = await client.get("/rchash/0/aa/bb")
        assert r.status == 200 and len(calls) == 2


async def test_different_request_waits_then_503(tmp_path):
    store, _ = filled_store(tmp_path)
    calls: list = []
    app, _ = build(tmp_path, store=store, own=True, sample_fn=slow_sampler(store, 1.0, calls), sample_wait=0.2)
    async with TestClient(TestServer(app)) as client:
        first = asyncio.ensure_future(client.get("/rchash/0/aa/bb"))
        await asyncio.sleep(0.1)
        r = await client.get("/rchash/0/ab/bb")
        await expect_error(r, 503, "another reserve sample is running")
        assert int(r.headers["Retry-After"]) >= 1
        # health stays quick meanwhile
        h = await client.get("/health")
        assert h.status == 200
        assert (await first).status == 200
        assert len(calls) == 1


async def test_different_request_waits_its_turn(tmp_path):
    store, _ = filled_store(tmp_path)
    calls: list = []
    app, _ = build(tmp_path, store=store, own=True, sample_fn=slow_sampler(store, 0.2, calls), sample_wait=5)
    async with TestClient(TestServer(app)) as client:
        rs = await asyncio.gather(client.get("/rchash/0/aa/bb"), client.get("/rchash/1/aa/bb"))
        assert [r.status for r in rs] == [200, 200]
        assert len(calls) == 2


async def test_sample_metrics_recorded(tmp_path):
    store, _ = filled_store(tmp_path)
    app, _ = build(tmp_path, store=store, own=True)
    async with TestClient(TestServer(app)) as client:
        assert (await client.get("/rchash/0/aa/bb")).status == 200
        text = await (await client.get("/metrics")).text()
        assert 'bee_localstore_reserve_sample_duration_seconds_count{status="success"} 1.0' in text
        for label in ("duration_seconds", "chunks_iterated", "chunks_load_failed", "stamp_validations",
                      "invalid_stamps", "below_balance_ignored", "workers", "chunks_per_second",
                      "taddr_duration_seconds", "chunk_load_duration_seconds", "iteration_duration_seconds"):
            assert f'bee_localstore_reserve_sample_run_summary{{metric="{label}"}}' in text, label
        assert 'bee_localstore_reserve_sample_run_summary{metric="chunks_iterated"} 50.0' in text
        m = re.search(r"^bee_localstore_reserve_sample_last_run_timestamp (\S+)$", text, re.M)
        assert m and float(m.group(1)) > 1.6e9
        assert "chunkstore_sample_in_progress 0.0" in text


async def test_rchash_with_the_real_sampler(tmp_path):
    """No injected sampler: the daemon's default (worker processes over the store)."""
    from api.app import make_app
    from api.config import Config

    store, _ = filled_store(tmp_path, 30, 6)
    app = make_app(store, Config(data_dir=tmp_path, workers=1), close_store=True)
    async with TestClient(TestServer(app)) as client:
        r = await client.get("/rchash/0/aa/bb?verbose=true")
        assert r.status == 200, await r.text()
        body = await r.json()
        assert body["hash"] == expected_hash(store, b"\xaa", 0).hex()
        assert body["reserveSizeWithinDepth"] == 36
        assert body["stats"]["total_iterated"] == 36
        r = await client.get("/rchash/2/aa/bb")
        await expect_error(r, 422, "eligible")


@pytest.mark.parametrize(
    "path, fields",
    [
        ("/rchash/x/g/zz", ["depth", "anchor1", "anchor2"]),
        ("/rchash/0/a/b", ["anchor1", "anchor2"]),
        ("/rchash/256/aa/b", ["depth", "anchor2"]),
    ],
)
async def test_rchash_names_every_bad_path_param(tmp_path, path, fields):
    # The reference's mapStructure collects a reason for each field that fails (pkg/api/util.go), in the
    # order of the handler's struct: depth, anchor1, anchor2.
    store, _ = filled_store(tmp_path, 20, 0)
    app, _ = build(tmp_path, store=store, own=True)
    async with TestClient(TestServer(app)) as client:
        r = await client.get(path)
        body = await expect_error(r, 400, "invalid path params")
        assert body["message"] == "invalid path params"
        assert [x["field"] for x in body["reasons"]] == fields
        assert app[STATE].sampler.runs == 0
