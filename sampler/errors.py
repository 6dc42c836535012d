"""Typed errors of the reserve sampler."""

from __future__ import annotations

from typing import Any, Self

from chunkstore.swarm.errors import SwarmError


class InsufficientSample(SwarmError):
    """The neighbourhood holds fewer eligible chunks than a sample needs."""

    def __init__(self, found: int, needed: int = 16, stats: object | None = None) -> None:
        self.found = found
        self.needed = needed
        self.stats = stats  # the run's SampleStats: the daemon records failed runs too
        super().__init__(
            f"insufficient sample: found {found} eligible chunk(s) in the neighbourhood; {needed} are needed"
        )

    def __reduce__(self) -> tuple[type[Self], tuple[Any, ...]]:
        # Pickle by constructor arguments (the default would pass the message as ``found``).
        return (type(self), (self.found, self.needed, self.stats))


class SampleIntegrityError(SwarmError):
    """A produced sample breaks one of its invariants; names the failing item."""

    def __init__(self, index: int | None, reason: str) -> None:
        self.index = index
        self.reason = reason
        where = "sample" if index is None else f"sample item {index}"
        super().__init__(f"{where}: {reason}")

    def __reduce__(self) -> tuple[type[Self], tuple[Any, ...]]:
        return (type(self), (self.index, self.reason))


class SamplerWorkerError(SwarmError):
    """A phase-1 worker process failed; carries the shard and the worker's message."""

    def __init__(self, shard: int, message: str) -> None:
        self.shard = shard
        self.message = message
        super().__init__(f"sampler worker for shard {shard} failed: {message}")

    def __reduce__(self) -> tuple[type[Self], tuple[Any, ...]]:
        return (type(self), (self.shard, self.message))
