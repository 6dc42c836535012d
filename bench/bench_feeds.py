"""Sequence feed lookup: time and chunk reads to find the latest of n updates.

For n = 10, 1,000 and 10,000 updates held in an in-memory map (address ->
data, the addresses derived exactly as in a store), this measures
``chunkstore.swarm.feeds.find_latest`` and prints, per n:

* the chunk reads the lookup makes, next to the reads of the reference
  node's finder on the same feed (its probe pattern, simulated: each round
  probes ``base + 2^l - 1`` for l = level..1 and the reference issues every
  probe of a round concurrently, so all count) and of a linear scan;
* the lookup time, against a baseline measured in the same run: one probe,
  i.e. deriving one update address and reading it from the map. A lookup
  costs about ``reads`` probes; the ratio shows what the search adds.

Then, unless ``--no-daemon``, the same feeds as SOCs in a real store
(signed and stamped updates, one feed per size), read three ways, each
against its own baseline measured in the same run:

* ``api.feedread.latest_update`` on the ``ReserveStore`` (lookup plus v1/v2
  resolution) against one ``store.get`` of the latest update;
* ``GET /feeds/{owner}/{topic}`` against ``GET /chunks/{address}`` of that
  same update, both over loopback HTTP to the daemon's application in this
  process (aiohttp's test server), one request at a time.

Run: ``.venv/bin/python bench/bench_feeds.py [--sizes 10,1000,10000] [--seconds 1] [--no-daemon]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from chunkstore.swarm.feeds import find_latest, make_payload_update, topic_from_string, update_address

OWNER = bytes.fromhex("8d3766440f0d7b949a5e32995d09619a7f86e632")
TOPIC = topic_from_string("bench_feeds")
REFERENCE_LEVELS = 8  # the reference finder's DefaultLevels


def reference_finder_reads(n: int) -> int:
    """Reads of the reference node's sequence finder on a gap-free feed of n updates.

    Round structure (pkg/feeds/sequence, asyncFinder): after reading index 0,
    a round at (base, level) probes base + 2^l - 1 for l = level..1. With f
    the highest level found: f = level = 8 starts another top round at
    base + 255; f = level < 8 ends the search; f = 0 ends it at base; else
    the next round is (base + 2^f - 1, f).
    """
    if n == 0:
        return 1
    reads, base, level = 1, 0, REFERENCE_LEVELS
    while True:
        reads += level
        found = max((lv for lv in range(1, level + 1) if base + (1 << lv) - 1 < n), default=0)
        if found == level == REFERENCE_LEVELS:
            base += (1 << level) - 1
            continue
        if found == level or found == 0:
            return reads
        base, level = base + (1 << found) - 1, found


def timed(fn: Callable[[], object], seconds: float, rounds: int = 5) -> float:
    """Median seconds per call over ``rounds`` rounds of about ``seconds / rounds`` each."""
    per_round = seconds / rounds
    samples = []
    for _ in range(rounds):
        calls = 0
        start = time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= per_round:
                break
        samples.append(elapsed / calls)
    return statistics.median(samples)


async def timed_async(fn: Callable[[], Awaitable[object]], seconds: float, rounds: int = 5) -> float:
    """``timed`` for coroutines: median seconds per awaited call."""
    per_round = seconds / rounds
    samples = []
    for _ in range(rounds):
        calls = 0
        start = time.perf_counter()
        while True:
            await fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= per_round:
                break
        samples.append(elapsed / calls)
    return statistics.median(samples)


def fill_store(store: object, sizes: list[int]) -> dict[int, tuple[bytes, bytes]]:
    """One feed per size in ``store``; per size (topic, address of the latest update)."""
    from chunkstore.reserve import ReserveStore
    from chunkstore.store.batchstore import Batch
    from chunkstore.swarm.keccak import keccak256
    from chunkstore.swarm.postage import StampIssuer
    from chunkstore.swarm.signer import Signer

    assert isinstance(store, ReserveStore)
    signer = Signer(bytes.fromhex("42" * 32))
    batch_id = keccak256(b"bench_feeds batch")
    depth = 24
    store.batches.add(Batch(batch_id, signer.address, depth, 16, False, 10**15, 0))
    issuer = StampIssuer(signer, batch_id, depth, 16, immutable=False)
    out = {}
    for n in sizes:
        topic = topic_from_string(f"bench_feeds {n}")
        items = []
        for i in range(n):
            soc = make_payload_update(signer, topic, i, b"update %d of %d" % (i, n))
            items.append((soc.data, issuer.stamp(soc.address).to_bytes()))
            if len(items) == 1000:
                store.put_many(items)
                items = []
        if items:
            store.put_many(items)
        out[n] = (topic, update_address(signer.address, topic, n - 1))
    return out


async def daemon_section(sizes: list[int], seconds: float) -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from api.app import make_app
    from api.config import Config
    from api.feedread import latest_update
    from chunkstore.reserve import ReserveStore
    from chunkstore.swarm.signer import Signer

    owner = Signer(bytes.fromhex("42" * 32)).address
    with tempfile.TemporaryDirectory(prefix="bench_feeds-") as tmp:
        store = ReserveStore(Path(tmp) / "store")
        t = time.perf_counter()
        feeds = fill_store(store, sizes)
        print(f"stored {sum(sizes)} signed, stamped updates in {time.perf_counter() - t:.1f} s")
        print()
        header = (
            f"{'updates':>8} {'reads':>6} {'store lookup us':>16} {'store get us':>13} {'ratio':>7}"
            f" {'GET /feeds us':>14} {'GET /chunks us':>15} {'ratio':>7}"
        )
        print(header)
        print("-" * len(header))
        app = make_app(store, Config(data_dir=Path(tmp)), overlay=bytes(32), close_store=True)
        async with TestClient(TestServer(app)) as client:
            for n in sizes:
                topic, latest = feeds[n]
                found = latest_update(store, owner, topic)
                assert found is not None and found.index == n - 1, (n, found)

                def lookup(topic: bytes = topic) -> object:
                    return latest_update(store, owner, topic)

                def get_one(address: bytes = latest) -> object:
                    return store.get(address)

                look = timed(lookup, seconds)
                one = timed(get_one, seconds)
                feed_url = f"/feeds/{owner.hex()}/{topic.hex()}"
                chunk_url = f"/chunks/{latest.hex()}"

                async def get_feed(url: str = feed_url) -> object:
                    async with client.get(url) as resp:
                        assert resp.status == 200
                        return await resp.read()

                async def get_chunk(url: str = chunk_url) -> object:
                    async with client.get(url) as resp:
                        assert resp.status == 200
                        return await resp.read()

                http_feed = await timed_async(get_feed, seconds)
                http_chunk = await timed_async(get_chunk, seconds)
                print(
                    f"{n:>8} {found.reads:>6} {look * 1e6:>16.1f} {one * 1e6:>13.1f} {look / one:>6.1f}x"
                    f" {http_feed * 1e6:>14.0f} {http_chunk * 1e6:>15.0f} {http_feed / http_chunk:>6.2f}x"
                )
    print()
    print("store lookup: latest_update (finder + resolution) over the store; store get: one chunk read;")
    print("GET /feeds and GET /chunks of the latest update over loopback HTTP, one request at a time.")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,1000,10000", help="comma-separated update counts")
    parser.add_argument("--seconds", type=float, default=1.0, help="measuring time per figure")
    parser.add_argument("--no-daemon", action="store_true", help="skip the store and HTTP measurements")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    largest = max(sizes)
    addresses = [update_address(OWNER, TOPIC, i) for i in range(largest + 1)]
    print(f"feed of up to {largest} updates; owner {OWNER.hex()}, topic {TOPIC.hex()[:16]}...")
    print()
    header = f"{'updates':>8} {'reads':>6} {'ref. reads':>10} {'linear':>7} {'lookup us':>10} {'probe us':>9} {'lookup/probe':>13}"
    print(header)
    print("-" * len(header))
    for n in sizes:
        chunks = {addresses[i]: b"update %d" % i for i in range(n)}
        get = chunks.get
        found = find_latest(get, OWNER, TOPIC)
        assert found.index == n - 1 and found.next_index == n, (n, found)
        probe_at = n // 2

        def one_probe(i: int = probe_at, get: Callable[[bytes], bytes | None] = get) -> object:
            return get(update_address(OWNER, TOPIC, i))

        def lookup(get: Callable[[bytes], bytes | None] = get) -> object:
            return find_latest(get, OWNER, TOPIC)

        probe = timed(one_probe, args.seconds)
        look = timed(lookup, args.seconds)
        print(
            f"{n:>8} {found.reads:>6} {reference_finder_reads(n):>10} {n + 1:>7} "
            f"{look * 1e6:>10.1f} {probe * 1e6:>9.2f} {look / probe:>12.1f}x"
        )
    print()
    print("reads: chunk reads of find_latest; ref. reads: the reference node's finder on the same feed;")
    print("linear: a scan from index 0; lookup/probe: lookup time over one probe (address + map read).")
    if not args.no_daemon:
        print()
        asyncio.run(daemon_section(sizes, args.seconds))


if __name__ == "__main__":
    main()
