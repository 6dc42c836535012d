"""HTTP endpoints through aiohttp's test client: success and error paths, shapes field by field."""

from __future__ import annotations

import asyncio
import itertools
import os
import re
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from api.app import make_app
from api.config import Config
from chunkstore.reserve import ReserveStore
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.soc import make_soc
from tests.api.helpers import Uploader, simple_sample

JSON_CT = "application/json; charset=utf-8"




@web.middleware
async def fake_remote(request: web.Request, handler):  # test-only: pretend the client is elsewhere
    remote = request.headers.get("X-Test-Remote")
    if remote:
        request = request.clone(remote=remote)
    return await handler(request)


_STORES = itertools.count()


def build(
    tmp_path: Path, store: ReserveStore | None = None, sample_fn=None, own: bool | None = None, **cfg
) -> tuple[web.Application, ReserveStore]:
    """An app over ``store`` (default: a new real store under ``tmp_path``); ``own``: close it with the app."""
    own = store is None if own is None else own
    if store is None:
        store = ReserveStore(tmp_path / f"store-{next(_STORES)}")

    async def default_sample(anchor: bytes, depth: int, ct: int):
        return await asyncio.get_running_loop().run_in_executor(None, simple_sample, store, anchor, depth, ct)

    config = Config(data_dir=tmp_path, **cfg)
    app = make_app(store, config, overlay=bytes(range(32)), sample_fn=sample_fn or default_sample, close_store=own)
    app.middlewares.insert(0, fake_remote)
    return app, store


@pytest.fixture
async def env(tmp_path):
    app, store = build(tmp_path)
    up = Uploader()
    store.batches.add(up.batch())
    async with TestClient(TestServer(app)) as client:
        yield client, store, up


async def expect_error(resp, status: int, pattern: str | None = None) -> dict:
    assert resp.status == status, await resp.text()
    assert resp.headers["Content-Type"] == JSON_CT
    body = await resp.json()
    assert set(body) <= {"code", "message", "reasons"}
    assert body["code"] == status
    assert isinstance(body["message"], str) and body["message"]
    if pattern:
        assert re.search(pattern, body["message"] + " " + str(body.get("reasons", ""))), body
    return body


# ---------------------------------------------------------------- chunks


async def test_post_cac_then_get_and_head(env):
    client, store, up = env
    addr, data, stamp = up.cac(b"hello swarm")
    r = await client.post("/chunks", data=data, headers={"Swarm-Postage-Stamp": stamp.hex()})
    assert r.status == 201
    assert r.headers["Content-Type"] == JSON_CT
    assert await r.json() == {"reference": addr.hex()}
    assert store.get(addr) == data

    r = await client.get(f"/chunks/{addr.hex()}")
    assert r.status == 200
    assert r.headers["Content-Type"] == "binary/octet-stream"  # as Bee's chunkGetHandler sets it
    assert int(r.headers["Content-Length"]) == len(data)
    assert await r.read() == data

    r = await client.head(f"/chunks/{addr.hex()}")
    assert r.status == 200
    r = await client.head(f"/chunks/{'00' * 32}")
    assert r.status == 404


async def test_get_chunk_reads_swarm_cache_as_a_go_boolean(env):
    """Bee's chunkGetHandler maps Swarm-Cache to a *bool: a value Go does not read is a 400 before the lookup."""
    client, _store, up = env
    addr, data, stamp = up.cac(b"cache me")
    assert (await client.post("/chunks", data=data, headers={"Swarm-Postage-Stamp": stamp.hex()})).status == 201
    for value in ("true", "false", "1", "F", ""):
        r = await client.get(f"/chunks/{addr.hex()}", headers={"Swarm-Cache": value})
        assert r.status == 200 and await r.read() == data, value
    for value in ("maybe", "yes", "2"):
        r = await client.get(f"/chunks/{addr.hex()}", headers={"Swarm-Cache": value})
        assert r.status == 400, value
        assert "swarm-cache" in (await r.text()).lower()
        r = await client.get(f"/chunks/{'00' * 32}", headers={"Swarm-Cache": value})
        assert r.status == 400, value  # refused before the chunk is looked up, as Bee


async def test_v1_prefix_serves_the_same(env):
    client, _, up = env
    addr, data, stamp = up.cac()
    r = await client.post("/v1/chunks", data=data, headers={"swarm-postage-stamp": stamp.hex()})
    assert r.status == 201
    r = await client.get(f"/v1/chunks/{addr.hex()}")
    assert await r.read() == data


async def test_post_same_chunk_twice_is_idempotent(env):
    client, store, up = env
    addr, data, stamp = up.cac()
    for _ in range(2):
        r = await client.post("/chunks", data=data, headers={"Swarm-Postage-Stamp": stamp.hex()})
        assert r.status == 201
        assert (await r.json())["reference"] == addr.hex()
    assert store.stats()["chunks"] == 1


async def test_post_soc_body_to_chunks(env):
    client, store, up = env
    soc, stamp = up.soc(os.urandom(100))
    r = await client.post("/chunks", data=soc.data, headers={"Swarm-Postage-Stamp": stamp.hex()})
    assert r.status == 201, await r.text()
    assert await r.json() == {"reference": soc.address.hex()}
    r = await client.get(f"/chunks/{soc.address.hex()}")
    assert await r.read() == soc.data


async def test_get_missing_chunk_is_404_json(env):
    client, _, _ = env
    r = await client.get(f"/chunks/{'ab' * 32}")
    await expect_error(r, 404, "chunk not found")


@pytest.mark.parametrize("address, problem", [("zz" * 32, "invalid hex"), ("abc", "odd length")])
async def test_get_chunk_bad_address(env, address, problem):
    client, _, _ = env
    r = await client.get(f"/chunks/{address}")
    body = await expect_error(r, 400, "invalid path params")
    assert body["reasons"][0]["field"] == "address"
    assert problem in body["reasons"][0]["error"]


@pytest.mark.parametrize("address", ["ab" * 31, "ab" * 33, "ab" * 64])
async def test_a_chunk_address_of_another_length_is_not_found(env, address):
    """A bee-js sweep: downloadChunk of a 64-byte encrypted reference was a 400 here, which bee-js'
    isChunkRetrievable throws on; the reference reads hex of any length and finds no chunk: 404."""
    client, _, _ = env
    await expect_error(await client.get(f"/chunks/{address}"), 404, "chunk not found")
    assert (await client.head(f"/chunks/{address}")).status == 404


async def test_post_chunk_without_stamp_headers(env):
    client, store, up = env
    _, data, _ = up.cac()
    r = await client.post("/chunks", data=data)
    await expect_error(r, 400, "Either 'Swarm-Postage-Stamp' or 'Swarm-Postage-Batch-Id' header must be set")
    assert store.stats()["chunks"] == 0


async def test_post_chunk_batch_id_alone_needs_presigned_stamp(env):
    client, store, up = env
    _, data, _ = up.cac()
    r = await client.post("/chunks", data=data, headers={"Swarm-Postage-Batch-Id": up.batch_id.hex()})
    await expect_error(r, 400, "pre-signed stamps are required")
    assert store.stats()["chunks"] == 0


@pytest.mark.parametrize(
    "stamp_hex, pattern",
    [("xyz" * 2, "invalid header params"), ("abc", "odd length"), ("ab" * 112, "Stamp deserialization failure")],
)
async def test_post_chunk_malformed_stamp(env, stamp_hex, pattern):
    client, store, up = env
    _, data, _ = up.cac()
    r = await client.post("/chunks", data=data, headers={"Swarm-Postage-Stamp": stamp_hex})
    await expect_error(r, 400, pattern)
    assert store.stats()["chunks"] == 0


async def test_post_chunk_unknown_batch_is_404(env):
    client, store, _ = env
    other = Uploader(key=bytes.fromhex("22" * 32), seed=b"unknown")
    _, data, stamp = other.cac()
    r = await client.post("/chunks", data=data, headers={"Swarm-Postage-Stamp": stamp.hex()})
    await expect_error(r, 404, "batch with id not found")
    assert store.stats()["chunks"] == 0


async def test_post_chunk_stamp_signed_by_stranger(env):
    client, store, up = env
    addr, data, _ = up.cac()
    forger = Uploader(key=bytes.fromhex("33" * 32))
    forger.batch_id = up.batch_id  # right batch, wrong signer
    r = await client.post("/chunks", data=data, headers={"Swarm-Postage-Stamp": forger.stamp(addr).hex()})
    await expect_error(r, 400, "stamp")
    assert store.stats()["chunks"] == 0


async def test_post_chunk_stamp_for_other_chunk(env):
    client, store, up = env
    _, data, _ = up.cac()
    _, _, other_stamp = up.cac()
    r = await client.post("/chunks", data=data, headers={"Swarm-Postage-Stamp": other_stamp.hex()})
    await expect_error(r, 400, "stamp")
    assert store.stats()["chunks"] == 0


async def test_post_chunk_older_stamp_for_taken_slot_is_409(env):
    client, store, up = env
    a1, d1 = make_cac(b"first")
    a2, d2 = make_cac(b"second")
    # both in the same slot only if in the same bucket: use bucket depth 0 batch
    up0 = Uploader(key=bytes.fromhex("44" * 32), depth=4, bucket_depth=0, seed=b"b0")
    store.batches.add(up0.batch())
    s1 = up0.stamp(a1, timestamp_ns=2000, position=0)
    s2 = up0.stamp(a2, timestamp_ns=1000, position=0)
    r = await client.post("/chunks", data=d1, headers={"Swarm-Postage-Stamp": s1.hex()})
    assert r.status == 201
    r = await client.post("/chunks", data=d2, headers={"Swarm-Postage-Stamp": s2.hex()})
    await expect_error(r, 409, "conflict")
    assert not store.has(a2)
    assert store.get(a1) == d1


@pytest.mark.parametrize("size, status, pattern", [(0, 400, "insufficient data length"), (7, 400, "insufficient"),
                                                   (4202, 413, "at most 4201"), (10_000, 413, "Request Entity Too Large")])
async def test_post_chunk_body_size_limits(env, size, status, pattern):
    client, store, up = env
    addr, _, stamp = up.cac()
    r = await client.post("/chunks", data=b"\x01" * size, headers={"Swarm-Postage-Stamp": stamp.hex()})
    await expect_error(r, status, pattern)
    assert store.stats()["chunks"] == 0


async def test_post_chunk_chunked_oversize_body(env):
    client, store, up = env
    _, _, stamp = up.cac()

    async def gen():
        for _ in range(3):
            yield b"\x00" * 2000

    r = await client.post("/chunks", data=gen(), headers={"Swarm-Postage-Stamp": stamp.hex()})
    await expect_error(r, 413)
    assert store.stats()["chunks"] == 0


async def test_post_chunk_bad_swarm_tag(env):
    client, _, up = env
    _, data, stamp = up.cac()
    r = await client.post("/chunks", data=data, headers={"Swarm-Postage-Stamp": stamp.hex(), "Swarm-Tag": "x1"})
    await expect_error(r, 400, "invalid header params")


# ---------------------------------------------------------------- soc


async def test_post_soc_endpoint(env):
    client, store, up = env
    soc, stamp = up.soc(b"feed update")
    url = f"/soc/{soc.owner.hex()}/{soc.id.hex()}?sig={soc.signature.hex()}"
    r = await client.post(url, data=soc.wrapped_data, headers={"Swarm-Postage-Stamp": stamp.hex()})
    assert r.status == 201, await r.text()
    assert await r.json() == {"reference": soc.address.hex()}
    assert store.get(soc.address) == soc.data
    r = await client.get(f"/chunks/{soc.address.hex()}")
    assert await r.read() == soc.data


async def test_post_soc_signature_of_someone_else_is_401(env):
    client, store, up = env
    stranger = Signer(bytes.fromhex("55" * 32))
    _, wrapped = make_cac(b"payload")
    soc_id = os.urandom(32)
    forged = make_soc(stranger, soc_id, wrapped)
    stamp = up.stamp(forged.address)
    # claim the batch owner's address with the stranger's signature
    url = f"/soc/{up.signer.address.hex()}/{soc_id.hex()}?sig={forged.signature.hex()}"
    r = await client.post(url, data=wrapped, headers={"Swarm-Postage-Stamp": stamp.hex()})
    await expect_error(r, 401, "invalid address")
    assert store.stats()["chunks"] == 0


async def test_post_soc_garbage_signature_is_401(env):
    client, store, up = env
    soc, stamp = up.soc()
    url = f"/soc/{soc.owner.hex()}/{soc.id.hex()}?sig={'00' * 64}ff"
    r = await client.post(url, data=soc.wrapped_data, headers={"Swarm-Postage-Stamp": stamp.hex()})
    await expect_error(r, 401)
    assert store.stats()["chunks"] == 0


@pytest.mark.parametrize(
    "owner, soc_id, query, field",
    [
        ("zz" * 20, "00" * 32, "sig=" + "00" * 65, "owner"),
        ("00" * 19, "00" * 32, "sig=" + "00" * 65, "owner"),
        ("00" * 20, "00" * 31, "sig=" + "00" * 65, "id"),
        ("00" * 20, "00" * 32, "", "sig"),
        ("00" * 20, "00" * 32, "sig=", "sig"),
        ("00" * 20, "00" * 32, "sig=" + "00" * 64, "sig"),
    ],
)
async def test_post_soc_bad_params(env, owner, soc_id, query, field):
    client, _, up = env
    _, data, stamp = up.cac()
    r = await client.post(f"/soc/{owner}/{soc_id}?{query}", data=data, headers={"Swarm-Postage-Stamp": stamp.hex()})
    body = await expect_error(r, 400, "invalid (path|query) params")
    assert body["reasons"][0]["field"] == field


async def test_post_soc_body_limits(env):
    client, _, up = env
    soc, stamp = up.soc()
    url = f"/soc/{soc.owner.hex()}/{soc.id.hex()}?sig={soc.signature.hex()}"
    r = await client.post(url, data=b"1234", headers={"Swarm-Postage-Stamp": stamp.hex()})
    await expect_error(r, 400, "short chunk data")
    r = await client.post(url, data=b"\x00" * 4105, headers={"Swarm-Postage-Stamp": stamp.hex()})
    await expect_error(r, 413, "payload too large")


async def test_post_soc_without_stamp(env):
    client, _, up = env
    soc, _ = up.soc()
    url = f"/soc/{soc.owner.hex()}/{soc.id.hex()}?sig={soc.signature.hex()}"
    r = await client.post(url, data=soc.wrapped_data)
    await expect_error(r, 400, "must be set")


# ---------------------------------------------------------------- batches


def check_batch_shape(b: dict) -> None:
    assert list(b) == ["batchID", "value", "start", "owner", "depth", "bucketDepth", "immutable", "batchTTL"]
    assert isinstance(b["batchID"], str) and re.fullmatch("[0-9a-f]{64}", b["batchID"])
    assert isinstance(b["value"], str) and b["value"].isdigit()
    assert type(b["start"]) is int
    assert isinstance(b["owner"], str) and re.fullmatch("[0-9a-f]{40}", b["owner"])
    assert type(b["depth"]) is int and type(b["bucketDepth"]) is int
    assert type(b["immutable"]) is bool
    assert type(b["batchTTL"]) is int


async def test_batches_crud_from_loopback(tmp_path):
    app, store = build(tmp_path)
    up = Uploader(seed=b"crud")
    async with TestClient(TestServer(app)) as client:
        r = await client.get("/batches")
        assert r.status == 200 and r.headers["Content-Type"] == JSON_CT
        assert await r.json() == {"batches": []}

        r = await client.post("/batches", json=up.batch_json(value=123456789012345678901234567890, start=7))
        assert r.status == 201, await r.text()
        created = await r.json()
        check_batch_shape(created)
        assert created["value"] == "123456789012345678901234567890"
        assert created["start"] == 7 and created["depth"] == 20 and created["bucketDepth"] == 16
        assert created["batchTTL"] == -1

        r = await client.get("/batches")
        listed = (await r.json())["batches"]
        assert len(listed) == 1
        check_batch_shape(listed[0])
        assert listed[0] == created

        r = await client.get(f"/batches/{up.batch_id.hex()}")
        assert await r.json() == created

        # same id again: an update, 200
        r = await client.post("/batches", json=up.batch_json(value=5))
        assert r.status == 200
        assert (await r.json())["value"] == "5"

        r = await client.delete(f"/batches/{up.batch_id.hex()}")
        assert r.status == 200
        assert await r.json() == {"code": 200, "message": "OK"}
        r = await client.delete(f"/batches/{up.batch_id.hex()}")
        await expect_error(r, 404, "batch not found")
        r = await client.get(f"/batches/{up.batch_id.hex()}")
        await expect_error(r, 404)
        assert store.batches.list() == []


@pytest.mark.parametrize(
    "change, field",
    [
        ({"batchID": "ab" * 31}, "batchID"),
        ({"batchID": "zz" * 32}, "batchID"),
        ({"batchID": 5}, "batchID"),
        ({"owner": "ab" * 19}, "owner"),
        ({"owner": "0x" + "ab" * 19}, "owner"),
        ({"depth": 256}, "depth"),
        ({"depth": -1}, "depth"),
        ({"depth": "20"}, "depth"),
        ({"depth": True}, "depth"),
        ({"depth": 10, "bucketDepth": 11}, "bucketDepth"),
        ({"depth": 40, "bucketDepth": 33}, "bucketDepth"),
        ({"bucketDepth": -1}, "bucketDepth"),
        ({"value": 100}, "value"),
        ({"value": "-1"}, "value"),
        ({"value": "1e5"}, "value"),
        ({"value": ""}, "value"),
        ({"value": "12 "}, "value"),
        ({"start": -1}, "start"),
        ({"start": 1.5}, "start"),
        ({"immutable": "yes"}, "immutable"),
    ],
)
async def test_post_batch_validation(tmp_path, change, field):
    app, store = build(tmp_path)
    body = Uploader(seed=b"v").batch_json()
    body.update(change)
    async with TestClient(TestServer(app)) as client:
        r = await client.post("/batches", json=body)
        got = await expect_error(r, 400, field)
        assert got["reasons"][0]["field"] == field
        assert store.batches.list() == []


@pytest.mark.parametrize("raw", [b"", b"not json", b"[1,2]", b"{\"batchID\": 1", b"{}"])
async def test_post_batch_bad_json(tmp_path, raw):
    app, store = build(tmp_path)
    async with TestClient(TestServer(app)) as client:
        r = await client.post("/batches", data=raw, headers={"Content-Type": "application/json"})
        await expect_error(r, 400)
        assert store.batches.list() == []


async def test_batch_changes_from_elsewhere_need_the_token(tmp_path):
    up = Uploader(seed=b"auth")
    # no token configured: refused from non-loopback
    app, store = build(tmp_path)
    async with TestClient(TestServer(app)) as client:
        remote = {"X-Test-Remote": "10.1.2.3"}
        r = await client.post("/batches", json=up.batch_json(), headers=remote)
        await expect_error(r, 403, "loopback only")
        r = await client.delete(f"/batches/{up.batch_id.hex()}", headers=remote)
        await expect_error(r, 403)
        r = await client.get("/batches", headers=remote)  # reading is open
        assert r.status == 200
        assert store.batches.list() == []

    app, store = build(tmp_path, admin_token="s3cret")
    async with TestClient(TestServer(app)) as client:
        remote = {"X-Test-Remote": "2001:db8::1"}
        r = await client.post("/batches", json=up.batch_json(), headers=remote)
        body = await expect_error(r, 401, "token required")
        assert r.headers["WWW-Authenticate"].startswith("Bearer")
        r = await client.post("/batches", json=up.batch_json(), headers={**remote, "Authorization": "Bearer nope"})
        await expect_error(r, 401, "wrong")
        assert store.batches.list() == []
        r = await client.post("/batches", json=up.batch_json(), headers={**remote, "Authorization": "Bearer s3cret"})
        assert r.status == 201
        r = await client.delete(f"/batches/{up.batch_id.hex()}", headers={**remote, "Authorization": "Bearer s3cret"})
        assert r.status == 200
        # loopback still needs no token, also via an IPv4-mapped address
        r = await client.post("/batches", json=up.batch_json(), headers={"X-Test-Remote": "::ffff:127.0.0.1"})
        assert r.status == 201
        del body


async def test_batch_path_param_errors(env):
    client, _, _ = env
    r = await client.get("/batches/1234")
    body = await expect_error(r, 400, "invalid path params")
    assert body["reasons"][0]["field"] == "batch_id"
    r = await client.delete("/batches/zz")
    await expect_error(r, 400)


# ---------------------------------------------------------------- status family


async def test_health_readiness_root(env):
    client, _, _ = env
    r = await client.get("/health")
    assert r.status == 200 and r.headers["Content-Type"] == JSON_CT
    body = await r.json()
    assert list(body) == ["status", "version", "apiVersion"]
    assert body["status"] == "ok"
    assert isinstance(body["version"], str)
    assert re.fullmatch(r"\d+\.\d+\.\d+", body["apiVersion"])

    r = await client.get("/readiness")
    assert r.status == 200
    body = await r.json()
    assert body["status"] == "ready" and set(body) == {"status", "version", "apiVersion"}

    r = await client.get("/")
    assert r.status == 200
    assert "chunkstore" in await r.text()


async def test_routes_bee_serves_without_a_method_table_answer_every_method(env):
    """Bee mounts /, /robots.txt, /health, /readiness and /metrics as plain handlers (pkg/api/router.go: no
    jsonhttp.MethodHandler), so every method gets the handler's answer, HEAD and OPTIONS included, not a
    405; /robots.txt tells crawlers to stay out, as on a Bee gateway."""
    client, _, _ = env
    for method in ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
        for path in ("/", "/robots.txt", "/health", "/readiness", "/metrics"):
            r = await client.request(method, path)
            assert r.status == 200, (method, path, r.status)
            body = await r.read()
            assert (body == b"") == (method == "HEAD"), (method, path)
        r = await client.request(method, "/robots.txt")
        if method != "HEAD":
            assert await r.text() == "User-agent: *\nDisallow: /\n"
            assert (await (await client.request(method, "/health")).json())["status"] == "ok"
    assert (await client.request("POST", "/v1/health")).status == 404  # technical routes have no /v1


async def test_readiness_not_ready(tmp_path):
    app, _ = build(tmp_path)
    from api.state import STATE

    app[STATE].ready = False
    async with TestClient(TestServer(app)) as client:
        r = await client.get("/readiness")
        assert r.status == 400
        assert (await r.json())["status"] == "notReady"


async def test_status_shape(env):
    client, store, up = env
    for _ in range(3):
        _, data, stamp = up.cac()
        assert (await client.post("/chunks", data=data, headers={"Swarm-Postage-Stamp": stamp.hex()})).status == 201
    r = await client.get("/status")
    assert r.status == 200
    s = await r.json()
    assert list(s) == [
        "overlay", "proximity", "beeMode", "reserveSize", "reserveSizeWithinRadius", "pullsyncRate",
        "storageRadius", "connectedPeers", "neighborhoodSize", "batchCommitment", "isReachable",
        "lastSyncedBlock", "committedDepth", "isWarmingUp",
    ]
    assert s["overlay"] == bytes(range(32)).hex()
    assert s["beeMode"] in ("full", "light", "ultra-light", "dev")
    for k in ("proximity", "reserveSize", "reserveSizeWithinRadius", "pullsyncRate", "storageRadius",
              "connectedPeers", "neighborhoodSize", "batchCommitment", "lastSyncedBlock", "committedDepth"):
        assert type(s[k]) in (int, float) and type(s[k]) is not bool, k
    for k in ("isReachable", "isWarmingUp"):
        assert type(s[k]) is bool
    assert s["reserveSize"] == 3 and s["reserveSizeWithinRadius"] == 3
    assert s["batchCommitment"] == 1 << 20

    r = await client.get("/reservestate")
    rs = await r.json()
    assert rs == {"radius": 0, "storageRadius": 0, "commitment": 1 << 20, "reserveCapacityDoubling": 0}


async def test_unknown_route_and_method(env):
    client, _, _ = env
    r = await client.get("/nope")
    await expect_error(r, 404, "Not Found")
    r = await client.put("/chunks")
    await expect_error(r, 405, "Method Not Allowed")
    assert "POST" in r.headers["Allow"]


# ---------------------------------------------------------------- metrics


async def test_metrics_exposition(env):
    client, _, up = env
    addr, data, stamp = up.cac()
    await client.post("/chunks", data=data, headers={"Swarm-Postage-Stamp": stamp.hex()})
    await client.get(f"/chunks/{addr.hex()}")
    await client.get(f"/chunks/{'00' * 32}")
    r = await client.get("/metrics")
    assert r.status == 200
    assert r.headers["Content-Type"].startswith("text/plain")
    text = await r.text()
    assert "chunkstore_reserve_chunks 1.0" in text
    assert "bee_localstore_reserve_size 1.0" in text
    assert 'chunkstore_chunk_puts_total{outcome="stored"} 1.0' in text
    assert 'chunkstore_chunk_gets_total{outcome="hit"} 1.0' in text
    assert 'chunkstore_chunk_gets_total{outcome="miss"} 1.0' in text
    assert 'chunkstore_http_request_duration_seconds_bucket{le="0.005",method="POST",route="/chunks"}' in text
    assert 'route="/chunks/{address}"' in text
    assert "# TYPE bee_localstore_reserve_sample_duration_seconds histogram" in text
    assert "bee_localstore_reserve_sample_last_run_timestamp" in text


async def test_many_apps_have_separate_registries(tmp_path):
    from api.state import STATE

    a1, s1 = build(tmp_path)
    a2, s2 = build(tmp_path)
    try:
        assert a1[STATE].metrics.registry is not a2[STATE].metrics.registry
    finally:
        s1.close()
        s2.close()


async def test_cors_and_options(tmp_path):
    app, _ = build(tmp_path, cors_allowed_origins=("https://app.example",))
    async with TestClient(TestServer(app)) as client:
        r = await client.options("/chunks", headers={"Origin": "https://app.example"})
        assert r.status == 204
        assert r.headers["Access-Control-Allow-Methods"] == "POST"
        assert r.headers["Access-Control-Allow-Origin"] == "https://app.example"
        assert "Swarm-Postage-Stamp" in r.headers["Access-Control-Allow-Headers"]
        r = await client.get("/health", headers={"Origin": "https://evil.example"})
        assert r.status == 200 and "Access-Control-Allow-Origin" not in r.headers
        r = await client.get(f"/chunks/{'00' * 32}", headers={"Origin": "https://app.example"})
        assert r.status == 404 and r.headers["Access-Control-Allow-Origin"] == "https://app.example"


async def test_cors_preflight_names_the_routes_methods(tmp_path):
    """Bee's jsonhttp.HandleMethods (pkg/jsonhttp/handlers.go): on a CORS request the route's methods replace
    corsHandler's generic Access-Control-Allow-Methods (which lacks PATCH), and there is no Allow; without
    CORS the methods are the Allow header. Either way sorted and joined with ", "."""
    app, _ = build(tmp_path, cors_allowed_origins=("https://app.example",))
    origin = {"Origin": "https://app.example", "Access-Control-Request-Method": "PATCH"}
    async with TestClient(TestServer(app)) as client:
        r = await client.options("/tags/1", headers=origin)
        assert r.status == 204
        assert r.headers["Access-Control-Allow-Methods"] == "DELETE, GET, PATCH"  # a browser may PATCH a tag
        assert "Allow" not in r.headers
        r = await client.options("/tags/1")
        assert r.status == 204 and r.headers["Allow"] == "DELETE, GET, PATCH"
        assert "Access-Control-Allow-Methods" not in r.headers
        r = await client.delete("/chunks", headers={"Origin": "https://app.example"})
        assert r.status == 405 and r.headers["Access-Control-Allow-Methods"] == "POST" and "Allow" not in r.headers
        r = await client.delete(f"/bytes/{'00' * 32}")
        assert r.status == 405 and r.headers["Allow"] == "GET, HEAD"
        r = await client.get("/health", headers={"Origin": "https://app.example"})
        assert r.headers["Access-Control-Allow-Methods"] == "GET, HEAD, OPTIONS, POST, PUT, DELETE"


async def test_concurrent_uploads_are_grouped_and_a_bad_one_fails_alone(env):
    client, store, up = env
    good = [up.cac(os.urandom(100)) for _ in range(40)]
    socs = [up.soc(os.urandom(50)) for _ in range(5)]
    addr_bad, data_bad, _ = up.cac(b"bad")
    bad_stamp = up.stamp(os.urandom(32))  # signed for another address
    reqs = [client.post("/chunks", data=d, headers={"Swarm-Postage-Stamp": s.hex()}) for _, d, s in good]
    reqs += [client.post("/chunks", data=soc.data, headers={"Swarm-Postage-Stamp": s.hex()}) for soc, s in socs]
    reqs.insert(20, client.post("/chunks", data=data_bad, headers={"Swarm-Postage-Stamp": bad_stamp.hex()}))
    rs = await asyncio.gather(*reqs)
    statuses = [r.status for r in rs]
    assert statuses[20] == 400
    assert statuses[:20] + statuses[21:] == [201] * 45
    for a, d, _ in good:
        assert store.get(a) == d
    for soc, _ in socs:
        assert store.get(soc.address) == soc.data
    assert not store.has(addr_bad)
    from api.state import STATE

    queue = client.server.app[STATE].puts
    assert queue.groups < len(reqs)  # at least some uploads shared a commit
