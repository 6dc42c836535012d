"""Tags, pins and the cache through the HTTP API: Bee's shapes and status codes, counters that add up,
pinned content kept, uploads outside the storage radius still downloadable."""

from __future__ import annotations

import json
import os
import re
import time

import pytest
from aiohttp.test_utils import TestClient, TestServer
from yarl import URL

from api.state import STATE
from chunkstore.swarm.cac import is_valid_cac, make_cac
from chunkstore.swarm.proximity import proximity
from chunkstore.swarm.traversal import tree_addresses
from tests.api.contenthelpers import Ctx, register_batch, upload_headers
from tests.api.test_content_api import expect_error
from tests.store.helpers import SOC_KEY, Stamper, make_batch, signer

OVERLAY = bytes(range(32))  # content_app's
TAG_KEYS = {"split", "seen", "stored", "sent", "synced", "uid", "address", "startedAt"}
GO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$")


def pin_app(tmp_path, cache_capacity: int):
    """``content_app`` over a store whose cache keeps ``cache_capacity`` chunks (what --cache-capacity sets)."""
    from api.app import make_app
    from api.config import Config
    from chunkstore.reserve import ReserveOptions, ReserveStore
    from chunkstore.swarm.signer import Signer
    from tests.api.contenthelpers import NODE_KEY

    store = ReserveStore(tmp_path / "store", reserve=ReserveOptions(cache_capacity=cache_capacity))

    async def no_sample(anchor: bytes, depth: int, ct: int):
        raise AssertionError("no sampling here")

    app = make_app(store, Config(data_dir=tmp_path, cache_capacity=cache_capacity), overlay=OVERLAY,
                   sample_fn=no_sample, close_store=True, signer=Signer(NODE_KEY))
    return app, store


@pytest.fixture
async def ctx(tmp_path):
    app, store = pin_app(tmp_path, cache_capacity=50)
    async with TestClient(TestServer(app)) as client:
        await register_batch(client)
        yield Ctx(client, store, tmp_path)


def state(ctx: Ctx):
    return ctx.client.server.app[STATE]


async def new_tag(ctx: Ctx) -> dict:
    r = await ctx.client.post("/tags")
    assert r.status == 201, await r.text()
    return dict(await r.json())


async def get_tag(ctx: Ctx, uid: int) -> dict:
    r = await ctx.client.get(f"/tags/{uid}")
    assert r.status == 200, await r.text()
    return dict(await r.json())


async def upload(ctx: Ctx, data: bytes, path: str = "/bytes", **headers: str):
    r = await ctx.client.post(path, data=data, headers=upload_headers(**headers))
    assert r.status == 201, await r.text()
    return r, (await r.json())["reference"]


# ---------------------------------------------------------------- tags


async def test_tag_shape_and_lifecycle(ctx):
    before = time.time()
    r = await ctx.client.post("/tags")
    assert r.status == 201 and r.headers["Cache-Control"] == "no-cache, private, max-age=0"
    tag = await r.json()
    assert set(tag) == TAG_KEYS
    assert [tag[k] for k in ("split", "seen", "stored", "sent", "synced", "address")] == [0, 0, 0, 0, 0, ""]
    assert GO_TIME.match(tag["startedAt"]), tag["startedAt"]
    started = time.mktime(time.strptime(tag["startedAt"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
    assert before - 2 <= started <= time.time() + 1
    second = await new_tag(ctx)
    assert second["uid"] == tag["uid"] + 1
    assert await get_tag(ctx, tag["uid"]) == tag
    listed = await (await ctx.client.get("/tags")).json()
    assert [t["uid"] for t in listed["tags"]] == [tag["uid"], second["uid"]]
    page = await (await ctx.client.get("/tags?offset=1&limit=1")).json()
    assert [t["uid"] for t in page["tags"]] == [second["uid"]]
    address = os.urandom(32).hex()
    r = await ctx.client.patch(f"/tags/{tag['uid']}", json={"address": address})
    assert r.status == 200 and await r.json() == {"code": 200, "message": "ok"}
    assert (await get_tag(ctx, tag["uid"]))["address"] == address
    r = await ctx.client.patch(f"/v1/tags/{tag['uid']}", json={"reference": "ab" * 32})  # bee-js 12's field
    assert r.status == 200 and (await get_tag(ctx, tag["uid"]))["address"] == "ab" * 32
    as_bee_js_sends_it = {"reference": {"bytes": {str(i): i for i in range(32)}, "length": 32}}
    r = await ctx.client.patch(f"/tags/{tag['uid']}", json=as_bee_js_sends_it)
    assert r.status == 200 and (await get_tag(ctx, tag["uid"]))["address"] == bytes(range(32)).hex()
    r = await ctx.client.delete(f"/tags/{tag['uid']}")
    assert r.status == 204
    await expect_error(await ctx.client.get(f"/tags/{tag['uid']}"), 404, "^tag not present $")
    await expect_error(await ctx.client.delete(f"/tags/{tag['uid']}"), 404, "tag not present")
    await expect_error(await ctx.client.patch(f"/tags/{tag['uid']}", json={}), 404, "tag not present")


@pytest.mark.parametrize("uid", ["abc", "0", "-1", "18446744073709551616", "1.5"])
async def test_bad_tag_ids_are_400(ctx, uid):
    for method in ("get", "delete", "patch"):
        r = await getattr(ctx.client, method)(f"/tags/{uid}")
        body = await expect_error(r, 400, "invalid path params")
        assert body["reasons"][0]["field"] == "id"


async def test_bad_tag_queries_and_bodies(ctx):
    await expect_error(await ctx.client.get("/tags?limit=x"), 400, "invalid query params")
    await expect_error(await ctx.client.get("/tags?offset=-1"), 400, "invalid query params")
    uid = (await new_tag(ctx))["uid"]
    await expect_error(await ctx.client.patch(f"/tags/{uid}", data=b"{nope"), 400, "unmarshaling")
    await expect_error(await ctx.client.patch(f"/tags/{uid}", json={"address": "zz"}), 400, "address")
    await expect_error(await ctx.client.patch(f"/tags/{uid}", json={"address": "ab" * 31}), 400, "32 or 64")
    await expect_error(await ctx.client.patch(f"/tags/{uid}", data=b" " * 2000), 413)
    bad = {"reference": {"bytes": {"0": 1}, "length": 32}}
    await expect_error(await ctx.client.patch(f"/tags/{uid}", json=bad), 400, "32 or 64 bytes")


async def test_queries_are_read_as_go_reads_them(ctx):
    """Bee's handlers read r.URL.Query() (Go's url.ParseQuery): a pair holding ";" or a malformed escape is
    left out, so the parameter takes its default, where aiohttp kept "1;limit=2" as the offset's value."""
    uids = [(await new_tag(ctx))["uid"] for _ in range(3)]
    c = ctx.client
    for query in ("offset=1;limit=2", "limit=%zz", "offset=%"):
        r = await c.get(URL(f"/tags?{query}", encoded=True))
        assert r.status == 200, (query, await r.text())
        assert [t["uid"] for t in (await r.json())["tags"]] == uids, query
    r = await c.get(URL("/tags?limit=%zz&limit=1&offset=1", encoded=True))  # the bad pair left out, the next value read
    assert [t["uid"] for t in (await r.json())["tags"]] == uids[1:2]
    _, reference = await upload(ctx, b"pinned", **{"Swarm-Pin": "true"})
    r = await c.get(URL("/pins/check?ref=%zz", encoded=True))  # no ref: every pin
    assert r.status == 200 and json.loads(await r.text())["reference"] == reference
    await expect_error(await c.get(URL("/tags?limit=x%3B", encoded=True)), 400, "invalid query params")  # an escaped ";" is a value


async def test_upload_counters_add_up(ctx):
    data = os.urandom(70 * 4096 + 5)
    uid = (await new_tag(ctx))["uid"]
    r, reference = await upload(ctx, data, **{"Swarm-Tag": str(uid), "Swarm-Redundancy-Level": "0"})
    assert r.headers["Swarm-Tag"] == str(uid)
    tag = await get_tag(ctx, uid)
    chunks = 70 + 1 + 1  # leaves, the short last leaf, the root
    assert (tag["split"], tag["seen"], tag["stored"], tag["synced"], tag["sent"]) == (chunks, 0, chunks, chunks, 0)
    assert tag["address"] == reference
    # the same content again, under another tag: every chunk is seen, nothing new is stored
    other = (await new_tag(ctx))["uid"]
    await upload(ctx, data, **{"Swarm-Tag": str(other), "Swarm-Redundancy-Level": "0"})
    again = await get_tag(ctx, other)
    assert (again["split"], again["seen"], again["stored"], again["synced"]) == (chunks, chunks, 0, 0)
    assert again["seen"] + again["synced"] == again["split"], "what swarm-cli upload --sync waits for"


async def test_upload_without_tag_gets_a_new_one_unless_direct(ctx):
    r, reference = await upload(ctx, b"hello tags")
    uid = int(r.headers["Swarm-Tag"])
    tag = await get_tag(ctx, uid)
    assert tag["address"] == reference and tag["split"] == tag["synced"] > 0
    r, _ = await upload(ctx, b"direct", **{"Swarm-Deferred-Upload": "false"})
    assert "Swarm-Tag" not in r.headers
    r, _ = await upload(ctx, b"direct but pinned", **{"Swarm-Deferred-Upload": "false", "Swarm-Pin": "true"})
    assert "Swarm-Tag" in r.headers  # the reference makes a tag for a pinned upload
    await expect_error(await ctx.client.post("/bytes", data=b"x", headers=upload_headers(**{"Swarm-Tag": "999"})),
                       404, "tag not found")


async def test_a_direct_upload_counts_under_no_tag_even_a_named_one(ctx):
    """bee-js' uploadData(..., {deferred: false, tag}) with a stale tag got 404 "tag not found" here; the reference
    reads the tag only for a deferred or pinned upload, so a direct one neither checks nor counts it."""
    direct = {"Swarm-Deferred-Upload": "false"}
    r, _ = await upload(ctx, b"direct, stale tag", **direct, **{"Swarm-Tag": "999"})
    assert "Swarm-Tag" not in r.headers
    uid = (await new_tag(ctx))["uid"]
    r, _ = await upload(ctx, b"direct, live tag", **direct, **{"Swarm-Tag": str(uid)})
    assert "Swarm-Tag" not in r.headers
    assert (await get_tag(ctx, uid))["split"] == 0  # nothing counted under it
    r = await ctx.client.post("/bzz?name=a.txt", data=b"direct file", headers=upload_headers(
        **direct, **{"Swarm-Tag": "999", "Content-Type": "text/plain"}))
    assert r.status == 201, await r.text()
    # pinned, the tag is read again (and must exist)
    await expect_error(await ctx.client.post("/bytes", data=b"x", headers=upload_headers(
        **direct, **{"Swarm-Tag": "999", "Swarm-Pin": "true"})), 404, "tag not found")


async def test_chunk_uploads_count_under_a_named_tag(ctx):
    batch = make_batch(7)
    assert (await ctx.client.post("/batches", json={
        "batchID": batch.id.hex(), "owner": batch.owner.hex(), "depth": batch.depth, "bucketDepth": batch.bucket_depth,
        "immutable": False, "value": str(batch.value), "start": 1})).status == 201
    stamper = Stamper(batch)
    uid = (await new_tag(ctx))["uid"]
    address, data = make_cac(b"a single chunk")
    headers = {"Swarm-Postage-Stamp": stamper.stamp(address).to_bytes().hex(), "Swarm-Tag": str(uid)}
    r = await ctx.client.post("/chunks", data=data, headers=headers)
    assert r.status == 201 and r.headers["Swarm-Tag"] == str(uid)
    headers["Swarm-Postage-Stamp"] = stamper.stamp(address).to_bytes().hex()
    assert (await ctx.client.post("/chunks", data=data, headers=headers)).status == 201
    tag = await get_tag(ctx, uid)
    assert (tag["split"], tag["seen"], tag["stored"], tag["synced"], tag["address"]) == (2, 1, 1, 1, "")  # again: seen
    r = await ctx.client.post("/chunks", data=data, headers={**headers, "Swarm-Tag": "12345"})
    await expect_error(r, 404, "tag not found")
    r = await ctx.client.post("/chunks", data=data, headers={"Swarm-Postage-Stamp": headers["Swarm-Postage-Stamp"]})
    assert r.status == 201 and "Swarm-Tag" not in r.headers


# ---------------------------------------------------------------- pins


async def test_pin_on_upload_and_the_pin_endpoints(ctx):
    _, reference = await upload(ctx, os.urandom(3 * 4096), **{"Swarm-Pin": "true"})
    assert await (await ctx.client.get("/pins")).json() == {"references": [reference]}
    assert await (await ctx.client.get(f"/pins/{reference}")).json() == {"reference": reference}
    r = await ctx.client.get("/pins/check")
    assert r.status == 200 and r.headers["Content-Type"] == "application/json; charset=utf-8"
    lines = (await r.text()).splitlines()
    assert len(lines) == 1
    line = __import__("json").loads(lines[0])
    pin = ctx.store.pins.get(bytes.fromhex(reference))
    assert line == {"reference": reference, "total": pin.chunks, "missing": 0, "invalid": 0} and pin.chunks > 3
    r = await ctx.client.delete(f"/pins/{reference}")
    assert r.status == 200 and await r.json() == {"code": 200, "message": "OK"}
    await expect_error(await ctx.client.get(f"/pins/{reference}"), 404)
    await expect_error(await ctx.client.delete(f"/pins/{reference}"), 404)
    assert await (await ctx.client.get("/pins")).json() == {"references": []}
    assert (await ctx.client.get(f"/bytes/{reference}")).status == 200, "unpinned: still in the reserve"


async def test_pinning_an_uploaded_manifest_and_its_errors(ctx):
    r = await ctx.client.post("/bzz?name=a.txt", data=b"pin me" * 1000,
                              headers=upload_headers(**{"Content-Type": "text/plain"}))
    reference = (await r.json())["reference"]
    r = await ctx.client.post(f"/pins/{reference}")
    assert r.status == 201 and await r.json() == {"code": 201, "message": "Created"}
    r = await ctx.client.post(f"/pins/{reference}")
    assert r.status == 200 and await r.json() == {"code": 200, "message": "OK"}
    pinned = set(ctx.store.pins.addresses(bytes.fromhex(reference)))
    assert len(pinned) > 4  # manifest nodes, the file, its parities
    await expect_error(await ctx.client.post(f"/pins/{os.urandom(32).hex()}"), 404, "pin collection failed")
    await expect_error(await ctx.client.post("/pins/abcd"), 400, "invalid path params")
    await expect_error(await ctx.client.post(f"/pins/{'zz' * 32}"), 400, "invalid path params")
    await expect_error(await ctx.client.get("/pins/check?ref=12"), 400, "invalid query params")
    await expect_error(await ctx.client.get(f"/pins/check?ref={os.urandom(32).hex()}"), 404)
    assert ctx.store.pins.list() == [bytes.fromhex(reference)] and ctx.store.pins.in_flux() == {}


@pytest.mark.parametrize("path", ["/bytes", "/bzz?name=secret.bin"])
async def test_encrypted_references_pin_every_chunk_the_upload_stored(ctx, path):
    """An encrypted reference (address | key) pins the whole tree, manifest and file alike, parities
    included. ``Swarm-Pin`` on the upload keeps every chunk it stored (the roots' replicas too);
    ``POST /pins`` later keeps the tree the reference names, not the replicas (as on Bee)."""
    data = os.urandom(130 * 4096 + 17)  # two levels of intermediates
    headers = {"Swarm-Encrypt": "true", "Content-Type": "application/octet-stream"}
    uid = (await new_tag(ctx))["uid"]
    _, pinned = await upload(ctx, data, path, **headers, **{"Swarm-Pin": "true", "Swarm-Tag": str(uid)})
    assert len(pinned) == 128
    stored = (await get_tag(ctx, uid))["stored"]
    assert stored > 133 and ctx.store.pins.get(bytes.fromhex(pinned)).chunks == stored
    # what the upload kept is the tree plus the dispersed replicas of its roots, which are SOCs
    kept = set(ctx.store.pins.addresses(bytes.fromhex(pinned)))
    tree = set(tree_addresses(bytes.fromhex(pinned), ctx.store.get))
    replicas = kept - tree
    assert tree <= kept and replicas
    assert not any(is_valid_cac(a, ctx.store.get(a)) for a in replicas)
    assert await (await ctx.client.get(f"/pins/{pinned}")).json() == {"reference": pinned}
    line = await (await ctx.client.get(f"/pins/check?ref={pinned}")).json()
    assert (line["reference"], line["total"], line["missing"], line["invalid"]) == (pinned, stored, 0, 0)

    later_uid = (await new_tag(ctx))["uid"]
    _, later = await upload(ctx, data, path, **headers, **{"Swarm-Tag": str(later_uid)})
    assert later != pinned, "a new key for every upload"
    await expect_error(await ctx.client.get(f"/pins/{later}"), 404)
    assert (await ctx.client.post(f"/pins/{later}")).status == 201
    later_stored = (await get_tag(ctx, later_uid))["stored"]
    addresses = set(ctx.store.pins.addresses(bytes.fromhex(later)))
    assert len(addresses) == ctx.store.pins.get(bytes.fromhex(later)).chunks == later_stored - len(replicas)
    assert addresses == set(tree_addresses(bytes.fromhex(later), ctx.store.get)), "the tree, not its replicas"
    assert not addresses & set(ctx.store.pins.addresses(bytes.fromhex(pinned))), "encrypted: no chunk shared"
    assert sorted((await (await ctx.client.get("/pins")).json())["references"]) == sorted([pinned, later])

    # the address with a wrong key is no tree: refused, and nothing is left of the attempt
    wrong_key = later[:64] + os.urandom(32).hex()
    r = await ctx.client.post(f"/pins/{wrong_key}")
    # the root decrypts to noise: nearly always a bad span (422), else references to absent chunks (404)
    assert r.status in (404, 422) and "pin collection failed" in await r.text()
    assert ctx.store.pins.in_flux() == {} and len(ctx.store.pins.list()) == 2
    assert (await ctx.client.delete(f"/pins/{later}")).status == 200
    assert ctx.store.pins.list() == [bytes.fromhex(pinned)]


async def test_pin_check_reports_a_missing_chunk(ctx):
    _, reference = await upload(ctx, os.urandom(5 * 4096), **{"Swarm-Pin": "true", "Swarm-Redundancy-Level": "0"})
    victim, damaged = sorted(ctx.store.pins.addresses(bytes.fromhex(reference)))[:2]
    shard = ctx.store.shard(ctx.store.shard_of(victim))
    with shard.env.begin(write=True) as txn:
        txn.delete(victim, db=shard.chunks)
        txn.delete(victim, db=shard.tails)
    shard = ctx.store.shard(ctx.store.shard_of(damaged))
    with shard.env.begin(write=True) as txn:
        txn.put(damaged, b"\0" * 8 + b"not the chunk", db=shard.chunks)
        txn.delete(damaged, db=shard.tails)
    line = await (await ctx.client.get(f"/pins/check?ref={reference}")).json()
    assert (line["total"], line["missing"], line["invalid"]) == (6, 1, 1)  # five leaves and the root


@pytest.mark.parametrize("prefix", ["", "/v1"])
@pytest.mark.parametrize(("method", "path", "allow"), [
    ("POST", "/pins/check", "GET"), ("DELETE", "/pins/check", "GET"), ("HEAD", "/pins/check", "GET"),
    ("HEAD", "/chunks/stream", "GET"), ("POST", "/chunks/stream", "GET"),
])
async def test_literal_routes_refuse_other_methods_before_the_parameter_route(ctx, prefix, method, path, allow):
    """Bee's router (pkg/api/router.go) registers /pins/check before /pins/{reference} and /chunks/stream
    before /chunks/{address}; gorilla/mux matches the path alone, so another method is the literal route's
    405 (jsonhttp.MethodHandler), not the parameter route reading "check" or "stream" as a reference."""
    r = await ctx.client.request(method, prefix + path)
    assert r.status == 405, await r.text()
    assert r.headers["Allow"] == allow
    if method != "HEAD":
        assert (await expect_error(r, 405))["message"] == "Method Not Allowed"
    r = await ctx.client.options(prefix + path)
    assert r.status == 204 and r.headers["Allow"] == allow


async def test_soc_upload_pinned(ctx):
    from chunkstore.swarm.soc import make_soc

    _, wrapped = make_cac(b"feed update")
    soc = make_soc(signer(SOC_KEY), os.urandom(32), wrapped)
    url = f"/soc/{soc.owner.hex()}/{soc.id.hex()}?sig={soc.signature.hex()}"
    r = await ctx.client.post(url, data=wrapped, headers=upload_headers(**{"Swarm-Pin": "true"}))
    assert r.status == 201, await r.text()
    assert "Swarm-Tag" in r.headers
    assert ctx.store.pins.list() == [soc.address]
    assert list(ctx.store.pins.addresses(soc.address)) == [soc.address]


# ---------------------------------------------------------------- outside the storage radius


def _outside_radius_data(radius: int, n: int) -> list[bytes]:
    """Payloads whose single-chunk address lies outside ``radius`` of the app's overlay."""
    out = []
    while len(out) < n:
        payload = os.urandom(100)
        address, _ = make_cac(payload)
        if proximity(OVERLAY, address) < radius:
            out.append(payload)
    return out


async def test_uploads_outside_the_radius_are_cached_and_downloadable(ctx):
    ctx.store.reserve.set_radius(8)
    payloads = _outside_radius_data(8, 3)
    references = []
    for payload in payloads:
        _, reference = await upload(ctx, payload, **{"Swarm-Redundancy-Level": "0"})
        references.append(reference)
    for payload, reference in zip(payloads, references, strict=True):
        r = await ctx.client.get(f"/bytes/{reference}")
        assert r.status == 200 and await r.read() == payload
    assert ctx.store.reserve.status().size == 0, "not in the reserve: no stamp entries"
    status = await (await ctx.client.get("/chunkstore/status")).json()
    assert status["cache"] == {"size": 3, "capacity": 50, "evicted": 0}
    assert status["pins"] == {"count": 0, "chunks": 0}
    metrics = await (await ctx.client.get("/metrics")).text()
    assert re.search(r"^bee_localstore_cache_size 3\.0$", metrics, re.M)
    assert re.search(r'^chunkstore_upload_chunks_total\{kept="cache"\} 3\.0$', metrics, re.M)
    assert re.search(r"^chunkstore_cache_capacity 50\.0$", metrics, re.M)
    # the plain chunk endpoint keeps the reserve's refusal
    batch = make_batch(8)
    await ctx.client.post("/batches", json={
        "batchID": batch.id.hex(), "owner": batch.owner.hex(), "depth": batch.depth, "bucketDepth": batch.bucket_depth,
        "immutable": False, "value": str(batch.value), "start": 1})
    address, data = make_cac(_outside_radius_data(8, 1)[0])
    r = await ctx.client.post("/chunks", data=data,
                              headers={"Swarm-Postage-Stamp": Stamper(batch).stamp(address).to_bytes().hex()})
    await expect_error(r, 422, "outside the storage radius")


async def test_cache_capacity_drops_the_least_recently_used_and_spares_pins(tmp_path):
    app, store = pin_app(tmp_path, cache_capacity=4)
    async with TestClient(TestServer(app)) as client:
        ctx = Ctx(client, store, tmp_path)
        await register_batch(client)
        worker = app[STATE].reserve_worker
        store.reserve.set_radius(8)
        payloads = _outside_radius_data(8, 7)
        refs = []
        for payload in payloads[:4]:
            _, ref = await upload(ctx, payload, **{"Swarm-Redundancy-Level": "0"})
            refs.append(ref)
        assert (await client.get(f"/bytes/{refs[0]}")).status == 200  # the oldest, read: now the newest
        _, pinned = await upload(ctx, payloads[4], **{"Swarm-Redundancy-Level": "0", "Swarm-Pin": "true"})
        for payload in payloads[5:]:
            _, ref = await upload(ctx, payload, **{"Swarm-Redundancy-Level": "0"})
            refs.append(ref)
        assert worker.settle()
        assert store.cache.size() == 4
        alive = [(await client.get(f"/bytes/{ref}")).status == 200 for ref in refs]
        assert alive == [True, False, False, True, True, True], "the two least recently used went"
        assert (await client.get(f"/bytes/{pinned}")).status == 200, "a pinned upload is not the cache's"
        status = await (await client.get("/chunkstore/status")).json()
        assert status["cache"]["evicted"] == 2 and status["pins"] == {"count": 1, "chunks": 1}


def test_cache_capacity_flag_reaches_the_reserve():
    from api.config import parse_config
    from api.server import reserve_options

    config = parse_config(["--data-dir", "d", "--cache-capacity", "7"])
    assert config.cache_capacity == 7 and reserve_options(config).cache_capacity == 7
    assert parse_config(["--data-dir", "d"], env={"CHUNKSTORE_CACHE_CAPACITY": "0"}).cache_capacity == 0
    assert parse_config(["--data-dir", "d"]).cache_capacity == 1_000_000  # the reference's default
    with pytest.raises(SystemExit):
        parse_config(["--data-dir", "d", "--cache-capacity", "-1"])


async def test_an_unpin_a_full_disk_stopped_is_finished_by_deleting_again(ctx, monkeypatch):
    """DELETE /pins on a full disk: the pin record goes first (one meta commit), then its rows in shard
    commits the full disk refuses: 507. As for a batch removal, asking again once there is room finishes it
    (Bee's DeletePin keeps the collection until its chunks are gone, so its retry finds the pin too), instead
    of a 404 that left the rows, and the chunks they keep, until the next restart."""
    import errno

    from tests.store.fullhelpers import FailingCommits
    from tests.store.pinhelpers import pin_rows

    _, reference = await upload(ctx, os.urandom(3 * 4096), **{"Swarm-Pin": "true", "Swarm-Redundancy-Level": "0"})
    failing = FailingCommits(monkeypatch, errno.ENOSPC)
    await expect_error(await ctx.client.delete(f"/pins/{reference}"), 507, r"^no space left for the store")
    assert failing.failed and pin_rows(ctx.store)  # the rows are still there
    failing.stop()
    r = await ctx.client.delete(f"/pins/{reference}")
    assert r.status == 200, await r.text()
    assert pin_rows(ctx.store) == set() and ctx.store.pins.in_flux() == {}
    await expect_error(await ctx.client.get(f"/pins/{reference}"), 404)
    await expect_error(await ctx.client.delete(f"/pins/{reference}"), 404)  # now it is gone for good
