"""Issuing stamps of one batch: the next free position in each bucket (the reference's ``StampIssuer``).

A batch of depth ``d`` and bucket depth ``b`` has ``2^b`` buckets (a chunk's
bucket is the first ``b`` bits of its address) of ``2^(d-b)`` positions each.
Whoever stamps chunks must hand every chunk of a bucket a position no other
chunk holds, or the later stamp evicts the earlier chunk. The issuer keeps
that count. When a bucket is full, an immutable batch refuses
(:class:`BucketFull`) and a mutable one starts over at its first position,
overwriting its oldest chunks, as the reference node does.

``positions`` narrows the issuer to part of every bucket, so that several
issuers (threads, processes) can stamp for one batch without sharing state.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .constants import BATCH_ID_SIZE, MAX_BATCH_DEPTH, MAX_BUCKET_DEPTH
from .errors import BucketFull, InvalidStamp
from .signer import Signer
from .stamp import Stamp, bucket_of, sign_stamp

Clock = Callable[[], int]  # Unix nanoseconds


class StampIssuer:
    """Stamps for one batch, signed by its owner, each in a fresh slot."""

    def __init__(
        self,
        signer: Signer,
        batch_id: bytes,
        depth: int,
        bucket_depth: int,
        *,
        immutable: bool = True,
        positions: range | None = None,
        clock: Clock = time.time_ns,
    ) -> None:
        if len(batch_id) != BATCH_ID_SIZE:
            raise InvalidStamp(f"batch id is {len(batch_id)} bytes; must be {BATCH_ID_SIZE}")
        if not 0 <= bucket_depth <= min(depth, MAX_BUCKET_DEPTH) or depth > MAX_BATCH_DEPTH:
            raise InvalidStamp(f"bucket depth {bucket_depth} and depth {depth} do not make a batch")
        bound = 1 << (depth - bucket_depth)
        positions = range(bound) if positions is None else positions
        if positions.step != 1 or not 0 <= positions.start < positions.stop <= bound:
            raise InvalidStamp(f"positions {positions} are not a run inside 0..{bound - 1}")
        self.signer = signer
        self.batch_id = bytes(batch_id)
        self.depth = depth
        self.bucket_depth = bucket_depth
        self.immutable = immutable
        self.positions = positions
        self.clock = clock
        self._next: dict[int, int] = {}  # bucket -> next position to hand out

    def issued(self, bucket: int) -> int:
        """Positions of ``bucket`` handed out so far (since the last wrap of a mutable batch)."""
        return self._next.get(bucket, self.positions.start) - self.positions.start

    def next_slot(self, address: bytes) -> tuple[int, int]:
        """``(bucket, position)`` for a new chunk at ``address``; the slot counts as taken."""
        bucket = bucket_of(address, self.bucket_depth)
        return bucket, self._take(bucket)

    def _take(self, bucket: int) -> int:
        position = self._next.get(bucket, self.positions.start)
        if position >= self.positions.stop:
            if self.immutable:
                raise BucketFull(self.batch_id, bucket, len(self.positions))
            position = self.positions.start
        self._next[bucket] = position + 1
        return position

    def stamp(
        self,
        address: bytes,
        *,
        timestamp_ns: int | None = None,
        position: int | None = None,
        bucket: int | None = None,
    ) -> Stamp:
        """A stamp of ``address`` in the next free slot of its bucket, at the clock's time.

        ``position`` pins the slot instead, without taking one from the count,
        and ``bucket`` names another bucket than the address's: how tests
        contest a slot or forge a wrong bucket on purpose.
        """
        if bucket is None:
            bucket = bucket_of(address, self.bucket_depth)
        if position is None:
            position = self._take(bucket)
        ts = self.clock() if timestamp_ns is None else timestamp_ns
        return sign_stamp(self.signer, address, self.batch_id, bucket, position, ts)
