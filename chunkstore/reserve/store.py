"""``ReserveStore``: the chunk store with the node's reserve registered as its policy.

What the daemon, the import and the tests open: every write is admitted by
the reserve (the storage radius), tells it of the write (capacity) and of
batch changes (expiry), and ``store.reserve`` is the reserve's view.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from chunkstore.store.store import ChunkStore, PolicyFactory

from .options import ReserveOptions
from .reserve import Reserve


@dataclass(frozen=True)
class Keeping:
    """What keeps chunks besides their stamps: the pins and the cache, as LMDB counts them (no scan)."""

    pins: int  # pinned root references
    pinned_chunks: int  # pin rows: a chunk in two pins counts twice
    cache_size: int
    cache_capacity: int
    cache_evicted: int  # entries this process's cache eviction dropped


def reserve_policy(overlay: bytes | None = None, options: ReserveOptions | None = None) -> PolicyFactory:
    """The reserve as a store policy, for opening a plain ``ChunkStore`` the way the node does."""
    return lambda store: Reserve(store, overlay, options or ReserveOptions())


class ReserveStore(ChunkStore):
    """``ChunkStore(path, shards, readonly=, map_size=)`` with its ``reserve``.

    ``overlay`` is the node's overlay address (default: the stored one, else
    generated and stored); ``reserve`` sets capacity and eviction.
    """

    reserve: Reserve

    def __init__(
        self,
        path: str | os.PathLike[str],
        shards: int | None = None,
        *,
        readonly: bool = False,
        map_size: int | None = None,
        overlay: bytes | None = None,
        reserve: ReserveOptions | None = None,
    ) -> None:
        options = reserve or ReserveOptions()

        def attach(store: ChunkStore) -> Reserve:
            self.reserve = Reserve(store, overlay, options)
            return self.reserve

        super().__init__(path, shards, readonly=readonly, map_size=map_size, policy=attach)

    def keeping(self) -> Keeping:
        """The pin and cache counts ``/chunkstore/status``, ``/debugstore`` and the metrics report."""
        policy = self.reserve.cache
        return Keeping(len(self.pins.list()), self.pins.chunk_count(), self.cache.size(), policy.capacity,
                       policy.evicted)  # fmt: skip
