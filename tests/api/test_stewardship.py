"""``GET /stewardship/{reference}`` (bee-js ``isReferenceRetrievable``): true only when every chunk of the
content's tree is held here; Bee's shape and errors."""

from __future__ import annotations

import os

import pytest
from aiohttp.test_utils import TestClient, TestServer

from chunkstore.reserve import ReserveStore
from chunkstore.swarm.traversal import tree_addresses
from tests.api.contenthelpers import Ctx, content_app, register_batch, upload_headers
from tests.api.test_content_api import expect_error


@pytest.fixture
async def ctx(tmp_path):
    app, store = content_app(tmp_path)
    async with TestClient(TestServer(app)) as client:
        await register_batch(client)
        yield Ctx(client, store, tmp_path)


async def upload(ctx: Ctx, path: str, data: bytes, **headers: str) -> str:
    r = await ctx.client.post(path, data=data, headers=upload_headers(**headers))
    assert r.status == 201, await r.text()
    return str((await r.json())["reference"])


async def retrievable(ctx: Ctx, reference: str) -> bool:
    r = await ctx.client.get(f"/stewardship/{reference}")
    assert r.status == 200, await r.text()
    body = await r.json()
    assert set(body) == {"isRetrievable"}
    return bool(body["isRetrievable"])


def drop(store: ReserveStore, address: bytes) -> None:
    """Delete one chunk's data behind the store's back (what a lost or evicted chunk looks like)."""
    shard = store.shard(store.shard_of(address))
    with shard.env.begin(write=True) as txn:
        txn.delete(address, db=shard.chunks)
        txn.delete(address, db=shard.tails)
    assert not store.has(address)


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/bytes", {"Swarm-Redundancy-Level": "0"}),
        ("/bytes", {}),  # MEDIUM: the parities are part of the tree too
        ("/bytes", {"Swarm-Encrypt": "true"}),
        ("/bzz?name=a.bin", {"Content-Type": "application/octet-stream"}),  # a manifest and its file
    ],
)
async def test_every_chunk_held_is_retrievable_and_any_chunk_lost_is_not(ctx, path, headers):
    reference = await upload(ctx, path, os.urandom(5 * 4096 + 7), **headers)
    assert await retrievable(ctx, reference)
    addresses = sorted(set(tree_addresses(bytes.fromhex(reference), ctx.store.get)))
    assert len(addresses) > 6
    # a leaf (never read by the walk) and, in another upload, the root: each alone makes it unretrievable
    leaf = next(a for a in addresses if a != bytes.fromhex(reference)[:32])
    drop(ctx.store, leaf)
    assert not await retrievable(ctx, reference)
    again = await upload(ctx, path, os.urandom(4096 * 3), **headers)
    drop(ctx.store, bytes.fromhex(again)[:32])
    assert not await retrievable(ctx, again)


async def test_unknown_reference_is_not_retrievable(ctx):
    assert not await retrievable(ctx, os.urandom(32).hex())
    assert not await retrievable(ctx, os.urandom(64).hex())


async def test_stewardship_errors(ctx):
    await expect_error(await ctx.client.get("/stewardship/abcd"), 400, "invalid path params")
    await expect_error(await ctx.client.get(f"/stewardship/{'zz' * 32}"), 400, "invalid path params")
    reference = await upload(ctx, "/bytes", b"small")
    r = await ctx.client.get(f"/stewardship/{reference}", headers={"Swarm-Redundancy-Level": "9"})
    await expect_error(r, 400, "redundancy level")
    await expect_error(await ctx.client.put(f"/stewardship/{reference}", headers=upload_headers()), 501, "peers")
    assert await retrievable(ctx, reference)
    r = await ctx.client.get(f"/v1/stewardship/{reference}")
    assert r.status == 200 and await r.json() == {"isRetrievable": True}
