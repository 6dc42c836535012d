"""The node stamper and its durable issuer: Bee's issuer rules, refusals, durability, old stores."""

from __future__ import annotations

import os

import lmdb
import pytest

from chunkstore.content import NodeStamper, NotNodeBatch
from chunkstore.reserve import ReserveStore
from chunkstore.store.batchstore import Batch
from chunkstore.store.errors import UnknownBatch
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.errors import BucketFull
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.stamp import bucket_of, validate_stamp
from tests.content.helpers import NODE_KEY, node_batch, open_node


def addresses_in_bucket(bucket: int, bucket_depth: int, n: int) -> list[bytes]:
    """``n`` distinct addresses whose first ``bucket_depth`` bits are ``bucket``."""
    prefix = (bucket << (32 - bucket_depth)).to_bytes(4, "big")
    return [prefix + os.urandom(28) for _ in range(n)]


def test_stamps_are_valid_and_take_positions_in_order(node):
    addrs = addresses_in_bucket(5, 16, 3) + addresses_in_bucket(9, 16, 2)
    stamps = node.stamper.stamp(node.batch.id, addrs)
    for a, s in zip(addrs, stamps, strict=True):
        validate_stamp(s, a, node.signer.address, node.batch.depth, node.batch.bucket_depth)
    assert [(s.bucket, s.position) for s in stamps] == [(5, 0), (5, 1), (5, 2), (9, 0), (9, 1)]
    more = node.stamper.stamp(node.batch.id, addresses_in_bucket(5, 16, 1))
    assert (more[0].bucket, more[0].position) == (5, 3)
    counts = node.store.issuers.bucket_counts(node.batch.id, 16)
    assert len(counts) == 1 << 16 and counts[5] == 4 and counts[9] == 2 and sum(counts) == 6
    info = node.store.issuers.info(node.batch.id)
    assert info is not None and info.utilization == 4


def test_timestamps_increase_strictly(node):
    stamps = node.stamper.stamp(node.batch.id, [os.urandom(32) for _ in range(50)])
    ts = [s.timestamp_ns for s in stamps]
    assert ts == sorted(ts) and len(set(ts)) == len(ts)


def test_same_chunk_keeps_its_slot_with_a_newer_timestamp(node):
    address, data = make_cac(b"same chunk")
    twice = node.stamper.stamp(node.batch.id, [address, address])
    assert twice[0].index == twice[1].index and twice[1].timestamp_ns > twice[0].timestamp_ns
    node.store.put(data, twice[1])
    again = node.stamper.stamp(node.batch.id, [address])[0]
    assert again.index == twice[0].index and again.timestamp_ns > twice[1].timestamp_ns
    assert node.store.put(data, again).address == address  # the newer stamp replaces its own slot
    assert sum(node.store.issuers.bucket_counts(node.batch.id, 16)) == 1


def test_immutable_full_bucket_refuses_and_keeps_nothing(tmp_path):
    node = open_node(tmp_path / "s", depth=18, bucket_depth=16)  # 4 positions per bucket
    try:
        node.stamper.stamp(node.batch.id, addresses_in_bucket(7, 16, 3))
        with pytest.raises(BucketFull) as err:
            node.stamper.stamp(node.batch.id, addresses_in_bucket(8, 16, 1) + addresses_in_bucket(7, 16, 2))
        assert err.value.bucket == 7 and err.value.positions == 4
        counts = node.store.issuers.bucket_counts(node.batch.id, 16)
        assert counts[7] == 3 and counts[8] == 0  # the refused call kept nothing, not even bucket 8's position
        assert node.stamper.stamp(node.batch.id, addresses_in_bucket(7, 16, 1))[0].position == 3
    finally:
        node.store.close()


def test_mutable_full_bucket_wraps_to_the_first_position(tmp_path):
    node = open_node(tmp_path / "s", depth=18, bucket_depth=16, immutable=False)
    try:
        stamps = node.stamper.stamp(node.batch.id, addresses_in_bucket(3, 16, 6))
        assert [s.position for s in stamps] == [0, 1, 2, 3, 0, 1]
        info = node.store.issuers.info(node.batch.id)
        assert info is not None and info.utilization == 4  # the fullest count, as the reference keeps it
    finally:
        node.store.close()


def test_batches_the_node_cannot_stamp(node):
    stranger = Batch(os.urandom(32), Signer(os.urandom(32)).address, 20, 16, True, 10**15, 0)
    node.store.batches.add(stranger)
    with pytest.raises(NotNodeBatch, match="not by this node"):
        node.stamper.stamp(stranger.id, [os.urandom(32)])
    with pytest.raises(UnknownBatch):
        node.stamper.stamp(os.urandom(32), [os.urandom(32)])
    assert node.store.issuers.info(stranger.id) is None


def test_positions_survive_a_reopen(tmp_path):
    node = open_node(tmp_path / "s")
    batch = node.batch
    node.stamper.stamp(batch.id, addresses_in_bucket(1, 16, 2))
    node.store.close()
    store = ReserveStore(tmp_path / "s")
    try:
        stamper = NodeStamper(store, Signer(NODE_KEY))
        assert stamper.stamp(batch.id, addresses_in_bucket(1, 16, 1))[0].position == 2
    finally:
        store.close()


def test_register_keeps_counts_and_removal_drops_the_issuer(node):
    node.stamper.stamp(node.batch.id, addresses_in_bucket(2, 16, 2))
    info = node.store.issuers.register(node.batch.id, label="site", amount=123, block_number=7)
    assert (info.label, info.amount, info.block_number, info.utilization) == ("site", 123, 7, 2)
    assert node.store.issuers.bucket_counts(node.batch.id, 16)[2] == 2
    other = node_batch(node.signer)
    node.store.batches.add(other)
    node.stamper.stamp(other.id, [os.urandom(32)])
    node.store.batches.remove(node.batch.id)
    assert node.store.issuers.info(node.batch.id) is None
    assert sum(node.store.issuers.bucket_counts(node.batch.id, 16)) == 0
    assert [i.batch_id for i in node.store.issuers.list()] == [other.id]  # the other batch's issuer stays


def test_store_from_before_the_issuers_database(tmp_path):
    path = tmp_path / "old"
    ReserveStore(path).close()
    env = lmdb.open(str(path / "meta"), max_dbs=4)
    with env.begin(write=True) as txn:
        txn.drop(env.open_db(b"issuers", txn=txn), delete=True)
    env.close()
    with ReserveStore(path, readonly=True) as ro:  # an old store read-only: no issuers, no error
        assert ro.issuers.list() == [] and ro.issuers.info(os.urandom(32)) is None
    store = ReserveStore(path)  # the first writable open adds the database
    try:
        signer = Signer(NODE_KEY)
        batch = node_batch(signer)
        store.batches.add(batch)
        assert NodeStamper(store, signer).stamp(batch.id, addresses_in_bucket(0, 16, 1))[0].position == 0
    finally:
        store.close()


def test_bucket_of_matches_the_issuer(node):
    address = os.urandom(32)
    stamp = node.stamper.stamp(node.batch.id, [address])[0]
    assert stamp.bucket == bucket_of(address, 16)


def test_concurrent_uploads_of_one_chunk_share_its_position(node, monkeypatch):
    """A crash sweep's concurrent uploads of one file stored 181 chunks under 182 stamps: both uploads
    found the shared chunk absent from the store and each took a position for it."""
    import threading
    import time

    address, data = make_cac(b"uploaded twice at once")
    real = node.store.issuers.reserve

    def slow(batch, buckets):
        time.sleep(0.05)  # both calls look the chunk up before either has its position
        return real(batch, buckets)

    monkeypatch.setattr(node.store.issuers, "reserve", slow)
    got: list = []
    threads = [threading.Thread(target=lambda: got.append(node.stamper.stamp(node.batch.id, [address])[0]))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got[0].index == got[1].index
    assert sum(node.store.issuers.bucket_counts(node.batch.id, 16)) == 1
    newer = max(got, key=lambda s: s.timestamp_ns)
    node.store.put(data, min(got, key=lambda s: s.timestamp_ns))
    node.store.put(data, newer)  # the later upload's stamp replaces its own slot
    assert [s.index for s in node.store.stamps_of(address)] == [newer.index]


def test_positions_given_but_never_stored_are_remembered_within_a_bound(node, monkeypatch):
    from chunkstore.content import stamper

    monkeypatch.setattr(stamper, "GIVEN_BOUND", 4)
    first = [os.urandom(32) for _ in range(6)]
    taken = node.stamper.stamp(node.batch.id, first)
    again = node.stamper.stamp(node.batch.id, first)  # none stored: the last four are remembered
    assert [s.index for s in again[2:]] == [s.index for s in taken[2:]]
    assert all(a.index != t.index for a, t in zip(again[:2], taken[:2], strict=True))


def test_remembered_positions_keep_to_their_memory_bound(node):
    """A soak of the daemon saw its memory climb with every chunk stamped: the positions remembered for
    chunks the store may not hold yet took 21 MiB at their bound, three times what was planned. Filled past
    the bound, what they keep (the identities they were given included) stays under 16 MiB."""
    import tracemalloc

    from chunkstore.content.stamper import GIVEN_BOUND

    stamper, batch_id = node.stamper, bytes(node.batch.id)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for start in range(0, GIVEN_BOUND + 1024, 1024):  # as uploads hand them out, a group at a time
            stamper._remember(batch_id, {os.urandom(32): (i & 0xFFFF, i) for i in range(start, start + 1024)})
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(stamper._given) == GIVEN_BOUND
    assert kept < 16 << 20, f"{kept / 2**20:.1f} MiB"
    identity = os.urandom(32)  # the largest bucket and a position beyond 32 bits come back as they went in
    stamper._remember(batch_id, {identity: ((1 << 32) - 1, 1 << 40)})
    assert stamper._held(os.urandom(32), identity, batch_id) == ((1 << 32) - 1, 1 << 40)


def test_socs_at_one_address_are_told_apart_by_their_identity(node):
    """The reference's stamper keys what it stamped by identity address (``SOC.identity`` for a SOC): two
    SOCs at one address with other wrapped chunks take two positions, stored or not; each keeps its own."""
    from chunkstore.swarm.soc import make_soc

    owner = Signer(os.urandom(32))
    soc_id = os.urandom(32)
    one, two = (make_soc(owner, soc_id, make_cac(p)[1]) for p in (b"first content", b"second content"))
    assert one.address == two.address and one.identity != two.identity

    def stamp(soc):
        return node.stamper.stamp(node.batch.id, [soc.address], [soc.identity])[0]

    s1, s2 = stamp(one), stamp(two)  # neither stored yet: told apart by what the stamper gave out
    assert s1.bucket == s2.bucket and {s1.position, s2.position} == {0, 1}
    assert stamp(one).index == s1.index and stamp(two).index == s2.index
    node.store.put(one.data, stamp(one))
    node.stamper._given.clear()  # as after a restart: the store alone tells what the batch holds
    assert stamp(one).index == s1.index  # the stored SOC is this one
    assert stamp(two).position == 2  # another SOC at the address: a new position
    assert sum(node.store.issuers.bucket_counts(node.batch.id, 16)) == 3


def test_the_older_stamp_of_one_chunk_stored_after_the_newer_is_a_repeat_not_a_409(node):
    """Two uploads of the same content at once share each chunk's position (above) and each signs it with
    its own time; their groups commit in either order. The crash harness's concurrent uploads met the older
    one second: StampConflict, a 409 for an upload Bee answers 201 (its upload store takes a chunk the
    batch already holds as seen: pkg/storer/internal/upload/uploadstore.go, uploadPutter.Put). The node's
    own writes (put_signed) take it as a repeat; a pre-signed stamp (put_many, POST /chunks with a stamp)
    still gets the slot rule."""
    from chunkstore.store.errors import StampConflict

    address, data = make_cac(b"uploaded twice at once, stored newer first")
    older, newer = node.stamper.stamp(node.batch.id, [address, address])
    assert older.index == newer.index and older.timestamp_ns < newer.timestamp_ns
    node.store.put_signed([(address, data, newer)])
    [result] = node.store.put_signed([(address, data, older)])
    assert result.address == address and not result.stored and not result.fresh
    assert [(s.index, s.timestamp_ns) for s in node.store.stamps_of(address)] == [(newer.index, newer.timestamp_ns)]
    with pytest.raises(StampConflict):
        node.store.put_many([(data, older)])
