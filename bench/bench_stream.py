"""``/chunks/stream`` upload rate: the WebSocket's window against one-at-a-time uploads, same run.

For ``--chunks`` pre-signed 4 KiB CACs (stamped before the clock starts),
each measured on a fresh store in a temporary directory, with the daemon's
application served over loopback by aiohttp's test server in this process:

* baseline: ``POST /chunks``, one request after the other (a client that
  waits for each answer);
* the stream with a window of 1: every chunk acknowledged before the next is
  read, as the reference node handles a stream;
* the stream with the daemon's window (``api.routes_chunkstream.WINDOW``):
  the client sends without waiting; chunks in the window share the write
  queue's synced commits.

Printed: chunks/s and the ratio to the baseline. Every commit is synced to
disk, so the figures depend on the disk's sync rate.

Run: ``.venv/bin/python bench/bench_stream.py [--chunks 2000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from benchlib import chunks, payload

from api import routes_chunkstream
from chunkstore.swarm.cac import make_cac


def messages(n: int) -> list[tuple[bytes, bytes]]:
    """(stamp, chunk data) of n stamped full chunks (benchlib's cached batch)."""
    out = []
    for i, (address, stamp) in enumerate(chunks(n)):
        made, data = make_cac(payload(i))
        assert made == address, "benchlib's cached chunks changed"
        out.append((stamp, data))
    return out


async def run(kind: str, items: list[tuple[bytes, bytes]], window: int) -> float:
    from aiohttp.test_utils import TestClient, TestServer
    from benchlib import BATCH_ID, BUCKET_DEPTH, DEPTH, KEY

    from api.app import make_app
    from api.config import Config
    from chunkstore.reserve import ReserveStore
    from chunkstore.store.batchstore import Batch
    from chunkstore.swarm.signer import Signer

    routes_chunkstream.WINDOW = window
    with tempfile.TemporaryDirectory(prefix="bench_stream-") as tmp:
        store = ReserveStore(Path(tmp) / "store")
        store.batches.add(Batch(BATCH_ID, Signer(KEY).address, DEPTH, BUCKET_DEPTH, False, 10**15, 0))
        app = make_app(store, Config(data_dir=Path(tmp)), overlay=bytes(32), close_store=True)
        async with TestClient(TestServer(app)) as client:
            start = time.perf_counter()
            if kind == "post":
                for stamp, data in items:
                    async with client.post("/chunks", data=data, headers={"Swarm-Postage-Stamp": stamp.hex()}) as r:
                        assert r.status == 201, await r.text()
            else:
                async with client.ws_connect("/chunks/stream") as ws:

                    async def send() -> None:
                        for stamp, data in items:
                            await ws.send_bytes(stamp + data)

                    sender = asyncio.ensure_future(send())
                    for _ in items:
                        msg = await ws.receive()
                        assert msg.data == b"", msg
                    await sender
            elapsed = time.perf_counter() - start
            assert store.chunk_count() == len(items)
    return len(items) / elapsed


async def main_async(n: int) -> None:
    items = messages(n)
    default_window = routes_chunkstream.WINDOW
    base = await run("post", items, default_window)
    one = await run("stream", items, 1)
    windowed = await run("stream", items, default_window)
    routes_chunkstream.WINDOW = default_window
    print(f"{n} pre-signed 4 KiB chunks, fresh store each, loopback HTTP in this process")
    print()
    print(f"{'upload':<34} {'chunks/s':>9} {'vs baseline':>12}")
    print("-" * 57)
    print(f"{'POST /chunks, one at a time':<34} {base:>9.0f} {1.0:>11.2f}x")
    print(f"{'/chunks/stream, window 1':<34} {one:>9.0f} {one / base:>11.2f}x")
    print(f"{f'/chunks/stream, window {default_window}':<34} {windowed:>9.0f} {windowed / base:>11.2f}x")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=2000)
    args = parser.parse_args(argv)
    asyncio.run(main_async(args.chunks))


if __name__ == "__main__":
    main()
