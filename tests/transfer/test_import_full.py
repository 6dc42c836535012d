"""Imports that run out of space: in staging, before publishing (the estimate), or while publishing.

The failures are injected here (a spill that meets ENOSPC, a small free-space
reading, a shard commit that fails); tests/store/test_full_disk.py meets a really
full disk. Before publishing, the store must be exactly as it was; a failure
while publishing leaves a consistent store and says so, and a re-run completes
the import.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import threading

import pytest

from api.cli import import_main
from chunkstore.reserve import ReserveStore
from chunkstore.store.errors import StoreFull
from chunkstore.store.shard import Shard
from chunkstore.store.store import ChunkStore
from chunkstore.store.verify import verify_store
from chunkstore.transfer import importer
from chunkstore.transfer import readers as importreaders
from chunkstore.transfer.budget import FrameShape, Sizes
from chunkstore.transfer.errors import InsufficientSpace
from chunkstore.transfer.runs import RunBuffer
from tests.store.fullhelpers import FailingCommits
from tests.store.helpers import Stamper, dump, make_batch, open_store, random_cac
from tests.transfer.helpers import (
    content,
    entry,
    in_process_budget,
    in_process_budget_args,
    put_sequentially,
    write_tar,
)

B1 = make_batch(1, depth=22)


@pytest.fixture
def setup(tmp_path):
    """A store holding a few chunks, and a tar of 200 more (full chunks) for it."""
    path = str(tmp_path / "store")
    stamper = Stamper(B1)
    originals = [entry(a, d, stamper.stamp(a)) for a, d in (random_cac(300) for _ in range(10))]
    with open_store(path, batches=[B1]) as store:
        put_sequentially(store, originals)
    entries = [entry(a, d, stamper.stamp(a)) for a, d in (random_cac() for _ in range(200))]
    tar = str(tmp_path / "in.tar")
    write_tar(tar, entries)
    return path, tar, entries, originals


def _dump(path: str) -> dict:
    with ReserveStore(path) as store:
        return dump(store)


def _import(path: str, tar: str, **kw):
    kw.setdefault("memory_budget", in_process_budget())
    return importer.import_reserve(path, tar, workers=0, show_progress=False, **kw)


def _clean(path: str) -> None:
    report = verify_store(path)
    assert report.ok, [str(p) for p in report.problems]


def test_staging_out_of_space_leaves_the_store_unchanged(setup, monkeypatch):
    path, tar, _, _ = setup
    before = _dump(path)

    def small(budget, baseline, workers, shape):  # spill runs to the staging area
        return Sizes(budget=budget, baseline=baseline, ring=4 << 20, arena=64 << 10, rows=64, phase2=1 << 20)

    def full(self, directory, number, shard_count):
        raise OSError(errno.ENOSPC, "No space left on device", directory)

    monkeypatch.setattr(importer, "plan_sizes", small)
    monkeypatch.setattr(importreaders, "TAR_TASK_ENTRIES", 8)
    monkeypatch.setattr(RunBuffer, "spill", full)
    with pytest.raises(InsufficientSpace, match="no space left for the import's staging area .*--staging-dir"):
        _import(path, tar)
    assert _dump(path) == before
    _clean(path)


def test_staging_out_of_space_in_a_spilling_thread_leaves_the_store_unchanged(setup, monkeypatch, tmp_path):
    """With two run buffers the spill runs in a thread: its ENOSPC still stops the import, nothing left behind."""
    path, tar, _, _ = setup
    before = _dump(path)
    spills = []

    def small(budget, baseline, workers, shape):
        return Sizes(budget=budget, baseline=baseline, ring=4 << 20, arena=160 << 10, rows=64, phase2=1 << 20)

    real = RunBuffer.spill

    def second_fails(self, directory, number, shard_count):
        spills.append(threading.current_thread().name)
        if number == 1:
            raise OSError(errno.ENOSPC, "No space left on device", directory)
        return real(self, directory, number, shard_count)

    staging = tmp_path / "staging"
    monkeypatch.setattr(importer, "plan_sizes", small)
    monkeypatch.setattr(importer, "TAR_SHAPE", FrameShape(40 << 10, 40 << 10, 8))
    monkeypatch.setattr(importreaders, "TAR_TASK_ENTRIES", 8)
    monkeypatch.setattr(RunBuffer, "spill", second_fails)
    with pytest.raises(InsufficientSpace, match="no space left for the import's staging area"):
        _import(path, tar, staging_dir=str(staging))
    assert spills[:2] == ["import-spill-0", "import-spill-1"]
    assert _dump(path) == before
    assert not any(staging.rglob("run-*"))  # the run the first thread wrote is gone too
    _clean(path)


def test_an_import_the_disk_cannot_take_is_refused_before_any_write(setup, monkeypatch):
    path, tar, _, _ = setup
    before = _dump(path)
    monkeypatch.setattr(importer, "free_bytes", lambda p: 300 * 4096)  # less than the 200 full chunks need
    with pytest.raises(InsufficientSpace, match=r"would add up to .* MiB .* has 1\.2 MiB free, of which puts leave"):
        _import(path, tar, batches=[make_batch(5)])
    assert _dump(path) == before  # not even the --batches were registered
    # Room for the records, not for them and the headroom puts leave to removals: refused as well.
    monkeypatch.setattr(importer, "free_bytes", lambda p: (20 << 20))
    monkeypatch.setattr(ChunkStore, "disk_headroom", lambda self: 16 << 20)
    with pytest.raises(InsufficientSpace, match=r"has 20\.0 MiB free, of which puts leave 16\.0 MiB to removals"):
        _import(path, tar)
    assert _dump(path) == before
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert import_main(["--data-dir", path, "--workers", "0", tar, *in_process_budget_args()]) == 1
    assert "not enough free space" in err.getvalue()
    monkeypatch.undo()
    assert _import(path, tar).load.written == 200


def test_an_import_the_maps_cannot_take_is_refused_before_any_write(setup, monkeypatch):
    path, tar, _, _ = setup
    before = _dump(path)
    monkeypatch.setattr(Shard, "map_room", lambda self: 2 << 20)  # 1.75 MiB above the headroom, per shard
    with pytest.raises(InsufficientSpace, match="not enough room in the store's LMDB maps"):
        _import(path, tar)
    assert _dump(path) == before


def test_disk_full_while_publishing_is_typed_consistent_and_completed_by_a_rerun(setup, monkeypatch, tmp_path):
    path, tar, entries, originals = setup
    failing = FailingCommits(monkeypatch, errno.ENOSPC, fail=lambda n: n >= 2)  # two shards get in, then full
    with pytest.raises(StoreFull) as info:
        _import(path, tar)
    assert failing.failed >= 1 and info.value.reason == "disk_full"
    note = "\n".join(info.value.__notes__)
    with ReserveStore(path) as store:
        stored = store.stats()["chunks"] - len(originals)
    assert 0 < stored < 200 and f"with {stored} new chunk(s) stored" in note and "run the import again" in note
    _clean(path)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert import_main(["--data-dir", path, "--workers", "0", tar, *in_process_budget_args()]) == 1
    assert "is full" in err.getvalue() and "run the import again" in err.getvalue()
    failing.stop()
    report = _import(path, tar)
    assert report.load.written + report.load.repeats == 200
    _clean(path)
    with open_store(str(tmp_path / "reference"), batches=[B1]) as store:  # what one put per record makes
        put_sequentially(store, originals + entries)
        want = content(store)
    with ReserveStore(path) as store:
        assert content(store) == want


@pytest.mark.parametrize("sizes", [[4096], [100], [4096, 10, 1000, 3000, 2100]])
def test_space_estimate_bounds_what_the_import_adds(tmp_path, monkeypatch, sizes):
    """The estimate the import checks free space against is an upper bound of the files' growth (and not a
    wild one: within 3x plus a fixed allowance, so an import that fits is not refused for nothing)."""
    path = str(tmp_path / "s")
    with open_store(path, batches=[B1]):
        pass
    stamper = Stamper(B1)
    entries = [entry(a, d, stamper.stamp(a)) for a, d in (random_cac(sizes[i % len(sizes)]) for i in range(3000))]
    tar = str(tmp_path / "in.tar")
    write_tar(tar, entries)
    seen = []
    real = importer.estimate_growth
    monkeypatch.setattr(importer, "estimate_growth", lambda *a: seen.append(real(*a)) or seen[-1])

    def files() -> int:
        return sum(os.path.getsize(os.path.join(path, d, "data.mdb")) for d in os.listdir(path) if d.startswith("shard-"))

    before = files()
    assert _import(path, tar).load.written == 3000
    grown = files() - before
    slack = 4 * (1 << 20)  # the estimate's fixed allowance per shard, which dominates for small chunks
    assert grown <= seen[0] <= 3 * grown + slack, (grown, seen)
