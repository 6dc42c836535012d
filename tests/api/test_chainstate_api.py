"""The reserve and chain state over HTTP: /chainstate, batchTTL, expiry, radius refusals, /status, metrics, flags."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from api.app import make_app
from api.config import Config, parse_config
from api.server import StartupError, load_chainstate
from api.state import STATE
from chunkstore.reserve import ReserveOptions, ReserveStore
from chunkstore.reserve.chainstate import ChainState
from chunkstore.swarm.proximity import proximity
from tests.api.helpers import Uploader

JSON_CT = "application/json; charset=utf-8"
OVERLAY = bytes.fromhex("c4" * 32)


@web.middleware
async def fake_remote(request: web.Request, handler):  # test-only: pretend the client is elsewhere
    remote = request.headers.get("X-Test-Remote")
    if remote:
        request = request.clone(remote=remote)
    return await handler(request)


def build(tmp_path, reserve: ReserveOptions | None = None, **cfg) -> tuple[web.Application, ReserveStore]:
    store = ReserveStore(tmp_path / "store", reserve=reserve)

    async def no_sample(anchor, depth, ct):
        raise AssertionError("not sampled here")

    app = make_app(store, Config(data_dir=tmp_path, **cfg), overlay=OVERLAY, sample_fn=no_sample, close_store=True)
    app.middlewares.insert(0, fake_remote)
    return app, store


async def expect_error(resp, status: int, needle: str) -> None:
    assert resp.status == status, await resp.text()
    assert resp.headers["Content-Type"] == JSON_CT
    body = await resp.json()
    assert body["code"] == status and needle in body["message"], body


async def test_chainstate_get_post_and_admin_rule(tmp_path):
    app, _ = build(tmp_path, admin_token="s3cret")
    async with TestClient(TestServer(app)) as client:
        for prefix in ("", "/v1"):
            r = await client.get(prefix + "/chainstate")
            assert r.status == 200 and r.headers["Content-Type"] == JSON_CT
            assert await r.json() == {"chainTip": 0, "block": 0, "totalAmount": "0", "currentPrice": "0"}
        body = {"block": 1200, "totalAmount": "123456789012345678901234", "currentPrice": "24000"}
        remote = {"X-Test-Remote": "203.0.113.9"}
        await expect_error(await client.post("/chainstate", json=body, headers=remote), 401, "admin token")
        await expect_error(
            await client.post("/chainstate", json=body, headers={**remote, "Authorization": "Bearer nope"}),
            401, "wrong",
        )
        r = await client.post("/chainstate", json=body, headers={**remote, "Authorization": "Bearer s3cret"})
        assert r.status == 200
        want = {"chainTip": 1200, "block": 1200, "totalAmount": "123456789012345678901234", "currentPrice": "24000"}
        assert await r.json() == want
        got = await (await client.get("/v1/chainstate")).json()
        assert got == want and [type(got[k]) for k in want] == [int, int, str, str]
        # loopback needs no token
        r = await client.post("/v1/chainstate", json={**body, "chainTip": 1300, "block": 1201})
        assert r.status == 200 and (await r.json())["chainTip"] == 1300
        for bad, needle in (
            (b"{", "not JSON"),
            (json.dumps({"block": 1}).encode(), "totalAmount"),
            (json.dumps({**body, "currentPrice": "-3"}).encode(), "currentPrice"),
            (json.dumps({**body, "block": "x"}).encode(), "block"),
        ):
            await expect_error(await client.post("/chainstate", data=bad), 400, needle)


async def test_chainstate_gives_batch_ttl_then_expires_the_batch(tmp_path):
    app, store = build(tmp_path)
    up = Uploader()
    async with TestClient(TestServer(app)) as client:
        r = await client.post("/batches", json=up.batch_json(value=10**15))
        assert r.status == 201 and (await r.json())["batchTTL"] == -1
        addr, data, stamp = up.cac()
        r = await client.post("/chunks", data=data, headers={"Swarm-Postage-Stamp": stamp.hex()})
        assert r.status == 201
        cs = {"block": 77, "totalAmount": str(10**14), "currentPrice": "1000000"}
        r = await client.post("/chainstate", json=cs, headers={"X-Test-Remote": "198.51.100.7"})
        await expect_error(r, 403, "loopback only")  # no admin token configured: loopback only
        r = await client.post("/chainstate", json=cs)
        assert r.status == 200
        want_ttl = (10**15 - 10**14) * 5 // 10**6
        batches = (await (await client.get("/batches")).json())["batches"]
        assert [b["batchTTL"] for b in batches] == [want_ttl]
        assert (await (await client.get(f"/batches/{up.batch_id.hex()}")).json())["batchTTL"] == want_ttl
        status = await (await client.get("/status")).json()
        assert status["lastSyncedBlock"] == 77
        # the total amount reaches the batch's value: it expires, with its chunks
        r = await client.post("/chainstate", json={"block": 78, "totalAmount": str(10**15), "currentPrice": "1"})
        assert r.status == 200
        assert app[STATE].reserve_worker.settle(10)
        assert (await (await client.get("/batches")).json())["batches"] == []
        assert (await client.get(f"/chunks/{addr.hex()}")).status == 404
        metrics = await (await client.get("/metrics")).text()
        assert "bee_localstore_expired_batch_count 1.0" in metrics
        assert 'chunkstore_reserve_evictions_total{reason="expiry"} 1.0' in metrics
        assert (await (await client.get("/status")).json())["reserveSize"] == 0


async def test_status_reservestate_and_radius_refusal(tmp_path):
    app, store = build(tmp_path, reserve=ReserveOptions(capacity=1 << 18, doubling=1))
    up = Uploader(depth=20)
    store.batches.add(up.batch())
    async with TestClient(TestServer(app)) as client:
        assert store.reserve.overlay == OVERLAY  # the app's overlay became the store's
        rs = await (await client.get("/reservestate")).json()
        # commitment 2^20 over capacity 2^19: the batch store's radius is 1
        assert rs == {"radius": 1, "storageRadius": 0, "commitment": 1 << 20, "reserveCapacityDoubling": 1}
        near = far = None
        while near is None or far is None:
            addr, data, _ = up.cac()
            if proximity(OVERLAY, addr) >= 1 and near is None:
                near = (addr, data)
            elif proximity(OVERLAY, addr) == 0 and far is None:
                far = (addr, data)
        for a, d in (near, far):
            r = await client.post("/chunks", data=d, headers={"Swarm-Postage-Stamp": up.stamp(a).hex()})
            assert r.status == 201
        s = await (await client.get("/status")).json()
        assert (s["reserveSize"], s["reserveSizeWithinRadius"], s["storageRadius"], s["committedDepth"]) == (2, 2, 0, 1)
        await asyncio.get_running_loop().run_in_executor(None, lambda: store.reserve.set_radius(1))
        s = await (await client.get("/status")).json()
        assert (s["reserveSize"], s["reserveSizeWithinRadius"], s["storageRadius"], s["committedDepth"]) == (2, 1, 1, 2)
        assert (await (await client.get("/reservestate")).json())["storageRadius"] == 1
        addr, data, stamp = next(c for c in iter(up.cac, None) if proximity(OVERLAY, c[0]) == 0)
        r = await client.post("/chunks", data=data, headers={"Swarm-Postage-Stamp": stamp.hex()})
        await expect_error(r, 422, "below the storage radius 1")
        metrics = await (await client.get("/metrics")).text()
        assert "bee_localstore_reserve_size 2.0" in metrics
        assert "bee_localstore_reserve_size_within_radius 1.0" in metrics
        assert "bee_localstore_storage_radius 1.0" in metrics
        assert "chunkstore_reserve_capacity 524288.0" in metrics
        assert "chunkstore_reserve_committed_depth 2.0" in metrics


def test_flags_and_chainstate_file(tmp_path):
    cfg = parse_config(["--data-dir", str(tmp_path), "--reserve-capacity", "1024", "--reserve-capacity-doubling", "1",
                        "--minimum-storage-radius", "3", "--chainstate", str(tmp_path / "cs.json"), "--block-time", "12"])
    assert (cfg.reserve_capacity, cfg.reserve_capacity_doubling, cfg.minimum_storage_radius, cfg.block_time) == (
        1024, 1, 3, 12)
    env = {"CHUNKSTORE_RESERVE_MIN_EVICT_COUNT": "5", "CHUNKSTORE_DATA_DIR": str(tmp_path)}
    assert parse_config([], env=env).reserve_min_evict_count == 5
    for bad in (["--reserve-capacity-doubling", "2"], ["--minimum-storage-radius", "32"], ["--reserve-capacity", "0"]):
        with pytest.raises(SystemExit):
            parse_config(["--data-dir", str(tmp_path), *bad])
    assert load_chainstate(None) is None
    (tmp_path / "cs.json").write_text(json.dumps({"block": 5, "totalAmount": "10", "currentPrice": "2"}))
    assert load_chainstate(tmp_path / "cs.json") == ChainState(5, 10, 2)
    (tmp_path / "bad.json").write_text('{"block": 5}')
    for path in (tmp_path / "bad.json", tmp_path / "missing.json"):
        with pytest.raises(StartupError) as exc:
            load_chainstate(path)
        assert exc.value.code == 2


async def test_daemon_loads_chainstate_and_applies_the_minimum_radius(tmp_path):
    import aiohttp

    from tests.api.helpers import Daemon

    (tmp_path / "cs.json").write_text(json.dumps({"block": 42, "totalAmount": "7", "currentPrice": "3"}))
    d = Daemon(tmp_path / "data", "--overlay", OVERLAY.hex(), "--chainstate", str(tmp_path / "cs.json"),
               "--minimum-storage-radius", "2", "--reserve-capacity-doubling", "1")
    try:
        d.start()
        async with aiohttp.ClientSession() as s:
            async with s.get(d.url("/chainstate")) as r:
                assert await r.json() == {"chainTip": 42, "block": 42, "totalAmount": "7", "currentPrice": "3"}
            async with s.get(d.url("/status")) as r:
                status = await r.json()
            assert (status["storageRadius"], status["committedDepth"], status["lastSyncedBlock"]) == (2, 3, 42)
            assert status["overlay"] == OVERLAY.hex()
    finally:
        assert d.stop() == 0
    assert "chain state loaded" in d.messages()
