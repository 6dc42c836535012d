"""Format version 2 (pins, cache, tags): version-1 stores stay readable and are upgraded by a writable open."""

from __future__ import annotations

import os

import lmdb
import pytest

from chunkstore.reserve import ReserveStore
from chunkstore.store.errors import StoreFormatError
from chunkstore.store.layout import (
    DB_INFO,
    FORMAT_VERSION,
    INFO_FORMAT,
    META_DBS,
    META_DIR,
    SHARD_DBS,
    V1_META_DBS,
    V1_SHARD_DBS,
    read_u32,
    shard_path,
    u32,
)
from chunkstore.store.shard import ShardReader
from chunkstore.store.verify import verify_store
from tests.store.helpers import Stamper, make_batch, random_cac


def env_paths(path) -> list[str]:
    return [os.path.join(path, META_DIR)] + [shard_path(path, i) for i in range(4)]


def rewrite(path, fn) -> None:
    for env_path in env_paths(path):
        env = lmdb.open(env_path, max_dbs=16, subdir=True)
        try:
            with env.begin(write=True) as txn:
                fn(env, txn, env_path)
        finally:
            env.close()


def make_v1(path) -> list[bytes]:
    """A store as a version-1 build leaves it: no pin, cache or tag databases, format 1 everywhere."""
    batch = make_batch(1)
    with ReserveStore(path, 4) as store:
        store.batches.add(batch)
        stamper = Stamper(batch)
        addrs = []
        for _ in range(20):
            addr, data = random_cac(100)
            store.put(data, stamper.stamp(addr))
            addrs.append(addr)

    def downgrade(env, txn, env_path):
        names = V1_META_DBS if env_path.endswith(META_DIR) else V1_SHARD_DBS
        every = META_DBS if env_path.endswith(META_DIR) else SHARD_DBS
        for name in every:
            if name not in names:
                txn.drop(env.open_db(name, txn=txn), delete=True)
        txn.put(INFO_FORMAT, u32(1), db=env.open_db(DB_INFO, txn=txn))

    rewrite(path, downgrade)
    return addrs


def versions(path) -> list[int]:
    out = []

    def read(env, txn, env_path):
        out.append(read_u32(txn.get(INFO_FORMAT, db=env.open_db(DB_INFO, txn=txn))))

    rewrite(path, read)
    return out


def test_version_one_reads_as_empty_pins_cache_and_tags(tmp_path):
    path = tmp_path / "s"
    addrs = make_v1(path)
    assert versions(path) == [1] * 5
    with ReserveStore(path, readonly=True) as store:
        assert all(store.get(a) for a in addrs)
        assert store.pins.list() == [] and store.pins.in_flux() == {} and store.pins.chunk_count() == 0
        assert store.cache.size() == 0 and store.tags.list() == []
        assert store.stats()["per_shard"][0]["pinned"] == 0
    with ShardReader(path, 0) as reader:
        assert reader.pinrefs is None and reader.counts()["cached"] == 0
    report = verify_store(str(path))
    assert report.ok and report.chunks == 20
    assert versions(path) == [1] * 5, "read-only opens write nothing"


def test_writable_open_upgrades_every_environment(tmp_path):
    path = tmp_path / "s"
    addrs = make_v1(path)
    with ReserveStore(path) as store:
        assert all(store.get(a) for a in addrs)
        tag = store.tags.create()
        assert store.tags.get(tag.uid) == tag
        assert all(s.pinrefs is not None and s.cache is not None for s in store.shards)
    assert versions(path) == [FORMAT_VERSION] * 5 == [2] * 5
    assert verify_store(str(path)).ok


def test_half_upgraded_store_opens_and_finishes(tmp_path):
    """A crash between environments of the upgrade leaves some at version 2: both builds' rules hold."""
    path = tmp_path / "s"
    make_v1(path)
    env = lmdb.open(shard_path(path, 2), max_dbs=16, subdir=True)
    with env.begin(write=True) as txn:
        for name in SHARD_DBS:
            env.open_db(name, txn=txn)
        txn.put(INFO_FORMAT, u32(2), db=env.open_db(DB_INFO, txn=txn))
    env.close()
    with ReserveStore(path, readonly=True) as store:
        assert store.chunk_count() == 20
    with ReserveStore(path):
        pass
    assert versions(path) == [2] * 5


def test_unknown_versions_are_refused_naming_them(tmp_path):
    path = tmp_path / "s"
    make_v1(path)

    def bump(env, txn, env_path):
        txn.put(INFO_FORMAT, u32(3), db=env.open_db(DB_INFO, txn=txn))

    rewrite(path, bump)
    with pytest.raises(StoreFormatError, match="version 3 is not supported.*reads versions 1, 2"):
        ReserveStore(path, readonly=True)
    with pytest.raises(StoreFormatError, match="version 3"):
        ReserveStore(path)


def unpack_v1_fixture(path) -> list[bytes]:
    """The store a real version-1 build wrote (tests/testdata/store_format_v1.tar.gz; the README there
    says how), and the addresses of the 24 chunks it holds."""
    import random
    import tarfile
    from pathlib import Path

    from chunkstore.swarm.cac import make_cac

    fixture = Path(__file__).parent.parent / "testdata" / "store_format_v1.tar.gz"
    with tarfile.open(fixture) as tar:
        tar.extractall(path, filter="data")
    rng = random.Random(13)
    return [make_cac(rng.randbytes(100 + i))[0] for i in range(24)]


def test_a_store_written_by_the_version_one_build_reads_upgrades_and_pins(tmp_path):
    path = tmp_path / "s"
    addrs = unpack_v1_fixture(path)
    assert versions(path) == [1] * 5
    with ReserveStore(path, readonly=True) as store:
        assert store.chunk_count() == 24 and all(store.get(a) for a in addrs)
        assert store.pins.list() == [] and store.cache.size() == 0 and store.tags.list() == []
    report = verify_store(str(path))
    assert report.ok and report.chunks == 24
    assert versions(path) == [1] * 5, "reading writes nothing"

    with ReserveStore(path) as store:
        assert store.chunk_count() == 24 and store.reserve.status().size == 24
        assert store.pins.add(store.pins.begin(), addrs[:1]) == 1  # the new databases take writes
        store.batches.remove(store.batches.list()[0].id)
        store.reserve.maintain()
    assert versions(path) == [2] * 5
    with ReserveStore(path, readonly=True) as store:
        # the pending collection was taken apart by no open yet; its chunk alone outlived the batch
        assert store.chunk_count() == 1 and store.get(addrs[0])
    with ReserveStore(path) as store:
        assert store.pins.in_flux() == {} and store.chunk_count() == 0
    assert verify_store(str(path)).ok
