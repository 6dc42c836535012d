"""Helpers for the import/export tests: the reference node's tar built from SPEC.md, store comparisons."""

from __future__ import annotations

import io
import os
import tarfile
from dataclasses import dataclass

from chunkstore.reserve import ReserveStore
from chunkstore.store.errors import StampConflict
from chunkstore.swarm.stamp import Stamp
from chunkstore.transfer.budget import rss_bytes
from tests.store.helpers import Stamper, dump, random_cac, random_soc


def in_process_budget(headroom: int = 512 << 20) -> int:
    """A memory budget for an import run inside the test process.

    The budget bounds the whole process's resident memory, and pytest's grows
    with every test it has run (numba kernels, hypothesis, cached stores): a
    fixed figure that fits when a file runs alone is refused late in the full
    suite. Tests of the budget itself pass their own sizes.
    """
    return rss_bytes() + headroom


def in_process_budget_args() -> list[str]:
    """``chunkstore import``'s flag for ``in_process_budget`` (the flag is in MiB)."""
    return ["--memory-budget", str(in_process_budget() >> 20)]


@dataclass(frozen=True)
class Entry:
    """One record of a reserve export: the chunk address, its data, one stamp."""

    address: bytes
    data: bytes
    stamp: bytes

    @property
    def content(self) -> bytes:
        # SPEC.md, "Reference node's reserve export": uint32 big-endian data length | data | stamp(113)
        return len(self.data).to_bytes(4, "big") + self.data + self.stamp


def entry(address: bytes, data: bytes, stamp: Stamp | bytes) -> Entry:
    return Entry(address, data, stamp.to_bytes() if isinstance(stamp, Stamp) else stamp)


def mixed_entries(stamper: Stamper, cacs: int = 20, full: int = 5, socs: int = 4) -> list[Entry]:
    """Short and full CACs and SOCs, each a different chunk, each under a fresh slot of ``stamper``'s batch.

    Short payloads are random in length from 0 bytes, so two of them can be the same chunk (two empty
    ones, about one run in 500): drawn again, as tests count the chunks as distinct."""
    makers = [lambda: random_cac(os.urandom(1)[0] % 300)] * cacs + [lambda: random_cac(4096)] * full
    makers += [lambda: random_soc(100)] * socs
    chunks: dict[bytes, bytes] = {}
    for make in makers:
        a, d = make()
        while a in chunks:
            a, d = make()
        chunks[a] = d
    return [entry(a, d, stamper.stamp(a)) for a, d in chunks.items()]


def write_tar(path: str, entries: list[Entry], *, reference_quirks: bool = False) -> None:
    """The export as Python's tarfile writes it; with ``reference_quirks`` cut as the reference node leaves it:
    no end-of-archive blocks and no padding after the last entry (it never closes its tar writer)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for e in entries:
            info = tarfile.TarInfo(e.address.hex())
            info.size = len(e.content)
            info.mode = 0o600
            tar.addfile(info, io.BytesIO(e.content))
    raw = buf.getvalue()
    if reference_quirks and entries:
        end = 0
        with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
            for member in tar:
                end = member.offset_data + member.size
        raw = raw[:end]
    with open(path, "wb") as f:
        f.write(raw)


def tar_entries(path: str) -> list[tuple[str, bytes]]:
    """(name, content) of every entry, sorted: the multiset a round trip must preserve.

    Read by Python's tarfile, after completing a file the reference node left unpadded.
    """
    raw = open(path, "rb").read()
    raw += bytes(-len(raw) % 512) + bytes(1024)
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        return sorted((m.name, tar.extractfile(m).read()) for m in tar)


def put_sequentially(store: ReserveStore, entries: list[Entry], *, skip_conflicts: bool = True) -> list[int]:
    """The semantics a bulk import must match: one put per entry, in order; indices of refused entries."""
    refused = []
    for i, e in enumerate(entries):
        try:
            store.put(e.data, e.stamp, address=e.address)
        except StampConflict:
            if not skip_conflicts:
                raise
            refused.append(i)
    return refused


def content(store: ReserveStore) -> dict:
    """Every record of the chunk databases and the byte counters: what two stores holding the same
    reserve share (the overlay, and the bin counters relative to it, are per node)."""
    out = {}
    full = dump(store)
    for key, rows in full.items():
        if key == "batches":
            out[key] = rows
        elif key[1] == "info":
            out[key] = [(k, v) for k, v in rows if k == b"bytes"]
        else:
            out[key] = rows
    return out
