"""``GET /chunks/stream``: chunk uploads over a WebSocket, as the reference node takes them (``chunk_stream.go``).

Each binary message is one chunk; the answer to each is an empty binary
message, in order. Two ways to stamp:

- no ``Swarm-Postage-Batch-Id`` on the upgrade: each message is
  ``stamp (113 bytes) | span | payload`` with a pre-signed stamp (the data
  may be a CAC or a SOC, whichever the stamp fits, as ``POST /chunks``);
- ``Swarm-Postage-Batch-Id`` on the upgrade: each message is ``span |
  payload`` and the node stamps it (only a batch the node owns).

A tag travels in ``Swarm-Tag`` or, for browsers that cannot set headers on
an upgrade, the ``swarm-tag`` query parameter.

Back-pressure: at most ``WINDOW`` chunks are between "read" and
"acknowledged"; the next message is read only when one of them is
answered, and aiohttp stops reading the socket while its small buffer is
full, so a client that sends faster than the store commits is slowed by
TCP. Within the window chunks go to the store concurrently, so they share
synced commits (the write queue groups them). Acknowledgements keep the
order of the messages.

Bad input ends the stream with a close frame, after the acknowledgements
of the chunks before it: 1003 "invalid message" for a text message, 1009
for a message over ``MAX_MESSAGE`` bytes (aiohttp's own), 1011 with the
reason for a message too short, an unknown batch ("batch not found"), a
chunk that is not valid ("invalid chunk data"), a refused stamp ("chunk
write error: ...") or a full bucket ("batch is overissued"). Chunks of the
window read after the bad one may still be stored (their puts were under
way); the client learns of none of them and may send them again, which is
a no-op for the same chunk and stamp. On shutdown open streams are closed
with 1001 "node shutting down"; a stream silent for ``READ_TIMEOUT`` is
closed with 1001 too.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from aiohttp import WSCloseCode, WSMsgType, web

from chunkstore.reserve import OutOfRadius
from chunkstore.store.errors import StoreWriteFailed, UnknownBatch
from chunkstore.store.store import PutResult
from chunkstore.swarm.constants import MAX_SOC_SIZE, SPAN_SIZE, STAMP_SIZE
from chunkstore.swarm.errors import BucketFull, InvalidChunk, SwarmError

from .errors import ApiError
from .params import decode_hex, parse_uint
from .routes_chunks import BATCH_HEADER, MSG_PRESIGNED, TAG_HEADER
from .state import AppState, state_of

log = logging.getLogger(__name__)

WINDOW = 64  # chunks read but not yet acknowledged
READ_TIMEOUT = 15 * 60.0  # seconds without a message before the stream is closed (the reference's)
MAX_MESSAGE = STAMP_SIZE + MAX_SOC_SIZE
MAX_REASON = 123  # bytes of a close frame's reason (RFC 6455)
SHUTDOWN_REASON = "node shutting down"


@dataclass(frozen=True)
class Refusal:
    """Close the stream with ``code`` and ``reason`` once the chunks before this one are acknowledged."""

    code: int
    reason: str


Pending = asyncio.Future[PutResult] | Refusal | None  # None: the reader is done


def _reason(text: str) -> bytes:
    return text.encode("utf-8")[:MAX_REASON]


def refusal_for(exc: BaseException) -> Refusal:
    """The close frame for a chunk the store refused, in the reference's words with the store's reason."""
    if isinstance(exc, UnknownBatch):
        return Refusal(WSCloseCode.INTERNAL_ERROR, "batch not found")
    if isinstance(exc, BucketFull):
        return Refusal(WSCloseCode.INTERNAL_ERROR, "batch is overissued")
    if isinstance(exc, InvalidChunk):
        return Refusal(WSCloseCode.INTERNAL_ERROR, f"invalid chunk data: {exc}")
    if isinstance(exc, OutOfRadius):
        return Refusal(WSCloseCode.INTERNAL_ERROR, f"chunk is outside the storage radius: {exc}")
    if isinstance(exc, StoreWriteFailed):
        return Refusal(WSCloseCode.TRY_AGAIN_LATER, f"store write failed: {exc}")
    return Refusal(WSCloseCode.INTERNAL_ERROR, f"chunk write error: {exc}")


def _tag(request: web.Request) -> int | None:
    value = request.headers.get(TAG_HEADER)
    if value:
        return parse_uint("header", TAG_HEADER, value)
    query = request.query.get("swarm-tag")
    if query:
        try:
            return parse_uint("query", "swarm-tag", query)
        except ApiError:
            raise ApiError(400, "invalid swarm-tag query parameter") from None
    return None


async def _acknowledge(st: AppState, ws: web.WebSocketResponse, queue: asyncio.Queue[Pending], window: asyncio.Semaphore) -> None:
    """Answer each chunk in order; close at the first refusal. Returns when the reader is done or a refusal was sent."""
    try:
        await _acknowledge_in_order(st, ws, queue, window)
    finally:
        for _ in range(WINDOW):  # a reader waiting for room in the window wakes and sees that this ended
            window.release()


async def _acknowledge_in_order(
    st: AppState, ws: web.WebSocketResponse, queue: asyncio.Queue[Pending], window: asyncio.Semaphore
) -> None:
    while True:
        item = await queue.get()
        if item is None:
            return
        if isinstance(item, Refusal):
            st.metrics.puts.labels("rejected").inc()
            await ws.close(code=item.code, message=_reason(item.reason))
            return
        try:
            result = await item
        except SwarmError as exc:
            st.metrics.puts.labels("rejected").inc()
            refusal = refusal_for(exc)
            if isinstance(exc, StoreWriteFailed):
                st.metrics.writes_refused.labels(exc.reason).inc()
            await ws.close(code=refusal.code, message=_reason(refusal.reason))
            return
        finally:
            window.release()
        st.metrics.puts.labels("stored" if result.stored else "duplicate").inc()
        if ws.closed:
            return
        await ws.send_bytes(b"")


def _decode(message: bytes) -> tuple[bytes, bytes] | Refusal:
    """``(chunk data, stamp)`` of a message with a pre-signed stamp, or why it is refused."""
    if len(message) < SPAN_SIZE:
        return Refusal(WSCloseCode.INTERNAL_ERROR, "insufficient data")
    if len(message) < STAMP_SIZE + SPAN_SIZE:
        return Refusal(WSCloseCode.INTERNAL_ERROR, "message too small for stamp + chunk")
    return message[STAMP_SIZE:], message[:STAMP_SIZE]


async def _read(st: AppState, ws: web.WebSocketResponse, queue: asyncio.Queue[Pending], window: asyncio.Semaphore, acker: asyncio.Task[None]) -> None:
    while not acker.done():
        await window.acquire()
        if acker.done():
            return
        try:
            msg = await ws.receive(timeout=READ_TIMEOUT)
        except TimeoutError:
            window.release()
            queue.put_nowait(Refusal(WSCloseCode.GOING_AWAY, "no message for 15 minutes"))
            return
        if msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
            window.release()
            return
        if msg.type != WSMsgType.BINARY:
            window.release()
            queue.put_nowait(Refusal(WSCloseCode.UNSUPPORTED_DATA, "invalid message"))
            return
        decoded = _decode(msg.data)
        if isinstance(decoded, Refusal):
            window.release()
            queue.put_nowait(decoded)
            return
        data, stamp = decoded
        queue.put_nowait(asyncio.ensure_future(st.puts.put(data, stamp)))


async def chunk_stream(request: web.Request) -> web.StreamResponse:
    st = state_of(request)
    _tag(request)  # validated; tags are counted by the upload paths that keep them
    batch_hex = request.headers.get(BATCH_HEADER, "")
    if batch_hex:
        decode_hex("header", BATCH_HEADER, batch_hex, size=32)
        raise ApiError(400, MSG_PRESIGNED)
    ws = web.WebSocketResponse(max_msg_size=MAX_MESSAGE, autoping=True)
    if not ws.can_prepare(request).ok:
        raise ApiError(400, "upgrade failed: a WebSocket upgrade request is required")
    await ws.prepare(request)
    st.streams.add(ws)
    queue: asyncio.Queue[Pending] = asyncio.Queue()
    window = asyncio.Semaphore(WINDOW)
    acker = asyncio.ensure_future(_acknowledge(st, ws, queue, window))
    try:
        await _read(st, ws, queue, window, acker)
        queue.put_nowait(None)
        await acker
    except (ConnectionResetError, asyncio.CancelledError):
        acker.cancel()
        raise
    finally:
        st.streams.discard(ws)
        if not ws.closed:
            await ws.close()
    return ws


async def close_streams(st: AppState) -> None:
    """Close every open stream with 1001 (the daemon is shutting down); their handlers then finish."""
    for ws in list(st.streams):
        if not ws.closed:
            await ws.close(code=WSCloseCode.GOING_AWAY, message=_reason(SHUTDOWN_REASON))


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    for p in prefixes:
        app.router.add_get(p + "/chunks/stream", chunk_stream, allow_head=False)
