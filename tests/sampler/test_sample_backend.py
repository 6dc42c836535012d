"""The sampler never trusts the accelerated hashing backend silently.

A wrong accelerated hash caught in phase 2 is logged, counted, and the sample
is redone with the reference backend, so the answer is still right; a SOC
merely replaced between the phases is no such alarm. The faulty backend is
simulated in-process (``workers=0``): phase 1 then runs in this process, so
patching ``hashing.transformed_addresses`` reaches it.
"""

from __future__ import annotations

import logging

import pytest

from chunkstore.swarm.bmt import backend as hashing
from chunkstore.swarm.constants import SAMPLE_SIZE, ChunkType
from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.soc import make_soc, parse_soc
from chunkstore.swarm.stamp import sign_stamp
from sampler import check_sample, reserve_sample
from tests.sampler.helpers import World, build_world, faulty_backend, simple_sample

ANCHOR = bytes.fromhex("6b" * 32)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    w = build_world(str(tmp_path_factory.mktemp("backend") / "s"), 800, seed=9)
    yield w
    w.store.close()


def _items(result) -> list[tuple]:
    return [(it.transformed_address, it.chunk_address, it.chunk_data, it.stamp) for it in result.items]


def _want(items) -> list[tuple]:
    return [(t[0], t[1], t[2], t[3]) for t in items[:SAMPLE_SIZE]]


@pytest.mark.parametrize("kind", [ChunkType.CAC, ChunkType.SOC], ids=["cac", "soc"])
def test_mismatch_is_loud_and_the_sample_redone(world, monkeypatch, caplog, keep_backend, kind):
    """One chunk of the true sample hashes too large (never a candidate), another too small.

    The small one is caught in phase 2; the rerun with the reference backend
    then also finds the one the wrong hash had hidden.
    """
    consensus = world.base_time + 900
    expected = simple_sample(world, ANCHOR, 0, consensus, 100)
    hidden = expected.items[3]
    decoy = next(t for t in reversed(expected.items) if t[4] == kind)
    faulty_backend(monkeypatch, {hidden[0]: b"\xff" * 32, decoy[0]: bytes(32)})
    with caplog.at_level(logging.ERROR):
        result = reserve_sample(world.store, ANCHOR, 0, consensus, 100, workers=0)
    assert _items(result) == _want(expected.items)
    assert result.stats.hash_mismatches == 1
    assert result.stats.chunk_load_failed == 0  # not passed off as a load failure
    assert result.hash_backend == "pysha3"
    info = hashing.backend_info()
    assert (info.name, info.accelerated) == ("pysha3", False)
    assert decoy[1].hex() in info.reason
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("mismatch" in r.getMessage() and r.fields["chunk"] == decoy[1].hex() for r in errors
               if hasattr(r, "fields"))  # fmt: skip
    check_sample(result.items, ANCHOR, world.store.batches, consensus)

    # The process stays on the reference path: the next sample is right without a rerun.
    again = reserve_sample(world.store, ANCHOR, 0, consensus, 100, workers=0)
    assert _items(again) == _want(expected.items)
    assert again.stats.hash_mismatches == 0 and again.hash_backend == "pysha3"


def test_replaced_soc_is_stale_not_a_mismatch(world, monkeypatch, caplog, keep_backend, tmp_path):
    """A SOC updated between phase 1 and phase 2 differs from its phase-1 hash for an honest reason."""
    import sampler.pipeline as pipeline

    w = build_world(str(tmp_path / "s"), 300, seed=12)
    try:
        consensus = w.base_time + 5000
        expected = simple_sample(w, ANCHOR, 0, consensus, None)
        soc_item = next(t for t in expected.items[:SAMPLE_SIZE] if t[4] == ChunkType.SOC)
        address, data = soc_item[1], soc_item[2]
        signers = [Signer(keccak256(b"signer %d" % i)) for i in range(3)]
        soc = parse_soc(data)
        soc_owner = next(s for s in signers if s.address == soc.owner)
        st = soc_item[3]
        stamp_owner = next(s for s in signers if s.address == w.batches[st.batch_id].owner)
        newer = make_soc(soc_owner, soc.id, (5).to_bytes(8, "little") + b"newer")
        assert newer.address == address
        restamp = sign_stamp(stamp_owner, address, st.batch_id, st.bucket, st.position, st.timestamp_ns + 1)

        real_first = pipeline._Phase1.first

        def first_then_update(self):
            scans = real_first(self)
            w.store.put(newer.data, restamp)  # the feed moves on while phase 2 has not started
            return scans

        monkeypatch.setattr(pipeline._Phase1, "first", first_then_update)
        with caplog.at_level(logging.ERROR):
            result = reserve_sample(w.store, ANCHOR, 0, consensus, None, workers=0)
        assert result.stats.hash_mismatches == 0
        assert result.stats.chunk_load_failed == 1
        assert hashing.backend_info().accelerated
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        # The stale candidate is left out; everything else is as before.
        assert _items(result) == _want([t for t in expected.items if t[1] != address])
    finally:
        w.store.close()


def test_reference_task_never_touches_the_kernels(world, monkeypatch):
    """A phase-1 task marked ``reference`` hashes with pysha3 whatever the process's backend."""
    from sampler.worker import ShardTask, scan_snapshot

    class Exploding:
        def __getattr__(self, name):
            raise AssertionError(f"accelerated kernel used: {name}")

    consensus = world.base_time + 900
    tasks = [ShardTask(world.path, s, ANCHOR, 0, consensus, frozenset(), 8, reference=True) for s in range(4)]
    want = []
    for t in tasks:
        with world.store.shard(t.shard).snapshot() as snap:
            want.append(scan_snapshot(t, snap).candidates)
    monkeypatch.setattr(hashing, "_kn", Exploding())
    for t, w in zip(tasks, want, strict=True):
        with world.store.shard(t.shard).snapshot() as snap:
            assert scan_snapshot(t, snap).candidates == w


def test_reference_rerun_in_worker_processes(world, monkeypatch):
    """With the accelerated path off, worker processes are told to use the reference, and agree."""
    consensus = world.base_time + 900
    monkeypatch.setattr(hashing, "accelerated", lambda: False)
    result = reserve_sample(world.store, ANCHOR, 0, consensus, 100, workers=2, k=2)
    assert result.hash_backend == "pysha3"
    assert _items(result) == _want(simple_sample(world, ANCHOR, 0, consensus, 100).items)


def test_demote_switches_the_process_to_the_reference(keep_backend, caplog):
    data = (300).to_bytes(8, "little") + bytes(range(256)) + b"x" * 44
    fast = hashing.chunk_hash(data, b"pre")
    with caplog.at_level(logging.ERROR, logger="chunkstore.swarm.bmt.backend"):
        hashing.demote("test: wrong answer for chunk 00ff")
    assert "demoted" in caplog.text
    info = hashing.backend_info()
    assert info.as_dict() == {"name": "pysha3", "accelerated": False, "reason": "test: wrong answer for chunk 00ff"}
    assert hashing.BACKEND == "pysha3" and not hashing.accelerated()
    assert hashing.chunk_hash(data, b"pre") == fast


def test_chunk_seconds_measures_the_paths():
    ref = hashing.chunk_seconds(reference=True)
    assert 1e-6 < ref < 0.1
    assert hashing.chunk_seconds(reference=True) == ref  # measured once
    if hashing.accelerated():
        fast = hashing.chunk_seconds()
        assert fast == hashing.chunk_seconds(reference=False)
        assert fast * 2 < ref  # the point of the accelerated path (about 9x on one core)
