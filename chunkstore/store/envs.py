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

from .errors import StoreFormatError, StoreReadOnly
from .layout import MAX_READERS
from .lmdbmeta import shortfall


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
    try:
        return _open_lmdb(path, readonly=readonly, map_size=map_size, max_dbs=max_dbs)
    except (lmdb.InvalidError, lmdb.VersionMismatchError, lmdb.CorruptedError) as exc:
        # A file that is not (or no longer) an LMDB environment: no usable store, said as such.
        raise StoreFormatError(f"{path}: not a readable LMDB environment ({exc})") from None


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
