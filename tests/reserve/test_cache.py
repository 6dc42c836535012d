"""Uploads outside the storage radius: kept in a bounded cache (least recently used out first) or by a pin.

``Holds(cache=True)`` turns the reserve's refusal of an address outside the
radius into a cache entry (no stamp entry, so no reserve size and no
sample); ``Holds(pin=...)`` keeps such a chunk by its pin alone. The reserve
worker keeps the cache within ``cache_capacity``, dropping the entries read
least recently.
"""

from __future__ import annotations

import pytest

from chunkstore.reserve import OutOfRadius, ReserveOptions, ReserveStore
from chunkstore.store.store import KEPT_CACHE, KEPT_PIN, KEPT_RESERVE, Holds
from chunkstore.store.verify import verify_store
from tests.store.helpers import Stamper, make_batch
from tests.store.pinhelpers import cached, far_address_data, pin_rows

OVERLAY = bytes.fromhex("c4" + "17" * 31)
RADIUS = 3


@pytest.fixture
def setup(tmp_path):
    batch = make_batch(1, depth=20, bucket_depth=8)
    store = ReserveStore(tmp_path / "s", overlay=OVERLAY, reserve=ReserveOptions(cache_capacity=5))
    store.batches.add(batch)
    store.reserve.set_radius(RADIUS)
    yield store, Stamper(batch)
    store.close()


def far(n: int) -> list[tuple[bytes, bytes]]:
    return [far_address_data(OVERLAY, RADIUS, near=False) for _ in range(n)]


def test_outside_the_radius_a_plain_put_is_refused_an_upload_is_cached(setup):
    store, stamper = setup
    addr, data = far(1)[0]
    with pytest.raises(OutOfRadius):
        store.put(data, stamper.stamp(addr))
    result = store.put(data, stamper.stamp(addr), holds=Holds(cache=True))
    assert result.kept == KEPT_CACHE and result.stored
    assert store.get(addr) == data
    assert not store.stamps_of(addr), "the cache keeps data, not stamps"
    assert store.reserve.status().size == 0
    assert store.cache.size() == 1 and cached(store) == {addr}
    again = store.put(data, stamper.stamp(addr), holds=Holds(cache=True))
    assert not again.stored and again.kept == KEPT_CACHE  # seen: already here
    near_addr, near_data = far_address_data(OVERLAY, RADIUS, near=True)
    inside = store.put(near_data, stamper.stamp(near_addr), holds=Holds(cache=True))
    assert inside.kept == KEPT_RESERVE and store.stamps_of(near_addr) and near_addr not in cached(store)
    assert verify_store(store.path).ok


def test_cache_keeps_its_capacity_dropping_the_least_recently_used(setup):
    store, stamper = setup
    chunks = far(8)
    for addr, data in chunks[:5]:
        store.put(data, stamper.stamp(addr), holds=Holds(cache=True))
    store.get(chunks[0][0])  # read: now the most recently used
    for addr, data in chunks[5:]:
        store.put(data, stamper.stamp(addr), holds=Holds(cache=True))
    assert store.cache.size() == 8
    done = store.reserve.maintain()
    assert done["cache"] == 3 and store.reserve.cache.evicted == 3
    kept = {a for a, _ in chunks[5:]} | {chunks[0][0], chunks[4][0]}
    assert cached(store) == kept
    assert {a for a, _ in chunks if store.has(a)} == kept, "dropped entries take their chunks along"
    assert verify_store(store.path).ok


def test_cache_eviction_spares_pinned_and_reserve_data(setup):
    store, stamper = setup
    pin_id = store.pins.begin()
    pinned = far(2)
    results = store.put_many([(d, stamper.stamp(a)) for a, d in pinned], holds=Holds(pin=pin_id, cache=True))
    assert [r.kept for r in results] == [KEPT_PIN, KEPT_PIN], "a pin keeps it; the cache's room is not taken"
    store.pins.commit(pin_id, pinned[0][0], 2)
    also_cached = far(1)[0]
    store.put(also_cached[1], stamper.stamp(also_cached[0]), holds=Holds(cache=True))
    pin_two = store.pins.begin()
    store.pins.add(pin_two, [also_cached[0]])  # cached and pinned
    store.pins.commit(pin_two, also_cached[0], 1)
    for addr, data in far(6):
        store.put(data, stamper.stamp(addr), holds=Holds(cache=True))
    store.reserve.maintain()
    assert store.cache.size() == 5
    assert all(store.has(a) for a, _ in pinned) and store.has(also_cached[0])
    assert also_cached[0] not in cached(store), "the oldest entry went, its chunk stayed for its pin"
    assert len(pin_rows(store)) == 3
    assert verify_store(store.path).ok


def test_a_put_past_capacity_wakes_the_worker(setup):
    from chunkstore.reserve import ReserveWorker

    store, stamper = setup
    worker = ReserveWorker(store.reserve).start()
    try:
        assert worker.settle()
        for addr, data in far(9):
            store.put(data, stamper.stamp(addr), holds=Holds(cache=True))
        assert worker.settle()
        assert store.cache.size() == 5
    finally:
        worker.stop()


def test_reads_are_noted_without_writing_and_applied_before_eviction(setup):
    store, stamper = setup
    chunks = far(5)
    for addr, data in chunks:
        store.put(data, stamper.stamp(addr), holds=Holds(cache=True))
    oldest_before = store.cache.oldest(1)[0][1]
    assert oldest_before == chunks[0][0]
    store.get(chunks[0][0])
    assert store.cache.oldest(1)[0][1] == chunks[0][0], "a read alone writes nothing"
    assert store.cache.apply_reads() == 1
    assert store.cache.oldest(1)[0][1] == chunks[1][0]
    assert store.cache.oldest(5)[-1][1] == chunks[0][0]


def test_zero_capacity_empties_the_cache(tmp_path):
    batch = make_batch(1, depth=20, bucket_depth=8)
    path = tmp_path / "s"
    with ReserveStore(path, overlay=OVERLAY) as store:
        store.batches.add(batch)
        store.reserve.set_radius(RADIUS)
        stamper = Stamper(batch)
        for addr, data in far(4):
            store.put(data, stamper.stamp(addr), holds=Holds(cache=True))
    with ReserveStore(path, overlay=OVERLAY, reserve=ReserveOptions(cache_capacity=0)) as store:
        assert store.cache.size() == 4
        store.reserve.maintain()
        assert store.cache.size() == 0 and store.chunk_count() == 0
