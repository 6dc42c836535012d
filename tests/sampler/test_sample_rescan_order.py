"""A cold shard read in file order is read in file order again: by its rescan, and by the next sample.

The choice of file order probes the heads of the shard's first block for
being in the page cache (``columns.uncached_share``, ``preadv2`` with
``RWF_NOWAIT``), and a probe that misses starts the read of the page it
probed. The first scan of a cold shard in file order reads its heads around
the page cache, so the shard is as cold after it as before, but for the
probed heads: a rescan that probed again found them cached and read the
whole cold shard in key order, at random (on a store grown at random, the
cold 2^22 sample's slow way: 299 s against 65 s). So a rescan now reads
the shard the way its first scan did, and the probe asks ``mincore``,
which reads nothing, so that the next sample finds the shard as cold as it
is.
"""

from __future__ import annotations

import os
import time

import pytest

from chunkstore.swarm.bmt import backend as hashing
from sampler import fileorder
from sampler.worker import ShardScan, ShardTask, scan_shard
from tests.sampler.helpers import build_world

pytestmark = pytest.mark.skipif(hashing.BACKEND != "numba", reason="file order needs numba")


@pytest.fixture(scope="module")
def cold_shard(tmp_path_factory: pytest.TempPathFactory):
    """One shard of 3,000 chunks (about 5.7 MB): the kernel's read-ahead at its start covers few of its heads."""
    w = build_world(str(tmp_path_factory.mktemp("rescan") / "store"), 3000, seed=7, shards=1)
    w.store.close()
    return w


def _drop(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)  # dirty pages stay in the page cache whatever the advice
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _cold_first_scan(w, monkeypatch) -> ShardScan:
    """A first scan of the shard just dropped from the page cache, in file order; then time for any read it
    started to land (before, its probe's)."""
    monkeypatch.setattr(fileorder, "FILE_ORDER", "auto")
    monkeypatch.setattr(fileorder, "MIN_ROWS", 1)
    _drop(os.path.join(w.path, "shard-000", "data.mdb"))
    first = scan_shard(ShardTask(w.path, 0, b"\x01", 0, w.base_time + 10**15, frozenset(), 16))
    if not first.stats.get("file_order_rows"):
        pytest.skip("the shard was not cold after dropping it (tmpfs keeps pages whatever the advice)")
    time.sleep(0.5)
    return first


def test_a_rescan_of_a_cold_shard_read_in_file_order_is_read_in_file_order(cold_shard, monkeypatch) -> None:
    w = cold_shard
    first = _cold_first_scan(w, monkeypatch)
    last = first.candidates[-1]
    again = scan_shard(ShardTask(w.path, 0, b"\x01", 0, w.base_time + 10**15, frozenset(), 64, (last[0], last[1]),
                                 file_order=first.file_order))  # fmt: skip
    assert again.stats.get("file_order_rows", 0) == first.stats["file_order_rows"]


@pytest.mark.parametrize("rows_in_file_order", [0, 3467])
def test_the_sampler_rescans_a_shard_the_way_its_first_scan_read_it(cold_shard, monkeypatch, rows_in_file_order) -> None:
    """First scans decide by probing (``file_order=None``); a rescan is told the first scan's way."""
    from chunkstore.reserve import ReserveStore
    from sampler.pipeline import RESCAN_GROWTH, _Phase1, _ShardStream
    from sampler.scope import SampleScope

    sent: list[ShardTask] = []

    def run(self, tasks, progress=None):
        sent.extend(tasks)
        return [ShardScan(t.shard, [], True, t.after, t.k, {"file_order_rows": rows_in_file_order}) for t in tasks]

    monkeypatch.setattr(_Phase1, "_run", run)
    with ReserveStore(cold_shard.path) as store:
        phase1 = _Phase1(store, SampleScope(b"\x01", 0, b"", 0), cold_shard.base_time, frozenset(), 0, 16, False)
        (scan,) = phase1.first()
        assert sent[-1].file_order is None
        stream = _ShardStream(scan)
        phase1.more(stream)
        assert sent[-1].file_order is (rows_in_file_order > 0)
        assert sent[-1].k == 16 * RESCAN_GROWTH and sent[-1].after is None


def test_the_next_sample_of_a_cold_shard_read_in_file_order_is_read_in_file_order(cold_shard, monkeypatch) -> None:
    """Its own probe, not told: the first sample's probe must not have warmed what the second one probes."""
    w = cold_shard
    first = _cold_first_scan(w, monkeypatch)
    second = scan_shard(ShardTask(w.path, 0, b"\x02", 0, w.base_time + 10**15, frozenset(), 16))
    assert second.stats.get("file_order_rows", 0) == first.stats["file_order_rows"]
