"""Which batches a sample leaves out: those valued below the minimum balance."""

from __future__ import annotations

from .source import BatchRegistry


def below_balance_batches(batches: BatchRegistry, min_batch_balance: int | None) -> frozenset[bytes]:
    """Ids of the batches whose value is below ``min_batch_balance`` (none when it is None)."""
    if min_batch_balance is None:
        return frozenset()
    return frozenset(b.id for b in batches.list() if b.value < min_batch_balance)
