"""The stamp issuers of batches the node owns: how many positions of each bucket are handed out.

Whoever stamps chunks for a batch must give every chunk of a bucket a
position no other chunk holds, or the later stamp evicts the earlier chunk
(the slot rule). The reference node keeps that count per batch in its stamp
issuer; here it lives in the meta env's ``issuers`` database:

    batch id (32)                  -> the issuer record (JSON: label, amount, blockNumber, createdAt)
    batch id (32) | "m"            -> the fullest bucket's count (u32 BE): the reference's utilization
    batch id (32) | bucket (4, BE) -> positions handed out in the bucket since it last wrapped (u32 BE),
                                      which is also the next position to hand out

**Durability.** :meth:`IssuerStore.reserve` commits the new counts (a synced
LMDB commit, under the store's writer lock) before it returns the positions,
and callers put the chunks only after that. A crash between the two wastes
the reserved positions (no chunk was stored in them) but can never hand a
position out twice, which would silently evict a chunk of the same batch.

**Full buckets.** An immutable batch refuses a chunk whose bucket is full
(``BucketFull``; nothing of that reservation is kept); a mutable one starts
the bucket over at position 0, as the reference's issuer does (the newer
stamps then replace the bucket's oldest chunks).

A batch's issuer goes when the batch is removed (``drop``, called inside the
removal's last transaction). The record is made on the first reservation if
nobody registered one (a batch posted with the node's own address as owner).
"""

from __future__ import annotations

import builtins
import json
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import lmdb

from chunkstore.swarm.constants import BATCH_ID_SIZE
from chunkstore.swarm.errors import BucketFull

from .batchstore import Batch
from .envs import Database
from .errors import StoreCorrupt, StoreReadOnly
from .layout import read_u32, u32

_MAX_KEY = b"m"
_RECORD_SIZE = BATCH_ID_SIZE
_MAX_SIZE = BATCH_ID_SIZE + len(_MAX_KEY)
_BUCKET_SIZE = BATCH_ID_SIZE + 4


@dataclass(frozen=True)
class IssuerInfo:
    """What ``GET /stamps`` shows of a node-owned batch besides the batch itself."""

    batch_id: bytes
    label: str
    amount: int  # per chunk, as paid when the batch was bought
    block_number: int
    created_ns: int
    utilization: int  # the fullest bucket's count (never decreases, as the reference's MaxBucketCount)


def _record(label: str, amount: int, block_number: int, created_ns: int) -> bytes:
    body = {"label": label, "amount": str(amount), "blockNumber": block_number, "createdAt": created_ns}
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def _parse_record(batch_id: bytes, raw: bytes | memoryview, utilization: int) -> IssuerInfo:
    try:
        body: dict[str, Any] = json.loads(bytes(raw))
        return IssuerInfo(
            batch_id=bytes(batch_id),
            label=str(body["label"]),
            amount=int(body["amount"]),
            block_number=int(body["blockNumber"]),
            created_ns=int(body["createdAt"]),
            utilization=utilization,
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreCorrupt(f"issuer of batch {bytes(batch_id).hex()}: unreadable record ({exc})") from None


class IssuerStore:
    """The node's issuers over the meta env (``db`` None: an older store opened read-only, so none)."""

    def __init__(
        self,
        env: lmdb.Environment,
        db: Database | None,
        *,
        readonly: bool,
        write_lock: Callable[[], AbstractContextManager[object]],
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self._env = env
        self._db = db
        self._readonly = readonly
        self._write_lock = write_lock
        self._clock = clock

    # Reads.

    def info(self, batch_id: bytes) -> IssuerInfo | None:
        """The issuer of ``batch_id``, or None when the node has none for it."""
        with self._env.begin() as txn:
            return self.info_in(txn, batch_id)

    def info_in(self, txn: lmdb.Transaction, batch_id: bytes) -> IssuerInfo | None:
        """``info`` as ``txn`` (a transaction of the meta env, e.g. the one ``register_in`` writes in) sees it."""
        if self._db is None or len(batch_id) != BATCH_ID_SIZE:
            return None
        return self._info(txn, bytes(batch_id))

    def _info(self, txn: lmdb.Transaction, batch_id: bytes) -> IssuerInfo | None:
        raw = txn.get(batch_id, db=self._db)
        if raw is None:
            return None
        top = txn.get(batch_id + _MAX_KEY, db=self._db)
        return _parse_record(batch_id, raw, 0 if top is None else read_u32(top))

    def list(self) -> builtins.list[IssuerInfo]:
        """Every issuer, in batch id order."""
        if self._db is None:
            return []
        out = []
        with self._env.begin() as txn:
            for key, raw in txn.cursor(db=self._db).iternext():
                if len(key) == _RECORD_SIZE:
                    top = txn.get(bytes(key) + _MAX_KEY, db=self._db)
                    out.append(_parse_record(bytes(key), raw, 0 if top is None else read_u32(top)))
        return out

    def bucket_counts(self, batch_id: bytes, bucket_depth: int) -> builtins.list[int]:
        """Positions handed out per bucket (since its last wrap), for all ``2^bucket_depth`` buckets."""
        counts = [0] * (1 << bucket_depth)
        if self._db is None:
            return counts
        batch_id = bytes(batch_id)
        with self._env.begin() as txn:
            cursor = txn.cursor(db=self._db)
            if not cursor.set_range(batch_id):
                return counts
            for key, raw in cursor.iternext():
                if not bytes(key[:BATCH_ID_SIZE]) == batch_id:
                    break
                if len(key) == _BUCKET_SIZE:
                    bucket = read_u32(key[BATCH_ID_SIZE:])
                    if bucket < len(counts):
                        counts[bucket] = read_u32(raw)
        return counts

    # Changes.

    def register(self, batch_id: bytes, *, label: str = "", amount: int = 0, block_number: int = 0) -> IssuerInfo:
        """Create the issuer of ``batch_id``, or update its label, amount and block of an existing one.

        Counts are kept: a re-registration (a top-up, a label change) never
        hands out positions again.
        """
        with self._write_lock(), self._env.begin(write=True) as txn:
            return self.register_in(txn, batch_id, label=label, amount=amount, block_number=block_number)

    def register_in(
        self, txn: lmdb.Transaction, batch_id: bytes, *, label: str = "", amount: int = 0, block_number: int = 0
    ) -> IssuerInfo:
        """``register`` inside the caller's write transaction of the meta env, under the writer lock it holds:
        a batch change and its issuer's record then commit together or not at all (``BatchStore.update``'s
        ``also``), so a crash between two commits cannot leave the batch's value and the amount paid apart."""
        self._check_writable()
        batch_id = bytes(batch_id)
        if len(batch_id) != BATCH_ID_SIZE:
            raise ValueError(f"batch id is {len(batch_id)} bytes; must be {BATCH_ID_SIZE}")
        assert self._db is not None  # a writable open creates the database
        old = self._info(txn, batch_id)
        created = self._clock() if old is None else old.created_ns
        txn.put(batch_id, _record(label, amount, block_number, created), db=self._db)
        info = self._info(txn, batch_id)
        assert info is not None
        return info

    def reserve(self, batch: Batch, buckets: Sequence[int]) -> builtins.list[int]:
        """Hand out the next position of each bucket in ``buckets`` (one per chunk, in order), durably.

        Returns the positions; they are committed (synced) before this returns.
        An immutable batch with a full bucket raises ``BucketFull`` and keeps
        nothing of the call.
        """
        self._check_writable()
        assert self._db is not None
        if not buckets:
            return []
        bound = 1 << (batch.depth - batch.bucket_depth)
        bucket_count = 1 << batch.bucket_depth
        with self._write_lock(), self._env.begin(write=True) as txn:
            raw_top = txn.get(batch.id + _MAX_KEY, db=self._db)
            top = 0 if raw_top is None else read_u32(raw_top)
            next_free: dict[int, int] = {}
            positions = []
            for bucket in buckets:
                if not 0 <= bucket < bucket_count:
                    raise ValueError(f"bucket {bucket} outside 0..{bucket_count - 1} of batch {batch.id.hex()}")
                position = next_free.get(bucket)
                if position is None:
                    raw = txn.get(batch.id + u32(bucket), db=self._db)
                    position = 0 if raw is None else read_u32(raw)
                if position >= bound:
                    if batch.immutable:
                        raise BucketFull(batch.id, bucket, bound)
                    position = 0
                positions.append(position)
                next_free[bucket] = position + 1
                top = max(top, position + 1)  # before a later wrap in this call lowers the count
            if txn.get(batch.id, db=self._db) is None:
                txn.put(batch.id, _record("", batch.value, batch.start, self._clock()), db=self._db)
            for bucket, count in next_free.items():
                txn.put(batch.id + u32(bucket), u32(count), db=self._db)
            txn.put(batch.id + _MAX_KEY, u32(top), db=self._db)
        return positions

    def drop(self, txn: lmdb.Transaction, batch_id: bytes) -> None:
        """Delete the issuer of ``batch_id`` inside the caller's write transaction (batch removal)."""
        if self._db is None:
            return
        batch_id = bytes(batch_id)
        cursor = txn.cursor(db=self._db)
        if not cursor.set_range(batch_id):
            return
        while bytes(cursor.key()[:BATCH_ID_SIZE]) == batch_id:
            if not cursor.delete():
                break

    def _check_writable(self) -> None:
        if self._readonly or self._db is None:
            raise StoreReadOnly("the issuer store was opened read-only")
