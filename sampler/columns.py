"""Phase 1 of one shard as columns: index walk, filters, chunk positions, read-ahead, copies.

The numba half of the direct scan (``sampler.worker.scan_direct`` drives it):

* :func:`scan_entries` walks the stamp index from where it stopped, applies
  the index filters (below-balance batch, chunk type, stamp time; the
  neighbourhood and storage radius are the key range) and fills the columns
  of a block: rows (one per chunk and type) and entries (row, batch id);
* :func:`locate_rows` finds each row's data in the file: where its head
  (inline in a leaf, or in its own overflow page) and its tail are;
* :func:`prefetch` asks the kernel for the heads of a block, sorted by file
  position and merged into runs (``posix_fadvise(WILLNEED)`` only queues the
  reads, so a worker keeps several blocks of reads in flight while it hashes);
* :func:`plan_direct` and :func:`read_direct` read a cold block whose heads
  lie in runs of consecutive pages around the page cache (``O_DIRECT``), in
  reads of up to a MiB, each page then copied into its row: a store written
  in key order (an import) is read as large sequential reads, and no page
  cache is filled, which on the VMs here costs more CPU than the transfer;
* :func:`place_rows` says where each row's bytes are for the hash: in the
  data file's read-only mapping, hashed where they lie in the page cache (no
  copy), or read into the hashing buffer with ``pread`` (outside the map, or
  when the hash needs whole rows); it checks each overflow page's header.

The rules are the per-row loop's (``sampler.worker.scan_rows``), entry for
entry and counter for counter; ``tests/test_sample_columns.py`` holds them
to it on random stores.
"""

from __future__ import annotations

import numpy as np

from chunkstore.store.layout import DB_CHUNKS, DB_STAMPS, DB_TAILS, HEAD_SIZE, STAMP_KEY_SIZE, STAMP_VALUE_SIZE
from chunkstore.store.mapped import ReadOnlyMap
from chunkstore.swarm.bmt.numba_kernels import _jit
from chunkstore.swarm.constants import ADDRESS_SIZE, ChunkType
from chunkstore.swarm.libc import sys_memcpy
from chunkstore.swarm.rawmem import peek_be64, peek_u8, peek_u16, peek_u64

from . import lmdbfile
from .blocks import TAIL_ROOM, BlockColumns
from .lmdbfile import (
    E_NODE,
    E_PAGE,
    E_READ,
    END,
    ERRORS,
    I_DEPTH,
    I_LEAF,
    I_PSIZE,
    OK,
    P_OVERFLOW,
    PAGEHDRSZ,
    POSIX_FADV_WILLNEED,
    RWF_NOWAIT,
    Cursor,
    DirectReadError,
    _cmp,
    _cmp_at,
    _entry,
    _page_at,
    _seek,
    _step,
    _value_at,
    sys_fadvise,
    sys_pread,
    sys_preadv2,
)

ADDRESS = ADDRESS_SIZE
STAMP_KEY = STAMP_KEY_SIZE
STAMP_VALUE = STAMP_VALUE_SIZE
CAC, SOC = int(ChunkType.CAC), int(ChunkType.SOC)
DATA_AT = PAGEHDRSZ  # where a row's data starts: a row holds its head's overflow page from byte 0
ROW_BYTES = 9 * 512  # a row of the hashing buffer: a whole head page and the longest tail, in disk sectors
MAX_GAP = 16  # pages between two rows' heads that a direct read takes in (and drops) to keep one large read
STAGE_PAGES = 256  # pages per read around the page cache (1 MiB: as fast here as 4 MiB reads)
MISSING, INLINE, OVERFLOW, COPIED = 0, 1, 2, 3  # COPIED: an inline tail already copied out of its leaf
FORWARD_STEPS = 4  # entries a lookup steps over before it searches instead (rows come in key order)

# counts[] slots
C_TOTAL, C_BELOW, C_ROGUE, C_NEW, C_DISTINCT = range(5)  # C_DISTINCT: chunks walked (addresses)


@_jit(inline="always")
def _less_row(a: np.ndarray, ai: int, b: np.ndarray, bi: int) -> int:
    """Compare 32-byte rows a[ai] and b[bi]: -1, 0, 1."""
    for k in range(ADDRESS):
        x = a[ai, k]
        y = b[bi, k]
        if x != y:
            return -1 if x < y else 1
    return 0


@_jit
def _excluded(page: np.ndarray, at: int, excluded: np.ndarray) -> bool:
    """Is the batch id at ``page[at:at + 32]`` one of the (sorted) excluded ids?"""
    lo, hi = 0, excluded.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        c = 0
        for k in range(ADDRESS):
            x = excluded[mid, k]
            y = page[at + k]
            if x != y:
                c = -1 if x < y else 1
                break
        if c == 0:
            return True
        if c < 0:
            lo = mid + 1
        else:
            hi = mid
    return False


@_jit(inline="always")
def _equal32(a: int, b: int) -> bool:
    """Are the 32 bytes at addresses ``a`` and ``b`` equal?"""
    for w in range(0, ADDRESS, 8):
        if peek_u64(a + w) != peek_u64(b + w):
            return False
    return True


@_jit
def scan_entries(
    pages: np.ndarray, pg: np.ndarray, ix: np.ndarray, nk: np.ndarray, info: np.ndarray,
    state: np.ndarray, lo: np.ndarray, hi: np.ndarray, has_hi: bool, excluded: np.ndarray, consensus: np.uint64,
    max_entries: int, row_addr: np.ndarray, row_type: np.ndarray, ent_row: np.ndarray, ent_batch: np.ndarray,
    counts: np.ndarray, walked_last: np.ndarray,
) -> tuple[int, int, int]:  # fmt: skip
    """Walk the stamp index from where the last call stopped; fill one block.

    ``state``: [started, finished]; ``walked_last``: the address of the last
    entry walked and, in byte 32, whether there was one (for counting the
    distinct chunks walked, across calls). Stops after ``max_entries`` walked, but
    only where the address changes (a chunk's entries stay in one block, so
    it is hashed once), unless the entry columns are full. Returns
    ``(rows, entries, status)``; status OK, END (the range is done) or an
    error code from the cursor.
    """
    if state[1]:
        return 0, 0, END
    if not state[0]:
        state[0] = 1
        rc = _seek(pages, pg, ix, nk, info, lo, ADDRESS)
        if rc != OK:
            state[1] = 1
            return 0, 0, rc
    cap = ent_row.shape[0]
    psize = info[I_PSIZE]
    rows = 0
    ents = 0
    walked = 0
    last_type = -1
    while True:
        off = _entry(pages, ix, info)
        if off < 0:
            return rows, ents, E_NODE
        leaf = _page_at(pages, info[I_LEAF])
        if peek_u16(leaf + off + 6) != STAMP_KEY or peek_u16(leaf + off + 4) != 0 or (
            np.int64(peek_u16(leaf + off)) | (np.int64(peek_u16(leaf + off + 2)) << 16)
        ) != STAMP_VALUE:
            return rows, ents, E_NODE
        key = off + 8
        if key + STAMP_KEY + STAMP_VALUE > psize:
            return rows, ents, E_NODE
        if has_hi and _cmp_at(leaf, off, hi.ctypes.data, ADDRESS) >= 0:
            state[1] = 1
            return rows, ents, END
        address = leaf + key  # the entry's chunk address, then its batch id, in the page
        new_address = rows == 0 or not _equal32(address, row_addr.ctypes.data + (rows - 1) * row_addr.strides[0])
        if walked >= max_entries and (new_address or ents >= cap):
            return rows, ents, OK
        if ents >= cap:
            return rows, ents, OK
        walked += 1
        counts[C_TOTAL] += 1
        if walked_last[ADDRESS] == 0 or not _equal32(address, walked_last.ctypes.data):
            counts[C_DISTINCT] += 1
        sys_memcpy(walked_last.ctypes.data, address, ADDRESS)
        walked_last[ADDRESS] = 1
        value = key + STAMP_KEY
        chunk_type = peek_u8(leaf + value)
        ts = peek_be64(leaf + value + 1)
        if excluded.shape[0] and _excluded(pages[info[I_LEAF]], key + ADDRESS, excluded):
            counts[C_BELOW] += 1
        elif chunk_type != CAC and chunk_type != SOC:
            counts[C_ROGUE] += 1
        elif ts > consensus:
            counts[C_NEW] += 1
        else:
            if new_address or chunk_type != last_type:
                # A chunk's further stamps share its row while the type stays (the entries
                # of one address are adjacent); a different type byte is hashed as its own row.
                sys_memcpy(row_addr.ctypes.data + rows * row_addr.strides[0], address, ADDRESS)
                row_type[rows] = chunk_type
                rows += 1
                last_type = chunk_type
            ent_row[ents] = rows - 1
            sys_memcpy(ent_batch.ctypes.data + ents * ent_batch.strides[0], address + ADDRESS, ADDRESS)
            ents += 1
        rc = _step(pages, pg, ix, nk, info)
        if rc != OK:
            state[1] = 1
            return rows, ents, rc


@_jit
def _find(pages: np.ndarray, pg: np.ndarray, ix: np.ndarray, nk: np.ndarray, info: np.ndarray,
          key: np.ndarray) -> tuple[int, int, int]:  # fmt: skip
    """(kind, file position, size) of the value stored at the 32-byte ``key``; kind MISSING if absent, <0 error."""
    rc = _seek(pages, pg, ix, nk, info, key, ADDRESS)
    if rc == END:
        return MISSING, 0, 0
    if rc < 0:
        return rc, 0, 0
    off = _entry(pages, ix, info)
    if off < 0:
        return E_NODE, 0, 0
    if _cmp(pages[info[I_LEAF]], off, key, ADDRESS) != 0:
        return MISSING, 0, 0
    kind, pos, size = _value_at(pages, pg, ix, info, off)
    if kind < 0:
        return E_NODE, 0, 0
    return kind, pos, size


@_jit(inline="always")
def _find_forward(pages: np.ndarray, pg: np.ndarray, ix: np.ndarray, nk: np.ndarray, info: np.ndarray,
                  keys: np.ndarray, i: int) -> tuple[int, int, int]:  # fmt: skip
    """:func:`_find` for keys asked in ascending order: step forward from the cursor, search only when far.

    The key is ``keys[i]``. The cursor is left on the entry found, or on the first entry above a key
    that is missing, so every entry before it is below the next key asked
    for (which is never smaller). The next row is then nearly always the
    current entry or the next one: a comparison or two and a step, where a
    search compares its way from the entry before.
    """
    leaf = info[I_LEAF]
    if leaf >= 0 and pg[leaf] >= 0 and ix[leaf] < nk[leaf]:
        key = keys.ctypes.data + i * keys.strides[0]
        for _ in range(FORWARD_STEPS):
            off = _entry(pages, ix, info)
            if off < 0:
                return E_NODE, 0, 0
            c = _cmp_at(_page_at(pages, info[I_LEAF]), off, key, ADDRESS)
            if c > 0:
                return MISSING, 0, 0
            if c == 0:
                kind, pos, size = _value_at(pages, pg, ix, info, off)
                if kind < 0:
                    return E_NODE, 0, 0
                return kind, pos, size
            rc = _step(pages, pg, ix, nk, info)
            if rc == END:
                return MISSING, 0, 0
            if rc < 0:
                return rc, 0, 0
    return _find(pages, pg, ix, nk, info, keys[i])


@_jit
def locate_rows(
    c_pages: np.ndarray, c_pg: np.ndarray, c_ix: np.ndarray, c_nk: np.ndarray, c_info: np.ndarray,
    t_pages: np.ndarray, t_pg: np.ndarray, t_ix: np.ndarray, t_nk: np.ndarray, t_info: np.ndarray,
    row_addr: np.ndarray, n: int, where: np.ndarray, tails: np.ndarray,
) -> int:  # fmt: skip
    """Where each row's data is: ``where[i] = (head kind, head position, head size, tail kind, tail position,
    tail size)``. A head of exactly ``HEAD_SIZE`` bytes may have a tail (absent: a 4080-byte chunk). A tail
    stored inline is copied into ``tails[i]`` here, from the leaf this walk has read anyway (kind COPIED):
    one read per chunk fewer."""
    psize = t_info[I_PSIZE]
    for i in range(n):
        kind, pos, size = _find_forward(c_pages, c_pg, c_ix, c_nk, c_info, row_addr, i)
        if kind < 0:
            return kind
        where[i, 0], where[i, 1], where[i, 2] = kind, pos, size
        where[i, 3], where[i, 4], where[i, 5] = MISSING, 0, 0
        if kind != MISSING and size == HEAD_SIZE and t_info[I_DEPTH] > 0:
            tkind, tpos, tsize = _find_forward(t_pages, t_pg, t_ix, t_nk, t_info, row_addr, i)
            if tkind < 0:
                return tkind
            if tkind == INLINE and tsize <= tails.shape[1]:
                leaf = t_info[I_LEAF]
                at = tpos - t_pg[leaf] * psize
                sys_memcpy(tails.ctypes.data + i * tails.strides[0], _page_at(t_pages, leaf) + at, tsize)
                tkind = COPIED
            where[i, 3], where[i, 4], where[i, 5] = tkind, tpos, tsize
    return OK


@_jit
def cached(fd: int, where: np.ndarray, n: int, probes: int) -> bool:
    """Are the heads of ``probes`` rows spread over the block in the page cache already?

    One byte of each is read with ``RWF_NOWAIT``, which fails instead of
    waiting for the disk: a warm block skips the read-ahead requests, which
    cost a system call per run of pages even when every page is cached.
    """
    if n == 0:
        return True
    byte = np.zeros(1, np.uint8)
    iov = np.zeros(2, np.int64)
    iov[0] = byte.ctypes.data
    iov[1] = 1
    step = max(1, n // probes)
    for i in range(0, n, step):
        if where[i, 0] != OVERFLOW:
            continue
        if sys_preadv2(fd, iov.ctypes.data, 1, where[i, 1], RWF_NOWAIT) != 1:
            return False
    return True


def uncached_share(fd: int, where: np.ndarray, n: int, probes: int) -> float:
    """The share of the heads of ``probes`` rows spread over the block that are not in the page cache.

    Asked with ``mincore`` (``ReadOnlyMap.resident``), which reads nothing.
    A probe that read (``preadv2`` with ``RWF_NOWAIT``, as :func:`cached`
    does, starts the read of a page it misses) left the heads it probed
    cached: the next sample of a cold shard read in file order (around the
    page cache, so still cold) or its rescan found them there, took the
    shard for warm and read it in key order, at random. Where the kernel
    will not tell, the shard counts as warm, and is read in key order as
    before file order existed.
    """
    rows = np.arange(0, n, max(1, n // probes))
    view = ReadOnlyMap(fd)
    try:
        heads = where[rows, 1][(where[rows, 0] == OVERFLOW) & (where[rows, 1] < view.array.shape[0])]
        return float(np.count_nonzero(~view.resident(heads))) / heads.shape[0] if heads.shape[0] else 0.0
    finally:
        view.close()


@_jit
def prefetch(fd: int, where: np.ndarray, n: int, psize: int, placed: np.ndarray) -> int:
    """Queue the reads of the rows' overflow heads (but the ``placed`` ones), sorted and merged into runs of
    pages; returns the runs."""
    pages = np.empty(n, np.int64)
    m = 0
    for i in range(n):
        if where[i, 0] == OVERFLOW and not placed[i]:
            pages[m] = (where[i, 1] - PAGEHDRSZ) // psize
            m += 1
    if m == 0:
        return 0
    ordered = np.sort(pages[:m])
    runs = 0
    start = ordered[0]
    end = start + 1
    for j in range(1, m + 1):
        if j < m and ordered[j] <= end:
            end = max(end, ordered[j] + 1)
            continue
        sys_fadvise(fd, start * psize, (end - start) * psize, POSIX_FADV_WILLNEED)
        runs += 1
        if j < m:
            start = ordered[j]
            end = start + 1
    return runs


@_jit
def _whole_page(where: np.ndarray, i: int, psize: int) -> bool:
    """Is row ``i``'s head on one overflow page of its own (what a direct read can place)?"""
    return where[i, 0] == OVERFLOW and PAGEHDRSZ + where[i, 2] <= psize


@_jit
def _gap(where: np.ndarray, j: int, psize: int) -> int:
    """Pages between row ``j - 1``'s head and row ``j``'s; -1 unless ``j``'s follows (with at most MAX_GAP between)."""
    step = where[j, 1] - where[j - 1, 1]
    if step <= 0 or step % psize:
        return -1
    gap = step // psize - 1
    return gap if gap <= MAX_GAP else -1


@_jit
def plan_direct(where: np.ndarray, n: int, psize: int, min_run: int, placed: np.ndarray) -> int:
    """Mark (``placed[i] = 1``) the rows in runs of at least ``min_run`` rows that a few large reads can fill.

    A run is consecutive rows whose one-page heads follow each other in the
    file in the rows' order, at most ``MAX_GAP`` other pages apart (index
    pages between them, as an import writes them). Returns the rows marked;
    the others get 0.
    """
    marked = 0
    i = 0
    while i < n:
        j = i + 1
        whole = _whole_page(where, i, psize)
        if whole:
            while j < n and _whole_page(where, j, psize) and _gap(where, j, psize) >= 0:
                j += 1
        long_run = whole and j - i >= min_run
        for r in range(i, j):
            placed[r] = 1 if long_run else 0
        if long_run:
            marked += j - i
        i = j
    return marked


@_jit
def read_direct(fd: int, where: np.ndarray, n: int, psize: int, buf: np.ndarray, placed: np.ndarray,
                stage: np.ndarray) -> int:  # fmt: skip
    """Read the head page of each row marked in ``placed`` (a run of :func:`plan_direct`) into ``buf[i, 0:psize]``.

    A run is read as whole ranges of the file into ``stage`` (as many pages
    as it holds; the pages between heads come along and are dropped), and
    each head page is copied from there into its row: one contiguous read
    per range, since a read scattered straight into the rows (one iovec a
    page) measured half as fast on this project's VMs (500 against 900 MB/s).
    ``fd`` may be opened with ``O_DIRECT``: ``stage`` must then start at a
    sector-aligned address. Returns OK, or E_READ for a failed or short read
    (the caller reads the block through the page cache instead).
    """
    base = buf.ctypes.data
    stride = buf.strides[0]
    staged = stage.ctypes.data
    room = stage.shape[0] // psize
    i = 0
    while i < n:
        if not placed[i]:
            i += 1
            continue
        first = (where[i, 1] - PAGEHDRSZ) // psize
        j = i + 1
        while j < n and placed[j] and _gap(where, j, psize) >= 0 and (where[j, 1] - PAGEHDRSZ) // psize - first < room:
            j += 1
        want = (where[j - 1, 1] - where[i, 1]) + psize
        if sys_pread(fd, staged, want, first * psize) != want:
            return E_READ
        for r in range(i, j):
            sys_memcpy(base + r * stride, staged + (where[r, 1] - where[i, 1]), psize)
        i = j
    return OK


@_jit(inline="always")
def overflow_page_ok(page: int, pgno: int) -> bool:
    """Does the page header at address ``page`` name overflow page ``pgno`` (the page the index pointed at)?"""
    return np.int64(peek_u64(page)) == pgno and (peek_u16(page + 10) & P_OVERFLOW) != 0


@_jit(inline="always")
def row_status(kind: int, size: int, tail_size: int, room: int) -> int:
    """What becomes of a located row before it is read: 0 its chunk is missing, -1 its data is longer than a row's
    ``room`` (a failed load), 1 it is read."""
    if kind == MISSING:
        return 0
    if size + tail_size > room:
        return -1
    return 1


@_jit
def place_rows(fd: int, where: np.ndarray, tails: np.ndarray, n: int, psize: int, buf: np.ndarray,
               mapped: np.ndarray, mappable: np.ndarray, lengths: np.ndarray, status: np.ndarray, placed: np.ndarray,
               head_at: np.ndarray, head_len: np.ndarray, tail_at: np.ndarray, tail_len: np.ndarray) -> int:  # fmt: skip
    """Say where each located row's data is in memory: its head and tail as (address, length) pairs.

    ``mapped`` is the data file mapped read-only (empty: none). A row marked
    ``mappable`` whose bytes lie inside it is hashed there, from the page
    cache, with no copy:
    ``head_at[i]`` points into the map, ``tail_at[i]`` into the map or into
    ``tails[i]``. Any other row is read into ``buf[i, DATA_AT:]`` with
    ``pread``, tail after head (one piece: ``tail_len[i] = 0``), but rows
    marked in ``placed`` hold their head page there already (``read_direct``)
    and only get their tail. So with an empty map every row ends up whole in
    ``buf``, as the copying hash (``transformed_addresses``) wants it.

    ``lengths[i]`` = DATA_AT + data size, as if the row were in ``buf``.
    ``status[i]``: 1 placed, 0 missing chunk, -1 too long for a row. Returns
    OK, or an error code when a read fails or an overflow page's header is
    not the page the index named (never hashed: the caller falls back).
    """
    room = buf.shape[1] - DATA_AT
    base = buf.ctypes.data
    stride = buf.strides[0]
    mapped_at = mapped.ctypes.data
    mapped_len = mapped.shape[0]
    for i in range(n):
        kind, pos, size = where[i, 0], where[i, 1], where[i, 2]
        tkind, tpos, tsize = where[i, 3], where[i, 4], where[i, 5]
        status[i] = row_status(kind, size, tsize, room)
        if status[i] != 1:
            continue
        row = base + i * stride
        in_map = mappable[i] and not placed[i] and pos + size <= mapped_len
        if kind == OVERFLOW:
            pgno = (pos - PAGEHDRSZ) // psize
            if in_map:
                if not overflow_page_ok(mapped_at + pos - PAGEHDRSZ, pgno):
                    return E_PAGE
            else:
                if not placed[i]:
                    got = sys_pread(fd, row + DATA_AT - PAGEHDRSZ, PAGEHDRSZ + size, pos - PAGEHDRSZ)
                    if got != PAGEHDRSZ + size:
                        return E_READ
                if not overflow_page_ok(row + DATA_AT - PAGEHDRSZ, pgno):
                    return E_PAGE
        elif not in_map:
            if sys_pread(fd, row + DATA_AT, size, pos) != size:
                return E_READ
        if in_map:
            head_at[i], head_len[i] = mapped_at + pos, size
        else:
            head_at[i], head_len[i] = row + DATA_AT, size
        tail_at[i], tail_len[i] = head_at[i], 0
        if tkind == COPIED:
            if in_map:
                tail_at[i], tail_len[i] = tails.ctypes.data + i * tails.strides[0], tsize
            else:
                for b in range(tsize):
                    buf[i, DATA_AT + size + b] = tails[i, b]
                head_len[i] += tsize
        elif tkind != MISSING and tsize:
            if in_map and tpos + tsize <= mapped_len:
                tail_at[i], tail_len[i] = mapped_at + tpos, tsize
            else:
                if sys_pread(fd, row + DATA_AT + size, tsize, tpos) != tsize:
                    return E_READ
                if in_map:
                    tail_at[i], tail_len[i] = row + DATA_AT + size, tsize
                else:
                    head_len[i] += tsize
        lengths[i] = DATA_AT + size + tsize
    return OK


class IndexWalk:
    """One walk of a shard's key range, block by block: the stamp index (:func:`scan_entries`) with its filters,
    and each row's chunk located (:func:`locate_rows`), all under the caller's read transaction ``txn_id``.

    Raises ``DirectReadError`` when the file is not what the reader expects.
    """

    def __init__(self, fd: int, txn_id: int, key_range: tuple[bytes, bytes | None], excluded: frozenset[bytes],
                 consensus_time: int) -> None:  # fmt: skip
        roots = lmdbfile.open_trees(fd, txn_id, (DB_STAMPS, DB_CHUNKS, DB_TAILS))
        self.psize, self.last_pg = roots.psize, roots.last_pg
        self.total_entries = roots.trees[DB_STAMPS].entries  # the shard's, in the range or not
        self.stamps = Cursor.open(fd, self.psize, roots.trees[DB_STAMPS], self.last_pg)
        self.chunks = Cursor.open(fd, self.psize, roots.trees[DB_CHUNKS], self.last_pg)
        self.tails = Cursor.open(fd, self.psize, roots.trees[DB_TAILS], self.last_pg)
        self.lo = np.frombuffer(key_range[0].ljust(ADDRESS, b"\0")[:ADDRESS], np.uint8).copy()
        self.has_hi = key_range[1] is not None
        self.hi = np.frombuffer((key_range[1] or b"").ljust(ADDRESS, b"\0")[:ADDRESS], np.uint8).copy()
        self.excluded = np.array(sorted(excluded), dtype="S32").view(np.uint8).reshape(-1, ADDRESS).copy()
        self.consensus = np.uint64(min(max(consensus_time, 0), (1 << 64) - 1))
        self.state = np.zeros(2, np.int64)
        self.counts = np.zeros(5, np.int64)
        self.walked_last = np.zeros(ADDRESS + 1, np.uint8)

    @property
    def done(self) -> bool:
        """The whole range has been walked."""
        return bool(self.state[1])

    def scan(self, blk: BlockColumns, max_entries: int) -> None:
        """Fill ``blk``'s rows and entries with the next block (at least ``max_entries`` walked, or the rest)."""
        s = self.stamps
        before = int(self.counts[C_TOTAL])
        rows, entries, rc = scan_entries(
            s.pages, s.pg, s.ix, s.nk, s.info, self.state, self.lo, self.hi, self.has_hi, self.excluded,
            self.consensus, max_entries, blk.row_addr, blk.row_type, blk.ent_row, blk.ent_batch, self.counts,
            self.walked_last,
        )  # fmt: skip
        if rc < 0:
            raise DirectReadError(f"stamp index: {ERRORS.get(rc, rc)}")
        blk.rows, blk.entries, blk.walked = rows, entries, int(self.counts[C_TOTAL]) - before

    def locate(self, blk: BlockColumns) -> None:
        """Fill ``blk.where`` (and the tails copied out of the index) for its rows."""
        c, t = self.chunks, self.tails
        rc = locate_rows(c.pages, c.pg, c.ix, c.nk, c.info, t.pages, t.pg, t.ix, t.nk, t.info, blk.row_addr, blk.rows,
                         blk.where, blk.tails)  # fmt: skip
        if rc < 0:
            raise DirectReadError(f"chunk index: {ERRORS.get(rc, rc)}")

    def counters(self) -> dict[str, float]:
        """What the walk counted, by the sample's names for it."""
        return counters(self.counts)


def counters(counts: np.ndarray) -> dict[str, float]:
    """The walk's ``counts`` slots by the sample's names for them."""
    return {
        "total_iterated": int(counts[C_TOTAL]),
        "below_balance_ignored": int(counts[C_BELOW]),
        "rogue_chunks": int(counts[C_ROGUE]),
        "new_ignored": int(counts[C_NEW]),
        "distinct_chunks": int(counts[C_DISTINCT]),
    }


def warm_up() -> None:
    """Compile (or load from numba's cache) every function with the argument types the scan uses.

    Called at import: the sampler's fork server imports this module, so the
    worker processes it forks start with the machine code in place.
    """
    from .lmdbfile import MAX_DEPTH

    cursor = (np.zeros((MAX_DEPTH, 4096), np.uint8), *(np.zeros(MAX_DEPTH, np.int64) for _ in range(3)), np.zeros(8, np.int64))
    where = np.zeros((1, 6), np.int64)
    rows = np.zeros((1, ADDRESS), np.uint8)
    finished = np.array([1, 1], np.int64)
    key = np.zeros(ADDRESS, np.uint8)
    scan_entries(*cursor, finished, key, key.copy(), True, np.zeros((0, ADDRESS), np.uint8), np.uint64(0), 1,
                 rows, np.zeros(1, np.uint8), np.zeros(1, np.int64), rows.copy(), np.zeros(5, np.int64),
                 np.zeros(ADDRESS + 1, np.uint8))  # fmt: skip
    tails = np.zeros((1, TAIL_ROOM), np.uint8)
    locate_rows(*cursor, *cursor, rows, 0, where, tails)
    cached(-1, where, 0, 1)
    placed = np.zeros(1, np.uint8)
    prefetch(-1, where, 0, 4096, placed)
    buf = np.zeros((1, ROW_BYTES), np.uint8)
    plan_direct(where, 0, 4096, 1, placed)
    read_direct(-1, where, 0, 4096, buf, placed, np.zeros(4096, np.uint8))
    at = np.zeros(1, np.int64)
    place_rows(-1, where, tails, 0, 4096, buf, ReadOnlyMap.empty(), placed, at, at, placed, at, at, at, at)


warm_up()
