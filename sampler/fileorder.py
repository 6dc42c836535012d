"""Phase 1 of a cold shard whose chunks lie scattered over its file: hashed in file order.

A store grown by puts in random order (a node's reserve, filled as chunks
arrive) holds each chunk's head page wherever LMDB had a free page when it
was written. Read in key order, those pages are random reads, and a disk that
answers about 18,000 of them a second takes minutes over a full
neighbourhood, where a sequential read of the same file takes seconds. Phase
1 does not need key order: it keeps the ``k`` smallest transformed
addresses. So a cold, scattered shard is sampled in three passes under the
scan's one read transaction:

1. **walk**: the index is walked in key order (``columns.scan_entries`` and
   ``columns.locate_rows``, as the direct scan walks it) and no chunk is read:
   each row keeps where its head and tail are, a few dozen bytes a row;
2. **hash**: the rows are sorted by the position of their heads, and the head
   pages are read in that order in large reads around the page cache
   (``O_DIRECT``) and hashed where they landed; tails and heads stored inline
   are read through the read-only map of the file (they lie in index pages
   the walk has just read, so they are cached). Each row keeps the first 8
   bytes of its transformed address and its verdict, and the rows that may
   still be among the ``k`` smallest keep the whole address;
3. **offer**: the stamp index is walked again (cached now) and each block is
   offered to the candidate set as the direct scan offers it, its
   transformed addresses taken from pass 2. So the candidates, the counters
   and the set's completeness are the direct scan's, whatever the order the
   chunks were hashed in.

A shard of more than ``SEGMENT_ROWS`` rows is done in regions of its file,
each holding at most about that many rows' heads (from a histogram the
first walk makes): each region walks the index again and keeps only its own
rows, so the file is still read once, in order, and memory stays bounded;
the extra walks read index pages the first one left cached.

A row that is not kept whole is offered with its true 8-byte prefix and
``0xff`` after it. That cannot change the result: such a row's prefix is
above the ``k``-th smallest prefix of the rows that are kept (pass 2 keeps
every row at or below the running ``k``-th smallest prefix above ``after``,
and every row whose prefix ties ``after``'s), so its key is above at least
``k`` genuine keys whichever bytes follow, and whether its key is above
``after`` is decided by the prefix alone.

Memory: the walk's columns of one block, ``ROW_STATE`` bytes a row of a
region (and 32 more a SOC), and ``STAGES`` read buffers of ``STAGE_PAGES``
pages.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from chunkstore.store.mapped import ReadOnlyMap
from chunkstore.swarm.bmt import backend as hashing
from chunkstore.swarm.bmt.numba_kernels import _jit
from chunkstore.swarm.constants import ADDRESS_SIZE, MAX_CAC_SIZE, SOC_HEADER_SIZE, SPAN_SIZE
from chunkstore.swarm.directio import aligned_buffer, open_direct
from chunkstore.swarm.libc import sys_memcpy

from . import columns as col
from .blocks import BlockColumns
from .candidates import CandidateSet, Key
from .lmdbfile import E_PAGE, E_READ, ERRORS, OK, PAGEHDRSZ, DirectReadError, sys_pread

log = logging.getLogger(__name__)

SEGMENT_ROWS = 1 << 18  # rows a region of the file holds, about, at most: ROW_STATE MiB per 2^20 rows
HISTOGRAM = 4096  # buckets of the file's pages the first walk counts rows in, to cut the file into regions
STAGE_PAGES = 256  # pages per read buffer (1 MiB, as fast here as larger reads): heads read in file order
STAGES = 3  # read buffers: one hashed while the others are filled
READERS = 2  # threads reading batches: reads in flight
BATCH = 1024  # rows hashed per kernel call
# Rows hashed between two releases of the map's pages (tails and inline heads, in index leaves). Not
# fewer: in file order every few thousand rows touch most of the tails' leaves again, and releasing
# every 4,096 rows cost a shard a fifth of its time in page faults.
RELEASE_ROWS = 1 << 16
MIN_ROWS = 256  # a first block with fewer rows is not worth a probe: the shard is small
COLD_PROBES = 64  # heads of the first block probed for being in the page cache
# Share of them not cached that makes the shard cold: with a fifth of its pages to read at random (18,000 a
# second here), a shard takes about as long in key order as in file order (the whole file, sequentially).
COLD_SHARE = 0.25
# "auto": cold scattered shards; "always" or "never" (tests, and benchmarks comparing the two ways)
FILE_ORDER = os.environ.get("CHUNKSTORE_SAMPLE_FILE_ORDER", "auto").strip().lower()
if FILE_ORDER not in ("auto", "always", "never"):
    # A knob for tests and benchmarks: a typo must not silently turn file order off, nor stop a node.
    log.warning("CHUNKSTORE_SAMPLE_FILE_ORDER=%r is none of auto, always, never: using auto", FILE_ORDER)
    FILE_ORDER = "auto"
_CAC_MIN, _CAC_MAX = SPAN_SIZE, MAX_CAC_SIZE
_MAX_PREFIX = np.uint64((1 << 64) - 1)
_TOO_LONG = (1 << 16) - 1  # longer than any row (columns.ROW_BYTES): a head or tail of this size fails its load
_UNMAPPED = ReadOnlyMap.empty()


# ------------------------------------------------------------------ the numba half


@_jit
def keep_rows(where: np.ndarray, row_type: np.ndarray, row_addr: np.ndarray, n: int, ordinal: int, psize: int,
              lo_page: int, hi_page: int, keep: bool, rows: int, soc: int, histogram: np.ndarray, bucket_pages: int,
              head_kind: np.ndarray, head_pos: np.ndarray, head_size: np.ndarray, tail_pos: np.ndarray,
              tail_size: np.ndarray, soc_slot: np.ndarray, soc_addr: np.ndarray, ordinals: np.ndarray,
              ) -> tuple[int, int]:  # fmt: skip
    """Pass 1: keep the rows of a located block whose heads lie in pages ``lo_page..hi_page`` (if ``keep``).

    The block's rows are the walk's rows ``ordinal..ordinal + n``; a kept row
    goes to the segment's row ``rows`` onwards (with its ordinal), a SOC's
    address (its hash needs it) to ``soc_addr[soc]`` onwards: both must have
    room for ``n`` more. A missing chunk counts as page 0. Every row is
    counted in ``histogram`` (``bucket_pages`` pages a bucket). Returns the
    rows and SOCs kept in all.
    """
    last = histogram.shape[0] - 1
    for i in range(n):
        page = where[i, 1] // psize if where[i, 0] != col.MISSING else 0
        histogram[min(page // bucket_pages, last)] += 1
        if not keep or page < lo_page or page >= hi_page:
            continue
        r = rows
        rows += 1
        ordinals[r] = ordinal + i
        head_kind[r] = where[i, 0]
        head_pos[r] = where[i, 1]
        head_size[r] = min(where[i, 2], _TOO_LONG)  # a size of a damaged store must not wrap in a uint16
        if where[i, 3] == col.MISSING:
            tail_pos[r], tail_size[r] = 0, 0
        else:
            tail_pos[r], tail_size[r] = where[i, 4], min(where[i, 5], _TOO_LONG)
        if row_type[i] == col.SOC:
            soc_slot[r] = soc
            for b in range(ADDRESS_SIZE):
                soc_addr[soc, b] = row_addr[i, b]
            soc += 1
        else:
            soc_slot[r] = -1
    return rows, soc


@_jit
def plan_reads(order: np.ndarray, start: int, total: int, head_kind: np.ndarray, head_pos: np.ndarray,
               head_size: np.ndarray, tail_size: np.ndarray, row_room: int, psize: int, room: int, max_rows: int,
               spans: np.ndarray) -> tuple[int, int]:  # fmt: skip
    """Pass 2: the next rows (in file order, ``order[start:]``) whose heads fit one read buffer of ``room`` pages.

    Heads on overflow pages at most ``col.MAX_GAP`` pages apart share a span:
    ``spans[s] = (first page, pages, page in the buffer)``; the pages between
    them come along. Rows without an overflow head (inline, missing) need no
    span, nor do rows that will not be read (``columns.row_status``: data
    longer than ``row_room``), so a read buffer always takes the next head.
    Returns ``(rows, spans)``.
    """
    rows = 0
    nspans = 0
    used = 0
    last = np.int64(-1)
    while start + rows < total and rows < max_rows:
        r = order[start + rows]
        if head_kind[r] == col.OVERFLOW and col.row_status(head_kind[r], head_size[r], tail_size[r], row_room) == 1:
            first = (head_pos[r] - PAGEHDRSZ) // psize
            end = (head_pos[r] + head_size[r] + psize - 1) // psize  # one past the head's last page
            if nspans and first <= last + col.MAX_GAP + 1:
                grow = max(end - 1, last) - last
                if used + grow > room:
                    break
                spans[nspans - 1, 1] += grow
                used += grow
                last += grow
            else:
                if used + (end - first) > room:
                    break
                spans[nspans, 0], spans[nspans, 1], spans[nspans, 2] = first, end - first, used
                nspans += 1
                used += end - first
                last = end - 1
        rows += 1
    return rows, nspans


@_jit
def read_spans(fd: int, spans: np.ndarray, nspans: int, psize: int, stage: np.ndarray) -> int:
    """Read each planned span into its place in ``stage``: OK, or E_READ for a failed or short read."""
    base = stage.ctypes.data
    for s in range(nspans):
        want = spans[s, 1] * psize
        if sys_pread(fd, base + spans[s, 2] * psize, want, spans[s, 0] * psize) != want:
            return E_READ
    return OK


@_jit
def place_heads(order: np.ndarray, start: int, rows: int, head_kind: np.ndarray, head_pos: np.ndarray,
                head_size: np.ndarray, tail_pos: np.ndarray, tail_size: np.ndarray, soc_slot: np.ndarray,
                soc_addr: np.ndarray, spans: np.ndarray, nspans: int, psize: int, stage: np.ndarray,
                mapped: np.ndarray, room: int, verdict: np.ndarray, hashed: np.ndarray, head_at: np.ndarray,
                head_len: np.ndarray, tail_at: np.ndarray, tail_len: np.ndarray, is_soc: np.ndarray,
                socs: np.ndarray) -> tuple[int, int]:  # fmt: skip
    """Pass 2: where each planned row's span and payload are in memory, for the hash; its verdict.

    Heads on overflow pages are in ``stage`` (read by :func:`read_spans`;
    each page's header must name it), inline heads and every tail in
    ``mapped``. The rows that can be hashed are listed in ``hashed`` (their
    segment rows) with their pieces (a SOC's after its header); ``verdict``
    gets 1 for them, 0 for a missing chunk, -1 for data that is no chunk of
    the row's type (the direct scan's rules). Returns ``(OK, rows to hash)``,
    or an error code (never hashed: the caller falls back).
    """
    mapped_at = mapped.ctypes.data
    mapped_len = mapped.shape[0]
    staged = stage.ctypes.data
    s = 0
    g = 0
    for j in range(rows):
        r = order[start + j]
        kind, pos, size = head_kind[r], head_pos[r], head_size[r]
        tsize = tail_size[r]
        verdict[r] = col.row_status(kind, size, tsize, room)
        if verdict[r] != 1:
            continue
        if kind == col.OVERFLOW:
            pgno = (pos - PAGEHDRSZ) // psize
            while s < nspans and pgno >= spans[s, 0] + spans[s, 1]:
                s += 1
            if s == nspans or pgno < spans[s, 0]:
                return E_READ, 0
            page = staged + (spans[s, 2] + pgno - spans[s, 0]) * psize
            if not col.overflow_page_ok(page, pgno):
                return E_PAGE, 0
            at = page + PAGEHDRSZ
        else:
            if pos + size > mapped_len:
                return E_READ, 0
            at = mapped_at + pos
        if tsize and tail_pos[r] + tsize > mapped_len:
            return E_READ, 0
        skip = SOC_HEADER_SIZE if soc_slot[r] >= 0 else 0
        data = size + tsize - skip
        if data < _CAC_MIN or data > _CAC_MAX or size - skip < _CAC_MIN:
            verdict[r] = -1
            continue
        hashed[g] = r
        head_at[g], head_len[g] = at + skip, size - skip
        tail_at[g], tail_len[g] = (mapped_at + tail_pos[r], tsize) if tsize else (at + skip, 0)
        is_soc[g] = 1 if skip else 0
        if skip:
            sys_memcpy(socs.ctypes.data + g * socs.strides[0], soc_addr.ctypes.data + soc_slot[r] * soc_addr.strides[0],
                       ADDRESS_SIZE)  # fmt: skip
        g += 1
    return OK, g


# ------------------------------------------------------------------ the passes


def _next_block(walk: col.IndexWalk, blk: BlockColumns, block: int, locate: bool) -> bool:
    """Walk one block (located if ``locate``); False once the range is done and nothing was walked."""
    walk.scan(blk, block)
    if locate and blk.rows:
        walk.locate(blk)
    return bool(blk.rows or blk.walked or not walk.done)


def worth_file_order(fd: int, txn_id: int, key_range: tuple[bytes, bytes | None], excluded: frozenset[bytes],
                     consensus_time: int, block: int, slack: int, direct_run: int,
                     direct_share: float) -> bool:  # fmt: skip
    """Is the shard cold and its chunks scattered? Judged on its first block, as the direct scan judges blocks.

    Cold: at least ``COLD_SHARE`` of ``COLD_PROBES`` heads spread over the
    block are not in the page cache (``columns.uncached_share``): a mostly
    cached shard reads its few missing pages faster in key order than the
    whole file in file order. Scattered: fewer than ``direct_share`` of its rows
    lie in runs of ``direct_run`` heads that follow each other in the file
    (``columns.plan_direct``), which the direct scan reads in large reads
    anyway. ``FILE_ORDER`` forces the answer either way.
    """
    if FILE_ORDER != "auto":
        return FILE_ORDER == "always"
    walk = col.IndexWalk(fd, txn_id, key_range, excluded, consensus_time)
    blk = BlockColumns(block + slack)
    _next_block(walk, blk, block, locate=True)
    n = blk.rows
    if n < MIN_ROWS or col.uncached_share(fd, blk.where, n, COLD_PROBES) < COLD_SHARE:
        return False
    runs = col.plan_direct(blk.where, n, walk.psize, direct_run, np.zeros(n, np.uint8))
    return bool(runs < direct_share * n)


class _Segment:
    """What pass 1 keeps of each row of a region, and what pass 2 makes of it (``ROW_STATE`` bytes a row)."""

    def __init__(self, cap: int) -> None:
        self.head_kind = np.zeros(cap, np.uint8)
        # Where the row's head is in the file; once pass 2 has hashed the row (it reads the position no more),
        # the first 8 bytes of its transformed address as a number, which pass 3 offers: 8 bytes a row fewer.
        self.head_pos = np.zeros(cap, np.int64)
        self.head_size = np.zeros(cap, np.uint16)
        self.tail_pos = np.zeros(cap, np.int64)
        self.tail_size = np.zeros(cap, np.uint16)
        self.soc_slot = np.zeros(cap, np.int32)
        self.ordinal = np.zeros(cap, np.uint32)  # the row's place in the walk (rows come in key order)
        self.verdict = np.zeros(cap, np.int8)
        self.soc_addr = np.zeros((64, 32), np.uint8)  # grown as SOCs come
        self.rows = self.socs = self.walked = 0

    def row_columns(self) -> dict[str, np.ndarray]:
        """The columns with one item a row (every one-dimensional array here)."""
        return {name: a for name, a in vars(self).items() if isinstance(a, np.ndarray) and a.ndim == 1}

    def room_for(self, n: int) -> None:
        """Grow the columns so that ``n`` more rows (and SOCs) fit: a region denser than the histogram said."""
        if self.rows + n > self.head_kind.shape[0]:
            cap = max(2 * self.head_kind.shape[0], self.rows + n)
            for name, old in self.row_columns().items():
                grown = np.zeros(cap, old.dtype)
                grown[: self.rows] = old[: self.rows]
                setattr(self, name, grown)
        if self.socs + n > self.soc_addr.shape[0]:
            grown_socs = np.zeros((max(2 * self.soc_addr.shape[0], self.socs + n), 32), np.uint8)
            grown_socs[: self.socs] = self.soc_addr[: self.socs]
            self.soc_addr = grown_socs


# Bytes a region keeps per row: its columns, and the int64 permutation pass 2 sorts them by. 32 more a SOC.
ROW_STATE = sum(a.itemsize for a in _Segment(0).row_columns().values()) + np.dtype(np.int64).itemsize


class _Kept:
    """The rows of pass 2 that may be among the ``k`` smallest: their whole transformed addresses."""

    def __init__(self, k: int, after: Key | None) -> None:
        self.k = k
        self.after_prefix = np.uint64(int.from_bytes(after[0][:8], "big")) if after is not None else None
        self.smallest = np.zeros(0, np.uint64)  # the k smallest prefixes above after's, sorted
        self.rows: list[np.ndarray] = []
        self.taddrs: list[np.ndarray] = []
        self.held = 0

    def threshold(self) -> np.uint64:
        return self.smallest[self.k - 1] if self.smallest.shape[0] >= self.k else _MAX_PREFIX

    def offer(self, rows: np.ndarray, prefixes: np.ndarray, taddrs: np.ndarray) -> None:
        """Rows of one hashed batch (all good), their prefixes and transformed addresses."""
        above = prefixes if self.after_prefix is None else prefixes[prefixes > self.after_prefix]
        if above.shape[0]:
            self.smallest = np.sort(np.concatenate((self.smallest, above)))[: self.k]
        pick = self._picked(prefixes)
        if pick.any():
            self.rows.append(rows[pick].copy())
            self.taddrs.append(taddrs[pick].copy())
            self.held += int(np.count_nonzero(pick))
            if self.held > 4 * self.k:
                self._prune()

    def _picked(self, prefixes: np.ndarray) -> np.ndarray:
        pick = prefixes <= self.threshold()
        if self.after_prefix is not None:
            pick &= prefixes >= self.after_prefix
        return pick

    def _prune(self) -> None:
        rows, taddrs = np.concatenate(self.rows), np.concatenate(self.taddrs)
        pick = self._picked(np.ascontiguousarray(taddrs[:, :8]).view(">u8").ravel().astype(np.uint64))
        self.rows, self.taddrs = [rows[pick]], [taddrs[pick]]
        self.held = int(np.count_nonzero(pick))

    def sorted(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows ascending, their transformed addresses); clears the set for the next segment."""
        if not self.rows:
            return np.zeros(0, np.int64), np.zeros((0, 32), np.uint8)
        rows, taddrs = np.concatenate(self.rows), np.concatenate(self.taddrs)
        order = np.argsort(rows, kind="stable")
        self.rows, self.taddrs, self.held = [], [], 0
        return rows[order], taddrs[order]


def scan_file_order(
    fd: int,
    data_file: str,
    txn_id: int,
    key_range: tuple[bytes, bytes | None],
    anchor: bytes,
    excluded: frozenset[bytes],
    consensus_time: int,
    k: int,
    after: Key | None,
    block: int,
    slack: int,
    report: Callable[[int], None] | None = None,
) -> tuple[CandidateSet, dict[str, float]]:
    """Phase 1 of one shard in file order (see the module's docstring): the candidates and the scan's counters.

    ``block``/``slack`` must be the direct scan's, so that both walk the same
    blocks. Raises ``DirectReadError`` when the file is not what the reader
    expects (the caller falls back to the row scan).
    """
    t_start = time.perf_counter()
    cands = CandidateSet(k, after)
    kept = _Kept(k, after)

    def new_walk() -> col.IndexWalk:
        return col.IndexWalk(fd, txn_id, key_range, excluded, consensus_time)

    first = new_walk()
    psize = first.psize
    seg = _Segment(min(SEGMENT_ROWS, first.total_entries) + block + slack)
    blk = BlockColumns(block + slack)
    histogram = np.zeros(HISTOGRAM, np.int64)
    bucket_pages = max(1, -(-(first.last_pg + 1) // HISTOGRAM))
    view = ReadOnlyMap(fd)
    dfd, _direct = open_direct(data_file, os.O_RDONLY)
    readers = ThreadPoolExecutor(READERS, thread_name_prefix="sample-file-order")
    stats: dict[str, float] = {"chunk_loads": 0, "chunk_load_failed": 0, "file_order_rows": 0, "file_order_regions": 0}
    taddr_s = load_s = 0.0
    try:
        # The first walk keeps every row while they fit, and counts them all by page either way.
        whole = _walk_region(first, blk, block, seg, 0, _NO_PAGE, SEGMENT_ROWS, histogram, bucket_pages)
        progress = _Progress(int(first.counts[col.C_TOTAL]), int(histogram.sum()), report)
        regions = [(0, _NO_PAGE)] if whole else _regions(histogram, bucket_pages, SEGMENT_ROWS)
        for lo, hi in regions:
            if not whole:
                _walk_region(new_walk(), blk, block, seg, lo, hi, None, np.zeros(1, np.int64), _NO_PAGE)
            t = time.perf_counter()
            hashed_s = _hash_segment(seg, psize, view, fd, dfd, readers, anchor, kept, progress)
            load_s += time.perf_counter() - t - hashed_s
            taddr_s += hashed_s
            _offer_segment(new_walk(), blk, block, seg, kept, cands, stats)
            stats["file_order_rows"] += seg.rows
            stats["file_order_regions"] += 1
        progress.finish()
    except DirectReadError as exc:
        raise DirectReadError(f"{data_file}: {exc}") from None
    finally:
        readers.shutdown(wait=True)  # no read may still be writing into a buffer
        os.close(dfd)
        view.close()
    elapsed = time.perf_counter() - t_start
    stats.update({
        **first.counters(),
        "taddr_duration": taddr_s,
        "chunk_load_duration": load_s,
        "iteration_duration": max(0.0, elapsed - taddr_s - load_s),
    })  # fmt: skip
    return cands, stats


_NO_PAGE = 1 << 62  # above any page


class _Progress:
    """Reports the walked entries as the rows are hashed, whatever region they are in."""

    def __init__(self, walked: int, rows: int, report: Callable[[int], None] | None) -> None:
        self.walked, self.rows, self.report = walked, rows, report
        self.hashed = self.reported = 0

    def rows_hashed(self, n: int) -> None:
        self.hashed += n
        if self.report is not None and self.rows:
            due = self.walked * min(self.hashed, self.rows) // self.rows
            if due > self.reported:
                self.report(due - self.reported)
                self.reported = due

    def finish(self) -> None:
        if self.report is not None and self.walked > self.reported:
            self.report(self.walked - self.reported)
            self.reported = self.walked


def _regions(histogram: np.ndarray, bucket_pages: int, rows: int) -> list[tuple[int, int]]:
    """Cut the file into page ranges of at most about ``rows`` rows each (whole buckets of the histogram)."""
    out = []
    lo = 0
    held = 0
    for b, count in enumerate(histogram.tolist()):
        if held and held + count > rows:
            out.append((lo, b * bucket_pages))
            lo, held = b * bucket_pages, 0
        held += count
    out.append((lo, _NO_PAGE))
    return out


def _walk_region(walk: col.IndexWalk, blk: BlockColumns, block: int, seg: _Segment, lo_page: int, hi_page: int,
                 cap: int | None, histogram: np.ndarray, bucket_pages: int) -> bool:  # fmt: skip
    """Pass 1: walk the whole range, keeping the rows whose heads lie in pages ``lo_page..hi_page``.

    With a ``cap``, rows are kept only while the segment holds at most that
    many; returns False if some were left out then (the walk still counts
    every row in ``histogram``).
    """
    seg.rows = seg.socs = seg.walked = 0
    keep = True
    ordinal = 0
    while _next_block(walk, blk, block, locate=True):
        n = blk.rows
        seg.walked += blk.walked
        if keep and cap is not None and seg.rows + n > cap:
            keep = False
        if keep:
            seg.room_for(n)
        seg.rows, seg.socs = keep_rows(
            blk.where, blk.row_type, blk.row_addr, n, ordinal, walk.psize, lo_page, hi_page, keep, seg.rows,
            seg.socs, histogram, bucket_pages, seg.head_kind, seg.head_pos, seg.head_size, seg.tail_pos,
            seg.tail_size, seg.soc_slot, seg.soc_addr, seg.ordinal,
        )  # fmt: skip
        ordinal += n
    if ordinal >= 1 << 32:
        raise DirectReadError("more rows in one walk than a region can number")
    return keep


def _hash_segment(seg: _Segment, psize: int, view: ReadOnlyMap, fd: int, dfd: int, readers: ThreadPoolExecutor,
                  anchor: bytes, kept: _Kept, progress: _Progress) -> float:  # fmt: skip
    """Pass 2: hash the segment's rows in the order of their heads in the file; returns the seconds hashing.

    ``dfd`` reads around the page cache where the file system allows it, ``fd`` through it.
    """
    n = seg.rows
    order = np.argsort(seg.head_pos[:n], kind="stable")
    room = col.ROW_BYTES - col.DATA_AT  # the direct scan's limit on a row's data
    head_at, head_len, tail_at, tail_len = (np.zeros(BATCH, np.int64) for _ in range(4))
    hashed = np.zeros(BATCH, np.int64)
    is_soc = np.zeros(BATCH, np.uint8)
    socs = np.zeros((BATCH, 32), np.uint8)
    out = np.zeros((BATCH, 32), np.uint8)
    free = [aligned_buffer(STAGE_PAGES * psize) for _ in range(STAGES)]
    pending: deque[tuple[int, int, np.ndarray, int, np.ndarray, Future[int]]] = deque()
    mapped = view.array
    hashing_s = 0.0
    planned = unreleased = 0
    failed_direct = False

    def plan() -> None:
        nonlocal planned
        stage = free.pop()
        spans = np.zeros((BATCH, 3), np.int64)
        rows, nspans = plan_reads(order, planned, n, seg.head_kind, seg.head_pos, seg.head_size, seg.tail_size, room,
                                  psize, STAGE_PAGES, BATCH, spans)  # fmt: skip
        reader = fd if failed_direct else dfd
        reading = readers.submit(read_spans, reader, spans, nspans, psize, stage)
        pending.append((planned, rows, spans, nspans, stage, reading))
        planned += rows

    try:
        while planned < n and free:
            plan()
        while pending:
            start, rows, spans, nspans, stage, reading = pending.popleft()
            rc = reading.result()
            if rc != OK and dfd != fd:
                # A file system that took O_DIRECT at open but not these reads: through the page cache, then.
                if not failed_direct:
                    log.warning("reads around the page cache failed; reading through it")
                failed_direct = True
                rc = read_spans(fd, spans, nspans, psize, stage)
            if rc != OK:
                raise DirectReadError(f"chunk data: {ERRORS.get(rc, rc)}")
            rc, g = place_heads(order, start, rows, seg.head_kind, seg.head_pos, seg.head_size, seg.tail_pos,
                                seg.tail_size, seg.soc_slot, seg.soc_addr, spans, nspans, psize, stage, mapped, room,
                                seg.verdict, hashed, head_at, head_len, tail_at, tail_len, is_soc, socs)  # fmt: skip
            if rc != OK:
                raise DirectReadError(f"chunk data: {ERRORS.get(rc, rc)}")
            if g:
                t = time.perf_counter()
                hashing.transformed_addresses_at(head_at[:g], head_len[:g], tail_at[:g], tail_len[:g], socs[:g],
                                                 is_soc[:g], anchor, out)  # fmt: skip
                hashing_s += time.perf_counter() - t
                prefixes = np.ascontiguousarray(out[:g, :8]).view(">u8").ravel().astype(np.uint64)
                seg.head_pos[hashed[:g]] = prefixes.view(np.int64)  # see _Segment.head_pos
                kept.offer(hashed[:g], prefixes, out[:g])
            free.append(stage)
            if planned < n:
                plan()
            progress.rows_hashed(rows)
            unreleased += rows
            if unreleased >= RELEASE_ROWS:
                view.release()  # the index pages mapped leave this process's resident set (not the page cache)
                unreleased = 0
    finally:
        mapped = _UNMAPPED  # a traceback through this frame must not keep the map from closing
        for *_, reading in pending:
            reading.cancel()
        for *_, reading in pending:
            if not reading.cancelled():
                reading.result()
    return hashing_s


def _offer_segment(walk: col.IndexWalk, blk: BlockColumns, block: int, seg: _Segment, kept: _Kept,
                   cands: CandidateSet, stats: dict[str, float]) -> None:  # fmt: skip
    """Pass 3: walk the blocks again and offer the region's rows, as the direct scan offers a hashed block."""
    kept_rows, kept_taddrs = kept.sorted()
    cap = blk.row_addr.shape[0]
    out = np.zeros((cap, 32), np.uint8)
    verdict = np.zeros(cap, np.int8)
    ours = np.zeros(cap, bool)
    ordinals = seg.ordinal[: seg.rows]
    base = 0
    offered = 0
    while _next_block(walk, blk, block, locate=False):
        n, m = blk.rows, blk.entries
        lo, hi = (int(x) for x in np.searchsorted(ordinals, [base, base + n]))
        if hi > lo:
            at = ordinals[lo:hi].astype(np.int64) - base  # the region's rows' places in the block
            ours[:n] = False
            ours[at] = True
            verdict[:n] = 0
            verdict[at] = seg.verdict[lo:hi]
            good = verdict[:n] == 1
            out[at, :8] = seg.head_pos[lo:hi].view(np.uint64).astype(">u8").view(np.uint8).reshape(-1, 8)
            out[at, 8:] = 0xFF
            klo, khi = np.searchsorted(kept_rows, [lo, hi])
            out[ordinals[kept_rows[klo:khi]].astype(np.int64) - base] = kept_taddrs[klo:khi]
            per_row = np.bincount(blk.ent_row[:m], minlength=n)[:n]
            stats["chunk_loads"] += int(np.count_nonzero(good)) + int(per_row[ours[:n] & ~good & (verdict[:n] != 0)].sum())
            stats["chunk_load_failed"] += int(per_row[ours[:n] & ~good].sum())
            keep = good[blk.ent_row[:m]]
            cands.offer_block(out[:n], blk.ent_row[:m][keep], blk.ent_batch[:m][keep], blk.row_addr[:n],
                              blk.row_type[:n])  # fmt: skip
            offered += hi - lo
        base += n
    if offered != seg.rows:
        raise DirectReadError("the stamp index changed between two walks of one snapshot")


def warm_up() -> None:
    """Compile (or load from numba's cache) the pass kernels with the argument types the scan uses."""
    seg = _Segment(1)
    where = np.zeros((1, 6), np.int64)
    row = np.zeros((1, 32), np.uint8)
    keep_rows(where, np.zeros(1, np.uint8), row, 0, 0, 4096, 0, 1, True, 0, 0, np.zeros(1, np.int64), 1,
              seg.head_kind, seg.head_pos, seg.head_size, seg.tail_pos, seg.tail_size, seg.soc_slot, seg.soc_addr,
              seg.ordinal)  # fmt: skip
    order = np.zeros(1, np.int64)
    spans = np.zeros((1, 3), np.int64)
    plan_reads(order, 0, 0, seg.head_kind, seg.head_pos, seg.head_size, seg.tail_size, 1, 4096, 1, 1, spans)
    stage = np.zeros(4096, np.uint8)
    read_spans(-1, spans, 0, 4096, stage)
    at = np.zeros(1, np.int64)
    place_heads(order, 0, 0, seg.head_kind, seg.head_pos, seg.head_size, seg.tail_pos, seg.tail_size, seg.soc_slot,
                seg.soc_addr, spans, 0, 4096, stage, ReadOnlyMap.empty(), 1, seg.verdict, at, at, at, at, at,
                np.zeros(1, np.uint8), row)  # fmt: skip


warm_up()
