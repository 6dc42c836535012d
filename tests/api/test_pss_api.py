"""PSS on a node with no peers: a message sent here reaches the subscribers of its topic here."""

from __future__ import annotations

import asyncio
import contextlib

import coincurve
import pytest
from aiohttp import WSMsgType
from aiohttp.test_utils import TestClient, TestServer

from tests.api.contenthelpers import BATCH, NODE_KEY, content_app, register_batch, upload_headers
from tests.api.test_content_api import expect_error

TOPIC = "chat-topic"


@pytest.fixture
async def client(tmp_path):
    app, _ = content_app(tmp_path)
    async with TestClient(TestServer(app)) as c:
        await register_batch(c)
        yield c


async def _next_message(ws, timeout: float = 5.0) -> bytes | None:
    try:
        msg = await ws.receive(timeout)
    except TimeoutError:
        return None
    assert msg.type == WSMsgType.BINARY, msg
    return bytes(msg.data)


async def test_a_message_reaches_its_topics_subscribers_and_takes_a_stamp(client):
    own = coincurve.PrivateKey(NODE_KEY).public_key.format(compressed=True).hex()
    assert (await (await client.get("/addresses")).json())["pssPublicKey"] == own
    async with client.ws_connect(f"/pss/subscribe/{TOPIC}") as a, client.ws_connect(f"/v1/pss/subscribe/{TOPIC}") as b, \
            client.ws_connect("/pss/subscribe/elsewhere") as c:
        await asyncio.sleep(0.05)
        r = await client.post(f"/pss/send/{TOPIC}/ab,cd", data=b"to the topic", headers=upload_headers())
        assert r.status == 201 and await r.json() == {"code": 201, "message": "Created"}
        assert await _next_message(a) == b"to the topic" and await _next_message(b) == b"to the topic"
        r = await client.post(f"/pss/send/{TOPIC}/ab", params={"recipient": own}, data=b"to the node",
                              headers=upload_headers())
        assert r.status == 201
        assert await _next_message(a) == b"to the node"
        # for a key this node does not hold: sent (to the network, if there were one), not delivered here
        other = coincurve.PrivateKey().public_key.format(compressed=False)[1:].hex()  # x | y, as bee-js sends it
        r = await client.post(f"/pss/send/{TOPIC}/ab", params={"recipient": other}, data=b"not for us",
                              headers=upload_headers())
        assert r.status == 201
        assert await _next_message(a, 0.5) is None
        assert await _next_message(c, 0.2) is None  # another topic heard nothing
    stamp = await (await client.get(f"/stamps/{BATCH.hex()}/buckets")).json()
    assert sum(b["collisions"] for b in stamp["buckets"]) == 3  # each send took a position


async def test_pss_refusals(client):
    send = f"/pss/send/{TOPIC}"
    h = upload_headers()
    await expect_error(await client.post(f"{send}/ab,cdef", data=b"x", headers=h), 400, "different length")
    await expect_error(await client.post(f"{send}/abcdef01", data=b"x", headers=h), 400, "invalid path params")
    await expect_error(await client.post(f"{send}/zz", data=b"x", headers=h), 400, "invalid path params")
    await expect_error(await client.post(f"{send}/ab", params={"recipient": "02" + "00" * 32}, data=b"x", headers=h),
                       400, "invalid query params")
    await expect_error(await client.post(f"{send}/ab", data=b"x"), 400, "invalid header params")
    await expect_error(await client.post(f"{send}/ab", data=b"x", headers=upload_headers(bytes(32))), 400,
                       "batch not found")
    await expect_error(await client.post(f"{send}/ab", data=b"x" * 4001, headers=h), 413, "4000 bytes")
    await expect_error(await client.get(f"/pss/subscribe/{TOPIC}"), 400, "WebSocket")


async def test_mining_holds_no_store_thread_and_stops_when_the_client_goes(tmp_path):
    """A 3-byte target takes minutes to mine: in the store calls' pool (one thread here) it held up every
    request that reads the store."""
    from api.state import STATE

    app, _ = content_app(tmp_path, threads=1)
    async with TestClient(TestServer(app)) as c:
        await register_batch(c)
        send = asyncio.ensure_future(c.post(f"/pss/send/{TOPIC}/abcdef", data=b"x", headers=upload_headers()))
        # Until the request is in and mining (a fixed half second was too short on a loaded machine: CI saw
        # the upload not started yet).
        for _ in range(200):
            if app[STATE].uploads_running == 1 and _mining():
                break
            await asyncio.sleep(0.05)
        assert app[STATE].uploads_running == 1 and not send.done() and _mining()
        r = await asyncio.wait_for(c.get(f"/stamps/{BATCH.hex()}"), 10)
        assert r.status == 200
        send.cancel()  # the client goes away
        with contextlib.suppress(asyncio.CancelledError):
            await send
        for _ in range(100):
            if not _mining() and app[STATE].uploads_running == 0:
                break
            await asyncio.sleep(0.1)
        assert not _mining() and app[STATE].uploads_running == 0


def _mining() -> bool:
    """Whether some thread is inside ``pss.wrap`` now."""
    import sys
    import traceback

    return any(f.name == "wrap" and f.filename.endswith("pss.py")
               for frame in sys._current_frames().values() for f in traceback.extract_stack(frame))


def _soc(payload: bytes, soc_id: bytes = b"\x07" * 32):
    from chunkstore.swarm.signer import Signer
    from chunkstore.swarm.soc import make_soc

    return make_soc(Signer(b"\x42" * 32), soc_id, len(payload).to_bytes(8, "little") + payload)


async def test_a_soc_uploaded_here_reaches_the_gsoc_subscribers_of_its_address(client):
    """bee-js' gsocSubscribe with gsocSend (bee-js' own end-to-end test) waited forever: the socket stayed
    silent. This node is the neighbourhood of every SOC it stores, so an upload reaches its subscribers."""
    # POST /chunks reads a body of up to 4,104 bytes as a CAC (as the reference does): a SOC through it is longer
    first, second = _soc(b"GSOC!"), _soc(b"again".ljust(4096, b"."))
    other = _soc(b"elsewhere", b"\x08" * 32)
    sub = f"/gsoc/subscribe/{first.address.hex()}"
    async with client.ws_connect(sub) as a, client.ws_connect("/v1" + sub) as b, \
            client.ws_connect(f"/gsoc/subscribe/{other.address.hex()}") as c:
        await asyncio.sleep(0.05)
        r = await client.post(f"/soc/{first.owner.hex()}/{first.id.hex()}", params={"sig": first.signature.hex()},
                              data=first.wrapped_data, headers=upload_headers())
        assert r.status == 201, await r.text()
        assert await _next_message(a) == b"GSOC!" and await _next_message(b) == b"GSOC!"
        # the same address through POST /chunks (a SOC's whole data), as a SOC pushed by a peer would come
        r = await client.post("/chunks", data=second.data, headers=upload_headers())
        assert r.status == 201, await r.text()
        assert (await r.json())["reference"] == first.address.hex()
        assert await _next_message(a) == b"again".ljust(4096, b".")
        assert await _next_message(c, 0.3) is None  # another address heard nothing
        # a content-addressed chunk is no message, even at an address someone listens on
        cac = len(b"plain").to_bytes(8, "little") + b"plain"
        cac_address = (await (await client.post("/chunks", data=cac, headers=upload_headers())).json())["reference"]
        async with client.ws_connect(f"/gsoc/subscribe/{cac_address}") as d:
            await asyncio.sleep(0.05)
            assert (await client.post("/chunks", data=cac, headers=upload_headers())).status == 201
            assert await _next_message(d, 0.3) is None
    from api.state import STATE

    for _ in range(50):  # the subscriptions are forgotten once their sockets close
        if not client.app[STATE].gsoc_addresses:
            break
        await asyncio.sleep(0.02)
    assert not client.app[STATE].gsoc_addresses


async def test_gsoc_subscription_refusals(client):
    await expect_error(await client.get("/gsoc/subscribe/abcd"), 400, "invalid path params")
    await expect_error(await client.get(f"/gsoc/subscribe/{'ab' * 32}"), 400, "WebSocket")


async def test_a_stuck_subscriber_holds_up_no_upload_and_is_dropped(client, monkeypatch):
    """Each upload waited for every subscriber's send (up to the 4 s deadline each) before its 201."""
    import time

    from api import listeners
    from api.state import STATE

    class Stuck:
        closed = False

        async def send_bytes(self, data: bytes) -> None:
            await asyncio.Event().wait()  # a client that stopped reading: the send never completes

        async def close(self) -> None:
            self.closed = True

    monkeypatch.setattr(listeners, "SEND_DEADLINE", 1.5)
    soc, stuck = _soc(b"to a stuck client"), Stuck()
    client.app[STATE].gsoc_addresses[soc.address] = {stuck}  # type: ignore[dict-item]
    t = time.monotonic()
    r = await client.post(f"/soc/{soc.owner.hex()}/{soc.id.hex()}", params={"sig": soc.signature.hex()},
                          data=soc.wrapped_data, headers=upload_headers())
    assert r.status == 201 and time.monotonic() - t < 1.0
    for _ in range(100):
        if stuck.closed:
            break
        await asyncio.sleep(0.05)
    assert stuck.closed
