"""The sample walks only the reserve within the storage radius, as the reference node does.

The reference (``pkg/storer/sample.go``) iterates its reserve from the bin of
the storage radius (proximity to its overlay), then keeps what is within the
depth of the anchor. A raised radius leaves chunks below it until the
background eviction gets to them; the sample must not depend on whether it has.
"""

from __future__ import annotations

import pytest

import tests.sampler.textbook as textbook
from chunkstore.swarm.constants import SAMPLE_SIZE
from sampler import InsufficientSample, check_sample, reserve_sample
from sampler.pipeline import expected_entries
from sampler.scope import SampleScope, intersect, range_fraction_bits
from tests.sampler.helpers import World, build_world, simple_sample

ANCHOR = bytes.fromhex("a1" * 32)
RADIUS = 2


@pytest.fixture
def world(tmp_path) -> World:
    w = build_world(str(tmp_path / "s"), 1500, seed=21)
    yield w
    w.store.close()


def _items(result) -> list[tuple]:
    return [(it.transformed_address, it.chunk_address, it.stamp) for it in result.items]


def _want(expected) -> list[tuple]:
    return [(t[0], t[1], t[3]) for t in expected.items[:SAMPLE_SIZE]]


def _stamp_entries(store) -> int:
    return sum(store.shard(i).counts()["stamps"] for i in range(store.shard_count))


@pytest.mark.parametrize("workers", [0, 2])
def test_raised_radius_samples_the_same_before_and_after_eviction(world: World, workers):
    store = world.store
    overlay = store.reserve.overlay
    consensus = world.base_time + 900
    unfiltered = simple_sample(world, ANCHOR, 0, consensus, 100)
    expected = simple_sample(world, ANCHOR, 0, consensus, 100, overlay=overlay, radius=RADIUS)
    assert _want(expected) != _want(unfiltered), "the radius must change the answer, or the test proves nothing"

    store.reserve.set_radius(RADIUS, sweep=True)  # the eviction has not run yet
    entries = _stamp_entries(store)
    before = reserve_sample(store, ANCHOR, 0, consensus, 100, workers=workers)
    assert _items(before) == _want(expected)
    assert before.storage_radius == RADIUS
    assert before.stats.total_iterated == expected.iterated < entries
    assert expected_entries(store, ANCHOR, 0) == store.reserve.status().size_within_radius
    check_sample(before.items, ANCHOR, store.batches, consensus)

    store.reserve.maintain()
    assert _stamp_entries(store) < entries, "the sweep evicted nothing"
    after = reserve_sample(store, ANCHOR, 0, consensus, 100, workers=workers)
    assert _items(after) == _items(before)
    assert after.stats.total_iterated == before.stats.total_iterated


def test_depth_beyond_the_radius(world: World):
    """An anchor inside the radius range narrows it further; one outside it finds nothing."""
    store = world.store
    overlay = store.reserve.overlay
    consensus = world.base_time + 900
    store.reserve.set_radius(RADIUS)
    inside = overlay[:1] + ANCHOR[1:]  # shares the overlay's first byte, so its first RADIUS bits
    expected = simple_sample(world, inside, 3, consensus, None, overlay=overlay, radius=RADIUS)
    assert len(expected.items) >= SAMPLE_SIZE
    result = reserve_sample(store, inside, 3, consensus, workers=2)
    assert _items(result) == _want(expected)
    outside = bytes([overlay[0] ^ 0x80]) + overlay[1:]  # differs in the first bit: proximity 0 < radius
    with pytest.raises(InsufficientSample) as info:
        reserve_sample(store, outside, 1, consensus, workers=2)
    assert info.value.found == 0
    assert expected_entries(store, outside, 1) == 0


def test_scope_ranges_match_proximity():
    """Every address is in the scope's key range exactly when both proximity rules hold."""
    import random

    rng = random.Random(4)
    for _ in range(300):
        anchor = rng.randbytes(rng.choice((1, 2, 32)))
        overlay = rng.randbytes(32)
        if rng.random() < 0.5:  # make the two prefixes agree often, so ranges nest
            overlay = anchor[:1] + overlay[1:]
        depth, radius = rng.randrange(0, 33), rng.randrange(0, 32)
        rng_ = SampleScope(anchor, depth, overlay, radius).key_range()
        for _ in range(20):
            address = rng.randbytes(32)
            if rng.random() < 0.5:
                address = (anchor if rng.random() < 0.5 else overlay)[: rng.randrange(0, 5)] + address
                address = address[:32]
            want = textbook.proximity(address, anchor) >= depth and textbook.proximity(address, overlay) >= radius
            got = rng_ is not None and rng_[0] <= address and (rng_[1] is None or address < rng_[1])
            assert got == want, (anchor.hex(), depth, overlay.hex(), radius, address.hex())


def test_intersect_and_fraction():
    assert intersect((b"\x40", b"\x80"), (b"\x50", b"\x60")) == (b"\x50".ljust(32, b"\0"), b"\x60".ljust(32, b"\0"))
    assert intersect((b"\x40", b"\x80"), (b"\x80", None)) is None
    assert intersect((b"", None), (b"\xc0", None)) == (b"\xc0".ljust(32, b"\0"), None)
    assert range_fraction_bits((b"", None)) == 0
    assert range_fraction_bits((b"\x80", None)) == 1
    assert range_fraction_bits((b"\x50", b"\x60")) == 4
    assert range_fraction_bits(None) is None


async def test_rchash_samples_within_the_radius(tmp_path):
    """The daemon's /rchash and its verbose sizes follow the storage radius too."""
    from aiohttp.test_utils import TestClient, TestServer

    from api.app import make_app
    from api.config import Config
    from tests.api.test_api_rchash import filled_store

    store, _ = filled_store(tmp_path, 80, 20)
    overlay = bytes(32)
    store.reserve.set_overlay(overlay)
    store.reserve.set_radius(1)  # half the chunks are now outside, not yet evicted
    inside = []
    for address, ctype, _, _ in store.iter_neighbourhood(b"", 0):
        if textbook.proximity(address, overlay) >= 1:
            taddr = textbook.transformed_address(address, store.get(address), ctype == 2, b"\xaa")
            inside.append((taddr, address))
    inside.sort()
    assert SAMPLE_SIZE <= len(inside) < 100
    app = make_app(store, Config(data_dir=tmp_path, workers=1), close_store=True)
    async with TestClient(TestServer(app)) as client:
        r = await client.get("/rchash/0/aa/bb?verbose=true")
        assert r.status == 200, await r.text()
        body = await r.json()
        assert body["hash"] == textbook.sample_hash([(a, t) for t, a in inside[:SAMPLE_SIZE]]).hex()
        assert body["storageRadius"] == 1
        assert body["reserveSizeWithinDepth"] == len(inside)
        assert body["stats"]["total_iterated"] == len(inside)
