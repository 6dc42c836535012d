"""Pins in the store: whole trees pinned, kept through every eviction, handed back on unpin.

The rule: a chunk is stored while a stamp entry (the reserve), a pin or a
cache entry keeps it. Evictions (capacity, radius sweep), batch expiry and
batch removal drop stamp entries, so a pinned chunk loses its place in the
reserve (and the sample) but keeps its data; unpinning deletes the data of
the chunks nothing else keeps, and leaves the rest to the reserve's rules.
"""

from __future__ import annotations

import random

import pytest

from chunkstore.reserve import ReserveOptions, ReserveStore
from chunkstore.reserve.chainstate import ChainState
from chunkstore.store.errors import ChunkNotFound, PinAborted, UnknownPin
from chunkstore.store.pinning import pin_reference
from chunkstore.store.verify import verify_store
from chunkstore.swarm.file import ChunkMissing
from chunkstore.swarm.redundancy.level import Level
from tests.reserve.helpers import entries, fill
from tests.store.helpers import Stamper, make_batch
from tests.store.pinhelpers import pin_rows, tree_chunks, upload, upload_manifest

OVERLAY = bytes.fromhex("5a" + "c3" * 31)


def clean(store: ReserveStore) -> None:
    report = verify_store(store.path)
    assert report.ok, [str(p) for p in report.problems]


def open_with(path, batches, **options) -> ReserveStore:
    store = ReserveStore(path, overlay=OVERLAY, reserve=ReserveOptions(min_evict_count=1, evict_step=7, **options))
    for b in batches:
        store.batches.add(b)
    return store


def test_pin_covers_the_whole_tree_and_checks_clean(tmp_path):
    batch = make_batch(1, depth=22, bucket_depth=8)
    with open_with(tmp_path / "s", [batch]) as store:
        stamper = Stamper(batch)
        ref, addrs = upload(store, stamper, random.Random(1).randbytes(300 * 4096 + 17), level=Level.MEDIUM)
        replicas = {a for a in addrs if len(store.get(a)) > 4104}
        assert pin_reference(store, ref)
        assert store.pins.list() == [ref]
        pin = store.pins.get(ref)
        assert pin is not None and pin.chunks == len(addrs - replicas)
        assert set(store.pins.addresses(ref)) == addrs - replicas  # parities included, replicas not (as Bee)
        check = store.pins.check(ref)
        assert (check.total, check.missing, check.invalid) == (len(addrs - replicas), 0, 0)
        assert not pin_reference(store, ref)  # already pinned: nothing new
        assert store.pins.chunk_count() == pin.chunks
        clean(store)


def test_pinned_chunks_survive_capacity_eviction_sweep_and_expiry(tmp_path):
    cheap = make_batch(1, depth=14, bucket_depth=4, value=10)
    dear = make_batch(2, depth=14, bucket_depth=4, value=10**9)
    with open_with(tmp_path / "s", [cheap, dear], capacity=40) as store:
        stamper = Stamper(cheap)
        ref, addrs = upload(store, stamper, random.Random(2).randbytes(20 * 4096))  # 21 chunks, cheap batch
        pin_reference(store, ref)
        fill(store, [dear], 60, random.Random(3))  # over capacity: the cheap batch goes first
        store.reserve.maintain()
        assert store.reserve.status().size <= 40
        unstamped = [a for a in addrs if not store.stamps_of(a)]
        assert unstamped, "the eviction took stamps of pinned chunks (cheapest batch first)"
        assert all(store.has(a) for a in addrs)
        assert not set(unstamped) & {e[0] for e in entries(store)}
        store.reserve.set_radius(4, sweep=True)
        store.reserve.maintain()
        store.reserve.set_chainstate(ChainState(block=10, total_amount=100, current_price=1))  # cheap expires
        store.reserve.maintain()
        assert cheap.id not in store.batches
        assert all(store.has(a) for a in addrs), "a pinned chunk outlives its stamps"
        assert not any(store.stamps_of(a) for a in addrs)
        assert store.pins.check(ref).missing == 0
        clean(store)
        # unpinned: nothing keeps them any more
        assert store.pins.remove(ref) == len(addrs)
        assert not any(store.has(a) for a in addrs)
        assert pin_rows(store) == set()
        clean(store)


def test_batch_removal_keeps_pinned_data(tmp_path):
    batch = make_batch(1)
    with open_with(tmp_path / "s", [batch]) as store:
        ref, addrs = upload(store, Stamper(batch), b"x" * 9000)
        pin_reference(store, ref)
        store.batches.remove(batch.id)
        assert all(store.has(a) for a in addrs) and store.chunk_count() == len(addrs)
        clean(store)


def test_unpinned_chunk_goes_back_under_the_reserve_rules(tmp_path):
    batch = make_batch(1, depth=14, bucket_depth=4, value=10)
    with open_with(tmp_path / "s", [batch], capacity=1000) as store:
        stamper = Stamper(batch)
        ref, addrs = upload(store, stamper, random.Random(4).randbytes(5 * 4096))
        pin_reference(store, ref)
        store.pins.remove(ref)
        assert all(store.has(a) and store.stamps_of(a) for a in addrs), "still in the reserve under its stamps"
        store.reserve.set_chainstate(ChainState(block=1, total_amount=100, current_price=1))
        store.reserve.maintain()
        assert not any(store.has(a) for a in addrs), "and evicted by its rules like any other"
        clean(store)


def test_two_pins_share_chunks(tmp_path):
    batch = make_batch(1)
    with open_with(tmp_path / "s", [batch]) as store:
        stamper = Stamper(batch)
        shared = b"shared content " * 500
        root_a, addrs_a = upload_manifest(store, stamper, {"a.txt": shared, "only-a": b"a" * 5000})
        root_b, addrs_b = upload_manifest(store, stamper, {"b.txt": shared, "only-b": b"b" * 5000})
        assert pin_reference(store, root_a) and pin_reference(store, root_b)
        assert set(store.pins.list()) == {root_a, root_b}
        store.batches.remove(batch.id)  # only the pins keep anything now
        store.pins.remove(root_a)
        assert all(store.has(a) for a in addrs_b)
        assert not any(store.has(a) for a in addrs_a - addrs_b)
        store.pins.remove(root_b)
        assert store.chunk_count() == 0
        clean(store)


def test_pin_of_what_is_not_here_leaves_nothing(tmp_path):
    batch = make_batch(1)
    with open_with(tmp_path / "s", [batch]) as store:
        stamper = Stamper(batch)
        with pytest.raises(ChunkMissing):
            pin_reference(store, bytes(range(32)))
        ref, chunks = tree_chunks(random.Random(5).randbytes(10 * 4096))
        leaf = chunks[3]
        store.put_many([(d, stamper.stamp(a)) for a, d in chunks if a != leaf[0]])
        with pytest.raises(ChunkNotFound):
            pin_reference(store, ref, step=3)  # some steps committed before the missing leaf
        assert store.pins.list() == [] and store.pins.in_flux() == {}
        assert pin_rows(store) == set()
        assert store.chunk_count() == len(chunks) - 1  # the partial collection took nothing with it
        clean(store)


def test_unknown_pin_and_bad_references(tmp_path):
    with open_with(tmp_path / "s", []) as store:
        with pytest.raises(UnknownPin):
            store.pins.remove(bytes(32))
        with pytest.raises(UnknownPin):
            store.pins.check(bytes(64))
        with pytest.raises(UnknownPin):
            store.pins.remove(b"short")
        assert store.pins.get(b"short") is None


def test_a_rolled_back_collection_cannot_grow(tmp_path):
    batch = make_batch(1)
    with open_with(tmp_path / "s", [batch]) as store:
        ref, addrs = upload(store, Stamper(batch), b"y" * 5000)
        pin_id = store.pins.begin()
        store.pins.add(pin_id, sorted(addrs)[:1])
        assert store.pins.finish_pending() == 1  # what a writable open of another process does
        with pytest.raises(PinAborted):
            store.pins.add(pin_id, sorted(addrs))
        with pytest.raises(PinAborted):
            store.pins.commit(pin_id, ref, 1)
        assert pin_rows(store) == set() and store.pins.list() == []
        clean(store)


def test_interrupted_collections_are_rolled_back_or_finished_at_open(tmp_path):
    path = tmp_path / "s"
    batch = make_batch(1)
    with open_with(path, [batch]) as store:
        stamper = Stamper(batch)
        ref_a, addrs_a = upload(store, stamper, random.Random(6).randbytes(3 * 4096))
        ref_b, addrs_b = upload(store, stamper, random.Random(7).randbytes(3 * 4096))
        pin_reference(store, ref_b)
        building = store.pins.begin()
        store.pins.add(building, addrs_a)
        store.batches.remove(batch.id)  # the chunks now live by their pin rows alone
    # what a crash mid-unpinning leaves: the record moved to "pinning" as removing, rows still there
    from chunkstore.store.pins import _FLUX_HEAD, REMOVING

    with ReserveStore(path, readonly=True) as store:
        report = verify_store(path)
        assert report.ok and report.pending == 1
        pin_b = store.pins.get(ref_b)
    with ReserveStore(path) as store:  # the open rolls the building collection back
        assert store.recovered["pin_collections"] == 1
        assert not any(store.has(a) for a in addrs_a - addrs_b)
        assert all(store.has(a) for a in addrs_b)
        meta = store.meta
        with meta.env.begin(write=True) as txn:
            txn.delete(ref_b, db=meta.pins)
            txn.put(pin_b.pin_id, _FLUX_HEAD.pack(REMOVING, 0) + ref_b, db=meta.pinning)
    with ReserveStore(path) as store:
        assert store.recovered["pin_collections"] == 1
        assert store.chunk_count() == 0 and store.pins.list() == []
        assert pin_rows(store) == set()
    assert verify_store(path).ok


def test_verify_names_broken_pin_rows_and_repairs_them(tmp_path):
    path = tmp_path / "s"
    batch = make_batch(1)
    with open_with(path, [batch]) as store:
        ref, addrs = upload(store, Stamper(batch), random.Random(8).randbytes(2 * 4096 + 1))
        pin_reference(store, ref)
        victim = sorted(addrs)[0]
        s = store.shard_of(victim)
        shard = store.shard(s)
        with shard.env.begin(write=True) as txn:
            txn.put(victim + b"\xff" * 8, b"", db=shard.pinrefs)  # a row of no pin, one mirror only
            txn.put(b"\xee" * 8 + victim, b"", db=shard.pinsets)
    report = verify_store(path)
    kinds = sorted(p.kind for p in report.problems)
    assert kinds == ["pin-mirror", "pin-mirror"], [str(p) for p in report.problems]
    assert verify_store(path, repair=True).repaired == 2
    assert verify_store(path).ok
    with ReserveStore(path) as store:
        pin = store.pins.get(ref)
        meta = store.meta
        with meta.env.begin(write=True) as txn:  # a wrong count in the record
            raw = bytes(txn.get(ref, db=meta.pins))
            txn.put(ref, raw[:8] + (999).to_bytes(8, "big") + raw[16:], db=meta.pins)
        shard = store.shard(store.shard_of(victim))
        with shard.env.begin(write=True) as txn:  # and the pinned chunk lost
            txn.delete(victim, db=shard.chunks)
            txn.delete(victim, db=shard.tails)
        assert store.pins.check(ref).missing == 1
    report = verify_store(path)
    assert {p.kind for p in report.problems} >= {"pin-count", "pin-missing"}
    verify_store(path, repair=True)
    report = verify_store(path)
    assert [p.kind for p in report.problems] == ["pin-missing"], "lost pinned data stays reported"
    assert pin.chunks == len(addrs)
