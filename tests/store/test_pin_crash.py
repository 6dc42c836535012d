"""SIGKILL while pinning or unpinning a large tree: after the next open, the pin is whole or gone.

A child process pins (or unpins) a tree of some 1,500 chunks in small steps;
the parent kills it at a random moment, checks the store as the kill left it
(``verify`` clean, at most one collection pending), reopens it writable (the
open rolls an unfinished pinning back and finishes an unfinished unpinning)
and checks the end state: either the pin exists with every chunk of the tree
in its collection and stored, or there is no pin and not one row of it, and
the chunks only the pin kept are gone.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time

import pytest

from chunkstore.reserve import ReserveStore
from chunkstore.store.verify import verify_store
from chunkstore.swarm.traversal import tree_addresses
from tests.store.helpers import REPO_DIR, Stamper, child_command, make_batch
from tests.store.pinhelpers import pin_rows, upload

RESERVE_BATCH = make_batch(61, depth=22, bucket_depth=8)
PINNED_BATCH = make_batch(62, depth=22, bucket_depth=8)
TREE_A = 1500 * 4096 + 100  # in the reserve; the child pins it
TREE_B = 600 * 4096 + 7  # pinned, its batch removed: only the pin keeps it; the child unpins it


def prepare(path: str) -> tuple[bytes, set[bytes], bytes, set[bytes]]:
    from chunkstore.store.pinning import pin_reference

    with ReserveStore(path) as store:
        store.batches.add(RESERVE_BATCH)
        store.batches.add(PINNED_BATCH)
        ref_a, addrs_a = upload(store, Stamper(RESERVE_BATCH), random.Random(1).randbytes(TREE_A))
        ref_b, addrs_b = upload(store, Stamper(PINNED_BATCH), random.Random(2).randbytes(TREE_B))
        assert pin_reference(store, ref_b)
        store.batches.remove(PINNED_BATCH.id)
        assert all(store.has(a) for a in addrs_b) and not any(store.stamps_of(a) for a in addrs_b)
    return ref_a, addrs_a, ref_b, addrs_b


def slow_commits(seconds: float = 0.003) -> None:
    """Make every shard commit take as long as a synced write on a real disk (tests often run on tmpfs)."""
    from chunkstore.store import writes

    original = writes.commit_txn

    def commit(txn: object) -> None:
        original(txn)  # type: ignore[arg-type]
        time.sleep(seconds)

    writes.commit_txn = commit


def pin_child(path: str, reference: str, progress: str) -> None:
    from chunkstore.store.pinning import pin_reference

    slow_commits()
    with ReserveStore(path) as store:
        with open(progress, "a") as f:
            f.write("R\n")
        pin_reference(store, bytes.fromhex(reference), step=10)
        with open(progress, "a") as f:
            f.write("D\n")


def unpin_child(path: str, reference: str, progress: str) -> None:
    import chunkstore.store.pins as pins

    pins.PIN_STEP = 3  # many small steps: kills land between them
    slow_commits()
    with ReserveStore(path) as store:
        with open(progress, "a") as f:
            f.write("R\n")
        store.pins.remove(bytes.fromhex(reference))
        with open(progress, "a") as f:
            f.write("D\n")


def wait_for(path: str, line: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return
        with open(path) as f:
            if line in f.read():
                return
        time.sleep(0.005)
    raise AssertionError("child never got going")


def run_and_kill(tmp_path, path: str, code: str, delay: float, n: int) -> bool:
    """Run child ``code`` (given ``progress``), SIGKILL it ``delay`` s after it starts; True if it finished."""
    progress = str(tmp_path / f"progress-{n}")
    open(progress, "w").close()
    proc = subprocess.Popen(child_command(code.format(progress=progress)), cwd=REPO_DIR)
    try:
        wait_for(progress, "R\n", proc)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    return "D\n" in open(progress).read()


def check_after_kill(path: str) -> int:
    """The state a kill left: verify clean, a collection in flux at most. Returns how many are in flux."""
    report = verify_store(path)
    assert report.ok, [str(p) for p in report.problems]
    with ReserveStore(path, readonly=True) as store:
        flux = len(store.pins.in_flux())
    assert flux <= 1 and report.pending == flux
    return flux


def pin_state(path: str, reference: bytes, tree: set[bytes]) -> bool:
    """Reopen writable (recovery runs), then: the pin whole, or nothing of it. True if pinned."""
    with ReserveStore(path) as store:
        assert store.pins.in_flux() == {}
        pin = store.pins.get(reference)
        rows = pin_rows(store)
        live = {p.pin_id for p in store.pins.pins()}
        assert all(pid in live for _, pid in rows), "a row of a collection that is no pin"
        if pin is None:
            pinned = False
        else:
            assert {a for a, pid in rows if pid == pin.pin_id} == tree
            assert pin.chunks == len(tree)
            assert all(store.has(a) for a in tree)
            assert store.pins.check(reference).missing == 0
            pinned = True
    report = verify_store(path)
    assert report.ok and report.pending == 0, [str(p) for p in report.problems]
    return pinned


@pytest.mark.parametrize("rounds", [pytest.param(3, id="quick"), pytest.param(12, id="many", marks=pytest.mark.slow)])
def test_sigkill_while_pinning_leaves_the_pin_or_nothing(tmp_path, rounds):
    path = str(tmp_path / "s")
    ref_a, addrs_a, ref_b, addrs_b = prepare(path)
    with ReserveStore(path, readonly=True) as store:
        tree_a = set(tree_addresses(ref_a, store.get))
    assert tree_a == addrs_a
    code = f"import tests.store.test_pin_crash as t; t.pin_child({path!r}, {ref_a.hex()!r}, {{progress!r}})"
    rng = random.Random(rounds)
    mid_way = 0
    for n in range(rounds):
        finished = run_and_kill(tmp_path, path, code, rng.uniform(0.05, 1.2), n)
        mid_way += check_after_kill(path)
        pinned = pin_state(path, ref_a, tree_a)
        assert pinned == finished or (pinned and not finished)  # the last commit may land before the "D"
        with ReserveStore(path, readonly=True) as store:
            assert all(store.has(a) for a in addrs_a), "the reserve's chunks are never touched"
            assert store.pins.has(ref_b) and all(store.has(a) for a in addrs_b), "nor another pin"
        if pinned:
            with ReserveStore(path) as store:
                store.pins.remove(ref_a)  # start over
    assert mid_way >= 1, "no kill landed while a collection was being built"


@pytest.mark.parametrize("rounds", [pytest.param(3, id="quick"), pytest.param(10, id="many", marks=pytest.mark.slow)])
def test_sigkill_while_unpinning_leaves_the_pin_or_nothing(tmp_path, rounds):
    path = str(tmp_path / "s")
    _, _, ref_b, addrs_b = prepare(path)
    code = f"import tests.store.test_pin_crash as t; t.unpin_child({path!r}, {ref_b.hex()!r}, {{progress!r}})"
    rng = random.Random(100 + rounds)
    mid_way = 0
    for n in range(rounds):
        if n:
            prepare_again(path, ref_b)
        run_and_kill(tmp_path, path, code, rng.uniform(0.0, 0.5), n)
        mid_way += check_after_kill(path)
        if pin_state(path, ref_b, addrs_b):
            continue
        with ReserveStore(path, readonly=True) as store:
            assert not any(store.has(a) for a in addrs_b), "unpinned: nothing else kept them"
    assert mid_way >= 1, "no kill landed while a collection was being taken apart"


def prepare_again(path: str, ref_b: bytes) -> None:
    """Put tree B back and pin it again, its stamps removed, if a round unpinned it."""
    from chunkstore.store.pinning import pin_reference

    with ReserveStore(path) as store:
        if store.pins.has(ref_b):
            return
        store.batches.add(PINNED_BATCH)
        upload(store, Stamper(PINNED_BATCH), random.Random(2).randbytes(TREE_B))
        assert pin_reference(store, ref_b)
        store.batches.remove(PINNED_BATCH.id)


def test_crash_between_the_shard_commits_of_a_pin_step(tmp_path):
    """A build step commits shard by shard; dying after the first leaves rows the open removes."""
    path = str(tmp_path / "s")
    ref_a, addrs_a, _, _ = prepare(path)
    code = f"import tests.store.test_pin_crash as t; t.die_mid_step({path!r}, {ref_a.hex()!r})"
    proc = subprocess.run(child_command(code), cwd=REPO_DIR, timeout=120)
    assert proc.returncode == 9
    assert check_after_kill(path) == 1
    with ReserveStore(path, readonly=True) as store:
        assert pin_rows(store), "the kill left rows of the unfinished collection"
    assert not pin_state(path, ref_a, addrs_a)


def die_mid_step(path: str, reference: str) -> None:
    from chunkstore.store import writes
    from chunkstore.store.pinning import pin_reference

    original = writes.commit_txn
    commits = [0]

    def commit_then_die(txn: object) -> None:
        original(txn)  # type: ignore[arg-type]
        commits[0] += 1
        if commits[0] == 25:
            os._exit(9)

    with ReserveStore(path) as store:
        writes.commit_txn = commit_then_die
        pin_reference(store, bytes.fromhex(reference), step=50)
