"""Sorted runs: how a bulk import collects validated records and hands them back in key order.

Records go into a ``RunBuffer``: a byte arena for the chunk data and a
structured index array (one row per record: sort key, ordinal, arena offset,
length, chunk type, timestamp and signature), both allocated once at a fixed
size, filled by whole frames with numpy column copies. When it is full it is
sorted (one argsort of the key column) and spilled to disk as a run: its
index rows, its data in the same order, and the same records as slot rows
sorted by slot key then ordinal. The last run stays in memory.

The sort key is ``shard(1) | address(32) | batch id(32) | stamp index(8)``:
a shard's rows come out in the order of its ``chunks`` and ``stamps``
databases, which lets the writer append. ``merge_blocks`` merges runs block
by block: the smallest of the runs' window ends is the cutoff, and every
row up to it is handed out, from every run, in one block.

The index row is laid out so that bytes 91..165 (``kind | timestamp |
signature``) are exactly a stamp entry's value in the store (layout.py).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from chunkstore.swarm.bmt import ROW_STRIDE
from chunkstore.swarm.constants import STAMP_SIZE
from chunkstore.swarm.directio import ALIGN, aligned_buffer, anonymous_array, open_direct

from .bytecopy import gather

SPILL_BLOCK = 4 << 20  # bytes of records gathered per write when a run is spilled

KEY_SIZE = 73
INDEX = np.dtype([("key", "S73"), ("ord", "<u8"), ("off", "<u8"), ("len", "<u2"), ("kind", "u1"), ("tail", "V73")])
ROW = INDEX.itemsize
_FIELDS = INDEX.fields
assert _FIELDS is not None  # a structured dtype has fields
KIND_AT: int = _FIELDS["kind"][1]  # kind | tail = the store's stamp value
TAIL_AT: int = _FIELDS["tail"][1]
STAMP_VALUE = slice(KIND_AT, ROW)
# Slot rows: what deciding the slot rule needs, sorted by slot key then ordinal (input order).
SLOT = np.dtype([("slot", "S40"), ("ord", "<u8"), ("ts", ">u8"), ("addr", "V32"), ("kind", "u1")])
# Byte ranges of the key.
ADDR = slice(1, 33)
SLOT_KEY = slice(33, 73)
ENTRY_KEY = slice(1, 73)
# Room for one row's chunk data in a publish window: the longest chunk, rounded as the hashing rows are.
ROW_DATA = ROW_STRIDE


def _raw(rows: np.ndarray) -> np.ndarray:
    """The rows of a structured array as a (n, itemsize) byte matrix (a view)."""
    return rows.view(np.uint8).reshape(len(rows), rows.dtype.itemsize)


class RunBuffer:
    """A fixed-size arena plus index, filled frame by frame, sorted and spilled when full."""

    def __init__(self, arena_bytes: int, max_rows: int) -> None:
        self.arena = anonymous_array(arena_bytes, np.uint8)
        self.index = anonymous_array(max_rows, INDEX)
        self.sorted = anonymous_array(max_rows, INDEX)  # the sort's target, so sorting allocates no rows
        self.slots = anonymous_array(max_rows, SLOT)
        self.rows = 0
        self.used = 0

    @property
    def capacity(self) -> tuple[int, int]:
        return len(self.index), len(self.arena)

    def fits(self, rows: int, nbytes: int) -> bool:
        return self.rows + rows <= len(self.index) and self.used + nbytes <= len(self.arena)

    def add(
        self,
        shards: np.ndarray,
        addresses: np.ndarray,
        stamps: np.ndarray,
        kinds: np.ndarray,
        ordinals: np.ndarray,
        src: np.ndarray,
        offsets: np.ndarray,
        lengths: np.ndarray,
    ) -> None:
        """Append n records; record i's data is ``src[offsets[i] : offsets[i] + lengths[i]]``."""
        n = len(lengths)
        if not n:
            return
        r0 = self.rows
        rows = self.index[r0 : r0 + n]
        raw = _raw(rows)
        raw[:, 0] = shards
        raw[:, ADDR] = addresses
        raw[:, SLOT_KEY] = stamps[:, :40]
        raw[:, TAIL_AT:ROW] = stamps[:, 40:STAMP_SIZE]
        rows["ord"] = ordinals
        rows["len"] = lengths
        rows["kind"] = kinds
        start, total = int(offsets[0]), int(lengths.sum())
        u = self.used
        if int(offsets[-1]) + int(lengths[-1]) - start == total and bool((np.diff(offsets) == lengths[:-1]).all()):
            # Back to back in the source (a snapshot frame): one copy for all.
            self.arena[u : u + total] = src[start : start + total]
            rows["off"] = offsets - start + u
        else:
            gather(src, offsets, lengths, self.arena, u)
            rows["off"][0] = u
            np.cumsum(lengths[:-1], out=rows["off"][1:])
            rows["off"][1:] += u
        self.rows += n
        self.used += total

    def _sort(self, shard_count: int) -> tuple[np.ndarray, list[int], np.ndarray]:
        n = self.rows
        order = np.argsort(self.index["key"][:n], kind="stable")
        srt = self.sorted[:n]
        np.take(self.index[:n], order, out=srt)
        counts = np.bincount(_raw(srt)[:, 0], minlength=shard_count)
        bounds = [0, *np.cumsum(counts).tolist()]
        slots = self.slots[:n]
        sraw = _raw(slots)
        raw = _raw(srt)
        sraw[:, 0:40] = raw[:, SLOT_KEY]
        slots["ord"] = srt["ord"]
        sraw[:, 48:56] = raw[:, TAIL_AT : TAIL_AT + 8]  # the stamp timestamp, big-endian as the field
        sraw[:, 56:88] = raw[:, ADDR]
        slots["kind"] = srt["kind"]
        slot_order = np.lexsort((slots["ord"], slots["slot"]))
        return srt, bounds, slots[slot_order]

    def spill(self, directory: str, number: int, shard_count: int) -> FileRun:
        """Sort, write the run to ``directory``, and empty the buffer for reuse."""
        srt, bounds, slots = self._sort(shard_count)
        base = os.path.join(directory, f"run-{number:05d}")
        offs, lens = srt["off"].astype(np.int64), srt["len"].astype(np.int64)
        block = aligned_buffer(SPILL_BLOCK + ALIGN)
        fd, direct = open_direct(base + ".dat", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            # The records in key order, gathered into blocks: one write per block, not per record. With
            # O_DIRECT only whole aligned pages are written: a block's unaligned end moves to the front of
            # the block and goes out with the next, and the last write is padded (the index has the lengths).
            ends = np.cumsum(lens)
            i, n, carry = 0, len(srt), 0
            while i < n:
                before = int(ends[i - 1]) if i else 0
                j = max(i + 1, int(np.searchsorted(ends, before + SPILL_BLOCK - carry, "right")))
                end = gather(self.arena, offs[i:j], lens[i:j], block, carry)
                out = end - end % ALIGN if direct and j < n else end
                if direct and j == n:
                    out = -(-end // ALIGN) * ALIGN
                    block[end:out] = 0
                _write_all(fd, block[:out])
                carry = max(0, end - out)
                if carry:
                    block[:carry] = block[out:end]
                i = j
        finally:
            os.close(fd)
        lengths = srt["len"].astype(np.uint64)
        srt["off"][0] = 0
        np.cumsum(lengths[:-1], out=srt["off"][1:])
        srt.tofile(base + ".idx")
        slots.tofile(base + ".slots")
        run = FileRun(base, self.rows, bounds)
        self.rows = 0
        self.used = 0
        return run

    def seal(self, shard_count: int) -> MemoryRun:
        """Sort in memory and keep the buffer as the last run (it is not reused after this)."""
        srt, bounds, slots = self._sort(shard_count)
        return MemoryRun(srt, slots, self.arena, bounds)


@dataclass
class Piece:
    """Rows handed out by one run in a merge block; ``data[off - base]`` is where row data starts."""

    rows: np.ndarray
    data: np.ndarray | None
    base: int


class Cursor:
    """Windowed read of one run's rows in order; ``keys`` is the window's sort column."""

    field = "key"

    def __init__(self) -> None:
        self.window: np.ndarray = np.empty(0, INDEX)
        self.pos = 0
        self.final = True

    def keys(self) -> np.ndarray:
        return self.window[self.field][self.pos :]

    def remaining(self) -> int:
        return len(self.window) - self.pos

    def refill(self) -> None:
        """Read on into the window: after it is used up, or (file cursors) once half of it is."""

    def take(self, k: int) -> Piece:
        rows = self.window[self.pos : self.pos + k]
        self.pos += k
        return Piece(rows, None, 0)


def _write_all(fd: int, data: np.ndarray) -> None:
    view = data.data
    while view:
        view = view[os.write(fd, view) :]


def merge_blocks(cursors: list[Cursor]) -> Iterator[list[Piece]]:
    """Merge sorted cursors block by block: each block holds every row up to a cutoff, from every run.

    The cutoff is the smallest window end among runs with rows beyond their
    window; rows equal to the cutoff may continue in the next block. Every
    cursor is topped up before each block (a file cursor reads on once half
    its window is used), so a block holds up to a window from each run.
    Refilling only emptied windows made blocks of about one window in all,
    and each block costs a fixed set of calls per run: with a hundred runs,
    merging cost more than writing. A block's rows are valid until the next
    one is asked for.
    """
    while True:
        for c in cursors:
            c.refill()
        live = [c for c in cursors if c.remaining()]
        if not live:
            return
        ends = [c.keys()[-1] for c in live if not c.final]
        cutoff = min(ends) if ends else None
        pieces = []
        for c in live:
            keys = c.keys()
            k = len(keys) if cutoff is None else int(np.searchsorted(keys, cutoff, side="right"))
            if k:
                pieces.append(c.take(k))
        yield pieces


class FileRun:
    """A run spilled to ``base.idx`` / ``base.dat`` / ``base.slots``."""

    def __init__(self, base: str, rows: int, bounds: list[int]) -> None:
        self.base = base
        self.rows = rows
        self.bounds = bounds
        self._fd: int | None = None  # of the data file, for reads by offset

    def slot_cursor(self, window: int) -> Cursor:
        return _FileCursor(self.base + ".slots", SLOT, "slot", 0, self.rows, window, None)

    def shard_cursor(self, s: int, window: int) -> Cursor:
        return _FileCursor(self.base + ".idx", INDEX, "key", self.bounds[s], self.bounds[s + 1], window, self.base + ".dat")

    def index_cursor(self, window: int) -> Cursor:
        return _FileCursor(self.base + ".idx", INDEX, "key", 0, self.rows, window, None)

    def read(self, off: int, length: int) -> bytes:
        if self._fd is None:
            self._fd = os.open(self.base + ".dat", os.O_RDONLY)
        return os.pread(self._fd, length, off)

    def remove(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        for ext in (".idx", ".dat", ".slots"):
            try:
                os.unlink(self.base + ext)
            except FileNotFoundError:
                pass


class _FileCursor(Cursor):
    def __init__(self, path: str, dtype: np.dtype, field: str, lo: int, hi: int, window: int, data: str | None) -> None:
        super().__init__()
        self.field = field
        self._path = data
        self._f = open(path, "rb")  # noqa: SIM115 - closed when the cursor is used up
        self._data: int | None = None
        self._direct = False
        if data:
            self._data, self._direct = open_direct(data, os.O_RDONLY)
        self._buf = np.empty(max(1, min(window, hi - lo)), dtype)
        # room for a window's data and, read with O_DIRECT, the aligned pages around it
        self._dbuf = aligned_buffer(len(self._buf) * ROW_DATA + 2 * ALIGN) if data else None
        self._next = lo
        self._hi = hi
        self._size = dtype.itemsize
        self.window = self._buf[:0]
        self.final = lo >= hi
        self._base = 0  # the data file offset of the buffer's first byte
        self._held = 0  # and the offset its bytes end at

    def refill(self) -> None:
        """Top the window up once half of it is used: keep the rows not taken yet, read on behind them.

        Topping up (rather than reading only an empty window) keeps every
        run's window nearly full, so a merge block holds about a window from
        each run instead of about one window in all (see ``merge_blocks``).
        """
        rest = self.remaining()
        if self._next >= self._hi:
            if not rest:
                self.final = True
                self.window = self._buf[:0]
                self.pos = 0
                self.close()
            return
        if len(self._buf) - rest < max(1, len(self._buf) // 2):
            return  # less than half free: a read now would be small
        k = min(len(self._buf) - rest, self._hi - self._next)
        self._buf[:rest] = self.window[self.pos :]
        fresh = self._buf[rest : rest + k]
        self._f.seek(self._next * self._size)
        self._f.readinto(fresh.view(np.uint8).data)
        self._next += k
        self.window = self._buf[: rest + k]
        self.pos = 0
        self.final = self._next >= self._hi
        if self._data is not None:
            self._read_data(int(self._buf["off"][0]), int(fresh["off"][-1]) + int(fresh["len"][-1]))

    def _read_data(self, start: int, end: int) -> None:
        """Hold the data file's bytes ``[start, end)`` in the buffer (whole pages, read with O_DIRECT).

        What the buffer holds already, from ``start`` on, moves to its front;
        only the bytes past what was read before are read.
        """
        assert self._dbuf is not None and self._data is not None  # allocated and opened together
        if self._direct:  # whole pages, from an aligned offset (the file's end is padded)
            start -= start % ALIGN
            end = -(-end // ALIGN) * ALIGN
        have = max(start, min(self._held, end))  # the file offset reading resumes from
        if have > start:
            self._dbuf[: have - start] = self._dbuf[start - self._base : have - self._base]
        view = self._dbuf.data[have - start : end - start]
        got = 0
        while got < len(view):
            k = os.preadv(self._data, [view[got:]], have + got)
            if k <= 0:
                raise OSError(errno.EIO, f"staged run {self._path} ends early: {have + got} of {end} bytes")
            got += k
        self._base = start
        self._held = end

    def take(self, k: int) -> Piece:
        piece = super().take(k)
        piece.data = self._dbuf
        piece.base = self._base
        return piece

    def close(self) -> None:
        f = getattr(self, "_f", None)  # None: __init__ failed before opening it
        if f is not None and not f.closed:
            f.close()
        data = getattr(self, "_data", None)
        if data is not None:
            os.close(data)
            self._data = None

    def __del__(self) -> None:  # a merge stopped early (an error) leaves its cursors unfinished
        self.close()


class MemoryRun:
    """The last run, sorted in its buffer."""

    def __init__(self, index: np.ndarray, slots: np.ndarray, arena: np.ndarray, bounds: list[int]) -> None:
        self.index = index
        self.slots = slots
        self.arena = arena
        self.rows = len(index)
        self.bounds = bounds

    def slot_cursor(self, window: int) -> Cursor:
        return _ArrayCursor(self.slots, "slot", None)

    def shard_cursor(self, s: int, window: int) -> Cursor:
        return _ArrayCursor(self.index[self.bounds[s] : self.bounds[s + 1]], "key", self.arena)

    def index_cursor(self, window: int) -> Cursor:
        return _ArrayCursor(self.index, "key", None)

    def read(self, off: int, length: int) -> bytes:
        return self.arena[off : off + length].tobytes()

    def remove(self) -> None:
        pass


class _ArrayCursor(Cursor):
    def __init__(self, rows: np.ndarray, field: str, data: np.ndarray | None) -> None:
        super().__init__()
        self.field = field
        self.window = rows
        self._data = data

    def take(self, k: int) -> Piece:
        piece = super().take(k)
        piece.data = self._data
        return piece


Run = FileRun | MemoryRun
