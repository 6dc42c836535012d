"""The sampler's worker processes run the daemon's own code, wherever the daemon was started from."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import sampler
import sampler.worker

ASK_A_WORKER = textwrap.dedent(
    """
    from sampler.pipeline import _POOL

    if __name__ == "__main__":  # the workers import this script again, as spawned processes do
        pool = _POOL.get(1)
        print(pool.submit(eval, "__import__('sampler.worker').worker.__file__").result())
    """
)


def test_a_sampler_package_in_the_working_directory_is_not_what_the_workers_run(tmp_path) -> None:
    """Python 3.11's fork server imports its preloaded modules with the working directory first on its path.

    A daemon started inside a checkout of another version (here: a stand-in
    ``sampler`` package in the working directory) would have run that
    version's phase 1 in its workers. Fails without the fix in
    ``sampler.pipeline._start_fork_server``.
    """
    cwd = tmp_path / "elsewhere"
    (cwd / "sampler").mkdir(parents=True)
    (cwd / "sampler" / "__init__.py").write_text("")
    (cwd / "sampler" / "worker.py").write_text("STAND_IN = True\n")
    script = tmp_path / "scripts" / "ask.py"
    script.parent.mkdir()
    script.write_text(ASK_A_WORKER)
    # The script imports the sampler under test, as this process did (not another install of it).
    tree = os.path.dirname(os.path.dirname(sampler.__file__))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tree, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == sampler.worker.__file__


def test_start_pool_starts_the_pool_and_fork_server_a_sample_then_uses(tmp_path) -> None:
    """``start_pool`` makes the pool the next sample runs in, sized as the sample sizes it (``workers``, at
    most one a shard, 0 for none), and starts its fork server; it starts no worker (the sample forks them)."""
    from multiprocessing import forkserver

    from chunkstore.reserve import ReserveStore
    from sampler.pipeline import _POOL, pool_size, start_pool

    with ReserveStore(str(tmp_path / "s"), 2) as store:
        assert pool_size(store, 8) == 2 and pool_size(store, 1) == 1 and pool_size(store, 0) == 0
        assert start_pool(store, 0) == 0
        assert start_pool(store, 8) == 2
        pool = _POOL.get(2)
        server = forkserver._forkserver._forkserver_pid  # the module's own record of the server it started
        assert server is not None and os.path.exists(f"/proc/{server}")
        try:
            sampler.reserve_sample(store, b"\x00", 0, 0, workers=8)
        except sampler.InsufficientSample:
            pass  # an empty store: the sample still ran its phase 1 in the pool
        assert _POOL.get(2) is pool and forkserver._forkserver._forkserver_pid == server
