"""Giving back the pages an LMDB data file holds in memory: its mapping's, and the page cache's.

LMDB reads through a shared, read-only mapping of its data file. Every page
touched there stays in the process's resident set (as clean file pages)
until the mapping goes, and the kernel maps up to 16 neighbouring cached
pages on each fault. A bulk import's appends touch the tip of each tree once
per commit, right where it just wrote, so its resident set would grow with
the size of the import; an export reads every page. ``release`` drops those
page table entries (``MADV_DONTNEED`` on a shared file mapping: the data
stays in the page cache and on disk, and the next access faults it back in),
so such a process stays inside its memory budget. Linux only; elsewhere a no-op.

``drop_cached`` evicts from the page cache the pages a commit appended to
the file, once the commit has made them durable (the store's environments
sync every commit, so they are clean then). A bulk import appends as many
bytes as it imports, and on this project's VMs page cache that is new to the
guest costs system time as it fills (a 2^22-chunk import: 172 s of system
time and 227 s publishing with the pages kept, 53-60 s and 131-160 s with
them dropped): dropped pages are reused by the next commit at once.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import mmap
import os
from collections.abc import Iterator

import numpy as np

_MADV_DONTNEED = getattr(mmap, "MADV_DONTNEED", 4)
_MADV_RANDOM = getattr(mmap, "MADV_RANDOM", 1)
_MADV_SEQUENTIAL = getattr(mmap, "MADV_SEQUENTIAL", 2)
_libc: ctypes.CDLL | None = None
_libc_missing = False  # looked for and not found: do not look again


def _libc_calls() -> ctypes.CDLL | None:
    """libc with madvise and mincore typed, loaded once; None where there is none."""
    global _libc, _libc_missing
    if _libc is None and not _libc_missing:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
            libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte))
            _libc = libc
        except (OSError, AttributeError):
            _libc_missing = True
    return _libc


def drop_cached(fd: int, start: int, end: int) -> None:
    """Evict bytes ``[start, end)`` of the file open at ``fd`` from the page cache; dirty pages are kept.

    Pages still mapped by some process stay too (``release`` first, for this one's).
    """
    if end > start and hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, start, end - start, os.POSIX_FADV_DONTNEED)


def release(data_file: str) -> int:
    """Drop this process's resident pages of every mapping of ``data_file``; bytes of address space advised."""
    return _advise(data_file, _MADV_DONTNEED)


@contextlib.contextmanager
def read_in_order(data_file: str) -> Iterator[None]:
    """While inside, this process's mapping of ``data_file`` is read with the kernel's read-ahead.

    The store's environments map their files without read-ahead (a chunk
    read is random), so a whole-shard read in key order, cold, faulted one
    4 KiB page at a time: exporting a 200,000-chunk store took 24.7 s cold
    against 2.2 s from the page cache. The mapping is random again after.
    """
    _advise(data_file, _MADV_SEQUENTIAL)
    try:
        yield
    finally:
        _advise(data_file, _MADV_RANDOM)


def _advise(data_file: str, advice: int) -> int:
    """``madvise`` every read-only mapping of ``data_file`` in this process; bytes of address space advised."""
    libc = _libc_calls()
    if libc is None:
        return 0
    target = os.path.realpath(data_file)
    advised = 0
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split(maxsplit=5)
                if len(parts) < 6 or parts[5].rstrip("\n") != target or "w" in parts[1]:
                    continue  # only the read-only mapping LMDB reads through
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                if libc.madvise(lo, hi - lo, advice) == 0:
                    advised += hi - lo
    except OSError:
        return advised
    return advised


class ReadOnlyMap:
    """A data file mapped read-only, for reading its pages where they lie in the page cache.

    ``array`` is the whole file (as long as it was when mapped) as a
    read-only ``uint8`` array; empty for an empty file. It keeps the
    kernel's default read-around: a fault on a page not in the page cache
    reads its neighbours too, which is what a reader of pages in runs (the
    sampler's only use) wants. Without it (``MADV_RANDOM``, as the store's
    own maps have) each such fault was one 4 KiB read: a partly cold block
    of an imported store took 1.5 s of reads where ``pread``, which gets
    the kernel's read-ahead, took 0.2.

    Every page read stays mapped, and counted in the process's file-backed
    resident set, until :meth:`release`; a reader that goes through a
    large file calls it now and then so that its resident set stays bounded.
    """

    def __init__(self, fd: int) -> None:
        size = os.fstat(fd).st_size
        self._map = mmap.mmap(fd, size, prot=mmap.PROT_READ) if size else None
        self.array = self._view()

    @staticmethod
    def empty() -> np.ndarray:
        """The ``array`` of no file: empty and read-only, the same array type as a map's."""
        arr = np.zeros(0, np.uint8)
        arr.setflags(write=False)
        return arr

    def _view(self) -> np.ndarray:
        if self._map is None:
            return self.empty()
        return np.frombuffer(self._map, np.uint8)  # read-only, as the map is

    def resident(self, offsets: np.ndarray) -> np.ndarray:
        """Which of the pages holding these byte offsets of the file are in the page cache (``mincore``).

        Reads nothing, unlike a read that fails rather than wait
        (``RWF_NOWAIT``), which starts the read of a page it misses. Where
        the kernel will not tell (no libc; ``mincore`` reports a file this
        process may neither write nor own as all resident), every page
        counts as resident. Offsets past the mapped end count as resident.
        """
        out = np.ones(len(offsets), bool)
        libc = _libc_calls()
        if libc is None or self._map is None:
            return out
        base, size, page = self.array.ctypes.data, self.array.shape[0], mmap.PAGESIZE
        vec = ctypes.c_ubyte()
        for i, at in enumerate(offsets.tolist()):
            if 0 <= at < size:
                if libc.mincore(base + at // page * page, page, ctypes.byref(vec)) != 0:
                    raise OSError(ctypes.get_errno(), "mincore failed")
                out[i] = bool(vec.value & 1)
        return out

    def release(self) -> None:
        """Drop this process's page table entries of the map (the pages stay in the page cache)."""
        if self._map is not None and hasattr(self._map, "madvise"):
            self._map.madvise(_MADV_DONTNEED)

    def close(self) -> None:
        """Unmap; no address into the map may be used after this."""
        self.array = self.empty()  # the map cannot close while an array exports it
        if self._map is not None:
            self._map.close()
            self._map = None

    def __enter__(self) -> ReadOnlyMap:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
