"""Typed errors of the chunk store and the batch store.

They extend the primitives' ``SwarmError`` family so one ``except SwarmError``
in the HTTP layer covers every refusal, and each message names the offending
address, batch or slot so a log line is enough to find it.
"""

from __future__ import annotations

from chunkstore.swarm.errors import InvalidStamp, SwarmError


class ChunkNotFound(SwarmError, KeyError):
    """No chunk is stored at the address (also a ``KeyError`` for mapping-style callers)."""

    def __init__(self, address: bytes) -> None:
        self.address = bytes(address)
        super().__init__(f"chunk {self.address.hex()} not found")

    def __str__(self) -> str:
        # KeyError would otherwise render the message with quotes around it.
        return str(self.args[0])


class BufferTooSmall(SwarmError):
    """``get_into`` was given a buffer shorter than the chunk; nothing was written."""

    def __init__(self, address: bytes, needed: int, got: int) -> None:
        self.address = bytes(address)
        self.needed = needed
        self.got = got
        super().__init__(f"chunk {self.address.hex()} is {needed} bytes; the buffer holds only {got}")


class UnknownBatch(InvalidStamp):
    """The stamp (or a batch operation) names a batch the store does not know.

    A stamp of an unknown batch is one way of being an invalid stamp, hence the base class.
    """

    def __init__(self, batch_id: bytes) -> None:
        self.batch_id = bytes(batch_id)
        super().__init__(f"unknown batch {self.batch_id.hex()}")


class InvalidBatch(SwarmError):
    """A batch record has an out-of-range field or an update changes what may not change."""


class BatchExists(InvalidBatch):
    """``add`` of a batch id that is already stored."""


class StampConflict(SwarmError):
    """The batch slot is held under a stamp at least as new as the offered one.

    The reference node's "overwrite newer chunk" refusal.
    """

    def __init__(
        self, batch_id: bytes, bucket: int, position: int, holder: bytes, held_ts: int, offered_ts: int, why: str = ""
    ) -> None:
        self.batch_id = bytes(batch_id)
        self.bucket = bucket
        self.position = position
        self.holder = bytes(holder)
        self.held_ts = held_ts
        self.offered_ts = offered_ts
        rel = "equal to" if offered_ts == held_ts else "older than"
        detail = why or f"stamp timestamp {offered_ts} is {rel} the held stamp's {held_ts}"
        super().__init__(
            f"slot (batch {self.batch_id.hex()}, bucket {bucket}, position {position}) is held by chunk "
            f"{self.holder.hex()}: {detail}"
        )


class StoreFormatError(SwarmError):
    """The directory is not a chunk store this build can open (missing, other format version)."""


class StoreCorrupt(SwarmError):
    """On-disk state contradicts itself in a way open() cannot repair (run ``chunkstore verify``)."""


class StoreReadOnly(SwarmError):
    """A write was attempted on a store opened with ``readonly=True``."""


class PurgeInterrupted(Exception):  # a control-flow signal, not a SwarmError: nothing was wrong
    """A batch purge stopped part-way on request; the "removing" mark stays for the next open to finish."""


class StoreWriteFailed(SwarmError):
    """A write could not be committed; the transaction was aborted, so nothing of it is stored.

    ``reason`` is a short machine-readable cause (``io_error`` here; see
    ``StoreFull``), ``errno`` the OS error number when there is one, ``path``
    the environment that failed. Reads are unaffected.
    """

    reason = "io_error"

    def __init__(self, message: str, *, errno: int | None = None, path: str | None = None) -> None:
        self.errno = errno
        self.path = path
        # put_many: the items stored anyway (index -> PutResult), those of shards committed before the failure
        self.stored: dict[int, object] = {}
        super().__init__(message)


class StoreFull(StoreWriteFailed):
    """No space left for the store: the file system is full (``disk_full``) or an LMDB map is (``map_full``).

    Writes succeed again once space is freed (or the map is made larger),
    without reopening the store.
    """

    def __init__(self, reason: str, message: str, *, errno: int | None = None, path: str | None = None) -> None:
        if reason not in FULL_REASONS:
            raise ValueError(f"unknown StoreFull reason {reason!r}")
        self.reason = reason
        super().__init__(message, errno=errno, path=path)


FULL_REASONS = ("disk_full", "map_full")


__all__ = [
    "BatchExists",
    "BufferTooSmall",
    "ChunkNotFound",
    "InvalidBatch",
    "PurgeInterrupted",
    "StampConflict",
    "StoreCorrupt",
    "StoreFormatError",
    "StoreFull",
    "StoreReadOnly",
    "StoreWriteFailed",
    "UnknownBatch",
]


class UnknownPin(SwarmError, KeyError):
    """No pin with this root reference (or an unpinning already under way removed it)."""

    def __init__(self, reference: bytes) -> None:
        self.reference = bytes(reference)
        super().__init__(f"no pin of reference {self.reference.hex()}")

    def __str__(self) -> str:
        return str(self.args[0])


class PinAborted(SwarmError):
    """A pin collection being built was ended meanwhile (its build was abandoned, or a writable open
    found it unfinished and rolled it back); nothing of it is kept."""


class UnknownTag(SwarmError, KeyError):
    """No tag with this uid."""

    def __init__(self, uid: int) -> None:
        self.uid = uid
        super().__init__(f"tag {uid} not found")

    def __str__(self) -> str:
        return str(self.args[0])
