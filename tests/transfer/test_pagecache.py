"""Imports and exports and the page cache (chunkstore/store/mapped.py).

What an import appends to the store's files does not stay in the page
cache: a bulk import writes as many bytes as it imports, which would evict
what the node reads and, on VMs whose fresh memory comes from the host,
cost system time as it fills. An export reads each shard with the kernel's
read-ahead, which the store's mappings otherwise go without.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os

import pytest

from chunkstore.reserve import ReserveStore
from chunkstore.transfer import importer
from chunkstore.transfer.exporter import iter_records
from tests.store.helpers import Stamper, make_batch, mapping_read_flags, open_store, random_cac
from tests.transfer.helpers import entry, in_process_budget, write_tar

B1 = make_batch(1, depth=22)
PAGE = mmap.PAGESIZE


def _resident(path: str, start: int, end: int) -> int:
    """Pages of ``path`` in ``[start, end)`` (bytes, page-aligned start) that are in the page cache (mincore)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), end, access=mmap.ACCESS_COPY) as m:
        first = ctypes.c_char.from_buffer(m)  # the mapping's address (private: from_buffer wants it writable)
        try:
            pages = -(-end // PAGE)
            vec = ctypes.create_string_buffer(pages)
            if libc.mincore(ctypes.addressof(first), end, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
            return sum(b & 1 for b in vec.raw[start // PAGE : pages])
        finally:
            del first  # the mapping cannot close while a ctypes object refers to it


def _cache_can_be_dropped(directory: str) -> bool:
    """Whether this file system lets clean pages go (tmpfs keeps them: they are its storage)."""
    probe = os.path.join(directory, "probe")
    with open(probe, "wb") as f:
        f.write(os.urandom(64 * PAGE))
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    try:
        return _resident(probe, 0, 64 * PAGE) < 8
    finally:
        os.unlink(probe)


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise on this platform")
def test_publish_leaves_none_of_the_appended_pages_cached(tmp_path):
    if not _cache_can_be_dropped(str(tmp_path)):
        pytest.skip(f"the file system of {tmp_path} keeps clean pages in memory (tmpfs?)")
    path = str(tmp_path / "store")
    stamper = Stamper(B1)
    with open_store(path, batches=[B1]) as store:
        files = [os.path.join(store.shard(s).path, "data.mdb") for s in range(store.shard_count)]
    before = [os.path.getsize(f) for f in files]
    entries = [entry(a, d, stamper.stamp(a)) for a, d in (random_cac() for _ in range(400))]
    tar = str(tmp_path / "in.tar")
    write_tar(tar, entries)
    report = importer.import_reserve(path, tar, workers=0, show_progress=False, memory_budget=in_process_budget())
    assert report.load.written == len(entries)
    appended = resident = 0
    for f, size in zip(files, before, strict=True):
        start = size - size % PAGE
        end = os.path.getsize(f)
        appended += (end - start) // PAGE
        resident += _resident(f, start, end)
    assert appended > 400  # a full chunk takes a page of its own
    # The trees' pages are read again after publishing (the reserve's counters); the chunks' are not.
    assert resident <= appended // 4, f"{resident} of the {appended} pages the import appended are in the page cache"


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux's /proc/self/smaps")
def test_export_reads_each_shard_with_read_ahead_and_gives_it_back(tmp_path):
    path = str(tmp_path / "store")
    stamper = Stamper(B1)
    with open_store(path, batches=[B1], shards=1) as store:
        for a, d in (random_cac() for _ in range(20)):
            store.put(d, stamper.stamp(a), address=a)
    with ReserveStore(path) as store:
        data_file = os.path.join(store.shard(0).path, "data.mdb")
        if "rr" not in mapping_read_flags(data_file):
            pytest.skip("this kernel does not show the mapping's read-ahead flags")
        records = iter_records(store)
        next(records)
        assert mapping_read_flags(data_file) == {"sr"}, "a shard is read in order without the kernel's read-ahead"
        assert sum(1 for _ in records) == 19
        assert mapping_read_flags(data_file) == {"rr"}, "the mapping stays sequential after the export"
