"""Batches the chain state has expired never vouch for a chunk, even before the eviction removed them.

The reference node deletes an expired batch from its batch store in the same
call that stores the chain state (``pkg/postage/batchstore/store.go``,
``PutChainState`` -> ``cleanup``), so its sample's stamp check finds no batch
for those chunks from that moment on. Here expiry is the reserve worker's job,
done after ``set_chainstate`` returns: a sample taken in between must already
leave those batches out.
"""

from __future__ import annotations

import random

import pytest

from chunkstore.reserve import ChainState, ReserveStore
from chunkstore.store.batchstore import Batch
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.postage import StampIssuer
from chunkstore.swarm.signer import Signer
from sampler import reserve_sample

T0 = 1_000_000
OWNER = Signer(keccak256(b"expiry owner"))
LIVE = keccak256(b"live batch")
DOOMED = keccak256(b"doomed batch")


def _store(path) -> ReserveStore:
    store = ReserveStore(path, shards=2)
    store.batches.add(Batch(LIVE, OWNER.address, 20, 2, False, 10_000, 0))
    store.batches.add(Batch(DOOMED, OWNER.address, 20, 2, False, 100, 0))
    issuers = {bid: StampIssuer(OWNER, bid, 20, 2, immutable=False) for bid in (LIVE, DOOMED)}
    rng = random.Random(5)
    puts = []
    for i in range(80):  # as many chunks under each batch: the doomed one's are half the smallest
        address, data = make_cac(rng.randbytes(64))
        puts.append((data, issuers[LIVE if i % 2 else DOOMED].stamp(address, timestamp_ns=T0)))
    store.put_many(puts)
    return store


@pytest.mark.parametrize("workers", [0, 2])
def test_expired_batch_left_out_before_eviction(tmp_path, workers):
    store = _store(tmp_path / "s")
    try:
        before = reserve_sample(store, b"\x00", 0, T0 + 1, workers=workers)
        assert {it.stamp.batch_id for it in before.items} == {LIVE, DOOMED}
        store.reserve.set_chainstate(ChainState(10, 500, 1))  # DOOMED (100) expires; no worker runs here
        assert store.batches.find(DOOMED) is not None  # not evicted yet
        during = reserve_sample(store, b"\x00", 0, T0 + 1, workers=workers)
        assert {it.stamp.batch_id for it in during.items} == {LIVE}
        store.reserve.maintain()  # the eviction catches up: the sample does not change
        assert store.batches.find(DOOMED) is None
        after = reserve_sample(store, b"\x00", 0, T0 + 1, workers=workers)
        assert [it.chunk_address for it in during.items] == [it.chunk_address for it in after.items]
    finally:
        store.close()
