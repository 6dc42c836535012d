"""Writes the store could not commit: typed errors for them, and the store's record of the last one.

LMDB reports a full file system two ways: ``ENOSPC`` when a write finds no
free block (ext4, xfs), and ``EIO`` when a write comes up short (LMDB turns
a short ``pwrite`` into ``EIO``; tmpfs does that). A full map is
``MDB_MAP_FULL``, raised by a put or by the commit. Either way LMDB aborts
the transaction before it writes the meta page, so the environment is left
as the previous commit made it and stays usable: once there is room, the
next commit succeeds without reopening anything (measured with py-lmdb 3 on
ext4 and tmpfs; tests/store/test_store_full.py replays it).

``WriteHealth`` remembers the last refusal so that the daemon's readiness can
say why writes fail; a later successful commit clears it, and so does free
space growing by ``RECOVERY_MARGIN`` since a full-disk refusal (checked when
asked, so a probe sees a freed disk without waiting for a write).
"""

from __future__ import annotations

import errno as errnos
import os
import threading
import time
from dataclasses import dataclass

import lmdb

from .errors import StoreFull, StoreWriteFailed

# An EIO with less than this free on the file system is a short write for lack of space: the failed write
# used up what was left (measured: 0 bytes free after the failure, on tmpfs and ext4).
LOW_SPACE = 4 << 20
# A full-disk refusal is over once this much more is free than when it happened: room for a group
# commit of 128 full chunks.
RECOVERY_MARGIN = 1 << 20

_DISK_FULL = {errnos.ENOSPC, errnos.EDQUOT}


def disk_space(path: str) -> tuple[int, int] | None:
    """(bytes this process may still write, the size) of the file system holding ``path``; None if unknown."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    blocks = st.f_bfree if os.geteuid() == 0 else st.f_bavail  # root may use the reserved blocks
    return blocks * st.f_frsize, st.f_blocks * st.f_frsize


def free_bytes(path: str) -> int | None:
    """Bytes this process may still write on the file system holding ``path``; None if unknown."""
    space = disk_space(path)
    return None if space is None else space[0]


def _mib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / (1 << 20):.1f} MiB"


def size_text(n: int) -> str:
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):g} {unit}"
    return f"{n} bytes"


def classify(exc: BaseException, path: str, map_size: int | None = None) -> StoreWriteFailed | None:
    """The typed error for a failed write of the store at ``path``, or None if ``exc`` is something else."""
    if isinstance(exc, StoreWriteFailed):
        return exc
    if isinstance(exc, lmdb.MapFullError):
        size = f" ({size_text(map_size)})" if map_size else ""
        return StoreFull(
            "map_full",
            f"an LMDB map of the store at {path}{size} is full; open the store with a larger map size "
            "(--map-size) or free room in it (remove batches, lower the reserve capacity)",
            path=path,
        )
    if isinstance(exc, lmdb.Error):
        code, what = getattr(exc, "code", 0) or _code_in(str(exc)), str(exc)
    elif isinstance(exc, OSError):
        code, what = exc.errno or 0, f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
    else:
        return None
    if code in _DISK_FULL:
        free = free_bytes(path)
        return StoreFull("disk_full", f"the file system holding {path} is full ({what}; {_mib(free)} free)",
                         errno=code, path=path)
    if code == errnos.EIO:
        free = free_bytes(path)
        if free is not None and free < LOW_SPACE:
            return StoreFull(
                "disk_full",
                f"the file system holding {path} is full ({what}: a short write, {_mib(free)} free)",
                errno=code, path=path,
            )
        return StoreWriteFailed(f"write to the store at {path} failed: {what} ({_mib(free)} free)", errno=code, path=path)
    if code == errnos.EROFS:
        return StoreWriteFailed(f"write to the store at {path} failed: {what}", errno=code, path=path)
    return None


def _code_in(message: str) -> int:
    """The errno whose text ends an LMDB message ("mdb_txn_commit: No space left on device"), else 0.

    py-lmdb sets ``code`` on the errors it raises; this covers one built by hand or by another binding.
    """
    for code in (*_DISK_FULL, errnos.EIO, errnos.EROFS):
        if message.endswith(os.strerror(code)):
            return code
    return 0


@dataclass(frozen=True)
class Refusal:
    reason: str  # StoreFull.reason, or "io_error"
    message: str
    errno: int | None
    at: float  # Unix time of the refusal
    free: int | None  # bytes free on the file system right after it


class WriteHealth:
    """The write refusals of one store in force: until a commit succeeds, or a full disk gets room again.

    A full map is one shard's (its environment's path names it): only a
    commit in that shard clears it. The shards fill one at a time, so a small
    write committed in another said nothing about the full one, and readiness
    flapped back to ready while most uploads, which touch every shard, were
    still refused. Other refusals (a full disk, an I/O error, a full map whose
    shard is not known) are the store's, and any commit clears them.
    """

    def __init__(self, path: str, map_size: int | None = None) -> None:
        self.path = path
        self.map_size = map_size
        self._lock = threading.Lock()
        self._refusal: Refusal | None = None  # the store's
        self._full_shards: dict[str, Refusal] = {}  # environment path -> its full map's refusal

    def translate(self, exc: BaseException) -> StoreWriteFailed | None:
        """Classify ``exc``; when it is a failed write, record the refusal and return the typed error."""
        failure = classify(exc, self.path, self.map_size)
        if failure is not None:
            self.refuse(failure)
        return failure

    def refuse(self, failure: StoreWriteFailed) -> None:
        refusal = Refusal(failure.reason, str(failure), failure.errno, time.time(), free_bytes(self.path))
        with self._lock:
            if failure.reason == "map_full" and failure.path is not None and failure.path != self.path:
                self._full_shards[failure.path] = refusal
            else:
                self._refusal = refusal

    def committed(self, shard_path: str | None = None) -> None:
        """A write transaction was committed (in the shard at ``shard_path``): writes work (again) there."""
        if self._refusal is not None or (shard_path is not None and shard_path in self._full_shards):
            with self._lock:
                self._refusal = None
                if shard_path is not None:
                    self._full_shards.pop(shard_path, None)

    def current(self) -> Refusal | None:
        """The latest refusal still in force, if any (a full disk that has gained room no longer counts)."""
        refusal = self._store_refusal()
        with self._lock:
            shard = max(self._full_shards.values(), key=lambda r: r.at, default=None)
        if shard is not None and (refusal is None or shard.at >= refusal.at):
            return shard
        return refusal

    def _store_refusal(self) -> Refusal | None:
        refusal = self._refusal
        if refusal is None or refusal.reason != "disk_full" or refusal.free is None:
            return refusal
        free = free_bytes(self.path)
        if free is None or free < refusal.free + RECOVERY_MARGIN:
            return refusal
        with self._lock:
            if self._refusal is refusal:
                self._refusal = None
        return None
