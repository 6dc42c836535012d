"""SIGKILL during eviction and expiry: the store reopens consistent, the work resumes, the end state is the rule's.

Eviction runs in bounded steps, each a write session whose shard commits
are consistent one by one (an eviction touches only the chunk's shard), so a
kill anywhere leaves a smaller, clean reserve with exact counters. Restarting
resumes it; with ``min_evict_count`` 1 the interrupted and resumed eviction
ends exactly where one uninterrupted run would: the first ``size - capacity``
entries in the rule's order.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time

from chunkstore.reserve import ReserveOptions, ReserveStore
from chunkstore.reserve.chainstate import ChainState
from chunkstore.store.verify import verify_store
from chunkstore.swarm.proximity import proximity
from tests.reserve.helpers import direct_bins, entries, expected_unreserve, fill
from tests.store.helpers import REPO_DIR, child_command, make_batch

OVERLAY = bytes.fromhex("3c" + "a5" * 31)
BATCHES = [
    make_batch(21, depth=14, bucket_depth=4, value=30),
    make_batch(22, depth=14, bucket_depth=2, value=10),
    make_batch(23, depth=14, bucket_depth=8, value=20),
]
CAPACITY = 250
N_CHUNKS = 1500


def options() -> ReserveOptions:
    return ReserveOptions(capacity=CAPACITY, min_evict_count=1, evict_step=4)


def evict_child(path: str, progress: str) -> None:
    """Child: open the store and run the eviction; the parent kills us part-way."""
    with ReserveStore(path, overlay=OVERLAY, reserve=options()) as store:
        with open(progress, "a") as f:
            f.write("R\n")
        store.reserve.maintain()
        with open(progress, "a") as f:
            f.write("D\n")


def die_between_shard_commits(path: str) -> None:
    """Child: an eviction step dies after committing its first shard, before the others."""
    from chunkstore.reserve import eviction

    evict_rows, evict_in_shard = eviction.evict_rows, eviction._evict_in_shard
    steps = [0]

    def step(reserve: object, rows: list, limit: int) -> int:
        steps[0] += 1
        shards_done = [0]

        def one_shard(reserve: object, s: int, group: list) -> int:
            if steps[0] > 10 and shards_done[0] == 1:
                os._exit(9)
            shards_done[0] += 1
            return evict_in_shard(reserve, s, group)

        eviction._evict_in_shard = one_shard
        try:
            return evict_rows(reserve, rows, limit)
        finally:
            eviction._evict_in_shard = evict_in_shard

    eviction.evict_rows = step
    with ReserveStore(path, overlay=OVERLAY, reserve=options()) as store:
        store.reserve.maintain()


def expire_child(path: str) -> None:
    """Child: expiring a batch dies part-way through its purge."""
    import chunkstore.store.store as store_mod
    from chunkstore.store.writes import WriteSession

    store_mod.PURGE_STEP = 5
    original = WriteSession.purge_batch_part
    calls = [0]

    def purge_then_die(self: WriteSession, s: int, batch_id: bytes, limit: int) -> int:
        calls[0] += 1
        if calls[0] == 6:
            os._exit(9)
        return original(self, s, batch_id, limit)

    WriteSession.purge_batch_part = purge_then_die
    with ReserveStore(path, overlay=OVERLAY, reserve=ReserveOptions(capacity=10**6)) as store:
        store.reserve.set_chainstate(ChainState(block=100, total_amount=15, current_price=1))
        store.reserve.maintain()


def _prepare(path: str, seed: int) -> set:
    with ReserveStore(path, overlay=OVERLAY, reserve=ReserveOptions(capacity=10**6)) as store:
        for b in BATCHES:
            store.batches.add(b)
        fill(store, BATCHES, N_CHUNKS, random.Random(seed), shared=0.15)
        return entries(store)


def _check_consistent(path: str) -> set:
    report = verify_store(path)
    assert report.ok and report.pending == 0, [str(p) for p in report.problems]
    with ReserveStore(path, readonly=True) as store:
        found = entries(store)
        status = store.reserve.status()
        assert list(status.bins) == direct_bins(found, OVERLAY)
        assert status.size == len(found)
        assert status.size_within_radius == sum(proximity(OVERLAY, a) >= status.radius for a, _, _ in found)
    return found


def _wait_for(path: str, line: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return
        with open(path) as f:
            if line in f.read():
                return
        time.sleep(0.005)
    raise AssertionError("child never got going")


def test_sigkill_during_eviction_resumes_to_the_rules_end_state(tmp_path):
    path = str(tmp_path / "s")
    initial = _prepare(path, seed=31)
    want, radius = expected_unreserve(initial, BATCHES, OVERLAY, 0, CAPACITY, 1)
    rng = random.Random(32)
    kills = 0
    sizes = [len(initial)]
    for round_no in range(6):
        progress = str(tmp_path / f"progress-{round_no}")
        open(progress, "w").close()
        proc = subprocess.Popen(child_command(f"import tests.reserve.test_reserve_crash as t; t.evict_child({path!r}, {progress!r})"), cwd=REPO_DIR)
        try:
            _wait_for(progress, "R\n", proc)
            time.sleep(rng.uniform(0.02, 0.25))
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait()
        kills += proc.returncode == -signal.SIGKILL
        found = _check_consistent(path)  # a kill never leaves a dangling entry or a wrong counter
        assert found >= want  # nothing beyond what the rule evicts
        sizes.append(len(found))
        if "D\n" in open(progress).read():
            break
    assert kills >= 2 and any(b < a for a, b in zip(sizes, sizes[1:], strict=False))  # kills did land mid-eviction
    with ReserveStore(path, overlay=OVERLAY, reserve=options()) as store:  # restart: resume and finish
        store.reserve.maintain()
        assert store.reserve.radius == radius
    assert _check_consistent(path) == want


def test_crash_between_the_shard_commits_of_an_eviction_step(tmp_path):
    path = str(tmp_path / "s")
    initial = _prepare(path, seed=41)
    want, _ = expected_unreserve(initial, BATCHES, OVERLAY, 0, CAPACITY, 1)
    proc = subprocess.run(child_command(f"import tests.reserve.test_reserve_crash as t; t.die_between_shard_commits({path!r})"), cwd=REPO_DIR,
                          timeout=60)
    assert proc.returncode == 9
    found = _check_consistent(path)
    assert want < found < initial
    with ReserveStore(path, overlay=OVERLAY, reserve=options()) as store:
        store.reserve.maintain()
    assert _check_consistent(path) == want


def test_sigkill_during_expiry_is_finished_by_the_next_open(tmp_path):
    path = str(tmp_path / "s")
    initial = _prepare(path, seed=51)
    expired = {b.id for b in BATCHES if b.value <= 15}
    assert expired == {BATCHES[1].id}
    proc = subprocess.run(child_command(f"import tests.reserve.test_reserve_crash as t; t.expire_child({path!r})"), cwd=REPO_DIR, timeout=60)
    assert proc.returncode == 9
    report = verify_store(path)
    assert report.ok, [str(p) for p in report.problems]
    with ReserveStore(path, readonly=True) as store:
        assert store.batches.removing() == [BATCHES[1].id]
    with ReserveStore(path, overlay=OVERLAY) as store:
        assert store.recovered["batch_removals"] == 1
        assert BATCHES[1].id not in store.batches
    assert _check_consistent(path) == {e for e in initial if e[1] not in expired}
