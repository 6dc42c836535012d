"""``GET /feeds/{owner}/{topic}`` and ``GET /soc/{owner}/{id}`` over SOCs held in a real store."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.app import make_app
from api.config import Config
from api.feedread import latest_update
from chunkstore.reserve import ReserveStore
from chunkstore.swarm.bzz import FEED_OWNER_KEY, FEED_TOPIC_KEY, FEED_TYPE_KEY
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.feeds import legacy_payload, make_payload_update, make_update, topic_from_string
from chunkstore.swarm.file import split_bytes
from chunkstore.swarm.mantaray import Manifest
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.soc import make_soc
from tests.api.contenthelpers import API_VECTORS, upload_headers
from tests.api.helpers import Uploader

JSON_CT = "application/json; charset=utf-8"
TOPIC = topic_from_string("api feeds")


class Env:
    def __init__(self, client: TestClient, store: ReserveStore, up: Uploader) -> None:
        self.client = client
        self.store = store
        self.up = up

    @property
    def owner(self) -> str:
        return self.up.signer.address.hex()

    def put_update(self, index: int, payload: bytes, topic: bytes = TOPIC) -> bytes:
        soc = make_payload_update(self.up.signer, topic, index, payload)
        self.store.put(soc.data, self.up.stamp(soc.address))
        return soc.signature

    def put_wrapped(self, index: int, wrapped: bytes, topic: bytes = TOPIC) -> bytes:
        soc = make_update(self.up.signer, topic, index, wrapped)
        self.store.put(soc.data, self.up.stamp(soc.address))
        return soc.signature

    def put_cac(self, payload: bytes) -> bytes:
        address, data = make_cac(payload)
        self.store.put(data, self.up.stamp(address))
        return address

    def put_tree(self, content: bytes) -> tuple[bytes, dict[bytes, bytes]]:
        """Store a plain chunk tree; (root address, every chunk) with the root left out of the store."""
        chunks: dict[bytes, bytes] = {}
        root = split_bytes(content, lambda a, d: chunks.__setitem__(bytes(a), bytes(d)))
        for address, data in chunks.items():
            if address != root:
                self.store.put(data, self.up.stamp(address))
        return root, chunks

    def feed_url(self, topic: bytes = TOPIC, owner: str | None = None) -> str:
        return f"/feeds/{owner or self.owner}/{topic.hex()}"


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    store = ReserveStore(tmp_path / "store")
    app = make_app(store, Config(data_dir=tmp_path), overlay=bytes(32), close_store=True)
    up = Uploader()
    store.batches.add(up.batch())
    async with TestClient(TestServer(app)) as client:
        yield Env(client, store, up)


async def expect_error(resp, status: int, pattern: str) -> dict:
    assert resp.status == status, await resp.text()
    assert resp.headers["Content-Type"] == JSON_CT
    body = await resp.json()
    assert body["code"] == status
    assert re.search(pattern, body["message"] + " " + str(body.get("reasons", ""))), body
    return body


# ---------------------------------------------------------------- GET /feeds


async def test_feed_without_updates_is_404(env: Env) -> None:
    await expect_error(await env.client.get(env.feed_url()), 404, "no update found")


@pytest.mark.parametrize("n", [1, 2, 3, 17])
async def test_latest_update_with_bee_headers(env: Env, n: int) -> None:
    signatures = [env.put_update(i, b"update %d" % i) for i in range(n)]
    resp = await env.client.get(env.feed_url())
    assert resp.status == 200, await resp.text()
    assert await resp.read() == b"update %d" % (n - 1)
    h = resp.headers
    assert h["Swarm-Feed-Index"] == (n - 1).to_bytes(8, "big").hex()
    assert h["Swarm-Feed-Index-Next"] == n.to_bytes(8, "big").hex()
    assert h["Swarm-Soc-Signature"] == signatures[-1].hex()
    assert h["Swarm-Feed-Resolved-Version"] == "v2"
    assert h["Content-Type"] == "application/octet-stream"
    exposed = {v.strip() for line in h.getall("Access-Control-Expose-Headers") for v in line.split(",")}
    assert {"Swarm-Feed-Index", "Swarm-Feed-Index-Next", "Swarm-Soc-Signature"} <= exposed
    address, _ = make_cac(b"update %d" % (n - 1))
    assert h["ETag"] == f'"{address.hex()}"'


async def test_not_modified_keeps_the_feed_headers(env: Env) -> None:
    """Bee answers If-None-Match through Go's ServeContent, whose 304 drops only the body's headers
    (Content-Type, Content-Length): a client whose copy is still the content learns the feed moved on."""
    env.put_update(0, b"same content")
    first = await env.client.get(env.feed_url())
    etag = first.headers["ETag"]
    signature = env.put_update(1, b"same content")  # republished at the next index: the same ETag
    resp = await env.client.get(env.feed_url(), headers={"If-None-Match": etag})
    assert resp.status == 304 and await resp.read() == b""
    h = resp.headers
    assert h["ETag"] == etag
    assert h["Swarm-Feed-Index"] == "0000000000000001" and h["Swarm-Feed-Index-Next"] == "0000000000000002"
    assert h["Swarm-Soc-Signature"] == signature.hex() and h["Swarm-Feed-Resolved-Version"] == "v2"
    assert "Swarm-Feed-Index" in h["Access-Control-Expose-Headers"]
    assert "Content-Type" not in h


async def test_only_root_chunk_answers_the_wrapped_chunk(env: Env) -> None:
    env.put_update(0, b"hello")
    resp = await env.client.get(env.feed_url(), headers={"Swarm-Only-Root-Chunk": "true"})
    assert resp.status == 200
    assert await resp.read() == make_cac(b"hello")[1]
    assert resp.headers["Content-Length"] == str(8 + 5)
    assert resp.headers["Swarm-Feed-Index-Next"] == "0000000000000001"
    await expect_error(
        await env.client.get(env.feed_url(), headers={"Swarm-Only-Root-Chunk": "yes"}), 400, "Swarm-Only-Root-Chunk"
    )


async def test_v1_update_resolves_to_the_referenced_content(env: Env) -> None:
    content = os.urandom(300)
    reference = env.put_cac(content)
    _, wrapped = make_cac(legacy_payload(reference, 1_700_000_000))
    env.put_wrapped(0, wrapped)
    resp = await env.client.get(env.feed_url())
    assert resp.status == 200
    assert await resp.read() == content
    assert resp.headers["Swarm-Feed-Resolved-Version"] == "v1"
    assert resp.headers["ETag"] == f'"{reference.hex()}"'
    root = await env.client.get(env.feed_url(), headers={"Swarm-Only-Root-Chunk": "1"})
    assert await root.read() == make_cac(content)[1]  # the referenced root chunk, as the reference node answers


async def test_v1_sized_update_whose_reference_is_absent_is_v2(env: Env) -> None:
    payload = legacy_payload(os.urandom(32), 5)  # 40 bytes: v1 size, but nothing held at the reference
    env.put_update(0, payload)
    resp = await env.client.get(env.feed_url())
    assert resp.status == 200
    assert await resp.read() == payload
    assert resp.headers["Swarm-Feed-Resolved-Version"] == "v2"


async def test_v2_update_wrapping_the_root_of_a_large_tree(env: Env) -> None:
    content = os.urandom(3 * 4096 + 100)
    root, chunks = env.put_tree(content)  # the root chunk lives only inside the update, as bee-js writes it
    env.put_wrapped(0, chunks[root])
    resp = await env.client.get(env.feed_url())
    assert resp.status == 200
    assert await resp.read() == content
    assert resp.headers["ETag"] == f'"{root.hex()}"'
    part = await env.client.get(env.feed_url(), headers={"Range": "bytes=4000-8199"})
    assert part.status == 206
    assert part.headers["Content-Range"] == f"bytes 4000-8199/{len(content)}"
    assert await part.read() == content[4000:8200]
    assert part.headers["Swarm-Feed-Index"] == "0000000000000000"
    bad = await env.client.get(env.feed_url(), headers={"Range": f"bytes={len(content)}-"})
    assert bad.status == 416
    assert bad.headers["Content-Range"] == f"bytes */{len(content)}"


async def test_after_starts_the_search_at_a_known_index(env: Env) -> None:
    for i in range(5):
        env.put_update(i, b"u%d" % i)
    resp = await env.client.get(env.feed_url() + "?after=3")
    assert resp.status == 200 and await resp.read() == b"u4"
    await expect_error(await env.client.get(env.feed_url() + "?after=9"), 404, "no update found")
    resp = await env.client.get(env.feed_url() + "?at=1700000000")
    assert resp.status == 200 and resp.headers["Swarm-Feed-Index"] == "0000000000000004"


async def test_feeds_of_other_topics_and_owners_are_apart(env: Env) -> None:
    env.put_update(0, b"mine")
    await expect_error(await env.client.get(env.feed_url(topic_from_string("other"))), 404, "no update found")
    await expect_error(await env.client.get(env.feed_url(owner="ab" * 20)), 404, "no update found")
    # a topic of another length is another feed, as for the reference node
    await expect_error(await env.client.get(env.feed_url(TOPIC[:16])), 404, "no update found")


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/feeds/zz{o}/{t}", "owner"),
        ("/feeds/{o}00/{t}", "owner"),
        ("/feeds/0x{o}/{t}", "owner"),
        ("/feeds/{o}/abc", "topic"),
        ("/feeds/{o}/xyz0", "topic"),
        ("/feeds/{o}/{t}?after=-1", "after"),
        ("/feeds/{o}/{t}?after=18446744073709551616", "after"),
        ("/feeds/{o}/{t}?at=soon", "at"),
    ],
)
async def test_malformed_feed_requests_are_400(env: Env, path: str, field: str) -> None:
    url = path.format(o=env.owner, t=TOPIC.hex())
    body = await expect_error(await env.client.get(url), 400, field)
    assert body["reasons"][0]["field"] == field


async def test_v1_prefix_and_head(env: Env) -> None:
    env.put_update(0, b"x")
    resp = await env.client.get("/v1" + env.feed_url())
    assert resp.status == 200 and await resp.read() == b"x"
    assert (await env.client.head(env.feed_url())).status == 405  # GET only, as the reference routes it


def test_lookup_reads_stay_logarithmic(tmp_path: Path) -> None:
    """1,000 updates in a real store: the lookup reads about 2 log2(n) chunks, not n."""
    store = ReserveStore(tmp_path / "store")
    try:
        up = Uploader(depth=22)
        store.batches.add(up.batch())
        items = []
        for i in range(1000):
            soc = make_payload_update(up.signer, TOPIC, i, b"%d" % i)
            items.append((soc.data, up.stamp(soc.address)))
        store.put_many(items)
        found = latest_update(store, up.signer.address, TOPIC)
        assert found is not None and found.index == 999 and found.next_index == 1000
        assert found.reads <= 2 * 10 + 2
    finally:
        store.close()


# ---------------------------------------------------------------- GET /soc


async def test_get_soc_answers_the_payload_and_signature(env: Env) -> None:
    soc_id = os.urandom(32)
    _, wrapped = make_cac(b"single owner payload")
    soc = make_soc(env.up.signer, soc_id, wrapped)
    env.store.put(soc.data, env.up.stamp(soc.address))
    url = f"/soc/{env.owner}/{soc_id.hex()}"
    resp = await env.client.get(url)
    assert resp.status == 200, await resp.text()
    assert await resp.read() == b"single owner payload"
    assert resp.headers["Swarm-Soc-Signature"] == soc.signature.hex()
    assert resp.headers["Content-Type"] == "application/octet-stream"
    assert "Swarm-Soc-Signature" in resp.headers["Access-Control-Expose-Headers"]
    root = await env.client.get(url, headers={"Swarm-Only-Root-Chunk": "true"})
    assert await root.read() == wrapped
    assert (await env.client.get("/v1" + url)).status == 200


@pytest.mark.parametrize(("name", "value"), [
    ("Swarm-Cache", "maybe"), ("Swarm-Redundancy-Strategy", "race"), ("Swarm-Redundancy-Fallback-Mode", "yes"),
    ("Swarm-Chunk-Retrieval-Timeout", "soon"), ("Swarm-Redundancy-Level", "5"), ("Swarm-Lookahead-Buffer-Size", "big"),
])
async def test_feed_and_soc_content_reads_check_the_retrieval_headers(env: Env, name: str, value: str) -> None:
    """Bee's GET /feeds and GET /soc serve the content through the shared downloadHandler, which refuses
    a retrieval header it cannot read with a 400; the wrapped chunk alone (Swarm-Only-Root-Chunk) skips it."""
    env.put_update(0, b"feed content")
    soc_id = os.urandom(32)
    soc = make_soc(env.up.signer, soc_id, make_cac(b"soc content")[1])
    env.store.put(soc.data, env.up.stamp(soc.address))
    for url in (env.feed_url(), f"/soc/{env.owner}/{soc_id.hex()}"):
        await expect_error(await env.client.get(url, headers={name: value}), 400, name)
        root = await env.client.get(url, headers={name: value, "Swarm-Only-Root-Chunk": "true"})
        assert root.status == 200, await root.text()
        assert (await env.client.get(url)).status == 200


async def test_get_soc_wrapping_a_tree_root_joins_the_tree(env: Env) -> None:
    content = os.urandom(2 * 4096 + 1)
    root, chunks = env.put_tree(content)
    soc = make_soc(env.up.signer, bytes(32), chunks[root])
    env.store.put(soc.data, env.up.stamp(soc.address))
    resp = await env.client.get(f"/soc/{env.owner}/{bytes(32).hex()}")
    assert resp.status == 200 and await resp.read() == content


async def test_get_soc_errors(env: Env) -> None:
    await expect_error(
        await env.client.get(f"/soc/{env.owner}/{'00' * 32}"), 404, "requested chunk cannot be retrieved"
    )
    await expect_error(await env.client.get(f"/soc/{env.owner}/{'00' * 31}"), 400, "id")
    await expect_error(await env.client.get(f"/soc/{env.owner[:-2]}/{'00' * 32}"), 400, "owner")


# ---------------------------------------------------------------- POST /feeds, GET /bzz of a feed manifest


@pytest.mark.parametrize("case", API_VECTORS["feed_manifests"], ids=lambda c: c["topic"][:8])
@pytest.mark.parametrize("level", ["", "0", "2"])
async def test_post_feed_gives_bee_reference(node, case: dict, level: str) -> None:
    client, store = node
    headers = upload_headers(**({"Swarm-Redundancy-Level": level} if level else {}))
    resp = await client.post(f"/feeds/{case['owner']}/{case['topic']}", headers=headers)
    assert resp.status == 201, await resp.text()
    assert (await resp.json()) == {"reference": case["reference"]}
    # Swarm-Encrypt is not read for feed manifests, as on the reference node
    again = await client.post(f"/feeds/{case['owner']}/{case['topic']}", headers={**headers, "Swarm-Encrypt": "true"})
    assert (await again.json())["reference"] == case["reference"]
    # nor parsed: feedPostHandler's headers (pkg/api/feed.go) have no Swarm-Encrypt, so no value is a 400
    again = await client.post(f"/feeds/{case['owner']}/{case['topic']}", headers={**headers, "Swarm-Encrypt": "maybe"})
    assert again.status == 201 and (await again.json())["reference"] == case["reference"]
    assert store.has(bytes.fromhex(case["reference"]))


async def test_post_feed_refusals(node) -> None:
    client, _ = node
    owner, topic = "8d3766440f0d7b949a5e32995d09619a7f86e632", "aabbcc"
    await expect_error(await client.post(f"/feeds/{owner}/{topic}"), 400, "swarm-postage-batch-id")
    await expect_error(await client.post(f"/feeds/{owner}/{topic}", headers=upload_headers(os.urandom(32))), 404,
                       "batch with id not found")
    await expect_error(await client.post(f"/feeds/{owner[:-1]}/{topic}", headers=upload_headers()), 400, "owner")
    await expect_error(await client.post(f"/feeds/{owner}/abc", headers=upload_headers()), 400, "topic")
    # Bee's router wraps POST /feeds in jsonhttp.NewMaxBodyBytesHandler(swarm.ChunkWithSpanSize): a declared
    # body over 4104 bytes is 413 before the handler runs, although the handler reads no body
    await expect_error(await client.post(f"/feeds/{owner}/{topic}", data=b"x" * 4105, headers=upload_headers()),
                       413, "Request Entity Too Large")
    r = await client.post(f"/feeds/{owner}/{topic}", data=b"x" * 4104, headers=upload_headers())
    assert r.status == 201, await r.text()


async def test_post_feed_with_tag_and_pin(node) -> None:
    """Swarm-Tag and Swarm-Pin on POST /feeds go through the upload hook as on /bytes: the manifest is
    pinned under its reference, counted under the named tag, and an unknown tag is Bee's 404."""
    client, store = node
    owner, topic = "8d3766440f0d7b949a5e32995d09619a7f86e632", "aabbcc00"
    uid = (await (await client.post("/tags")).json())["uid"]
    resp = await client.post(f"/feeds/{owner}/{topic}",
                             headers=upload_headers(**{"Swarm-Tag": str(uid), "Swarm-Pin": "true"}))
    assert resp.status == 201, await resp.text()
    reference = (await resp.json())["reference"]
    assert resp.headers["Swarm-Tag"] == str(uid)
    assert (await (await client.get("/pins")).json()) == {"references": [reference]}
    assert set(store.pins.addresses(bytes.fromhex(reference))) >= {bytes.fromhex(reference)}
    tag = await (await client.get(f"/tags/{uid}")).json()
    assert tag["split"] >= 1 and tag["split"] == tag["seen"] + tag["synced"] and tag["address"] == reference
    await expect_error(await client.post(f"/feeds/{owner}/{topic}", headers=upload_headers(**{"Swarm-Tag": "98765"})),
                       404, "tag not found")


async def write_update(client: TestClient, store: ReserveStore, signer: Signer, topic: bytes, index: int,
                       wrapped: bytes) -> None:
    """A feed update as bee-js writes it: POST /soc stamped by the node."""
    soc = make_update(signer, topic, index, wrapped)
    resp = await client.post(f"/soc/{signer.address.hex()}/{soc.id.hex()}?sig={soc.signature.hex()}",
                             data=wrapped, headers=upload_headers())
    assert resp.status == 201, await resp.text()


async def test_bzz_of_a_feed_manifest_serves_the_latest_update(node) -> None:
    client, store = node
    signer = Signer(bytes.fromhex("55" * 32))
    topic = topic_from_string("site")
    manifest = (await (await client.post(f"/feeds/{signer.address.hex()}/{topic.hex()}",
                                         headers=upload_headers())).json())["reference"]
    await expect_error(await client.get(f"/bzz/{manifest}/"), 404, "no update found")
    refs = []
    for body in (b"version one", b"version two"):
        r = await client.post("/bzz?name=page.txt", data=body, headers={**upload_headers(), "Content-Type": "text/plain"})
        assert r.status == 201, await r.text()
        refs.append(bytes.fromhex((await r.json())["reference"]))
    # update 0: v1 (timestamp | reference); update 1: v2 (the manifest's root chunk itself), as swarm-cli writes it
    _, v1 = make_cac(legacy_payload(refs[0], 1_700_000_000))
    await write_update(client, store, signer, topic, 0, v1)
    resp = await client.get(f"/bzz/{manifest}/")
    assert resp.status == 200 and await resp.read() == b"version one"
    assert resp.headers["Swarm-Feed-Index"] == "0000000000000000"
    assert resp.headers["Swarm-Feed-Resolved-Version"] == "v1"
    assert "Swarm-Feed-Index" in resp.headers["Access-Control-Expose-Headers"]
    await write_update(client, store, signer, topic, 1, store.get(refs[1]))
    resp = await client.get(f"/bzz/{manifest}/")
    assert resp.status == 200 and await resp.read() == b"version two"
    assert resp.headers["Swarm-Feed-Index"] == "0000000000000001"
    assert resp.headers["Swarm-Feed-Resolved-Version"] == "v2"
    assert resp.headers["Content-Type"] == "text/plain"
    named = await client.get(f"/bzz/{manifest}/page.txt")
    assert named.status == 200 and await named.read() == b"version two"


async def test_bzz_of_an_epoch_feed_manifest_is_501(node) -> None:
    client, store = node
    saved: dict[bytes, bytes] = {}

    def save(data: bytes) -> bytes:
        return split_bytes(data, lambda a, d: saved.__setitem__(bytes(a), bytes(d)))

    m = Manifest.new(save=save)
    m.add("/", bytes(32), {FEED_OWNER_KEY: "ab" * 20, FEED_TOPIC_KEY: "cd" * 32, FEED_TYPE_KEY: "Epoch"})
    reference = m.store()
    up = Uploader()
    store.batches.add(up.batch())
    for address, data in saved.items():
        store.put(data, up.stamp(address))
    await expect_error(await client.get(f"/bzz/{reference.hex()}/"), 501, "epoch feeds are not supported")
