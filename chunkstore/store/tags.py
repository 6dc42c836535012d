"""Tags: the upload counters the reference node keeps per upload session (``/tags``).

A tag is a uid (1, 2, ... as the reference hands them out) with Bee's
counters: ``split`` (chunks the upload produced), ``seen`` (of those, already
stored here), ``stored``, ``sent`` and ``synced``, the root ``address`` once
the upload is done, and when it started. Records live in the meta env
(``tags``: uid u64 BE -> six u64 BE | address), the last uid in its info.

Uploads add to the counters after each group of chunks they store. Those
additions are gathered in memory and written at most every
``FLUSH_INTERVAL`` seconds (and by ``flush``, which an upload's end and the
store's close call), so an upload does not pay a synced meta commit per
group; every read here includes what is not written yet. A crash loses at
most the last interval's additions of a running upload: counters, never
chunks.
"""

from __future__ import annotations

import builtins
import struct
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace

from .envs import Database
from .errors import StoreReadOnly, UnknownTag
from .files import MetaEnv
from .layout import INFO_TAG_SEQ, read_u64, u64

FLUSH_INTERVAL = 1.0
COUNTERS = ("split", "seen", "stored", "sent", "synced")
_RECORD = struct.Struct(">6Q")  # the five counters, started ns; then the address (0, 32 or 64 bytes)
MAX_UID = (1 << 53) - 1  # JavaScript clients read uids as numbers


@dataclass(frozen=True)
class Tag:
    uid: int
    split: int = 0
    seen: int = 0
    stored: int = 0
    sent: int = 0
    synced: int = 0
    address: bytes = b""  # the upload's root reference, once done
    started_ns: int = 0

    def plus(self, delta: Counts) -> Tag:
        return replace(self, **{name: getattr(self, name) + getattr(delta, name) for name in COUNTERS})


@dataclass
class Counts:
    """Additions to a tag's counters."""

    split: int = 0
    seen: int = 0
    stored: int = 0
    sent: int = 0
    synced: int = 0

    def add(self, other: Counts) -> None:
        for name in COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(other, name))


TAG_RECORD_BYTES = 256  # generous: a tag record and the sequence update, with their leaf overhead


class TagStore:
    """The tags of one chunk store (``store.tags``); thread-safe."""

    def __init__(
        self,
        meta: MetaEnv,
        *,
        readonly: bool,
        writing: Callable[[], AbstractContextManager[None]],
        room: Callable[[int], None] | None = None,
    ) -> None:
        self._room = room  # the store's disk headroom check: new records grow the meta env as puts grow shards
        self._meta = meta
        self._readonly = readonly
        self._writing = writing
        self._lock = threading.Lock()
        self._pending: dict[int, Counts] = {}
        self._last_flush = time.monotonic()

    # Reads (with the additions not written yet).

    def get(self, uid: int) -> Tag:
        tag = self._read(uid)
        if tag is None:
            raise UnknownTag(uid)
        return tag

    def find(self, uid: int) -> Tag | None:
        return self._read(uid)

    def list(self, offset: int = 0, limit: int = 100) -> builtins.list[Tag]:
        """Tags in uid order, ``limit`` of them after skipping ``offset``."""
        db = self._meta.tags
        if db is None or limit <= 0:
            return []
        out: builtins.list[Tag] = []
        with self._lock, self._meta.env.begin() as txn:
            for i, (key, raw) in enumerate(txn.cursor(db=db).iternext()):
                if i < offset:
                    continue
                if len(out) >= limit:
                    break
                out.append(self._plus_pending(_decode(read_u64(key), bytes(raw))))
        return out

    def _read(self, uid: int) -> Tag | None:
        db = self._meta.tags
        if db is None or not 0 < uid <= MAX_UID:
            return None
        with self._lock, self._meta.env.begin() as txn:
            raw = txn.get(u64(uid), db=db)
            return None if raw is None else self._plus_pending(_decode(uid, bytes(raw)))

    def _plus_pending(self, tag: Tag) -> Tag:
        """The record with the additions not written yet; the caller holds the lock, so that the record
        and the additions are read on the same side of any flush."""
        delta = self._pending.get(tag.uid)
        return tag if delta is None else tag.plus(delta)

    # Changes.

    def create(self) -> Tag:
        """A new tag with the next uid, started now (durable when this returns)."""
        self._check_writable()
        meta = self._meta
        with self._writing(), meta.env.begin(write=True) as txn:
            if self._room is not None:
                self._room(TAG_RECORD_BYTES)
            raw = txn.get(INFO_TAG_SEQ, db=meta.info)
            uid = (read_u64(raw) if raw else 0) + 1
            tag = Tag(uid, started_ns=time.time_ns())
            txn.put(INFO_TAG_SEQ, u64(uid), db=meta.info)
            txn.put(u64(uid), _encode(tag), db=self._db())
        return tag

    def delete(self, uid: int) -> None:
        self._check_writable()
        with self._lock:
            self._pending.pop(uid, None)
        if not 0 < uid <= MAX_UID:
            raise UnknownTag(uid)
        with self._writing(), self._meta.env.begin(write=True) as txn:
            if not txn.delete(u64(uid), db=self._db()):
                raise UnknownTag(uid)

    def count(self, uid: int, delta: Counts) -> None:
        """Add to a tag's counters (written within ``FLUSH_INTERVAL``); a deleted tag ignores it."""
        with self._lock:
            self._pending.setdefault(uid, Counts()).add(delta)
            due = time.monotonic() - self._last_flush >= FLUSH_INTERVAL
        if due:
            self.flush()

    def done(self, uid: int, address: bytes | None) -> Tag:
        """An upload under the tag finished: write its counters and, if given, its root address."""
        self.flush()
        self._check_writable()
        with self._writing(), self._meta.env.begin(write=True) as txn:
            raw = txn.get(u64(uid), db=self._db())
            if raw is None:
                raise UnknownTag(uid)
            tag = _decode(uid, bytes(raw))
            if address:
                tag = replace(tag, address=bytes(address))
                txn.put(u64(uid), _encode(tag), db=self._db())
        return tag

    def flush(self) -> None:
        """Write every pending addition in one meta commit.

        Under the lock from taking the additions to the commit: a read in between would see them
        neither in memory nor written (counters going back). Reads and counts wait one commit,
        at most every ``FLUSH_INTERVAL``.
        """
        with self._lock:
            pending, self._pending = self._pending, {}
            self._last_flush = time.monotonic()
            if not pending or self._readonly:
                return
            try:
                with self._writing(), self._meta.env.begin(write=True) as txn:
                    for uid, delta in pending.items():
                        raw = txn.get(u64(uid), db=self._db())
                        if raw is not None:  # a tag deleted meanwhile takes no more counts
                            txn.put(u64(uid), _encode(_decode(uid, bytes(raw)).plus(delta)), db=self._db())
            except BaseException:
                self._pending = pending  # not written: kept for the next flush (nothing was added meanwhile)
                raise

    def _db(self) -> Database:
        db = self._meta.tags
        assert db is not None, "a writable open creates the version-2 databases"
        return db

    def _check_writable(self) -> None:
        if self._readonly:
            raise StoreReadOnly("the tag store was opened read-only")


def _encode(tag: Tag) -> bytes:
    return _RECORD.pack(tag.split, tag.seen, tag.stored, tag.sent, tag.synced, tag.started_ns) + tag.address


def _decode(uid: int, raw: bytes) -> Tag:
    split, seen, stored, sent, synced, started = _RECORD.unpack(raw[: _RECORD.size])
    return Tag(uid, split, seen, stored, sent, synced, bytes(raw[_RECORD.size :]), started)
