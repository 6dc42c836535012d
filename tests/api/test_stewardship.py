"""``GET /stewardship/{reference}`` (bee-js ``isReferenceRetrievable``): true only when every chunk of the
content's tree is held here; Bee's shape and errors."""

from __future__ import annotations

import os

import pytest

from chunkstore.reserve import ReserveStore
from chunkstore.swarm.traversal import tree_addresses
from tests.api.contenthelpers import Ctx, register_batch, upload_headers
from tests.api.test_content_api import expect_error


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
    assert await retrievable(ctx, reference)
    r = await ctx.client.get(f"/v1/stewardship/{reference}")
    assert r.status == 200 and await r.json() == {"isRetrievable": True}


OTHER = bytes.fromhex("5b" * 32)


def batches_of(store: ReserveStore, address: bytes) -> set[bytes]:
    return {stamp.batch_id for stamp in store.stamps_of(address)}


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/bytes", {}),  # MEDIUM: the parities too
        ("/bytes", {"Swarm-Encrypt": "true"}),
        ("/bzz?name=a.bin", {"Content-Type": "application/octet-stream"}),  # the manifest and its file
    ],
)
async def test_reupload_stamps_every_chunk_of_the_tree_with_the_batch(ctx, path, headers):
    data = os.urandom(5 * 4096 + 7)
    reference = await upload(ctx, path, data, **headers)
    addresses = set(tree_addresses(bytes.fromhex(reference), ctx.store.get))
    assert len(addresses) > 6 and all(batches_of(ctx.store, a) == {bytes.fromhex("ab" * 32)} for a in addresses)
    await register_batch(ctx.client, batch_id=OTHER)
    r = await ctx.client.put(f"/stewardship/{reference}", headers=upload_headers(OTHER))
    assert r.status == 200, await r.text()
    assert await r.json() == {"code": 200, "message": "OK"}
    assert all(OTHER in batches_of(ctx.store, a) for a in addresses)
    # again: each chunk keeps its position in the batch (a re-stamp, not a new slot)
    positions = {a: [s.index for s in ctx.store.stamps_of(a) if s.batch_id == OTHER] for a in addresses}
    assert (await ctx.client.put(f"/v1/stewardship/{reference}", headers=upload_headers(OTHER))).status == 200
    assert positions == {a: [s.index for s in ctx.store.stamps_of(a) if s.batch_id == OTHER] for a in addresses}
    assert await retrievable(ctx, reference)


async def test_reupload_refusals_leave_the_stamps_as_they_were(ctx):
    reference = await upload(ctx, "/bytes", os.urandom(3 * 4096))
    url = f"/stewardship/{reference}"
    body = await expect_error(await ctx.client.put(url), 400, "invalid header params")
    assert [r["field"] for r in body["reasons"]] == ["swarm-postage-batch-id"]
    await expect_error(await ctx.client.put(url, headers={"Swarm-Postage-Batch-Id": "12"}), 400, "invalid header params")
    await expect_error(await ctx.client.put("/stewardship/abcd", headers=upload_headers()), 400, "invalid path params")
    await expect_error(await ctx.client.put(url, headers=upload_headers(OTHER)), 404, "batch with id not found")
    foreign = bytes.fromhex("cd" * 32)
    await register_batch(ctx.client, batch_id=foreign, owner="11" * 20)
    await expect_error(await ctx.client.put(url, headers=upload_headers(foreign)), 404, "batch with id not found")
    # a leaf of the tree lost: the root (stored last) is not stamped with the new batch
    await register_batch(ctx.client, batch_id=OTHER)
    root = bytes.fromhex(reference)
    addresses = set(tree_addresses(root, ctx.store.get))
    drop(ctx.store, next(a for a in sorted(addresses) if a != root))
    await expect_error(await ctx.client.put(url, headers=upload_headers(OTHER)), 404, "not all held here")
    assert OTHER not in batches_of(ctx.store, root)
    await expect_error(await ctx.client.put(f"/stewardship/{os.urandom(32).hex()}", headers=upload_headers(OTHER)), 404)
