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
from chunkstore.reserve import ReserveStore
from chunkstore.swarm.cac import make_cac
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
    assert msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSED, WSMsgType.CLOSING), msg
    return ws.close_code, (msg.extra or "") if msg.type == WSMsgType.CLOSE else ""


async def test_stream_stores_every_chunk_and_acknowledges_each(env: Env) -> None:
    sent = [env.message(os.urandom(n)) for n in (1, 100, 4096, 7)]
    async with env.client.ws_connect("/chunks/stream") as ws:
        for _, msg in sent:
            await ws.send_bytes(msg)
            await acks(ws, 1)
    for address, msg in sent:
        assert env.store.get(address) == msg[113:]


async def test_a_soc_with_its_stamp_is_taken_too(env: Env) -> None:
    soc, stamp = env.up.soc(b"owned")
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
