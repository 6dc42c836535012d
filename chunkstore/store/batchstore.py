"""Postage batches known to the store, kept in the ``batches`` database of the meta env.

A stamp is only valid for a known batch, so puts read from here; removing a
batch removes every stamp of it from the shards and every chunk left without
a stamp. Removal first marks the record "removing" (a durable commit), then
purges the shards in bounded transactions, then deletes the record: a crash
part-way leaves the mark, and the next writable open finishes the purge.
The writer lock is held per purge transaction, not for the whole removal, so
uploads of other batches go on meanwhile (the marked batch's stamps are
already refused); a purge asked to stop part-way leaves the mark too.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass

import lmdb

from chunkstore.swarm.constants import BATCH_ID_SIZE, ETH_ADDRESS_SIZE, MAX_BATCH_DEPTH, MAX_BUCKET_DEPTH, UINT64_MAX

from .envs import Database
from .errors import BatchExists, InvalidBatch, StoreCorrupt, StoreReadOnly, UnknownBatch
from .layout import u64

_RECORD_VERSION = 1
_LIVE = 0
_REMOVING = 1
_FIXED = 1 + 1 + ETH_ADDRESS_SIZE + 1 + 1 + 1 + 8  # version, state, owner, depth, bucket depth, immutable, start

ShouldStop = Callable[[], bool]
AlsoWrite = Callable[[lmdb.Transaction], object]  # more writes in a batch change's own transaction


@dataclass(frozen=True)
class Batch:
    """A postage batch: who may stamp (owner) and how many slots (depth, bucket depth)."""

    id: bytes
    owner: bytes
    depth: int
    bucket_depth: int
    immutable: bool
    value: int
    start: int

    def validate(self) -> None:
        """Raise ``InvalidBatch`` naming the first out-of-range field."""
        if not isinstance(self.id, bytes) or len(self.id) != BATCH_ID_SIZE:
            raise InvalidBatch(f"batch id must be {BATCH_ID_SIZE} bytes, got {_describe(self.id)}")
        where = f"batch {self.id.hex()}"
        if not isinstance(self.owner, bytes) or len(self.owner) != ETH_ADDRESS_SIZE:
            raise InvalidBatch(f"{where}: owner must be {ETH_ADDRESS_SIZE} bytes, got {_describe(self.owner)}")
        if not _is_int(self.depth) or not 0 <= self.depth <= MAX_BATCH_DEPTH:
            raise InvalidBatch(f"{where}: depth {self.depth!r} outside 0..{MAX_BATCH_DEPTH}")
        top = min(self.depth, MAX_BUCKET_DEPTH)
        if not _is_int(self.bucket_depth) or not 0 <= self.bucket_depth <= top:
            raise InvalidBatch(f"{where}: bucket depth {self.bucket_depth!r} outside 0..{top} (min(depth, {MAX_BUCKET_DEPTH}))")
        if not isinstance(self.immutable, bool):
            raise InvalidBatch(f"{where}: immutable must be a bool, got {self.immutable!r}")
        if not _is_int(self.value) or self.value < 0:
            raise InvalidBatch(f"{where}: value {self.value!r} must be an integer >= 0")
        if not _is_int(self.start) or not 0 <= self.start <= UINT64_MAX:
            raise InvalidBatch(f"{where}: start {self.start!r} must be an integer in 0..2^64-1")


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _describe(v: object) -> str:
    return f"{len(v)} bytes" if isinstance(v, bytes | bytearray) else type(v).__name__


def update_problem(old: Batch, new: Batch) -> str | None:
    """Why ``new`` may not replace ``old`` (a top-up or dilution may), or None.

    The owner and bucket depth are fixed at creation and the depth only
    grows: anything else could turn stored stamps invalid behind the store's
    back. The one statement of the rule; an import checks its batches file by it too.
    """
    if new.owner != old.owner:
        return f"owner cannot change ({old.owner.hex()} -> {new.owner.hex()})"
    if new.bucket_depth != old.bucket_depth:
        return f"bucket depth cannot change ({old.bucket_depth} -> {new.bucket_depth})"
    if new.depth < old.depth:
        return f"depth cannot decrease ({old.depth} -> {new.depth})"
    return None


def encode_batch(batch: Batch, state: int = _LIVE) -> bytes:
    value = batch.value.to_bytes((batch.value.bit_length() + 7) // 8, "big")
    return (
        bytes((_RECORD_VERSION, state))
        + batch.owner
        + bytes((batch.depth, batch.bucket_depth, int(batch.immutable)))
        + u64(batch.start)
        + value
    )


def decode_batch(batch_id: bytes, raw: bytes) -> tuple[Batch, int]:
    """``(batch, state)`` of a stored record; ``StoreCorrupt`` if it cannot be read."""
    if len(raw) < _FIXED or raw[0] != _RECORD_VERSION or raw[1] not in (_LIVE, _REMOVING):
        raise StoreCorrupt(f"batch {bytes(batch_id).hex()}: unreadable record ({len(raw)} bytes)")
    o = 2 + ETH_ADDRESS_SIZE
    batch = Batch(
        id=bytes(batch_id),
        owner=bytes(raw[2:o]),
        depth=raw[o],
        bucket_depth=raw[o + 1],
        immutable=bool(raw[o + 2]),
        start=int.from_bytes(raw[o + 3 : o + 11], "big"),
        value=int.from_bytes(raw[o + 11 :], "big"),
    )
    return batch, raw[1]


class BatchStore:
    """add / update / get / remove / list of batches (one per chunk store).

    ``purge`` is the chunk store's callback that deletes a batch's stamps from
    all shards; ``write_lock`` its writer lock, held by every change here.
    """

    def __init__(
        self,
        env: lmdb.Environment,
        db: Database,
        *,
        readonly: bool,
        write_lock: Callable[[], AbstractContextManager[object]],
        purge: Callable[[bytes, ShouldStop | None], int],
        changed: Callable[[], None] | None = None,
        dropped: Callable[[lmdb.Transaction, bytes], None] | None = None,
    ) -> None:
        self._env = env
        self._db = db
        self._readonly = readonly
        self._write_lock = write_lock
        self._purge = purge
        self._changed = changed  # told after an add or update (the reserve checks expiry)
        self._dropped = dropped  # in the removal's last transaction: what else goes with the batch (its issuer)

    # Reads.

    def find(self, batch_id: bytes) -> Batch | None:
        """The live batch with this id, or None (also None while it is being removed)."""
        raw = self.raw(batch_id)
        return None if raw is None else self._live(batch_id, raw)

    def get(self, batch_id: bytes) -> Batch:
        batch = self.find(batch_id)
        if batch is None:
            raise UnknownBatch(batch_id)
        return batch

    def raw(self, batch_id: bytes) -> bytes | None:
        """The stored record bytes (the writer compares them to detect a concurrent change)."""
        if len(batch_id) != BATCH_ID_SIZE:
            return None
        with self._env.begin() as txn:
            return txn.get(bytes(batch_id), db=self._db)

    def list(self) -> builtins.list[Batch]:
        """Every live batch, in id order."""
        return builtins.list(self)

    def __iter__(self) -> Iterator[Batch]:
        with self._env.begin() as txn:
            items = builtins.list(txn.cursor(db=self._db).iternext())
        for key, raw in items:
            batch = self._live(key, raw)
            if batch is not None:
                yield batch

    def __contains__(self, batch_id: object) -> bool:
        return isinstance(batch_id, bytes | bytearray) and self.find(bytes(batch_id)) is not None

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def removing(self) -> builtins.list[bytes]:
        """Ids of batches whose removal was started but not finished."""
        with self._env.begin() as txn:
            return [bytes(k) for k, raw in txn.cursor(db=self._db).iternext() if decode_batch(k, raw)[1] == _REMOVING]

    @staticmethod
    def _live(batch_id: bytes, raw: bytes) -> Batch | None:
        batch, state = decode_batch(batch_id, raw)
        return batch if state == _LIVE else None

    # Changes.

    def add(self, batch: Batch, *, also: AlsoWrite | None = None) -> None:
        """Store a new batch; ``BatchExists`` if the id is taken. ``also`` writes what goes with the batch
        (its issuer) in the same transaction: both commit, or an exception from it leaves neither."""
        self._check_writable()
        batch.validate()
        with self._write_lock(), self._env.begin(write=True) as txn:
            if txn.get(batch.id, db=self._db) is not None:
                raise BatchExists(f"batch {batch.id.hex()} already exists")
            txn.put(batch.id, encode_batch(batch), db=self._db)
            if also is not None:
                also(txn)
        if self._changed is not None:
            self._changed()

    def update(self, batch: Batch, *, also: AlsoWrite | None = None) -> None:
        """Replace a batch's record (top-up, dilution), as ``update_problem`` allows; ``also`` as for ``add``."""
        self._check_writable()
        batch.validate()
        with self._write_lock(), self._env.begin(write=True) as txn:
            raw = txn.get(batch.id, db=self._db)
            old = None if raw is None else self._live(batch.id, raw)
            if old is None:
                raise UnknownBatch(batch.id)
            problem = update_problem(old, batch)
            if problem is not None:
                raise InvalidBatch(f"batch {batch.id.hex()}: {problem}")
            txn.put(batch.id, encode_batch(batch), db=self._db)
            if also is not None:
                also(txn)
        if self._changed is not None:
            self._changed()

    def remove(self, batch_id: bytes, should_stop: ShouldStop | None = None) -> int:
        """Remove a batch, its stamps, and chunks left without stamps; returns stamps removed.

        ``should_stop`` is asked between purge transactions; when it says
        yes, ``PurgeInterrupted`` is raised and the removal is left marked.
        A removal left unfinished (interrupted, or a write that failed for
        lack of space) is finished by calling this again.
        """
        self._check_writable()
        batch_id = bytes(batch_id)
        with self._write_lock(), self._env.begin(write=True) as txn:
            raw = txn.get(batch_id, db=self._db)
            if raw is None:
                raise UnknownBatch(batch_id)
            batch, state = decode_batch(batch_id, raw)
            if state == _LIVE:
                txn.put(batch_id, encode_batch(batch, _REMOVING), db=self._db)
            elif state != _REMOVING:
                raise UnknownBatch(batch_id)
        return self.finish_removal(batch_id, should_stop)

    def finish_removal(self, batch_id: bytes, should_stop: ShouldStop | None = None) -> int:
        """Purge the shards of a batch marked removing, then drop its record.

        The purge takes the writer lock per transaction; the record goes last,
        under the lock, so a crash before that leaves the mark for recovery.
        """
        removed = self._purge(batch_id, should_stop)
        with self._write_lock(), self._env.begin(write=True) as txn:
            txn.delete(batch_id, db=self._db)
            if self._dropped is not None:
                self._dropped(txn, batch_id)
        return removed

    def _check_writable(self) -> None:
        if self._readonly:
            raise StoreReadOnly("the batch store was opened read-only")
