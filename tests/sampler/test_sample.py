"""reserve_sample against a deliberately simple one-process sampler (tests.sampler.helpers.simple_sample).

One random store of a few thousand chunks per module (CAC and SOC, five
batches of which three make stamps ineligible or invalid, second stamps,
rogue index entries, stamps after the consensus time) is sampled over several
anchors, depths, worker counts and candidate bounds.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from chunkstore.swarm.constants import SAMPLE_SIZE
from chunkstore.swarm.errors import SwarmError
from chunkstore.swarm.keccak import keccak256
from sampler import (
    InsufficientSample,
    check_sample,
    make_inclusion_proofs,
    reserve_sample,
    reserve_sample_async,
    sample_hash,
    verify_inclusion_proof,
)
from tests.sampler.helpers import Expected, World, build_world, simple_sample

N_CHUNKS = 4000
A32 = bytes.fromhex("5a" * 32)
B32 = bytes.fromhex("c3" + "17" * 31)
C32 = bytes.fromhex("0f" * 32)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    w = build_world(str(tmp_path_factory.mktemp("world")), N_CHUNKS, seed=7)
    yield w
    w.store.close()


def assert_matches(result, expected: Expected) -> None:
    want = expected.items[:SAMPLE_SIZE]
    assert [it.transformed_address for it in result.items] == [t[0] for t in want]
    assert [it.chunk_address for it in result.items] == [t[1] for t in want]
    assert [it.chunk_data for it in result.items] == [t[2] for t in want]
    assert [it.stamp for it in result.items] == [t[3] for t in want]
    assert [int(it.chunk_type) for it in result.items] == [int(t[4]) for t in want]


# (anchor, depth, consensus offset, min balance, workers, k)
CASES = [
    pytest.param(A32, 0, 900, None, 2, 64, id="whole-store"),
    pytest.param(A32, 0, 1000, 100, 2, 64, id="whole-store-min-balance"),
    pytest.param(B32, 2, 500, 100, 2, 64, id="depth2"),
    pytest.param(B32, 3, 900, 100, 1, 64, id="depth3-one-worker"),
    pytest.param(C32, 4, 900, None, 2, 64, id="depth4"),
    pytest.param(A32, 2, 900, 100, 0, 64, id="in-process"),
    pytest.param(b"\x5a", 3, 900, 100, 2, 64, id="1-byte-anchor"),
    pytest.param(b"\xa7", 5, 700, 100, 2, 2, id="1-byte-anchor-k2-rescans"),
    pytest.param(b"\x00", 1, 900, 100, 2, 1, id="k1-rescans"),
    pytest.param(B32, 6, 900, 100, 2, 64, id="depth6-sparse"),
]


@pytest.mark.parametrize("anchor,depth,offset,min_balance,workers,k", CASES)
def test_equals_simple_sampler(world: World, anchor, depth, offset, min_balance, workers, k):
    consensus = world.base_time + offset
    expected = simple_sample(world, anchor, depth, consensus, min_balance)
    assert len(expected.items) >= SAMPLE_SIZE, "case needs a full sample"
    result = reserve_sample(world.store, anchor, depth, consensus, min_balance, workers=workers, k=k)
    assert_matches(result, expected)
    check_sample(result.items, anchor, world.store.batches, consensus)
    st = result.stats
    assert st.total_iterated == expected.iterated
    assert st.below_balance_ignored == expected.below
    assert st.rogue_chunks == expected.rogue
    assert st.new_ignored == expected.new
    assert st.stamp_validations >= SAMPLE_SIZE
    assert st.stamp_validations == SAMPLE_SIZE + st.invalid_stamps
    assert st.chunk_load_failed == 0
    assert st.duplicates_ignored == expected.duplicates()
    assert st.hash_mismatches == 0
    assert st.total_duration >= st.phase1_duration
    if k < 4:
        assert st.reruns > 0  # the small bound made shards run dry and rescan
    for anchor2 in (b"\x1e", bytes(range(32))):
        proofs = make_inclusion_proofs(result.items, anchor, anchor2)
        for p in proofs:
            verify_inclusion_proof(p, sample_hash(result.items), anchor)


def test_world_has_what_the_cases_need(world: World):
    """The store really holds invalid stamps, duplicates, SOCs, rogue entries and too-new stamps."""
    e = simple_sample(world, A32, 0, world.base_time + 900, 100)
    assert e.rogue == 3 and e.below > 0 and e.new > 0
    assert any(len(s) > 1 for s in world.stamps.values())
    types = {int(t[4]) for t in e.items[:200]}
    assert types == {1, 2}
    r = reserve_sample(world.store, A32, 0, world.base_time + 900, 100, workers=2, k=1)
    assert r.stats.invalid_stamps > 0
    # Some anchor puts a chunk held under two batches among the first 15 items: the
    # duplicate count is then exact and positive (the textbook sampler counts it apart).
    for i in range(64):
        anchor = keccak256(b"dup anchor %d" % i)
        e = simple_sample(world, anchor, 0, world.base_time + 900, 100)
        if e.duplicates():
            break
    else:
        pytest.fail("no anchor puts a twice-stamped chunk into the sample")
    r = reserve_sample(world.store, anchor, 0, world.base_time + 900, 100, workers=2)
    assert_matches(r, e)
    assert r.stats.duplicates_ignored == e.duplicates() > 0


@pytest.mark.parametrize(
    "anchor,depth",
    [pytest.param(B32, 8, id="depth8"), pytest.param(b"\x42", 8, id="1-byte"), pytest.param(b"\x42", 12, id="1-byte-past-its-bits")],
)
def test_insufficient(world: World, anchor, depth):
    consensus = world.base_time + 900
    expected = simple_sample(world, anchor, depth, consensus, 100)
    assert len(expected.items) < SAMPLE_SIZE
    with pytest.raises(InsufficientSample) as info:
        reserve_sample(world.store, anchor, depth, consensus, 100, workers=2)
    assert isinstance(info.value, SwarmError)
    assert info.value.found == len(expected.items)
    assert f"found {len(expected.items)} " in str(info.value)


def test_depth_past_31_is_empty(world: World):
    with pytest.raises(InsufficientSample) as info:
        reserve_sample(world.store, A32, 32, world.base_time, workers=0)
    assert info.value.found == 0


def test_consensus_time_equal_is_kept(world: World):
    """A stamp stamped exactly at the consensus time is eligible; one ns later it is not."""
    e = simple_sample(world, A32, 0, world.base_time + 1000, None)
    top = e.items[0]
    ts = top[3].timestamp_ns
    r = reserve_sample(world.store, A32, 0, ts, workers=2)
    expected = simple_sample(world, A32, 0, ts, None)
    assert_matches(r, expected)
    assert any(it.stamp.timestamp_ns == ts for it in r.items)
    r2 = reserve_sample(world.store, A32, 0, ts - 1, workers=2)
    assert_matches(r2, simple_sample(world, A32, 0, ts - 1, None))
    assert all(it.stamp.timestamp_ns < ts for it in r2.items)


def test_items_own_their_bytes(world: World):
    r = reserve_sample(world.store, A32, 1, world.base_time + 900, workers=2)
    datas = [it.chunk_data for it in r.items]
    assert all(type(d) is bytes for d in datas)
    assert len({id(d) for d in datas}) == SAMPLE_SIZE


async def test_async_keeps_the_loop_running(world: World):
    ticks = 0
    stop = False

    async def ticker():
        nonlocal ticks
        while not stop:
            ticks += 1
            await asyncio.sleep(0.001)

    t = asyncio.create_task(ticker())
    t0 = time.perf_counter()
    r = await reserve_sample_async(world.store, A32, 0, world.base_time + 900, 100, workers=2)
    elapsed = time.perf_counter() - t0
    stop = True
    await t
    assert len(r.items) == SAMPLE_SIZE
    # The loop kept ticking for (a good part of) the sample's duration.
    assert ticks >= max(1, int(elapsed / 0.001) // 10)
    assert_matches(r, simple_sample(world, A32, 0, world.base_time + 900, 100))


def test_bad_arguments(world: World):
    with pytest.raises(ValueError):
        reserve_sample(world.store, b"", 0, 0)
    with pytest.raises(ValueError):
        reserve_sample(world.store, A32, -1, 0)


@pytest.mark.parametrize("workers", [0, 2])
def test_progress_reports_walked_entries(world: World, workers):
    """The progress callback sees a non-decreasing count that ends at the entries walked (rescans not counted)."""
    from sampler.pipeline import expected_entries

    for k in (64, 1):
        seen: list[int] = []
        r = reserve_sample(world.store, A32, 0, world.base_time + 900, 100, workers=workers, k=k, progress=seen.append)
        assert seen, "no progress reported"
        assert seen == sorted(seen)
        assert seen[-1] == r.stats.total_iterated
        assert_matches(r, simple_sample(world, A32, 0, world.base_time + 900, 100))
    # At depth 0 the expected count is exact: every stamp entry is walked.
    assert expected_entries(world.store, A32, 0) == r.stats.total_iterated
    assert expected_entries(world.store, A32, 2) == r.stats.total_iterated >> 2
    assert expected_entries(world.store, A32, 32) == 0
