"""The import's large buffers: anonymous maps of their own, in small pages (no huge pages asked for)."""

from __future__ import annotations

import numpy as np
import pytest

from chunkstore.swarm.directio import ALIGN, aligned_buffer, anonymous_array
from chunkstore.transfer.runs import INDEX, RunBuffer
from tests.store.helpers import smaps

BIG = 8 << 20  # above the 4 MiB from which NumPy asks for huge pages


def _thp_mode() -> str | None:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.index("[") + 1 : text.index("]")] if "[" in text else None


def _smaps_field(array: np.ndarray, field: str) -> str:
    """A field of this process's smaps entry for the mapping holding the middle of ``array``.

    The middle: NumPy's huge-page advice starts at the first page boundary inside the array.
    """
    address = array.ctypes.data + array.nbytes // 2
    for mapping in smaps():
        if mapping.lo <= address < mapping.hi and field in mapping.fields:
            return mapping.fields[field]
    raise AssertionError(f"no mapping with {field} holds {address:#x}")


def _thp_eligible(array: np.ndarray) -> bool:
    return _smaps_field(array, "THPeligible") == "1"


def test_anonymous_arrays_are_private() -> None:
    """Like NumPy's memory: a worker forked meanwhile neither shares the pages nor keeps them alive."""
    try:
        flags = _smaps_field(anonymous_array(BIG, np.uint8), "VmFlags").split()
    except (OSError, AssertionError):
        pytest.skip("no /proc/self/smaps with VmFlags here")
    assert "sh" not in flags
    assert "sh" in _smaps_field(aligned_buffer(BIG), "VmFlags").split()  # the check can tell


def test_anonymous_array_shape_dtype_and_zeroes() -> None:
    rows = anonymous_array(1000, INDEX)
    assert rows.shape == (1000,) and rows.dtype == INDEX
    assert not rows.view(np.uint8).any()
    rows["len"] = 7
    assert (rows["len"] == 7).all()
    assert rows.ctypes.data % ALIGN == 0


def test_empty_buffers_are_allowed() -> None:
    assert aligned_buffer(0).shape[0] >= 0
    assert anonymous_array(0, np.uint8).shape == (0,)
    assert RunBuffer(0, 0).capacity == (0, 0)  # the import's last, empty buffer


@pytest.mark.skipif(_thp_mode() != "madvise", reason="huge pages only go to mappings that ask in THP mode 'madvise'")
def test_large_buffers_do_not_ask_for_huge_pages() -> None:
    """NumPy's own arrays of this size do ask; the import's arena and index must not (a compaction stall)."""
    asked = np.empty(BIG, np.uint8)
    if not _thp_eligible(asked):
        pytest.skip("this NumPy does not ask for huge pages (NUMPY_MADVISE_HUGEPAGE=0?)")
    assert not _thp_eligible(anonymous_array(BIG, np.uint8))
    buffer = RunBuffer(BIG, BIG // INDEX.itemsize)
    for array in (buffer.arena, buffer.index, buffer.sorted, buffer.slots):
        assert not _thp_eligible(array)
