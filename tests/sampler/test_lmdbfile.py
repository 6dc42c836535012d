"""The direct LMDB reader (sampler.lmdbfile) against py-lmdb on random databases.

The reader walks LMDB's on-disk B-trees itself; py-lmdb (the library that
wrote them) is the reference for what a walk from any key must yield.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import lmdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkstore.swarm.bmt import backend as hashing

pytestmark = pytest.mark.skipif(hashing.BACKEND != "numba", reason="the direct reader needs numba")

keys = st.binary(min_size=1, max_size=80)
values = st.one_of(st.binary(max_size=100), st.integers(0, 9000).map(lambda n: os.urandom(n)))


def _open(path: str) -> lmdb.Environment:
    return lmdb.open(path, max_dbs=4, map_size=1 << 30, subdir=True)


@contextmanager
def _opened(path: str, mode: int = os.O_RDONLY) -> Iterator[tuple[lmdb.Environment, int]]:
    """An environment at ``path`` and a descriptor of its data file for the direct reader; both closed after."""
    env = _open(path)
    fd = os.open(os.path.join(path, "data.mdb"), mode)
    try:
        yield env, fd
    finally:
        os.close(fd)
        env.close()


def _expected(env: lmdb.Environment, db: object, start: bytes) -> list[tuple[bytes, bytes]]:
    with env.begin(db=db) as txn:
        cur = txn.cursor()
        if not cur.set_range(start):
            return []
        return [(bytes(k), bytes(v)) for k, v in cur.iternext()]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(st.dictionaries(keys, values, max_size=150), min_size=1, max_size=4),
    deletions=st.integers(0, 40),
    starts=st.lists(keys, max_size=4),
)
def test_walk_equals_pylmdb(tmp_path_factory: pytest.TempPathFactory, batches: list[dict[bytes, bytes]],
                            deletions: int, starts: list[bytes]) -> None:  # fmt: skip
    from sampler.lmdbfile import open_trees, walk

    with _opened(str(tmp_path_factory.mktemp("lmdb"))) as (env, fd):
        db = env.open_db(b"data")
        env.open_db(b"other")  # a second named database in the main tree
        written: list[bytes] = []
        for batch in batches:  # several commits: pages freed and reused between them
            with env.begin(write=True, db=db) as txn:
                for k, v in batch.items():
                    txn.put(k, v)
                    written.append(k)
        with env.begin(write=True, db=db) as txn:
            for k in written[:deletions]:
                txn.delete(k)
        with env.begin() as txn:
            snap = open_trees(fd, txn.id(), (b"data", b"other"))
            for start in [b"", *starts]:
                assert walk(fd, snap, b"data", start) == _expected(env, db, start)
            assert walk(fd, snap, b"other") == []


def test_snapshot_stays_while_writers_move_on(tmp_path) -> None:
    """A walk sees its transaction's snapshot, not later commits (the pages it reaches are never reused)."""
    from sampler.lmdbfile import open_trees, walk

    with _opened(str(tmp_path)) as (env, fd):
        db = env.open_db(b"data")
        with env.begin(write=True, db=db) as txn:
            for i in range(2000):
                txn.put(b"%06d" % i, os.urandom(i % 5000))
        before = _expected(env, db, b"")
        with env.begin() as reader:
            snap = open_trees(fd, reader.id(), (b"data",))
            # One commit: the meta page of the reader's transaction is still there.
            with env.begin(write=True, db=db) as txn:
                for i in range(0, 2000, 3):
                    txn.delete(b"%06d" % i)
                for i in range(2000, 2500):
                    txn.put(b"%06d" % i, os.urandom(3000))
            assert walk(fd, snap, b"data") == before


def test_meta_page_moved_on_is_refused(tmp_path) -> None:
    """Two commits after the reader began, its meta page holds a newer transaction: the reader refuses."""
    from sampler.lmdbfile import DirectReadError, open_trees

    with _opened(str(tmp_path)) as (env, fd):
        db = env.open_db(b"data")
        with env.begin(write=True, db=db) as txn:
            txn.put(b"k", b"v")
        with env.begin() as reader:
            for i in range(2):
                with env.begin(write=True, db=db) as txn:
                    txn.put(b"k%d" % i, b"v")
            with pytest.raises(DirectReadError, match="moved on"):
                open_trees(fd, reader.id(), (b"data",))


def test_refuses_sorted_duplicates_and_unknown_names(tmp_path) -> None:
    from sampler.lmdbfile import DirectReadError, open_trees

    with _opened(str(tmp_path)) as (env, fd):
        dup = env.open_db(b"dups", dupsort=True)
        with env.begin(write=True, db=dup) as txn:
            txn.put(b"k", b"1")
            txn.put(b"k", b"2")
        with env.begin() as txn:
            with pytest.raises(DirectReadError, match="not a plain B-tree"):
                open_trees(fd, txn.id(), (b"dups",))
            with pytest.raises(DirectReadError, match="no database named"):
                open_trees(fd, txn.id(), (b"missing",))


def test_damaged_page_is_an_error_not_a_crash(tmp_path) -> None:
    """A leaf page whose header names another page makes the walk fail with DirectReadError."""
    from sampler.lmdbfile import DirectReadError, open_trees, walk

    with _opened(str(tmp_path), os.O_RDWR) as (env, fd):
        db = env.open_db(b"data")
        with env.begin(write=True, db=db) as txn:
            for i in range(3000):
                txn.put(b"%06d" % i, b"x" * 40)
        with env.begin() as txn:
            snap = open_trees(fd, txn.id(), (b"data",))
            psize = snap.psize
            # The root is a branch; spoil the page number in the header of its last child's page.
            root = snap.trees[b"data"].root
            page = os.pread(fd, psize, root * psize)
            lower = int.from_bytes(page[12:14], "little")
            last = int.from_bytes(page[lower - 2 : lower], "little")
            child = int.from_bytes(page[last : last + 4], "little") | (int.from_bytes(page[last + 4 : last + 6], "little") << 32)
            os.pwrite(fd, (child + 1).to_bytes(8, "little"), child * psize)
            with pytest.raises(DirectReadError, match="page header"):
                walk(fd, snap, b"data")
