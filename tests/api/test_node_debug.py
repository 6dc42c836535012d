"""``/status/neighborhoods``, ``/debugstore`` and ``/loggers``: the reference node's shapes, honest numbers."""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from api.app import make_app
from api.config import Config
from chunkstore.reserve import ReserveOptions, ReserveStore
from tests.api.helpers import Uploader

OVERLAY = bytes.fromhex("a5" * 32)


@web.middleware
async def fake_remote(request: web.Request, handler):  # test-only: pretend the client is elsewhere
    remote = request.headers.get("X-Test-Remote")
    if remote:
        request = request.clone(remote=remote)
    return await handler(request)


async def client_for(tmp_path: Path, doubling: int = 0, **config: object) -> tuple[TestClient, ReserveStore]:
    store = ReserveStore(tmp_path / "store", reserve=ReserveOptions(capacity=1000, doubling=doubling))
    app = make_app(store, Config(data_dir=tmp_path, **config), overlay=OVERLAY, close_store=True)
    app.middlewares.insert(0, fake_remote)
    client = TestClient(TestServer(app))
    await client.start_server()
    return client, store


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[tuple[TestClient, ReserveStore, Uploader]]:
    client, store = await client_for(tmp_path)
    up = Uploader()
    store.batches.add(up.batch())
    try:
        yield client, store, up
    finally:
        await client.close()


@pytest.fixture
def restore_levels() -> Iterator[None]:
    saved = {name: logging.getLogger(name).level for name in ("api", "api.routes_chunkstream", "chunkstore")}
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)


def b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


# ---------------------------------------------------------------- /status/neighborhoods


async def test_neighborhoods_of_a_fresh_node(env) -> None:
    client, _, _ = env
    resp = await client.get("/status/neighborhoods")
    assert resp.status == 200
    body = await resp.json()
    # radius 0, no doubling: one neighbourhood, named with 256 zeros as the reference names it
    assert body == {"neighborhoods": [{"neighborhood": "0" * 256, "reserveSizeWithinRadius": 0, "proximity": 0}]}
    assert (await client.get("/v1/status/neighborhoods")).status == 200


async def test_neighborhoods_with_doubling_count_each_sister(tmp_path: Path) -> None:
    client, store = await client_for(tmp_path, doubling=1)
    try:
        up = Uploader()
        store.batches.add(up.batch())
        addresses = []
        for _ in range(40):
            address, data, stamp = up.cac()
            store.put(data, stamp)
            addresses.append(address)
        body = await (await client.get("/status/neighborhoods")).json()
        found = body["neighborhoods"]
        # radius 0, doubling 1: the overlay's neighbourhood "1" and its sister "0"
        assert [n["neighborhood"] for n in found] == ["0", "1"]
        own_bit = OVERLAY[0] >> 7
        for n in found:
            bit = int(n["neighborhood"])
            assert n["reserveSizeWithinRadius"] == sum(1 for a in addresses if a[0] >> 7 == bit)
            assert n["proximity"] == (1 if bit == own_bit else 0)
        assert sum(n["reserveSizeWithinRadius"] for n in found) == 40
    finally:
        await client.close()


# ---------------------------------------------------------------- /debugstore


async def test_debugstore_shape_and_counts(env) -> None:
    client, store, up = env
    address, data, stamp = up.cac(b"twice")
    store.put(data, stamp)
    store.put(data, up.stamp(address))  # the same chunk under a second stamp: one chunk, two entries
    for _ in range(3):
        store.put(*up.cac()[1:])
    resp = await client.get("/debugstore")
    assert resp.status == 200
    body = await resp.json()
    assert list(body) == ["Upload", "Pinning", "Cache", "Reserve", "ChunkStore"]
    assert body["ChunkStore"] == {"TotalChunks": 4, "SharedSlots": 1, "ReferenceCount": 5}
    reserve = body["Reserve"]
    assert reserve["TotalSize"] == 5 and reserve["SizeWithinRadius"] == 5 and reserve["Capacity"] == 1000
    assert reserve["LastBinIDs"] == [0] * 32 and reserve["Epoch"] == 0
    assert body["Upload"] == {"TotalUploaded": 0, "TotalSynced": 0, "PendingUpload": 0}
    assert set(body["Pinning"]) == {"TotalCollections", "TotalChunks"}
    assert set(body["Cache"]) == {"Size", "Capacity"}
    assert (await client.get("/v1/debugstore")).status == 404  # root only, as the reference mounts it
    # Pins and the cache as the daemon counts them elsewhere (an operator sweep found them always 0 here)
    assert (await client.post(f"/pins/{address.hex()}")).status == 201
    body = await (await client.get("/debugstore")).json()
    status = await (await client.get("/chunkstore/status")).json()
    assert body["Pinning"] == {"TotalCollections": 1, "TotalChunks": 1} == {
        "TotalCollections": status["pins"]["count"], "TotalChunks": status["pins"]["chunks"]}
    assert body["Cache"] == {"Size": status["cache"]["size"], "Capacity": status["cache"]["capacity"]}
    assert body["Cache"]["Capacity"] > 0


# ---------------------------------------------------------------- /loggers


async def test_loggers_list_the_daemon_loggers(env) -> None:
    client, _, _ = env
    body = await (await client.get("/loggers")).json()
    names = {lg["subsystem"] for lg in body["loggers"]}
    assert {"api.routes_chunkstream", "api.middleware"} <= names
    for lg in body["loggers"]:
        assert set(lg) == {"logger", "verbosity", "subsystem", "id"}
        assert base64.urlsafe_b64decode(lg["id"]).decode() == lg["subsystem"]
        assert lg["logger"] == lg["subsystem"].replace(".", "/")
        assert lg["verbosity"] in {"none", "error", "warning", "info", "debug", "all"}
    node = body["tree"]["api"]["/"]["routes_chunkstream"]
    assert node["+"][0].endswith("|api.routes_chunkstream")


async def test_loggers_filter_and_set_verbosity(env, restore_levels) -> None:
    client, _, _ = env
    only = await (await client.get(f"/loggers/{b64('^api[.]routes_chunkstream$')}")).json()
    assert [lg["subsystem"] for lg in only["loggers"]] == ["api.routes_chunkstream"]
    resp = await client.put(f"/loggers/{b64('api.routes_chunkstream')}/debug")
    assert resp.status == 200 and await resp.json() == {"code": 200, "message": "OK"}
    assert logging.getLogger("api.routes_chunkstream").getEffectiveLevel() == logging.DEBUG
    only = await (await client.get(f"/loggers/{b64('api.routes_chunkstream')}")).json()
    assert only["loggers"][0]["verbosity"] == "debug"
    # an expression sets every logger it matches
    assert (await client.put(f"/loggers/{b64('^chunkstore')}/none")).status == 200
    assert logging.getLogger("chunkstore").level > logging.CRITICAL


async def test_logger_errors(env) -> None:
    client, _, _ = env
    bad_regex = await client.get(f"/loggers/{b64('([')}")
    assert bad_regex.status == 400
    assert (await bad_regex.json())["reasons"][0]["field"] == "exp"
    assert (await client.get("/loggers/%%%")).status == 400
    bad_level = await client.put(f"/loggers/{b64('api')}/loud")
    assert bad_level.status == 400 and (await bad_level.json())["reasons"][0]["field"] == "verbosity"
    remote = await client.put(f"/loggers/{b64('api')}/debug", headers={"X-Test-Remote": "192.0.2.7"})
    assert remote.status == 403  # changing the daemon is for loopback or the admin token
