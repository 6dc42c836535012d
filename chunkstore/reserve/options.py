"""The reserve's settings: capacity, doubling, minimum radius, and how the eviction paces itself."""

from __future__ import annotations

from dataclasses import dataclass

from chunkstore.swarm.constants import (
    CACHE_CAPACITY,
    MAX_CAPACITY_DOUBLING,
    MAX_PO,
    RESERVE_CAPACITY,
    RESERVE_MIN_EVICT_COUNT,
)

from .errors import InvalidReserveOption

DEFAULT_EVICT_STEP = 500  # entries per eviction transaction: bounds how long a put may wait for the lock
DEFAULT_WAKEUP = 1800.0  # seconds between radius checks (the reference's reserve wake-up)
# Pause of the eviction after a transaction when puts came in meanwhile: a waiting put gets the writer
# lock and the interpreter lock (a busy Python thread holds the latter up to 5 ms) before the next step.
DEFAULT_EVICT_YIELD = 0.002
REASONS = ("capacity", "expiry", "radius")  # why entries were evicted


@dataclass(frozen=True)
class ReserveOptions:
    capacity: int = RESERVE_CAPACITY  # chunks, before doubling
    doubling: int = 0
    minimum_radius: int = 0  # the radius never goes below this; raising it sweeps
    min_evict_count: int = RESERVE_MIN_EVICT_COUNT
    evict_step: int = DEFAULT_EVICT_STEP
    wakeup: float = DEFAULT_WAKEUP
    evict_yield: float = DEFAULT_EVICT_YIELD
    cache_capacity: int = CACHE_CAPACITY  # chunks the cache of uploads outside the radius holds

    def validate(self) -> None:
        if isinstance(self.capacity, bool) or not isinstance(self.capacity, int) or self.capacity < 1:
            raise InvalidReserveOption(f"reserve capacity must be a positive integer, got {self.capacity!r}")
        if not isinstance(self.doubling, int) or not 0 <= self.doubling <= MAX_CAPACITY_DOUBLING:
            raise InvalidReserveOption(f"capacity doubling must be in 0..{MAX_CAPACITY_DOUBLING}, got {self.doubling!r}")
        if not isinstance(self.minimum_radius, int) or not 0 <= self.minimum_radius <= MAX_PO:
            raise InvalidReserveOption(f"minimum radius must be in 0..{MAX_PO}, got {self.minimum_radius!r}")
        if self.min_evict_count < 1 or self.evict_step < 1:
            raise InvalidReserveOption("min_evict_count and evict_step must be at least 1")
        if not self.wakeup > 0:
            raise InvalidReserveOption(f"wakeup must be positive, got {self.wakeup!r}")
        if isinstance(self.cache_capacity, bool) or not isinstance(self.cache_capacity, int) or self.cache_capacity < 0:
            raise InvalidReserveOption(f"cache capacity must be a non-negative integer, got {self.cache_capacity!r}")
        if not self.evict_yield >= 0:
            raise InvalidReserveOption(f"evict_yield must be >= 0, got {self.evict_yield!r}")

    @property
    def total_capacity(self) -> int:
        return self.capacity << self.doubling
