"""The store's writer lock: one writer at a time across threads and processes.

A put may change several LMDB environments, and each env only serialises its
own writers, so the store takes this lock around every change: a thread lock
for the threads of this process and an ``flock`` on the store's LOCK file for
other processes (flock is per open file, so it cannot tell threads apart).
"""

from __future__ import annotations

import fcntl
import os
import threading


class WriterLock:
    """Re-entrant in one thread; exclusive across threads and processes."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._thread_lock = threading.RLock()
        self._depth = 0

    def __enter__(self) -> WriterLock:
        self._thread_lock.acquire()
        if self._depth == 0:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            except BaseException:
                self._thread_lock.release()
                raise
        self._depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._thread_lock.release()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
