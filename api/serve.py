"""Serving a stored file the way the reference node does it, through Go's ``http.ServeContent`` rules.

``serve_file`` answers a GET or HEAD for a file in the store:

- ``Range: bytes=...`` (Go's ``parseRange``: suffix ranges, open ends, ends
  past the size clamped): one range is a 206 with ``Content-Range``, several
  a 206 ``multipart/byteranges``; ranges that do not overlap the file are a
  416 with ``Content-Range: bytes */size`` (a JSON body, as every error
  here), except on an empty file, where Go ignores them and answers 200; a
  malformed range header is a 416 too; ranges adding up to more than
  the file are ignored (the whole file, 200), all as Go does;
- ``ETag`` (the quoted reference) with ``If-None-Match`` (304) and
  ``If-Range`` (a range only for the current ETag, compared strongly);
- without a known content type, the first 512 bytes are sniffed
  (``chunkstore.swarm.bzz.sniff``), as ``ServeContent`` does;
- HEAD gives the headers and the length, no body.

The body streams: the joiner runs in the thread pool, a quarter MiB at a
time, so a download never holds the whole file. The first piece is read
before the status line goes out, so a tree that is broken at its start (a
missing chunk no parity can rebuild) is a JSON error with its status. A
break found later cannot change the status any more: the connection is then
closed before the promised ``Content-Length`` is reached, so the client sees
a failed transfer, never a short file with a 200.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass

from aiohttp import web

from chunkstore.store.errors import ChunkNotFound
from chunkstore.swarm.bzz.sniff import SNIFF_LENGTH, detect_content_type
from chunkstore.swarm.digits import decimal_below
from chunkstore.swarm.errors import SwarmError
from chunkstore.swarm.file import ChunkMissing, FileError, InvalidRange, InvalidReference, Joiner
from chunkstore.swarm.redundancy.level import DEFAULT_DOWNLOAD_LEVEL

from .errors import ApiError, error_response, printable, status_for
from .params import is_go_duration, parse_go_bool, parse_int
from .state import AppState, state_of
from .uploads import redundancy_level

log = logging.getLogger(__name__)

PIECE = 256 << 10  # bytes per hop from the joiner's thread to the loop


@dataclass(frozen=True)
class ByteRange:
    start: int
    length: int

    def content_range(self, size: int) -> str:
        return f"bytes {self.start}-{self.start + self.length - 1}/{size}"


class RangeNotSatisfiable(Exception):
    """A ``Range`` header Go's ``parseRange`` refuses (``no_overlap``: well-formed but outside the file)."""

    def __init__(self, message: str, no_overlap: bool = False) -> None:
        super().__init__(message)
        self.no_overlap = no_overlap


def tree_error(exc: BaseException) -> ApiError:
    """A joiner's refusal as an answer: a missing chunk 404, a reference that leads to no file tree 422."""
    if isinstance(exc, ChunkMissing | ChunkNotFound):
        return ApiError(404, f"Not Found: {exc}")
    if isinstance(exc, InvalidReference):
        return ApiError(400, str(exc))
    if isinstance(exc, InvalidRange):
        return ApiError(416, str(exc))
    if isinstance(exc, FileError):
        return ApiError(422, f"the reference does not lead to a valid file: {exc}")
    if isinstance(exc, SwarmError):
        return ApiError(status_for(exc), str(exc))
    raise exc


def _parse_int(text: str) -> int | None:
    # strconv.ParseInt(s, 10, 64): an optional sign, then decimal digits only.
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isascii() or not body.isdigit():
        return None
    magnitude = decimal_below(body, 64)
    if magnitude is None:
        return None
    value = -magnitude if text[:1] == "-" else magnitude
    return value if -(1 << 63) <= value < 1 << 63 else None


def parse_range(header: str, size: int) -> list[ByteRange]:
    """Go's ``parseRange`` of a ``Range`` header against a file of ``size`` bytes ([] for no header)."""
    if header == "":
        return []
    prefix = "bytes="
    if not header.startswith(prefix):
        raise RangeNotSatisfiable("invalid range")
    ranges: list[ByteRange] = []
    no_overlap = False
    for spec in header[len(prefix) :].split(","):
        spec = spec.strip(" \t")
        if spec == "":
            continue
        if "-" not in spec:
            raise RangeNotSatisfiable("invalid range")
        first, last = (part.strip(" \t") for part in spec.split("-", 1))
        if first == "":
            # A suffix: the last N bytes.
            if last == "" or last.startswith("-"):
                raise RangeNotSatisfiable("invalid range")
            n = _parse_int(last)
            if n is None or n < 0:
                raise RangeNotSatisfiable("invalid range")
            n = min(n, size)
            ranges.append(ByteRange(size - n, n))
            continue
        start = _parse_int(first)
        if start is None or start < 0:
            raise RangeNotSatisfiable("invalid range")
        if start >= size:
            no_overlap = True
            continue
        if last == "":
            ranges.append(ByteRange(start, size - start))
            continue
        end = _parse_int(last)
        if end is None or start > end:
            raise RangeNotSatisfiable("invalid range")
        end = min(end, size - 1)
        ranges.append(ByteRange(start, end - start + 1))
    if no_overlap and not ranges:
        raise RangeNotSatisfiable("invalid range: failed to overlap", no_overlap=True)
    return ranges


# What Go's ``writeNotModified`` removes from a 304 (it describes a body the 304 does not have).
_BODY_HEADERS = frozenset({"content-type", "content-length", "content-encoding"})


def _etag_matches(header: str, etag: str) -> bool:
    """``If-None-Match`` list matching (weak comparison, ``*`` matches anything), as Go's ``checkIfNoneMatch``."""
    bare = etag.removeprefix("W/")
    for candidate in header.split(","):
        candidate = candidate.strip()
        if candidate == "*" or candidate.removeprefix("W/") == bare:
            return True
    return False


def _if_range_matches(header: str, etag: str) -> bool:
    """Go's ``checkIfRange`` for an entity tag: the first tag in the header, compared strongly (a weak
    ``W/`` tag or ``*`` never matches). A date never matches: no ``Last-Modified`` is sent to compare with."""
    candidate = header.strip(" \t").split(",", 1)[0].strip(" \t")
    is_tag = len(candidate) >= 2 and candidate[0] == candidate[-1] == '"' and '"' not in candidate[1:-1]
    return is_tag and not etag.startswith("W/") and candidate == etag


def _take(pieces: Iterator[bytes], limit: int) -> bytes:
    """Up to ``limit`` bytes from the joiner's pieces (blocking; runs in the pool)."""
    out = []
    have = 0
    for piece in pieces:
        out.append(piece)
        have += len(piece)
        if have >= limit:
            break
    return b"".join(out)


def _multipart_parts(ranges: list[ByteRange], content_type: str, size: int, boundary: str) -> list[bytes]:
    """The part headers of a ``multipart/byteranges`` body (Go's multipart.Writer layout), then its trailer."""
    heads = []
    for i, r in enumerate(ranges):
        lead = "" if i == 0 else "\r\n"
        heads.append(
            f"{lead}--{boundary}\r\nContent-Range: {r.content_range(size)}\r\nContent-Type: {content_type}\r\n\r\n".encode()
        )
    heads.append(f"\r\n--{boundary}--\r\n".encode())
    return heads


class FileBody:
    """What ``serve_file`` needs of a file: its size and its bytes by range (blocking calls)."""

    def __init__(self, joiner: Joiner) -> None:
        self.joiner = joiner
        self.size = joiner.size

    def read(self, start: int, end: int) -> Iterator[bytes]:
        return self.joiner.read(start, end)

    def head(self, n: int) -> bytes:
        return b"".join(self.joiner.read(0, min(n, self.size)))


def check_retrieval_headers(request: web.Request) -> None:
    """The reference's checks of a download's retrieval headers (``bzz.go``'s ``downloadHandler``, which
    ``/bytes``, ``/bzz``, ``/feeds`` and ``/soc`` share, and ``serveReference``): a value it cannot read,
    or a redundancy level outside 0..4, is a 400. They tune fetching from peers, which this node
    has none of, so they are read and have no other effect. A retrieval timeout may also be a bare
    number of milliseconds, which bee-js' ``timeoutMs`` sends (the reference refuses it)."""
    h = request.headers
    for name in ("Swarm-Cache", "Swarm-Redundancy-Fallback-Mode"):
        if name in h:
            parse_go_bool("header", name, h[name])
    if "Swarm-Redundancy-Strategy" in h:
        parse_int("header", "Swarm-Redundancy-Strategy", h["Swarm-Redundancy-Strategy"])
    if "Swarm-Lookahead-Buffer-Size" in h:
        parse_int("header", "Swarm-Lookahead-Buffer-Size", h["Swarm-Lookahead-Buffer-Size"])
    redundancy_level(request, DEFAULT_DOWNLOAD_LEVEL)  # a uint8 of 0..4, as the reference validates it
    timeout = h.get("Swarm-Chunk-Retrieval-Timeout")
    if timeout is not None and not (is_go_duration(timeout) or (timeout.isascii() and timeout.isdigit())):
        raise ApiError(400, f"could not parse headers: Swarm-Chunk-Retrieval-Timeout {printable(timeout)!r} is no duration "
                            "(Go's syntax, such as 30s or 1m30s)")


async def serve_file(
    request: web.Request,
    body: FileBody,
    *,
    content_type: str | None,
    headers: Mapping[str, str] | None = None,
    etag: str | None = None,
    on_error: Callable[[BaseException], ApiError] = tree_error,
) -> web.StreamResponse:
    """Answer GET/HEAD for ``body`` (see the module docstring). ``on_error`` maps a tree error before the body."""
    st = state_of(request)
    out_headers: dict[str, str] = dict(headers or {})
    if etag is not None:
        out_headers["ETag"] = etag
        if_none = request.headers.get("If-None-Match")
        if if_none is not None and _etag_matches(if_none, etag):
            # Go's writeNotModified drops only the body's headers: the rest (the feed index a cached copy
            # lacks, Content-Disposition, what CORS exposes) go out with the 304, which a cache merges
            kept = {k: v for k, v in out_headers.items() if k.lower() not in _BODY_HEADERS}
            return web.Response(status=304, headers=kept)
    size = body.size
    if request.method == "HEAD":
        # an empty type (a tar entry whose extension Go's table does not know) stays empty, as in the GET
        # answer and in the reference's HEAD, which writes the metadata's value as it is
        out_headers.setdefault("Content-Type", "application/octet-stream" if content_type is None else content_type)
        out_headers["Accept-Ranges"] = "bytes"
        head = web.StreamResponse(status=200, headers=out_headers)
        head.content_length = size
        await head.prepare(request)
        await head.write_eof()
        return head

    async def blocking(fn: Callable[..., bytes], *args: object) -> bytes:
        try:
            return await st.run(fn, *args)
        except SwarmError as exc:
            raise on_error(exc) from None

    if content_type is None:
        content_type = detect_content_type(await blocking(body.head, SNIFF_LENGTH))
    out_headers["Content-Type"] = content_type
    range_header = request.headers.get("Range", "")
    if_range = request.headers.get("If-Range")
    if range_header and if_range is not None and (etag is None or not _if_range_matches(if_range, etag)):
        range_header = ""  # If-Range that does not name this version: the whole file
    try:
        ranges = parse_range(range_header, size)
    except RangeNotSatisfiable as exc:
        if not (exc.no_overlap and size == 0):
            extra = {"Content-Range": f"bytes */{size}"} if exc.no_overlap else {}
            return error_response(416, str(exc), headers=extra)
        ranges = []  # Go: a range that misses an empty file is ignored (clients that always send one), a 200
    if sum(r.length for r in ranges) > size:
        ranges = []  # more bytes asked for than the file has: an attack or a confused client; send it all
    status = 200
    segments: list[tuple[bytes, ByteRange | None]] = []
    if len(ranges) == 1:
        status = 206
        out_headers["Content-Range"] = ranges[0].content_range(size)
        segments = [(b"", ranges[0])]
    elif len(ranges) > 1:
        status = 206
        boundary = os.urandom(30).hex()
        heads = _multipart_parts(ranges, content_type, size, boundary)
        out_headers["Content-Type"] = f"multipart/byteranges; boundary={boundary}"
        segments = [(h, r) for h, r in zip(heads, ranges, strict=False)] + [(heads[-1], None)]
    else:
        segments = [(b"", ByteRange(0, size))]
    length = sum(len(h) + (0 if r is None else r.length) for h, r in segments)
    out_headers["Accept-Ranges"] = "bytes"
    return await _stream(request, st, status, out_headers, length, body, segments, blocking)


async def _stream(
    request: web.Request,
    st: AppState,
    status: int,
    headers: dict[str, str],
    length: int,
    body: FileBody,
    segments: list[tuple[bytes, ByteRange | None]],
    blocking: Callable[..., Awaitable[bytes]],
) -> web.StreamResponse:
    resp = web.StreamResponse(status=status, headers=headers)
    resp.content_length = length
    prepared = False
    written = 0
    try:
        for head, rng in segments:
            pieces: Iterator[bytes] | None = None
            if rng is not None and rng.length:
                pieces = await st.run(body.read, rng.start, rng.start + rng.length)
            first = b"" if pieces is None else await blocking(_take, pieces, PIECE)
            if not prepared:
                await resp.prepare(request)
                prepared = True
            if head:
                await resp.write(head)
                written += len(head)
            while first:
                await resp.write(first)
                written += len(first)
                assert pieces is not None
                first = await st.run(_take, pieces, PIECE)
        if not prepared:
            await resp.prepare(request)
        await resp.write_eof()
        return resp
    except (ApiError, SwarmError):
        if not prepared:
            raise
        log.warning(
            "download broken off: the file's tree failed part-way",
            extra={"fields": {"path": request.path, "written": written, "length": length}},
            exc_info=True,
        )
        if request.transport is not None:
            request.transport.close()  # the client sees fewer bytes than Content-Length promised
        return resp
