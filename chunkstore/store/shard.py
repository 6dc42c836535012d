"""One shard: an LMDB environment holding chunk data and its stamp index, read side.

``ShardReader`` is the public per-process reader (the sampler opens one per
worker process, after any fork: LMDB handles must not cross a fork). The
chunk store uses the same ``Shard`` class for its own reads; its writes live
in chunkstore/store/writes.py.

Reads run in LMDB read transactions: each call sees one committed snapshot of
the shard, never a half-applied put.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from contextlib import suppress
from typing import Any

import lmdb

from chunkstore.swarm.constants import ADDRESS_SIZE
from chunkstore.swarm.stamp import Stamp

from .envs import Database, acquire_env, release_env
from .errors import BufferTooSmall, ChunkNotFound, StoreFormatError
from .layout import (
    DB_CACHE,
    DB_CHUNKS,
    DB_INFO,
    DB_LRU,
    DB_PENDING,
    DB_PINREFS,
    DB_PINSETS,
    DB_SLOTS,
    DB_STAMPS,
    DB_TAILS,
    FORMAT_VERSION,
    HEAD_SIZE,
    INFO_BYTES,
    INFO_FORMAT,
    INFO_MAGIC,
    INFO_SHARD,
    INFO_SHARDS,
    MAGIC,
    READABLE_FORMATS,
    SHARD_DBS,
    V1_SHARD_DBS,
    neighbourhood_range,
    read_u32,
    read_u64,
    shard_path,
)
from .mapsize import ADOPT_RECORDED
from .upgrade import open_databases

Entry = tuple[bytes, int, bytes, int]  # (address, chunk_type, batch_id, stamp timestamp ns)
Buffer = bytearray | memoryview

_TYPE_TS = struct.Struct(">BQ")


def check_info(env: lmdb.Environment, db: Database, where: str) -> dict[bytes, bytes]:
    """Read an ``info`` database and refuse anything but this build's format."""
    with env.begin() as txn:
        info = dict(txn.cursor(db=db).iternext())
    magic = info.get(INFO_MAGIC)
    if magic != MAGIC:
        raise StoreFormatError(f"{where}: not a chunk store environment (magic {magic!r})")
    raw = info.get(INFO_FORMAT)
    version = read_u32(raw) if raw is not None and len(raw) == 4 else None
    if version not in READABLE_FORMATS:
        raise StoreFormatError(
            f"{where}: on-disk format version {version} is not supported; this build reads versions "
            f"{', '.join(map(str, READABLE_FORMATS))} and writes version {FORMAT_VERSION}"
        )
    return info


class Shard:
    """Read access to one shard environment (also the base of the writer's view)."""

    def __init__(self, root: str | os.PathLike[str], index: int, *, readonly: bool, map_size: int) -> None:
        self.index = index
        self.path = shard_path(root, index)
        if not os.path.isfile(os.path.join(self.path, "data.mdb")):
            raise StoreFormatError(f"{self.path}: shard {index} is missing")
        self._closed = False
        self.env = acquire_env(self.path, readonly=readonly, map_size=map_size, max_dbs=len(SHARD_DBS))
        try:
            try:
                info_db = self.env.open_db(DB_INFO, create=False)
            except lmdb.NotFoundError:
                raise StoreFormatError(f"{self.path}: shard {index} lacks its databases") from None
            info = check_info(self.env, info_db, self.path)
            added = [name for name in SHARD_DBS if name not in V1_SHARD_DBS]
            dbs = open_databases(self.env, SHARD_DBS, added, readonly=readonly, where=self.path)
        except BaseException:
            release_env(self.env)
            raise
        self.info_db = info_db
        self.chunks = _present(dbs[DB_CHUNKS])
        self.tails = _present(dbs[DB_TAILS])
        self.stamps = _present(dbs[DB_STAMPS])
        self.slots = _present(dbs[DB_SLOTS])
        self.pending = _present(dbs[DB_PENDING])
        # None only in a version-1 shard opened read-only: then they are empty (upgrade.py).
        self.pinrefs: Database | None = dbs[DB_PINREFS]
        self.pinsets: Database | None = dbs[DB_PINSETS]
        self.cache: Database | None = dbs[DB_CACHE]
        self.lru: Database | None = dbs[DB_LRU]
        self.shard_count = read_u32(info[INFO_SHARDS])
        if read_u32(info[INFO_SHARD]) != index:
            release_env(self.env)
            raise StoreFormatError(f"{self.path}: environment says it is shard {read_u32(info[INFO_SHARD])}, not {index}")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            release_env(self.env)

    def db(self, db: Database | None) -> Database:
        """One of the version-2 databases, which a writer always has (writable opens create them)."""
        if db is None:
            raise StoreFormatError(f"{self.path}: a version-1 shard opened read-only has no pin or cache index")
        return db

    # Everything below opens its own short read transaction.

    def read_into(self, address: bytes, buf: Buffer) -> int:
        with self.env.begin(buffers=True) as txn:
            return txn_read_into(txn, self, address, buf)

    def get(self, address: bytes) -> bytes:
        with self.env.begin(buffers=True) as txn:
            data = txn_load(txn, self, address)
        if data is None:
            raise ChunkNotFound(address)
        return data

    def has(self, address: bytes) -> bool:
        with self.env.begin(buffers=True) as txn:
            return txn.get(address, db=self.chunks) is not None

    def stamps_of(self, address: bytes) -> list[Stamp]:
        with self.env.begin() as txn:
            return txn_stamps(txn, self, address)

    def stamp_entries(self, address: bytes) -> list[tuple[int, Stamp]]:
        """``(chunk type byte, stamp)`` of every stamp entry of ``address``, in key order."""
        with self.env.begin() as txn:
            return txn_stamp_entries(txn, self, address)

    def iter_range(self, lo: bytes = b"", hi: bytes | None = None) -> Iterator[Entry]:
        """Index entries with ``lo <= address < hi`` (prefixes allowed), ascending, lazily."""
        with self.env.begin() as txn:
            yield from txn_iter_range(txn, self, lo, hi)

    def iter_neighbourhood(self, anchor: bytes, depth: int) -> Iterator[Entry]:
        rng = neighbourhood_range(anchor, depth)
        if rng is not None:
            yield from self.iter_range(*rng)

    def snapshot(self) -> ShardSnapshot:
        return ShardSnapshot(self)

    def counts(self) -> dict[str, int]:
        with self.env.begin() as txn:
            raw = txn.get(INFO_BYTES, db=self.info_db)
            return {
                "chunks": txn.stat(self.chunks)["entries"],
                "stamps": txn.stat(self.stamps)["entries"],
                "slots": txn.stat(self.slots)["entries"],
                "pending": txn.stat(self.pending)["entries"],
                "bytes": read_u64(raw) if raw else 0,
                "pinned": entries(txn, self.pinrefs),
                "cached": entries(txn, self.cache),
            }

    def is_held(self, address: bytes) -> bool:
        """Whether a pin or a cache entry keeps the chunk (besides any stamp)."""
        with self.env.begin(buffers=True) as txn:
            return txn_held(txn, self, address)

    def map_room(self) -> int:
        """Bytes of this environment's map not holding data: past the file's end, plus pages freed inside it.

        The pages in use are the databases' own counts (branch, leaf and
        overflow pages of each, the main database and the two meta pages);
        the free list's own pages are not counted, nor is whether a freed
        page is still held by a reader, so this is a little generous.
        """
        info = self.env.info()
        end, free_inside = self.file_pages()
        return info["map_size"] - end + free_inside

    def file_pages(self) -> tuple[int, int]:
        """(bytes of the file's pages up to its last one, bytes of those that hold no data: pages freed
        inside it, as generous as ``map_room``)."""
        info = self.env.info()
        with self.env.begin() as txn:
            psize = txn.stat()["psize"]
            used = 2
            dbs = (self.info_db, self.chunks, self.tails, self.stamps, self.slots, self.pending,
                   self.pinrefs, self.pinsets, self.cache, self.lru)
            for db in (None, *(d for d in dbs if d is not None)):
                st = txn.stat(db) if db is not None else txn.stat()
                used += st["branch_pages"] + st["leaf_pages"] + st["overflow_pages"]
        end = (info["last_pgno"] + 1) * psize
        return end, max(0, end - used * psize)


class ShardSnapshot:
    """A read transaction on a shard: every call sees the same committed state.

    Use as a context manager; views returned by ``view`` die with it.
    """

    def __init__(self, shard: Shard) -> None:
        self.shard = shard
        self.txn = shard.env.begin(buffers=True)
        self._scratch = bytearray(HEAD_SIZE + 256)

    def __enter__(self) -> ShardSnapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with suppress(lmdb.Error):
            self.txn.abort()

    def view(self, address: bytes) -> memoryview:
        """The chunk data without copying when stored in one piece.

        A chunk longer than the head size is stored in two pieces; it is then
        joined in a scratch buffer owned by the snapshot, so the view is only
        valid until the next ``view`` call or the end of the snapshot.
        """
        head = self.txn.get(address, db=self.shard.chunks)
        if head is None:
            raise ChunkNotFound(address)
        if len(head) < HEAD_SIZE:
            return head
        tail = self.txn.get(address, db=self.shard.tails)
        if tail is None:
            return head
        n = HEAD_SIZE + len(tail)
        scratch = memoryview(self._scratch)
        scratch[:HEAD_SIZE] = head
        scratch[HEAD_SIZE:n] = tail
        return scratch[:n]

    def read_into(self, address: bytes, buf: Buffer) -> int:
        return txn_read_into(self.txn, self.shard, address, buf)

    def get(self, address: bytes) -> bytes:
        data = txn_load(self.txn, self.shard, address)
        if data is None:
            raise ChunkNotFound(address)
        return data

    def stamps_of(self, address: bytes) -> list[Stamp]:
        return txn_stamps(self.txn, self.shard, address)

    def stamp_entries(self, address: bytes) -> list[tuple[int, Stamp]]:
        return txn_stamp_entries(self.txn, self.shard, address)

    def iter_range(self, lo: bytes = b"", hi: bytes | None = None) -> Iterator[Entry]:
        return txn_iter_range(self.txn, self.shard, lo, hi)

    def iter_neighbourhood(self, anchor: bytes, depth: int) -> Iterator[Entry]:
        rng = neighbourhood_range(anchor, depth)
        return iter(()) if rng is None else txn_iter_range(self.txn, self.shard, *rng)


class ShardReader(Shard):
    """Read-only access to one shard of the store at ``path``, for a worker process.

    Opens only that shard's environment (with normal LMDB reader locking) and
    checks its format version. Methods: ``iter_range(lo, hi)``,
    ``iter_neighbourhood(anchor, depth)``, ``read_into(address, buf)``,
    ``get``, ``has``, ``stamps_of``, ``stamp_entries`` (with the chunk type
    byte of each entry), and ``snapshot()`` for a read transaction
    with zero-copy ``view(address)``.
    """

    def __init__(self, path: str | os.PathLike[str], shard_index: int, *, map_size: int = ADOPT_RECORDED) -> None:
        super().__init__(path, shard_index, readonly=True, map_size=map_size)

    def __enter__(self) -> ShardReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# Transaction-level helpers shared by readers, snapshots and the writer.


def writable_bytes(buf: Buffer) -> memoryview:
    """``buf`` as a writable 1-D view of its bytes, so that its capacity is counted in bytes.

    A numpy array of uint32 or of two dimensions has fewer items than bytes;
    a read-only or non-contiguous multi-byte buffer is refused before any read.
    """
    out = buf if type(buf) is memoryview else memoryview(buf)
    if out.readonly:
        raise TypeError(f"get_into needs a writable buffer; {type(buf).__name__} is read-only")
    if out.ndim != 1 or out.itemsize != 1:
        if not out.c_contiguous:
            raise TypeError("get_into needs a contiguous buffer, or a one-dimensional one of bytes")
        out = out.cast("B")
    return out


def txn_read_into(txn: lmdb.Transaction, shard: Shard, address: bytes, buf: Buffer) -> int:
    """Copy the chunk at ``address`` into ``buf``; all-or-nothing on a short buffer."""
    out = writable_bytes(buf)
    head = txn.get(address, db=shard.chunks)
    if head is None:
        raise ChunkNotFound(address)
    n = len(head)
    tail = txn.get(address, db=shard.tails) if n == HEAD_SIZE else None
    total = n if tail is None else n + len(tail)
    if len(out) < total:
        raise BufferTooSmall(address, total, len(out))
    # Assigning through a memoryview copies straight from the map; a bytearray
    # slice assignment would build a temporary copy first.
    out[:n] = head
    if tail is not None:
        out[n:total] = tail
    return total


def txn_load(txn: lmdb.Transaction, shard: Shard, address: bytes) -> bytes | None:
    head = txn.get(address, db=shard.chunks)
    if head is None:
        return None
    if len(head) == HEAD_SIZE:
        tail = txn.get(address, db=shard.tails)
        if tail is not None:
            return b"".join((head, tail))
    return bytes(head)


def txn_stamps(txn: lmdb.Transaction, shard: Shard, address: bytes) -> list[Stamp]:
    return [stamp for _, stamp in txn_stamp_entries(txn, shard, address)]


def txn_stamp_entries(txn: lmdb.Transaction, shard: Shard, address: bytes) -> list[tuple[int, Stamp]]:
    out = []
    for key, value in iter_prefix(txn, shard.stamps, bytes(address)):
        stamp = Stamp(bytes(key[32:64]), bytes(key[64:72]), bytes(value[1:9]), bytes(value[9:74]))
        out.append((value[0], stamp))
    return out


def _present(db: Database | None) -> Database:
    assert db is not None, "open_databases returns every version-1 database"
    return db


def entries(txn: lmdb.Transaction, db: Database | None) -> int:
    """LMDB's entry count of ``db`` (0 for a database a version-1 store lacks)."""
    return 0 if db is None else int(txn.stat(db)["entries"])


def txn_held(txn: lmdb.Transaction, shard: Shard, address: bytes) -> bool:
    """A pin or a cache entry keeps ``address`` (one cursor seek, one get)."""
    if shard.cache is not None and txn.get(address, db=shard.cache) is not None:
        return True
    if shard.pinrefs is None:
        return False
    for _ in iter_prefix(txn, shard.pinrefs, address):
        return True
    return False


def iter_prefix(txn: lmdb.Transaction, db: Database | None, prefix: bytes) -> Iterator[tuple[Any, Any]]:
    """Items whose key starts with ``prefix``, in key order (none in an absent database)."""
    if db is None:
        return
    cur = txn.cursor(db=db)
    if not cur.set_range(prefix):
        return
    n = len(prefix)
    for key, value in cur.iternext():
        if key[:n] != prefix:
            return
        yield key, value


def txn_iter_range(txn: lmdb.Transaction, shard: Shard, lo: bytes, hi: bytes | None) -> Iterator[Entry]:
    cur = txn.cursor(db=shard.stamps)
    if not cur.set_range(lo):
        return
    unpack = _TYPE_TS.unpack_from
    for key, value in cur.iternext():
        if type(key) is memoryview:  # a snapshot's buffers: memoryviews cannot be ordered
            key = key.tobytes()
        # Compared as bytes: any key starting with ``hi`` (or beyond it) is out.
        if hi is not None and key >= hi:
            return
        chunk_type, ts = unpack(value)
        yield bytes(key[:ADDRESS_SIZE]), chunk_type, bytes(key[ADDRESS_SIZE:64]), ts
