"""``merge_blocks`` over spilled and in-memory runs: every row once, in key order, with its own data.

Windows of a few rows make the cursors top up many times, partly used, with
data read around the page cache (O_DIRECT, whole pages) or through it.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkstore.swarm.constants import MAX_SOC_SIZE, STAMP_SIZE
from chunkstore.transfer import runs as runs_module
from chunkstore.transfer.runs import RunBuffer, merge_blocks

SHARDS = 2

record = st.tuples(
    st.integers(0, 7),  # address: few, so equal keys meet across runs
    st.integers(0, 3),  # batch
    st.sampled_from([0, 1, 7, 4095, 4096, 4097, 4104, MAX_SOC_SIZE]) | st.integers(0, MAX_SOC_SIZE),
)


def _spill_runs(directory: str, records: list[tuple[int, int, int]], per_run: int) -> tuple[list, dict]:
    """Runs of ``per_run`` records (the last kept in memory); the data each ordinal carries."""
    runs, data = [], {}
    for start in range(0, len(records), per_run):
        chunk = records[start : start + per_run]
        n = len(chunk)
        addresses = np.zeros((n, 32), np.uint8)
        stamps = np.zeros((n, STAMP_SIZE), np.uint8)
        lengths = np.array([length for _, _, length in chunk], np.int64)
        offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
        src = np.frombuffer(os.urandom(int(lengths.sum()) + 1), np.uint8)
        for i, (a, b, _) in enumerate(chunk):
            addresses[i, 0] = a
            stamps[i, 0] = b
            stamps[i, 32:40] = np.frombuffer((start + i).to_bytes(8, "big"), np.uint8)  # distinct stamp index
            data[start + i] = src[offsets[i] : offsets[i] + lengths[i]].tobytes()
        buffer = RunBuffer(max(1, int(lengths.sum())), n)
        ordinals = np.arange(start, start + n, dtype=np.uint64)
        kinds = np.ones(n, np.uint8)
        buffer.add(addresses[:, 31] % SHARDS, addresses, stamps, kinds, ordinals, src, offsets, lengths)
        last = start + per_run >= len(records)
        runs.append(buffer.seal(SHARDS) if last else buffer.spill(directory, len(runs), SHARDS))
    return runs, data


@pytest.mark.parametrize("page_cache", [False, True])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(record, min_size=1, max_size=60), per_run=st.integers(1, 9), window=st.integers(1, 6))
def test_merge_hands_out_every_row_once_in_key_order_with_its_data(
    tmp_path_factory, monkeypatch, page_cache, records, per_run, window
):
    if page_cache:
        monkeypatch.setattr(runs_module, "open_direct", lambda path, flags: (os.open(path, flags, 0o600), False))
    directory = str(tmp_path_factory.mktemp("runs"))
    runs, data = _spill_runs(directory, records, per_run)
    try:
        seen: list[int] = []
        for s in range(SHARDS):
            keys = []
            for pieces in merge_blocks([r.shard_cursor(s, window) for r in runs]):
                block = []
                for p in pieces:
                    for row in p.rows:
                        start = int(row["off"]) - p.base
                        got = p.data[start : start + int(row["len"])].tobytes()
                        assert got == data[int(row["ord"])], f"record {int(row['ord'])} read back other data"
                        block.append(row.tobytes()[:73])  # the raw key: S73 would strip its trailing NULs
                        seen.append(int(row["ord"]))
                keys += sorted(block)  # a block is in key order only together (pieces come run by run)
            assert keys == sorted(keys)
            assert all(k[0] == s for k in keys)
        assert sorted(seen) == list(range(len(records)))
    finally:
        for r in runs:
            r.remove()
