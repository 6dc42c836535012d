"""``NodeStamper``: postage stamps for the batches the node owns, signed with the node key.

The reference node stamps every chunk of an upload that names one of its
batches (``Swarm-Postage-Batch-Id``): the chunk gets the next free position
of its bucket (``chunkstore.store.issuers``, durable before the stamp is
handed out) and the current time, signed by the batch owner, which is the
node. A chunk the batch already stamped keeps its position and gets a newer
timestamp (the reference's stamper does the same; a feed update re-stored
under its old slot replaces the SOC), so uploading the same content twice
does not use the batch up twice.

A batch is the node's when its owner is the node key's Ethereum address.
Anything else is refused before a position is taken: ``UnknownBatch`` for a
batch the store does not know, ``NotNodeBatch`` for one owned by someone
else (the node cannot sign for it). Thread-safe: positions come from one
LMDB write transaction per call, timestamps from a lock-protected clock.

Concurrent uploads of the same chunk share its position, as the reference's
stamper (which records the chunk's stamp item when it stamps) makes them: a
call picks positions under its batch's lock and remembers what it gave each
address (``_given``, the latest 65,536: an address forgotten before its chunk
was stored only costs a position, as every upload did before). Without it,
two uploads of one chunk both found it absent from the store and took two
positions.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from chunkstore.store.batchstore import Batch
from chunkstore.store.store import ChunkStore
from chunkstore.swarm.constants import ADDRESS_SIZE
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.stamp import Stamp, bucket_of, sign_stamp, split_index

from .errors import NotNodeBatch

Clock = Callable[[], int]  # Unix nanoseconds

GIVEN_BOUND = 1 << 16  # positions remembered for addresses the store may not hold yet (about 6 MB)


class NodeStamper:
    """Signs stamps for node-owned batches; the one object every node-stamped write goes through.

    ``stamp(batch_id, addresses)`` is the method the upload paths (``/bytes``,
    ``/bzz``, ``/chunks`` and ``/soc`` with a batch id, feeds) call: it checks
    the batch, reserves positions durably, and returns one stamp per address,
    in order.
    """

    def __init__(self, store: ChunkStore, signer: Signer, *, clock: Clock = time.time_ns) -> None:
        self.store = store
        self.signer = signer
        self._clock = clock
        self._lock = threading.Lock()
        self._last_ns = 0
        self._batch_locks: dict[bytes, threading.Lock] = {}
        self._given: OrderedDict[tuple[bytes, bytes], tuple[int, int]] = OrderedDict()  # (batch, address) -> slot

    @property
    def owner(self) -> bytes:
        """The node's Ethereum address: the owner of every batch this stamper signs for."""
        return self.signer.address

    def owns(self, batch: Batch) -> bool:
        return batch.owner == self.owner

    def batch(self, batch_id: bytes) -> Batch:
        """The batch ``batch_id`` if the node may stamp for it; ``UnknownBatch`` or ``NotNodeBatch`` otherwise."""
        batch = self.store.batches.get(bytes(batch_id))
        if not self.owns(batch):
            raise NotNodeBatch(batch.id, batch.owner, self.owner)
        return batch

    def _timestamps(self, n: int) -> list[int]:
        # Strictly increasing across calls: a re-stamp must be newer than the stamp it replaces.
        with self._lock:
            start = max(self._clock(), self._last_ns + 1)
            self._last_ns = start + n - 1
        return list(range(start, start + n))

    def _held(self, address: bytes, batch_id: bytes) -> tuple[int, int] | None:
        """The (bucket, position) this batch already holds for ``address``: in the store, or given to an
        upload that may not have stored the chunk yet."""
        given = self._given.get((batch_id, address))
        if given is not None:
            return given
        for stamp in self.store.stamps_of(address):
            if stamp.batch_id == batch_id:
                return split_index(stamp.index)
        return None

    def _batch_lock(self, batch_id: bytes) -> threading.Lock:
        with self._lock:
            lock = self._batch_locks.get(batch_id)
            if lock is None:
                lock = self._batch_locks[batch_id] = threading.Lock()
            return lock

    def _remember(self, batch_id: bytes, slots: dict[bytes, tuple[int, int]]) -> None:
        for address, slot in slots.items():
            self._given[(batch_id, address)] = slot
        while len(self._given) > GIVEN_BOUND:
            self._given.popitem(last=False)

    def stamp(self, batch_id: bytes, addresses: Sequence[bytes]) -> list[Stamp]:
        """One stamp per address (in order) from batch ``batch_id``; positions are durable when it returns.

        Raises ``UnknownBatch``, ``NotNodeBatch``, or ``BucketFull`` (an
        immutable batch's bucket has no free position; then no position of
        this call is kept).
        """
        batch = self.batch(batch_id)
        for i, address in enumerate(addresses):
            if len(address) != ADDRESS_SIZE:
                raise ValueError(f"address {i} is {len(address)} bytes; must be {ADDRESS_SIZE}")
        with self._batch_lock(batch.id):  # held until the new positions are remembered; signing comes after
            slots: dict[bytes, tuple[int, int] | None] = {}  # the same chunk twice in one call shares one slot
            new: list[bytes] = []
            for address in map(bytes, addresses):
                if address not in slots:
                    slots[address] = held = self._held(address, batch.id)
                    if held is None:
                        new.append(address)
            positions = self.store.issuers.reserve(batch, [bucket_of(a, batch.bucket_depth) for a in new])
            given = {a: (bucket_of(a, batch.bucket_depth), p) for a, p in zip(new, positions, strict=True)}
            self._remember(batch.id, given)
        slots.update(given)
        stamps = []
        for address, ts in zip(map(bytes, addresses), self._timestamps(len(addresses)), strict=True):
            slot = slots[address]
            assert slot is not None  # every new address got a position above
            stamps.append(sign_stamp(self.signer, address, batch.id, slot[0], slot[1], ts))
        return stamps
