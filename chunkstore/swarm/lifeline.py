"""A helper process's tie to the process it works for: when that one dies, the helper exits too.

The sampler's pool workers and the import's validation workers wait on a
pipe for their next task. When the daemon or the importer is killed
(SIGKILL, the OOM killer), that pipe never reaches end-of-file: the workers
hold its other end themselves (a ``ProcessPoolExecutor`` worker receives its
whole call queue; a forked import worker inherits its own parent end), so
they, the fork server and the resource tracker would wait forever, some
260 MB per crash. A thread here watches the master's process instead.
"""

from __future__ import annotations

import os
import select
import threading
import time


def exit_with(pid: int, poll_seconds: float = 1.0) -> threading.Thread:
    """Start a daemon thread that ends this process (``os._exit(0)``) once process ``pid`` has exited.

    It waits on a pidfd where the platform has one (Linux 5.3+: no polling,
    and immune to the PID's reuse), otherwise it polls every ``poll_seconds``.
    Nothing is cleaned up on the way out: the master that would have wanted
    the results is gone.
    """
    thread = threading.Thread(target=_watch, args=(pid, poll_seconds), name=f"exit-with-{pid}", daemon=True)
    thread.start()
    return thread


def _watch(pid: int, poll_seconds: float) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(0)  # already gone
    except (AttributeError, OSError):
        fd = -1
    if fd >= 0:
        select.select([fd], [], [])  # readable once the process has exited
        os._exit(0)
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:
            pass  # alive, someone else's: only reachable if the PID was reused
        time.sleep(poll_seconds)
