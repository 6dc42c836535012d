"""A cold shard read in file order is read in file order again: by its rescan, and by the next sample.

The choice of file order probes the heads of the shard's first block for
being in the page cache. The probe used to read one byte of each with
``preadv2(RWF_NOWAIT)``, and a miss starts the read of the page it probed.
The first scan of a cold shard in file order reads its heads around the
page cache, so the shard is as cold after it as before, but for the probed
heads: a rescan or the next sample probed them again, found them cached and
read the whole cold shard in key order, at random (on a store grown at
random, the cold 2^22 sample's slow way: 299 s against 65 s). The probe
asks ``mincore`` now, which reads nothing.
"""

from __future__ import annotations

import os
import time

import pytest

from chunkstore.swarm.bmt import backend as hashing
from sampler import fileorder
from sampler.worker import ShardScan, ShardTask, scan_shard
from tests.sampler.helpers import build_world
from tests.store.helpers import evict

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
        evict(fd)
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
    again = scan_shard(ShardTask(w.path, 0, b"\x01", 0, w.base_time + 10**15, frozenset(), 64, (last[0], last[1])))
    assert again.stats.get("file_order_rows", 0) == first.stats["file_order_rows"]


def test_the_next_sample_of_a_cold_shard_read_in_file_order_is_read_in_file_order(cold_shard, monkeypatch) -> None:
    """Its own probe, not told: the first sample's probe must not have warmed what the second one probes."""
    w = cold_shard
    first = _cold_first_scan(w, monkeypatch)
    second = scan_shard(ShardTask(w.path, 0, b"\x02", 0, w.base_time + 10**15, frozenset(), 16))
    assert second.stats.get("file_order_rows", 0) == first.stats["file_order_rows"]
