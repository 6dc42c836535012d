"""``ReserveStore``: the chunk store with the node's reserve registered as its policy.

What the daemon, the import and the tests open: every write is admitted by
the reserve (the storage radius), tells it of the write (capacity) and of
batch changes (expiry), and ``store.reserve`` is the reserve's view.
"""

from __future__ import annotations

import os

from chunkstore.store.store import ChunkStore, PolicyFactory

from .options import ReserveOptions
from .reserve import Reserve


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
