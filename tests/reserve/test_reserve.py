"""The reserve: overlay, radius admission, exact per-bin counts, capacity eviction, sweeps, the worker."""

from __future__ import annotations

import random

import pytest

from chunkstore.reserve import InvalidReserveOption, OutOfRadius, ReserveOptions, ReserveStore, ReserveWorker
from chunkstore.reserve.eviction import bin_buckets
from chunkstore.store.verify import verify_store
from chunkstore.swarm.proximity import proximity
from sampler import InsufficientSample, reserve_sample
from tests.reserve.helpers import direct_bins, entries, expected_unreserve, fill
from tests.store.helpers import Stamper, make_batch, random_cac

OVERLAY = bytes.fromhex("a5" + "3c" * 31)


def small(capacity: int = 100, **kw) -> ReserveOptions:
    return ReserveOptions(capacity=capacity, min_evict_count=kw.pop("min_evict_count", 1),
                          evict_step=kw.pop("evict_step", 7), **kw)


def check_consistent(store: ReserveStore) -> None:
    """Counters equal a direct count of the entries, and verify finds nothing."""
    found = entries(store)
    status = store.reserve.status()
    assert list(status.bins) == direct_bins(found, store.reserve.overlay)
    assert status.size == len(found)
    assert status.size_within_radius == sum(1 for a, _, _ in found if proximity(store.reserve.overlay, a) >= status.radius)
    report = verify_store(store.path)
    assert report.ok, [str(p) for p in report.problems]


# ------------------------------------------------------------------ identity and admission


def test_fresh_store_generates_and_keeps_its_overlay_radius_zero(tmp_path):
    path = tmp_path / "s"
    with ReserveStore(path) as store:
        overlay = store.reserve.overlay
        assert len(overlay) == 32 and overlay != bytes(32)
        assert store.reserve.radius == 0 and store.reserve.status().committed_depth == 0
        store.batches.add(make_batch(1))
        fill(store, [make_batch(1)], 50, random.Random(1))  # radius 0: everything is accepted
        status = store.reserve.status()
        assert status.size == status.size_within_radius == 50
    with ReserveStore(path) as store:
        assert store.reserve.overlay == overlay
    with ReserveStore(path, readonly=True) as store:
        assert store.reserve.overlay == overlay and store.reserve.status().size == 50


def test_radius_refuses_chunks_outside_the_neighbourhood(tmp_path):
    batch = make_batch(1, depth=12, bucket_depth=4)
    with ReserveStore(tmp_path / "s", overlay=OVERLAY) as store:
        store.batches.add(batch)
        store.reserve.set_radius(2)
        stamper = Stamper(batch)
        near = far = None
        while near is None or far is None:
            addr, data = random_cac(20)
            if proximity(OVERLAY, addr) >= 2:
                near = near or (addr, data)
            elif proximity(OVERLAY, addr) < 2:
                far = far or (addr, data)
        with pytest.raises(OutOfRadius, match="below the storage radius 2") as exc:
            store.put(far[1], stamper.stamp(far[0]))
        assert exc.value.radius == 2 and exc.value.proximity < 2
        assert not store.has(far[0])
        # put_many stays all-or-nothing, naming the item
        with pytest.raises(OutOfRadius) as exc:
            store.put_many([(near[1], stamper.stamp(near[0])), (far[1], stamper.stamp(far[0]))])
        assert "put_many item 1" in exc.value.__notes__
        assert store.chunk_count() == 0
        assert store.put(near[1], stamper.stamp(near[0])).stored
        check_consistent(store)


def test_options_are_checked(tmp_path):
    with pytest.raises(InvalidReserveOption):
        ReserveStore(tmp_path / "a", reserve=ReserveOptions(capacity=0))
    with ReserveStore(tmp_path / "b") as store:
        with pytest.raises(InvalidReserveOption):
            store.reserve.set_radius(32)
        with pytest.raises(InvalidReserveOption):
            store.reserve.set_overlay(b"short")


# ------------------------------------------------------------------ counters


def test_counters_exact_through_puts_replacements_deletes_and_removals(tmp_path):
    rng = random.Random(5)
    contested = make_batch(9, depth=6, bucket_depth=0)  # 64 slots in one bucket: puts replace each other
    batches = [make_batch(1, depth=14, bucket_depth=4), make_batch(2, depth=14, bucket_depth=8)]
    with ReserveStore(tmp_path / "s", overlay=OVERLAY) as store:
        for b in [contested, *batches]:
            store.batches.add(b)
        addrs = fill(store, batches, 300, rng, shared=0.3)
        stamper = Stamper(contested)
        for _ in range(200):
            addr, data = random_cac(rng.randrange(1, 50))
            store.put(data, stamper.stamp(addr, position=rng.randrange(64)))  # frees older holders
            addrs.append(addr)
        for addr in rng.sample(addrs, 40):
            store.delete(addr)
        check_consistent(store)
        store.batches.remove(batches[0].id)
        check_consistent(store)


def test_overlay_change_recounts_and_sweeps(tmp_path):
    path = tmp_path / "s"
    batch = make_batch(1, depth=14, bucket_depth=4)
    with ReserveStore(path, overlay=OVERLAY, reserve=small(1000)) as store:
        store.batches.add(batch)
        fill(store, [batch], 200, random.Random(2))
        store.reserve.set_radius(1)
        before = entries(store)
    other = bytes([OVERLAY[0] ^ 0x80]) + OVERLAY[1:]  # the other half of the address space
    with ReserveStore(path, overlay=other, reserve=small(1000)) as store:
        assert store.reserve.overlay == other
        assert list(store.reserve.status().bins) == direct_bins(before, other)
        assert store.reserve.sweep_radius == 1
        done = store.reserve.maintain()
        assert done["radius"] == sum(1 for a, _, _ in before if proximity(other, a) < 1)
        assert all(proximity(other, a) >= 1 for a, _, _ in entries(store))
        assert store.reserve.sweep_radius == 0
        check_consistent(store)


def test_stale_counters_are_recounted_at_open(tmp_path):
    path = tmp_path / "s"
    batch = make_batch(1)
    with ReserveStore(path, overlay=OVERLAY) as store:
        store.batches.add(batch)
        fill(store, [batch], 60, random.Random(3))
        shard = store.shard(0)
        with shard.env.begin(write=True) as txn:  # as if an older build had written to the shard
            txn.put(b"bins", bytes(256), db=shard.info_db)
    report = verify_store(str(path))
    assert [p.kind for p in report.problems] == ["bin-counter"]
    with ReserveStore(path, overlay=OVERLAY) as store:
        assert store.reserve.recounted == [0]
        check_consistent(store)


# ------------------------------------------------------------------ eviction


def test_bin_buckets_cover_exactly_one_bin():
    rng = random.Random(4)
    for _ in range(300):
        overlay = rng.randbytes(32)
        b, bd = rng.randrange(31), rng.randrange(33)
        lo, hi, exact = bin_buckets(overlay, b, bd)
        addr = rng.randbytes(32)
        bucket = int.from_bytes(addr[:4], "big") >> (32 - bd) if bd else 0
        if proximity(overlay, addr) == b:
            assert lo <= bucket < hi
        elif exact:
            assert not lo <= bucket < hi


@pytest.mark.parametrize("min_evict", [1, 9])
def test_capacity_eviction_evicts_exactly_what_the_rule_says(tmp_path, min_evict):
    rng = random.Random(10 + min_evict)
    # three prices, three bucket depths (bins as bucket ranges, and bins inside one bucket)
    batches = [
        make_batch(1, depth=14, bucket_depth=4, value=300),
        make_batch(2, depth=14, bucket_depth=1, value=100),
        make_batch(3, depth=14, bucket_depth=10, value=200),
    ]
    capacity = 120
    with ReserveStore(tmp_path / "s", overlay=OVERLAY, reserve=small(capacity, min_evict_count=min_evict)) as store:
        for b in batches:
            store.batches.add(b)
        fill(store, batches, 400, rng, shared=0.2)
        found = entries(store)
        assert len(found) > 2 * capacity
        want, radius = expected_unreserve(found, batches, OVERLAY, 0, capacity, min_evict)
        done = store.reserve.maintain()
        left = entries(store)
        assert store.reserve.radius == radius >= 2  # the radius had to grow
        assert left == want
        assert done["capacity"] == len(found) - len(want) == store.reserve.evictions["capacity"]
        assert store.reserve.status().size <= capacity
        # a chunk goes when its last stamp does, and only then
        assert {a for a, *_ in store.iter_neighbourhood(b"", 0)} == {a for a, _, _ in want}
        for a, _, _ in found - want:
            assert store.has(a) == any(x == a for x, _, _ in want)
        check_consistent(store)


def test_radius_sweep_evicts_everything_outside(tmp_path):
    batches = [make_batch(1, depth=14, bucket_depth=3, value=5), make_batch(2, depth=14, bucket_depth=6, value=9)]
    with ReserveStore(tmp_path / "s", overlay=OVERLAY, reserve=small(10_000)) as store:
        for b in batches:
            store.batches.add(b)
        fill(store, batches, 300, random.Random(6), shared=0.2)
        found = entries(store)
        store.reserve.set_radius(3, sweep=True)
        assert store.reserve.sweep_radius == 3
        done = store.reserve.maintain()
        want = {e for e in found if proximity(OVERLAY, e[0]) >= 3}
        assert entries(store) == want
        assert done["radius"] == len(found) - len(want) == store.reserve.evictions["radius"]
        assert store.reserve.sweep_radius == 0 and store.reserve.radius == 3
        status = store.reserve.status()
        assert status.size == status.size_within_radius == len(want)
        check_consistent(store)


def test_minimum_radius_is_applied_at_open_and_bounds_the_decrease(tmp_path):
    path = tmp_path / "s"
    with ReserveStore(path, overlay=OVERLAY, reserve=small(1000)) as store:
        store.batches.add(make_batch(1))
        fill(store, [make_batch(1)], 80, random.Random(8))
    with ReserveStore(path, overlay=OVERLAY, reserve=small(1000, minimum_radius=2)) as store:
        assert store.reserve.radius == 2 and store.reserve.sweep_radius == 2
        store.reserve.maintain()
        assert all(proximity(OVERLAY, a) >= 2 for a, _, _ in entries(store))
        store.reserve.set_radius(4)
        # under half full within the radius: step down, but not below the minimum
        assert store.reserve.lower_radius_if_underpopulated() and store.reserve.radius == 3
        assert store.reserve.lower_radius_if_underpopulated() and store.reserve.radius == 2
        assert not store.reserve.lower_radius_if_underpopulated() and store.reserve.radius == 2


def test_worker_keeps_the_reserve_within_capacity_while_uploads_go_on(tmp_path):
    batches = [make_batch(1, depth=16, bucket_depth=4, value=1), make_batch(2, depth=16, bucket_depth=4, value=2)]
    rng = random.Random(11)
    with ReserveStore(tmp_path / "s", overlay=OVERLAY, reserve=small(150, evict_step=5)) as store:
        for b in batches:
            store.batches.add(b)
        worker = ReserveWorker(store.reserve).start()
        stampers: dict = {}
        groups = 0
        while groups < 10:  # each group wakes the worker once over capacity
            try:
                fill(store, batches, 60, rng, shared=0, stampers=stampers, overlay=OVERLAY,
                     min_po=store.reserve.radius + 1)
                groups += 1
            except OutOfRadius:  # the radius grew meanwhile: nothing was stored, try closer chunks
                pass
        assert worker.settle(30)
        assert store.reserve.status().size <= 150
        assert store.reserve.over_capacity_triggers >= 1 and worker.errors == 0
        assert store.reserve.radius >= 1
    assert not worker.running  # closing the store stopped it
    with ReserveStore(tmp_path / "s", overlay=OVERLAY) as store:
        check_consistent(store)


def test_samples_after_eviction_never_contain_an_evicted_chunk(tmp_path):
    batches = [make_batch(1, depth=16, bucket_depth=4, value=1), make_batch(2, depth=16, bucket_depth=4, value=2)]
    consensus = 1 << 62
    with ReserveStore(tmp_path / "s", overlay=OVERLAY, reserve=small(200)) as store:
        for b in batches:
            store.batches.add(b)
        fill(store, batches, 500, random.Random(12), shared=0)
        before = entries(store)
        anchors = [OVERLAY, bytes(32), bytes.fromhex("ff" * 32), bytes([OVERLAY[0] ^ 0x20]) + OVERLAY[1:]]
        samples_before = {a: reserve_sample(store, a, 0, consensus, workers=0) for a in anchors}
        store.reserve.maintain()
        kept = {a for a, _, _ in entries(store)}
        evicted = {a for a, _, _ in before} - kept
        assert len(evicted) >= 300
        hit = False
        sampled = 0
        for anchor in anchors:
            old = {item.chunk_address for item in samples_before[anchor].items}
            hit |= bool(old & evicted)  # the eviction did take sampled chunks away
            for depth in (0, 1, 2, 3):
                try:
                    result = reserve_sample(store, anchor, depth, consensus, workers=0)
                except InsufficientSample:  # the eviction emptied that neighbourhood
                    # (as the reference, the sample leaves out what is below the raised radius)
                    radius = store.reserve.radius
                    assert sum(proximity(anchor, a) >= depth and proximity(OVERLAY, a) >= radius for a in kept) < 16
                    continue
                got = {item.chunk_address for item in result.items}
                assert not got & evicted
                assert got <= kept
                sampled += 1
        assert hit and sampled >= 5


def test_over_capacity_found_at_start_is_counted_once_per_eviction(tmp_path):
    """bee_localstore_over_cap_trigger_count counts the evictions the worker runs for capacity, as the
    reference's worker counts the triggers it handles: one at start-up for a reserve left over-full (by an
    import, or a crash before eviction), none for a reserve within capacity."""
    batches = [make_batch(1, depth=16, bucket_depth=4, value=1)]
    rng = random.Random(5)
    with ReserveStore(tmp_path / "s", overlay=OVERLAY, reserve=small(1000)) as store:
        store.batches.add(batches[0])
        fill(store, batches, 120, rng, shared=0, stampers={}, overlay=OVERLAY)
    with ReserveStore(tmp_path / "s", overlay=OVERLAY, reserve=small(1000)) as store:
        worker = ReserveWorker(store.reserve).start()
        assert worker.settle(30)
        assert store.reserve.over_capacity_triggers == 0  # within capacity: nothing to count
    with ReserveStore(tmp_path / "s", overlay=OVERLAY, reserve=small(50, evict_step=5)) as store:
        assert store.reserve.over_capacity() > 0
        worker = ReserveWorker(store.reserve).start()
        assert worker.settle(30)
        assert store.reserve.status().size <= 50
        assert store.reserve.over_capacity_triggers == 1 and worker.errors == 0
