"""Batch records: validation, add/update/get/list/remove, and removal of a batch's chunks."""

from __future__ import annotations

import dataclasses

import pytest

from chunkstore.reserve import ReserveStore
from chunkstore.store.batchstore import Batch, decode_batch, encode_batch
from chunkstore.store.errors import BatchExists, InvalidBatch, UnknownBatch
from tests.store.helpers import Stamper, make_batch, open_store, random_cac


@pytest.fixture
def store(tmp_path):
    s = ReserveStore(str(tmp_path / "s"))
    yield s
    s.close()


def test_add_get_list_update(store):
    b1, b2 = make_batch(1), make_batch(2, value=10**40)
    store.batches.add(b1)
    store.batches.add(b2)
    assert store.batches.get(b1.id) == b1
    assert store.batches.get(b2.id).value == 10**40
    assert store.batches.list() == sorted([b1, b2], key=lambda b: b.id)
    assert b1.id in store.batches and len(store.batches) == 2
    with pytest.raises(BatchExists):
        store.batches.add(b1)
    topped = dataclasses.replace(b1, value=b1.value + 5, depth=b1.depth + 2, immutable=True)
    store.batches.update(topped)
    assert store.batches.get(b1.id) == topped
    assert store.batches.find(b"\0" * 32) is None
    with pytest.raises(UnknownBatch):
        store.batches.get(b"\0" * 32)
    with pytest.raises(UnknownBatch):
        store.batches.update(make_batch(3))
    with pytest.raises(UnknownBatch):
        store.batches.remove(make_batch(3).id)


def test_also_writes_in_the_batch_changes_own_transaction(store):
    """``add``/``update`` with ``also``: the issuer record commits with the batch, and a failure in it leaves
    neither (the batch's value and the amount paid for it cannot come apart)."""
    b = make_batch(1)

    def boom(txn):
        store.issuers.register_in(txn, b.id, label="x", amount=1)
        raise RuntimeError("between the two writes")

    with pytest.raises(RuntimeError):
        store.batches.add(b, also=boom)
    assert store.batches.find(b.id) is None and store.issuers.info(b.id) is None
    store.batches.add(b, also=lambda txn: store.issuers.register_in(txn, b.id, label="x", amount=b.value))
    assert store.issuers.info(b.id).amount == b.value
    topped = dataclasses.replace(b, value=b.value + 5)

    def boom_update(txn):
        store.issuers.register_in(txn, b.id, label="x", amount=topped.value)
        raise RuntimeError("between the two writes")

    with pytest.raises(RuntimeError):
        store.batches.update(topped, also=boom_update)
    assert store.batches.get(b.id) == b and store.issuers.info(b.id).amount == b.value
    store.batches.update(topped, also=lambda txn: store.issuers.register_in(txn, b.id, label="y", amount=topped.value))
    assert store.batches.get(b.id) == topped
    info = store.issuers.info(b.id)
    assert (info.amount, info.label) == (topped.value, "y")
    with store._meta.env.begin() as txn:
        assert store.issuers.info_in(txn, b.id) == info


@pytest.mark.parametrize(
    "change, match",
    [
        ({"owner": b"\1" * 20}, "owner cannot change"),
        ({"bucket_depth": 15}, "bucket depth cannot change"),
        ({"depth": 19}, "depth cannot decrease"),
    ],
)
def test_update_refuses_changes_that_break_stamps(store, change, match):
    b = make_batch(1)
    store.batches.add(b)
    with pytest.raises(InvalidBatch, match=match):
        store.batches.update(dataclasses.replace(b, **change))
    assert store.batches.get(b.id) == b


@pytest.mark.parametrize(
    "field, value",
    [
        ("id", b"\0" * 31),
        ("owner", b"\0" * 21),
        ("depth", 256),
        ("depth", -1),
        ("bucket_depth", 21),  # above depth
        ("bucket_depth", -1),
        ("value", -1),
        ("value", 1.5),
        ("start", -1),
        ("immutable", 1),
        ("depth", True),
    ],
)
def test_invalid_fields(store, field, value):
    with pytest.raises(InvalidBatch, match=field.replace("_", " ") if field != "id" else "batch id"):
        store.batches.add(dataclasses.replace(make_batch(1), **{field: value}))
    assert store.batches.list() == []


def test_bucket_depth_bound_is_32():
    dataclasses.replace(make_batch(1), depth=40, bucket_depth=32).validate()
    with pytest.raises(InvalidBatch):
        dataclasses.replace(make_batch(1), depth=40, bucket_depth=33).validate()


def test_record_round_trip():
    b = Batch(id=b"\7" * 32, owner=b"\1" * 20, depth=255, bucket_depth=32, immutable=True, value=2**200, start=2**64 - 1)
    assert decode_batch(b.id, encode_batch(b)) == (b, 0)
    zero = dataclasses.replace(b, value=0, start=0)
    assert decode_batch(b.id, encode_batch(zero))[0] == zero


def test_remove_batch_removes_its_chunks(tmp_path):
    b1, b2 = make_batch(1), make_batch(2)
    with open_store(str(tmp_path / "s"), batches=[b1, b2]) as store:
        s1, s2 = Stamper(b1), Stamper(b2)
        only1 = [random_cac(10) for _ in range(30)]
        both = [random_cac(10) for _ in range(10)]
        only2 = [random_cac(10) for _ in range(10)]
        store.put_many([(d, s1.stamp(a)) for a, d in only1 + both])
        store.put_many([(d, s2.stamp(a)) for a, d in both + only2])
        assert store.batches.remove(b1.id) == 40
        assert b1.id not in store.batches
        for a, _ in only1:
            assert not store.has(a)
        for a, _ in both:
            assert store.has(a) and [s.batch_id for s in store.stamps_of(a)] == [b2.id]
        stats = store.stats()
        assert (stats["chunks"], stats["stamps"], stats["slots"], stats["bytes"]) == (20, 20, 20, 20 * 18)
        # Stamps of a removed batch are refused; re-adding starts from empty slots.
        with pytest.raises(UnknownBatch):
            store.put(only1[0][1], s1.stamp(only1[0][0]))
        store.batches.add(b1)
        assert store.put(only1[0][1], Stamper(b1).stamp(only1[0][0])).stored


def test_remove_large_batch_in_steps(tmp_path, monkeypatch):
    import chunkstore.store.store as store_mod

    monkeypatch.setattr(store_mod, "PURGE_STEP", 7)
    b = make_batch(1)
    with open_store(str(tmp_path / "s"), batches=[b]) as store:
        stamper = Stamper(b)
        store.put_many([(d, stamper.stamp(a)) for a, d in (random_cac(5) for _ in range(60))])
        assert store.batches.remove(b.id) == 60
        assert store.stats()["chunks"] == 0 and store.stats()["bytes"] == 0


def test_interrupted_removal_is_finished_at_open(tmp_path):
    """A batch marked removing (crash during the purge) is purged by the next open."""
    path = str(tmp_path / "s")
    b = make_batch(1)
    with open_store(path, batches=[b]) as store:
        stamper = Stamper(b)
        chunks = [random_cac(5) for _ in range(10)]
        store.put_many([(d, stamper.stamp(a)) for a, d in chunks])
        meta = store._meta
        with meta.env.begin(write=True) as txn:
            txn.put(b.id, encode_batch(b, state=1), db=meta.batches)
        assert store.batches.find(b.id) is None and store.batches.removing() == [b.id]
    with ReserveStore(path, readonly=True) as ro:
        assert ro.chunk_count() == 10  # a reader does not repair
    with ReserveStore(path) as store:
        assert store.recovered["batch_removals"] == 1
        assert store.chunk_count() == 0 and store.batches.removing() == []
