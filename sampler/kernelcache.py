"""The scan kernels compiled into numba's cache by a process of their own, while the daemon loads the BMT's.

The sampler's fork server imports the scan modules (``sampler.columns``,
``sampler.fileorder``) and the BMT kernels before it forks its first worker,
and the daemon starts it once its own thread has loaded the BMT kernels (so
that the server loads them from the cache instead of compiling them a
second time). On a fresh install (an empty cache: a new checkout, each new
container) that made two compiles one after the other, each on one core:
16-23 s for the BMT's in the daemon, then 13-18 s for the scan kernels in
the server, which the first ``/rchash`` waited for.

The scan kernels call no BMT kernel, so a process started at once compiles
them on the other core while the daemon compiles the BMT's. It runs with
the reference backend (``CHUNKSTORE_HASH_BACKEND=pysha3``), which keeps it
off the BMT kernels, and the fork server is started only once it has ended,
so the server loads both from the cache. Measured on two busy cores with an
empty ``NUMBA_CACHE_DIR``: the server's imports done 28.8 s after the start
against 40.9 s one after the other.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path

from chunkstore.swarm.bmt import backend as hashing

SCAN_MODULES = ("sampler.columns", "sampler.fileorder")  # each compiles its kernels at import (warm_up)
# As long as a compile can take on a slow machine; past it the fork server compiles what is left itself.
WAIT_SECONDS = 300.0

_lock = threading.Lock()
_proc: subprocess.Popen[bytes] | None = None
_stopped = False  # stop() ended the last one: the daemon is stopping, so no fork server is to start


NO_CACHE = 3  # the compiling process's exit code where numba has no cache to compile into


def command(master: int) -> list[str]:
    """The compiling process's command line: it ends with ``master`` (``lifeline``), gives up at once where
    numba cannot cache (what it compiled would be lost, and the fork server would wait for it for nothing),
    then imports the scan modules. ``-P``: the working directory is not on its path (another checkout there
    would be compiled)."""
    code = "; ".join([
        f"from chunkstore.swarm.lifeline import exit_with; exit_with({master})",
        "import sys; from chunkstore.swarm.bmt import numba_kernels",  # defining its kernels tells whether numba caches
        f"numba_kernels.caching() or sys.exit({NO_CACHE})",
        "import " + ", ".join(SCAN_MODULES),
    ])
    return [sys.executable, "-P", "-c", code]


def environment() -> dict[str, str]:
    """This process's environment, with the reference backend and this tree first on the path."""
    tree = str(Path(__file__).resolve().parents[1])  # the directory holding this sampler package
    path = os.pathsep.join(filter(None, [tree, os.environ.get("PYTHONPATH")]))
    return {**os.environ, hashing.ENV_VAR: "pysha3", "PYTHONPATH": path}


def start_compiling() -> bool:
    """Start the compiling process, unless one runs already; returns whether one was started."""
    global _proc, _stopped
    with _lock:
        if _proc is not None and _proc.poll() is None:
            return False
        _stopped = False
        # Its output would read as the daemon's (a "pysha3" backend line among them): it says nothing an
        # operator needs that the fork server does not say again.
        _proc = subprocess.Popen(command(os.getpid()), env=environment(), stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return True


def wait(timeout: float = WAIT_SECONDS) -> int | None:
    """Wait for the compiling process, if one was started; its exit code (None: none, or still running)."""
    with _lock:
        proc = _proc
    if proc is None:
        return None
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout)
    return proc.poll()


def stop() -> None:
    """End the compiling process if it still runs (the daemon is stopping: nothing will fork from it)."""
    global _proc, _stopped
    with _lock:
        proc, _proc = _proc, None
        _stopped = proc is not None
    if proc is not None and proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)


def stopped() -> bool:
    """Whether ``stop`` ended the last compiling process (one waiting for it should not go on to fork)."""
    with _lock:
        return _stopped
