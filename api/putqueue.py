"""Group commit of concurrent uploads.

Every store commit is synced to disk, so one commit per upload caps uploads at
the disk's sync rate however many clients there are. Uploads that arrive while
a write is under way wait in a queue and go to the store together, in one
``put_many`` (one synced commit per shard touched); each request is answered
only after the commit that holds its chunk, so an acknowledged chunk is
durable exactly as with single puts.

``put_many`` is all or nothing, so when a group fails (one bad stamp, a slot
conflict) its items are put again one by one and each request gets its own
outcome; a bad upload never fails a good one. A write the store cannot
commit (``StoreWriteFailed``: a full disk or map) is not retried: the items
of shards committed before the failure are answered as stored (they are,
whole), every other one gets the failure, and nothing more is written to a
full disk for that group.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor

from chunkstore.content.session import RESTAMPS
from chunkstore.store.errors import StampConflict, StoreWriteFailed
from chunkstore.store.store import ChunkStore, Holds, PutResult

MAX_GROUP = 128
Outcome = PutResult | BaseException  # each item's result, or the error its request raises


class PutQueue:
    def __init__(self, store: ChunkStore, executor: Executor, max_group: int = MAX_GROUP) -> None:
        self._store = store
        self._executor = executor
        self._max_group = max_group
        self._pending: list[tuple[bytes, bytes, bytes | None, Holds | None, asyncio.Future[PutResult]]] = []
        self._writer: asyncio.Task[None] | None = None
        self.groups = 0  # commits made (tests and metrics look at it)
        self.fallbacks = 0  # groups re-put one by one after an error

    async def put(
        self, data: bytes, stamp: bytes, address: bytes | None = None, holds: Holds | None = None
    ) -> PutResult:
        """Store one chunk; the store's PutResult once durable.

        Without ``address`` the store reads the data as a CAC or a SOC, whichever
        the stamp fits; with it, the data must be the chunk at that address
        (such items are put singly: ``put_many`` takes no address). ``holds``
        (a pin, the cache) is the upload's own, so such items are put singly too.
        """
        fut: asyncio.Future[PutResult] = asyncio.get_running_loop().create_future()
        if holds == Holds():
            holds = None
        self._pending.append((data, stamp, address, holds, fut))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.ensure_future(self._drain())
        return await asyncio.shield(fut)  # a client going away does not take the write back

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            group, self._pending = self._pending[: self._max_group], self._pending[self._max_group :]
            items = [(d, s, a, h) for d, s, a, h, _ in group]
            try:
                outcomes = await loop.run_in_executor(self._executor, self._write, items)
            except BaseException as exc:  # the pool is gone (shutdown): fail this group, keep draining
                outcomes = [exc] * len(group)
            self.groups += 1
            for (_, _, _, _, fut), outcome in zip(group, outcomes, strict=True):
                if fut.done():
                    continue
                if isinstance(outcome, BaseException):
                    fut.set_exception(outcome)
                else:
                    fut.set_result(outcome)

    def _write(self, items: list[tuple[bytes, bytes, bytes | None, Holds | None]]) -> list[Outcome]:
        out: list[Outcome | None] = [None] * len(items)
        plain = [i for i, (_, _, a, h) in enumerate(items) if a is None and h is None]
        if len(plain) > 1:
            try:
                for i, r in zip(plain, self._store.put_many([items[i][:2] for i in plain]), strict=True):
                    out[i] = r
            except StoreWriteFailed as exc:
                # The shards committed before the failure hold their items: those are stored.
                for k, i in enumerate(plain):
                    stored = exc.stored.get(k)
                    out[i] = stored if isinstance(stored, PutResult) else exc
            except Exception:
                self.fallbacks += 1  # someone's item is bad: give each its own answer below
        for i, (data, stamp, address, holds) in enumerate(items):
            if out[i] is not None:
                continue
            try:
                out[i] = self._store.put(data, stamp, address=address, holds=holds)
            except Exception as exc:
                out[i] = exc
        return [o for o in out if o is not None]  # every item has its outcome by now


async def put_restamping(
    puts: PutQueue,
    data: bytes,
    stamp: bytes,
    address: bytes,
    batch_id: bytes,
    restamp: Callable[[], Awaitable[bytes]],
    holds: Holds | None = None,
) -> PutResult:
    """Store a chunk the node stamped with its own batch ``batch_id``.

    A chunk the batch holds already is stamped again in its slot. When another
    upload of the same chunk commits a newer stamp there between our stamping
    and our commit, the slot rule refuses ours although the chunk is stored
    under this batch: ``restamp()`` (now newer) and put again, as the upload
    session does for its groups. Any other refusal is the caller's.
    """
    lost = 0
    while True:
        try:
            return await puts.put(data, stamp, address=address, holds=holds)
        except StampConflict as exc:
            lost += 1
            if exc.batch_id != batch_id or exc.holder != address or lost > RESTAMPS:
                raise
            stamp = await restamp()
