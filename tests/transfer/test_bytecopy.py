"""The import's bulk copies and the validator's batch lookup, against plain slicing and a dict."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkstore.store.batchstore import encode_batch
from chunkstore.transfer import bytecopy
from chunkstore.transfer.bytecopy import gather, scatter
from chunkstore.transfer.fastcheck import BatchTable
from tests.store.helpers import make_batch


@st.composite
def _ranges(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """A source, ranges inside it, and targets for them inside a destination of ``size`` bytes."""
    src = np.frombuffer(draw(st.binary(min_size=1, max_size=400)), np.uint8).copy()
    size = draw(st.integers(1, 400))
    n = draw(st.integers(0, 12))
    offs, lens, targets = [], [], []
    for _ in range(n):
        ln = draw(st.integers(0, min(len(src), size)))
        offs.append(draw(st.integers(0, len(src) - ln)))
        targets.append(draw(st.integers(0, size - ln)))
        lens.append(ln)
    return src, np.array(offs, np.int64), np.array(lens, np.int64), np.array(targets, np.int64), size


@settings(max_examples=200, deadline=None)
@given(_ranges())
def test_scatter_equals_slice_assignments_in_order(case):
    src, offs, lens, targets, size = case
    want = np.zeros(size, np.uint8)
    for o, ln, t in zip(offs, lens, targets, strict=True):
        want[t : t + ln] = src[o : o + ln]  # in order: a later overlapping copy wins
    got = np.zeros(size, np.uint8)
    scatter(src, offs, lens, got, targets)
    assert got.tobytes() == want.tobytes()


@settings(max_examples=50, deadline=None)
@given(_ranges())
def test_scatter_python_fallback_equals_the_kernel(case):
    src, offs, lens, targets, size = case
    kernel, fallback = np.zeros(size, np.uint8), np.zeros(size, np.uint8)
    scatter(src, offs, lens, kernel, targets)
    bytecopy._scatter_py(src, offs, lens, fallback, targets)
    assert kernel.tobytes() == fallback.tobytes()


@pytest.mark.parametrize(
    ("offs", "lens", "targets", "why"),
    [
        ([0], [5], [6], "outside"),  # the target range runs past the destination's end
        ([6], [5], [0], "outside"),  # the source range runs past the source's end
        ([-1], [1], [0], "outside"),
        ([0], [1], [-1], "outside"),
        ([0], [-1], [0], "negative"),
        ([0, 1], [1], [0, 1], "one offset and one length"),
        ([0], [1], [0, 1], "one target"),
    ],
)
def test_scatter_refuses_ranges_outside_its_arrays(offs, lens, targets, why):
    src, dst = np.arange(10, dtype=np.uint8), np.zeros(10, np.uint8)
    with pytest.raises(ValueError, match=why):
        scatter(src, np.array(offs), np.array(lens), dst, np.array(targets))
    assert not dst.any()  # refused before any byte was copied


def test_gather_refuses_unequal_columns():
    """Before the shape check, the kernel indexed a shorter lengths column out of bounds."""
    with pytest.raises(ValueError, match="one offset and one length"):
        gather(np.zeros(8, np.uint8), np.array([0, 1]), np.array([1]), np.zeros(8, np.uint8), 0)


def _table(ids: list[bytes]) -> BatchTable:
    entries = {}
    for i, bid in enumerate(ids):
        b = dataclasses.replace(make_batch(i + 1), id=bid)
        entries[bid] = (b, encode_batch(b))
    return BatchTable(entries)


_ids = st.lists(st.binary(min_size=32, max_size=32), max_size=6, unique=True)
_edge = st.sampled_from([b"\x00" * 32, b"\xff" * 32, b"\x01" + b"\x00" * 31, b"\x00" * 31 + b"\x01"])


@settings(max_examples=200, deadline=None)
@given(_ids, st.lists(st.one_of(st.binary(min_size=32, max_size=32), _edge), max_size=20), st.randoms())
def test_positions_of_equals_the_dict_lookup(ids, others, rnd):
    """Known and unknown ids, ids ending in zero bytes (which a fixed-width string pads with): as ``position``."""
    table = _table(ids)
    column = ids + others
    rnd.shuffle(column)
    rows = np.frombuffer(b"".join(column), np.uint8).reshape(len(column), 32) if column else np.zeros((0, 32), np.uint8)
    want = [table.position.get(bid, -1) for bid in column]
    assert table.positions_of(rows).tolist() == want


def test_positions_of_tells_ids_apart_by_their_trailing_zero_bytes():
    a = b"\x07" * 31 + b"\x00"
    b = b"\x07" * 30 + b"\x00\x00"
    table = _table([a])
    rows = np.frombuffer(a + b, np.uint8).reshape(2, 32)
    assert table.positions_of(rows).tolist() == [0, -1]
