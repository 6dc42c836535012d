"""The daemon when the store cannot write: 507 (or a named 500) in JSON, readiness says why, /health, reads
and /rchash go on, a metric counts the refusals, and uploads work again once there is room.

A full map is real (a small map size); a full disk or I/O error is injected at
the shard commit (tests/store/fullhelpers.py). tests/store/test_full_disk.py runs the
daemon on a really full disk.
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import time

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.config import parse_config
from api.putqueue import PutQueue
from chunkstore.reserve import ReserveStore
from chunkstore.store import writefailures
from chunkstore.store.errors import StoreFull
from chunkstore.store.layout import shard_of
from chunkstore.store.store import PutResult
from chunkstore.store.verify import verify_store
from tests.api.helpers import Daemon, Uploader
from tests.api.test_api import JSON_CT, build, expect_error
from tests.store.fullhelpers import FailingCommits
from tests.store.helpers import Stamper, make_batch, random_cac

FILL = make_batch(3, depth=22)  # what fills the store, removed to make room


def _clean(store: ReserveStore) -> None:
    report = verify_store(store.path)
    assert report.ok, [str(p) for p in report.problems]


async def _upload(client, up: Uploader):
    address, data, stamp = up.cac(os.urandom(4000))
    return address, await client.post("/chunks", data=data, headers={"Swarm-Postage-Stamp": stamp.hex()})


async def _upload_until_refused(client, up: Uploader, limit: int = 1000):
    """Upload until one is refused: a full map or disk may still take a small write after refusing a larger one
    (pages freed by the last commits become reusable)."""
    for _ in range(limit):
        address, r = await _upload(client, up)
        if r.status != 201:
            return address, r
    raise AssertionError(f"{limit} uploads accepted: the store never ran full")


async def _refused_count(client, reason: str) -> float:
    text = await (await client.get("/metrics")).text()
    m = re.search(rf'^chunkstore_writes_refused_total{{reason="{reason}"}} (\S+)$', text, re.M)
    assert m, text
    return float(m.group(1))


async def _readiness(client) -> tuple[int, dict]:
    r = await client.get("/readiness")
    return r.status, await r.json()


async def test_full_map_answers_507_and_recovers_without_restart(tmp_path):
    store = ReserveStore(tmp_path / "s", shards=1, map_size=4 << 20)  # one map: full for every chunk
    up = Uploader(seed=b"full map")
    store.batches.add(up.batch())
    store.batches.add(FILL)
    filler = Stamper(FILL)
    for group in (8, 1):  # fill the maps directly (faster than over HTTP) until even one chunk is refused
        try:
            while True:
                chunks = [random_cac() for _ in range(group)]
                store.put_many([(d, filler.stamp(a)) for a, d in chunks])
        except StoreFull as exc:
            assert exc.reason == "map_full"
    app, _ = build(tmp_path, store=store, own=True)
    async with TestClient(TestServer(app)) as client:
        for attempt in range(1, 3):
            address, r = await _upload_until_refused(client, up)
            body = await expect_error(r, 507, r"^no space left for the store: (an|the) LMDB map of .* is full")
            assert "--map-size" in body["message"]
            assert not store.has(address)
            _clean(store)
            assert await _refused_count(client, "map_full") == attempt
        status, body = await _readiness(client)
        assert status == 400 and body["status"] == "notReady" and body["reason"].startswith("writes refused (map_full)")
        r = await client.get("/health")
        assert r.status == 200 and (await r.json())["status"] == "ok"
        some = min(store.iter_neighbourhood(b"", 0))[0]  # consumed: a suspended iterator pins LMDB pages
        r = await client.get(f"/chunks/{some.hex()}")
        assert r.status == 200 and len(await r.read()) == 4104
        r = await client.get("/rchash/0/aa/bb")
        assert r.status == 200 and set(await r.json()) == {"hash", "proofs", "durationSeconds"}
        # room made inside the map, over the API: the removal works on a full map
        r = await client.delete(f"/batches/{FILL.id.hex()}")
        assert r.status == 200, await r.text()
        address, r = await _upload(client, up)
        assert r.status == 201, await r.text()
        assert store.has(address)
        assert await _readiness(client) == (200, {"status": "ready", "version": body["version"],
                                                  "apiVersion": body["apiVersion"]})
    _clean(store)


async def test_full_disk_answers_507_and_readiness_follows_free_space(tmp_path, monkeypatch):
    free = {"now": 0}
    monkeypatch.setattr(writefailures, "free_bytes", lambda p: free["now"])
    app, store = build(tmp_path)
    up = Uploader(seed=b"full disk")
    store.batches.add(up.batch())
    store.batches.add(FILL)
    filler = Stamper(FILL)
    for a, d in (random_cac(100) for _ in range(10)):
        store.put(d, filler.stamp(a))
    async with TestClient(TestServer(app)) as client:
        failing = FailingCommits(monkeypatch, errno.ENOSPC)
        address, r = await _upload(client, up)
        await expect_error(r, 507, r"^no space left for the store: the file system holding .* is full "
                                   r"\(mdb_txn_commit: No space left on device")
        assert not store.has(address)
        assert await _refused_count(client, "disk_full") == 1
        status, body = await _readiness(client)
        assert status == 400 and "disk_full" in body["reason"] and "No space left on device" in body["reason"]
        assert (await client.get("/health")).status == 200
        # batch changes refused for lack of space are 507 too, not "invalid batch"
        r = await client.delete(f"/batches/{FILL.id.hex()}")
        await expect_error(r, 507, r"^no space left for the store")
        assert await _refused_count(client, "disk_full") == 2
        # the operator frees space: ready again before any write, then uploads go through
        free["now"] = writefailures.RECOVERY_MARGIN
        failing.stop()
        status, body = await _readiness(client)
        assert status == 200 and body["status"] == "ready" and "reason" not in body
        address, r = await _upload(client, up)
        assert r.status == 201 and store.has(address)
        # the removal the full disk stopped is finished by asking again
        r = await client.delete(f"/batches/{FILL.id.hex()}")
        assert r.status == 200, await r.text()
        assert store.stats()["chunks"] == 1 and store.has(address)
    _clean(store)


async def test_io_error_is_a_named_500_in_json(tmp_path, monkeypatch):
    monkeypatch.setattr(writefailures, "free_bytes", lambda p: 100 << 30)
    app, store = build(tmp_path)
    up = Uploader(seed=b"io error")
    store.batches.add(up.batch())
    async with TestClient(TestServer(app)) as client:
        FailingCommits(monkeypatch, errno.EIO)
        _, r = await _upload(client, up)
        assert r.headers["Content-Type"] == JSON_CT
        await expect_error(r, 500, r"^store write failed: write to the store at .* failed: mdb_txn_commit: Input/output")
        assert await _refused_count(client, "io_error") == 1
        status, body = await _readiness(client)
        assert status == 400 and body["reason"].startswith("writes refused (io_error)")
    _clean(store)


def test_group_commit_answers_each_upload_by_what_was_committed(tmp_path, monkeypatch):
    """put_many fails after its first shard committed: those uploads are stored (201), the rest get the
    failure (507), and nothing is retried one by one against the full disk."""
    with ReserveStore(tmp_path / "s", shards=4) as store:
        batch = make_batch(1, depth=22)
        store.batches.add(batch)
        stamper = Stamper(batch)
        items = []
        for s in (0, 1, 2, 3, 0, 1, 2, 3):
            while True:
                a, d = random_cac(100)
                if shard_of(a, 4) == s:
                    items.append((d, stamper.stamp(a).to_bytes(), None, None))
                    break
        queue = PutQueue(store, executor=None)
        failing = FailingCommits(monkeypatch, errno.ENOSPC, fail=lambda n: n == 1)
        out = queue._write(items)
        assert failing.failed == 1 and queue.fallbacks == 0
        # Each outcome is the item's PutResult or the error its request answers with.
        ok = [i for i, value in enumerate(out) if isinstance(value, PutResult)]
        assert len(ok) == 2 and len({shard_of(out[i].address, 4) for i in ok}) == 1
        for value in out:
            good = isinstance(value, PutResult)
            assert store.has(value.address) if good else isinstance(value, StoreFull) and value.reason == "disk_full"
        assert store.stats()["chunks"] == 2
        _clean(store)


def test_map_size_flag_and_environment_variable():
    assert parse_config(["--data-dir", "d"]).map_size is None  # the default: sized to the file system
    assert parse_config(["--data-dir", "d", "--map-size", "512M"]).map_size == 512 << 20
    assert parse_config(["--data-dir", "d"], env={"CHUNKSTORE_MAP_SIZE": "2T"}).map_size == 2 << 40
    for bad in ("lots", "1.5G", "512K"):
        with pytest.raises(SystemExit):
            parse_config(["--data-dir", "d", "--map-size", bad])


async def test_daemon_with_a_small_map_size_refuses_the_demo_fill_and_says_why(tmp_path):
    """``serve --map-size 2M --demo``: the fill stops at the full map, the daemon serves on, named."""
    d = Daemon(tmp_path / "data", "--demo", "--demo-chunks", "3000", "--map-size", "2M", "--workers", "1")
    try:
        await _small_map_daemon(d.start())
    finally:
        code = d.stop()
    assert code == 0
    assert any(rec.get("msg") == "demo fill failed" and "map" in rec.get("error", "") for rec in d.logs)
    with ReserveStore(tmp_path / "data", readonly=True) as store:
        assert 0 < store.stats()["chunks"] < 3000
        assert store.shard(0).env.info()["map_size"] == 2 << 20  # what the flag set, recorded for readers
    _clean_path(tmp_path / "data")


async def _small_map_daemon(d: Daemon) -> None:
    async with aiohttp.ClientSession() as s:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            async with s.get(d.url("/readiness")) as r:
                body = await r.json()
            if not body.get("reason", "").startswith("starting"):
                break
            await asyncio.sleep(0.2)
        assert r.status == 400 and body["reason"].startswith("writes refused (map_full)"), body
        async with s.get(d.url("/health")) as r:
            assert r.status == 200


def _clean_path(path) -> None:
    report = verify_store(str(path))
    assert report.ok, [str(p) for p in report.problems]
