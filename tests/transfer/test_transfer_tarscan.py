"""The tar fast path (chunkstore/tarscan.py, slabs in importreaders) against the entry-at-a-time reader.

The fast path takes only plain entries and hands everything else to
``TarReader``; an import must end the same either way: the same store
content, or the same error with the same message. Checked on tars mixing
plain entries with PAX and GNU headers, directories, damaged checksums,
names that are not hex, end-of-archive blocks, the reference node's missing
end, cuts anywhere, and slabs cut small so entries straddle them.
"""

from __future__ import annotations

import io
import os
import random
import tarfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkstore.store.store import ChunkStore
from chunkstore.swarm.bmt import backend as hashing
from chunkstore.swarm.tarheader import BLOCK
from chunkstore.transfer import readers as importreaders
from chunkstore.transfer import tarscan
from chunkstore.transfer.budget import TAR_SHAPE, FrameShape
from chunkstore.transfer.errors import TransferError
from chunkstore.transfer.importer import import_reserve
from tests.store.helpers import Stamper, make_batch, random_cac, random_soc
from tests.transfer.helpers import content, entry, in_process_budget

pytestmark = pytest.mark.skipif(hashing.BACKEND != "numba", reason="the fast path needs numba")

B1 = make_batch(1, depth=26)  # room for many stamps of the one empty chunk
KINDS = ["plain", "plain", "plain", "pax", "gnu", "dir", "bad-checksum", "non-hex", "upper-hex", "bad-size"]


def _tar(rng: random.Random, kinds: list[str], ending: str) -> bytes:
    stamper = Stamper(B1)
    out = io.BytesIO()
    for kind in kinds:
        address, data = random_soc(rng.randrange(0, 400)) if rng.random() < 0.2 else random_cac(rng.choice([0, 7, 300, 4096]))
        e = entry(address, data, stamper.stamp(address))
        name = e.address.hex()
        if kind == "upper-hex":
            name = name.upper()
        elif kind == "non-hex":
            name = name[:10] + "zz" + name[12:]
        if kind == "dir":
            info = tarfile.TarInfo("somedir")
            info.type = tarfile.DIRTYPE
            out.write(info.tobuf(tarfile.USTAR_FORMAT))
            continue
        info = tarfile.TarInfo(name)
        info.size = len(e.content)
        info.mode = 0o600
        fmt = {"pax": tarfile.PAX_FORMAT, "gnu": tarfile.GNU_FORMAT}.get(kind, tarfile.USTAR_FORMAT)
        if kind == "pax":
            info.pax_headers = {"comment": "x" * rng.randrange(1, 300)}
        header = bytearray(info.tobuf(fmt))
        if kind == "bad-checksum":
            header[-BLOCK + 150] ^= 1
        content = e.content
        if kind == "bad-size":
            content = content[:-1]  # the record lacks a byte of its stamp
            header = bytearray(_with_size(info, len(content), fmt))
        out.write(bytes(header) + content + bytes(-len(content) % BLOCK))
    raw = out.getvalue()
    if ending == "marker":
        raw += bytes(2 * BLOCK)
    elif ending == "reference" and raw:
        raw = raw.rstrip(b"\0")  # no end marker, no padding after the last entry (a stamp never ends in 0 here)
    elif ending == "cut" and raw:
        raw = raw[: rng.randrange(1, len(raw))]
    return raw


def _with_size(info: tarfile.TarInfo, size: int, fmt: int) -> bytes:
    info.size = size
    return info.tobuf(fmt)


def _outcome(tmp, raw: bytes, slow: bool, slab: int | None) -> tuple:
    src = os.path.join(tmp, f"in-{os.urandom(4).hex()}.tar")
    with open(src, "wb") as f:
        f.write(raw)
    store = os.path.join(tmp, f"store-{os.urandom(4).hex()}")
    saved = importreaders._fast_scanner, importreaders.TAR_SHAPE
    if slow:
        importreaders._fast_scanner = lambda: None
    if slab is not None:
        importreaders.TAR_SHAPE = FrameShape(slab, TAR_SHAPE.data_bytes, TAR_SHAPE.records)
    try:
        report = import_reserve(store, src, batches=[B1], workers=0, show_progress=False, memory_budget=in_process_budget())
    except TransferError as exc:
        return ("refused", type(exc).__name__, str(exc))
    finally:
        importreaders._fast_scanner, importreaders.TAR_SHAPE = saved
    with ChunkStore(store) as s:
        return ("imported", report.records, report.end_marker, report.warnings, content(s))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**32 - 1),
    kinds=st.lists(st.sampled_from(KINDS), max_size=14),
    ending=st.sampled_from(["marker", "reference", "cut", "none"]),
    slab=st.sampled_from([None, 5120, 6000, 9000, 12 * BLOCK]),
)
def test_fast_path_ends_like_the_entry_reader(tmp_path, seed, kinds, ending, slab) -> None:
    rng = random.Random(seed)
    raw = _tar(rng, kinds, ending)
    slow = _outcome(str(tmp_path), raw, slow=True, slab=None)
    fast = _outcome(str(tmp_path), raw, slow=False, slab=slab)
    assert fast == slow


def test_a_long_plain_tar_goes_through_slabs(tmp_path, monkeypatch) -> None:
    """Hundreds of plain entries over many slabs, and no entry read by TarReader."""
    rng = random.Random(3)
    raw = _tar(rng, ["plain"] * 600, "reference")
    calls = []
    real = importreaders._read_tar_entries
    monkeypatch.setattr(importreaders, "_read_tar_entries", lambda *a: calls.append(1) or real(*a))
    fast = _outcome(str(tmp_path), raw, slow=False, slab=None)
    assert not calls
    monkeypatch.setattr(importreaders, "_read_tar_entries", real)
    assert fast == _outcome(str(tmp_path), raw, slow=True, slab=None)
    assert fast[1] == 600, fast


def test_scan_stops_at_what_it_does_not_take() -> None:
    """Straight to the numba function: it returns the header it stopped at, and why."""
    import numpy as np

    rng = random.Random(4)
    raw = np.frombuffer(_tar(rng, ["plain", "plain", "pax", "plain"], "none"), np.uint8).copy()
    starts, lengths, addrs = np.zeros(8, np.int64), np.zeros(8, np.int64), np.zeros((8, 32), np.uint8)
    n, at, why = tarscan.scan(raw, 0, len(raw), True, 8, starts, lengths, addrs)
    assert (n, why) == (2, tarscan.OTHER)
    header = raw[at : at + BLOCK].tobytes()
    assert header[156:157] == b"x"  # the PAX header
    n2, at2, why2 = tarscan.scan(raw, 0, at + BLOCK + 100, False, 8, starts, lengths, addrs)
    assert (n2, at2, why2) == (2, at, tarscan.OTHER)  # a whole header it does not take
    assert tarscan.scan(raw, 0, at + 100, False, 8, starts, lengths, addrs) == (2, at, tarscan.MORE)  # half a header
    n3, at3, why3 = tarscan.scan(raw, 0, int(starts[1]) + 10, False, 8, starts, lengths, addrs)
    assert (n3, why3) == (1, tarscan.MORE)  # the second entry is cut by the slab's end
