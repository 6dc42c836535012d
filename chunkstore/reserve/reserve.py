"""The reserve as a node keeps it: overlay, storage radius, capacity, chain state.

A storage node keeps the chunks of its neighbourhood: those whose proximity
to its overlay address is at least the storage radius. The store holds:

- the **overlay** (meta info; given when opening, else the stored one, else
  generated once) and, per shard, stamp-entry counts per proximity bin to it
  (the store's bin counters, chunkstore/store/bins.py, synced to it here), so
  ``size`` and ``size_within_radius`` cost one read per shard;
- the **storage radius** (meta info, default 0): a put of a chunk closer
  than the radius is refused (``OutOfRadius``);
- the **chain state** (chainstate.py), which expires batches.

Sizes count stamp entries (one per chunk and stamp), as the reference node
counts its reserve. Capacity is ``capacity * 2^doubling`` (2^22 by default);
the committed depth is ``radius + doubling``.

Keeping the reserve within capacity, expiring batches and sweeping chunks
left outside a raised radius is eviction.py's work, and keeping the cache of
uploads outside the radius within its capacity cache.py's, both run in the
background by worker.py; ``maintain()`` runs them once in the caller's thread.
A pinned chunk outlives all of it: evictions drop its stamp entries, and the
store keeps its data while a pin holds it (chunkstore/store/pins.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from chunkstore.store import layout
from chunkstore.store.bins import shard_totals, sync_counters
from chunkstore.store.policy import AddressCheck
from chunkstore.store.store import ChunkStore
from chunkstore.swarm.constants import ADDRESS_SIZE, MAX_PO
from chunkstore.swarm.proximity import proximity

from . import eviction
from .cache import CachePolicy
from .chainstate import ChainState, decode_chainstate, encode_chainstate
from .errors import InvalidReserveOption, OutOfRadius
from .options import REASONS, ReserveOptions

Stop = Callable[[], bool]

# The reserve's keys in the store's meta info. Optional: a store without them reads as radius 0, no
# pending sweep, no chain state (and an overlay is generated), so they did not bump the format.
INFO_OVERLAY = layout.INFO_OVERLAY  # the node's overlay; each shard's bin counters name the one they count against
INFO_RADIUS = b"radius"  # u8
INFO_SWEEP = b"sweep"  # u8: a pending sweep evicts below this radius
INFO_CHAINSTATE = b"chainstate"  # the GET /chainstate JSON


@dataclass(frozen=True)
class ReserveStatus:
    overlay: bytes
    radius: int
    size: int  # stamp entries held
    size_within_radius: int  # of which at proximity >= radius
    capacity: int  # with doubling
    doubling: int
    bins: tuple[int, ...]  # entries per proximity bin 0..31

    @property
    def committed_depth(self) -> int:
        return self.radius + self.doubling


class Reserve:
    """The reserve of one open ``ChunkStore``: the store's policy (``store.reserve`` of a ``ReserveStore``).

    It implements ``chunkstore.store.policy.StorePolicy``: the store asks it to
    admit each write's addresses and tells it of writes, batch changes and
    closing.
    """

    def __init__(self, store: ChunkStore, overlay: bytes | None, options: ReserveOptions) -> None:
        options.validate()
        if overlay is not None and len(overlay) != ADDRESS_SIZE:
            raise InvalidReserveOption(f"overlay must be {ADDRESS_SIZE} bytes, got {len(overlay)}")
        self._store = store
        self.options = options
        self.evictions = dict.fromkeys(REASONS, 0)  # entries evicted by this process, by reason
        self.expired_batches = 0
        self.over_capacity_triggers = 0
        self.writes = 0  # puts committed by this process (the eviction yields to them)
        self.writes_seen = 0  # ... as of the eviction's last step
        self.recounted: list[int] = []  # shards whose bin counters the open had to recount
        self.cache = CachePolicy(store, options.cache_capacity)
        self._wake: Callable[[], None] | None = None
        self._closers: list[Callable[[], None]] = []
        stored = self._meta_get(INFO_OVERLAY)
        stored = bytes(stored) if stored is not None and len(stored) == ADDRESS_SIZE else None
        if store.readonly:
            self.overlay = bytes(overlay or stored or bytes(ADDRESS_SIZE))
            return
        store.cache.on_reads_full = self.wake
        self.overlay = bytes(overlay or stored or os.urandom(ADDRESS_SIZE))
        if self.overlay != stored:
            self._adopt_overlay(stored)
        self.recounted = sync_counters(store.shards, self.overlay)
        if self.radius < options.minimum_radius:
            self.set_radius(options.minimum_radius, sweep=True)

    # Meta info.

    def _meta_get(self, key: bytes) -> bytes | None:
        return self._store.read_info(key)

    def _meta_put(self, values: dict[bytes, bytes | None]) -> None:
        self._store.write_info(values)

    def _adopt_overlay(self, previous: bytes | None) -> None:
        """Record a new overlay; the chunks it leaves outside the radius are swept."""
        radius = self.radius
        changes: dict[bytes, bytes | None] = {INFO_OVERLAY: self.overlay}
        if previous is not None and radius > 0:
            changes[INFO_SWEEP] = bytes((radius,))
        self._meta_put(changes)

    def set_overlay(self, overlay: bytes) -> list[int]:
        """Switch to another overlay: recount the bins, sweep what falls outside the radius."""
        self._store.check_writable()
        if len(overlay) != ADDRESS_SIZE:
            raise InvalidReserveOption(f"overlay must be {ADDRESS_SIZE} bytes, got {len(overlay)}")
        overlay = bytes(overlay)
        with self._store.writing():
            previous, self.overlay = self.overlay, overlay
            if overlay != previous:
                self._adopt_overlay(previous)
            recounted = sync_counters(self._store.shards, overlay)
        self.wake()
        return recounted

    # Radius.

    @property
    def radius(self) -> int:
        raw = self._meta_get(INFO_RADIUS)
        return raw[0] if raw else 0

    @property
    def sweep_radius(self) -> int:
        """The radius a pending sweep evicts below (0: none pending)."""
        raw = self._meta_get(INFO_SWEEP)
        return raw[0] if raw else 0

    def set_radius(self, radius: int, *, sweep: bool = False) -> None:
        """Store a new storage radius (durable when this returns).

        With ``sweep``, every chunk outside the radius is evicted in the
        background (reason ``radius``; a durable marker keeps the sweep
        pending across a crash). Without it,
        as when the capacity eviction raises the radius, chunks already held
        outside stay until capacity needs their room, as in the reference.
        """
        self._store.check_writable()
        if isinstance(radius, bool) or not isinstance(radius, int) or not 0 <= radius <= MAX_PO:
            raise InvalidReserveOption(f"radius must be in 0..{MAX_PO}, got {radius!r}")
        with self._store.writing():
            marker = self.sweep_radius
            changes: dict[bytes, bytes | None] = {INFO_RADIUS: bytes((radius,))}
            if sweep and radius > marker:
                changes[INFO_SWEEP] = bytes((radius,))
            elif marker > radius:
                changes[INFO_SWEEP] = bytes((radius,)) if radius else None
            self._meta_put(changes)
        if sweep:
            self.wake()

    def clear_sweep(self, radius: int) -> None:
        """End a sweep to ``radius``, unless a newer one was asked for meanwhile."""
        with self._store.writing():
            if self.sweep_radius == radius:
                self._meta_put({INFO_SWEEP: None})

    # Sizes.

    def status(self) -> ReserveStatus:
        """Sizes from the per-shard counters (one read per shard), radius and capacity."""
        radius = self.radius
        size, bins = shard_totals(self._store.shards, self.overlay)
        return ReserveStatus(
            overlay=self.overlay,
            radius=radius,
            size=size,
            size_within_radius=sum(bins[radius:]),
            capacity=self.options.total_capacity,
            doubling=self.options.doubling,
            bins=tuple(bins),
        )

    def size(self) -> int:
        """Stamp entries held (LMDB's own counts; no scan)."""
        total = 0
        for shard in self._store.shards:
            with shard.env.begin() as txn:
                total += txn.stat(shard.stamps)["entries"]
        return total

    def size_within_radius(self) -> int:
        return self.status().size_within_radius

    @property
    def capacity(self) -> int:
        return self.options.total_capacity

    def over_capacity(self) -> int:
        """How many entries over capacity the reserve is (0 when within)."""
        return max(0, self.size() - self.options.total_capacity)

    # Admission (called by the store under its writer lock).

    def admission_check(self) -> AddressCheck | None:
        """A check refusing addresses outside the radius, or None when the radius is 0."""
        radius = self.radius
        if radius == 0:
            return None
        overlay = self.overlay

        def check(address: bytes) -> None:
            po = proximity(overlay, address)
            if po < radius:
                raise OutOfRadius(address, po, radius, overlay)

        return check

    def after_write(self) -> None:
        """A put committed: wake the eviction if the reserve or the cache went over capacity."""
        self.writes += 1
        if self._wake is not None and (self.over_capacity() or self.cache.over_capacity()):
            self._wake()

    def batches_changed(self) -> None:
        """A batch was added or changed: the worker checks whether the chain state expires it."""
        self.wake()

    # Chain state.

    @property
    def chainstate(self) -> ChainState | None:
        return decode_chainstate(self._meta_get(INFO_CHAINSTATE))

    def set_chainstate(self, state: ChainState) -> None:
        """Store the chain state (durable when this returns); expired batches go in the background."""
        self._store.check_writable()
        state.validate()
        self._meta_put({INFO_CHAINSTATE: encode_chainstate(state)})
        self.wake()

    def expired_batch_ids(self) -> list[bytes]:
        state = self.chainstate
        if state is None:
            return []
        return [b.id for b in self._store.batches.list() if state.expired(b.value)]

    # Background work.

    def wake(self) -> None:
        if self._wake is not None:
            self._wake()

    def attach(self, wake: Callable[[], None], close: Callable[[], None]) -> None:
        """Used by ``ReserveWorker``: how to wake it, and how to stop it before the store closes."""
        self._wake = wake
        self._closers.append(close)

    def detach(self, close: Callable[[], None]) -> None:
        self._wake = None
        if close in self._closers:
            self._closers.remove(close)

    def close(self) -> None:
        for close in list(self._closers):
            close()

    def maintain(self, stop: Stop | None = None) -> dict[str, int]:
        """Do the pending work once, in this thread: expire batches, finish a sweep, get within capacity,
        get the cache within its capacity (``done["cache"]``: cache entries dropped)."""
        self._store.check_writable()
        stop = stop or _never
        done = dict.fromkeys(REASONS, 0)
        done["expiry"] = eviction.expire_batches(self, stop)
        if not stop():
            done["radius"] = eviction.sweep(self, stop)
        if not stop():
            if self.over_capacity():
                # Counted where the eviction runs, as the reference counts the triggers its worker handles:
                # so an over-full reserve found at start-up or after an expiry counts, and puts that each
                # left it over capacity before one pass count once.
                self.over_capacity_triggers += 1
            done["capacity"] = eviction.unreserve(self, stop)
        done["cache"] = 0 if stop() else self.cache.evict(stop)
        return done

    def lower_radius_if_underpopulated(self) -> bool:
        """The reference's periodic check: below half capacity within the radius, step the radius down.

        The reference also waits for its syncing to be idle; this node does
        not sync, so it always is. Never below the minimum radius.
        """
        status = self.status()
        if status.radius > self.options.minimum_radius and status.size_within_radius < status.capacity * 5 // 10:
            self.set_radius(status.radius - 1)
            return True
        return False

    def count(self, reason: str, n: int) -> None:
        self.evictions[reason] += n

    @property
    def store(self) -> ChunkStore:
        return self._store


def _never() -> bool:
    return False
