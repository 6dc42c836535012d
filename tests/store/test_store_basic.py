"""Round trips, reads, layout and neighbourhood ranges of the chunk store."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkstore.reserve import ReserveStore
from chunkstore.store.errors import ChunkNotFound, StoreFormatError, StoreReadOnly
from chunkstore.store.layout import HEAD_SIZE, neighbourhood_range
from chunkstore.store.shard import ShardReader
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.constants import ChunkType
from chunkstore.swarm.errors import InvalidChunk, SwarmError
from chunkstore.swarm.proximity import proximity
from tests.store.helpers import Stamper, dump, make_batch, open_store, random_cac, random_soc


@pytest.mark.parametrize("size", [0, 1, 100, HEAD_SIZE - 8, HEAD_SIZE - 7, 4096])
def test_cac_round_trip(store, batch, size):
    addr, data = random_cac(size)
    res = store.put(data, Stamper(batch).stamp(addr))
    assert (res.address, res.chunk_type, res.stored) == (addr, ChunkType.CAC, True)
    assert store.get(addr) == data
    assert store.has(addr)
    buf = bytearray(5000)
    assert store.get_into(addr, buf) == len(data)
    assert bytes(buf[: len(data)]) == data
    assert store.get_into(addr, memoryview(buf)[: len(data)]) == len(data)


@pytest.mark.parametrize("size", [0, 100, 4096])
def test_soc_round_trip(store, batch, size):
    addr, data = random_soc(size)
    stamp = Stamper(batch).stamp(addr)
    res = store.put(data, stamp)
    assert (res.address, res.chunk_type, res.stored) == (addr, ChunkType.SOC, True)
    assert store.get(addr) == data
    assert store.stamps_of(addr) == [stamp]


def test_put_with_address_and_raw_stamp_bytes(store, batch):
    addr, data = random_cac(50)
    stamp = Stamper(batch).stamp(addr)
    assert store.put(data, stamp.to_bytes(), address=addr).stored
    saddr, sdata = random_soc(50)
    assert store.put(sdata, Stamper(batch).stamp(saddr, position=5), address=saddr).chunk_type == ChunkType.SOC


def test_soc_read_both_ways_picks_the_stamped_reading(store, batch):
    """A short SOC is also a CAC; the stamp (signed over the SOC address) decides."""
    saddr, sdata = random_soc(10)
    cac_addr = make_cac(sdata[8:], int.from_bytes(sdata[:8], "little"))[0]
    assert cac_addr != saddr
    assert store.put(sdata, Stamper(batch).stamp(saddr)).address == saddr
    # The same bytes stamped for their CAC reading are stored as that CAC.
    assert store.put(sdata, Stamper(batch).stamp(cac_addr, position=9)).chunk_type == ChunkType.CAC


def test_repeat_is_noop(store, batch):
    addr, data = random_cac(10)
    stamp = Stamper(batch).stamp(addr)
    assert store.put(data, stamp).stored
    before = dump(store)
    assert not store.put(data, stamp).stored
    assert dump(store) == before


def test_same_chunk_several_batches(tmp_path):
    b1, b2 = make_batch(1), make_batch(2)
    with open_store(str(tmp_path / "s"), batches=[b1, b2]) as store:
        addr, data = random_cac(10)
        s1, s2 = Stamper(b1).stamp(addr), Stamper(b2).stamp(addr)
        assert store.put(data, s1).stored and store.put(data, s2).stored
        assert sorted(store.stamps_of(addr), key=lambda s: s.batch_id) == sorted([s1, s2], key=lambda s: s.batch_id)
        stats = store.stats()
        assert (stats["chunks"], stats["stamps"], stats["bytes"]) == (1, 2, len(data))
        assert len(list(store.iter_neighbourhood(b"", 0))) == 2


def test_missing_and_bad_addresses(store):
    with pytest.raises(ChunkNotFound) as info:
        store.get(bytes(32))
    assert isinstance(info.value, KeyError) and isinstance(info.value, SwarmError)
    assert bytes(32).hex() in str(info.value)
    with pytest.raises(ChunkNotFound):
        store.get_into(bytes(32), bytearray(10))
    assert not store.has(bytes(32)) and not store.has(b"short")
    assert not store.delete(bytes(32))
    with pytest.raises(InvalidChunk):
        store.get(b"short")


def test_delete_frees_slot(store, batch):
    stamper = Stamper(batch)
    addr, data = random_cac(10)
    stamp = stamper.stamp(addr)
    store.put(data, stamp)
    assert store.delete(addr)
    assert not store.has(addr) and store.stamps_of(addr) == []
    assert store.stats()["slots"] == 0 and store.stats()["bytes"] == 0
    assert store.put(data, stamp).stored  # the slot is free again


def test_put_many(store, batch):
    stamper = Stamper(batch)
    chunks = [random_cac(20) for _ in range(40)] + [random_soc(20) for _ in range(5)]
    items = [(d, stamper.stamp(a)) for a, d in chunks]
    results = store.put_many(items)
    assert [r.address for r in results] == [a for a, _ in chunks]
    assert all(r.stored for r in results)
    assert store.chunk_count() == 45
    assert [r.stored for r in store.put_many(items[:3])] == [False] * 3
    for a, d in chunks:
        assert store.get(a) == d


def test_shards_spread_and_placement(tmp_path, batch):
    with open_store(str(tmp_path / "s"), shards=3, batches=[batch]) as store:
        stamper = Stamper(batch)
        chunks = [random_cac(8) for _ in range(300)]
        store.put_many([(d, stamper.stamp(a)) for a, d in chunks])
        per = [c["chunks"] for c in store.stats()["per_shard"]]
        assert sum(per) == 300 and min(per) > 60
        for a, _ in chunks:
            assert store.shard_of(a) == a[-1] % 3
            assert store.shard(store.shard_of(a)).has(a)


def test_reopen_readonly_and_reader(tmp_path, batch):
    path = str(tmp_path / "s")
    stamper = Stamper(batch)
    chunks = [random_cac(4096) for _ in range(8)]
    with open_store(path, batches=[batch]) as store:
        store.put_many([(d, stamper.stamp(a)) for a, d in chunks])
        expected = list(store.iter_neighbourhood(b"", 0))
    with ReserveStore(path, readonly=True) as ro:
        assert ro.shard_count == 4
        assert list(ro.iter_neighbourhood(b"", 0)) == expected
        assert ro.batches.get(batch.id) == batch
        with pytest.raises(StoreReadOnly):
            ro.put(chunks[0][1], stamper.stamp(chunks[0][0]))
        with pytest.raises(StoreReadOnly):
            ro.batches.remove(batch.id)
    for a, d in chunks:
        with ShardReader(path, a[-1] % 4) as reader:
            assert reader.get(a) == d
            buf = bytearray(4104)
            assert reader.read_into(a, buf) == len(d) and bytes(buf) == d
            with reader.snapshot() as snap:
                assert bytes(snap.view(a)) == d
                assert snap.stamps_of(a)[0].batch_id == batch.id
                assert any(e[0] == a for e in snap.iter_neighbourhood(a[:2], 16))
            assert [e for e in reader.iter_range() if e[0] == a]


def test_full_chunk_uses_one_page_per_head(store, batch):
    addr, data = random_cac(4096)
    store.put(data, Stamper(batch).stamp(addr))
    shard = store.shard(store.shard_of(addr))
    with shard.env.begin() as txn:
        assert len(txn.get(addr, db=shard.chunks)) == HEAD_SIZE
        assert txn.stat(shard.chunks)["overflow_pages"] == 1


def test_format_errors(tmp_path, batch):
    path = str(tmp_path / "s")
    with pytest.raises(StoreFormatError, match="no chunk store"):
        ReserveStore(path, readonly=True)
    assert not os.path.exists(path)
    ReserveStore(path, shards=2).close()
    with pytest.raises(StoreFormatError, match="2 shards"):
        ReserveStore(path, shards=3)
    with ReserveStore(path) as store:
        with store._meta.env.begin(write=True) as txn:
            txn.put(b"format", (7).to_bytes(4, "big"), db=store._meta.info)
    with pytest.raises(StoreFormatError, match="version 7 is not supported"):
        ReserveStore(path)
    with pytest.raises(StoreFormatError, match="version 7"):
        ReserveStore(path, readonly=True)
    with pytest.raises(ValueError):
        ReserveStore(str(tmp_path / "t"), shards=0)


def test_shard_reader_checks_its_env(tmp_path):
    path = str(tmp_path / "s")
    ReserveStore(path, shards=2).close()
    with pytest.raises(StoreFormatError, match="missing"):
        ShardReader(path, 5)
    shard_info = os.path.join(path, "shard-001")
    import lmdb

    env = lmdb.open(shard_info, max_dbs=8)
    db = env.open_db(b"info")
    with env.begin(write=True) as txn:
        txn.put(b"format", (99).to_bytes(4, "big"), db=db)
    env.close()
    with pytest.raises(StoreFormatError, match="version 99"):
        ShardReader(path, 1)


def test_unfinished_creation_is_redone(tmp_path):
    import lmdb

    path = tmp_path / "s"
    (path / "meta").mkdir(parents=True)
    lmdb.open(str(path / "meta")).close()  # meta env files exist, creation never wrote them
    with ReserveStore(path) as store:
        assert store.shard_count == 4


@settings(max_examples=300, deadline=None)
@given(
    anchor=st.binary(min_size=0, max_size=6),
    depth=st.integers(min_value=0, max_value=34),
    address=st.binary(min_size=32, max_size=32),
)
def test_neighbourhood_range_is_the_proximity_rule(anchor, depth, address):
    rng = neighbourhood_range(anchor, depth)
    inside = rng is not None and address >= rng[0] and (rng[1] is None or address < rng[1])
    assert inside == (proximity(address, anchor) >= depth)


def test_iter_neighbourhood(tmp_path):
    b1, b2 = make_batch(1), make_batch(2)
    with open_store(str(tmp_path / "s"), batches=[b1, b2]) as store:
        s1, s2 = Stamper(b1), Stamper(b2)
        chunks = [random_cac(8) for _ in range(200)]
        store.put_many([(d, s1.stamp(a)) for a, d in chunks])
        store.put_many([(d, s2.stamp(a)) for a, d in chunks[:50]])
        anchor = chunks[0][0][:1]
        for depth in (0, 1, 3, 8, 31, 32):
            got = list(store.iter_neighbourhood(anchor, depth))
            want = sorted(
                [(a, 1, b1.id) for a, _ in chunks if proximity(a, anchor) >= depth]
                + [(a, 1, b2.id) for a, _ in chunks[:50] if proximity(a, anchor) >= depth]
            )
            assert [e[:3] for e in got] == sorted(e[:3] for e in got)  # merged in address order
            assert sorted(e[:3] for e in got) == want
            per_shard = [list(store.iter_neighbourhood(anchor, depth, shard=i)) for i in range(4)]
            assert sorted(e for p in per_shard for e in p) == sorted(got)
            for i, p in enumerate(per_shard):
                assert all(e[0][-1] % 4 == i for e in p)
                assert [e[0] for e in p] == sorted(e[0] for e in p)
        ts = {s.timestamp_ns for a, _ in chunks for s in store.stamps_of(a)}
        assert {e[3] for e in store.iter_neighbourhood(b"", 0)} == ts
        with pytest.raises(ValueError):
            store.iter_neighbourhood(anchor, -1)
        # Lazy: an unconsumed iterator does not hold the whole range.
        it = store.iter_neighbourhood(b"", 0)
        assert next(it)[0] == min(a for a, _ in chunks)
