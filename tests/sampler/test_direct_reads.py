"""Reads around the page cache (``sampler.columns.plan_direct`` / ``read_direct``) on a file of known pages.

Each page of the file starts with its own page number and is filled with a
pattern of it, so a row that received the wrong page, or a page shifted by
a gap read wrongly, shows at once.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from chunkstore.swarm.bmt import backend as hashing
from chunkstore.swarm.directio import aligned_buffer, open_direct
from sampler import columns

pytestmark = pytest.mark.skipif(hashing.BACKEND != "numba", reason="the direct scan needs numba")

PSIZE = 4096
PAGES = 3000
STAGE = 64  # pages read at a time: small, so that runs span several reads


def _page(p: int) -> np.ndarray:
    page = ((np.arange(PSIZE, dtype=np.int64) * 7 + p) % 251).astype(np.uint8)
    page[:8] = np.frombuffer(p.to_bytes(8, "little"), np.uint8)
    return page


@pytest.fixture(scope="module")
def pages_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("direct") / "pages")
    with open(path, "wb") as f:
        for p in range(PAGES):
            f.write(_page(p).tobytes())
    return path


def _where(pages: list[int], sizes: list[int] | None = None) -> np.ndarray:
    where = np.zeros((len(pages), 6), np.int64)
    for i, p in enumerate(pages):
        where[i, 0] = columns.OVERFLOW
        where[i, 1] = p * PSIZE + columns.PAGEHDRSZ
        where[i, 2] = sizes[i] if sizes else PSIZE - columns.PAGEHDRSZ
    return where


def _rows(n: int) -> np.ndarray:
    return aligned_buffer(n * columns.ROW_BYTES)[: n * columns.ROW_BYTES].reshape(n, columns.ROW_BYTES)


def _read(path: str, where: np.ndarray, placed: np.ndarray) -> tuple[int, np.ndarray, bool]:
    rows = _rows(len(where))
    rows[:] = 0xEE
    fd, direct = open_direct(path, os.O_RDONLY)
    try:
        rc = columns.read_direct(fd, where, len(where), PSIZE, rows, placed, aligned_buffer(STAGE * PSIZE))
    finally:
        os.close(fd)
    return rc, rows, direct


def _plan(where: np.ndarray, min_run: int) -> tuple[int, np.ndarray]:
    placed = np.full(len(where), 7, np.uint8)
    marked = columns.plan_direct(where, len(where), PSIZE, min_run, placed)
    return marked, placed


def test_runs_are_rows_whose_pages_follow_with_small_gaps() -> None:
    gap = columns.MAX_GAP
    pages = [10, 11, 12, 14, 14 + gap + 1, 14 + 2 * gap + 3, 100, 99, 200, 201, 201, 202]
    # runs: 10..(14+gap+1) bridged (gaps 0, 0, 1, gap); then a gap of gap+1 breaks; 100; 99 goes back;
    # 200, 201; 201 again (the same page: a chunk under two types) breaks; 201, 202.
    marked, placed = _plan(_where(pages), 2)
    assert placed.tolist() == [1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1]
    assert marked == 9
    marked, placed = _plan(_where(pages), 3)
    assert placed.tolist() == [1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0] and marked == 5
    marked, placed = _plan(_where(pages), 1)
    assert placed.all() and marked == len(pages)


def test_a_head_not_alone_on_its_page_is_never_placed() -> None:
    where = _where([1, 2, 3, 4], [4080, 4081, 4080, 4080])  # row 1's head spills onto a second page
    where[3, 0] = columns.INLINE
    marked, placed = _plan(where, 1)
    assert placed.tolist() == [1, 0, 1, 0] and marked == 2


@pytest.mark.parametrize(
    "pages",
    [
        [5, 6, 7, 8],
        [5, 7, 9, 9 + columns.MAX_GAP + 1, 9 + 3 * columns.MAX_GAP],
        list(range(1, 4 * STAGE + 1, 2)),  # a run (pages and gaps) longer than one read
        list(range(40, 40 + 3 * STAGE + 5)),
        [0, columns.MAX_GAP + 1, 2 * columns.MAX_GAP + 2, STAGE - 1, STAGE, 2 * STAGE + 3],  # read ends on a gap
        [2999, 0, 1, 2],
    ],
    ids=["consecutive", "gaps", "beyond-one-read", "long-run", "gap-at-read-end", "backwards"],
)
def test_each_placed_row_gets_its_own_page(pages_file: str, pages: list[int]) -> None:
    where = _where(pages)
    _, placed = _plan(where, 1)
    rc, rows, _ = _read(pages_file, where, placed)
    assert rc == columns.OK
    for i, p in enumerate(pages):
        assert np.array_equal(rows[i, :PSIZE], _page(p)), f"row {i} (page {p})"
        assert (rows[i, PSIZE:] == 0xEE).all()  # nothing past the page


def test_rows_not_placed_are_left_alone(pages_file: str) -> None:
    where = _where([3, 4, 5, 50])
    placed = np.array([1, 0, 1, 0], np.uint8)
    rc, rows, _ = _read(pages_file, where, placed)
    assert rc == columns.OK
    assert np.array_equal(rows[0, :PSIZE], _page(3)) and np.array_equal(rows[2, :PSIZE], _page(5))
    assert (rows[1] == 0xEE).all() and (rows[3] == 0xEE).all()


def test_a_page_past_the_end_of_the_file_is_a_failed_read(pages_file: str) -> None:
    where = _where([PAGES - 2, PAGES - 1, PAGES])
    _, placed = _plan(where, 1)
    rc, _, _ = _read(pages_file, where, placed)
    assert rc == columns.E_READ
