"""/bytes and /bzz through aiohttp's test client: Bee's references, streaming reads, ranges, refusals."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
from typing import Any

import coincurve
import pytest
from aiohttp import ClientPayloadError
from aiohttp.test_utils import TestClient, TestServer

from chunkstore.swarm.file import split_bytes
from chunkstore.swarm.redundancy.level import Level
from tests.api.contenthelpers import (
    API_VECTORS,
    BATCH,
    FILE_VECTORS,
    NODE_KEY,
    TESTDATA,
    Ctx,
    content_app,
    make_multipart,
    make_tar,
    register_batch,
    upload_headers,
)
from tests.swarm.filehelpers import sequential

JSON_CT = "application/json; charset=utf-8"
NODE_PUBLIC_KEY = coincurve.PrivateKey(NODE_KEY).public_key.format(compressed=True).hex()


@pytest.fixture
async def ctx(tmp_path):
    mime = tmp_path / "mime.types"
    mime.write_text("text/plain txt\n")  # the host table bee's test vectors assume (see the vectors' README)
    app, store = content_app(tmp_path, mime_types=mime)
    async with TestClient(TestServer(app)) as client:
        await register_batch(client)
        yield Ctx(client, store, tmp_path)


async def expect_error(resp, status: int, pattern: str | None = None) -> dict:
    assert resp.status == status, await resp.text()
    assert resp.headers["Content-Type"] == JSON_CT
    body = await resp.json()
    assert body["code"] == status and isinstance(body["message"], str) and body["message"]
    if pattern:
        assert re.search(pattern, body["message"] + " " + str(body.get("reasons", ""))), body
    return body


async def upload_bytes(ctx: Ctx, data: bytes, **headers: str) -> str:
    r = await ctx.client.post("/bytes", data=data, headers=upload_headers(**headers))
    assert r.status == 201, await r.text()
    assert r.headers["Access-Control-Expose-Headers"] == "Swarm-Tag"
    return str((await r.json())["reference"])


# ---------------------------------------------------------------- /bytes: Bee's references


@pytest.mark.parametrize("vector", FILE_VECTORS["file_vectors"][::3], ids=lambda v: str(v["length"]))
async def test_bytes_plain_tree_vectors(ctx, vector):
    data = sequential(vector["length"])
    ref = await upload_bytes(ctx, data, **{"Swarm-Redundancy-Level": "0"})
    assert ref == vector["reference"]
    r = await ctx.client.get(f"/bytes/{ref}")
    assert r.status == 200 and await r.read() == data


async def test_bytes_api_and_empty_vectors(ctx):
    api = FILE_VECTORS["api_bytes"]
    assert await upload_bytes(ctx, sequential(api["length"]), **{"Swarm-Redundancy-Level": "0"}) == api["reference"]
    empty = next(v for v in FILE_VECTORS["other"] if v["data_hex"] == "")
    assert await upload_bytes(ctx, b"") == empty["reference"]  # default level: one chunk, no parities


REDUNDANCY = json.loads((TESTDATA / "bee_redundancy_vectors.json").read_text())["cases"]


@pytest.mark.parametrize("case", [c for c in REDUNDANCY if c["length"] in (128 * 4096 + 1, 300 * 4096 + 77)],
                         ids=lambda c: f"{c['length']}-L{c['level']}")
async def test_bytes_erasure_coded_references_are_bees(ctx, case):
    headers = {} if case["level"] == 1 else {"Swarm-Redundancy-Level": str(case["level"])}
    assert await upload_bytes(ctx, sequential(case["length"]), **headers) == case["reference"]  # no header: MEDIUM


@pytest.mark.parametrize("level", [None, 0, 1, 2, 3, 4])
async def test_bytes_default_and_every_level_match_the_splitter(ctx, level):
    data = os.urandom(700_000)
    headers = {} if level is None else {"Swarm-Redundancy-Level": str(level)}
    ref = await upload_bytes(ctx, data, **headers)
    expected = split_bytes(data, level=Level.MEDIUM if level is None else level)
    assert ref == expected.hex()  # Bee's default upload level is MEDIUM, not NONE
    r = await ctx.client.get(f"/bytes/{ref}")
    assert await r.read() == data


async def test_bytes_encrypted_round_trip(ctx):
    data = os.urandom(300_000)
    ref = await upload_bytes(ctx, data, **{"Swarm-Encrypt": "true"})
    assert len(ref) == 128
    r = await ctx.client.get(f"/bytes/{ref}")
    assert r.status == 200 and await r.read() == data
    r = await ctx.client.head(f"/bytes/{ref}")
    assert r.status == 200 and int(r.headers["Content-Length"]) == len(data)
    r = await ctx.client.get(f"/bytes/{ref[:64]}")  # without the key: the encrypted root is no plain tree
    assert r.status != 200


async def test_bytes_erasure_coded_download_recovers_lost_chunks(ctx):
    data = os.urandom(4096 * 40)
    ref = await upload_bytes(ctx, data, **{"Swarm-Redundancy-Level": "2"})
    chunks: dict[bytes, bytes] = {}
    assert split_bytes(data, lambda a, d: chunks.__setitem__(a, d), level=2).hex() == ref
    leaves = [a for a, d in chunks.items() if len(d) <= 4104 and int.from_bytes(d[:8], "little") == 4096]
    for address in leaves[:3]:
        assert ctx.store.delete(address)
    r = await ctx.client.get(f"/bytes/{ref}")
    assert r.status == 200 and await r.read() == data


# ---------------------------------------------------------------- /bytes: reading


async def test_bytes_ranges_as_go_serves_them(ctx):
    data = os.urandom(100_000)
    ref = await upload_bytes(ctx, data)
    url = f"/bytes/{ref}"
    cases = [("bytes=0-0", 0, 1), ("bytes=99990-", 99990, 10), ("bytes=-5", 99995, 5), ("bytes=10-20", 10, 11),
             ("bytes=99999-200000", 99999, 1), ("bytes= 4096-8191", 4096, 4096)]
    for header, start, length in cases:
        r = await ctx.client.get(url, headers={"Range": header})
        assert r.status == 206, (header, await r.text())
        assert r.headers["Content-Range"] == f"bytes {start}-{start + length - 1}/100000"
        assert await r.read() == data[start : start + length]
    r = await ctx.client.get(url, headers={"Range": "bytes=200000-"})
    await expect_error(r, 416, "overlap")
    assert r.headers["Content-Range"] == "bytes */100000"
    r = await ctx.client.get(url, headers={"Range": "bytes=20-10"})
    await expect_error(r, 416, "invalid range")
    r = await ctx.client.get(url, headers={"Range": "items=1-2"})
    await expect_error(r, 416, "invalid range")
    r = await ctx.client.get(url, headers={"Range": "bytes=0-99999,0-99999"})  # more than the file: ignored
    assert r.status == 200 and await r.read() == data


@pytest.mark.parametrize("header", ["bytes=0-", "bytes=0-0", "bytes=5-2", "bytes=0-1,3-4", "bytes=1-"])
async def test_empty_file_ignores_a_range_as_go(ctx: Ctx, header: str) -> None:
    # Go's serveContent: a range that misses an empty file is ignored (200, the empty body), not a 416,
    # since "some clients add a Range header to all requests" (a <video>/<audio> element sends bytes=0-)
    ref = await upload_bytes(ctx, b"")
    r = await ctx.client.get(f"/bytes/{ref}", headers={"Range": header})
    assert r.status == 200, await r.text()
    assert await r.read() == b""
    assert r.headers["Content-Length"] == "0" and "Content-Range" not in r.headers
    assert r.headers["Accept-Ranges"] == "bytes"
    r = await ctx.client.get(f"/bytes/{ref}", headers={"Range": "bytes=abc"})  # malformed: still a 416
    await expect_error(r, 416, "invalid range")
    assert "Content-Range" not in r.headers


async def test_bytes_multiple_ranges_are_multipart(ctx):
    data = os.urandom(10_000)
    ref = await upload_bytes(ctx, data)
    r = await ctx.client.get(f"/bytes/{ref}", headers={"Range": "bytes=0-9,100-109,-10"})
    assert r.status == 206
    ctype = r.headers["Content-Type"]
    assert ctype.startswith("multipart/byteranges; boundary=")
    body = await r.read()
    assert int(r.headers["Content-Length"]) == len(body)
    boundary = ctype.split("boundary=")[1].encode()
    parts = body.split(b"--" + boundary)
    assert parts[-1] == b"--\r\n" and len(parts) == 5
    for part, (start, end) in zip(parts[1:4], [(0, 9), (100, 109), (9990, 9999)], strict=True):
        head, payload = part.split(b"\r\n\r\n", 1)
        assert f"Content-Range: bytes {start}-{end}/10000".encode() in head
        assert b"Content-Type: application/octet-stream" in head
        assert payload == data[start : end + 1] + b"\r\n"


async def test_bytes_head_etag_and_not_modified(ctx):
    data = os.urandom(9000)
    ref = await upload_bytes(ctx, data)
    r = await ctx.client.head(f"/bytes/{ref}")
    assert r.status == 200 and r.headers["Content-Length"] == "9000" and await r.read() == b""
    assert r.headers["ETag"] == f'"{ref}"'
    r = await ctx.client.get(f"/bytes/{ref}", headers={"If-None-Match": f'"{ref}"'})
    assert r.status == 304
    r = await ctx.client.get(f"/bytes/{ref}", headers={"If-Range": '"other"', "Range": "bytes=0-1"})
    assert r.status == 200 and await r.read() == data  # If-Range for another version: the whole file


@pytest.mark.parametrize(("if_range", "ranged"), [
    ('"{ref}"', True),
    (' "{ref}" ', True),
    ('W/"{ref}"', False),  # a weak tag never validates a range (RFC 9110 13.1.5; Go's etagStrongMatch)
    ("*", False),  # not an entity tag, and no date either
    ('"other", "{ref}"', False),  # If-Range names one validator: the first
    ("Wed, 21 Oct 2015 07:28:00 GMT", False),
])
async def test_bytes_if_range_compares_one_tag_strongly_as_go(ctx: Ctx, if_range: str, ranged: bool) -> None:
    data = os.urandom(5000)
    ref = await upload_bytes(ctx, data)
    r = await ctx.client.get(f"/bytes/{ref}", headers={"If-Range": if_range.format(ref=ref), "Range": "bytes=0-9"})
    if ranged:
        assert r.status == 206 and await r.read() == data[:10]
    else:
        assert r.status == 200 and await r.read() == data


@pytest.mark.parametrize(("ref", "status", "pattern"), [
    ("ab" * 31, 400, "want 32 or 64 bytes"),
    ("ab" * 33, 400, "want 32 or 64 bytes"),
    ("zz" * 32, 400, "invalid hex"),
    ("ab" * 32, 404, "not found"),
    ("ab" * 64, 404, "not found"),
])
async def test_bytes_bad_references(ctx, ref, status, pattern):
    await expect_error(await ctx.client.get(f"/bytes/{ref}"), status, pattern)


async def test_bytes_missing_chunk_is_an_error_never_a_short_200(ctx):
    small = os.urandom(4096 * 3)
    chunks: dict[bytes, bytes] = {}
    ref = split_bytes(small, lambda a, d: chunks.__setitem__(a, d), level=0)
    assert await upload_bytes(ctx, small, **{"Swarm-Redundancy-Level": "0"}) == ref.hex()
    leaf = next(a for a in chunks if a != ref)
    ctx.store.delete(leaf)
    await expect_error(await ctx.client.get(f"/bytes/{ref.hex()}"), 404, leaf.hex())
    # deep in a large file the status is already out: the transfer must fail, not end short
    big = os.urandom(4096 * 600)
    chunks.clear()
    ref = split_bytes(big, lambda a, d: chunks.__setitem__(a, d), level=0)
    assert await upload_bytes(ctx, big, **{"Swarm-Redundancy-Level": "0"}) == ref.hex()
    last_leaf = [a for a, d in chunks.items() if d == b"" or int.from_bytes(d[:8], "little") <= 4096][-1]
    ctx.store.delete(last_leaf)
    r = await ctx.client.get(f"/bytes/{ref.hex()}")
    assert r.status == 200
    with pytest.raises(ClientPayloadError):
        await r.read()


# ---------------------------------------------------------------- upload refusals


async def test_upload_header_refusals(ctx):
    c = ctx.client
    await expect_error(await c.post("/bytes", data=b"x"), 400, "swarm-postage-batch-id")
    r = await c.post("/bytes", data=b"x", headers={"Swarm-Postage-Stamp": "00" * 113})
    await expect_error(r, 400, "POST /chunks")
    await expect_error(await c.post("/bytes", data=b"x", headers=upload_headers(os.urandom(32))), 404,
                       "batch with id not found")
    for name, value in [("Swarm-Redundancy-Level", "5"), ("Swarm-Redundancy-Level", "x"), ("Swarm-Encrypt", "yes"),
                        ("Swarm-Tag", "-1"), ("Swarm-Pin", "2"), ("Swarm-Deferred-Upload", "maybe")]:
        r = await c.post("/bytes", data=b"x", headers=upload_headers(**{name: value}))
        await expect_error(r, 400, "invalid header params")
    await expect_error(await c.post("/bytes", data=b"x", headers=upload_headers(**{"Swarm-Act": "maybe"})), 400,
                       "invalid header params")
    assert ctx.store.stats()["chunks"] == 0


@pytest.mark.parametrize("endpoint", ["chunks", "soc"])
async def test_single_chunk_uploads_read_swarm_act_as_bee_does(ctx, endpoint):
    """Bee's chunkUploadHandler and socUploadHandler (pkg/api/chunk.go, soc.go) read Swarm-Act with the
    other headers (a value ParseBool refuses is 400 "invalid header params") and, when true, answer the
    chunk's address encrypted by the node's ACT, with Swarm-Act-History-Address (tests/api/test_act.py)."""
    from chunkstore.swarm.cac import make_cac
    from chunkstore.swarm.soc import make_soc
    from tests.store.helpers import SOC_KEY, signer

    address, data = make_cac(b"no access control here")
    url = "/chunks"
    if endpoint == "soc":
        soc = make_soc(signer(SOC_KEY), os.urandom(32), data)
        address = soc.address
        url = f"/soc/{soc.owner.hex()}/{soc.id.hex()}?sig={soc.signature.hex()}"
    c = ctx.client
    await expect_error(await c.post(url, data=data, headers=upload_headers(**{"Swarm-Act": "maybe"})), 400,
                       "invalid header params.*Swarm-Act")
    assert ctx.store.stats()["chunks"] == 0
    r = await c.post(url, data=data, headers=upload_headers(**{"Swarm-Act": "true"}))
    assert r.status == 201, await r.text()
    ref, history = (await r.json())["reference"], r.headers["Swarm-Act-History-Address"]
    assert ref != address.hex()
    act = {"Swarm-Act-Publisher": NODE_PUBLIC_KEY, "Swarm-Act-History-Address": history}
    r = await c.get(f"/chunks/{ref}", headers=act)
    assert r.status == 200 and (await r.read())[-len(data):] == data
    r = await c.post(url, data=data, headers=upload_headers(**{"Swarm-Act": "false"}))
    assert r.status == 201 and (await r.json())["reference"] == address.hex()
    assert "Swarm-Act-History-Address" not in r.headers


async def test_downloads_through_a_history_that_is_nowhere_fail_as_bees_controller_does(ctx):
    """bee-js' downloadData/downloadFile/downloadChunk with actPublisher and actHistoryAddress (swarm-cli's
    download --act) go through the ACT first: a history whose root is nowhere fails in Bee's controller on
    the load, which its actDecryptionHandler answers 500 "act download failed" (it is no ErrNotFound);
    the raw content is never served instead."""
    c = ctx.client
    ref = await upload_bytes(ctx, b"act-less content", **{"Swarm-Redundancy-Level": "0"})
    r = await c.post("/bzz", data=b"<p>x</p>", params={"name": "x.html"}, headers=upload_headers())
    bzz = (await r.json())["reference"]
    act = {"Swarm-Act-Publisher": "02" + "ab" * 32, "Swarm-Act-History-Address": "cd" * 32, "Swarm-Act-Timestamp": "1"}
    for method in ("GET", "HEAD"):
        for path in (f"/bytes/{ref}", f"/v1/bytes/{ref}", f"/bzz/{bzz}/", f"/bzz/{bzz}/x.html", f"/chunks/{ref}"):
            r = await c.request(method, path, headers=act)
            assert r.status == 500, (method, path, r.status)
            if method == "GET":
                await expect_error(r, 500, "act download failed")
    # either header alone: the reference serves the content undecrypted, and so does this node
    for one in ("Swarm-Act-Publisher", "Swarm-Act-History-Address"):
        r = await c.get(f"/bytes/{ref}", headers={one: act[one]})
        assert r.status == 200 and await r.read() == b"act-less content"
        assert (await c.get(f"/chunks/{ref}", headers={one: act[one]})).status == 200
        assert (await c.get(f"/bzz/{bzz}/", headers={one: act[one]})).status == 200


async def test_act_headers_bee_cannot_read_are_400(ctx):
    """Bee reads the ACT headers of every upload and download through mapStructure, whether or not it
    does access control for the request: Swarm-Act-History-Address as a swarm.Address (hex) on uploads
    (pkg/api/bytes.go, bzz.go, chunk.go, soc.go, feed.go) and downloads, Swarm-Act-Timestamp as an int64
    and Swarm-Act-Publisher as a secp256k1 public key on downloads (actDecryptionHandler,
    pkg/api/accesscontrol.go); a value it cannot read is 400 "invalid header params"."""
    from chunkstore.swarm.cac import make_cac

    c = ctx.client
    ref = await upload_bytes(ctx, b"act-less content", **{"Swarm-Redundancy-Level": "0"})
    _, chunk = make_cac(b"a chunk")
    history = "Swarm-Act-History-Address"
    for path, body in (("/bytes", b"x"), ("/bzz?name=x.txt", b"x"), ("/chunks", chunk),
                       (f"/feeds/{'ab' * 20}/{'cd' * 32}", b"")):
        for value in ("zz", "abc"):
            r = await c.post(path, data=body, headers=upload_headers(**{history: value}))
            await expect_error(r, 400, f"invalid header params.*{history}")
    for name, value in ((history, "zz"), ("Swarm-Act-Timestamp", "soon"), ("Swarm-Act-Timestamp", "9" * 20),
                        ("Swarm-Act-Publisher", "zz"), ("Swarm-Act-Publisher", "02" + "00" * 32)):
        for path in (f"/bytes/{ref}", f"/chunks/{ref}"):
            await expect_error(await c.get(path, headers={name: value}), 400, f"invalid header params.*{name}")
            assert (await c.head(path, headers={name: value})).status == 400
    good = {history: "cd" * 32, "Swarm-Act-Timestamp": "1", "Swarm-Act-Publisher": "02" + "ab" * 32}
    for name, value in good.items():  # readable, and one alone: served undecrypted, as the reference does
        r = await c.get(f"/bytes/{ref}", headers={name: value})
        assert r.status == 200 and await r.read() == b"act-less content"


async def test_chunk_downloads_read_the_headers_of_bees_act_decryption_handler(ctx):
    """GET and HEAD /chunks/{address} pass Bee's actDecryptionHandler (pkg/api/router.go), which reads
    Swarm-Cache as a bool and Swarm-Redundancy-Level as a level of 0..4 (pkg/api/accesscontrol.go) before
    either handler runs: 400 "invalid header params" for what it refuses, on HEAD too."""
    from chunkstore.swarm.cac import make_cac

    address, data = make_cac(b"one chunk")
    r = await ctx.client.post("/chunks", data=data, headers=upload_headers())
    assert r.status == 201, await r.text()
    for name, value in (("Swarm-Cache", "maybe"), ("Swarm-Redundancy-Level", "5"), ("Swarm-Redundancy-Level", "x")):
        await expect_error(await ctx.client.get(f"/chunks/{address.hex()}", headers={name: value}), 400,
                           f"invalid header params.*{name}")
        assert (await ctx.client.head(f"/chunks/{address.hex()}", headers={name: value})).status == 400
    good = {"Swarm-Cache": "false", "Swarm-Redundancy-Level": "4", "Swarm-Redundancy-Strategy": "x"}  # not read here
    r = await ctx.client.get(f"/chunks/{address.hex()}", headers=good)
    assert r.status == 200 and await r.read() == data
    assert (await ctx.client.head(f"/chunks/{address.hex()}", headers=good)).status == 200


async def test_tag_pin_and_deferred_are_accepted(ctx):
    r = await ctx.client.post("/bytes", data=b"tagged", headers=upload_headers(**{"Swarm-Tag": "42"}))
    await expect_error(r, 404, "tag not found")  # no such tag: as the reference answers
    uid = (await (await ctx.client.post("/tags")).json())["uid"]
    r = await ctx.client.post("/bytes", data=b"tagged", headers=upload_headers(
        **{"Swarm-Tag": str(uid), "Swarm-Pin": "true", "Swarm-Deferred-Upload": "false"}))
    assert r.status == 201 and r.headers["Swarm-Tag"] == str(uid)
    reference = (await r.json())["reference"]
    assert (await ctx.client.get(f"/pins/{reference}")).status == 200


async def test_someone_elses_batch_cannot_be_stamped(ctx):
    other = os.urandom(32)
    r = await ctx.client.post("/batches", json={"batchID": other.hex(), "owner": "11" * 20, "depth": 20,
                                                "bucketDepth": 16, "immutable": False, "value": "1000", "start": 0})
    assert r.status == 201
    await expect_error(await ctx.client.post("/bytes", data=b"x", headers=upload_headers(other)), 400,
                       "cannot sign stamps")
    assert ctx.store.stats()["chunks"] == 0


async def test_full_bucket_of_an_immutable_batch_is_402_and_stores_no_reference(ctx):
    small = bytes.fromhex("cd" * 32)
    await register_batch(ctx.client, small, depth=9, bucket_depth=8, immutable=True)  # 256 buckets of 2 positions
    data = os.urandom(4096 * 600)  # 600 leaves cannot fit 512 slots
    r = await ctx.client.post("/bytes", data=data, headers=upload_headers(small, **{"Swarm-Redundancy-Level": "0"}))
    await expect_error(r, 402, "batch is overissued")
    assert not ctx.store.has(split_bytes(data, level=0))


# ---------------------------------------------------------------- /bzz: Bee's manifests


@pytest.mark.parametrize("case", API_VECTORS["single_file"], ids=lambda c: c["test"].split("/")[-1][:40])
async def test_bzz_single_file_vectors(ctx, case):
    data = (TESTDATA / "manifest" / case["data_file"]).read_bytes() if "data_file" in case else case["data"].encode()
    params = {"name": case["name"]} if case["name"] else {}
    r = await ctx.client.post("/bzz", data=data, params=params,
                              headers=upload_headers(**{"Content-Type": case["content_type"]}))
    assert r.status == 201, await r.text()
    ref = (await r.json())["reference"]
    assert ref == case["reference"] and r.headers["ETag"] == f'"{ref}"'
    r = await ctx.client.get(f"/bzz/{ref}/")
    assert r.status == 200 and await r.read() == data
    assert r.headers["Content-Type"] == case["content_type"]
    name = case["name"] or re.search(r'filename="([^"]+)"', r.headers["Content-Disposition"]).group(1)
    assert r.headers["Content-Disposition"] == f'inline; filename="{name}"'


def _collection_headers(case: dict) -> dict[str, str]:
    headers = {}
    if case["index_document"]:
        headers["Swarm-Index-Document"] = case["index_document"]
    if case["error_document"]:
        headers["Swarm-Error-Document"] = case["error_document"]
    return headers


@pytest.mark.parametrize("case", API_VECTORS["collections"], ids=lambda c: c["test"].split("/")[-1][:40])
async def test_bzz_collection_vectors_as_tar(ctx, case):
    tar = make_tar((f.get("tar_name", f["path"]), f["data"].encode()) for f in case["files"])
    headers = upload_headers(**{"Content-Type": "application/x-tar", "Swarm-Collection": "true"},
                             **_collection_headers(case))
    r = await ctx.client.post("/bzz", data=tar, headers=headers)
    assert r.status == 201, await r.text()
    ref = (await r.json())["reference"]
    assert ref == case["reference"]
    for f in case["files"]:
        r = await ctx.client.get(f"/bzz/{ref}/{f['path']}")
        assert r.status == 200 and await r.read() == f["data"].encode()
        if f["content_type"]:
            assert r.headers["Content-Type"] == f["content_type"]
        assert r.headers["Content-Disposition"] == f'inline; filename="{f["filename"]}"'


@pytest.mark.parametrize("case", [c for c in API_VECTORS["collections"] if "multipart" in c["test"]],
                         ids=lambda c: c["test"].split("/")[-1][:40])
async def test_bzz_collection_vectors_as_multipart(ctx, case):
    body = make_multipart((f["path"], f["data"].encode(), f["content_type"]) for f in case["files"])
    headers = upload_headers(**{"Content-Type": 'multipart/form-data; boundary="chunkstoreBoundary7"'},
                             **_collection_headers(case))
    r = await ctx.client.post("/bzz", data=body, headers=headers)
    assert r.status == 201, await r.text()
    assert (await r.json())["reference"] == case["reference"]


async def test_bzz_sniffs_a_file_sent_without_content_type(ctx):
    html = b"<!DOCTYPE html><html><body>hi</body></html>"
    r = await ctx.client.post("/bzz", data=html, params={"name": "page"}, headers={
        **upload_headers(), "Content-Type": ""})
    assert r.status == 201
    sniffed = (await r.json())["reference"]
    r = await ctx.client.post("/bzz", data=html, params={"name": "page"},
                              headers=upload_headers(**{"Content-Type": "text/html; charset=utf-8"}))
    assert (await r.json())["reference"] == sniffed  # the sniffed type is the one written in the manifest
    r = await ctx.client.get(f"/bzz/{sniffed}/")
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"


async def test_bzz_website_paths(ctx):
    tar = make_tar([("index.html", b"<h1>home"), ("docs/index.html", b"<h1>docs"), ("docs/a.txt", b"a"),
                    ("404.html", b"<h1>missing")])
    r = await ctx.client.post("/bzz", data=tar, headers=upload_headers(**{
        "Content-Type": "application/x-tar", "Swarm-Collection": "true", "Swarm-Index-Document": "index.html",
        "Swarm-Error-Document": "404.html"}))
    ref = (await r.json())["reference"]
    c = ctx.client
    r = await c.get(f"/bzz/{ref}/")
    assert r.status == 200 and await r.read() == b"<h1>home"
    r = await c.get(f"/bzz/{ref}/docs/")
    assert r.status == 200 and await r.read() == b"<h1>docs"
    r = await c.get(f"/bzz/{ref}/docs?x=1", allow_redirects=False)
    assert r.status == 308 and r.headers["Location"].endswith(f"/bzz/{ref}/docs/?x=1")
    r = await c.get(f"/bzz/{ref}", allow_redirects=False)
    assert r.status == 308 and r.headers["Location"].endswith(f"/bzz/{ref}/")
    # Bee's /bzz/{address} is a plain redirect handler (pkg/api/router.go): every method, any address
    for method, address in (("POST", ref), ("DELETE", ref), ("OPTIONS", ref), ("GET", "zz"), ("HEAD", "site.eth")):
        r = await c.request(method, f"/v1/bzz/{address}", allow_redirects=False)
        assert r.status == 308 and r.headers["Location"].endswith(f"/v1/bzz/{address}/"), (method, address)
    r = await c.get(f"/bzz/{ref}/nothing/here")
    assert r.status == 200 and await r.read() == b"<h1>missing"  # the error document, served 200 as Bee does
    r = await c.get(f"/bzz/{ref}/docs/a.txt", headers={"Range": "bytes=0-0"})
    assert r.status == 206 and await r.read() == b"a"
    r = await c.head(f"/bzz/{ref}/docs/a.txt")
    assert r.status == 200 and r.headers["Content-Length"] == "1"


async def test_bzz_redirects_keep_the_query_as_sent(ctx: Ctx) -> None:
    """Bee's redirects (to the folder's "/", and /bzz/{ref} to /bzz/{ref}/) add the slash to the path and
    leave the raw query alone: ``a%20b`` stays, a bare ``flag`` gets no "=" added."""
    from yarl import URL

    tar = make_tar([("docs/a.txt", b"a")])
    r = await ctx.client.post("/bzz", data=tar, headers=upload_headers(
        **{"Content-Type": "application/x-tar", "Swarm-Collection": "true"}))
    ref = (await r.json())["reference"]
    root = str(ctx.client.make_url("/")).rstrip("/")
    for path in (f"/bzz/{ref}/docs", f"/bzz/{ref}"):
        url = URL(f"{root}{path}?q=a%20b&flag&p=%2F", encoded=True)
        r = await ctx.client.session.get(url, allow_redirects=False)
        assert r.status == 308
        assert r.headers["Location"] == f"{path}/?q=a%20b&flag&p=%2F"


@pytest.mark.parametrize(("sent", "location", "followed"), [
    ("/bzz/{ref}/docs//a.txt", "/bzz/{ref}/docs/a.txt", 200),
    ("/bzz/{ref}/docs/../docs/a.txt?x=%20y&p=%2F&flag", "/bzz/{ref}/docs/a.txt?x=%20y&p=%2F&flag", 200),
    ("/bzz/{ref}/./docs/a.txt", "/bzz/{ref}/docs/a.txt", 200),
    ("/bzz/{ref}/docs/%2E%2E/docs%2F%2Fa.txt", "/bzz/{ref}/docs/a.txt", 200),  # cleaned decoded, as gorilla/mux
    ("/bzz/{ref}/docs//", "/bzz/{ref}/docs/", 404),  # the trailing slash kept: a folder without an index
    ("//health", "/health", 200),
    ("/bytes/../health", "/health", 200),
])
async def test_unclean_paths_redirect_to_the_clean_path(ctx: Ctx, sent: str, location: str, followed: int) -> None:
    """Bee's router (gorilla/mux) answers a path with "."/".." segments or repeated slashes with a 301 to
    the clean path, before matching a route; the file is then where the clean path says."""
    from yarl import URL

    tar = make_tar([("docs/a.txt", b"a")])
    r = await ctx.client.post("/bzz", data=tar, headers=upload_headers(
        **{"Content-Type": "application/x-tar", "Swarm-Collection": "true"}))
    ref = (await r.json())["reference"]
    root = str(ctx.client.make_url("/")).rstrip("/")
    url = URL(root + sent.format(ref=ref), encoded=True)  # encoded: yarl would clean the path itself
    r = await ctx.client.session.get(url, allow_redirects=False)
    assert r.status == 301, await r.text()
    assert r.headers["Location"] == location.format(ref=ref)
    assert await r.read() == b""
    r = await ctx.client.session.get(url)  # followed: the clean path answers
    assert r.status == followed, await r.text()


async def test_bzz_missing_path_without_error_document(ctx):
    tar = make_tar([("a.txt", b"a")])
    r = await ctx.client.post("/bzz", data=tar, headers=upload_headers(
        **{"Content-Type": "application/x-tar", "Swarm-Collection": "true"}))
    ref = (await r.json())["reference"]
    await expect_error(await ctx.client.get(f"/bzz/{ref}/b.txt"), 404, "path address not found")
    await expect_error(await ctx.client.get(f"/bzz/{ref}/"), 404, "address not found or incorrect")


async def test_bzz_encrypted_collection_round_trip(ctx):
    tar = make_tar([("sub/a.txt", b"secret a"), ("b.bin", os.urandom(10_000))])
    r = await ctx.client.post("/bzz", data=tar, headers=upload_headers(
        **{"Content-Type": "application/x-tar", "Swarm-Collection": "true", "Swarm-Encrypt": "true"}))
    ref = (await r.json())["reference"]
    assert len(ref) == 128
    r = await ctx.client.get(f"/bzz/{ref}/sub/a.txt")
    assert r.status == 200 and await r.read() == b"secret a"
    assert r.headers["Content-Type"] == "text/plain; charset=utf-8"


async def test_bzz_of_plain_bytes_is_not_a_manifest(ctx):
    ref = await upload_bytes(ctx, b"just bytes")
    await expect_error(await ctx.client.get(f"/bzz/{ref}/x"), 404)


async def test_bzz_feed_manifest_without_updates_is_404(ctx):
    # the feed lookup itself is tested in tests/api/test_feeds.py
    from api.state import STATE

    st = ctx.client.app[STATE]
    ref = await st.run(_feed_manifest, st)
    await expect_error(await ctx.client.get(f"/bzz/{ref.hex()}/"), 404, "no update found")


def _feed_manifest(st) -> bytes:
    from chunkstore.content import write_bytes
    from chunkstore.swarm.bzz import feed_manifest

    session = st.upload_session(BATCH)
    ref = feed_manifest(bytes(20), b"topic", save=lambda d: write_bytes(d, session, level=0)).store()
    session.finish(ref)
    return ref


# ---------------------------------------------------------------- /bzz: metadata that no header may carry raw


def _stored_metadata(ctx: Ctx, ref: str, path: str = "") -> dict[str, str]:
    from chunkstore.content import load_manifest
    from chunkstore.swarm.bzz import Serve, resolve_path

    served = resolve_path(load_manifest(ctx.store, bytes.fromhex(ref)), path)
    assert isinstance(served, Serve)
    return dict(served.entry.metadata)


async def _get_and_head(ctx: Ctx, url: str, data: bytes, want: dict[str, str]) -> None:
    for method in ("GET", "HEAD"):
        r = await ctx.client.request(method, url)
        assert r.status == 200, (method, await r.text())
        assert await r.read() == (data if method == "GET" else b"")
        assert r.headers["Content-Length"] == str(len(data))
        for name, value in want.items():
            assert r.headers[name] == value, (method, name)
        assert "X-Injected" not in r.headers


@pytest.mark.parametrize(("name", "disposition"), [
    ("a\r\nX-Injected: 1", 'inline; filename="a  X-Injected: 1"'),
    ("a\nb", 'inline; filename="a b"'),
    ("a\x00b", 'inline; filename="a b"'),
    ("a\x01b", 'inline; filename="a b"'),
    ('q"\x7f\\', 'inline; filename="q\\" \\\\"'),  # the quoting escapes stay
], ids=["crlf", "lf", "nul", "soh", "quote-del-backslash"])
async def test_bzz_file_name_with_control_characters_is_served(ctx: Ctx, name: str, disposition: str) -> None:
    r = await ctx.client.post("/bzz", data=b"data", params={"name": name},
                              headers={**upload_headers(), "Content-Type": "text/plain"})
    assert r.status == 201, await r.text()
    ref = (await r.json())["reference"]
    assert _stored_metadata(ctx, ref)["Filename"] == name  # stored as given, as the reference stores it
    await _get_and_head(ctx, f"/bzz/{ref}/", b"data",
                        {"Content-Type": "text/plain", "Content-Disposition": disposition})


MULTIPART_B = {**upload_headers(), "Content-Type": "multipart/form-data; boundary=b", "Swarm-Collection": "true"}


@pytest.mark.parametrize(("raw", "stored", "served"), [
    (b"text/\x01plain", "text/\x01plain", "text/ plain"),
    (b"text/\x00plain", "text/\x00plain", "text/ plain"),
    (b"text/\x7fplain", "text/\x7fplain", "text/ plain"),
    (b"text/\xffplain", "text/\ufffdplain", "text/\ufffdplain"),  # invalid UTF-8 reads back as U+FFFD
], ids=["soh", "nul", "del", "ff"])
async def test_bzz_multipart_part_type_with_odd_bytes_is_served(ctx: Ctx, raw: bytes, stored: str, served: str) -> None:
    body = (b'--b\r\nContent-Disposition: form-data; name="f"; filename="x.txt"\r\n'
            b"Content-Type: " + raw + b"\r\n\r\ndata\r\n--b--\r\n")
    r = await ctx.client.post("/bzz", data=body, headers=MULTIPART_B)
    assert r.status == 201, await r.text()
    ref = (await r.json())["reference"]
    assert _stored_metadata(ctx, ref, "x.txt") == {"Content-Type": stored, "Filename": "x.txt"}
    await _get_and_head(ctx, f"/bzz/{ref}/x.txt", b"data",
                        {"Content-Type": served, "Content-Disposition": 'inline; filename="x.txt"'})


async def test_bzz_multipart_part_type_with_invalid_utf8_is_no_python_object(ctx: Ctx) -> None:
    body = b'--b\r\nContent-Disposition: form-data; name="f"\r\nContent-Type: text/\xffplain\r\n\r\nd\r\n--b--\r\n'
    r = await ctx.client.post("/bzz", data=body, headers=MULTIPART_B)
    text = await r.text()
    assert "object at" not in text and "Header object" not in text
    assert r.status == 201, text


# ---------------------------------------------------------------- /bzz: refusals


@pytest.mark.parametrize(("body", "headers", "pattern"), [
    (b"not a tar at all" * 100, {"Content-Type": "application/x-tar"}, "not a tar archive"),
    (b"", {"Content-Type": "application/x-tar"}, "no files in root directory"),
    (bytes(1024), {"Content-Type": "application/x-tar"}, "no files in root directory"),
    (b"x", {"Content-Type": "text/plain"}, "invalid content-type"),
    (b"x", {"Content-Type": ""}, "invalid content-type"),
    (b"x", {"Content-Type": "application/x-tar", "Swarm-Index-Document": "a/index.html"}, "must not contain"),
    (b"--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nabc", {"Content-Type": "multipart/form-data; boundary=b"},
     "ends inside a part"),
])
async def test_bzz_collection_refusals(ctx, body, headers, pattern):
    r = await ctx.client.post("/bzz", data=body, headers=upload_headers(**{"Swarm-Collection": "true", **headers}))
    await expect_error(r, 400, pattern)
    assert ctx.store.stats()["chunks"] == 0


@pytest.mark.parametrize("name", ["../escape.txt", "/etc/passwd", "a/../../b.txt"])
async def test_bzz_unsafe_tar_paths_are_refused(ctx, name):
    tar = make_tar([("fine.txt", b"fine"), (name, b"evil")])
    r = await ctx.client.post("/bzz", data=tar, headers=upload_headers(
        **{"Content-Type": "application/x-tar", "Swarm-Collection": "true"}))
    await expect_error(r, 400, "absolute|'\\.\\.'")


async def test_bzz_truncated_tar_is_refused(ctx):
    tar = make_tar([("a.txt", os.urandom(5000))])
    r = await ctx.client.post("/bzz", data=tar[:1500], headers=upload_headers(
        **{"Content-Type": "application/x-tar", "Swarm-Collection": "true"}))
    await expect_error(r, 400, "cut short")


async def test_bzz_tar_skips_what_is_not_a_regular_file(ctx):
    import tarfile

    tar = make_tar([("dir", b""), ("link", b""), ("a.txt", b"a")], kinds={"dir": tarfile.DIRTYPE,
                                                                          "link": tarfile.SYMTYPE})
    r = await ctx.client.post("/bzz", data=tar, headers=upload_headers(
        **{"Content-Type": "application/x-tar", "Swarm-Collection": "true"}))
    ref = (await r.json())["reference"]
    one = make_tar([("a.txt", b"a")])
    r = await ctx.client.post("/bzz", data=one, headers=upload_headers(
        **{"Content-Type": "application/x-tar", "Swarm-Collection": "true"}))
    assert (await r.json())["reference"] == ref


async def test_bzz_head_gives_the_empty_type_of_an_unknown_extension_as_get_does(ctx: Ctx) -> None:
    """A tar entry whose extension Go's table does not know is stored with an empty type; Bee's GET
    and HEAD both write that value as it is (``Content-Type:`` empty), so HEAD says what GET says."""
    tar = make_tar([("notes.md", b"# notes")])
    r = await ctx.client.post("/bzz", data=tar, headers=upload_headers(
        **{"Content-Type": "application/x-tar", "Swarm-Collection": "true"}))
    ref = (await r.json())["reference"]
    got = await ctx.client.get(f"/bzz/{ref}/notes.md")
    assert got.status == 200 and await got.read() == b"# notes"
    head = await ctx.client.head(f"/bzz/{ref}/notes.md")
    assert head.status == 200 and head.headers["Content-Length"] == "7"
    assert got.headers["Content-Type"] == head.headers["Content-Type"] == ""


def _tar_of(entries: list[tuple[str, bytes, bytes, int]], **open_kw: Any) -> bytes:
    """A tar of ``(name, type, data, mode)`` entries, written by Python's tarfile as given."""
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", **open_kw) as tar:
        for name, kind, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.type, info.size, info.mode = kind, len(data), mode
            at = buf.tell()
            tar.addfile(info, io.BytesIO(data))
            if mode > 0o7777:  # tarfile writes the permission bits only: put the file type bits in by hand
                raw = bytearray(buf.getbuffer()[at : at + 512])
                raw[100:108] = b"%07o\0" % mode
                raw[148:156] = b" " * 8
                raw[148:156] = b"%06o\0 " % sum(raw)
                buf.getbuffer()[at : at + 512] = raw
    return buf.getvalue()


@pytest.mark.parametrize(("sent", "as_bee_reads_it"), [
    # a hard link: Go's FileInfo().Mode() has no type bit for it, and Go reads no data for it
    ([("h.txt", b"1", b"", 0o644), ("a.txt", b"0", b"a", 0o644)],
     [("h.txt", b"0", b"", 0o644), ("a.txt", b"0", b"a", 0o644)]),
    # a type Go does not know: a regular file with its data
    ([("v.txt", b"V", b"volume", 0o644)], [("v.txt", b"0", b"volume", 0o644)]),
    # a regular type whose mode field says directory: Go's Mode() says directory, so it is skipped
    ([("d", b"0", b"", 0o040755), ("a.txt", b"0", b"a", 0o644)], [("a.txt", b"0", b"a", 0o644)]),
])  # fmt: skip
async def test_bzz_tar_entries_are_regular_as_go_reads_them(ctx: Ctx, sent: list, as_bee_reads_it: list) -> None:
    """Bee stores what archive/tar's Header.FileInfo().Mode().IsRegular() accepts: every type but symlinks,
    devices, directories and FIFOs (by type flag or mode bits); the reference equals that of the same
    archive written with those entries as plain files."""
    refs = []
    for tar in (_tar_of(sent), _tar_of(as_bee_reads_it)):
        r = await ctx.client.post("/bzz", data=tar, headers=upload_headers(
            **{"Content-Type": "application/x-tar", "Swarm-Collection": "true"}))
        assert r.status == 201, await r.text()
        refs.append((await r.json())["reference"])
    assert refs[0] == refs[1]


async def test_bzz_tar_pax_global_header_is_an_empty_file_as_go_hands_it_out(ctx: Ctx) -> None:
    """Go's tar reader returns a PAX global header ('g', which git archive writes first) as an entry of
    its own, with no data and mode 0, so Bee stores it as an empty file under its (cleaned) name."""
    import tarfile

    with_global = _tar_of([("a.txt", b"0", b"a", 0o644)], format=tarfile.PAX_FORMAT, pax_headers={"comment": "abc"})
    assert b"././@PaxHeader" in with_global[:100] and with_global[156:157] == b"g"
    as_files = _tar_of([("@PaxHeader", b"0", b"", 0o644), ("a.txt", b"0", b"a", 0o644)])
    refs = []
    for tar in (with_global, as_files):
        r = await ctx.client.post("/bzz", data=tar, headers=upload_headers(
            **{"Content-Type": "application/x-tar", "Swarm-Collection": "true"}))
        assert r.status == 201, await r.text()
        refs.append((await r.json())["reference"])
    assert refs[0] == refs[1]
    r = await ctx.client.get(f"/bzz/{refs[0]}/@PaxHeader")
    assert r.status == 200 and await r.read() == b""


async def test_bzz_long_names_gnu_and_pax(ctx):
    import tarfile

    long = "deep/" * 30 + "file.txt"
    refs = set()
    for fmt in (tarfile.GNU_FORMAT, tarfile.PAX_FORMAT):
        r = await ctx.client.post("/bzz", data=make_tar([(long, b"long")], fmt=fmt), headers=upload_headers(
            **{"Content-Type": "application/x-tar", "Swarm-Collection": "true"}))
        ref = (await r.json())["reference"]
        refs.add(ref)
        r = await ctx.client.get(f"/bzz/{ref}/{long}")
        assert r.status == 200 and await r.read() == b"long"
    assert len(refs) == 1


async def test_bzz_tar_with_an_oversized_long_name_is_refused_before_reading_it(ctx: Ctx) -> None:
    import tarfile

    # The GNU long name declares 64 MiB; the body stops after 4 KiB of it: refused on the header alone.
    info = tarfile.TarInfo("././@LongLink")
    info.type, info.size = tarfile.GNUTYPE_LONGNAME, 64 << 20
    tar = info.tobuf(tarfile.GNU_FORMAT) + b"n" * 4096
    r = await ctx.client.post("/bzz", data=tar, headers=upload_headers(
        **{"Content-Type": "application/x-tar", "Swarm-Collection": "true"}))
    await expect_error(r, 400, r"GNU long name of 67108864 bytes is too long \(at most 1048576\)")
    assert ctx.store.stats()["chunks"] == 0


async def test_bzz_tar_long_name_under_the_bound_meets_the_metadata_rule(ctx: Ctx) -> None:
    import tarfile

    # Read whole (it is under 1 MiB), then refused as before: its last segment is the manifest's Filename.
    tar = make_tar([("n" * ((1 << 20) - 1), b"x")], fmt=tarfile.GNU_FORMAT)
    r = await ctx.client.post("/bzz", data=tar, headers=upload_headers(
        **{"Content-Type": "application/x-tar", "Swarm-Collection": "true"}))
    await expect_error(r, 400, "metadata is 1048638 bytes serialised; at most 65535")


@pytest.mark.parametrize(("query", "name", "filename"), [
    ("name=a;b", None, None),  # a pair with a semicolon is dropped (Go 1.17+)
    ("name=a%zzb", None, None),  # so is a pair with a bad escape
    ("name=%", None, None),
    ("name=ok&x=%zz;", "ok", "ok"),  # the others stay
    ("n%61me=a+b%2B", "a b+", "a b+"),
    # a byte that is no UTF-8 stays that byte in the path; Go's JSON writes \ufffd for it
    ("name=%FF.txt", "\udcff.txt", "\ufffd.txt"),
    ("name=%E6%97.x", "\udce6\udc97.x", "\ufffd\ufffd.x"),
], ids=["semicolon", "bad-escape", "lone-percent", "others-kept", "plus-and-key-escape", "ff", "truncated-utf8"])
async def test_bzz_file_name_query_is_read_as_go_parses_it(
    ctx: Ctx, query: str, name: str | None, filename: str | None
) -> None:
    # Bee reads ?name= from r.URL.Query() (net/url parseQuery): pairs with ";" or a
    # malformed escape are left out, and the decoded bytes are kept as they are.
    from yarl import URL

    r = await ctx.client.post(URL("/bzz?" + query, encoded=True), data=b"data",
                              headers=upload_headers(**{"Content-Type": "text/plain"}))
    assert r.status == 201, await r.text()
    ref = (await r.json())["reference"]
    file_ref = split_bytes(b"data", level=Level.MEDIUM).hex()
    metadata = _stored_metadata(ctx, ref, name if name is not None else file_ref)
    assert metadata["Filename"] == (filename if filename is not None else file_ref)


@pytest.mark.parametrize("raw", [b"bad\xff.html", b"d/\xc3(x.css", b"\xe6\x97/e.txt"], ids=["ff", "c3", "truncated"])
async def test_bzz_path_with_bytes_that_are_no_utf8_is_served(ctx: Ctx, raw: bytes) -> None:
    # A tar entry name is bytes; Bee stores them as the manifest path and serves the
    # entry at the percent-escaped path: gorilla/mux matches r.URL.Path, which Go's
    # url.PathUnescape decodes to the same bytes. yarl leaves such escapes undecoded.
    from urllib.parse import quote

    from yarl import URL

    tar = make_tar([(raw.decode("utf-8", "surrogateescape"), b"abc")])
    r = await ctx.client.post("/bzz", data=tar, headers=upload_headers(
        **{"Content-Type": "application/x-tar", "Swarm-Collection": "true"}))
    assert r.status == 201, await r.text()
    ref = (await r.json())["reference"]
    r = await ctx.client.get(URL(f"/bzz/{ref}/" + quote(raw, safe="/"), encoded=True))
    assert r.status == 200, await r.text()
    assert await r.read() == b"abc"


async def test_bzz_file_name_must_not_start_with_a_slash(ctx):
    r = await ctx.client.post("/bzz", data=b"x", params={"name": "/abs"}, headers=upload_headers(
        **{"Content-Type": "text/plain"}))
    await expect_error(r, 400, "invalid query params")
    assert ctx.store.stats()["chunks"] == 0


# ---------------------------------------------------------------- /chunks and /soc with the node's batch


async def test_chunks_with_the_node_batch_are_stamped_by_the_node(ctx):
    from chunkstore.swarm.cac import make_cac

    address, data = make_cac(b"node stamped")
    r = await ctx.client.post("/chunks", data=data, headers=upload_headers())
    assert r.status == 201 and (await r.json())["reference"] == address.hex()
    stamps = ctx.store.stamps_of(address)
    assert [s.batch_id for s in stamps] == [BATCH]


async def test_soc_with_the_node_batch_and_with_someone_elses(ctx):
    from chunkstore.swarm.cac import make_cac
    from chunkstore.swarm.signer import Signer
    from chunkstore.swarm.soc import make_soc

    owner = Signer(os.urandom(32))
    _, wrapped = make_cac(b"feed-like payload")
    soc = make_soc(owner, os.urandom(32), wrapped)
    url = f"/soc/{owner.address.hex()}/{soc.id.hex()}?sig={soc.signature.hex()}"
    r = await ctx.client.post(url, data=wrapped, headers=upload_headers())
    assert r.status == 201 and (await r.json())["reference"] == soc.address.hex()
    assert [s.batch_id for s in ctx.store.stamps_of(soc.address)] == [BATCH]
    other = os.urandom(32)
    r = await ctx.client.post("/batches", json={"batchID": other.hex(), "owner": "11" * 20, "depth": 20,
                                                "bucketDepth": 16, "immutable": False, "value": "1000", "start": 0})
    assert r.status == 201
    r = await ctx.client.post(url, data=wrapped, headers=upload_headers(other))
    await expect_error(r, 400, "pre-signed stamps are required")


@pytest.mark.parametrize("route", ["/soc", "/chunks"])
async def test_a_soc_with_new_content_at_its_address_takes_a_new_position(ctx, route):
    """Bee's stamper knows a chunk by its identity address (pkg/api/api.go putterSessionWrapper.Put ->
    pkg/storage/storage.go IdentityAddress: keccak(SOC address | wrapped chunk address) for a SOC), so a
    SOC re-signed over other content under the same id is a new chunk to it: the next position of the
    bucket. The very same SOC again keeps its position (a newer timestamp)."""
    from chunkstore.swarm.cac import make_cac
    from chunkstore.swarm.signer import Signer
    from chunkstore.swarm.soc import make_soc
    from chunkstore.swarm.stamp import bucket_of

    owner = Signer(os.urandom(32))
    soc_id = os.urandom(32)
    # /chunks reads a body of up to 4104 bytes as a CAC first (as Bee): longer ones are SOCs only
    size = 4000 if route == "/chunks" else 30
    versions = [make_soc(owner, soc_id, make_cac(os.urandom(size))[1]) for _ in range(2)]
    address = versions[0].address
    assert versions[1].address == address

    async def upload(soc):
        if route == "/soc":
            url = f"/soc/{owner.address.hex()}/{soc.id.hex()}?sig={soc.signature.hex()}"
            r = await ctx.client.post(url, data=soc.wrapped_data, headers=upload_headers())
        else:
            r = await ctx.client.post("/chunks", data=soc.data, headers=upload_headers())
        assert r.status == 201 and (await r.json())["reference"] == address.hex(), await r.text()

    async def collisions():
        buckets = (await (await ctx.client.get(f"/stamps/{BATCH.hex()}/buckets")).json())["buckets"]
        return buckets[bucket_of(address, 16)]["collisions"]

    await upload(versions[0])
    await upload(versions[0])
    assert await collisions() == 1
    await upload(versions[1])
    assert await collisions() == 2
    await upload(versions[1])
    assert await collisions() == 2
    assert ctx.store.get(address) == versions[1].data
    positions = sorted(s.position for s in ctx.store.stamps_of(address) if s.batch_id == BATCH)
    assert positions == [0, 1]


async def test_bzz_unknown_and_malformed_references(ctx):
    await expect_error(await ctx.client.get(f"/bzz/{'ab' * 32}/index.html"), 404)
    await expect_error(await ctx.client.get(f"/bzz/{'ab' * 20}/index.html"), 400, "want 32 or 64 bytes")
    # without the slash: Bee's plain redirect first (it reads no address), then the 400
    r = await ctx.client.get(f"/bzz/{'ab' * 20}", allow_redirects=False)
    assert r.status == 308 and r.headers["Location"].endswith(f"/bzz/{'ab' * 20}/")
    await expect_error(await ctx.client.get(f"/bzz/{'ab' * 20}"), 400, "want 32 or 64 bytes")


async def test_slow_uploads_do_not_starve_other_requests(tmp_path):
    import asyncio

    app, _ = content_app(tmp_path, threads=2)
    async with TestClient(TestServer(app)) as client:
        await register_batch(client)
        release = asyncio.Event()

        async def slow_body():
            yield b"first bytes"
            await release.wait()
            yield b" and the rest"

        uploads = [asyncio.ensure_future(client.post("/bytes", data=slow_body(), headers=upload_headers()))
                   for _ in range(4)]  # twice as many as store threads, every one holding a thread
        await asyncio.sleep(0.5)
        r = await asyncio.wait_for(client.get(f"/chunks/{'ab' * 32}"), 5)
        assert r.status == 404  # a store read still gets a thread
        release.set()
        for done in await asyncio.gather(*uploads):
            assert done.status == 201


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br"])
async def test_bodies_are_stored_as_sent_whatever_their_content_encoding(ctx, encoding):
    """The reference's Go server never decodes a request body: the reference is that of the bytes sent."""
    import gzip
    import zlib

    plain = os.urandom(3 * 4096 + 11)
    sent = {"gzip": gzip.compress(plain), "deflate": zlib.compress(plain), "br": b"not brotli at all"}[encoding]
    headers = upload_headers(**{"Content-Encoding": encoding, "Swarm-Redundancy-Level": "0"})
    for body in (sent, sent[: len(sent) // 2], b"\x1f\x8b garbage that decodes as nothing"):  # whole, cut, junk
        r = await ctx.client.post("/bytes", data=body, headers=headers)
        assert r.status == 201, await r.text()
        plain_ref = await ctx.client.post("/bytes", data=body, headers=upload_headers(**{"Swarm-Redundancy-Level": "0"}))
        assert (await r.json())["reference"] == (await plain_ref.json())["reference"]
        assert await (await ctx.client.get(f"/bytes/{(await r.json())['reference']}")).read() == body
    # a single chunk too: its body is the chunk as sent, which is no chunk when it is compressed garbage
    r = await ctx.client.post("/chunks", data=b"\x78\x9c" + os.urandom(3), headers={**upload_headers(), "Content-Encoding": encoding})
    await expect_error(r, 400)


async def _stalled_upload(port: int, batch: bytes) -> asyncio.StreamWriter:
    """A /bytes upload whose client sent 100 of the 1,000,000 bytes it promised, then went quiet."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"POST /bytes HTTP/1.1\r\nHost: x\r\nSwarm-Postage-Batch-Id: {batch.hex()}\r\n"
                 "Content-Length: 1000000\r\n\r\n".encode() + b"x" * 100)
    await writer.drain()
    return writer


@pytest.mark.parametrize(("max_uploads", "stalled"), [(256, 9), (3, 3)])
async def test_stalled_uploads_hold_up_only_themselves(tmp_path, max_uploads, stalled):
    """An operator's sweep: as many stalled uploads as the upload threads (8) made every other upload wait,
    for as long as the stalled clients kept their sockets open."""
    app, _ = content_app(tmp_path, max_uploads=max_uploads)
    async with TestClient(TestServer(app)) as c:
        await register_batch(c)
        writers = [await _stalled_upload(c.port, BATCH) for _ in range(stalled)]
        try:
            await asyncio.sleep(0.3)  # every stalled upload is in its thread, waiting for its body
            r = await asyncio.wait_for(c.post("/bytes", data=b"on time", headers=upload_headers()), 10)
            if stalled < max_uploads:
                assert r.status == 201, await r.text()
            else:
                await expect_error(r, 503, "too many uploads in progress")
                assert r.headers["Retry-After"] == "1"  # a client with a retry policy knows when to come back
            assert (await asyncio.wait_for(c.get("/health"), 10)).status == 200
        finally:
            for w in writers:
                w.close()


@pytest.mark.parametrize(("name", "value", "ok"), [
    ("Swarm-Cache", "false", True), ("Swarm-Cache", "maybe", False),
    ("Swarm-Redundancy-Strategy", "3", True), ("Swarm-Redundancy-Strategy", "race", False),
    ("Swarm-Redundancy-Fallback-Mode", "true", True), ("Swarm-Redundancy-Fallback-Mode", "yes", False),
    ("Swarm-Chunk-Retrieval-Timeout", "30s", True), ("Swarm-Chunk-Retrieval-Timeout", "1m30.5s", True),
    ("Swarm-Chunk-Retrieval-Timeout", "5000", True),  # bee-js' timeoutMs: milliseconds, no unit
    ("Swarm-Chunk-Retrieval-Timeout", "soon", False), ("Swarm-Chunk-Retrieval-Timeout", "5 s", False),
    ("Swarm-Redundancy-Level", "4", True), ("Swarm-Redundancy-Level", "5", False),
    ("Swarm-Redundancy-Level", "256", False), ("Swarm-Redundancy-Level", "high", False),
    ("Swarm-Lookahead-Buffer-Size", "-1", True), ("Swarm-Lookahead-Buffer-Size", "big", False),
    ("Swarm-Lookahead-Buffer-Size", "9223372036854775808", False),
])  # fmt: skip
async def test_downloads_read_their_retrieval_headers_as_the_reference(ctx, name, value, ok):
    """A sweep: any value of these headers was a 200 here, where the reference answers 400 for one it cannot read."""
    reference = (await (await ctx.client.post("/bytes", data=b"retrieved", headers=upload_headers())).json())["reference"]
    manifest = (await (await ctx.client.post("/bzz?name=r.txt", data=b"retrieved", headers=upload_headers(
        **{"Content-Type": "text/plain"}))).json())["reference"]
    for path in (f"/bytes/{reference}", f"/bzz/{manifest}", f"/bzz/{manifest}/r.txt"):
        r = await ctx.client.get(path, headers={name: value})
        if ok:
            assert r.status == 200 and await r.read() == b"retrieved", (path, await r.text())
        else:
            await expect_error(r, 400, "invalid header params|could not parse headers")


async def test_downloads_carry_cors_headers_for_an_allowed_origin(tmp_path):
    # Bee's corsHandler sets Access-Control-Allow-Origin before the handler writes anything, so every
    # download answer has it: without it a browser app on an allowed origin cannot read the file
    app, _ = content_app(tmp_path, cors_allowed_origins=("https://app.example",))
    origin = {"Origin": "https://app.example"}
    async with TestClient(TestServer(app)) as client:
        await register_batch(client)
        data = os.urandom(5000)
        r = await client.post("/bytes", data=data, headers=upload_headers())
        ref = (await r.json())["reference"]
        r = await client.post("/bzz?name=a.bin", data=data, headers=upload_headers(**{"Content-Type": "text/x-a"}))
        file_ref = (await r.json())["reference"]
        for method, url, extra, status in [
            ("GET", f"/bytes/{ref}", {}, 200),
            ("GET", f"/bytes/{ref}", {"Range": "bytes=0-9"}, 206),
            ("GET", f"/bytes/{ref}", {"Range": "bytes=0-9,20-29"}, 206),
            ("GET", f"/bytes/{ref}", {"If-None-Match": f'"{ref}"'}, 304),
            ("HEAD", f"/bytes/{ref}", {}, 200),
            ("GET", f"/bzz/{file_ref}/", {}, 200),
            ("HEAD", f"/bzz/{file_ref}/a.bin", {}, 200),
        ]:
            r = await client.request(method, url, headers={**origin, **extra})
            assert r.status == status, (method, url, extra, await r.text())
            assert r.headers.get("Access-Control-Allow-Origin") == "https://app.example", (method, url, extra)
            assert r.headers["Access-Control-Allow-Credentials"] == "true"
            await r.read()
        r = await client.get(f"/bytes/{ref}", headers={"Origin": "https://evil.example"})
        assert r.status == 200 and "Access-Control-Allow-Origin" not in r.headers
