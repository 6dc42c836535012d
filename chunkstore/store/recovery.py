"""Open-time reconciliation: finish what a crash interrupted.

Three kinds of work can be left half done (see chunkstore/store/writes.py,
batchstore.py and pins.py): a slot contest whose older holder was not yet
evicted (a ``pending`` record in the winner's shard), a batch removal (a
record marked removing), and a pin collection being built or taken apart (a
``pinning`` record). All are finished here, under the writer lock, before the
store accepts writes: the contest settled, the removal completed, the
collection taken apart (an interrupted pinning leaves nothing). None needs a
scan of the chunks.
"""

from __future__ import annotations

from collections.abc import Callable

from .batchstore import BatchStore
from .pins import PinStore
from .shard import Shard
from .writes import WriteSession


def resolve_pending(shards: list[Shard]) -> int:
    """Settle every recorded slot contest; returns how many slot keys were checked."""
    reader = WriteSession(shards, {})
    by_shard = {s: reader.pending_keys(s) for s in range(len(shards))}
    reader.abort()
    keys = {key for found in by_shard.values() for key in found}
    if not keys:
        return 0
    def settle(session: WriteSession) -> None:
        for key in sorted(keys):
            session.resolve(key)

    def forget(session: WriteSession) -> None:
        for s, found in by_shard.items():
            if found:
                session.clear_pending(s, found)

    run(shards, settle)
    # Only once the evictions are durable may the records that ask for them go.
    run(shards, forget)
    return len(keys)


def run(shards: list[Shard], work: Callable[[WriteSession], object]) -> None:
    """Do ``work`` in one write session and commit it (both phases), or abort it."""
    session = WriteSession(shards, {})
    try:
        work(session)
        session.commit()
    except BaseException:
        session.abort()
        raise


def recover(shards: list[Shard], batches: BatchStore, pins: PinStore) -> dict[str, int]:
    """Run every open-time repair; the caller holds the writer lock."""
    slots = resolve_pending(shards)
    removing = batches.removing()
    for batch_id in removing:
        batches.finish_removal(batch_id)
    collections = pins.finish_pending()
    return {"pending_slots": slots, "batch_removals": len(removing), "pin_collections": collections}
