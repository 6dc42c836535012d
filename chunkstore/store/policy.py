"""The hook through which a policy layered on the store (the reserve) takes part in its writes.

The store calls a ``StorePolicy`` at four points and never imports what
implements it, so it knows nothing of radius, capacity or chain state. The
policy is registered when the store opens (``ChunkStore(..., policy=factory)``):
the factory (``store.PolicyFactory``) gets the store before open-time recovery runs, so whatever the
policy sets up (the reserve syncs its bin counters) is in place for every
write, recovery's included.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

AddressCheck = Callable[[bytes], None]


class StorePolicy(Protocol):
    def admission_check(self) -> AddressCheck | None:
        """Called under the writer lock before a write: a check that raises for an address the policy
        refuses, or None to admit every address. Taken once per write, applied to each chunk in it."""
        ...

    def after_write(self) -> None:
        """A write committed (the reserve wakes its eviction when over capacity)."""
        ...

    def batches_changed(self) -> None:
        """A batch was added or updated (the reserve checks expiry)."""
        ...

    def close(self) -> None:
        """The store is closing: stop whatever runs on it (background eviction) first."""
        ...


class OpenPolicy:
    """No policy: every address is admitted, nothing is told."""

    def admission_check(self) -> AddressCheck | None:
        return None

    def after_write(self) -> None:
        return None

    def batches_changed(self) -> None:
        return None

    def close(self) -> None:
        return None
