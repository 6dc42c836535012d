"""The names the daemon takes from the store and the sampler, in one place.

Imported when the app module is, not on first use: loading the sampler (and
its compiled hashing kernels) takes most of a second, which must not happen
on the event loop while requests wait.
"""

from __future__ import annotations

from typing import Any

from chunkstore.batchstore import Batch
from chunkstore.store import ChunkStore
from chunkstore.store_errors import StoreFormatError
from sampler import reserve_sample_async

__all__ = ["Batch", "ChunkStore", "StoreFormatError", "make_batch", "open_store", "reserve_sample"]


def make_batch(**fields: Any) -> Batch:
    return Batch(**fields)


def open_store(path: Any, shards: int | None = None, readonly: bool = False) -> ChunkStore:
    return ChunkStore(path, shards=shards, readonly=readonly)


def store_format_error() -> type[BaseException]:
    return StoreFormatError


async def reserve_sample(store: Any, anchor: bytes, depth: int, consensus_time: int, **kwargs: Any) -> Any:
    return await reserve_sample_async(store, anchor, depth, consensus_time, **kwargs)
