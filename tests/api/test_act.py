"""Access control over HTTP as the reference node serves it (``pkg/api/accesscontrol.go``, ``bytes.go``,
``bzz.go``, ``chunk.go``, ``soc.go``, ``router.go``): ACT uploads answer an encrypted reference and
``Swarm-Act-History-Address``; downloads naming the publisher and the history decrypt it first; the grantee
routes create, list, grant and revoke with the node's key as the publisher."""

from __future__ import annotations

import os

import coincurve
import pytest

from chunkstore.content.act import ActController, ActNotFound, ActStorage
from chunkstore.swarm.cac import make_cac
from tests.api.contenthelpers import NODE_KEY, Ctx, upload_headers

JSON_CT = "application/json; charset=utf-8"
PUBLISHER = coincurve.PrivateKey(NODE_KEY).public_key.format(compressed=True).hex()
GRANTEE_KEYS = [bytes([0x21 + i]) * 32 for i in range(3)]
GRANTEES = [coincurve.PrivateKey(k).public_key.format(compressed=True).hex() for k in GRANTEE_KEYS]


async def expect_error(resp, status: int, message: str) -> None:
    assert resp.status == status, await resp.text()
    assert resp.headers["Content-Type"] == JSON_CT
    body = await resp.json()
    # Bee's words; this node appends its reason after ": " to some (the batch refusals)
    assert body["code"] == status and (body["message"] == message or body["message"].startswith(message + ": ")), body


def act_headers(history: str, publisher: str = PUBLISHER, **extra: str) -> dict[str, str]:
    return {"Swarm-Act-Publisher": publisher, "Swarm-Act-History-Address": history, **extra}


async def act_upload(ctx: Ctx, path: str, data: bytes, **headers: str) -> tuple[str, str]:
    r = await ctx.client.post(path, data=data, headers=upload_headers(**{"Swarm-Act": "true", **headers}))
    assert r.status == 201, await r.text()
    history = r.headers["Swarm-Act-History-Address"]
    assert r.headers.getall("Access-Control-Expose-Headers") == ["Swarm-Tag", "Swarm-Act-History-Address"]
    return (await r.json())["reference"], history


async def test_bytes_upload_and_download_through_the_act(ctx):
    c = ctx.client
    data = os.urandom(5000)
    plain = (await (await c.post("/bytes", data=data, headers=upload_headers())).json())["reference"]
    ref, history = await act_upload(ctx, "/bytes", data)
    assert len(ref) == 64 and ref != plain and len(history) == 64
    r = await c.get(f"/bytes/{ref}", headers=act_headers(history))
    assert r.status == 200 and await r.read() == data
    r = await c.head(f"/bytes/{ref}", headers=act_headers(history))
    assert r.status == 200 and r.headers["Content-Length"] == str(len(data))
    # without the headers (or with one alone) the encrypted reference is served as it is: no such root
    for headers in ({}, {"Swarm-Act-History-Address": history}, {"Swarm-Act-Publisher": PUBLISHER}):
        assert (await c.get(f"/bytes/{ref}", headers=headers)).status == 404
    # another publisher: no entry for that pair in the ACT
    other = coincurve.PrivateKey(os.urandom(32)).public_key.format(compressed=True).hex()
    await expect_error(
        await c.get(f"/bytes/{ref}", headers=act_headers(history, other)), 404, "act or history entry not found"
    )
    await expect_error(
        await c.get(f"/bytes/{ref}", headers=act_headers(history, **{"Swarm-Act-Timestamp": "0"})),
        400,
        "invalid timestamp",
    )
    # a history that is nowhere: the reference's real controller fails on the load (not its ErrNotFound)
    await expect_error(await c.get(f"/bytes/{ref}", headers=act_headers("cd" * 32)), 500, "act download failed")
    # an encrypted upload: its 64-byte reference encrypted whole
    ref64, history64 = await act_upload(ctx, "/bytes", data, **{"Swarm-Encrypt": "true"})
    assert len(ref64) == 128
    r = await c.get(f"/bytes/{ref64}", headers=act_headers(history64))
    assert r.status == 200 and await r.read() == data
    # uploading to the same history: the same access key, the same history answered
    again, same = await act_upload(ctx, "/bytes", data, **{"Swarm-Act-History-Address": history})
    assert (again, same) == (ref, history)
    await expect_error(
        await c.post(
            "/bytes", data=data, headers=upload_headers(**{"Swarm-Act": "true", "Swarm-Act-History-Address": "cd" * 32})
        ),
        500,
        "act upload failed",
    )


async def test_bzz_file_and_collection_through_the_act(ctx):
    c = ctx.client
    r = await c.post(
        "/bzz?name=a.txt",
        data=b"bzz act",
        headers=upload_headers(**{"Swarm-Act": "true", "Content-Type": "text/plain"}),
    )
    assert r.status == 201
    ref, history = (await r.json())["reference"], r.headers["Swarm-Act-History-Address"]
    assert r.headers["ETag"] == f'"{ref}"'  # the encrypted reference, as Bee's fileUploadHandler sets it
    r = await c.get(f"/bzz/{ref}/", headers=act_headers(history))
    assert r.status == 200 and await r.read() == b"bzz act" and r.headers["Content-Type"] == "text/plain"
    assert (await c.head(f"/bzz/{ref}/", headers=act_headers(history))).status == 200
    assert (await c.get(f"/bzz/{ref}/")).status == 404
    from tests.api.contenthelpers import make_tar

    tar = make_tar([("dir/x.html", b"<p>x</p>")])
    ref, history = await act_upload(
        ctx, "/bzz", tar, **{"Content-Type": "application/x-tar", "Swarm-Collection": "true"}
    )
    r = await c.get(f"/bzz/{ref}/dir/x.html", headers=act_headers(history))
    assert r.status == 200 and await r.read() == b"<p>x</p>"


async def test_chunk_upload_and_download_through_the_act(ctx):
    c = ctx.client
    address, data = make_cac(b"one protected chunk")
    ref, history = await act_upload(ctx, "/chunks", data)
    assert ref != address.hex() and len(ref) == 64
    r = await c.get(f"/chunks/{ref}", headers=act_headers(history))
    assert r.status == 200 and await r.read() == data
    assert (await c.head(f"/chunks/{ref}", headers=act_headers(history))).status == 200
    assert (await c.get(f"/chunks/{address.hex()}")).status == 200  # the chunk itself is stored plain
    r = await c.post("/chunks", data=data, headers={"Swarm-Act": "true", "Swarm-Postage-Stamp": "00" * 113})
    assert r.status == 400


async def test_feed_manifest_through_the_act(ctx):
    """Bee's feedPostHandler: the manifest's reference encrypted, the exposed header set to the history's."""
    c = ctx.client
    url = f"/feeds/{'ab' * 20}/{'cd' * 32}"
    plain = (await (await c.post(url, headers=upload_headers())).json())["reference"]
    r = await c.post(url, headers=upload_headers(**{"Swarm-Act": "true"}))
    assert r.status == 201, await r.text()
    assert r.headers.getall("Access-Control-Expose-Headers") == ["Swarm-Act-History-Address"]
    ref, history = (await r.json())["reference"], r.headers["Swarm-Act-History-Address"]
    publisher = coincurve.PrivateKey(NODE_KEY).public_key
    storage = ActStorage(get=ctx.store.get)
    decrypted = ActController(NODE_KEY).download(storage, bytes.fromhex(ref), publisher, bytes.fromhex(history), 2**40)
    assert ref != plain and decrypted.hex() == plain


async def test_grantee_create_list_patch_as_bee_answers(ctx, monkeypatch):
    import time

    import chunkstore.content.act

    # history entries are keyed by the second: each step its own (bee-js' test sleeps 5 s for it)
    ticks = iter(range(int(time.time()) - 1000, 2**40, 10))
    monkeypatch.setattr(chunkstore.content.act, "_clock", lambda: next(ticks))
    c = ctx.client
    r = await c.post("/grantee", json={"grantees": GRANTEES}, headers=upload_headers())
    assert r.status == 201, await r.text()
    created = await r.json()
    assert set(created) == {"ref", "historyref"} and len(created["ref"]) == 128 and len(created["historyref"]) == 64
    r = await c.get(f"/grantee/{created['ref']}")
    assert r.status == 200 and await r.json() == GRANTEES
    # Go reads the field name case-insensitively
    r = await c.post("/grantee", json={"Grantees": GRANTEES[:1]}, headers=upload_headers())
    assert await (await c.get(f"/grantee/{(await r.json())['ref']}")).json() == GRANTEES[:1]

    # content for the grantees: uploaded to the grantee history
    data = b"for the grantees"
    ref, history = await act_upload(ctx, "/bytes", data, **{"Swarm-Act-History-Address": created["historyref"]})
    assert history == created["historyref"]
    publisher = coincurve.PrivateKey(NODE_KEY).public_key

    def open_as(key: bytes, history: str, reference: str) -> bytes:
        storage = ActStorage(get=ctx.store.get)
        return ActController(key).download(storage, bytes.fromhex(reference), publisher, bytes.fromhex(history), 2**40)

    for key in GRANTEE_KEYS:  # each grantee's own node finds its entry and the access key
        decrypted = open_as(key, history, ref)
        assert (await (await c.get(f"/bytes/{decrypted.hex()}")).read()) == data

    r = await c.patch(
        f"/grantee/{created['ref']}",
        json={"add": [GRANTEES[0]], "revoke": GRANTEES[1:]},
        headers=upload_headers(**{"Swarm-Act-History-Address": created["historyref"]}),
    )
    assert r.status == 200, await r.text()
    patched = await r.json()
    assert set(patched) == {"ref", "historyref"} and patched["historyref"] != created["historyref"]
    assert await (await c.get(f"/grantee/{patched['ref']}")).json() == [GRANTEES[0]]
    data2 = b"after the revoke"
    ref2, _ = await act_upload(ctx, "/bytes", data2, **{"Swarm-Act-History-Address": patched["historyref"]})
    assert await (await c.get(f"/bytes/{open_as(GRANTEE_KEYS[0], patched['historyref'], ref2).hex()}")).read() == data2
    for key in GRANTEE_KEYS[1:]:
        with pytest.raises(ActNotFound):
            open_as(key, patched["historyref"], ref2)
    r = await c.get(f"/bytes/{ref2}", headers=act_headers(patched["historyref"]))
    assert r.status == 200 and await r.read() == data2
    # the first upload stays open at its time (an early timestamp finds the oldest entry)
    r = await c.get(f"/bytes/{ref}", headers=act_headers(patched["historyref"], **{"Swarm-Act-Timestamp": "1"}))
    assert r.status == 200 and await r.read() == data


async def test_grantee_refusals_as_bee_answers(ctx):
    c = ctx.client
    await expect_error(await c.post("/grantee", headers=upload_headers()), 400, "could not validate request")
    r = await c.post("/grantee", json={"grantees": GRANTEES})
    assert r.status == 400 and (await r.json())["message"] == "invalid header params"
    await expect_error(
        await c.post("/grantee", data=b"{", headers=upload_headers()), 500, "error unmarshaling request body"
    )
    await expect_error(
        await c.post("/grantee", json={"grantees": ["zz"]}, headers=upload_headers()), 400, "invalid grantee list"
    )
    await expect_error(
        await c.post("/grantee", json={"grantees": ["02" + "00" * 32]}, headers=upload_headers()),
        400,
        "invalid grantee list",
    )
    await expect_error(
        await c.post("/grantee", json={"grantees": GRANTEES}, headers=upload_headers(os.urandom(32))),
        404,
        "batch with id not found",
    )
    await expect_error(await c.get(f"/grantee/{'ab' * 64}"), 404, "granteelist not found")
    r = await c.get("/grantee/zz")
    assert r.status == 400 and (await r.json())["message"] == "invalid path params"

    created = await (await c.post("/grantee", json={"grantees": GRANTEES[:1]}, headers=upload_headers())).json()
    url = f"/grantee/{created['ref']}"
    hist = {"Swarm-Act-History-Address": created["historyref"]}
    await expect_error(await c.patch(url, headers=upload_headers(**hist)), 400, "could not validate request")
    r = await c.patch(url, json={"add": GRANTEES[1:]}, headers=upload_headers())
    assert r.status == 400 and (await r.json())["reasons"][0]["field"] == "swarm-act-history-address"
    await expect_error(
        await c.patch(url, json={"add": ["xx"]}, headers=upload_headers(**hist)), 400, "invalid add list"
    )
    await expect_error(
        await c.patch(url, json={"revoke": ["xx"]}, headers=upload_headers(**hist)), 400, "invalid revoke list"
    )
    # nothing to add or revoke: the ACT from the history has no new entry, which Bee will not save
    await expect_error(
        await c.patch(url, json={}, headers=upload_headers(**hist)), 500, "failed to create or update grantee list"
    )
    empty = await (await c.post("/grantee", json={"grantees": []}, headers=upload_headers())).json()
    r = await c.patch(
        f"/grantee/{empty['ref']}",
        json={"revoke": GRANTEES[:1]},
        headers=upload_headers(**{"Swarm-Act-History-Address": empty["historyref"]}),
    )
    await expect_error(r, 400, "remove from empty grantee list")
    await expect_error(
        await c.patch(
            url, json={"add": GRANTEES[1:]}, headers=upload_headers(**{"Swarm-Act-History-Address": "cd" * 32})
        ),
        500,
        "failed to create or update grantee list",
    )
