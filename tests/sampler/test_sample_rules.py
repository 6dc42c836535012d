"""Sampler rules in small, hand-built stores: duplicates, integrity errors, candidate bounds."""

from __future__ import annotations

import dataclasses
import random

import pytest

from chunkstore.reserve import ReserveStore
from chunkstore.store.batchstore import Batch
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.postage import StampIssuer
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.soc import make_soc
from sampler import SampleIntegrityError, check_sample, reserve_sample
from sampler.candidates import CandidateSet
from tests.sampler.helpers import force_batch

T0 = 1_000_000
OWNER = Signer(keccak256(b"owner"))
OTHER = Signer(keccak256(b"other"))


def _ids() -> tuple[bytes, bytes, bytes]:
    ids = sorted(keccak256(b"dup batch %d" % i) for i in range(3))
    return ids[0], ids[1], ids[2]  # P < Q < R


def _dup_store(path, shards: int = 4):
    """16 chunks under batch R; chunk X (a SOC) also stamped by P and Q (P < Q)."""
    p, q, r = _ids()
    store = ReserveStore(path, shards=shards)
    for bid in (p, q, r):
        store.batches.add(Batch(bid, OWNER.address, 20, 2, False, 1000, 0))
    issuers = {bid: StampIssuer(OWNER, bid, 20, 2) for bid in (p, q, r)}
    rng = random.Random(3)

    def stamp(address, bid, ts=T0):
        return issuers[bid].stamp(address, timestamp_ns=ts)

    puts = []
    for _ in range(15):
        address, data = make_cac(rng.randbytes(100))
        puts.append((data, stamp(address, r)))
    _, wrapped = make_cac(b"the duplicated chunk")
    x = make_soc(OWNER, keccak256(b"x id"), wrapped)
    # Stamped by Q first and P later: the rule must not depend on put order.
    puts += [(x.data, stamp(x.address, q)), (x.data, stamp(x.address, p, T0 + 5))]
    store.put_many(puts)
    return store, x.address, (p, q, r)


@pytest.mark.parametrize("workers", [0, 2])
def test_duplicate_takes_smallest_valid_batch(tmp_path, workers):
    store, x, (p, q, r) = _dup_store(tmp_path / "s")
    try:
        res = reserve_sample(store, b"\x00", 0, T0 + 10, workers=workers)
        (item,) = [it for it in res.items if it.chunk_address == x]
        assert item.stamp.batch_id == p
        # Q's entry comes right after P's; it is only reached when X is not the 16th item.
        assert res.stats.duplicates_ignored == (0 if res.items[-1] is item else 1)
        check_sample(res.items, b"\x00", store.batches, T0 + 10)

        # P's stamp too new: Q's stamp is used.
        res = reserve_sample(store, b"\x00", 0, T0 + 4, workers=workers)
        (item,) = [it for it in res.items if it.chunk_address == x]
        assert item.stamp.batch_id == q

        # P's owner changed behind the store's back: P's stamp is invalid, Q's is used.
        force_batch(store, dataclasses.replace(store.batches.get(p), owner=OTHER.address))
        res = reserve_sample(store, b"\x00", 0, T0 + 10, workers=workers)
        (item,) = [it for it in res.items if it.chunk_address == x]
        assert item.stamp.batch_id == q
        assert res.stats.invalid_stamps == 1
        check_sample(res.items, b"\x00", store.batches, T0 + 10)
    finally:
        store.close()


@pytest.mark.parametrize("workers", [0, 2])
def test_a_batch_vouches_with_its_first_stamp_only(tmp_path, workers):
    """Chunk X stamped twice by batch P (indexes i0 < i1), i0 the newer: Bee loads i0 alone.

    The reference's sample loads one stamp per (chunk, batch), the first of the
    batch's in index order (pkg/storer/sample.go, chunkstamp.LoadWithBatchID), so
    with i0 after the consensus time P does not bring X in, though i1 is older.
    """
    p, q, r = _ids()
    store = ReserveStore(tmp_path / "s", shards=2)
    try:
        for bid in (p, q, r):
            store.batches.add(Batch(bid, OWNER.address, 20, 2, False, 1000, 0))
        issuers = {bid: StampIssuer(OWNER, bid, 20, 2) for bid in (p, q, r)}
        rng = random.Random(5)
        puts = []
        for _ in range(16):
            address, data = make_cac(rng.randbytes(100))
            puts.append((data, issuers[r].stamp(address, timestamp_ns=T0)))
        x, data = make_cac(b"stamped twice by one batch")
        first = issuers[p].stamp(x, timestamp_ns=T0 + 50)
        second = issuers[p].stamp(x, timestamp_ns=T0)
        assert first.index < second.index
        store.put_many([*puts, (data, first), (data, second)])

        res = reserve_sample(store, b"\x00", 0, T0 + 10, workers=workers)
        assert x not in [it.chunk_address for it in res.items]
        check_sample(res.items, b"\x00", store.batches, T0 + 10)

        res = reserve_sample(store, b"\x00", 0, T0 + 50, workers=workers)
        assert [it.stamp for it in res.items if it.chunk_address == x] == [first]

        # Another batch's stamp brings X in, though P's id is the smaller.
        store.put(data, issuers[q].stamp(x, timestamp_ns=T0 + 1))
        res = reserve_sample(store, b"\x00", 0, T0 + 10, workers=workers)
        assert [it.stamp.batch_id for it in res.items if it.chunk_address == x] == [q]
        check_sample(res.items, b"\x00", store.batches, T0 + 10)
    finally:
        store.close()


def test_below_balance_batch_excluded(tmp_path):
    store, x, (p, q, r) = _dup_store(tmp_path / "s", shards=1)
    try:
        force_batch(store, dataclasses.replace(store.batches.get(p), value=5))
        res = reserve_sample(store, b"\x00", 0, T0 + 10, min_batch_balance=6, workers=1)
        (item,) = [it for it in res.items if it.chunk_address == x]
        assert item.stamp.batch_id == q
        assert res.stats.below_balance_ignored == 1
        res = reserve_sample(store, b"\x00", 0, T0 + 10, min_batch_balance=5, workers=1)
        assert res.stats.below_balance_ignored == 0
    finally:
        store.close()


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    store, _, _ = _dup_store(tmp_path_factory.mktemp("integrity") / "s")
    res = reserve_sample(store, b"\x00", 0, T0 + 10, workers=0)
    yield store, res
    store.close()


def test_integrity_accepts_a_good_sample(sample):
    store, res = sample
    check_sample(res.items, b"\x00", store.batches, T0 + 10)


def _expect(items, index, *, batches=None, consensus=None, anchor=b"\x00", match=None):
    with pytest.raises(SampleIntegrityError) as info:
        check_sample(items, anchor, batches, consensus)
    assert info.value.index == index
    assert (f"sample item {index}" if index is not None else "sample") in str(info.value)
    if match:
        assert match in str(info.value)


def test_integrity_failures_name_the_item(sample):
    store, res = sample
    items = list(res.items)
    _expect(items[:15], None, match="15 items")
    swapped = items[:]
    swapped[3], swapped[4] = swapped[4], swapped[3]
    _expect(swapped, 4, match="strictly greater")
    shared = items[:]
    shared[7] = dataclasses.replace(items[7], chunk_data=items[2].chunk_data)
    _expect(shared, 7, match="same object as item 2")
    view = items[:]
    view[5] = dataclasses.replace(items[5], chunk_data=memoryview(items[5].chunk_data))
    _expect(view, 5, match="memoryview")
    wrong = items[:]
    wrong[9] = dataclasses.replace(items[9], chunk_data=items[9].chunk_data[:-1] + b"\xff")
    _expect(wrong, 9, match="does not")
    taddr = items[:]
    taddr[0] = dataclasses.replace(items[0], transformed_address=bytes(32))
    _expect(taddr, 0, match="transformed address")
    _expect(items, 0, anchor=b"\x01", match="transformed address")
    stamp = items[:]
    stamp[11] = dataclasses.replace(items[11], stamp=items[12].stamp)
    _expect(stamp, 11, batches=store.batches, match="stamp is invalid")
    _expect(items, 0, batches=store.batches, consensus=T0 - 1, match="after consensus")


def test_candidate_set_keeps_the_smallest():
    rng = random.Random(5)
    entries = [(rng.randbytes(32), rng.randbytes(32), rng.randbytes(32), rng.choice((1, 2))) for _ in range(2000)]
    for k in (1, 7, 64, 5000):
        cs = CandidateSet(k)
        for e in entries:
            cs.offer(*(e[0], e[1], e[2], e[3]))
        assert cs.result() == sorted(entries)[:k]
        assert cs.complete == (k >= len(entries))
    after = tuple(sorted(entries)[100][:2])
    cs = CandidateSet(10, after=after)
    for e in entries:
        cs.offer(*e)
    assert cs.result() == sorted(entries)[101:111]
    assert not cs.complete
    cs = CandidateSet(5000, after=after)
    for e in entries:
        cs.offer(*e)
    assert cs.result() == sorted(entries)[101:] and cs.complete


def test_candidate_set_rows_match_single_offers():
    import numpy as np

    rng = random.Random(6)
    n = 256
    taddrs = np.frombuffer(rng.randbytes(32 * n), np.uint8).reshape(n, 32).copy()
    taddrs[10, :8] = taddrs[11, :8]  # equal 8-byte prefixes must still order by the rest
    addresses = [rng.randbytes(32) for _ in range(n)]
    types = [1 + (i % 2) for i in range(n)]
    rows = list(range(n)) + [3, 10, 11]  # three rows with a second stamp
    batches = [rng.randbytes(32) for _ in rows]
    all_entries = sorted((taddrs[r].tobytes(), b, addresses[r], types[r]) for r, b in zip(rows, batches, strict=True))
    # "after" on an entry whose 8-byte prefix other entries share: the ties are decided on the full key
    tied = [i for i, e in enumerate(all_entries) if e[0][:8] == taddrs[10, :8].tobytes()]
    assert len(tied) >= 3
    row_addr = np.frombuffer(b"".join(addresses), np.uint8).reshape(n, 32)
    row_type = np.asarray(types, np.uint8)
    for k in (1, 5, 300):
        for after_at in (None, 0, 57, *tied):
            after = None if after_at is None else all_entries[after_at][:2]
            fast, columns, slow = CandidateSet(k, after), CandidateSet(k, after), CandidateSet(k, after)
            for lo in range(0, len(rows), 50):  # several batches, as the worker offers them
                fast.offer_rows(taddrs, rows[lo : lo + 50], batches[lo : lo + 50], addresses, types)
                ent_batch = np.frombuffer(b"".join(batches[lo : lo + 50]), np.uint8).reshape(-1, 32)
                columns.offer_block(taddrs, np.asarray(rows[lo : lo + 50], np.intp), ent_batch, row_addr, row_type)
            for r, b in zip(rows, batches, strict=True):
                slow.offer(taddrs[r].tobytes(), b, addresses[r], types[r])
            assert fast.result() == columns.result() == slow.result()
            assert fast.complete == columns.complete == slow.complete
            assert fast.beyond == columns.beyond == slow.beyond


@pytest.mark.parametrize("k", [64, 1])
def test_mostly_invalid_stamps_force_rescans(tmp_path, k):
    """95% of stamps invalid: the shards' first candidate lists cannot fill the sample."""
    from tests.sampler.helpers import spec_transformed_address

    good, bad = keccak256(b"good batch"), keccak256(b"bad batch")
    store = ReserveStore(tmp_path / "s", shards=4)
    try:
        for bid in (good, bad):
            store.batches.add(Batch(bid, OWNER.address, 20, 2, False, 1000, 0))
        issuers = {bid: StampIssuer(OWNER, bid, 20, 2) for bid in (good, bad)}
        rng = random.Random(9)
        puts, valid = [], []
        for i in range(400):
            address, data = make_cac(rng.randbytes(64))
            bid = good if i % 20 == 0 else bad
            puts.append((data, issuers[bid].stamp(address, timestamp_ns=T0)))
            if bid == good:
                valid.append((spec_transformed_address(address, data, 1, b"\x33"), address))
        store.put_many(puts)
        force_batch(store, dataclasses.replace(store.batches.get(bad), owner=OTHER.address))
        res = reserve_sample(store, b"\x33", 0, T0, workers=2, k=k)
        assert [(it.transformed_address, it.chunk_address) for it in res.items] == sorted(valid)[:16]
        assert res.stats.reruns > 0
        assert res.stats.invalid_stamps > 16
        check_sample(res.items, b"\x33", store.batches, T0)
    finally:
        store.close()


def test_errors_pickle():
    import pickle

    from sampler import InsufficientSample, SamplerWorkerError

    for err in (InsufficientSample(3), SampleIntegrityError(4, "bad"), SamplerWorkerError(2, "boom")):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err)
    assert pickle.loads(pickle.dumps(InsufficientSample(3))).found == 3


def test_worker_failure_is_typed(tmp_path):
    """A shard that vanished under a running store surfaces as SamplerWorkerError naming the shard."""
    import shutil

    from chunkstore.store.layout import shard_path
    from sampler import SamplerWorkerError

    store, _, _ = _dup_store(tmp_path / "s", shards=2)
    try:
        shutil.rmtree(shard_path(tmp_path / "s", 1))
        with pytest.raises(SamplerWorkerError) as info:
            reserve_sample(store, b"\x00", 0, T0 + 10, workers=2)
        assert info.value.shard == 1
        assert "shard 1" in str(info.value)
    finally:
        store.close()
