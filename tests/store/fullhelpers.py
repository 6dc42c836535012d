"""Helpers of the full-disk tests: failures injected where LMDB raises them, and a really small file system.

Injected failures replace ``chunkstore.store.writes.commit_txn`` (every shard commit
goes through it) with one that raises what py-lmdb raises for a full disk
(``DiskError``, errno ENOSPC), a short write (``Error``, errno EIO) or a full
map, without committing: LMDB aborts a transaction whose commit fails, and the
store's error path aborts it too.

``run_in_small_fs`` runs a scenario of tests/store/fullfs_child.py in a process of
its own, inside a private mount namespace where a tmpfs of the given size is
mounted (``unshare -rm``: a user namespace, so no root is needed where the
kernel allows unprivileged user namespaces). The scenario prints its findings
as one JSON line; the test asserts on them.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable

import lmdb

from chunkstore.store import writes

# The repository root: the child runs there as ``python -m tests.store.fullfs_child``.
REPO_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def lmdb_failure(code: int | None) -> lmdb.Error:
    """What py-lmdb raises at commit: ``DiskError`` for ENOSPC, ``Error`` for EIO, ``MapFullError`` for None."""
    if code is None:
        return lmdb.MapFullError("mdb_txn_commit: MDB_MAP_FULL: Environment mapsize limit reached")
    cls = lmdb.DiskError if code == errno.ENOSPC else lmdb.Error
    exc = cls(f"mdb_txn_commit: {os.strerror(code)}")
    exc.code = code  # as py-lmdb sets it on the errors it raises
    return exc


class FailingCommits:
    """Replaces the shard commit: the calls ``fail(n)`` picks (n counts from 0) raise instead of committing."""

    def __init__(self, monkeypatch, code: int | None = errno.ENOSPC, fail: Callable[[int], bool] = lambda n: True) -> None:
        self.code = code
        self.fail = fail
        self.calls = itertools.count()
        self.failed = 0
        self._real = writes.commit_txn
        monkeypatch.setattr(writes, "commit_txn", self._commit)
        self._monkeypatch = monkeypatch

    def _commit(self, txn: lmdb.Transaction) -> None:
        if self.fail(next(self.calls)):
            self.failed += 1
            raise lmdb_failure(self.code)
        self._real(txn)

    def stop(self) -> None:
        """Commits succeed again (space was freed)."""
        self.fail = lambda n: False


def small_fs_unavailable() -> str | None:
    """Why a small tmpfs cannot be mounted here (the reason to skip), or None when it can."""
    if shutil.which("unshare") is None:
        return "needs unshare(1) from util-linux to mount a small tmpfs in a private namespace"
    mnt = tempfile.mkdtemp(prefix="smallfs-probe-")
    try:
        proc = subprocess.run(["unshare", "-rm", "sh", "-c", 'mount -t tmpfs -o size=1m tmpfs "$0"', mnt],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unshare -rm failed: {exc}"
    finally:
        os.rmdir(mnt)
    if proc.returncode != 0:
        return f"cannot mount a tmpfs in a user namespace here (unprivileged user namespaces off?): {proc.stderr.strip()}"
    return None


def run_in_small_fs(scenario: str, size: str, *args: str, timeout: float = 600) -> dict:
    """Run ``fullfs_child.py SCENARIO MOUNT ARGS...`` with a ``size`` tmpfs mounted at MOUNT; its JSON report."""
    mnt = tempfile.mkdtemp(prefix="smallfs-")
    script = 'mount -t tmpfs -o size="$0" tmpfs "$1" && shift && exec "$@"'
    child = [sys.executable, "-m", "tests.store.fullfs_child"]
    cmd = ["unshare", "-rm", "sh", "-c", script, size, mnt, *child, scenario, mnt, *args]
    env = {**os.environ, "CHUNKSTORE_HASH_BACKEND": "pysha3"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO_DIR)
    finally:
        os.rmdir(mnt)  # the tmpfs went with the namespace
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, f"scenario {scenario} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return json.loads(lines[-1])
