"""Leftovers of killed imports and exports are told by their lock, not by a process id a container reuses."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chunkstore.transfer import holdlock
from chunkstore.transfer.exporter import _open_out
from chunkstore.transfer.importer import STAGING, STAGING_LOCK, _staging

# Holds a lock on argv[1] until killed.
_HOLDER = """
import os, sys, time
from chunkstore.transfer.holdlock import hold
fd = os.open(sys.argv[1], os.O_RDONLY)
hold(fd)
print("held", flush=True)
time.sleep(600)
"""
ROOT = Path(__file__).resolve().parents[2]


def _aged(path: Path) -> Path:
    old = time.time() - 2 * holdlock.SETTLING_SECONDS
    os.utime(path, (old, old))
    return path


def _holder(path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_file_is_abandoned_once_its_holder_is_gone(tmp_path):
    path = tmp_path / "lock"
    path.touch()
    _aged(path)
    proc = _holder(path)
    try:
        assert not holdlock.abandoned(str(path))
    finally:
        proc.kill()
        proc.wait()
    assert holdlock.abandoned(str(path))
    assert not holdlock.abandoned(str(tmp_path / "missing"))
    fresh = tmp_path / "fresh"
    fresh.touch()
    assert not holdlock.abandoned(str(fresh))  # its maker may not have locked it yet


def _leftover_staging(store: Path, name: str) -> Path:
    left = store / STAGING / name
    left.mkdir(parents=True)
    (left / "run-0").write_bytes(b"x" * 1000)
    (left / STAGING_LOCK).touch()
    _aged(left / STAGING_LOCK)
    return left


def test_a_killed_imports_staging_is_removed_even_under_the_same_process_id(tmp_path):
    """In a container every run has the same process id: the killed run's staging looked like our own."""
    store = tmp_path / "store"
    killed = _leftover_staging(store, f"import-{os.getpid()}-deadbeef")
    live = _leftover_staging(store, "import-1-cafecafe")
    proc = _holder(live / STAGING_LOCK)
    try:
        with _staging(str(store), None) as path:
            assert not killed.exists()
            assert live.exists()  # another import, still running
            assert Path(path, STAGING_LOCK).exists() and not holdlock.abandoned(str(_aged(Path(path, STAGING_LOCK))))
    finally:
        proc.kill()
        proc.wait()


def test_a_staging_dir_without_a_lock_goes_by_its_process_id(tmp_path):
    store = tmp_path / "store"
    mine = store / STAGING / f"import-{os.getpid()}-0ld0ld00"  # an earlier version's, with our process id
    mine.mkdir(parents=True)
    with _staging(str(store), None):
        assert not mine.exists()


@pytest.mark.parametrize("held", [False, True])
def test_a_killed_exports_partial_file_is_removed_by_the_next_export(tmp_path, held):
    target = tmp_path / "out.tar"
    partial = tmp_path / "out.tar.partial-99999"
    partial.write_bytes(b"half an export")
    _aged(partial)
    proc = _holder(partial) if held else None
    try:
        with _open_out(str(target)) as (stream, _):
            stream.write(b"whole")
        assert target.read_bytes() == b"whole"
        assert partial.exists() == held  # a running export's partial file stays
        assert [p.name for p in tmp_path.iterdir() if ".partial-" in p.name] == (["out.tar.partial-99999"] if held else [])
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
