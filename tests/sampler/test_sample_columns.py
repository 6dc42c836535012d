"""Phase 1's direct scan (columns from the data file) against the per-row scan, entry for entry.

The row scan (``sampler.worker.scan_rows``) is the rule: py-lmdb, one index
entry at a time. The direct scan must keep exactly the same candidates and
count exactly the same things on stores holding every kind of entry: rogue
type bytes (0, 3, 255), below-balance batches, stamps after the consensus
time, chunks outside the storage radius, entries whose chunk is missing,
data that cannot be a chunk of its entry's type, a 4080-byte chunk (a head
and no tail), a value too long for any chunk, a chunk under many stamps,
blocks cut small so chunks straddle them.
"""

from __future__ import annotations

import os
import random
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkstore.swarm.bmt import backend as hashing
from chunkstore.swarm.cac import make_cac
from chunkstore.swarm.constants import ChunkType
from chunkstore.swarm.directio import open_direct
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.stamp import Stamp
from sampler import columns, fileorder, reserve_sample, worker
from sampler.batches import below_balance_batches
from sampler.worker import ShardTask, scan_direct, scan_rows
from tests.sampler.helpers import build_world, force_data, force_entry
from tests.store.helpers import evict

pytestmark = pytest.mark.skipif(hashing.BACKEND != "numba", reason="the direct scan needs numba")

DEFAULT_BLOCK, DEFAULT_LOOKAHEAD = worker.BLOCK, worker.LOOKAHEAD
DEFAULT_CACHED, DEFAULT_SHARE, DEFAULT_RUN = columns.cached, worker.DIRECT_SHARE, worker.DIRECT_RUN
COUNTERS = ("total_iterated", "below_balance_ignored", "rogue_chunks", "new_ignored", "distinct_chunks", "chunk_loads",
            "chunk_load_failed")
SHARDS = 3


class _Fixture(tuple):
    """(world, oversized address) with a short repr: hypothesis prints fixtures of failing examples."""

    def __new__(cls, w, oversized: bytes) -> _Fixture:
        return super().__new__(cls, (w, oversized))

    def __repr__(self) -> str:
        return "<world>"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    w = build_world(str(tmp_path_factory.mktemp("columns") / "store"), 500, seed=11, shards=SHARDS)
    rng = random.Random(5)
    store = w.store
    addresses = sorted(w.chunks)
    base = w.base_time
    batch_a = keccak256(b"batch A")

    def entry(address: bytes, chunk_type: int, index: int, ts: int = base) -> None:
        force_entry(store, address, Stamp(batch_a, index.to_bytes(8, "big"), ts.to_bytes(8, "big"), bytes(65)), chunk_type)

    for i, kind in enumerate((0, 3, 255, 0x81)):  # rogue type bytes beside real entries
        entry(rng.choice(addresses), kind, 10_000 + i)
    for i in range(3):  # entries whose chunk is missing
        entry(rng.randbytes(32), ChunkType.CAC, 20_000 + i)
    cacs = [a for a in addresses if w.chunks[a][1] == ChunkType.CAC and len(w.chunks[a][0]) < 97 + 8]
    for i, address in enumerate(cacs[:3]):  # a CAC's data read as a SOC: too short to be one
        entry(address, ChunkType.SOC, 30_000 + i)
    head_only, data = make_cac(bytes(4072))  # 4080 bytes: a head and no tail
    force_data(store, head_only, data)
    entry(head_only, ChunkType.CAC, 40_000)
    entry(head_only, ChunkType.CAC, 40_001, ts=base + 10**12)  # the same chunk stamped after the consensus
    many = rng.choice(addresses)
    for i in range(12):  # one chunk under many stamps, types alternating
        entry(many, ChunkType.CAC if i % 3 else ChunkType.SOC, 50_000 + i)
    oversized = rng.choice(addresses)
    force_data(store, oversized, rng.randbytes(4300))  # longer than any chunk: never hashed
    yield _Fixture(w, oversized)
    store.close()


# How the direct scan reads the chunks: as the page cache holds them ("cache", the default when the store was
# just written), as a cold page cache with read-ahead requests ("prefetch"), around the page cache
# ("direct": even a chunk alone on its page is a run, read in one range with the few pages before the next
# one), or both ("mixed": runs of two pages or more read around the cache, the other chunks requested).
READS = ("cache", "prefetch", "direct", "mixed")


def _o_direct_works(directory: str) -> bool:
    probe = os.path.join(directory, "o_direct_probe")
    with open(probe, "wb") as f:
        f.write(bytes(4096))
    fd, direct = open_direct(probe, os.O_RDONLY)
    os.close(fd)
    os.unlink(probe)
    return direct


def _read_as(monkeypatch, reads: str, buffers: int = worker.DIRECT_BUFFERS) -> None:
    if reads == "cache":
        monkeypatch.setattr(columns, "cached", DEFAULT_CACHED)
        monkeypatch.setattr(worker, "DIRECT_SHARE", DEFAULT_SHARE)
        monkeypatch.setattr(worker, "DIRECT_RUN", DEFAULT_RUN)
        return
    monkeypatch.setattr(columns, "cached", lambda *args: False)
    monkeypatch.setattr(worker, "DIRECT_SHARE", 2.0 if reads == "prefetch" else 0.0)
    monkeypatch.setattr(worker, "DIRECT_RUN", 2 if reads == "mixed" else 1)
    monkeypatch.setattr(worker, "DIRECT_BUFFERS", buffers)


def _task(world, shard: int, anchor: bytes, depth: int, consensus: int, min_balance: int | None, k: int,
          after: tuple[bytes, bytes] | None, overlay: bytes, radius: int) -> ShardTask:  # fmt: skip
    excluded = below_balance_batches(world.store.batches, min_balance)
    return ShardTask(world.path, shard, anchor, depth, consensus, excluded, k, after, None, overlay=overlay, radius=radius)


def _both(world, task: ShardTask):
    shard = world.store.shard(task.shard)
    with shard.snapshot() as snap:
        rows = scan_rows(task, snap)
    with shard.snapshot() as snap:
        direct = scan_direct(task, snap)
    return rows, direct


def _same(rows, direct) -> None:
    assert direct.candidates == rows.candidates
    assert direct.complete == rows.complete
    assert {c: direct.stats[c] for c in COUNTERS} == {c: rows.stats[c] for c in COUNTERS}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**32 - 1),
    anchor_len=st.sampled_from([1, 2, 32, 80]),  # 80: too long to hash in place, rows are read whole
    depth=st.integers(0, 4),
    consensus_offset=st.sampled_from([0, 300, 700, 1000, 10**15]),
    min_balance=st.sampled_from([None, 100, 10**6]),
    k=st.sampled_from([1, 3, 64]),
    radius=st.integers(0, 3),
    small_blocks=st.booleans(),
    rescan=st.booleans(),
    reads=st.sampled_from(READS),
    mapped_run=st.sampled_from([1, 3, worker.MAPPED_RUN, 10**9]),  # 1: every chunk alone on its page hashed in place
)
def test_direct_scan_equals_row_scan(world, monkeypatch, seed, anchor_len, depth, consensus_offset, min_balance, k,
                                     radius, small_blocks, rescan, reads, mapped_run) -> None:  # fmt: skip
    w, _ = world
    rng = random.Random(seed)
    anchor = rng.randbytes(anchor_len)
    overlay = rng.randbytes(32) if radius else b""
    # Blocks of a few entries make the read-ahead queue cycle; the slack keeps every chunk's
    # entries in one block, as the default sizes do for any chunk with fewer than 256 stamps.
    # (hypothesis runs every example in one call of the test: set the sizes each time.)
    monkeypatch.setattr(worker, "BLOCK", rng.choice([1, 2, 5, 9]) if small_blocks else DEFAULT_BLOCK)
    monkeypatch.setattr(worker, "BLOCK_SLACK", 256)
    monkeypatch.setattr(worker, "LOOKAHEAD", rng.choice([1, 2, 3]) if small_blocks else DEFAULT_LOOKAHEAD)
    _read_as(monkeypatch, reads, buffers=rng.choice([1, 2, 3]))
    monkeypatch.setattr(worker, "MAPPED_RUN", mapped_run)
    for shard in range(SHARDS):
        task = _task(w, shard, anchor, depth, w.base_time + consensus_offset, min_balance, k, None, overlay, radius)
        rows, direct = _both(w, task)
        _same(rows, direct)
        if reads in ("cache", "prefetch"):
            assert direct.stats["direct_io_rows"] == 0
        if mapped_run == 10**9 or anchor_len == 80:
            assert direct.stats["mapped_rows"] == 0
        if rescan and rows.candidates:
            # A rescan above a consumed candidate, as phase 2 asks for when a shard runs dry.
            last = rows.candidates[len(rows.candidates) // 2]
            again = _task(w, shard, anchor, depth, w.base_time + consensus_offset, min_balance, 4 * k,
                          (last[0], last[1]), overlay, radius)  # fmt: skip
            _same(*_both(w, again))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**32 - 1),
    anchor_len=st.sampled_from([1, 2, 32, 80]),  # 80: cannot be hashed in place, so never in file order
    depth=st.integers(0, 4),
    consensus_offset=st.sampled_from([0, 300, 700, 10**15]),
    min_balance=st.sampled_from([None, 100, 10**6]),
    k=st.sampled_from([1, 3, 64]),
    radius=st.integers(0, 3),
    small_blocks=st.booleans(),
    rescan=st.booleans(),
    segment_rows=st.sampled_from([1, 7, 64, fileorder.SEGMENT_ROWS]),
    stage_pages=st.sampled_from([1, 2, 16, fileorder.STAGE_PAGES]),
    batch=st.sampled_from([1, 3, fileorder.BATCH]),
    stages=st.sampled_from([1, 3]),
)
def test_file_order_scan_equals_row_scan(world, monkeypatch, seed, anchor_len, depth, consensus_offset, min_balance, k,
                                         radius, small_blocks, rescan, segment_rows, stage_pages, batch,
                                         stages) -> None:  # fmt: skip
    """Chunks hashed in the order of their pages in the file, a segment of rows at a time: the rule's sample.

    Small segments cut the file into regions, each walking the index and
    offering its blocks again; small read buffers and batches cut the
    file-order reads anywhere.
    """
    w, _ = world
    rng = random.Random(seed)
    anchor = rng.randbytes(anchor_len)
    overlay = rng.randbytes(32) if radius else b""
    monkeypatch.setattr(fileorder, "FILE_ORDER", "always")
    monkeypatch.setattr(worker, "BLOCK", rng.choice([1, 2, 5, 9]) if small_blocks else DEFAULT_BLOCK)
    monkeypatch.setattr(worker, "BLOCK_SLACK", 256)
    monkeypatch.setattr(fileorder, "SEGMENT_ROWS", segment_rows)
    monkeypatch.setattr(fileorder, "STAGE_PAGES", stage_pages)
    monkeypatch.setattr(fileorder, "BATCH", batch)
    monkeypatch.setattr(fileorder, "STAGES", stages)
    for shard in range(SHARDS):
        task = _task(w, shard, anchor, depth, w.base_time + consensus_offset, min_balance, k, None, overlay, radius)
        rows, direct = _both(w, task)
        _same(rows, direct)
        if anchor_len == 80:
            assert direct.stats.get("file_order_rows", 0) == 0
        elif rows.stats["chunk_loads"]:
            assert direct.stats["file_order_rows"] > 0
            if direct.stats["file_order_rows"] > segment_rows:  # cut into regions of the file, each walked anew
                assert direct.stats["file_order_regions"] > 1
        if rescan and rows.candidates:
            last = rows.candidates[len(rows.candidates) // 2]
            again = _task(w, shard, anchor, depth, w.base_time + consensus_offset, min_balance, 4 * k,
                          (last[0], last[1]), overlay, radius)  # fmt: skip
            _same(*_both(w, again))


def _file_order_rows(w, monkeypatch) -> int:
    rows_in_file_order = 0
    for shard in range(SHARDS):
        rows, direct = _both(w, _task(w, shard, b"\x01", 0, w.base_time + 10**15, None, 16, None, b"", 0))
        _same(rows, direct)
        rows_in_file_order += direct.stats.get("file_order_rows", 0)
    return rows_in_file_order


def test_only_a_cold_shard_of_scattered_chunks_is_hashed_in_file_order(world, monkeypatch) -> None:
    """The scan's choice, on its first block: file order for a cold shard whose heads do not lie in runs."""
    w, _ = world
    monkeypatch.setattr(fileorder, "FILE_ORDER", "auto")
    monkeypatch.setattr(fileorder, "MIN_ROWS", 1)  # the world's shards are small
    _read_as(monkeypatch, "cache")  # the store was just written: its pages are cached
    assert _file_order_rows(w, monkeypatch) == 0
    monkeypatch.setattr(columns, "uncached_share", lambda *args: fileorder.COLD_SHARE / 2)  # mostly cached
    assert _file_order_rows(w, monkeypatch) == 0
    monkeypatch.setattr(columns, "uncached_share", lambda *args: fileorder.COLD_SHARE)  # cold; grown at random
    assert _file_order_rows(w, monkeypatch) > 0
    monkeypatch.setattr(worker, "DIRECT_SHARE", 0.0)  # cold, but every block counts as lying in runs
    assert _file_order_rows(w, monkeypatch) == 0
    monkeypatch.setattr(worker, "DIRECT_SHARE", DEFAULT_SHARE)
    monkeypatch.setattr(fileorder, "MIN_ROWS", 10**6)  # cold and scattered, but too small to be worth it
    assert _file_order_rows(w, monkeypatch) == 0


def test_uncached_share_sees_pages_dropped_from_the_page_cache(tmp_path) -> None:
    """The cold probe file order is chosen by: the share of probed heads not in the page cache."""
    import numpy as np

    path = tmp_path / "pages"
    path.write_bytes(os.urandom(64 * 4096))
    fd = os.open(path, os.O_RDONLY)
    try:
        where = np.zeros((64, 6), np.int64)
        where[:, 0] = columns.OVERFLOW
        where[:, 1] = np.arange(64) * 4096 + columns.DATA_AT
        evict(fd)
        dropped = columns.uncached_share(fd, where, 64, 64)
        if dropped == 0.0:
            pytest.skip("this file system keeps the pages in memory whatever the advice (tmpfs)")
        assert dropped == 1.0
        time.sleep(0.3)
        assert columns.uncached_share(fd, where, 64, 64) == 1.0  # probing read nothing (before, it read them all)
        os.pread(fd, 64 * 4096, 0)  # back in the page cache (the kernel caches in folios larger than a page:
        # a share between 0 and 1 cannot be set up page by page here)
        assert columns.uncached_share(fd, where, 64, 64) == 0.0
        assert columns.cached(fd, where, 64, 8)
    finally:
        os.close(fd)


@pytest.mark.parametrize(("value", "meant"), [("never", "never"), (" Always ", "always"), ("sometimes", "auto")])
def test_the_file_order_setting_is_read_or_refused_with_a_warning(value, meant) -> None:
    """``CHUNKSTORE_SAMPLE_FILE_ORDER``: before, any other word than always/auto meant never, silently."""
    import subprocess
    import sys

    code = "import sampler.fileorder as f; print(f.FILE_ORDER)"
    env = dict(os.environ, CHUNKSTORE_SAMPLE_FILE_ORDER=value)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == meant
    assert ("none of auto, always, never" in done.stderr) == (meant == "auto")


def test_a_region_denser_than_its_room_grows_every_column() -> None:
    """A region holding more rows than the histogram promised (a dense bucket): the columns grow, rows kept."""
    seg = fileorder._Segment(2)
    columns_before = seg.row_columns()
    assert set(columns_before) == {"head_kind", "head_pos", "head_size", "tail_pos", "tail_size", "soc_slot",
                                   "ordinal", "verdict"}  # fmt: skip
    for a in columns_before.values():
        a[:2] = [1, 2]
    seg.soc_addr[:] = 7
    seg.rows, seg.socs = 2, seg.soc_addr.shape[0]
    seg.room_for(5)
    for name, a in seg.row_columns().items():
        assert a.shape[0] >= 7 and a.dtype == columns_before[name].dtype, name
        assert a[:2].tolist() == [1, 2], name
    assert seg.soc_addr.shape[0] >= seg.socs + 5 and (seg.soc_addr[: seg.socs] == 7).all()
    assert fileorder.ROW_STATE == sum(a.itemsize for a in columns_before.values()) + 8


def test_an_overflow_page_is_checked_against_the_page_the_index_named() -> None:
    """The header check both readers make before hashing a head: right page number, and an overflow page."""
    import struct

    import numpy as np

    from sampler.lmdbfile import P_LEAF, P_OVERFLOW

    page = np.zeros(4096, np.uint8)
    page[:16] = np.frombuffer(struct.pack("<QHHHH", 5, 0, P_OVERFLOW, 0, 0), np.uint8)
    assert columns.overflow_page_ok(page.ctypes.data, 5)
    assert not columns.overflow_page_ok(page.ctypes.data, 6)
    page[:16] = np.frombuffer(struct.pack("<QHHHH", 5, 0, P_LEAF, 0, 0), np.uint8)
    assert not columns.overflow_page_ok(page.ctypes.data, 5)


def test_failed_reads_around_the_cache_in_file_order_read_through_it(world, monkeypatch, caplog) -> None:
    """A file system that opens with O_DIRECT but fails the reads: file order reads through the page cache."""
    w, _ = world
    monkeypatch.setattr(fileorder, "FILE_ORDER", "always")
    monkeypatch.setattr(fileorder, "STAGE_PAGES", 2)  # many reads, so some fail after the first
    direct_fds: set[int] = set()

    def open_direct_failing(path: str, flags: int) -> tuple[int, bool]:
        fd = os.open(path, flags)
        direct_fds.add(fd)
        return fd, True

    real_read = fileorder.read_spans

    def read_spans(fd: int, *args: object) -> int:
        return fileorder.E_READ if fd in direct_fds else real_read(fd, *args)

    monkeypatch.setattr(fileorder, "open_direct", open_direct_failing)
    monkeypatch.setattr(fileorder, "read_spans", read_spans)
    assert _file_order_rows(w, monkeypatch) > 0
    assert "reads around the page cache failed" in caplog.text


def test_a_file_order_read_that_fails_falls_back_to_the_row_scan(world, monkeypatch, caplog) -> None:
    """Reads that fail either way: the shard is sampled through py-lmdb, and the run counts the fallback."""
    w, _ = world
    monkeypatch.setattr(fileorder, "FILE_ORDER", "always")
    monkeypatch.setattr(fileorder, "read_spans", lambda *args: fileorder.E_READ)
    for shard in range(SHARDS):
        task = _task(w, shard, b"\x01", 0, w.base_time + 10**15, None, 16, None, b"", 0)
        with w.store.shard(shard).snapshot() as snap:
            rows = scan_rows(task, snap)
        with w.store.shard(shard).snapshot() as snap:
            got = worker.scan_snapshot(task, snap)
        _same(rows, got)
        assert got.stats["direct_read_fallbacks"] == 1
    assert "chunk data: short or failed read" in caplog.text


def test_a_head_longer_than_a_read_buffer_is_a_failed_load_not_a_hang(tmp_path, monkeypatch) -> None:
    """A damaged store whose head value spans more pages than a file-order read buffer holds.

    Before: the read planner found no room for that head in an empty buffer
    and planned nothing, again and again: the scan never returned.
    """
    import threading

    w = build_world(str(tmp_path / "store"), 40, seed=3, shards=1)
    try:
        monkeypatch.setattr(fileorder, "FILE_ORDER", "always")
        monkeypatch.setattr(fileorder, "STAGE_PAGES", 2)
        victim = sorted(w.chunks)[7]
        shard = w.store.shard(0)
        with shard.env.begin(write=True) as txn:  # a head of three pages, where a head is at most one
            txn.put(victim, bytes(3 * 4096), db=shard.chunks)
        task = _task(w, 0, b"\x01", 0, w.base_time + 10**15, None, 64, None, b"", 0)
        done: list = []
        scan = threading.Thread(target=lambda: done.append(_both(w, task)), daemon=True)
        scan.start()
        scan.join(60)
        assert done, "the file-order scan did not return"
        rows, direct = done[0]
        _same(rows, direct)
        assert direct.stats["file_order_rows"] > 0
        assert rows.stats["chunk_load_failed"] >= 1
    finally:
        w.store.close()


@pytest.mark.parametrize("mapped_run", [1, 10**9])
def test_chunks_in_runs_of_pages_are_hashed_where_they_lie(world, monkeypatch, mapped_run) -> None:
    # The store here was grown by random puts, so its chunks lie in runs of one page: with a run of one
    # enough, every chunk on an overflow page of its own is hashed through the map, and the sample stays
    # the rule's.
    w, _ = world
    _read_as(monkeypatch, "cache")
    monkeypatch.setattr(worker, "MAPPED_RUN", mapped_run)
    mapped = loads = 0
    for shard in range(SHARDS):
        rows, direct = _both(w, _task(w, shard, bytes(32), 0, w.base_time + 10**15, None, 64, None, b"", 0))
        _same(rows, direct)
        mapped += direct.stats["mapped_rows"]
        loads += direct.stats["chunk_loads"]
    if mapped_run == 1:
        # Small chunks lie inline in the index's leaves and are still read into rows.
        assert 0 < mapped < loads, "chunks on pages of their own were hashed in place"
    else:
        assert mapped == 0


def test_the_world_holds_every_kind_of_entry(world) -> None:
    """The comparison above means something only if the store holds what it claims to."""
    w, _ = world
    totals = dict.fromkeys(COUNTERS, 0)
    for shard in range(SHARDS):
        task = _task(w, shard, b"\x00", 0, w.base_time + 700, 100, 64, None, b"", 0)
        rows, direct = _both(w, task)
        _same(rows, direct)
        for c in COUNTERS:
            totals[c] += rows.stats[c]
    assert totals["below_balance_ignored"] > 0
    assert totals["rogue_chunks"] >= 4  # forced here under batch A (three more by build_world, maybe below balance)
    assert totals["new_ignored"] > 0
    assert totals["chunk_load_failed"] >= 3 + 3 + 1  # missing, too short for a SOC, oversized


@pytest.mark.parametrize("reads", READS[1:])
def test_a_cold_store_read_every_way_samples_as_a_warm_one(world, monkeypatch, reads) -> None:
    """Whole shards read cold: with read-ahead requests, around the page cache, or both; the same scan."""
    w, _ = world
    monkeypatch.setattr(worker, "BLOCK", 7)
    monkeypatch.setattr(worker, "LOOKAHEAD", 2)
    _read_as(monkeypatch, reads, buffers=1)
    around = 0
    for shard in range(SHARDS):
        rows, direct = _both(w, _task(w, shard, b"\x01", 0, w.base_time + 10**15, None, 16, None, b"", 0))
        _same(rows, direct)
        around += direct.stats["direct_io_rows"]
    if reads == "prefetch" or not _o_direct_works(os.path.dirname(w.path)):
        assert around == 0
    else:
        # Every chunk alone on its overflow page ("direct"), or in runs of two or more ("mixed").
        assert around > (100 if reads == "direct" else 0)


def test_a_failed_read_around_the_cache_reads_through_it(world, monkeypatch, caplog) -> None:
    """A file system that opens with O_DIRECT but fails the reads: the scan reads the page cache instead."""
    w, _ = world
    _read_as(monkeypatch, "direct")
    monkeypatch.setattr(columns, "read_direct", lambda *args: columns.E_READ)
    for shard in range(SHARDS):
        rows, direct = _both(w, _task(w, shard, b"\x01", 0, w.base_time + 10**15, None, 16, None, b"", 0))
        _same(rows, direct)
        assert direct.stats["direct_io_rows"] == 0
    if _o_direct_works(os.path.dirname(w.path)):
        assert "reads around the page cache failed" in caplog.text


def test_oversized_value_is_a_failed_load_not_a_crash(world) -> None:
    """A stored value longer than any chunk fails that chunk's entries and the sample goes on.

    Before: the row scan raised BufferTooSmall, and the whole sample failed
    with SamplerWorkerError.
    """
    w, oversized = world
    shard = w.store.shard_of(oversized)
    task = _task(w, shard, oversized, 31, w.base_time + 10**15, None, 64, None, b"", 0)
    rows, direct = _both(w, task)
    _same(rows, direct)
    assert rows.stats["chunk_load_failed"] == rows.stats["total_iterated"] > 0
    assert rows.candidates == []
    result = reserve_sample(w.store, b"\x00", 0, w.base_time + 10**15, workers=0)
    assert oversized not in {it.chunk_address for it in result.items}


def test_a_chunk_split_over_blocks_is_hashed_twice_and_sampled_once(world, monkeypatch) -> None:
    """More entries of one chunk than a block holds: its row repeats in the next block.

    That costs one more load (and hash) of the chunk; the candidates and every
    other counter stay the row scan's.
    """
    w, _ = world
    monkeypatch.setattr(worker, "BLOCK", 3)
    monkeypatch.setattr(worker, "BLOCK_SLACK", 2)
    monkeypatch.setattr(worker, "LOOKAHEAD", 2)
    split = False
    for shard in range(SHARDS):
        task = _task(w, shard, b"\x00", 0, w.base_time + 10**15, None, 64, None, b"", 0)
        rows, direct = _both(w, task)
        assert direct.candidates == rows.candidates
        for c in COUNTERS:
            if c == "chunk_loads":
                assert direct.stats[c] >= rows.stats[c]
                split |= direct.stats[c] > rows.stats[c]
            else:
                assert direct.stats[c] == rows.stats[c]
    assert split  # the world has chunks under more than five stamps


def test_a_file_the_reader_refuses_falls_back_to_py_lmdb(world, monkeypatch, caplog) -> None:
    """DirectReadError on a shard: the row scan samples it, the run counts it, the answer is the same."""
    from sampler import lmdbfile

    w, _ = world
    expected = reserve_sample(w.store, b"\x00", 0, w.base_time + 10**15, workers=0)
    assert expected.stats.direct_read_fallbacks == 0

    def refuse(*args: object) -> None:
        raise lmdbfile.DirectReadError("refused for the test")

    monkeypatch.setattr(lmdbfile, "open_trees", refuse)
    got = reserve_sample(w.store, b"\x00", 0, w.base_time + 10**15, workers=0)
    assert [it.transformed_address for it in got.items] == [it.transformed_address for it in expected.items]
    assert got.stats.direct_read_fallbacks == SHARDS
    assert got.stats.total_iterated == expected.stats.total_iterated
    assert "reading through py-lmdb instead" in caplog.text
