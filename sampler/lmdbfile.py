"""Reading a shard's LMDB file directly: B-tree cursors in numba over ``pread``, for phase 1.

py-lmdb hands out one Python object per key and value, and faults a chunk's
page in only when the bytes are touched, one at a time. Phase 1 wants the
opposite: the index of thousands of entries as columns, and each chunk's
position in the file *before* it reads the chunk, so it can ask the kernel
for many pages at once (``posix_fadvise(WILLNEED)``) and read them while it
hashes what came before.

So this module reads the data file itself, with LMDB's on-disk format
(0.9.x; lmdb's ``mdb.c`` defines it): meta pages 0 and 1, then B+tree pages
of ``psize`` bytes with a 16-byte header (page number, flags, lower/upper
bounds), a pointer array of node offsets, and nodes of ``lo, hi, flags,
ksize | key | data``; a value too big for a leaf sits in overflow pages
whose number is the node's data. Pages are read with ``pread`` into small
per-level buffers: nothing of the store is mapped, so the process's resident
memory does not grow with the store, and a damaged page number gives an
error instead of a SIGBUS.

Consistency. The caller holds a py-lmdb read transaction for as long as it
reads here: LMDB never reuses a page that a live reader's snapshot can reach,
so every page reached from that snapshot's roots stays as it was. The roots
come from the meta page the transaction itself used (``txnid & 1``), checked
to carry the transaction's id before and after they are read; if a writer
got two commits ahead in between, the caller retries or reads through
py-lmdb instead.

Trust. Every page read is checked (its header names the page number asked
for, the flags are a branch or leaf, bounds and node sizes fit the page);
anything else raises :class:`DirectReadError`, and the sampler then scans the
shard through py-lmdb as before. The databases read here must use LMDB's
default key order and no duplicates; :func:`open_trees` refuses others.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

import numpy as np

from chunkstore.store.lmdbmeta import DB_SIZE, DBS_AT, META, META_BYTES, PAGE_HEADER, last_page_and_txn, page_size
from chunkstore.swarm.bmt.numba_kernels import _jit
from chunkstore.swarm.libc import RWF_NOWAIT, sys_fadvise, sys_pread, sys_preadv2
from chunkstore.swarm.rawmem import peek_be64, peek_u8, peek_u16, peek_u64

__all__ = ["RWF_NOWAIT", "sys_fadvise", "sys_pread", "sys_preadv2"]  # the scan's numba functions call them too

PAGEHDRSZ = PAGE_HEADER
NODE_HEADER = 8
P_BRANCH, P_LEAF, P_OVERFLOW, P_META, P_LEAF2, P_SUBP = 0x01, 0x02, 0x04, 0x08, 0x20, 0x40
F_BIGDATA, F_SUBDATA, F_DUPDATA = 0x01, 0x02, 0x04
P_INVALID = (1 << 64) - 1
MAX_DEPTH = 32  # LMDB's own cursor stack depth
# MDB_db flags that change a tree's key order or value layout: REVERSEKEY, DUPSORT,
# INTEGERKEY, DUPFIXED, INTEGERDUP, REVERSEDUP.
_LAYOUT_FLAGS = 0x02 | 0x04 | 0x08 | 0x10 | 0x20 | 0x40
POSIX_FADV_WILLNEED = 3

# Cursor status codes (numba functions return them; negative = error).
OK, END = 1, 0
E_READ, E_PAGE, E_NODE, E_DEPTH = -1, -2, -3, -4
ERRORS = {
    E_READ: "short or failed read",
    E_PAGE: "page header does not match",
    E_NODE: "node does not fit its page",
    E_DEPTH: "tree deeper than its record says",
}

# Cursor state words (``Cursor.info``).
I_FD, I_PSIZE, I_ROOT, I_DEPTH, I_LAST_PG, I_LEAF, I_PREFETCHED, I_PARENT = range(8)
PREFETCH_LEAVES = 64  # sibling leaves asked for ahead of a walk, as it reaches them


class DirectReadError(Exception):
    """The file does not look like what this reader expects: read the shard through py-lmdb instead."""


# ------------------------------------------------------------------ page helpers (numba)


@_jit(inline="always")
def _u16(page: np.ndarray, off: int) -> np.int64:
    return np.int64(page[off]) | (np.int64(page[off + 1]) << 8)


@_jit(inline="always")
def _u64(page: np.ndarray, off: int) -> np.uint64:
    v = np.uint64(0)
    for b in range(8):
        v |= np.uint64(page[off + b]) << np.uint64(8 * b)
    return v


@_jit(inline="always")
def _page_at(pages: np.ndarray, level: int) -> int:
    """Address of the page at ``level`` of a cursor's pages (no view: a view per read costs more than it)."""
    return pages.ctypes.data + level * pages.strides[0]


@_jit(inline="always")
def _node_at(page: int, i: int, psize: int) -> int:
    """Offset of node ``i`` in the page at address ``page``, or -1 if it (or its key) does not fit."""
    off = int(peek_u16(page + PAGEHDRSZ + 2 * i))
    if off < PAGEHDRSZ or off + NODE_HEADER > psize:
        return -1
    if off + NODE_HEADER + int(peek_u16(page + off + 6)) > psize:
        return -1
    return off


@_jit(inline="always")
def _node(page: np.ndarray, i: int, psize: int) -> int:
    """:func:`_node_at` of a page held as an array."""
    return _node_at(page.ctypes.data, i, psize)


@_jit(inline="always")
def _cmp_at(page: int, off: int, key: int, klen: int) -> int:
    """LMDB's default order of the key of the node at ``off`` in the page at address ``page`` against the
    ``klen`` bytes at address ``key``: bytes, then length.

    Eight bytes at a time while they are equal (the caller checked the key lies inside its page).
    """
    ksize = int(peek_u16(page + off + 6))
    n = min(ksize, klen)
    mine = page + off + NODE_HEADER
    theirs = key
    start = 0
    while start + 8 <= n:
        x = peek_be64(mine + start)
        y = peek_be64(theirs + start)
        if x != y:
            return -1 if x < y else 1
        start += 8
    for b in range(start, n):
        x = peek_u8(mine + b)
        y = peek_u8(theirs + b)
        if x != y:
            return -1 if x < y else 1
    return ksize - klen


@_jit(inline="always")
def _cmp(page: np.ndarray, off: int, key: np.ndarray, klen: int) -> int:
    """:func:`_cmp_at` of a page and a key held as arrays."""
    return _cmp_at(page.ctypes.data, off, key.ctypes.data, klen)


@_jit(inline="always")
def _search(page: np.ndarray, lo: int, hi: int, key: np.ndarray, klen: int, psize: int, past_equal: bool) -> int:
    """Binary search of nodes ``lo..hi``: the first whose key is >= ``key[:klen]`` (> with
    ``past_equal``), ``hi`` if none is; E_NODE for a node outside its page."""
    while lo < hi:
        mid = (lo + hi) >> 1
        off = _node(page, mid, psize)
        if off < 0:
            return E_NODE
        c = _cmp(page, off, key, klen)
        if c < 0 or (past_equal and c == 0):
            lo = mid + 1
        else:
            hi = mid
    return lo


@_jit
def _load(pages: np.ndarray, pg: np.ndarray, nk: np.ndarray, info: np.ndarray, level: int, pgno: int) -> int:
    """Read page ``pgno`` into level ``level``'s buffer (if not there already) and check it."""
    if level >= MAX_DEPTH:
        return E_DEPTH
    if pg[level] == pgno:
        return OK
    psize = info[I_PSIZE]
    if pgno < 2 or pgno > info[I_LAST_PG]:
        return E_PAGE
    page = pages[level]
    got = sys_pread(info[I_FD], page.ctypes.data, psize, pgno * psize)
    if got != psize:
        pg[level] = -1
        return E_READ
    flags = _u16(page, 10)
    lower = _u16(page, 12)
    upper = _u16(page, 14)
    if np.int64(_u64(page, 0)) != pgno or (flags & (P_BRANCH | P_LEAF)) == 0:
        pg[level] = -1
        return E_PAGE
    if flags & (P_LEAF2 | P_SUBP | P_OVERFLOW | P_META) or lower < PAGEHDRSZ or lower > upper or upper > psize:
        pg[level] = -1
        return E_PAGE
    pg[level] = pgno
    nk[level] = (lower - PAGEHDRSZ) >> 1
    return OK


@_jit(inline="always")
def _is_leaf(page: np.ndarray) -> bool:
    return (_u16(page, 10) & P_LEAF) != 0


@_jit
def _child(page: np.ndarray, i: int, psize: int) -> int:
    off = _node(page, i, psize)
    if off < 0:
        return -1
    return _u16(page, off) | (_u16(page, off + 2) << 16) | (_u16(page, off + 4) << 32)


@_jit
def _entered(pages: np.ndarray, pg: np.ndarray, ix: np.ndarray, nk: np.ndarray, info: np.ndarray, leaf: int) -> None:
    """The walk just entered the leaf under ``ix[leaf - 1]``: ask for the next sibling leaves.

    Sibling leaves are scattered over the file, so a walk that reads them one
    by one waits for the disk at every one; asked for ahead (``WILLNEED``,
    which only queues the reads), they arrive while the walk works.
    """
    parent = leaf - 1
    if parent < 0:
        return
    psize = info[I_PSIZE]
    child = ix[parent]
    if info[I_PARENT] != pg[parent]:
        info[I_PARENT] = pg[parent]
        info[I_PREFETCHED] = child + 1
    start = info[I_PREFETCHED]
    if child + PREFETCH_LEAVES // 2 < start:
        return
    end = min(nk[parent], child + 1 + PREFETCH_LEAVES)
    page = pages[parent]
    for i in range(start, end):
        pgno = _child(page, i, psize)
        if 2 <= pgno <= info[I_LAST_PG]:
            sys_fadvise(info[I_FD], pgno * psize, psize, POSIX_FADV_WILLNEED)
    info[I_PREFETCHED] = max(start, end)


@_jit
def _descend(pages: np.ndarray, pg: np.ndarray, ix: np.ndarray, nk: np.ndarray, info: np.ndarray,
             key: np.ndarray, klen: int) -> int:  # fmt: skip
    """Position at the first entry whose key is >= ``key[:klen]``: OK, END or an error."""
    psize = info[I_PSIZE]
    if info[I_DEPTH] == 0:
        return END  # an empty database
    level = 0
    pgno = info[I_ROOT]
    while True:
        rc = _load(pages, pg, nk, info, level, pgno)
        if rc < 0:
            return rc
        page = pages[level]
        n = nk[level]
        if not _is_leaf(page):
            if n < 1:
                return E_PAGE
            # node 0's key is never compared: it stands for everything below node 1
            lo = _search(page, 1, n, key, klen, psize, True)
            if lo < 0:
                return lo
            ix[level] = lo - 1
            pgno = _child(page, lo - 1, psize)
            if pgno < 0:
                return E_NODE
            level += 1
            if level >= info[I_DEPTH]:
                return E_DEPTH
            continue
        if level != info[I_DEPTH] - 1:
            return E_DEPTH
        lo = _search(page, 0, n, key, klen, psize, False)
        if lo < 0:
            return lo
        ix[level] = lo
        info[I_LEAF] = level
        _entered(pages, pg, ix, nk, info, level)
        if lo < n:
            return OK
        return _next_leaf(pages, pg, ix, nk, info)


@_jit
def _next_leaf(pages: np.ndarray, pg: np.ndarray, ix: np.ndarray, nk: np.ndarray, info: np.ndarray) -> int:
    """Move to the first entry of the next non-empty leaf: OK, END or an error."""
    psize = info[I_PSIZE]
    leaf = info[I_LEAF]
    while True:
        level = leaf - 1
        while level >= 0 and ix[level] + 1 >= nk[level]:
            level -= 1
        if level < 0:
            ix[leaf] = nk[leaf]
            return END
        ix[level] += 1
        while level < leaf:
            pgno = _child(pages[level], ix[level], psize)
            if pgno < 0:
                return E_NODE
            level += 1
            rc = _load(pages, pg, nk, info, level, pgno)
            if rc < 0:
                return rc
            if _is_leaf(pages[level]) != (level == leaf):
                return E_DEPTH
            ix[level] = 0
        _entered(pages, pg, ix, nk, info, leaf)
        if nk[leaf] > 0:
            return OK


@_jit
def _step(pages: np.ndarray, pg: np.ndarray, ix: np.ndarray, nk: np.ndarray, info: np.ndarray) -> int:
    """Move to the next entry: OK, END or an error."""
    leaf = info[I_LEAF]
    ix[leaf] += 1
    if ix[leaf] < nk[leaf]:
        return OK
    return _next_leaf(pages, pg, ix, nk, info)


@_jit
def _seek(pages: np.ndarray, pg: np.ndarray, ix: np.ndarray, nk: np.ndarray, info: np.ndarray,
          key: np.ndarray, klen: int) -> int:  # fmt: skip
    """``_descend``, but without leaving the current leaf when the key is inside it (ascending seeks).

    Seeks that follow the index (the rows of a block, in key order) mostly
    land on the current entry or the next few: those are probed one by one
    before a binary search.
    """
    leaf = info[I_LEAF]
    if leaf >= 0 and pg[leaf] >= 0 and ix[leaf] < nk[leaf]:
        page = pages[leaf]
        psize = info[I_PSIZE]
        n = nk[leaf]
        i = ix[leaf]
        prev = _node(page, i - 1, psize) if i > 0 else 0
        if prev < 0:
            return E_NODE
        if i == 0 or _cmp(page, prev, key, klen) < 0:
            for j in range(i, min(n, i + 4)):
                off = _node(page, j, psize)
                if off < 0:
                    return E_NODE
                if _cmp(page, off, key, klen) >= 0:
                    ix[leaf] = j
                    return OK
        here = _node(page, ix[leaf], psize)
        last = _node(page, n - 1, psize)
        if here >= 0 and last >= 0 and _cmp(page, here, key, klen) <= 0 and _cmp(page, last, key, klen) >= 0:
            lo = _search(page, ix[leaf], n - 1, key, klen, psize, False)
            if lo < 0:
                return lo
            ix[leaf] = lo
            return OK
    return _descend(pages, pg, ix, nk, info, key, klen)


@_jit(inline="always")
def _entry(pages: np.ndarray, ix: np.ndarray, info: np.ndarray) -> int:
    """Offset of the current leaf node (the caller checked the cursor is on an entry)."""
    leaf = info[I_LEAF]
    return _node_at(_page_at(pages, leaf), ix[leaf], info[I_PSIZE])


@_jit(inline="always")
def _value_at(pages: np.ndarray, pg: np.ndarray, ix: np.ndarray, info: np.ndarray, off: int) -> tuple[int, int, int]:
    """(kind, file position, size) of the current node's value: kind 1 inline, 2 overflow pages, -1 bad."""
    leaf = info[I_LEAF]
    page = _page_at(pages, leaf)
    psize = info[I_PSIZE]
    flags = int(peek_u16(page + off + 4))
    size = int(peek_u16(page + off)) | (int(peek_u16(page + off + 2)) << 16)
    data = off + NODE_HEADER + int(peek_u16(page + off + 6))
    if flags & (F_SUBDATA | F_DUPDATA):
        return -1, 0, 0
    if flags & F_BIGDATA:
        if data + 8 > psize:
            return -1, 0, 0
        ovpg = int(peek_u64(page + data))
        if ovpg < 2 or ovpg > info[I_LAST_PG]:
            return -1, 0, 0
        return 2, ovpg * psize + PAGEHDRSZ, size
    if data + size > psize:
        return -1, 0, 0
    return 1, pg[leaf] * psize + data, size


@dataclass
class Cursor:
    """A read position in one B-tree; the arrays are the state the numba functions share."""

    pages: np.ndarray  # uint8[MAX_DEPTH, psize]: the page at each level of the current path
    pg: np.ndarray  # int64[MAX_DEPTH]: page number in each buffer (-1: none)
    ix: np.ndarray  # int64[MAX_DEPTH]: node index at each level
    nk: np.ndarray  # int64[MAX_DEPTH]: node count of each buffered page
    info: np.ndarray  # int64[8]: fd, psize, root, depth, last page, leaf level, prefetch marks

    @classmethod
    def open(cls, fd: int, psize: int, tree: Tree, last_pg: int) -> Cursor:
        info = np.zeros(8, np.int64)
        root = tree.root if tree.depth else -1  # P_INVALID (an empty tree) does not fit an int64
        info[I_FD], info[I_PSIZE], info[I_ROOT], info[I_DEPTH], info[I_LAST_PG] = fd, psize, root, tree.depth, last_pg
        info[I_LEAF] = -1
        info[I_PARENT] = -1
        return cls(
            np.zeros((MAX_DEPTH, psize), np.uint8), np.full(MAX_DEPTH, -1, np.int64), np.zeros(MAX_DEPTH, np.int64),
            np.zeros(MAX_DEPTH, np.int64), info,
        )  # fmt: skip

    @property
    def empty(self) -> bool:
        return self.info[I_DEPTH] == 0


# ------------------------------------------------------------------ meta page and named databases


@dataclass(frozen=True)
class Tree:
    """A database's root as one snapshot sees it (``MDB_db``)."""

    root: int  # page number; P_INVALID for an empty database
    depth: int
    entries: int
    flags: int


_DB = struct.Struct("<IHHQQQQQ")  # pad, flags, depth, branch, leaf, overflow pages, entries, root
assert _DB.size == DB_SIZE


def _read(fd: int, offset: int, size: int) -> bytes:
    data = os.pread(fd, size, offset)
    if len(data) != size:
        raise DirectReadError(f"short read at {offset}: {len(data)} of {size} bytes")
    return data


def _db(raw: bytes) -> Tree:
    _pad, flags, depth, _b, _l, _o, entries, root = _DB.unpack(raw)
    return Tree(root, depth if root != P_INVALID else 0, entries, flags)


@dataclass(frozen=True)
class Snapshot:
    """The roots a read transaction sees: page size, last page, and the named databases asked for."""

    psize: int
    last_pg: int
    trees: dict[bytes, Tree]


def open_trees(fd: int, txn_id: int, names: tuple[bytes, ...]) -> Snapshot:
    """Read the roots of ``names`` as of transaction ``txn_id`` (the caller's live read transaction).

    Raises ``DirectReadError`` when the meta page no longer carries that
    transaction (a writer got two commits ahead: retry with a new
    transaction), or when anything is not as this reader expects.
    """
    head = _read(fd, 0, META_BYTES)
    psize = page_size(head)
    if psize is None:
        magic, version, _addr, _mapsize = META.unpack_from(head, PAGEHDRSZ)
        raise DirectReadError(f"not an LMDB data file of this layout (magic {magic:#x}, version {version}, "
                              f"page size {struct.unpack_from('<I', head, DBS_AT)[0]})")  # fmt: skip
    meta_at = (txn_id & 1) * psize

    def meta() -> tuple[bytes, int, int]:
        raw = _read(fd, meta_at, META_BYTES)
        if struct.unpack_from("<H", raw, 10)[0] & P_META == 0:
            raise DirectReadError(f"page {txn_id & 1} is not a meta page")
        return raw, *last_page_and_txn(raw)

    raw, last_pg, seen = meta()
    if seen != txn_id:
        raise DirectReadError(f"meta page moved on (transaction {seen}, ours {txn_id})")
    main = _db(raw[DBS_AT + DB_SIZE : DBS_AT + 2 * DB_SIZE])
    if main.flags & _LAYOUT_FLAGS:
        raise DirectReadError(f"main database flags {main.flags:#x}")
    trees = {}
    for name in names:
        record = _lookup(fd, psize, main, last_pg, name)
        tree = _db(record)
        if tree.flags & _LAYOUT_FLAGS:
            raise DirectReadError(f"database {name!r} has flags {tree.flags:#x}: not a plain B-tree")
        if tree.root != P_INVALID and not (2 <= tree.root <= last_pg and 1 <= tree.depth < MAX_DEPTH):
            raise DirectReadError(f"database {name!r}: root {tree.root}, depth {tree.depth}")
        trees[name] = tree
    if meta()[2] != txn_id:
        raise DirectReadError("meta page rewritten while its roots were read")
    return Snapshot(psize, last_pg, trees)


def _key(page: bytes, off: int) -> bytes:
    ksize = struct.unpack_from("<H", page, off + 6)[0]
    return page[off + NODE_HEADER : off + NODE_HEADER + ksize]


def _lookup(fd: int, psize: int, main: Tree, last_pg: int, name: bytes) -> bytes:
    """The ``MDB_db`` record of named database ``name`` in the main database (a few pages: plain Python)."""
    if main.root == P_INVALID:
        raise DirectReadError("the main database is empty")
    pgno = main.root
    for _ in range(MAX_DEPTH):
        if not 2 <= pgno <= last_pg:
            raise DirectReadError(f"main database page {pgno} out of range")
        page = _read(fd, pgno * psize, psize)
        own, flags, lower = struct.unpack_from("<QxxHH", page, 0)
        if own != pgno:
            raise DirectReadError(f"page {pgno} says it is page {own}")
        nodes = [struct.unpack_from("<H", page, PAGEHDRSZ + 2 * i)[0] for i in range((lower - PAGEHDRSZ) >> 1)]
        if flags & P_BRANCH:
            child = 0
            for i in range(1, len(nodes)):
                if _key(page, nodes[i]) <= name:
                    child = i
            lo, hi, fl = struct.unpack_from("<HHH", page, nodes[child])
            pgno = lo | (hi << 16) | (fl << 32)
            continue
        if not flags & P_LEAF:
            raise DirectReadError(f"main database page {pgno} has flags {flags:#x}")
        for off in nodes:
            if _key(page, off) == name:
                lo, hi, fl, ksize = struct.unpack_from("<HHHH", page, off)
                if not fl & F_SUBDATA or (lo | (hi << 16)) != DB_SIZE:
                    raise DirectReadError(f"{name!r} is not a named database record")
                start = off + NODE_HEADER + ksize
                return page[start : start + DB_SIZE]
        raise DirectReadError(f"no database named {name!r}")
    raise DirectReadError("main database deeper than LMDB allows")


@_jit
def _walk(pages: np.ndarray, pg: np.ndarray, ix: np.ndarray, nk: np.ndarray, info: np.ndarray,
          key: np.ndarray, klen: int, out: np.ndarray) -> tuple[int, int]:  # fmt: skip
    """From the first key >= ``key[:klen]``, up to ``len(out)`` entries as (leaf page, node offset, kind,
    value position, value size); returns (count, status)."""
    rc = _seek(pages, pg, ix, nk, info, key, klen)
    n = 0
    while rc == OK and n < out.shape[0]:
        off = _entry(pages, ix, info)
        if off < 0:
            return n, E_NODE
        kind, pos, size = _value_at(pages, pg, ix, info, off)
        if kind < 0:
            return n, E_NODE
        out[n, 0], out[n, 1], out[n, 2], out[n, 3], out[n, 4] = pg[info[I_LEAF]], off, kind, pos, size
        n += 1
        rc = _step(pages, pg, ix, nk, info)
    return n, rc


def walk(fd: int, snapshot: Snapshot, name: bytes, start: bytes = b"", limit: int = 1 << 20) -> list[tuple[bytes, bytes]]:
    """Keys and values of database ``name`` from the first key >= ``start``, read by this module's cursor.

    For tests and inspection (one ``pread`` per value): the sampler uses the
    cursor functions directly.
    """
    tree = snapshot.trees[name]
    cursor = Cursor.open(fd, snapshot.psize, tree, snapshot.last_pg)
    key = np.frombuffer(start.ljust(1, b"\0"), np.uint8).copy()
    out = np.zeros((limit, 5), np.int64)
    n, rc = _walk(cursor.pages, cursor.pg, cursor.ix, cursor.nk, cursor.info, key, len(start), out)
    if rc < 0:
        raise DirectReadError(f"walking {name!r}: {ERRORS.get(rc, rc)}")
    found = []
    for leaf, off, _kind, pos, size in out[:n].tolist():
        node = _read(fd, leaf * snapshot.psize + off, NODE_HEADER)
        ksize = struct.unpack_from("<H", node, 6)[0]
        k = _read(fd, leaf * snapshot.psize + off + NODE_HEADER, ksize)
        found.append((k, _read(fd, pos, size) if size else b""))
    return found
