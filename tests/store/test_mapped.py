"""``chunkstore.store.mapped.ReadOnlyMap``: a file read in place, its pages given back on request."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

import numpy as np
import pytest

from chunkstore.store.mapped import ReadOnlyMap
from tests.store.helpers import evict, mapping_read_flags, mapping_rss_kb

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")


@contextlib.contextmanager
def _opened(tmp_path, size: int) -> Iterator[tuple[str, int]]:
    """(path, read-only fd) of a file of ``size`` random bytes."""
    path = str(tmp_path / "data.mdb")
    with open(path, "wb") as f:
        f.write(np.random.default_rng(1).integers(0, 256, size, dtype=np.uint8).tobytes())
    fd = os.open(path, os.O_RDONLY)
    try:
        yield path, fd
    finally:
        os.close(fd)


def test_the_array_is_the_file_and_read_only(tmp_path) -> None:
    with _opened(tmp_path, 3 * 4096 + 5) as (path, fd), ReadOnlyMap(fd) as view:
        with open(path, "rb") as f:
            assert view.array.tobytes() == f.read()
        assert not view.array.flags.writeable
        with pytest.raises(ValueError):
            view.array[0] = 1


def test_an_empty_file_maps_to_an_empty_array(tmp_path) -> None:
    with _opened(tmp_path, 0) as (_, fd):
        view = ReadOnlyMap(fd)
        assert view.array.shape == (0,) and not view.array.flags.writeable
        view.release()
        view.close()


@linux_only
def test_release_gives_back_the_pages_read(tmp_path) -> None:
    # The sampler hashes a whole shard through the map and releases it every few blocks: without
    # the release its resident set would grow to the size of the shard.
    with _opened(tmp_path, 8 << 20) as (path, fd), ReadOnlyMap(fd) as view:
        assert int(view.array[::4096].sum()) >= 0  # touch every page
        assert mapping_rss_kb(path) >= 6 * 1024, "reading the map brought its pages in"
        view.release()
        assert mapping_rss_kb(path) <= 64
        assert view.array[4096 * 7] == np.fromfile(path, np.uint8, 1, offset=4096 * 7)[0], "still readable"


def test_close_unmaps_even_while_the_array_was_handed_out(tmp_path) -> None:
    with _opened(tmp_path, 4096) as (_, fd):
        view = ReadOnlyMap(fd)
        view.close()  # the map's own array is dropped first: no BufferError
        assert view.array.shape == (0,)
        view.close()  # twice is harmless


@linux_only
def test_the_map_keeps_the_kernels_read_around(tmp_path) -> None:
    # A fault on a page not in the page cache reads its neighbours too. The sampler reads only runs of
    # consecutive pages through the map; with MADV_RANDOM each cold page was a 4 KiB read of its own
    # (a partly cold block: 1.5 s of reads against 0.2 s through pread).
    with _opened(tmp_path, 64 * 4096) as (path, fd), ReadOnlyMap(fd):
        assert "rr" not in mapping_read_flags(path)


@linux_only
def test_resident_tells_the_page_cache_apart_without_reading(tmp_path, monkeypatch) -> None:
    """``resident`` asks ``mincore``: pages dropped stay missing however often asked; read ones are there."""
    import time

    from chunkstore.store import mapped

    with _opened(tmp_path, 64 * 4096) as (_, fd), ReadOnlyMap(fd) as view:
        offsets = np.arange(64, dtype=np.int64) * 4096 + 100
        evict(fd)
        if view.resident(offsets).all():
            pytest.skip("this file system keeps the pages in memory whatever the advice (tmpfs)")
        assert not view.resident(offsets).any()
        time.sleep(0.3)
        assert not view.resident(offsets).any()  # asking read nothing
        os.pread(fd, 64 * 4096, 0)
        assert view.resident(offsets).all()
        assert view.resident(np.array([-1, 64 * 4096], np.int64)).all()  # outside the map: counted resident
        monkeypatch.setattr(mapped, "_libc_calls", lambda: None)  # no libc: every page counts as resident
        evict(fd)
        assert view.resident(offsets).all()
