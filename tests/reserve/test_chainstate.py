"""Chain state: parsing, the reference's TTL formula, and batch expiry in the store."""

from __future__ import annotations

import random

import pytest

from chunkstore.reserve import ReserveOptions, ReserveStore, ReserveWorker
from chunkstore.reserve.chainstate import (
    EMPTY,
    ChainState,
    InvalidChainState,
    batch_ttl,
    decode_chainstate,
    encode_chainstate,
    parse_chainstate,
)
from chunkstore.store.verify import verify_store
from tests.reserve.helpers import direct_bins, entries, fill
from tests.store.helpers import Stamper, make_batch, random_cac

OVERLAY = bytes.fromhex("77" * 32)


def test_parse_and_render_in_the_reference_shape():
    state = parse_chainstate({"block": 123, "totalAmount": "1000000000000000000000", "currentPrice": 24000})
    assert state == ChainState(123, 10**21, 24000)
    assert state.to_json() == {"chainTip": 123, "block": 123, "totalAmount": str(10**21), "currentPrice": "24000"}
    tipped = parse_chainstate({"chainTip": 130, "block": 123, "totalAmount": 5, "currentPrice": "7"})
    assert tipped.to_json()["chainTip"] == 130
    assert decode_chainstate(encode_chainstate(tipped)) == tipped
    assert decode_chainstate(encode_chainstate(state)) == state
    assert EMPTY.to_json() == {"chainTip": 0, "block": 0, "totalAmount": "0", "currentPrice": "0"}


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"block": 1, "totalAmount": "1"},
        {"block": -1, "totalAmount": "1", "currentPrice": "1"},
        {"block": 1, "totalAmount": "-1", "currentPrice": "1"},
        {"block": 1, "totalAmount": "0x10", "currentPrice": "1"},
        {"block": 1, "totalAmount": 1.5, "currentPrice": "1"},
        {"block": True, "totalAmount": "1", "currentPrice": "1"},
        {"block": 1 << 64, "totalAmount": "1", "currentPrice": "1"},
    ],
)
def test_bad_chain_states_are_refused(body):
    with pytest.raises(InvalidChainState):
        parse_chainstate(body)


def test_ttl_is_the_reference_formula():
    state = ChainState(block=10, total_amount=400, current_price=3)
    assert batch_ttl(1000, state) == (1000 - 400) * 5 // 3 == 1000
    # multiplied before dividing, as the reference does: 7 * 5 // 2 = 17, not 7 // 2 * 5 = 15
    assert batch_ttl(407, state.__class__(1, 400, 2)) == 17
    assert batch_ttl(393, state.__class__(1, 400, 2)) == -18  # floor, like Go's big.Int Div for a positive price
    assert batch_ttl(1000, state, block_time=12) == 2400
    assert batch_ttl(1000, ChainState(1, 0, 0)) == -1  # no price: never expires
    assert batch_ttl(1000, None) == -1
    assert batch_ttl(1 << 200, ChainState(1, 0, 1)) == (1 << 63) - 1  # an int64, as the reference answers


def test_expiry_removes_the_batches_their_chunks_and_slots(tmp_path):
    cheap = make_batch(1, depth=12, bucket_depth=4, value=10)
    middle = make_batch(2, depth=12, bucket_depth=4, value=20)
    dear = make_batch(3, depth=12, bucket_depth=4, value=30)
    batches = [cheap, middle, dear]
    with ReserveStore(tmp_path / "s", overlay=OVERLAY) as store:
        for b in batches:
            store.batches.add(b)
        fill(store, batches, 300, random.Random(1), shared=0.3)
        # one chunk under a batch that expires and one that stays: it keeps only the second stamp
        addr, data = random_cac(30)
        store.put_many([(data, Stamper(cheap).stamp(addr, position=250)), (data, Stamper(dear).stamp(addr, position=250))])
        before = entries(store)
        assert store.reserve.maintain()["expiry"] == 0  # no chain state yet: nothing expires
        store.reserve.set_chainstate(ChainState(block=50, total_amount=20, current_price=1))
        done = store.reserve.maintain()
        gone = {cheap.id, middle.id}
        want = {e for e in before if e[1] not in gone}
        assert entries(store) == want
        assert done["expiry"] == len(before) - len(want) == store.reserve.evictions["expiry"]
        assert store.reserve.expired_batches == 2
        assert [b.id for b in store.batches.list()] == [dear.id]
        assert [st.batch_id for st in store.stamps_of(addr)] == [dear.id]
        assert {a for a, *_ in store.iter_neighbourhood(b"", 0)} == {a for a, _, _ in want}
        for i in range(store.shard_count):  # the stamp slots of the expired batches are free
            shard = store.shard(i)
            with shard.env.begin() as txn:
                for key, _ in txn.cursor(db=shard.slots):
                    assert key[:32] not in gone
        assert store.stats()["slots"] == len(want)
        assert list(store.reserve.status().bins) == direct_bins(want, OVERLAY)
    assert verify_store(str(tmp_path / "s")).ok


def test_chain_state_is_kept_and_a_batch_added_already_expired_goes(tmp_path):
    path = tmp_path / "s"
    with ReserveStore(path, overlay=OVERLAY) as store:
        store.reserve.set_chainstate(ChainState(block=9, total_amount=100, current_price=2, chain_tip=11))
    with ReserveStore(path, overlay=OVERLAY, reserve=ReserveOptions()) as store:
        assert store.reserve.chainstate == ChainState(9, 100, 2, 11)
        worker = ReserveWorker(store.reserve).start()
        live, dead = make_batch(1, value=101), make_batch(2, value=100)
        store.batches.add(live)
        store.batches.add(dead)  # the reference expires a batch saved below the total amount at once
        assert worker.settle(10)
        assert [b.id for b in store.batches.list()] == [live.id]
        assert store.reserve.expired_batches == 1
