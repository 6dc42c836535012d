"""Helper processes exit with the process they work for: ``chunkstore.swarm.lifeline`` and its two users.

A fuzzing run SIGKILLed the daemon after a sample, and the importer during
validation: the sampler's pool worker, its fork server and resource tracker,
and the import's validation worker all lived on, re-parented, waiting on
pipes that never end (some 260 MB per crash; the import worker also held the
importer's stdout, so a caller reading it hung).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import chunkstore

TREE = os.path.dirname(os.path.dirname(chunkstore.__file__))

SAMPLER_MASTER = """
import json, multiprocessing.forkserver, os, sys, time
from sampler.pipeline import _POOL

if __name__ == "__main__":
    pool = _POOL.get(1)
    worker = pool.submit(os.getpid).result()
    server = multiprocessing.forkserver._forkserver._forkserver_pid
    print(json.dumps({"helpers": [worker, server]}), flush=True)
    time.sleep(600)
"""

IMPORT_MASTER = """
import json, time
from chunkstore.transfer.bufferpool import SharedRing
from chunkstore.transfer.fastcheck import BatchTable
from chunkstore.transfer.workers import Workers

if __name__ == "__main__":
    workers = Workers(1, SharedRing(1 << 20), BatchTable({}))
    print(json.dumps({"helpers": [p.pid for p in workers._procs], "start": workers.start_method}), flush=True)
    time.sleep(600)
"""

EXIT_WITH = """
import sys, time
from chunkstore.swarm.lifeline import exit_with

exit_with(int(sys.argv[1]), poll_seconds=0.05)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


def _start(script: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [TREE, os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *args], stdout=subprocess.PIPE,
                            text=True, env=env)  # fmt: skip


def _kill_and_watch(master: subprocess.Popen[str], helpers: list[int], seconds: float = 20) -> list[int]:
    """SIGKILL ``master``; the helpers still alive after ``seconds``."""
    assert all(_alive(pid) for pid in helpers)
    master.send_signal(signal.SIGKILL)
    master.wait()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(pid) for pid in helpers):
        time.sleep(0.1)
    left = [pid for pid in helpers if _alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)  # do not leak them into the rest of the run
    return left


def test_exit_with_ends_the_process_when_the_watched_one_exits() -> None:
    watched = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    helper = _start(EXIT_WITH, str(watched.pid))
    time.sleep(0.5)
    assert helper.poll() is None
    assert _kill_and_watch(watched, [helper.pid]) == []
    assert helper.wait(5) == 0


def test_sampler_pool_worker_and_fork_server_exit_with_the_daemon() -> None:
    master = _start(SAMPLER_MASTER)
    helpers = json.loads(master.stdout.readline())["helpers"]
    assert _kill_and_watch(master, helpers) == [], "sampler helpers outlived the killed daemon"


def test_import_validation_worker_exits_with_the_importer() -> None:
    master = _start(IMPORT_MASTER)
    line = json.loads(master.stdout.readline())
    assert line["start"] == "fork"  # the importer's own case: a fresh process, no other thread
    assert _kill_and_watch(master, line["helpers"]) == [], "the validation worker outlived the killed importer"
