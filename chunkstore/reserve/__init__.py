"""The reserve: what a storage node keeps of its store, and for how long.

Holds the node's overlay and storage radius (which addresses are admitted),
the capacity and the eviction that keeps to it (cheapest batch first, farthest
bin first, radius up when a round is not enough), batch expiry by the chain
state, sweeps after the radius rises, and the background worker that runs
them. ``ReserveStore`` is the chunk store with its reserve registered as the
store's policy (chunkstore.store.policy): the store calls it, never imports it.

May import chunkstore.store and chunkstore.swarm; nothing above.
"""

from __future__ import annotations

from .chainstate import EMPTY as EMPTY_CHAINSTATE
from .chainstate import ChainState, batch_ttl, parse_chainstate
from .errors import InvalidChainState, InvalidReserveOption, OutOfRadius
from .options import ReserveOptions
from .reserve import Reserve, ReserveStatus
from .store import ReserveStore, reserve_policy
from .worker import ReserveWorker

__all__ = [
    "EMPTY_CHAINSTATE",
    "ChainState",
    "InvalidChainState",
    "InvalidReserveOption",
    "OutOfRadius",
    "Reserve",
    "ReserveOptions",
    "ReserveStatus",
    "ReserveStore",
    "ReserveWorker",
    "batch_ttl",
    "parse_chainstate",
    "reserve_policy",
]
