"""Process-wide sharing of LMDB environment handles.

LMDB must not open one environment twice in a process: its locks belong to
the (process, file) pair, so a second handle shares them and closing it drops
them (py-lmdb 3 refuses outright). Yet one process may well hold a
``ChunkStore`` and, say, a ``ShardReader`` of the same shard. Every env of the
store is therefore opened through here: one handle per data file per process,
reference-counted, closed with its last user. Handles never cross a fork: an
entry made by another pid is ignored (LMDB forbids using it in the child).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

import lmdb

if TYPE_CHECKING:
    # What Environment.open_db returns; py-lmdb names it only in its type stubs.
    Database: TypeAlias = lmdb._Database
else:
    Database = object

from .errors import StoreFormatError, StoreFull, StoreReadOnly
from .layout import MAX_READERS
from .lmdbmeta import shortfall
from .writefailures import classify

LOCK_NAME = "lock.mdb"
# What LMDB sizes its lock file to on 64-bit Linux: a header of three cache lines (MDB_txninfo) and a cache
# line per reader slot after the first (measured: 32,896 bytes for 512 readers).
LOCK_HEADER, LOCK_SLOT = 192, 64


@dataclass
class _Handle:
    env: lmdb.Environment
    readonly: bool
    pid: int
    users: int = 1


_lock = threading.Lock()
_handles: dict[tuple[int, int], _Handle] = {}


def _key(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(os.path.join(path, "data.mdb"))
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def acquire_env(path: str, *, readonly: bool, map_size: int, max_dbs: int) -> lmdb.Environment:
    """Open (or share) the environment at ``path`` with the settings every env of the store uses.

    Commits are fully synced (a put is durable when it returns); readahead is
    off because chunk reads are random and the data set outgrows RAM.
    """
    with _lock:
        key = _key(path)
        handle = _handles.get(key) if key is not None else None
        if handle is not None and handle.pid == os.getpid():
            if handle.readonly and not readonly:
                raise StoreReadOnly(f"{path} is already open read-only in this process; close that first")
            handle.users += 1
            return handle.env
        try:
            env = _open(path, readonly=readonly, map_size=map_size, max_dbs=max_dbs)
        except lmdb.Error as exc:
            if "already open" in str(exc):
                exc.add_note(
                    "this process inherited the handle through fork(); start workers with 'spawn' or "
                    "'forkserver', or open the store only after forking"
                )
            raise
        key = _key(path)
        if key is not None:
            _handles[key] = _Handle(env, readonly, os.getpid())
        return env


def _open(path: str, *, readonly: bool, map_size: int, max_dbs: int) -> lmdb.Environment:
    data_file = os.path.join(path, "data.mdb")
    if readonly and os.path.isfile(data_file) and os.path.getsize(data_file) == 0:
        # LMDB refuses it with "Bad file descriptor"; a writable open would make it a new, empty environment
        raise StoreFormatError(f"{data_file} is empty (0 bytes): the environment was lost; restore it from a backup")
    cut = shortfall(data_file)
    if cut is not None:
        raise StoreFormatError(cut)  # mapped, it would kill the process with SIGBUS at the first read past its end
    _allocate_lock_file(path, create=not readonly)  # before LMDB takes its locks on the file: see there
    try:
        return _open_lmdb(path, readonly=readonly, map_size=map_size, max_dbs=max_dbs)
    except (lmdb.InvalidError, lmdb.VersionMismatchError, lmdb.CorruptedError) as exc:
        # A file that is not (or no longer) an LMDB environment: no usable store, said as such.
        raise StoreFormatError(f"{path}: not a readable LMDB environment ({exc})") from None


def _allocate_lock_file(path: str, *, create: bool) -> None:
    """Give every page of the environment's lock file a block on disk before LMDB maps it.

    LMDB makes ``lock.mdb`` with ftruncate, a sparse file, maps it shared and writes it through the map: its
    header when the environment opens, a reader slot at each reader's first transaction. A page of the map
    the file system has no block for kills the process with SIGBUS (tmpfs and ext4 alike): every command
    died so on a full disk once a lock file was missing (a data dir restored without them, a new store).
    Allocated here, the full disk is a ``StoreFull`` naming the file. A lock file of full size whose header
    has its block (an older one) stays usable on a full disk: only its unused reader pages lack room, and
    they are allocated by the first open with space to spare.

    Only ever called before this process opens the environment: LMDB holds POSIX record locks on the lock
    file, and closing any descriptor of the file drops all of this process's locks on it, so that the next
    process to open the environment would take itself for the first and reset the reader table under the
    readers of this one (MDB_BAD_RSLOT).
    """
    lock = os.path.join(path, LOCK_NAME)
    try:
        if create:
            os.makedirs(path, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return  # a read-only file system or data dir, a missing env: LMDB's own open says what it makes of it
    try:
        st = os.fstat(fd)
        needed = LOCK_HEADER + (MAX_READERS - 1) * LOCK_SLOT
        if st.st_blocks * 512 >= st.st_size >= needed:
            return
        required = st.st_size < needed or st.st_blocks == 0  # LMDB will extend it, or write its header into a hole
        try:
            os.posix_fallocate(fd, 0, max(st.st_size, needed))
        except OSError as exc:
            failure = classify(exc, path)
            if required and isinstance(failure, StoreFull):
                raise StoreFull(
                    failure.reason, f"no room for LMDB's lock file {lock}: {failure}", errno=exc.errno, path=path
                ) from None
            # no fallocate on this file system, or an older lock file: left to LMDB, as before
    finally:
        os.close(fd)


def _open_lmdb(path: str, *, readonly: bool, map_size: int, max_dbs: int) -> lmdb.Environment:
    return lmdb.open(
        path,
        map_size=map_size,
        subdir=True,
        readonly=readonly,
        create=not readonly,
        sync=True,
        metasync=True,
        readahead=False,
        writemap=False,
        max_dbs=max_dbs,
        max_readers=MAX_READERS,
        max_spare_txns=8,
        lock=True,
    )


def release_env(env: lmdb.Environment) -> None:
    """Drop one user of ``env``; the last one closes it."""
    with _lock:
        for key, handle in list(_handles.items()):
            if handle.env is env:
                handle.users -= 1
                if handle.users > 0:
                    return
                del _handles[key]
                break
        env.close()
