"""The sampler's view of the store's batch registry."""

from __future__ import annotations

from typing import Any

from chunkstore.swarm.errors import SwarmError


def find_batch(batches: Any, batch_id: bytes) -> Any | None:
    """The live batch with this id, or None (``find`` where the registry has it, else ``get``)."""
    find = getattr(batches, "find", None)
    if find is not None:
        return find(batch_id)
    try:
        return batches.get(batch_id)
    except (SwarmError, KeyError):
        return None


def below_balance_batches(batches: Any, min_batch_balance: int | None) -> frozenset[bytes]:
    """Ids of the batches whose value is below ``min_batch_balance`` (none when it is None)."""
    if min_batch_balance is None:
        return frozenset()
    return frozenset(b.id for b in batches.list() if b.value < min_batch_balance)
