"""Every refused put raises its typed error and leaves the store exactly as it was;
the batch-slot rule (newer replaces, equal or older refused, repeat is a no-op)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from chunkstore.store.errors import StampConflict, UnknownBatch
from chunkstore.swarm.constants import ChunkType
from chunkstore.swarm.errors import InvalidChunk, InvalidStamp
from chunkstore.swarm.soc import make_soc
from chunkstore.swarm.stamp import bucket_of, sign_stamp
from tests.store.helpers import OTHER_KEY, Stamper, dump, make_batch, open_store, random_cac, random_soc, signer


@pytest.fixture
def batch():
    return make_batch(1, depth=18, bucket_depth=16)


@pytest.fixture
def store(tmp_path, batch):
    s = open_store(str(tmp_path / "store"), batches=[batch, make_batch(2)])
    # Some content so "unchanged" means something.
    stamper = Stamper(make_batch(2))
    s.put_many([(d, stamper.stamp(a)) for a, d in (random_cac(30) for _ in range(20))])
    yield s
    s.close()


def _bad_puts(batch):
    """(name, data, stamp, kwargs, error) cases; each must change nothing."""
    stamper = Stamper(batch)
    addr, data = random_cac(100)
    good = stamper.stamp(addr)
    bucket = bucket_of(addr, batch.bucket_depth)
    saddr, sdata = random_soc(50)
    sstamp = stamper.stamp(saddr)
    bad_sig = dataclasses.replace(good, signature=good.signature[:5] + bytes([good.signature[5] ^ 1]) + good.signature[6:])
    return [
        ("empty data", b"", good, {}, InvalidChunk),
        ("short data", b"1234567", good, {}, InvalidChunk),
        # Zeros, not random bytes: read as a SOC, 4,105 random bytes carry a random signature, which recovers
        # to some key when its v byte happens to be 27 or 28 (about one run in 128), and the put then failed
        # on the stamp (InvalidStamp) instead. An all-zero r recovers to none.
        ("payload over 4096", data[:8] + bytes(4097), good, {}, InvalidChunk),
        ("soc too long", sdata + os.urandom(4096), sstamp, {}, InvalidChunk),
        ("stamp too short", data, good.to_bytes()[:-1], {}, InvalidStamp),
        ("stamp field size", data, dataclasses.replace(good, index=b"\x00"), {}, InvalidStamp),
        ("address wrong length", data, good, {"address": addr[:31]}, InvalidChunk),
        ("wrong address", data, good, {"address": bytes(32)}, InvalidChunk),
        ("address of another chunk", data, good, {"address": saddr}, InvalidChunk),
        ("bad signature", data, bad_sig, {}, InvalidStamp),
        ("stamp for another chunk", data, stamper.stamp(saddr), {}, InvalidStamp),
        ("signed by a stranger", data, sign_stamp(signer(OTHER_KEY), addr, batch.id, bucket, 0, 5), {}, InvalidStamp),
        ("unknown batch", data, sign_stamp(signer(), addr, os.urandom(32), bucket, 0, 5), {}, UnknownBatch),
        ("bucket mismatch", data, sign_stamp(signer(), addr, batch.id, (bucket + 1) % 65536, 0, 5), {}, InvalidStamp),
        ("index out of range", data, sign_stamp(signer(), addr, batch.id, bucket, 4, 5), {}, InvalidStamp),
        ("soc bad signature", sdata[:40] + bytes([sdata[40] ^ 1]) + sdata[41:], sstamp, {}, InvalidStamp),
        ("soc at wrong address", sdata, sstamp, {"address": addr}, InvalidChunk),
    ]


@pytest.mark.parametrize("case", range(len(_bad_puts(make_batch(1, depth=18, bucket_depth=16)))))
def test_bad_put_changes_nothing(store, batch, case):
    name, data, stamp, kwargs, error = _bad_puts(batch)[case]
    before = dump(store)
    with pytest.raises(error):
        store.put(data, stamp, **kwargs)
    assert dump(store) == before, name
    if kwargs:
        return  # put_many takes no addresses
    good_addr, good_data = random_cac(5)
    with pytest.raises(error) as info:
        store.put_many([(good_data, Stamper(batch).stamp(good_addr, position=3)), (data, stamp)])
    assert "put_many item 1" in info.value.__notes__
    assert dump(store) == before, name


def test_put_many_all_or_nothing(tmp_path):
    batch = _bucket_depth_zero_batch()
    with open_store(str(tmp_path / "s"), batches=[batch]) as store:
        stamper = Stamper(batch)
        (addr, data), (other_addr, other) = _same_bucket_pair(batch)
        store.put(data, stamper.stamp(addr, position=0, ts=100))
        before = dump(store)
        items = [(d, stamper.stamp(a, position=1 + i)) for i, (a, d) in enumerate(random_cac(40) for _ in range(5))]
        # The last item's slot is held by a newer stamp: the whole call is refused.
        items.append((other, stamper.stamp(other_addr, position=0, ts=99)))
        with pytest.raises(StampConflict) as info:
            store.put_many(items)
        assert "put_many item 5" in info.value.__notes__
        assert dump(store) == before


def _same_bucket_pair(batch, size=20, other_shard=None):
    """Two different CACs in the same bucket (so they can compete for one slot)."""
    a1, d1 = random_cac(size)
    while True:
        a2, d2 = random_cac(size)
        same_bucket = bucket_of(a2, batch.bucket_depth) == bucket_of(a1, batch.bucket_depth)
        if same_bucket and (other_shard is None or (a1[-1] % 4 != a2[-1] % 4) == other_shard):
            return (a1, d1), (a2, d2)


def _bucket_depth_zero_batch():
    # Bucket depth 0 puts every chunk in bucket 0, so any two chunks can share a slot.
    return make_batch(7, depth=4, bucket_depth=0)


@pytest.mark.parametrize("cross_shard", [False, True])
def test_newer_stamp_replaces_slot(tmp_path, cross_shard):
    batch = _bucket_depth_zero_batch()
    with open_store(str(tmp_path / "s"), batches=[batch]) as store:
        stamper = Stamper(batch)
        (a1, d1), (a2, d2) = _same_bucket_pair(batch, other_shard=cross_shard)
        store.put(d1, stamper.stamp(a1, position=3, ts=10))
        res = store.put(d2, stamper.stamp(a2, position=3, ts=11))
        assert res.stored
        assert not store.has(a1) and store.stamps_of(a1) == []
        assert store.get(a2) == d2
        stats = store.stats()
        assert (stats["chunks"], stats["stamps"], stats["slots"], stats["bytes"]) == (1, 1, 1, len(d2))
        assert [e[0] for e in store.iter_neighbourhood(b"", 0)] == [a2]


def test_newer_stamp_keeps_chunk_with_other_stamps(tmp_path):
    batch, other = _bucket_depth_zero_batch(), make_batch(2)
    with open_store(str(tmp_path / "s"), batches=[batch, other]) as store:
        stamper = Stamper(batch)
        (a1, d1), (a2, d2) = _same_bucket_pair(batch)
        store.put(d1, stamper.stamp(a1, position=0, ts=10))
        store.put(d1, Stamper(other).stamp(a1))
        store.put(d2, stamper.stamp(a2, position=0, ts=11))
        assert store.has(a1) and [s.batch_id for s in store.stamps_of(a1)] == [other.id]


def test_equal_or_older_stamp_refused(tmp_path):
    batch = _bucket_depth_zero_batch()
    with open_store(str(tmp_path / "s"), batches=[batch]) as store:
        stamper = Stamper(batch)
        (a1, d1), (a2, d2) = _same_bucket_pair(batch)
        store.put(d1, stamper.stamp(a1, position=2, ts=10))
        before = dump(store)
        for ts in (10, 9, 0):
            with pytest.raises(StampConflict) as info:
                store.put(d2, stamper.stamp(a2, position=2, ts=ts))
            err = info.value
            assert (err.holder, err.held_ts, err.offered_ts, err.position) == (a1, 10, ts, 2)
            assert a1.hex() in str(err) and batch.id.hex() in str(err) and "position 2" in str(err)
        # The same chunk under an older stamp of its own slot is refused too.
        with pytest.raises(StampConflict):
            store.put(d1, stamper.stamp(a1, position=2, ts=9))
        assert dump(store) == before


def test_same_chunk_newer_stamp_updates_entry(tmp_path):
    batch = _bucket_depth_zero_batch()
    with open_store(str(tmp_path / "s"), batches=[batch]) as store:
        stamper = Stamper(batch)
        addr, data = random_cac(20)
        store.put(data, stamper.stamp(addr, position=1, ts=10))
        newer = stamper.stamp(addr, position=1, ts=20)
        assert store.put(data, newer).stored
        assert store.stamps_of(addr) == [newer]
        assert store.stats()["stamps"] == 1


def test_equal_stamp_other_signature_bytes_is_noop(store, batch):
    """Signatures are compared by what they recover, not by their bytes."""
    addr, data = random_cac(20)
    stamp = Stamper(batch).stamp(addr, position=0, ts=5)
    store.put(data, stamp)
    before = dump(store)
    r, s, v = stamp.signature[:32], stamp.signature[32:64], stamp.signature[64]
    n = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
    flipped = r + (n - int.from_bytes(s, "big")).to_bytes(32, "big") + bytes([55 - v])  # the other valid (s, v)
    assert flipped != stamp.signature
    other = dataclasses.replace(stamp, signature=flipped)
    assert other.recover_owner(addr) == batch.owner
    assert not store.put(data, other).stored
    assert dump(store) == before


def test_soc_update_in_place(tmp_path):
    batch = _bucket_depth_zero_batch()
    with open_store(str(tmp_path / "s"), batches=[batch]) as store:
        stamper = Stamper(batch)
        soc_id = os.urandom(32)
        addr, v1 = random_soc(30, soc_id=soc_id)
        addr2, v2 = random_soc(4096, soc_id=soc_id)
        assert addr == addr2 and v1 != v2
        store.put(v1, stamper.stamp(addr, position=0, ts=10))
        before = dump(store)
        with pytest.raises(StampConflict, match="SOC update needs a newer stamp"):
            store.put(v2, stamper.stamp(addr, position=0, ts=10))
        assert dump(store) == before
        res = store.put(v2, stamper.stamp(addr, position=0, ts=11))
        assert res.stored and res.chunk_type == ChunkType.SOC
        assert store.get(addr) == v2
        assert store.stats()["bytes"] == len(v2) and store.stats()["chunks"] == 1
        # Back to a short version: the old tail must not linger.
        _, v3 = random_soc(10, soc_id=soc_id)
        store.put(v3, stamper.stamp(addr, position=1, ts=12))
        assert store.get(addr) == v3 and store.stats()["bytes"] == len(v3)
        buf = bytearray(len(v3))
        assert store.get_into(addr, buf) == len(v3) and bytes(buf) == v3


def test_put_many_resolves_within_the_batch(tmp_path):
    batch = _bucket_depth_zero_batch()
    with open_store(str(tmp_path / "s"), batches=[batch]) as store:
        stamper = Stamper(batch)
        (a1, d1), (a2, d2) = _same_bucket_pair(batch, other_shard=True)
        results = store.put_many([(d1, stamper.stamp(a1, position=0, ts=1)), (d2, stamper.stamp(a2, position=0, ts=2))])
        assert [r.stored for r in results] == [True, True]
        assert not store.has(a1) and store.has(a2)
        assert store.stats()["pending"] == 0 or store.stats()["slots"] == 1
        assert store.stats()["slots"] == 1


def test_soc_signed_by_anyone_but_stamped_by_owner(store, batch):
    """The SOC owner and the batch owner are different keys: both must check out."""
    from chunkstore.swarm.cac import make_cac

    _, wrapped = make_cac(b"hello")
    soc = make_soc(signer(OTHER_KEY), os.urandom(32), wrapped)
    assert store.put(soc.data, Stamper(batch).stamp(soc.address)).address == soc.address


@pytest.mark.parametrize("address", ["ab" * 16, "ab" * 32, None, 7, 3.5, ["x"] * 32])
def test_reads_refuse_an_address_that_is_not_bytes(store, address):
    """A hex string (the mistake a caller makes) is refused by name, not taken for 32 bytes by `str % int`."""
    for read in (store.get, store.stamps_of, store.has, lambda a: store.get_into(a, bytearray(4096 + 8))):
        with pytest.raises(InvalidChunk, match=f"address must be bytes, not {type(address).__name__}"):
            read(address)


def test_has_is_false_for_a_wrong_length_address(store):
    assert store.has(b"\x00" * 31) is False
    assert store.has(memoryview(b"\x00" * 33)) is False


@pytest.mark.parametrize("address", ["ab" * 16, 5])
def test_put_refuses_an_address_that_is_not_bytes(store, batch, address):
    """`bytes(5)` is five zero bytes and `bytes(str)` a TypeError: both used to stand in for the check."""
    a, d = random_cac(30)
    before = dump(store)
    with pytest.raises(InvalidChunk, match=f"address must be bytes, not {type(address).__name__}"):
        store.put(d, Stamper(batch).stamp(a), address=address)
    assert dump(store) == before
