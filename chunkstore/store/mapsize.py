"""The LMDB map size of each environment: chosen so that the disk, not the map, limits a store.

A map reserves address space, not disk: the store opens its environments
without ``writemap``, so LMDB maps the file read-only, writes with
``pwrite`` and the file grows only as pages are written (bench/bench_mapsize.py
measures it: opening a 4 TiB map costs no time, no memory and no file
growth). The map cannot usefully be grown while the store is open: LMDB
remaps the file, and every read transaction of the process (request
threads, a running sample) would be left pointing into the old mapping. So
the size is fixed at open, and large.

- A shard's map is the size of the file system holding the store: a shard
  cannot outgrow its disk. It is at least ``MIN_MAP_SIZE`` (a file system
  may be enlarged later, and small ones cost nothing extra to over-reserve)
  and at most ``STORE_MAP_BUDGET`` divided over the shards: a 64-bit process
  has 128 TiB of address space, and a process may hold a few stores (tests,
  imports). Chunks spread evenly over the shards (by their last address
  byte), so the map limits a store of 4 shards only beyond 16 TiB of chunks.
- The meta environment holds batch records and a few keys: ``MIN_MAP_SIZE``.
- A read-only open adopts the map size the last writer recorded in the
  environment (LMDB's own ``map_size=0``), so a reader's map is never smaller
  than the data a writer may add while the reader is open.

An explicit ``map_size`` (``ChunkStore(map_size=...)``, ``--map-size``)
overrides all of this for every environment.
"""

from __future__ import annotations

import os

GiB = 1 << 30
TiB = 1 << 40
MIN_MAP_SIZE = 256 * GiB
STORE_MAP_BUDGET = 16 * TiB
ADOPT_RECORDED = 0  # LMDB: use the map size stored in the environment


def file_system_size(path: str | os.PathLike[str]) -> int:
    """Total bytes of the file system holding ``path`` (its nearest existing ancestor); 0 if unknown."""
    p = os.path.abspath(os.fspath(path))
    while True:
        try:
            st = os.statvfs(p)
            return st.f_blocks * st.f_frsize
        except FileNotFoundError:
            parent = os.path.dirname(p)
            if parent == p:
                return 0
            p = parent
        except OSError:
            return 0


def shard_map_size(root: str | os.PathLike[str], shards: int) -> int:
    """Map size of each shard of a store at ``root`` with ``shards`` shards (see the module docstring)."""
    cap = max(MIN_MAP_SIZE, STORE_MAP_BUDGET // max(1, shards))
    size = min(max(file_system_size(root), MIN_MAP_SIZE), cap)
    return -(-size // GiB) * GiB


def env_map_sizes(root: str | os.PathLike[str], shards: int, *, readonly: bool, configured: int | None) -> tuple[int, int]:
    """``(meta map size, shard map size)`` to open a store's environments with."""
    if configured is not None:
        return configured, configured
    if readonly:
        return ADOPT_RECORDED, ADOPT_RECORDED
    return MIN_MAP_SIZE, shard_map_size(root, shards)


def parse_size(text: str) -> int:
    """Bytes from ``"1048576"``, ``"512M"``, ``"256G"``, ``"4T"`` (binary units, optional ``iB``/``B``)."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    units = {"K": 1 << 10, "M": 1 << 20, "G": GiB, "T": TiB}
    scale = units.get(t[-1:], 1)
    number = t[:-1] if t[-1:] in units else t
    if not number.isdigit():
        raise ValueError(f"not a size: {text!r} (want bytes, or a number with K, M, G or T)")
    return int(number) * scale
