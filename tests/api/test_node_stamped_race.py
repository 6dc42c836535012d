"""POST /chunks and POST /soc stamped by the node while another upload of the same chunk takes its slot.

A chunk the node's batch holds already is stamped again in its slot. If another
upload of the same chunk commits a newer stamp of that slot between our
stamping and our commit, the slot rule refuses ours; the chunk is stored under
the batch all the same, so the upload must succeed (stamped again), not answer
409 as it did before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp.test_utils import TestClient

from api.state import STATE
from chunkstore.reserve import ReserveStore
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.soc import make_soc
from tests.api.contenthelpers import BATCH, upload_headers


def race_once(client: TestClient, store: ReserveStore, address: bytes, data: bytes) -> Callable[[], bool]:
    """Make the node's next stamping lose its slot: right after it, another upload of the chunk commits a
    newer stamp of the same slot. Returns a check that the race ran."""
    stamper = client.app[STATE].stamper
    real_stamp = stamper.stamp

    def stamp_then_race(batch_id: bytes, addresses: list[bytes], identities: list[bytes] | None = None) -> Any:
        stamps = real_stamp(batch_id, addresses, identities)
        stamper.stamp = real_stamp  # only the first call races
        (newer,) = real_stamp(batch_id, [address])
        store.put(data, newer.to_bytes())
        return stamps

    stamper.stamp = stamp_then_race
    return lambda: stamper.stamp == real_stamp


async def test_post_chunks_losing_its_slot_to_another_upload_of_the_chunk_is_stored(node) -> None:
    client, store = node
    address, data = make_cac(b"uploaded by everyone at once")
    assert (await client.post("/chunks", data=data, headers=upload_headers())).status == 201
    raced = race_once(client, store, address, data)
    r = await client.post("/chunks", data=data, headers=upload_headers(**{"Swarm-Pin": "true"}))
    assert r.status == 201, await r.text()
    assert raced()
    assert (await r.json())["reference"] == address.hex()
    (stamp,) = store.stamps_of(address)
    assert stamp.batch_id == BATCH
    assert store.get(address) == data


async def test_post_soc_losing_its_slot_to_another_upload_of_the_soc_is_stored(node) -> None:
    client, store = node
    signer = Signer(bytes.fromhex("66" * 32))
    _, wrapped = make_cac(b"a feed update")
    soc = make_soc(signer, bytes(32), wrapped)
    url = f"/soc/{signer.address.hex()}/{soc.id.hex()}?sig={soc.signature.hex()}"
    assert (await client.post(url, data=wrapped, headers=upload_headers())).status == 201
    raced = race_once(client, store, soc.address, soc.data)
    r = await client.post(url, data=wrapped, headers=upload_headers())
    assert r.status == 201, await r.text()
    assert raced()
    (stamp,) = store.stamps_of(soc.address)
    assert stamp.batch_id == BATCH
