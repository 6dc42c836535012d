"""Random operation sequences against a plain-Python model of the batch-slot rule."""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkstore.store.errors import StampConflict
from chunkstore.store.verify import verify_store
from tests.store.helpers import Stamper, make_batch, open_store, random_cac, random_soc

# Bucket depth 0: every chunk is in bucket 0, so every chunk competes for the same 4 slots per batch.
BATCHES = [make_batch(20 + i, depth=2, bucket_depth=0) for i in range(2)]


def _pool(rng: random.Random) -> list[tuple[bytes, bytes, bool]]:
    """(address, data, is_soc): CACs, and SOCs with two versions at one address."""
    pool = [(*random_cac(rng.choice((5, 4096))), False) for _ in range(6)]
    for _ in range(3):
        soc_id = os.urandom(32)
        for size in (20, 4096):
            pool.append((*random_soc(size, soc_id=soc_id), True))
    return pool


class Model:
    def __init__(self) -> None:
        self.slots: dict[tuple[bytes, int], tuple[bytes, int]] = {}
        self.data: dict[bytes, bytes] = {}

    def holds(self, addr: bytes) -> bool:
        return any(a == addr for a, _ in self.slots.values())

    def put(self, addr: bytes, data: bytes, is_soc: bool, batch: bytes, pos: int, ts: int) -> bool | None:
        """True stored, False no-op, None refused."""
        held = self.slots.get((batch, pos))
        if held is not None:
            haddr, hts = held
            if ts < hts or (ts == hts and haddr != addr):
                return None
            if ts == hts:
                return None if is_soc and self.data[addr] != data else False
        self.slots[(batch, pos)] = (addr, ts)
        if held is not None and held[0] != addr and not self.holds(held[0]):
            del self.data[held[0]]
        if is_soc or addr not in self.data:
            self.data[addr] = data
        return True

    def delete(self, addr: bytes) -> bool:
        self.slots = {k: v for k, v in self.slots.items() if v[0] != addr}
        return self.data.pop(addr, None) is not None

    def remove_batch(self, batch: bytes) -> None:
        gone = {v[0] for k, v in self.slots.items() if k[0] == batch}
        self.slots = {k: v for k, v in self.slots.items() if k[0] != batch}
        for addr in gone:
            if not self.holds(addr):
                del self.data[addr]


def _check(store, model: Model) -> None:
    entries = {(a, b, ts) for a, _, b, ts in store.iter_neighbourhood(b"", 0)}
    assert entries == {(a, k[0], ts) for k, (a, ts) in model.slots.items()}
    assert store.chunk_count() == len(model.data)
    for addr, data in model.data.items():
        assert store.get(addr) == data
    stats = store.stats()
    assert stats["bytes"] == sum(len(d) for d in model.data.values())
    assert stats["slots"] == len(model.slots)  # (settled pending records may linger until the next write)


def _run(path: str, seed: int, steps: int) -> None:
    rng = random.Random(seed)
    pool = _pool(rng)
    stampers = [Stamper(b) for b in BATCHES]
    model = Model()
    with open_store(path, batches=BATCHES) as store:
        for step in range(steps):
            op = rng.random()
            if op < 0.08 and model.data:
                addr = rng.choice(sorted(model.data))
                assert store.delete(addr) == model.delete(addr)
            elif op < 0.11:
                b = rng.choice(BATCHES)
                store.batches.remove(b.id)
                model.remove_batch(b.id)
                store.batches.add(b)
            elif op < 0.25:
                items, expect = [], []
                for _ in range(rng.randrange(2, 6)):
                    addr, data, is_soc = rng.choice(pool)
                    bi, pos, ts = rng.randrange(2), rng.randrange(4), rng.randrange(1, 30)
                    items.append((data, stampers[bi].stamp(addr, position=pos, ts=ts)))
                    expect.append((addr, data, is_soc, BATCHES[bi].id, pos, ts))
                trial = Model()
                trial.slots, trial.data = dict(model.slots), dict(model.data)
                outcomes = [trial.put(*e) for e in expect]
                if None in outcomes:
                    with pytest.raises(StampConflict):
                        store.put_many(items)
                else:
                    assert [r.stored for r in store.put_many(items)] == outcomes
                    model = trial
            else:
                addr, data, is_soc = rng.choice(pool)
                bi, pos, ts = rng.randrange(2), rng.randrange(4), rng.randrange(1, 30)
                stamp = stampers[bi].stamp(addr, position=pos, ts=ts)
                want = model.put(addr, data, is_soc, BATCHES[bi].id, pos, ts)
                if want is None:
                    with pytest.raises(StampConflict):
                        store.put(data, stamp)
                else:
                    res = store.put(data, stamp)
                    assert (res.address, res.stored) == (addr, want), step
            _check(store, model)
    assert verify_store(path).ok


@pytest.mark.parametrize("seed", range(3))
def test_random_sequences_match_model(tmp_path, seed):
    _run(str(tmp_path / "s"), seed, 150)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(min_value=100, max_value=10**6))
def test_random_sequences_match_model_hypothesis(tmp_path_factory, seed):
    _run(str(tmp_path_factory.mktemp("m") / "s"), seed, 40)
