"""Which batches a sample leaves out: those valued below the minimum balance, and those the chain state expired."""

from __future__ import annotations

from .source import BatchRegistry, ReserveView


def below_balance_batches(batches: BatchRegistry, min_batch_balance: int | None) -> frozenset[bytes]:
    """Ids of the batches whose value is below ``min_batch_balance`` (none when it is None)."""
    if min_batch_balance is None:
        return frozenset()
    return frozenset(b.id for b in batches.list() if b.value < min_batch_balance)


def expired_batches(reserve: ReserveView) -> frozenset[bytes]:
    """Ids of the batches the stored chain state has expired that the eviction has not removed yet.

    The reference deletes an expired batch from its batch store when it stores the chain state
    (pkg/postage/batchstore/store.go, PutChainState -> cleanup), so from then on its sample finds
    no batch for their stamps; here the removal is the reserve worker's, after the chain state.
    """
    return frozenset(reserve.expired_batch_ids())
