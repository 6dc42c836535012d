"""The upload session: every chunk stamped and stored, the root last, failures leave no reachable reference."""

from __future__ import annotations

import io
import os

import pytest

from chunkstore.content import SessionClosed, UploadSession, open_file, write_file
from chunkstore.content.session import TAIL, root_group
from chunkstore.store.errors import ChunkNotFound, StoreFull
from chunkstore.swarm.errors import BucketFull
from chunkstore.swarm.file import ChunkMissing, split_bytes
from chunkstore.swarm.redundancy.level import Level
from tests.content.helpers import open_node


class Recorder:
    """An observer that keeps what it is told."""

    def __init__(self) -> None:
        self.groups: list[list[bytes]] = []
        self.done: list[bytes] = []
        self.errors: list[BaseException | None] = []

    def stored(self, session, addresses, results) -> None:
        assert [r.address for r in results] == list(addresses)
        self.groups.append(list(addresses))

    def finished(self, session, reference) -> None:
        self.done.append(reference)

    def aborted(self, session, error) -> None:
        self.errors.append(error)


@pytest.mark.parametrize(("size", "level", "encrypt"), [(0, 0, False), (5000, 1, False), (600_000, 2, False),
                                                         (300_000, 1, True)])
def test_upload_stores_the_whole_tree_and_the_root_last(node, size, level, encrypt):
    data = os.urandom(size)
    rec = Recorder()
    session = node.session(group_size=16, observers=[rec])
    reference = write_file(io.BytesIO(data), session, level=level, encrypt=encrypt, piece=7777)
    counts = session.finish(reference)
    assert rec.done == [reference] and rec.errors == []
    # every chunk the splitter makes (same tree, compared without encryption's random keys) is stored
    if not encrypt:
        made: dict[bytes, bytes] = {}
        assert split_bytes(data, lambda a, d: made.__setitem__(a, d), level=level) == reference
        assert all(node.store.get(a) == d for a, d in made.items())
        assert counts.put == len(made) == sum(len(g) for g in rec.groups)
    assert open_file(node.store, reference).read_all() == data
    # the last group holds the root and only the root's group (its replicas); it is the root's alone
    last = rec.groups[-1]
    assert reference[:32] in last and set(last) <= root_group(reference)
    assert all(reference[:32] not in g for g in rec.groups[:-1])
    assert max(len(g) for g in rec.groups) <= 16


def test_a_failed_upload_leaves_no_reachable_reference(tmp_path, monkeypatch):
    data = os.urandom(2_000_000)
    reference = split_bytes(data, level=1)  # what a successful upload would answer
    held = root_group(reference)
    dry = open_node(tmp_path / "dry")
    others: list[bool] = []  # per write: does it hold a chunk outside the root group?
    real_dry = dry.store.put_signed

    def record(items, **options):
        results = real_dry(items, **options)
        others.append(any(r.address not in held for r in results))
        return results

    monkeypatch.setattr(dry.store, "put_signed", record)
    session = dry.session(group_size=32)
    session.finish(write_file(io.BytesIO(data), session, level=1))
    dry.store.close()
    last_other = max(i for i, o in enumerate(others) if o)

    node = open_node(tmp_path / "s")
    real = node.store.put_signed
    seen = []

    def failing(items, **options):
        # The last write holding chunks outside the root group commits all but one of those, then fails
        # (a disk filling up part-way through the shards): whatever else it held is stored.
        seen.append(len(items))
        if len(seen) - 1 == last_other:
            skip = next(i for i, (a, _, _) in enumerate(items) if a not in held)
            real(items[:skip] + items[skip + 1 :], **options)
            raise StoreFull("disk_full", "no space left (injected)")
        return real(items, **options)

    monkeypatch.setattr(node.store, "put_signed", failing)
    rec = Recorder()
    session = node.session(group_size=32, observers=[rec])
    try:
        with pytest.raises(StoreFull):
            session.finish(write_file(io.BytesIO(data), session, level=1))
        assert len(rec.errors) == 1 and isinstance(rec.errors[0], StoreFull) and rec.done == []
        with pytest.raises(ChunkNotFound):
            node.store.get(reference[:32])
        with pytest.raises(ChunkMissing):  # nor through a replica
            open_file(node.store, reference)
        with pytest.raises(SessionClosed):
            session.put(b"\0" * 32, b"\0" * 8)
    finally:
        node.store.close()


def test_full_bucket_stops_the_upload_before_the_root(tmp_path):
    node = open_node(tmp_path / "s", depth=10, bucket_depth=8, immutable=True)  # 256 buckets of 4 positions
    try:
        data = os.urandom(4096 * 2000)  # 2000 leaves cannot fit 1024 slots
        reference = split_bytes(data, level=0)
        session = node.session(group_size=64)
        with pytest.raises(BucketFull):
            session.finish(write_file(io.BytesIO(data), session, level=0))
        assert not node.store.has(reference[:32])
    finally:
        node.store.close()


def test_memory_is_bounded_by_the_group_and_the_tail(node, monkeypatch):
    session = node.session(group_size=8)
    high = 0
    put = session.put

    def watch(address, data):
        nonlocal high
        put(address, data)
        high = max(high, len(session._pending))

    reference = split_bytes(os.urandom(400_000), watch, level=1)
    session.finish(reference)
    assert high == 8 + TAIL  # a group goes as soon as one more than group + tail would wait


def test_repeated_chunks_are_stored_once_in_one_slot(node):
    data = bytes(4096 * 300)  # 300 equal leaves
    session = node.session(group_size=1000)
    reference = write_file(io.BytesIO(data), session, level=0)
    counts = session.finish(reference)
    # 300 equal leaves, two equal parents of 128 of them, one of 44, the root: 4 distinct chunks of 304
    assert (counts.offered, counts.put, counts.repeated) == (304, 4, 300)
    assert open_file(node.store, reference).read_all() == data
    assert sum(node.store.issuers.bucket_counts(node.batch.id, 16)) == counts.put


def test_chunks_stored_earlier_keep_their_slots(node):
    data = os.urandom(50_000)
    first = node.session()
    ref = write_file(io.BytesIO(data), first, level=Level.NONE)
    first.finish(ref)
    used = sum(node.store.issuers.bucket_counts(node.batch.id, 16))
    again = node.session()
    assert write_file(io.BytesIO(data), again, level=Level.NONE) == ref
    again.finish(ref)
    assert sum(node.store.issuers.bucket_counts(node.batch.id, 16)) == used


def test_session_refuses_a_batch_up_front(node):
    with pytest.raises(Exception, match="unknown batch"):
        UploadSession(node.store, node.stamper, os.urandom(32))


def test_the_same_content_uploaded_concurrently_is_stored_by_both(node):
    """Two uploads of the same content: the second re-stamps the held slot, and if a third upload of it
    commits a newer stamp of that slot in between, the second's older stamp is refused by the slot
    rule. The second is stamped again and stored (it was a 409 to the client)."""
    data = b"the same bytes, uploaded three times"
    first = node.session()
    reference = write_file(io.BytesIO(data), first, level=0)
    first.finish(reference)
    real_stamp = node.stamper.stamp

    def stamp_then_race(batch_id, addresses):
        stamps = real_stamp(batch_id, addresses)
        node.stamper.stamp = real_stamp  # only the first call races
        third = node.session()
        assert write_file(io.BytesIO(data), third, level=0) == reference
        third.finish(reference)  # stamped after ours, so newer, and committed first
        return stamps

    node.stamper.stamp = stamp_then_race
    second = node.session()
    assert write_file(io.BytesIO(data), second, level=0) == reference
    second.finish(reference)
    assert open_file(node.store, reference).read_all() == data
    assert len(node.store.stamps_of(reference)) == 1  # one slot of the batch, held by the newest stamp


def test_a_session_block_aborts_unless_finished(node):
    """``with session:`` is what every upload handler relies on: an error in the block aborts the session
    (with that error, nothing of it stored), a block left without ``finish`` aborts it too, and leaving
    after ``finish`` changes nothing."""
    data = os.urandom(20_000)
    failed = Recorder()
    with pytest.raises(RuntimeError, match="client went away"), node.session(group_size=4, observers=[failed]) as s:
        reference = write_file(io.BytesIO(data), s, level=Level.NONE)
        raise RuntimeError("client went away")
    assert failed.done == [] and [str(e) for e in failed.errors] == ["client went away"]
    assert not node.store.has(reference[:32])
    with pytest.raises(SessionClosed):
        s.finish(reference)

    unfinished = Recorder()
    with node.session(observers=[unfinished]) as s:
        write_file(io.BytesIO(data), s, level=Level.NONE)
    assert unfinished.done == [] and unfinished.errors == [None] and not node.store.has(reference[:32])

    finished = Recorder()
    with node.session(observers=[finished]) as s:
        assert s.finish(write_file(io.BytesIO(data), s, level=Level.NONE)).put > 0
    assert finished.done == [reference] and finished.errors == []
    assert open_file(node.store, reference).read_all() == data
