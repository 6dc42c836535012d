"""The store's one hook for a policy above it (chunkstore/store/policy.py): what it is told, what it may refuse."""

from __future__ import annotations

import pytest

from chunkstore.store.store import ChunkStore
from chunkstore.store.verify import verify_store
from chunkstore.swarm.errors import SwarmError
from tests.store.helpers import Stamper, dump, make_batch, random_cac


class Refused(SwarmError):
    pass


class RecordingPolicy:
    """Refuses addresses starting with 0x00, records every call."""

    def __init__(self, store: ChunkStore) -> None:
        self.calls: list[str] = []
        # The factory runs before open-time recovery, with the batch store already there.
        self.saw_batches = store.batches is not None
        self.saw_recovery = hasattr(store, "recovered")

    def admission_check(self):
        self.calls.append("check")

        def check(address: bytes) -> None:
            if address[0] == 0:
                raise Refused(f"policy refuses {address.hex()}")

        return check

    def after_write(self) -> None:
        self.calls.append("after_write")

    def batches_changed(self) -> None:
        self.calls.append("batches_changed")

    def close(self) -> None:
        self.calls.append("close")


def _cac_at(first_byte_zero: bool) -> tuple[bytes, bytes]:
    while True:
        addr, data = random_cac(64)
        if (addr[0] == 0) == first_byte_zero:
            return addr, data


@pytest.fixture
def policed(tmp_path):
    made: list[RecordingPolicy] = []

    def factory(store: ChunkStore) -> RecordingPolicy:
        made.append(RecordingPolicy(store))
        return made[-1]

    store = ChunkStore(tmp_path / "s", policy=factory)
    yield store, made[0]
    store.close()


def test_policy_is_told_of_writes_batch_changes_and_closing(policed):
    store, policy = policed
    assert policy.saw_batches and not policy.saw_recovery
    batch = make_batch()
    store.batches.add(batch)
    store.batches.update(make_batch(depth=21))
    assert policy.calls == ["batches_changed", "batches_changed"]
    policy.calls.clear()
    addr, data = _cac_at(False)
    store.put(data, Stamper(batch).stamp(addr))
    assert policy.calls == ["check", "after_write"]
    store.close()
    assert policy.calls[-1] == "close"


def test_policy_refusal_leaves_the_store_unchanged(policed):
    store, policy = policed
    batch = make_batch()
    store.batches.add(batch)
    stamper = Stamper(batch)
    good, bad = _cac_at(False), _cac_at(True)
    store.put(good[1], stamper.stamp(good[0]))
    before = dump(store)
    policy.calls.clear()
    with pytest.raises(Refused):
        store.put(bad[1], stamper.stamp(bad[0]))
    other = _cac_at(False)
    with pytest.raises(Refused) as info:
        store.put_many([(other[1], stamper.stamp(other[0])), (bad[1], stamper.stamp(bad[0]))])
    assert any("put_many item 1" in note for note in info.value.__notes__)
    assert dump(store) == before
    assert "after_write" not in policy.calls  # nothing was committed


def test_no_policy_admits_everything_and_keeps_no_bin_counters(tmp_path):
    path = tmp_path / "plain"
    with ChunkStore(path) as store:
        batch = make_batch()
        store.batches.add(batch)
        stamper = Stamper(batch)
        for first_zero in (True, False):
            addr, data = _cac_at(first_zero)
            assert store.put(data, stamper.stamp(addr)).stored
        assert store.read_info(b"overlay") is None  # no overlay named: nothing to count bins against
        for s in range(store.shard_count):
            with store.shard(s).env.begin() as txn:
                assert txn.get(b"bins", db=store.shard(s).info_db) is None
    assert verify_store(str(path)).ok


def test_info_keys_are_written_durably_and_deleted(tmp_path):
    path = tmp_path / "s"
    with ChunkStore(path) as store:
        store.write_info({b"radius": b"\x03", b"sweep": b"\x02"})
        store.write_info({b"sweep": None})
    with ChunkStore(path, readonly=True) as store:
        assert store.read_info(b"radius") == b"\x03"
        assert store.read_info(b"sweep") is None
        with pytest.raises(SwarmError, match="read-only"):
            store.write_info({b"radius": b"\x00"})
