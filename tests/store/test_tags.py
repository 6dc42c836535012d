"""Tags: uids handed out in order, counters that add up, kept across reopening."""

from __future__ import annotations

import time

import pytest

from chunkstore.reserve import ReserveStore
from chunkstore.store import tags as tags_mod
from chunkstore.store.errors import UnknownTag
from chunkstore.store.tags import Counts


def test_uids_count_up_and_tags_persist(tmp_path):
    path = tmp_path / "s"
    with ReserveStore(path) as store:
        before = time.time_ns()
        first, second = store.tags.create(), store.tags.create()
        assert (first.uid, second.uid) == (1, 2)
        assert before <= first.started_ns <= second.started_ns <= time.time_ns()
        assert (first.split, first.seen, first.stored, first.sent, first.synced, first.address) == (0, 0, 0, 0, 0, b"")
        store.tags.count(2, Counts(split=10, seen=3, stored=7, synced=7))
        store.tags.done(2, b"\x01" * 32)
    with ReserveStore(path) as store:
        tag = store.tags.get(2)
        assert (tag.split, tag.seen, tag.stored, tag.sent, tag.synced) == (10, 3, 7, 0, 7)
        assert tag.address == b"\x01" * 32
        assert store.tags.create().uid == 3, "uids are never reused"
        store.tags.delete(1)
        assert [t.uid for t in store.tags.list()] == [2, 3]
        assert [t.uid for t in store.tags.list(offset=1, limit=1)] == [3]
        assert store.tags.list(limit=0) == []
        with pytest.raises(UnknownTag):
            store.tags.get(1)
        with pytest.raises(UnknownTag):
            store.tags.delete(1)
        with pytest.raises(UnknownTag):
            store.tags.get(0)
        assert store.tags.find(99) is None


def test_counts_are_read_before_they_are_written(tmp_path, monkeypatch):
    monkeypatch.setattr(tags_mod, "FLUSH_INTERVAL", 3600.0)
    with ReserveStore(tmp_path / "s") as store:
        uid = store.tags.create().uid
        store.tags.count(uid, Counts(split=5, stored=5))
        store.tags.count(uid, Counts(split=1, seen=1))
        tag = store.tags.get(uid)
        assert (tag.split, tag.seen, tag.stored) == (6, 1, 5)
        meta = store.meta
        with meta.env.begin() as txn:  # nothing written yet: one flush writes all of it
            raw = bytes(txn.get(uid.to_bytes(8, "big"), db=meta.tags))
        assert raw[:8] == bytes(8)
        store.tags.flush()
        with meta.env.begin() as txn:
            raw = bytes(txn.get(uid.to_bytes(8, "big"), db=meta.tags))
        assert int.from_bytes(raw[:8], "big") == 6
        assert store.tags.get(uid).split == 6


def test_a_deleted_tag_takes_no_more_counts(tmp_path):
    with ReserveStore(tmp_path / "s") as store:
        uid = store.tags.create().uid
        store.tags.count(uid, Counts(split=1))
        store.tags.delete(uid)
        store.tags.count(uid, Counts(split=1))
        store.tags.flush()
        assert store.tags.find(uid) is None
        with pytest.raises(UnknownTag):
            store.tags.done(uid, None)


def test_close_writes_pending_counts(tmp_path, monkeypatch):
    monkeypatch.setattr(tags_mod, "FLUSH_INTERVAL", 3600.0)
    path = tmp_path / "s"
    with ReserveStore(path) as store:
        uid = store.tags.create().uid
        store.tags.count(uid, Counts(synced=4))
    with ReserveStore(path, readonly=True) as store:
        assert store.tags.get(uid).synced == 4


def test_counts_stay_visible_while_a_flush_writes_them(tmp_path):
    """A read while a flush is writing sees the additions (in memory or written), never neither."""
    import threading
    from contextlib import contextmanager

    with ReserveStore(tmp_path / "s") as store:
        uid = store.tags.create().uid
        store.tags.count(uid, Counts(split=3, stored=3, synced=3))
        inside, release = threading.Event(), threading.Event()
        real = store.tags._writing

        @contextmanager
        def slow_writing():
            with real():
                inside.set()
                release.wait(5)  # the flush has taken its additions and not committed them yet
                yield

        store.tags._writing = slow_writing
        flusher = threading.Thread(target=store.tags.flush)
        flusher.start()
        assert inside.wait(5)
        seen: list[int] = []
        reader = threading.Thread(target=lambda: seen.append(store.tags.get(uid).split))
        reader.start()
        reader.join(0.3)
        release.set()
        flusher.join(5)
        reader.join(5)
        store.tags._writing = real
        assert seen == [3]
        assert store.tags.get(uid).split == 3
