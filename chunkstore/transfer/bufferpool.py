"""A bounded ring of shared memory for the frames an import has in flight.

The importer reads each frame (or tar entry) into an exact-size range of
this ring, a worker process decodes and validates it in place, and the
importer copies the accepted records out and releases the range. Frames are
consumed in the order they were read, so ranges are released oldest first
and a ring allocator is exact: no size classes, no fragmentation, and the
memory is fixed once (``size``) for the whole import.

The ring is an anonymous shared file (``memfd``; a deleted temporary file
where there is none) mapped by the importer and by each worker: unlike
/dev/shm it is not capped by a container's small shm mount.
"""

from __future__ import annotations

import mmap
import os
import tempfile
from collections import deque
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RingHandle:
    """What a worker needs to map the ring: a file descriptor it received and the size."""

    fd: object  # a multiprocessing DupFd (picklable to a spawned child), or an int in this process
    size: int


class SharedRing:
    """``size`` bytes of shared memory handing out exact-size ranges, released oldest first."""

    def __init__(self, size: int, directory: str | None = None) -> None:
        if size <= 0:
            raise ValueError("ring size must be positive")
        self.size = size
        if hasattr(os, "memfd_create"):
            self._fd = os.memfd_create("chunkstore-import", os.MFD_CLOEXEC)
        else:  # pragma: no cover - non-Linux
            self._fd = os.dup(tempfile.TemporaryFile(dir=directory).fileno())
        os.ftruncate(self._fd, size)
        self._map = mmap.mmap(self._fd, size)
        self.view = memoryview(self._map)
        self.array = np.frombuffer(self._map, np.uint8)
        self._live: deque[tuple[int, int]] = deque()  # (start, end) oldest first
        self._head = 0  # where the next range starts, if it fits there

    def handle_for_child(self) -> RingHandle:
        from multiprocessing.reduction import DupFd

        return RingHandle(DupFd(self._fd), self.size)

    def inherited_handle(self) -> RingHandle:
        """For a forked child, which has this process's descriptors already."""
        return RingHandle(self._fd, self.size)

    @property
    def in_use(self) -> int:
        return len(self._live)

    def alloc(self, n: int) -> int | None:
        """Offset of a free range of exactly ``n`` bytes, or None until older ranges are released."""
        if n <= 0:
            raise ValueError("allocations must be at least one byte")
        if n > self.size:
            return None
        if not self._live:
            start = 0
        else:
            tail = self._live[0][0]
            if self._head > tail:  # in use: [tail, head); free: [head, size) and [0, tail)
                if self.size - self._head >= n:
                    start = self._head
                elif tail >= n:
                    start = 0
                else:
                    return None
            elif tail - self._head >= n:  # wrapped: free only [head, tail)
                start = self._head
            else:
                return None
        self._live.append((start, start + n))
        self._head = start + n
        return start

    def release(self, count: int = 1) -> None:
        """Free the ``count`` oldest ranges."""
        for _ in range(count):
            self._live.popleft()
        if not self._live:
            self._head = 0

    def close(self) -> None:
        self.array = None  # type: ignore[assignment]
        self.view.release()
        try:
            self._map.close()
        except BufferError:
            pass  # views still alive (an exception's frames): the mapping goes with the last of them
        os.close(self._fd)


def attach(handle: RingHandle) -> tuple[mmap.mmap, np.ndarray]:
    """Map a ring in a worker process; returns the mapping and a uint8 array over it."""
    fd = handle.fd if isinstance(handle.fd, int) else handle.fd.detach()  # type: ignore[attr-defined]
    try:
        m = mmap.mmap(fd, handle.size)
    finally:
        if not isinstance(handle.fd, int):
            os.close(fd)
    return m, np.frombuffer(m, np.uint8)
