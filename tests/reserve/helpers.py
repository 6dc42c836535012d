"""Helpers of the reserve tests: filling a store, reading its entries, the eviction rule computed directly."""

from __future__ import annotations

import random
from collections.abc import Iterable

from chunkstore.reserve import ReserveStore
from chunkstore.store.batchstore import Batch
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.proximity import proximity
from tests.store.helpers import Stamper

Entry = tuple[bytes, bytes, bytes]  # (address, batch id, stamp index)


def entries(store: ReserveStore) -> set[Entry]:
    """Every (chunk, stamp) entry of the store, read through the public API."""
    out = set()
    for addr in {a for a, *_ in store.iter_neighbourhood(b"", 0)}:
        for st in store.stamps_of(addr):
            out.add((addr, st.batch_id, st.index))
    return out


def direct_bins(found: Iterable[Entry], overlay: bytes) -> list[int]:
    bins = [0] * 32
    for addr, _, _ in found:
        bins[proximity(overlay, addr)] += 1
    return bins


def fill(
    store: ReserveStore,
    batches: list[Batch],
    n: int,
    rng: random.Random,
    *,
    shared: float = 0.1,
    size: int = 16,
    stampers: dict[bytes, Stamper] | None = None,
    overlay: bytes = b"",
    min_po: int = 0,
) -> list[bytes]:
    """Put ``n`` random CACs, each under a random batch; a ``shared`` fraction under a second one too.

    Pass the same ``stampers`` to calls on one store, so that slots are not reused.
    With ``min_po``, only chunks at least that close to ``overlay``.
    """
    stampers = {} if stampers is None else stampers
    for b in batches:
        stampers.setdefault(b.id, Stamper(b))
    items = []
    addrs = []
    for _ in range(n):
        addr, data = make_cac(rng.randbytes(size))
        while min_po and proximity(overlay, addr) < min_po:
            addr, data = make_cac(rng.randbytes(size))
        first, second = rng.sample(batches, 2) if len(batches) > 1 else (batches[0], None)
        items.append((data, stampers[first.id].stamp(addr)))
        if second is not None and rng.random() < shared:
            items.append((data, stampers[second.id].stamp(addr)))
        addrs.append(addr)
    store.put_many(items)
    return addrs


def expected_unreserve(
    found: set[Entry], batches: list[Batch], overlay: bytes, radius: int, capacity: int, min_evict: int
) -> tuple[set[Entry], int]:
    """The reference node's unreserve applied to a set of entries: (entries left, final radius).

    Written straight from the rule, independently of chunkstore/reserve/eviction.py:
    batches cheapest first; from each, up to max(target - evicted, min_evict)
    entries with proximity below the radius, farthest bin first, by address;
    a round that falls short raises the radius by one.
    """
    left = set(found)
    target = len(left) - capacity
    if target <= 0:
        return left, radius
    order = sorted(batches, key=lambda b: (b.value, b.id))
    evicted = 0
    while radius < 32:
        for batch in order:
            want = max(target - evicted, min_evict)
            below = sorted(
                (proximity(overlay, a), a, i) for a, bid, i in left if bid == batch.id and proximity(overlay, a) < radius
            )
            for _, a, i in below[:want]:
                left.remove((a, batch.id, i))
            evicted += len(below[:want])
            if evicted >= target:
                return left, radius
        radius += 1
    return left, radius
