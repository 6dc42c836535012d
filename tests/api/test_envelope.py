"""``POST /envelope/{address}``: the node signs a stamp a client sends along with a chunk it uploads itself."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import TestClient, TestServer

from chunkstore.swarm.bmt import chunk_hash
from chunkstore.swarm.signer import Signer, checksum_address
from chunkstore.swarm.stamp import Stamp, split_index, validate_stamp
from tests.api.contenthelpers import BATCH, NODE_KEY, content_app, register_batch, upload_headers
from tests.api.test_content_api import expect_error

CHUNK = (11).to_bytes(8, "little") + b"enveloped a"


@pytest.fixture
async def client(tmp_path):
    app, _ = content_app(tmp_path)
    async with TestClient(TestServer(app)) as c:
        yield c


def _stamp(batch_id: bytes, envelope: dict) -> Stamp:
    return Stamp(batch_id, bytes.fromhex(envelope["index"]), bytes.fromhex(envelope["timestamp"]),
                 bytes.fromhex(envelope["signature"]))


async def test_an_envelope_is_a_valid_stamp_of_the_address_that_a_presigned_upload_accepts(client):
    await register_batch(client, depth=20, bucket_depth=16)
    address = chunk_hash(CHUNK)
    r = await client.post(f"/envelope/{address.hex()}", headers=upload_headers())
    assert r.status == 201, await r.text()
    body = await r.json()
    assert set(body) == {"issuer", "index", "timestamp", "signature"}
    assert body["issuer"] == checksum_address(Signer(NODE_KEY).address)
    assert (len(body["index"]), len(body["timestamp"]), len(body["signature"])) == (16, 16, 130)
    stamp = _stamp(BATCH, body)
    validate_stamp(stamp, address, Signer(NODE_KEY).address, 20, 16)  # raises if it is not
    r = await client.post("/chunks", data=CHUNK, headers={"Swarm-Postage-Stamp": stamp.to_bytes().hex()})
    assert r.status == 201, await r.text()
    assert (await r.json())["reference"] == address.hex()
    assert await (await client.get(f"/chunks/{address.hex()}")).read() == CHUNK

    # the same address again keeps its bucket position, with a newer timestamp
    again = await (await client.post(f"/v1/envelope/{address.hex()}", headers=upload_headers())).json()
    assert again["index"] == body["index"] and int(again["timestamp"], 16) > int(body["timestamp"], 16)
    # another address in the same bucket takes the next position
    other = address[:2] + bytes(30)
    nxt = await (await client.post(f"/envelope/{other.hex()}", headers=upload_headers())).json()
    assert split_index(bytes.fromhex(nxt["index"])) == (split_index(stamp.index)[0], split_index(stamp.index)[1] + 1)


async def test_envelope_refusals_are_the_references(client):
    address = chunk_hash(CHUNK).hex()
    body = await expect_error(await client.post(f"/envelope/{address}"), 400, "invalid header params")
    assert [r["field"] for r in body["reasons"]] == ["swarm-postage-batch-id"]
    assert body["reasons"][0]["error"].startswith("want required:")
    await expect_error(await client.post(f"/envelope/{address}", headers={"Swarm-Postage-Batch-Id": "zz"}), 400,
                       "invalid header params")
    await expect_error(await client.post(f"/envelope/{address[:-2]}", headers=upload_headers()), 400,
                       "invalid path params")
    await expect_error(await client.post(f"/envelope/{address}", headers=upload_headers()), 404,
                       "batch with id not found")
    foreign = bytes.fromhex("cd" * 32)
    await register_batch(client, batch_id=foreign, owner="11" * 20)
    await expect_error(await client.post(f"/envelope/{address}", headers=upload_headers(foreign)), 404,
                       "batch with id not found")
    assert (await client.get(f"/envelope/{address}", headers=upload_headers())).status == 405


async def test_an_immutable_batchs_full_bucket_is_402_and_keeps_what_it_gave(client):
    await register_batch(client, depth=17, bucket_depth=16, immutable=True)  # two positions per bucket
    addresses = [bytes([7, 7, i]) + bytes(29) for i in range(3)]
    given = []
    for a in addresses[:2]:
        r = await client.post(f"/envelope/{a.hex()}", headers=upload_headers())
        assert r.status == 201, await r.text()
        given.append((await r.json())["index"])
    assert len(set(given)) == 2
    await expect_error(await client.post(f"/envelope/{addresses[2].hex()}", headers=upload_headers()), 402,
                       "batch is overissued")
    again = await (await client.post(f"/envelope/{addresses[0].hex()}", headers=upload_headers())).json()
    assert again["index"] == given[0]  # a chunk the batch stamped before still gets its position
