"""``put_signed``: the owner's own writes; addresses, batches and slots checked, signatures spot-checked."""

from __future__ import annotations

import os

import pytest

from chunkstore.store.errors import UnknownBatch
from chunkstore.store.verify import verify_store
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.errors import InvalidChunk, InvalidStamp
from chunkstore.swarm.postage import StampIssuer
from chunkstore.swarm.soc import make_soc
from chunkstore.swarm.stamp import bucket_of
from tests.store.helpers import OTHER_KEY, make_batch, open_store, signer


@pytest.fixture
def setup(tmp_path):
    store = open_store(tmp_path)
    batch = make_batch(1)
    store.batches.add(batch)
    issuer = StampIssuer(signer(), batch.id, batch.depth, batch.bucket_depth, immutable=False)
    yield store, batch, issuer, tmp_path
    store.close()


def cacs(n: int) -> list[tuple[bytes, bytes]]:
    return [make_cac(os.urandom(100 + i)) for i in range(n)]


def test_stores_cacs_and_socs_like_put_many(setup):
    store, batch, issuer, path = setup
    items = [(a, d, issuer.stamp(a)) for a, d in cacs(20)]
    _, wrapped = make_cac(b"wrapped payload")
    soc = make_soc(signer(), os.urandom(32), wrapped + bytes(4104 - len(wrapped)))
    items.append((soc.address, soc.data, issuer.stamp(soc.address)))
    results = store.put_signed(items)
    assert [r.address for r in results] == [a for a, _, _ in items] and all(r.stored for r in results)
    assert results[-1].chunk_type.name == "SOC"
    assert all(store.get(a) == d for a, d, _ in items)
    store.close()
    assert verify_store(str(path)).ok


def test_a_wrong_address_is_refused_whole(setup):
    store, batch, issuer, _ = setup
    items = [(a, d, issuer.stamp(a)) for a, d in cacs(5)]
    address, data, stamp = items[3]
    items[3] = (os.urandom(32), data, stamp)
    with pytest.raises(InvalidChunk):
        store.put_signed(items)
    assert store.stats()["chunks"] == 0


def test_the_spot_check_catches_the_wrong_signer(setup):
    store, batch, _, _ = setup
    stranger = StampIssuer(signer(OTHER_KEY), batch.id, batch.depth, batch.bucket_depth)
    items = [(a, d, stranger.stamp(a)) for a, d in cacs(5)]
    with pytest.raises(InvalidStamp, match="not by the batch owner"):
        store.put_signed(items)
    assert store.stats()["chunks"] == 0


def test_slots_and_batches_are_still_checked(setup):
    store, batch, issuer, _ = setup
    (a, d), (b, e) = cacs(2)
    wrong_bucket = issuer.stamp(b, bucket=(bucket_of(b, 16) + 1) % 65536)
    with pytest.raises(InvalidStamp, match="bucket"):
        store.put_signed([(a, d, issuer.stamp(a)), (b, e, wrong_bucket)])
    with pytest.raises(InvalidStamp, match="out of range"):
        store.put_signed([(a, d, issuer.stamp(a)), (b, e, issuer.stamp(b, position=1 << 20))])
    unknown = StampIssuer(signer(), os.urandom(32), 20, 16)
    with pytest.raises(UnknownBatch):
        store.put_signed([(a, d, unknown.stamp(a))])
    assert store.stats()["chunks"] == 0
