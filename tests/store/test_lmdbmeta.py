"""The check that an LMDB data file is as long as its newest meta page says (chunkstore/store/lmdbmeta.py)."""

from __future__ import annotations

import os

import pytest

from chunkstore.reserve import ReserveStore
from chunkstore.store.errors import StoreFormatError
from chunkstore.store.lmdbmeta import META_BYTES, last_page_and_txn, page_size, shortfall
from chunkstore.store.verify import verify_store
from tests.store.helpers import Stamper, make_batch, random_cac

B1, B2 = make_batch(1, depth=22), make_batch(2, depth=22)


def _pages_past_the_end(data_file: str) -> int:
    """Pages the newest meta page counts that the file does not hold."""
    with open(data_file, "rb") as f:
        psize = page_size(f.read(META_BYTES))
        assert psize is not None
        metas = []
        for page in (0, 1):
            f.seek(page * psize)
            metas.append(last_page_and_txn(f.read(META_BYTES)))
    last_pg = max(metas, key=lambda m: m[1])[0]
    return last_pg + 1 - os.path.getsize(data_file) // psize


def _filled(path: str, chunks: int, *, remove: bool) -> None:
    """A store of ``chunks`` puts one at a time; with ``remove``, their batch removed and one more put."""
    with ReserveStore(path, shards=2) as store:
        store.batches.add(B1)
        store.batches.add(B2)
        first, second = Stamper(B1), Stamper(B2)
        for _ in range(chunks):
            a, d = random_cac()
            store.put(d, first.stamp(a))
        if remove:
            store.batches.remove(B1.id)
            a, d = random_cac()
            store.put(d, second.stamp(a))


def test_a_file_whose_last_pages_are_free_and_never_written_is_whole(tmp_path):
    """A batch removal, then a put, left a shard's file a page shorter than its last page number about one
    time in three (LMDB took the page and freed it again in one transaction, so never wrote it): the store
    then refused to open, its file 'cut short', and the daemon could not start again."""
    for trial in range(40):
        path = str(tmp_path / f"s{trial}")
        _filled(path, 600, remove=True)
        short = [f for s in (0, 1) if _pages_past_the_end(f := os.path.join(path, f"shard-00{s}", "data.mdb")) > 0]
        if short:
            break
    else:
        pytest.fail("no trial left a file shorter than its last page: the case this test is about did not occur")
    assert all(shortfall(f) is None for f in short)
    with ReserveStore(path, shards=2) as store:
        assert store.stats()["chunks"] == 1
    assert verify_store(path).problems == []


def test_a_file_cut_short_of_pages_in_use_is_still_refused(tmp_path):
    path = str(tmp_path / "s")
    _filled(path, 200, remove=False)  # no removal: every page up to the last holds data
    data_file = os.path.join(path, "shard-000", "data.mdb")
    psize = 4096
    size = os.path.getsize(data_file)
    os.truncate(data_file, size - 8 * psize)
    assert "the file was cut short" in (shortfall(data_file) or "")
    with pytest.raises(StoreFormatError, match="cut short"):
        ReserveStore(path, shards=2)


def test_the_free_list_reader_finds_exactly_the_pages_no_database_holds(tmp_path):
    """The reader of the free database (its long lists on overflow pages included, as a large removal writes
    them) against LMDB's own page counts: every page is a meta page, a database's, the free database's own,
    or free."""
    import struct

    from chunkstore.store.lmdbmeta import DBS_AT, _all_free

    path = str(tmp_path / "s")
    _filled(path, 1500, remove=True)
    with ReserveStore(path, shards=2) as store:
        held = {}
        for s in (0, 1):
            shard = store.shard(s)
            dbs = (shard.info_db, shard.chunks, shard.tails, shard.stamps, shard.slots, shard.pending,
                   shard.pinrefs, shard.pinsets, shard.cache, shard.lru)
            with shard.env.begin() as txn:
                stats = [txn.stat()] + [txn.stat(db) for db in dbs if db is not None]
            held[s] = sum(st["branch_pages"] + st["leaf_pages"] + st["overflow_pages"] for st in stats)
    for s in (0, 1):
        data_file = os.path.join(path, f"shard-00{s}", "data.mdb")
        with open(data_file, "rb") as f:
            metas = []
            for page in (0, 1):
                f.seek(page * 4096)
                raw = f.read(META_BYTES)
                last_pg, txnid = last_page_and_txn(raw)
                metas.append((txnid, last_pg, struct.unpack_from("<IHHQQQQQ", raw, DBS_AT)))
        _, last_pg, (_, _, _, branch, leaf, overflow, _, root) = max(metas)
        assert overflow > 0  # a list long enough to lie on overflow pages, as the case wants
        free = [p for p in range(2, last_pg + 1) if _all_free(data_file, 4096, root, range(p, p + 1))]
        assert len(free) == last_pg + 1 - 2 - held[s] - (branch + leaf + overflow)
