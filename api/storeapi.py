"""The names the daemon takes from the store and the sampler, in one place.

Imported when the app module is, not on first use: loading the sampler (and
its compiled hashing kernels) takes most of a second, which must not happen
on the event loop while requests wait.
"""

from __future__ import annotations

from typing import Any

from chunkstore.batchstore import Batch
from chunkstore.chainstate import EMPTY as EMPTY_CHAINSTATE
from chunkstore.chainstate import ChainState, InvalidChainState, batch_ttl, parse_chainstate
from chunkstore.reserve import ReserveOptions
from chunkstore.reserve_worker import ReserveWorker
from chunkstore.store import ChunkStore
from chunkstore.store_errors import StoreFormatError, StoreWriteFailed
from sampler import reserve_sample_async

__all__ = [
    "EMPTY_CHAINSTATE",
    "Batch",
    "ChainState",
    "ChunkStore",
    "InvalidChainState",
    "ReserveOptions",
    "ReserveWorker",
    "StoreFormatError",
    "batch_ttl",
    "make_batch",
    "open_store",
    "parse_chainstate",
    "reserve_options",
    "reserve_sample",
]


def make_batch(**fields: Any) -> Batch:
    return Batch(**fields)


def reserve_options(config: Any) -> ReserveOptions:
    """The store's reserve settings from the daemon's ``Config``."""
    return ReserveOptions(
        capacity=config.reserve_capacity,
        doubling=config.reserve_capacity_doubling,
        minimum_radius=config.minimum_storage_radius,
        min_evict_count=config.reserve_min_evict_count,
    )


def open_store(
    path: Any,
    shards: int | None = None,
    readonly: bool = False,
    *,
    overlay: bytes | None = None,
    reserve: ReserveOptions | None = None,
    map_size: int | None = None,
) -> ChunkStore:
    return ChunkStore(path, shards=shards, readonly=readonly, overlay=overlay, reserve=reserve, map_size=map_size)


def store_format_error() -> type[BaseException]:
    return StoreFormatError


def store_write_error() -> type[BaseException]:
    return StoreWriteFailed


async def reserve_sample(store: Any, anchor: bytes, depth: int, consensus_time: int, **kwargs: Any) -> Any:
    return await reserve_sample_async(store, anchor, depth, consensus_time, **kwargs)
