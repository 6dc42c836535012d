"""The user-facing pytest plugin, ``pytest -p chunkstore.testing --chunkstore-data-dir DIR``, against a daemon's data dir.

The daemon fills its store (``--demo``) and keeps serving while the plugin's
checks run on the same directory from another process; then the store is
damaged behind the daemon's back and the same command must fail, naming the
damage. The fixtures a user's own tests get from the plugin are exercised
in a throw-away test file run the same way.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import lmdb
import pytest

from chunkstore.reserve import ReserveStore
from chunkstore.store.layout import HEAD_SIZE, shard_path
from tests.api.helpers import ROOT


def run_plugin(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "chunkstore.testing", "-p", "no:cacheprovider", "-rA", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


async def _wait_ready(url: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as s:
        while time.monotonic() < deadline:
            async with s.get(url) as r:
                if r.status == 200:
                    return
            await asyncio.sleep(0.2)
    raise AssertionError("daemon never became ready")


@pytest.mark.slow
async def test_plugin_checks_a_served_data_dir_and_catches_damage(tmp_path, daemons):
    data_dir = tmp_path / "data"
    d = daemons(data_dir, "--demo", "--demo-chunks", "300", "--workers", "1").start()
    await _wait_ready(d.url("/readiness"))

    # While the daemon serves the store: both checks run and pass.
    ok = run_plugin("--chunkstore-data-dir", str(data_dir), "--chunkstore-anchor", "5a", cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-2000:]
    assert "PASSED" in ok.stdout and "test_store_verifies" in ok.stdout and "test_sample_is_sound" in ok.stdout
    assert "2 passed" in ok.stdout

    assert d.stop() == 0
    # Damage one chunk's data in place (its address no longer matches), as a failing disk would.
    with ReserveStore(data_dir, readonly=True) as store:
        victim = next(a for a, *_ in store.iter_neighbourhood(b"", 0))
        s = store.shard_of(victim)
    env = lmdb.open(shard_path(data_dir, s), max_dbs=8, subdir=True)
    try:
        with env.begin(write=True) as txn:
            chunks = env.open_db(b"chunks", txn=txn)
            head = bytearray(txn.get(victim, db=chunks))
            head[min(len(head), HEAD_SIZE) - 1] ^= 0xFF
            txn.put(victim, bytes(head), db=chunks)
    finally:
        env.close()

    bad = run_plugin("--chunkstore-data-dir", str(data_dir), cwd=tmp_path)
    assert bad.returncode == 1, bad.stdout[-3000:]
    assert "test_store_verifies FAILED" in bad.stdout or "FAILED" in bad.stdout
    assert "bad-chunk" in bad.stdout and victim.hex() in bad.stdout


def test_plugin_fixtures_in_a_users_own_tests(tmp_path):
    user_tests = tmp_path / "test_mine.py"
    user_tests.write_text(
        "from chunkstore.testing.integrity import assert_sample_intact, assert_store_verifies\n"
        "\n"
        "def test_built_reserve_is_sound(stamped_reserve):\n"
        "    built = stamped_reserve(120, seed=3)\n"
        "    assert len(built.chunks) == 120\n"
        "    assert_store_verifies(built.store.path)\n"
        "    result = assert_sample_intact(built.store, b'\\x01', 0, consensus_time=built.last_timestamp, workers=0)\n"
        "    assert len(result.items) == 16\n"
        "\n"
        "def test_recipe(regression_recipe):\n"
        "    assert len(regression_recipe) == 16\n"
        "\n"
        "def test_data_dir_skipped_without_option(chunkstore_data_dir):\n"
        "    raise AssertionError('not reached')\n"
    )
    out = run_plugin(str(user_tests), cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "2 passed, 1 skipped" in out.stdout
