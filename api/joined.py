"""Serving a chunk tree as an HTTP body, as the reference node's ``downloadHandler`` does.

The reference answers through Go's ``http.ServeContent``: ``Content-Length``
of the whole file, ``Accept-Ranges: bytes``, a single ``Range`` as 206 with
``Content-Range``, an unsatisfiable or malformed range as 416 (with
``Content-Range: bytes */size`` when nothing overlaps), and an ``ETag`` of
the quoted root address that ``If-None-Match`` can match (304). Several
ranges in one request are answered with the whole body (200), which HTTP
allows; the reference would send them as multipart.

The tree is read through a ``Joiner`` in the thread pool, one piece at a
time, so a large file never sits in memory. A missing root is a 404; a
chunk missing or corrupt further down is found only while streaming, after
the status line went out, so the connection is cut short and the error
logged (the reference does the same).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from aiohttp import web

from chunkstore.reserve import ReserveStore
from chunkstore.swarm.constants import ADDRESS_SIZE
from chunkstore.swarm.errors import SwarmError
from chunkstore.swarm.file import Joiner
from chunkstore.swarm.file.errors import ChunkMissing

from .errors import ApiError, error_response
from .feedread import get_or_none
from .state import AppState

log = logging.getLogger(__name__)

PIECE = 1 << 20  # bytes read from the tree per thread-pool call

Headers = Mapping[str, str | Iterable[str]]


def open_tree(store: ReserveStore, reference: bytes, root_chunk: bytes | None = None) -> Joiner:
    """A joiner over the store; ``root_chunk`` (``span | payload``) stands in for a root the store need not hold.

    A feed update (v2) or a SOC wraps the root chunk of its content, which
    was never stored on its own.
    """
    root_address = bytes(reference[:ADDRESS_SIZE])

    def get(address: bytes) -> bytes | None:
        if root_chunk is not None and address == root_address:
            return root_chunk
        return get_or_none(store, address)

    return Joiner(reference, get)


def parse_range(header: str, size: int) -> tuple[int, int] | None:
    """``(start, end)`` (end exclusive) of a single-range ``Range`` header; None to serve everything.

    Raises ``ApiError`` 416 for a malformed header or one whose ranges all
    lie past the end, as Go's ``parseRange`` does.
    """
    if not header.startswith("bytes="):
        raise ApiError(416, "invalid range")
    spans: list[tuple[int, int]] = []
    skipped = False
    for raw in header[len("bytes=") :].split(","):
        spec = raw.strip(" \t")
        if not spec:
            continue
        first, dash, last = spec.partition("-")
        first, last = first.strip(" \t"), last.strip(" \t")
        if not dash:
            raise ApiError(416, "invalid range")
        if not first:
            # "-n": the last n bytes
            if not last.isdigit():
                raise ApiError(416, "invalid range")
            n = min(int(last), size)
            spans.append((size - n, size))
            continue
        if not first.isdigit() or (last and not last.isdigit()):
            raise ApiError(416, "invalid range")
        start = int(first)
        if start >= size:
            skipped = True  # no overlap: left out, as Go does
            continue
        end = size if not last else min(int(last) + 1, size)
        if int(last or size) < start:
            raise ApiError(416, "invalid range")
        spans.append((start, end))
    if not spans:
        if skipped:
            raise ApiError(416, "invalid range: failed to overlap", headers={"Content-Range": f"bytes */{size}"})
        return None
    if len(spans) > 1 or sum(e - s for s, e in spans) > size:
        return None
    return spans[0]


def _add(resp: web.StreamResponse, headers: Headers) -> None:
    for name, value in headers.items():
        for v in [value] if isinstance(value, str) else value:
            resp.headers.add(name, v)


async def serve_tree(
    request: web.Request,
    st: AppState,
    reference: bytes,
    *,
    root_chunk: bytes | None = None,
    headers: Headers | None = None,
) -> web.StreamResponse:
    """Answer ``request`` with the file at ``reference`` (plus ``headers``), honouring Range and If-None-Match."""
    try:
        joiner = await st.run(open_tree, st.store, reference, root_chunk)
    except ChunkMissing:
        raise ApiError(404) from None
    except SwarmError as exc:
        raise ApiError(422, f"content cannot be read: {exc}") from None
    etag = f'"{bytes(reference).hex()}"'
    size = joiner.size
    common: dict[str, str] = {"ETag": etag, "Accept-Ranges": "bytes"}
    if request.headers.get("If-None-Match") in (etag, "*"):
        resp304 = web.Response(status=304, headers=common)
        _add(resp304, headers or {})
        return resp304
    span = None
    range_header = request.headers.get("Range")
    if range_header and request.method in ("GET", "HEAD"):
        try:
            span = parse_range(range_header, size)
        except ApiError as exc:
            answer = error_response(exc.status, exc.message, headers=exc.headers)
            _add(answer, headers or {})
            return answer
    start, end = span if span is not None else (0, size)
    resp = web.StreamResponse(status=206 if span is not None else 200, headers=common)
    _add(resp, headers or {})
    resp.headers.add("Access-Control-Expose-Headers", "Content-Disposition")
    if span is not None:
        resp.headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
    resp.content_length = end - start
    await resp.prepare(request)
    if request.method == "HEAD":
        return resp
    offset = start
    while offset < end:
        stop = min(offset + PIECE, end)
        try:
            piece = await st.run(lambda a=offset, b=stop: b"".join(joiner.read(a, b)))
        except SwarmError as exc:
            log.warning(
                "download cut short: the tree cannot be read further",
                extra={"fields": {"reference": bytes(reference).hex(), "offset": offset, "error": str(exc)}},
            )
            if request.transport is not None:
                request.transport.close()
            return resp
        await resp.write(piece)
        offset = stop
    await resp.write_eof()
    return resp
