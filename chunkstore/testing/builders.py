"""Stamped reserves for tests: a batch, its issuer, and a store filled with valid chunks.

Everything is derived from ``seed``, so a test that fails can be rerun on
the same bytes. Chunks are CACs of random payloads and, a ``soc_fraction``
of them, SOCs wrapping such CACs; each is stamped in a fresh slot of one
batch by a ``StampIssuer`` (so no put evicts another).
"""

from __future__ import annotations

import itertools
import os
import random
from dataclasses import dataclass, field

from chunkstore.reserve import ReserveStore
from chunkstore.store.batchstore import Batch
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.constants import CHUNK_SIZE, NETWORK_BUCKET_DEPTH, ChunkType
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.postage import StampIssuer
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.soc import make_soc

T0 = 1_700_000_000_000_000_000  # stamps are issued from here on, one nanosecond apart


@dataclass
class BuiltReserve:
    """A filled store and what went into it: ``chunks`` maps each address to ``(data, chunk type)``."""

    store: ReserveStore
    batch: Batch
    owner: Signer
    issuer: StampIssuer
    chunks: dict[bytes, tuple[bytes, ChunkType]] = field(default_factory=dict)

    @property
    def last_timestamp(self) -> int:
        """A consensus time after every stamp issued so far."""
        return T0 + len(self.chunks) + 1


def make_batch(owner: Signer, name: bytes = b"chunkstore.testing batch", *, depth: int = 20,
               bucket_depth: int = NETWORK_BUCKET_DEPTH, value: int = 10**15) -> Batch:  # fmt: skip
    """A mutable batch of ``owner``, its id derived from ``name`` and the owner."""
    return Batch(keccak256(name, owner.address), owner.address, depth, bucket_depth, False, value, 0)


def build_reserve(
    path: str | os.PathLike[str],
    chunks: int = 200,
    *,
    soc_fraction: float = 0.1,
    shards: int = 4,
    seed: int = 0,
    overlay: bytes | None = None,
) -> BuiltReserve:
    """A ``ReserveStore`` at ``path`` holding ``chunks`` validly stamped chunks of one batch (left open)."""
    rng = random.Random(seed)
    owner = Signer(keccak256(b"chunkstore.testing owner %d" % seed))
    batch = make_batch(owner)
    ticks = itertools.count(T0 + 1)
    issuer = StampIssuer(owner, batch.id, batch.depth, batch.bucket_depth, clock=lambda: next(ticks))
    store = ReserveStore(path, shards, overlay=overlay)
    built = BuiltReserve(store, batch, owner, issuer)
    try:
        store.batches.add(batch)
        puts = []
        for _ in range(chunks):
            payload = rng.randbytes(rng.choice((CHUNK_SIZE, rng.randrange(1, CHUNK_SIZE + 1))))
            address, data = make_cac(payload)
            kind = ChunkType.CAC
            if rng.random() < soc_fraction:
                soc = make_soc(owner, rng.randbytes(32), data)
                address, data, kind = soc.address, soc.data, ChunkType.SOC
            built.chunks[address] = (data, kind)
            puts.append((data, issuer.stamp(address)))
        store.put_many(puts)
    except BaseException:
        store.close()
        raise
    return built
