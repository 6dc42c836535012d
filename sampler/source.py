"""What the sampler needs of the store it samples, declared (a ``ReserveStore`` is one).

The sampler reads the index and chunks of every shard (phase 1 in worker
processes, by the store's path), loads the few candidates again in the
caller (phase 2), validates stamps against the batches, and keeps to the
node's storage radius. Declaring that here, as ``typing.Protocol``s, is the
whole coupling: nothing is probed at run time.
"""

from __future__ import annotations

from typing import Protocol

from chunkstore.reserve import ReserveStatus
from chunkstore.store.batchstore import Batch
from chunkstore.store.shard import Shard
from chunkstore.swarm.stamp import Stamp


class BatchRegistry(Protocol):
    def find(self, batch_id: bytes) -> Batch | None:
        """The live batch with this id, or None."""
        ...

    def list(self) -> list[Batch]: ...


class ReserveView(Protocol):
    """The node's overlay and storage radius: entries below the radius are not sampled."""

    @property
    def overlay(self) -> bytes: ...

    @property
    def radius(self) -> int: ...

    def status(self) -> ReserveStatus: ...

    def expired_batch_ids(self) -> list[bytes]:
        """Batches the chain state has expired (value at most its total amount), evicted or not yet."""
        ...


class SampleSource(Protocol):
    @property
    def path(self) -> str:
        """The store directory: worker processes open their shard there."""
        ...

    @property
    def shard_count(self) -> int: ...

    @property
    def batches(self) -> BatchRegistry: ...

    @property
    def reserve(self) -> ReserveView: ...

    def shard_of(self, address: bytes) -> int:
        """The shard holding the chunk at ``address``."""
        ...

    def shard(self, index: int) -> Shard:
        """A shard's read side in this process (snapshots for in-process scans, counters)."""
        ...

    def get(self, address: bytes) -> bytes: ...

    def stamps_of(self, address: bytes) -> list[Stamp]: ...
