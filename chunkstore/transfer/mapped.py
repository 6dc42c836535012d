"""Giving back the resident pages of an LMDB data file's mapping.

LMDB reads through a shared, read-only mapping of its data file. Every page
touched there stays in the process's resident set (as clean file pages)
until the mapping goes, and the kernel maps up to 16 neighbouring cached
pages on each fault. A bulk import's appends touch the tip of each tree once
per commit, right where it just wrote, so its resident set would grow with
the size of the import; an export reads every page. ``release`` drops those
page table entries (``MADV_DONTNEED`` on a shared file mapping: the data
stays in the page cache and on disk, and the next access faults it back in),
so such a process stays inside its memory budget. Linux only; elsewhere a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os

_MADV_DONTNEED = getattr(mmap, "MADV_DONTNEED", 4)
_libc: ctypes.CDLL | None = None
_libc_missing = False  # looked for and not found: do not look again


def _madvise() -> ctypes.CDLL | None:
    global _libc, _libc_missing
    if _libc is None and not _libc_missing:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
            _libc = libc
        except (OSError, AttributeError):
            _libc_missing = True
    return _libc


def release(data_file: str) -> int:
    """Drop this process's resident pages of every mapping of ``data_file``; bytes of address space advised."""
    libc = _madvise()
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
                if libc.madvise(lo, hi - lo, _MADV_DONTNEED) == 0:
                    advised += hi - lo
    except OSError:
        return advised
    return advised
