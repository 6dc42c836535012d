"""Files that say whether the process that made them is still at work: an advisory lock held while it is.

An import's staging directory and an export's ``FILE.partial-PID`` are left
behind when their process is killed, and the next run removes them. Their
names carry a process id, but a process id says little: in a container the
command has the same one every run, so a killed import's directory looked
like the live import's own and was kept forever (an operator's sweep: the
size of the import, leaked per kill). A lock dies with its process, whatever
the ids: ``hold`` takes one on an open file for as long as it stays open,
and ``abandoned`` tells whether anyone still holds one.
"""

from __future__ import annotations

import fcntl
import os
import time


def hold(fd: int) -> None:
    """Lock the file open at ``fd`` for as long as it is open in this process (or a child it forks)."""
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


# A file is made, then locked: a file younger than this may be one whose maker has not locked it yet.
SETTLING_SECONDS = 5.0


def abandoned(path: str) -> bool:
    """Whether ``path`` exists, is older than ``SETTLING_SECONDS`` and no process holds a lock on it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if time.time() - os.fstat(fd).st_mtime < SETTLING_SECONDS:
            os.close(fd)
            return False
    except OSError:
        os.close(fd)
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        return False  # a file system without locks: leave it, rather than remove a live run's file
    finally:
        os.close(fd)  # closing drops the lock just taken
    return True
