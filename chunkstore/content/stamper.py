"""``NodeStamper``: postage stamps for the batches the node owns, signed with the node key.

The reference node stamps every chunk of an upload that names one of its
batches (``Swarm-Postage-Batch-Id``): the chunk gets the next free position
of its bucket (``chunkstore.store.issuers``, durable before the stamp is
handed out) and the current time, signed by the batch owner, which is the
node. A chunk the batch already stamped keeps its position and gets a newer
timestamp (the reference's stamper does the same), so uploading the same
content twice does not use the batch up twice. "The same chunk" is the
reference's identity address (``pkg/storage/storage.go`` IdentityAddress,
which ``pkg/api/api.go`` hands its stamper): the address for a CAC,
``keccak(SOC address | wrapped address)`` for a SOC, so a SOC re-signed over
other content at its address is a new chunk and takes the next position
(the store then replaces the SOC's data; the old stamp stays as the
reference's reserve keeps it).

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
from chunkstore.store.errors import ChunkNotFound
from chunkstore.store.store import ChunkStore
from chunkstore.swarm.cac import cac_address
from chunkstore.swarm.constants import ADDRESS_SIZE, SOC_HEADER_SIZE
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.soc import soc_identity
from chunkstore.swarm.stamp import Stamp, bucket_of, sign_stamp, split_index

from .errors import NotNodeBatch

Clock = Callable[[], int]  # Unix nanoseconds

GIVEN_BOUND = 1 << 16  # positions remembered for addresses the store may not hold yet (about 14 MiB when full)
# Each remembered position is one ``batch id | identity`` key and one int (``position << 32 | bucket``): a
# 64-byte bytes and an int cost about 14 MiB at the bound, where a tuple of two 32-byte bytes holding a tuple
# of two ints cost 21 MiB (a soak of the daemon saw its memory climb with every chunk stamped, towards that).
_BUCKET_MASK = (1 << 32) - 1  # buckets are 32-bit at most (``bucket_of`` reads an address's first 4 bytes)


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
        self._given: OrderedDict[bytes, int] = OrderedDict()  # batch id | identity -> position << 32 | bucket

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

    def _held(self, address: bytes, identity: bytes, batch_id: bytes) -> tuple[int, int] | None:
        """The (bucket, position) this batch already holds for the chunk ``identity`` at ``address``: in the
        store, or given to an upload that may not have stored the chunk yet."""
        given = self._given.get(batch_id + identity)
        if given is not None:
            return given & _BUCKET_MASK, given >> 32
        stamps = [s for s in self.store.stamps_of(address) if s.batch_id == batch_id]
        if not stamps:
            return None
        if identity == address:  # a CAC: its data is fixed by its address
            return split_index(stamps[0].index)
        # A SOC: the batch holds the one stored here only if it is this very SOC (same wrapped chunk), under
        # the newest of the batch's stamps of the address, the one that stored the data last.
        try:
            stored = self.store.get(address)
        except ChunkNotFound:
            return None
        if soc_identity(address, cac_address(bytes(stored[SOC_HEADER_SIZE:]))) != identity:
            return None
        return split_index(max(stamps, key=lambda s: s.timestamp_ns).index)

    def _batch_lock(self, batch_id: bytes) -> threading.Lock:
        with self._lock:
            lock = self._batch_locks.get(batch_id)
            if lock is None:
                lock = self._batch_locks[batch_id] = threading.Lock()
            return lock

    def _remember(self, batch_id: bytes, slots: dict[bytes, tuple[int, int]]) -> None:
        for identity, (bucket, position) in slots.items():
            self._given[batch_id + identity] = position << 32 | bucket
        while len(self._given) > GIVEN_BOUND:
            self._given.popitem(last=False)

    def stamp(
        self, batch_id: bytes, addresses: Sequence[bytes], identities: Sequence[bytes] | None = None
    ) -> list[Stamp]:
        """One stamp per address (in order) from batch ``batch_id``; positions are durable when it returns.

        ``identities`` names each chunk as the reference's stamper knows it
        (``SOC.identity`` for a SOC; default: the addresses, right for CACs):
        a chunk the batch holds keeps its position, another SOC at the same
        address takes a new one.

        Raises ``UnknownBatch``, ``NotNodeBatch``, or ``BucketFull`` (an
        immutable batch's bucket has no free position; then no position of
        this call is kept).
        """
        batch = self.batch(batch_id)
        for i, address in enumerate(addresses):
            if len(address) != ADDRESS_SIZE:
                raise ValueError(f"address {i} is {len(address)} bytes; must be {ADDRESS_SIZE}")
        keys = list(map(bytes, addresses if identities is None else identities))
        if len(keys) != len(addresses) or any(len(k) != ADDRESS_SIZE for k in keys):
            raise ValueError(f"identities must be one {ADDRESS_SIZE}-byte identity per address")
        with self._batch_lock(batch.id):  # held until the new positions are remembered; signing comes after
            slots: dict[bytes, tuple[int, int] | None] = {}  # the same chunk twice in one call shares one slot
            new: list[tuple[bytes, bytes]] = []  # (identity, address)
            for address, identity in zip(map(bytes, addresses), keys, strict=True):
                if identity not in slots:
                    slots[identity] = held = self._held(address, identity, batch.id)
                    if held is None:
                        new.append((identity, address))
            positions = self.store.issuers.reserve(batch, [bucket_of(a, batch.bucket_depth) for _, a in new])
            given = {i: (bucket_of(a, batch.bucket_depth), p) for (i, a), p in zip(new, positions, strict=True)}
            self._remember(batch.id, given)
        slots.update(given)
        stamps = []
        for address, identity, ts in zip(map(bytes, addresses), keys, self._timestamps(len(addresses)), strict=True):
            slot = slots[identity]
            assert slot is not None  # every new chunk got a position above
            stamps.append(sign_stamp(self.signer, address, batch.id, slot[0], slot[1], ts))
        return stamps
