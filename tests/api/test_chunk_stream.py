"""``GET /chunks/stream``: WebSocket uploads with pre-signed stamps, acknowledgements, close codes, back-pressure."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import WSMsgType
from aiohttp.test_utils import TestClient, TestServer

from api import routes_chunkstream
from api.app import make_app
from api.config import Config
from api.state import STATE
from chunkstore.reserve import ReserveStore
from chunkstore.swarm.cac import make_cac
from tests.api.contenthelpers import BATCH, register_batch, upload_headers
from tests.api.helpers import Uploader


class Env:
    def __init__(self, client: TestClient, store: ReserveStore, up: Uploader) -> None:
        self.client, self.store, self.up = client, store, up

    def message(self, payload: bytes | None = None) -> tuple[bytes, bytes]:
        address, data, stamp = self.up.cac(payload)
        return address, stamp + data


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    store = ReserveStore(tmp_path / "store")
    app = make_app(store, Config(data_dir=tmp_path), overlay=bytes(32), close_store=True)
    up = Uploader()
    store.batches.add(up.batch())
    async with TestClient(TestServer(app)) as client:
        yield Env(client, store, up)


async def acks(ws: aiohttp.ClientWebSocketResponse, n: int) -> None:
    for _ in range(n):
        msg = await asyncio.wait_for(ws.receive(), 10)
        assert msg.type == WSMsgType.BINARY and msg.data == b"", msg


async def closed_with(ws: aiohttp.ClientWebSocketResponse) -> tuple[int | None, str]:
    msg = await asyncio.wait_for(ws.receive(), 10)
    assert msg.type == WSMsgType.CLOSE, msg  # a close frame with a code, not a dropped connection
    return int(msg.data), msg.extra or ""


async def test_stream_stores_every_chunk_and_acknowledges_each(env: Env) -> None:
    sent = [env.message(os.urandom(n)) for n in (1, 100, 4096, 7)]
    async with env.client.ws_connect("/chunks/stream") as ws:
        for _, msg in sent:
            await ws.send_bytes(msg)
            await acks(ws, 1)
    for address, msg in sent:
        assert env.store.get(address) == msg[113:]


async def test_a_soc_with_its_stamp_is_taken_too(env: Env) -> None:
    soc, stamp = env.up.soc(os.urandom(4096))  # the largest message: stamp and a full SOC
    async with env.client.ws_connect("/v1/chunks/stream") as ws:
        await ws.send_bytes(stamp + soc.data)
        await acks(ws, 1)
    assert env.store.get(soc.address) == soc.data


async def test_many_chunks_sent_without_waiting_are_acknowledged_in_order(env: Env) -> None:
    sent = [env.message() for _ in range(300)]  # more than the window: the reader waits for room
    async with env.client.ws_connect("/chunks/stream") as ws:
        for _, msg in sent:
            await ws.send_bytes(msg)
        await acks(ws, len(sent))
    assert all(env.store.has(a) for a, _ in sent)
    assert env.store.chunk_count() == len(sent)


@pytest.mark.parametrize(
    ("bad", "code", "reason"),
    [
        (b"\x01" * 7, 1011, "insufficient data"),
        (os.urandom(113), 1011, "message too small"),
        ("text", 1003, "invalid message"),
    ],
)
async def test_malformed_messages_close_the_stream(env: Env, bad: bytes | str, code: int, reason: str) -> None:
    first_address, first = env.message()
    async with env.client.ws_connect("/chunks/stream") as ws:
        await ws.send_bytes(first)
        if isinstance(bad, str):
            await ws.send_str(bad)
        else:
            await ws.send_bytes(bad)
        await acks(ws, 1)  # the chunk before the bad message is answered first
        got_code, got_reason = await closed_with(ws)
    assert got_code == code and reason in got_reason
    assert env.store.has(first_address)


async def test_refused_chunks_close_with_the_reason(env: Env) -> None:
    stranger = Uploader(key=bytes.fromhex("22" * 32), seed=b"unregistered")
    address, data, stamp = stranger.cac()
    async with env.client.ws_connect("/chunks/stream") as ws:
        await ws.send_bytes(stamp + data)
        code, reason = await closed_with(ws)
    assert code == 1011 and reason == "batch not found"
    assert not env.store.has(address)
    # a stamp for another chunk: a write error naming the stamp problem
    _, data2 = make_cac(b"other")
    _, _, wrong_stamp = env.up.cac(b"stamped for something else")
    async with env.client.ws_connect("/chunks/stream") as ws:
        await ws.send_bytes(wrong_stamp + data2)
        code, reason = await closed_with(ws)
    assert code == 1011 and reason.startswith(("chunk write error", "invalid chunk data")), reason


async def test_oversized_message_is_closed_with_1009(env: Env) -> None:
    async with env.client.ws_connect("/chunks/stream") as ws:
        await ws.send_bytes(os.urandom(routes_chunkstream.MAX_MESSAGE + 1))
        code, _ = await closed_with(ws)
    assert code == 1009


async def test_upgrade_errors_are_json(env: Env) -> None:
    plain = await env.client.get("/chunks/stream")
    assert plain.status == 400 and (await plain.json())["code"] == 400
    tag = await env.client.get("/chunks/stream?swarm-tag=x")
    assert tag.status == 400 and "swarm-tag" in (await tag.json())["message"]
    bad_batch = await env.client.get("/chunks/stream", headers={"Swarm-Postage-Batch-Id": "zz"})
    assert bad_batch.status == 400


async def test_shutdown_closes_open_streams_with_1001(tmp_path: Path) -> None:
    store = ReserveStore(tmp_path / "store")
    app = make_app(store, Config(data_dir=tmp_path), overlay=bytes(32), close_store=True)
    client = TestClient(TestServer(app))
    await client.start_server()
    try:
        ws = await client.ws_connect("/chunks/stream")
        await asyncio.sleep(0.05)
        shutdown = asyncio.ensure_future(app.shutdown())
        code, reason = await closed_with(ws)
        await shutdown
        assert code == 1001 and reason == "node shutting down"
    finally:
        await client.close()


# ---------------------------------------------------------------- stamped by the node (batch id on the upgrade)


async def test_node_stamped_stream(node) -> None:
    client, store = node
    chunks = [make_cac(os.urandom(n)) for n in (0, 1, 4096, 300)]
    async with client.ws_connect("/chunks/stream", headers=upload_headers()) as ws:
        for _, data in chunks:
            await ws.send_bytes(data)
        await acks(ws, len(chunks))
    for address, data in chunks:
        assert store.get(address) == data
        (stamp,) = store.stamps_of(address)
        assert stamp.batch_id == BATCH  # the node's batch, signed by the node key (the store validated it)


async def test_node_stamped_stream_refusals(node) -> None:
    client, store = node
    unknown = await client.get("/chunks/stream", headers=upload_headers(os.urandom(32)))
    assert unknown.status == 404 and "batch with id not found" in (await unknown.json())["message"]
    up = Uploader()
    store.batches.add(up.batch())  # someone else's batch: the node cannot sign for it
    foreign = await client.get("/chunks/stream", headers=upload_headers(up.batch_id))
    assert foreign.status == 400
    async with client.ws_connect("/chunks/stream", headers=upload_headers()) as ws:
        await ws.send_bytes(os.urandom(4105))  # over a CAC's size
        code, _ = await closed_with(ws)
    assert code == 1009
    # an immutable batch of 2 buckets with 2 positions each: the third chunk of one bucket overissues it
    small = bytes.fromhex("cd" * 32)
    await register_batch(client, small, depth=2, immutable=True, bucket_depth=1)
    same_bucket: list[tuple[bytes, bytes]] = []
    while len(same_bucket) < 3:
        address, data = make_cac(os.urandom(20))
        if address[0] >> 7 == 0:
            same_bucket.append((address, data))
    async with client.ws_connect("/chunks/stream", headers=upload_headers(small)) as ws:
        for _, data in same_bucket:
            await ws.send_bytes(data)
        await acks(ws, 2)
        code, reason = await closed_with(ws)
    assert code == 1011 and reason == "batch is overissued"


async def test_window_bounds_the_chunks_in_flight(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """Back-pressure: however fast the client sends, at most WINDOW chunks are read ahead of their answers."""
    st = env.client.app[STATE]
    real_put = st.puts.put
    in_flight = 0
    most = 0
    release = asyncio.Event()

    async def slow_put(data: bytes, stamp: bytes, address: bytes | None = None):
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await release.wait()  # the store is "slow": nothing completes until released
        try:
            return await real_put(data, stamp)
        finally:
            in_flight -= 1

    monkeypatch.setattr(st.puts, "put", slow_put)
    sent = [env.message() for _ in range(routes_chunkstream.WINDOW * 3)]
    async with env.client.ws_connect("/chunks/stream") as ws:
        for _, msg in sent:
            await ws.send_bytes(msg)  # the client does not wait: TCP and aiohttp's buffer take what they can
        for _ in range(200):  # until the window is full (a fixed wait is too short on a loaded machine)
            if most >= routes_chunkstream.WINDOW:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # room for the reader to overshoot, if it would
        assert most == routes_chunkstream.WINDOW  # the reader stopped at the window
        release.set()
        await acks(ws, len(sent))
    assert most == routes_chunkstream.WINDOW
    assert all(env.store.has(a) for a, _ in sent)


# ---------------------------------------------------------------- tags (Swarm-Tag or ?swarm-tag=)


async def new_tag(client: TestClient) -> int:
    r = await client.post("/tags")
    assert r.status == 201, await r.text()
    return int((await r.json())["uid"])


async def tag_counts(client: TestClient, uid: int) -> dict[str, int]:
    r = await client.get(f"/tags/{uid}")
    assert r.status == 200, await r.text()
    body = await r.json()
    return {k: body[k] for k in ("split", "seen", "stored", "sent", "synced")}


@pytest.mark.parametrize("how", ["header", "query"])
async def test_node_stamped_stream_counts_under_its_tag(node, how: str) -> None:
    client, store = node
    uid = await new_tag(client)
    known = make_cac(os.urandom(50))
    r = await client.post("/chunks", data=known[1], headers=upload_headers())
    assert r.status == 201
    fresh = [make_cac(os.urandom(n)) for n in (1, 4096, 300)]
    headers, url = upload_headers(), "/chunks/stream"
    if how == "header":
        headers["Swarm-Tag"] = str(uid)
    else:
        url += f"?swarm-tag={uid}"
    async with client.ws_connect(url, headers=headers) as ws:
        for _, data in fresh[:2]:
            await ws.send_bytes(data)
        await acks(ws, 2)
        for _, data in [known, fresh[2]]:
            await ws.send_bytes(data)
        await acks(ws, 2)
    # counted when the stream ends at the latest: split all four, the one already here seen, three new
    assert await tag_counts(client, uid) == {"split": 4, "seen": 1, "stored": 3, "sent": 0, "synced": 3}
    assert all(store.has(a) for a, _ in fresh)


async def test_presigned_stream_counts_under_its_tag_up_to_a_refusal(env: Env) -> None:
    uid = await new_tag(env.client)
    sent = [env.message() for _ in range(5)]
    async with env.client.ws_connect("/chunks/stream", headers={"Swarm-Tag": str(uid)}) as ws:
        for _, msg in sent:
            await ws.send_bytes(msg)
        await acks(ws, len(sent))
        await ws.send_bytes(b"\x00" * 20)  # too short: the stream ends, the five answered still count
        code, _ = await closed_with(ws)
    assert code == 1011
    assert await tag_counts(env.client, uid) == {"split": 5, "seen": 0, "stored": 5, "sent": 0, "synced": 5}


async def test_stream_without_a_tag_makes_none(node) -> None:
    client, _ = node
    async with client.ws_connect("/chunks/stream", headers=upload_headers()) as ws:
        await ws.send_bytes(make_cac(b"untagged")[1])
        await acks(ws, 1)
    assert (await (await client.get("/tags")).json())["tags"] == []


async def test_unknown_or_malformed_tag_is_refused_before_the_upgrade(node) -> None:
    client, _ = node
    for headers, url in [({"Swarm-Tag": "987654"}, "/chunks/stream"), ({}, "/chunks/stream?swarm-tag=987654")]:
        r = await client.get(url, headers={**upload_headers(), **headers})
        assert r.status == 404 and (await r.json()) == {"code": 404, "message": "tag not found"}
    r = await client.get("/chunks/stream?swarm-tag=abc", headers=upload_headers())
    assert r.status == 400 and (await r.json())["message"] == "invalid swarm-tag query parameter"


async def test_node_stamped_chunk_losing_its_slot_to_a_newer_upload_of_it_is_stored(node) -> None:
    """The chunk is held by the batch already, so the stream stamps it again in its slot; another upload
    of it commits a newer stamp of that slot before ours. The slot rule refuses ours (a 1011 "chunk write
    error" before); the stream stamps it again and stores it."""
    client, store = node
    address, data = make_cac(b"uploaded by everyone at once")
    r = await client.post("/chunks", data=data, headers=upload_headers())
    assert r.status == 201
    st = client.app[STATE]
    real_stamp = st.stamper.stamp

    def stamp_then_race(batch_id, addresses):
        stamps = real_stamp(batch_id, addresses)
        st.stamper.stamp = real_stamp  # only the first call races
        (newer,) = real_stamp(batch_id, [address])
        store.put(data, newer.to_bytes())  # another upload of the chunk, stamped after ours, commits first
        return stamps

    st.stamper.stamp = stamp_then_race
    async with client.ws_connect("/chunks/stream", headers=upload_headers()) as ws:
        await ws.send_bytes(data)
        await acks(ws, 1)
    assert st.stamper.stamp == real_stamp
    (stamp,) = store.stamps_of(address)
    assert stamp.batch_id == BATCH


class Unretrieved:
    """Collects what the running loop's exception handler is given (asyncio's "exception was never
    retrieved" among it) while the block runs, with garbage collection let to find the dropped futures."""

    async def __aenter__(self) -> list[dict]:
        self.loop = asyncio.get_running_loop()
        self.seen: list[dict] = []
        self.previous = self.loop.get_exception_handler()
        self.loop.set_exception_handler(lambda _loop, context: self.seen.append(context))
        return self.seen

    async def __aexit__(self, *exc: object) -> None:
        import gc

        try:
            for _ in range(20):  # the puts behind the refusal finish in the thread pool, then are dropped
                await asyncio.sleep(0.05)
                gc.collect()
        finally:
            self.loop.set_exception_handler(self.previous)


async def test_chunks_after_a_refusal_leave_no_unretrieved_failures(env: Env) -> None:
    """A stream closes at its first refused chunk; the chunks sent behind it fail too, and nobody answers
    them. A soak of the daemon logged each such failure as an asyncio ERROR ("Future exception was never
    retrieved", with the chunk's OutOfRadius): they are expected, and must not be logged."""
    async with Unretrieved() as unretrieved:
        stranger = Uploader(key=bytes.fromhex("22" * 32), seed=b"unregistered")
        async with env.client.ws_connect("/chunks/stream") as ws:
            for _ in range(6):  # all sent before the first answer: every one of them fails
                _, data, stamp = stranger.cac()
                await ws.send_bytes(stamp + data)
            code, reason = await closed_with(ws)
        assert code == 1011 and reason == "batch not found"
    assert [c.get("message") for c in unretrieved] == []


async def test_node_stamped_chunks_after_a_refusal_leave_no_unretrieved_failures(node) -> None:
    client, _ = node
    small = bytes.fromhex("cd" * 32)  # immutable, 2 buckets of 2 positions: the third chunk of a bucket is refused
    await register_batch(client, small, depth=2, immutable=True, bucket_depth=1)
    same_bucket = [d for a, d in (make_cac(os.urandom(20)) for _ in range(64)) if a[0] >> 7 == 0][:8]
    async with Unretrieved() as unretrieved:
        async with client.ws_connect("/chunks/stream", headers=upload_headers(small)) as ws:
            for data in same_bucket:
                await ws.send_bytes(data)
            await acks(ws, 2)
            code, reason = await closed_with(ws)
        assert code == 1011 and reason == "batch is overissued"
    assert [c.get("message") for c in unretrieved] == []
