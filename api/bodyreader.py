"""A request body read from a worker thread: ``BodyReader.read(n)`` blocks while the event loop fetches.

Uploads are split, hashed, stamped and stored in the thread pool, and the
body must reach that thread piece by piece (never whole: a 1 GiB upload must
not take 1 GiB of memory). ``read(n)`` asks the loop for the next ``n``
bytes and waits for them, so the socket is read only as fast as the worker
consumes: the client is slowed by TCP back-pressure, and at most one piece
per upload is in memory. A body that stalls for ``idle_timeout`` seconds
raises ``TimeoutError``; a client that goes away raises the connection error.
"""

from __future__ import annotations

import asyncio

from aiohttp import StreamReader

DEFAULT_IDLE_TIMEOUT = 300.0


class BodyReader:
    """File-like ``read(n)`` over an aiohttp request body, for use off the event loop only."""

    def __init__(
        self, content: StreamReader, loop: asyncio.AbstractEventLoop, idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    ) -> None:
        self._content = content
        self._loop = loop
        self._idle_timeout = idle_timeout
        self._eof = False
        self.consumed = 0  # bytes handed out so far

    async def _read(self, n: int) -> bytes:
        parts = []
        have = 0
        while have < n:
            piece = await asyncio.wait_for(self._content.read(n - have), self._idle_timeout)
            if not piece:
                self._eof = True
                break
            parts.append(piece)
            have += len(piece)
        return b"".join(parts)

    def read(self, n: int = -1, /) -> bytes:
        """``n`` bytes, fewer only at the end of the body (``b""`` after it); ``n < 0``: the rest."""
        if self._eof or n == 0:
            return b""
        if n < 0:
            parts = []
            while piece := self.read(1 << 20):
                parts.append(piece)
            return b"".join(parts)
        data = asyncio.run_coroutine_threadsafe(self._read(n), self._loop).result()
        self.consumed += len(data)
        return data

    def readable(self) -> bool:
        return True
