"""The scan kernels compiled aside (``sampler.kernelcache``): into the cache the fork server loads, before it starts."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chunkstore.swarm.bmt import backend as hashing
from sampler import kernelcache, pipeline

# What the fork server's imports find in the cache: the scan kernels' names that were loaded, and those compiled.
_SCAN_KERNELS_LOADED = """
import gc
from numba.core.registry import CPUDispatcher
import sampler.columns, sampler.fileorder  # noqa: F401 (they warm up at import)
kernels = [d for d in gc.get_objects() if isinstance(d, CPUDispatcher) and d.py_func.__module__.startswith("sampler.")]
print(" ".join(sorted(d.py_func.__qualname__ for d in kernels if sum(d.stats.cache_hits.values()))))
print(" ".join(sorted(d.py_func.__qualname__ for d in kernels if sum(d.stats.cache_misses.values()))))
"""


@pytest.mark.skipif(not hashing.accelerated(), reason="the numba backend is not live here")
def test_the_process_compiles_the_scan_kernels_and_no_bmt_kernel_into_the_cache(tmp_path) -> None:
    """The compiling process fills an empty cache with what the fork server's imports of the scan modules
    load, and leaves the BMT's kernels to the daemon (compiling them too would only race it for the core)."""
    cache = tmp_path / "numba-cache"
    env = {**kernelcache.environment(), "NUMBA_CACHE_DIR": str(cache)}
    done = subprocess.run(kernelcache.command(os.getpid()), env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    files = [p.name for p in cache.rglob("*.nbi")]
    assert files and not [f for f in files if f.startswith(("numba_kernels.", "lane_kernels."))], files
    # The scan kernels' cache entries do not depend on the hashing backend (the reference keeps this
    # check off the BMT's compile too); tests/test_kernel_cache.py loads them under the numba backend.
    out = subprocess.run([sys.executable, "-P", "-c", _SCAN_KERNELS_LOADED], env=env, capture_output=True,
                         text=True, timeout=600, check=True).stdout.split("\n")
    loaded, missed = set(out[0].split()), out[1].split()
    assert missed == [], f"compiled again, not loaded from the cache: {missed}"
    assert {"scan_entries", "locate_rows", "read_direct", "keep_rows", "place_heads"} <= loaded


@pytest.fixture
def fresh_pool(monkeypatch):
    """A pool holder of the test's own (the module's one may hold other tests' pools), shut down after."""
    holder = pipeline._PoolHolder()
    monkeypatch.setattr(pipeline, "_POOL", holder)
    yield holder
    holder.shutdown()


def test_start_pool_starts_the_fork_server_only_once_the_kernels_compiled_aside(tmp_path, monkeypatch, fresh_pool):
    """While this process's BMT kernels load, ``start_pool`` compiles the scan kernels aside, and the fork
    server (which would compile them itself otherwise) is started only once that has ended."""
    from chunkstore.reserve import ReserveStore

    seen: list[int | None] = []
    monkeypatch.setattr(kernelcache, "command", lambda master: [sys.executable, "-c", "import time; time.sleep(1.0)"])
    monkeypatch.setattr(hashing, "settled", lambda: False)  # as in the daemon, while its thread loads the kernels
    monkeypatch.setattr(hashing, "accelerated", lambda: True)

    def context() -> multiprocessing.context.BaseContext:
        assert kernelcache._proc is not None
        seen.append(kernelcache._proc.poll())
        return multiprocessing.get_context("spawn")  # starts no process until a task is submitted

    monkeypatch.setattr(pipeline, "_mp_context", context)
    with ReserveStore(str(tmp_path / "s"), 2) as store:
        t0 = time.monotonic()
        assert pipeline.start_pool(store, 2) == 2
    assert seen == [0]  # the compile had ended, with success, when the server's context was asked for
    assert time.monotonic() - t0 >= 0.9


def test_a_settled_backend_compiles_nothing_aside(tmp_path, monkeypatch, fresh_pool) -> None:
    """Once the kernels are in (a sample's first pool, or a daemon that loaded them already), the fork server
    starts at once: a process compiling aside would only delay it."""
    from chunkstore.reserve import ReserveStore

    started: list[bool] = []
    monkeypatch.setattr(kernelcache, "start_compiling", lambda: started.append(True) or True)
    monkeypatch.setattr(pipeline, "_mp_context", lambda: multiprocessing.get_context("spawn"))
    with ReserveStore(str(tmp_path / "s"), 2) as store:
        assert pipeline.start_pool(store, 2) == 2
    assert started == []


def test_stop_ends_a_compile_still_running(monkeypatch) -> None:
    """A daemon told to stop while the scan kernels compile does not leave that process running."""
    monkeypatch.setattr(kernelcache, "command", lambda master: [sys.executable, "-c", "import time; time.sleep(60)"])
    monkeypatch.setattr(kernelcache, "_proc", None)
    assert kernelcache.start_compiling()
    proc = kernelcache._proc
    assert proc is not None
    assert not kernelcache.start_compiling()  # one at a time
    assert kernelcache.wait(0.1) is None  # still running
    t0 = time.monotonic()
    kernelcache.stop()
    assert proc.poll() is not None and time.monotonic() - t0 < 5
    assert kernelcache._proc is None and kernelcache.wait() is None


def test_the_command_imports_this_tree_whatever_the_working_directory(tmp_path) -> None:
    """A ``sampler`` package in the working directory (a checkout of another version) is not what compiles."""
    (tmp_path / "sampler").mkdir()
    (tmp_path / "sampler" / "__init__.py").write_text("raise SystemExit('the stand-in was imported')\n")
    code = "import sampler; print(sampler.__file__)"
    env = kernelcache.environment()
    done = subprocess.run([sys.executable, "-P", "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == Path(pipeline.__file__).with_name("__init__.py")
    assert kernelcache.command(1)[1] == "-P"


def test_without_a_numba_cache_the_process_gives_up_at_once(tmp_path) -> None:
    """Where numba has no cache to write (a read-only install and home), what the process compiled would be
    lost and the fork server would compile it again after waiting for it: the process ends at once instead.
    (Here numba's own verdict is stood in for by a ``sitecustomize`` that marks the cache unavailable.)"""
    marks = "from chunkstore.swarm.bmt import numba_kernels\nnumba_kernels._cache_warned = True\n"
    (tmp_path / "sitecustomize.py").write_text(marks)
    env = kernelcache.environment()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    t0 = time.monotonic()
    python, *args = kernelcache.command(os.getpid())
    done = subprocess.run([python, "-X", "importtime", *args], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == kernelcache.NO_CACHE, done.stderr
    assert "sampler.columns" not in done.stderr and time.monotonic() - t0 < 30


def test_a_shutdown_while_compiling_aside_starts_no_fork_server(tmp_path, monkeypatch, fresh_pool) -> None:
    """The daemon stopping while the scan kernels compile aside ends that process; the thread that waited
    for it to start the fork server then starts none (it would have started one during the exit)."""
    import threading

    from chunkstore.reserve import ReserveStore

    asked: list[bool] = []
    monkeypatch.setattr(kernelcache, "command", lambda master: [sys.executable, "-c", "import time; time.sleep(60)"])
    monkeypatch.setattr(hashing, "settled", lambda: False)
    monkeypatch.setattr(hashing, "accelerated", lambda: True)
    monkeypatch.setattr(pipeline, "_mp_context", lambda: asked.append(True) or multiprocessing.get_context("spawn"))
    with ReserveStore(str(tmp_path / "s"), 2) as store:
        starter = threading.Thread(target=pipeline.start_pool, args=(store, 2))
        starter.start()
        deadline = time.monotonic() + 30
        while kernelcache._proc is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        fresh_pool.shutdown()  # what the daemon's exit does (atexit)
        starter.join(10)
        assert not starter.is_alive()
    assert asked == [] and kernelcache.stopped()
