"""SIGKILL a writer at random moments: the store must reopen clean, keeping every acknowledged put.

"Keeping" is exact: an acknowledged (chunk, slot, timestamp) is still stored
under that slot with at least that timestamp, unless the slot has since gone
to a strictly newer stamp (a later put, acknowledged or not, may win a slot)
or was freed by deleting a chunk that had taken it. The child logs each put's
intent before calling the store and its acknowledgement after, so the check
knows every claim that may have landed.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time

from chunkstore.reserve import ReserveStore
from chunkstore.store.verify import verify_store
from chunkstore.store.writes import WriteSession
from tests.store.helpers import CONTESTED, FRESH, REPO_DIR, Stamper, child_command, make_batch, open_store, random_cac

ROUNDS = int(os.environ.get("CHUNKSTORE_CRASH_ROUNDS", "24"))


Claim = tuple[bytes, bytes, int]  # (address, slot key, stamp timestamp)


def _read_log(ack_path: str) -> tuple[list[Claim], list[Claim], set[bytes]]:
    """(acknowledged puts, attempted puts, addresses whose deletion was attempted)."""
    acks, tries, deleting = [], [], set()
    with open(ack_path) as f:
        for line in f:
            parts = line.split()
            if not line.endswith("\n") or not parts:
                continue  # the kill cut this line short
            if parts[0] in ("P", "p") and len(parts) == 4:
                claim = (bytes.fromhex(parts[1]), bytes.fromhex(parts[2]), int(parts[3]))
                (acks if parts[0] == "P" else tries).append(claim)
            elif parts[0] == "d" and len(parts) == 2:
                deleting.add(bytes.fromhex(parts[1]))
    return acks, tries, deleting


def _slot_holders(store: ReserveStore, key: bytes) -> list[int]:
    out = []
    for i in range(store.shard_count):
        shard = store.shard(i)
        with shard.env.begin() as txn:
            raw = txn.get(key, db=shard.slots)
        if raw is not None:
            out.append(int.from_bytes(raw[32:], "big"))
    return out


def _check_acks(path: str, acks: list[Claim], tries: list[Claim], deleting: set[bytes]) -> int:
    # A slot taken by a newer put (acknowledged or not) of a chunk deleted later is legitimately empty.
    freed: dict[bytes, int] = {}
    for addr, key, ts in tries:
        if addr in deleting:
            freed[key] = max(freed.get(key, 0), ts)
    checked = 0
    with ReserveStore(path, readonly=True) as store:
        for addr, key, ts in acks:
            if addr in deleting:
                continue
            kept = any(s.batch_id + s.index == key and s.timestamp_ns >= ts for s in store.stamps_of(addr))
            if kept:
                store.get(addr)
            elif freed.get(key, 0) <= ts:
                assert any(t > ts for t in _slot_holders(store, key)), (
                    f"acknowledged put of {addr.hex()} in slot {key.hex()} at {ts} is lost"
                )
            checked += 1
    return checked


def _wait_ready(ack_path: str, proc: subprocess.Popen, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"child exited early with {proc.returncode}")
        with open(ack_path) as f:
            if "R\n" in f.read():
                return
        time.sleep(0.01)
    raise AssertionError("child never became ready")


def test_sigkill_never_corrupts_or_loses_acknowledged_puts(tmp_path):
    path = str(tmp_path / "store")
    open_store(path, batches=[FRESH, CONTESTED]).close()
    rng = random.Random(1234)
    kills = 0
    acks: list[Claim] = []
    tries: list[Claim] = []
    deleting: set[bytes] = set()
    for round_no in range(ROUNDS):
        ack_path = str(tmp_path / f"acks-{round_no}")
        open(ack_path, "w").close()
        proc = subprocess.Popen(child_command(f"storehelpers.crash_child({path!r}, {ack_path!r}, {round_no})"), cwd=REPO_DIR)
        try:
            if round_no % 6 == 5:
                time.sleep(rng.uniform(0.0, 0.4))  # sometimes while starting up or recovering
            else:
                _wait_ready(ack_path, proc)
                time.sleep(rng.uniform(0.02, 0.35))
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait()
        kills += proc.returncode == -signal.SIGKILL
        with ReserveStore(path):  # the writable open finishes what the kill interrupted
            pass
        report = verify_store(path)
        assert report.ok and report.pending == 0, [str(p) for p in report.problems]
        new_acks, new_tries, new_deleting = _read_log(ack_path)
        acks += new_acks
        tries += new_tries
        deleting |= new_deleting
        checked = _check_acks(path, acks, tries, deleting)  # every round rechecks all earlier acknowledgements
    assert kills >= 20
    assert checked > 100  # the workload really ran
    with ReserveStore(path, readonly=True) as store:
        assert store.chunk_count() > 50


def _crash_in_child(path: str, call: str) -> int:
    proc = subprocess.run(child_command(call), cwd=REPO_DIR, timeout=60)
    return proc.returncode


def crash_between_commits(path: str) -> None:
    """Child: a cross-shard replacement dies after its first commit, before the eviction."""
    batch = make_batch(7, depth=4, bucket_depth=0)
    stamper = Stamper(batch)
    with ReserveStore(path) as store:
        a1, d1 = random_cac(10)
        a2, d2 = next(c for c in (random_cac(10) for _ in range(100)) if c[0][-1] % 4 != a1[-1] % 4)
        store.put(d1, stamper.stamp(a1, position=0, ts=1))
        with open(path + ".addrs", "w") as f:
            f.write(f"{a1.hex()} {a2.hex()}")

        def die(self: WriteSession, key: bytes) -> None:
            os._exit(9)

        WriteSession.resolve = die
        store.put(d2, stamper.stamp(a2, position=0, ts=2))


def crash_during_batch_removal(path: str) -> None:
    """Child: a batch removal dies after purging part of one shard."""
    import chunkstore.store.store as store_mod

    batch = make_batch(3)
    with ReserveStore(path) as store:
        store.batches.add(batch)
        stamper = Stamper(batch)
        store.put_many([(d, stamper.stamp(a)) for a, d in (random_cac(5) for _ in range(40))])
        store_mod.PURGE_STEP = 3
        original = WriteSession.purge_batch_part
        calls = [0]

        def purge_then_die(self: WriteSession, s: int, batch_id: bytes, limit: int) -> int:
            calls[0] += 1
            if calls[0] == 3:
                os._exit(9)
            return original(self, s, batch_id, limit)

        WriteSession.purge_batch_part = purge_then_die
        store.batches.remove(batch.id)


def test_crash_between_the_two_commits_of_a_contest(tmp_path):
    path = str(tmp_path / "s")
    open_store(path, batches=[make_batch(7, depth=4, bucket_depth=0)]).close()
    assert _crash_in_child(path, f"import tests.store.test_crash as test_crash; test_crash.crash_between_commits({path!r})") == 9
    a1, a2 = (bytes.fromhex(h) for h in open(path + ".addrs").read().split())
    report = verify_store(path)
    assert report.ok and report.pending == 1
    with ReserveStore(path) as store:
        assert store.recovered["pending_slots"] == 1
        assert store.has(a2) and not store.has(a1)
    assert verify_store(path).ok


def test_crash_during_batch_removal(tmp_path):
    path = str(tmp_path / "s")
    ReserveStore(path).close()
    assert _crash_in_child(path, f"import tests.store.test_crash as test_crash; test_crash.crash_during_batch_removal({path!r})") == 9
    with ReserveStore(path, readonly=True) as store:
        left = store.chunk_count()
        assert 0 < left < 40 and store.batches.removing() == [make_batch(3).id]
    with ReserveStore(path) as store:
        assert store.recovered["batch_removals"] == 1
        assert store.chunk_count() == 0 and store.batches.list() == []
    assert verify_store(path).ok
