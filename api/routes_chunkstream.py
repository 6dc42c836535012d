"""``GET /chunks/stream``: chunk uploads over a WebSocket, as the reference node takes them (``chunk_stream.go``).

Each binary message is one chunk; the answer to each is an empty binary
message, in order. Two ways to stamp:

- no ``Swarm-Postage-Batch-Id`` on the upgrade: each message is
  ``stamp (113 bytes) | span | payload`` with a pre-signed stamp (the data
  may be a CAC or a SOC, whichever the stamp fits, as ``POST /chunks``);
- ``Swarm-Postage-Batch-Id`` on the upgrade: each message is ``span |
  payload`` of a CAC (at most 4104 bytes) and the node stamps it, as
  ``POST /chunks`` with that header does; the batch must be the node's
  (checked before the upgrade: 404 for an unknown batch, 400 for another
  owner's). Positions are handed out in message order, the chunks waiting
  meanwhile stamped as one group (one issuer commit per group, not per
  chunk).

A tag travels in ``Swarm-Tag`` or, for browsers that cannot set headers on
an upgrade, the ``swarm-tag`` query parameter. It must exist (404 "tag not
found" before the upgrade, as the reference's ``getOrCreateSessionID``);
every acknowledged chunk then counts under it (``chunkstore.content``'s
``track_upload``, the hook every upload path shares: ``split`` and, new or
already here, ``stored``/``synced`` or ``seen``), a group per store-thread
call, and the tag is marked done when the stream ends. There is no
``Swarm-Pin`` here, as on the reference: a pin names a root, and a stream of
chunks has none (pin the root afterwards with ``POST /pins``).

Back-pressure: at most ``WINDOW`` chunks are between "read" and
"acknowledged"; the next message is read only when one of them is
answered, and aiohttp stops reading the socket while its small buffer is
full, so a client that sends faster than the store commits is slowed by
TCP. Within the window chunks go to the store concurrently, so they share
synced commits (the write queue groups them). Acknowledgements keep the
order of the messages.

Bad input ends the stream with a close frame, after the acknowledgements
of the chunks before it: 1003 "invalid message" for a text message, 1009
for a message over the size limit (aiohttp's own), 1011 with the
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
import collections
import functools
import logging
from dataclasses import dataclass

from aiohttp import WSCloseCode, WSMsgType, web

from chunkstore.content import UploadOptions, UploadTracker, track_upload
from chunkstore.reserve import OutOfRadius
from chunkstore.store.errors import StoreWriteFailed, UnknownBatch, UnknownTag
from chunkstore.store.store import PutResult
from chunkstore.swarm.bmt import chunk_hash
from chunkstore.swarm.constants import BATCH_ID_SIZE, MAX_CAC_SIZE, MAX_SOC_SIZE, SPAN_SIZE, STAMP_SIZE
from chunkstore.swarm.errors import BucketFull, InvalidChunk, SwarmError

from .errors import ApiError, method_not_allowed
from .params import decode_hex, parse_uint, request_query
from .putqueue import put_restamping
from .routes_chunks import BATCH_HEADER, TAG_HEADER
from .state import AppState, state_of
from .uploads import upload_error

log = logging.getLogger(__name__)

WINDOW = 64  # chunks read but not yet acknowledged
READ_TIMEOUT = 15 * 60.0  # seconds without a message before the stream is closed (the reference's)
MAX_MESSAGE = STAMP_SIZE + MAX_SOC_SIZE  # a pre-signed stamp and the largest SOC
MAX_NODE_STAMPED_MESSAGE = MAX_CAC_SIZE  # stamped by the node: a CAC, as the reference takes it
MAX_REASON = 123  # bytes of a close frame's reason (RFC 6455)
SHUTDOWN_REASON = "node shutting down"


@dataclass(frozen=True)
class Refusal:
    """Close the stream with ``code`` and ``reason`` once the chunks before this one are acknowledged."""

    code: int
    reason: str


Pending = asyncio.Future[PutResult] | Refusal | None  # None: the reader is done


def _unanswered(fut: asyncio.Future[PutResult]) -> asyncio.Future[PutResult]:
    """``fut``, its failure taken as seen once it fails: the stream closes at its first refused chunk, and
    the chunks sent behind that one fail too with nobody left to answer them (asyncio logged each as an
    ERROR, "exception was never retrieved"). The acknowledgements still get the failure when they await
    it; one that is no refusal (a bug, not the chunk) is logged here, as asyncio would have."""

    def seen(done: asyncio.Future[PutResult]) -> None:
        if done.cancelled():
            return
        exc = done.exception()  # marks it retrieved
        if exc is not None and not isinstance(exc, SwarmError):
            log.error("chunk stream: a put failed", exc_info=exc)

    fut.add_done_callback(seen)
    return fut


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


def _tag(request: web.Request) -> int:
    """The stream's tag (0: none), from ``Swarm-Tag`` or the ``swarm-tag`` query parameter."""
    value = request.headers.get(TAG_HEADER)
    if value:
        return parse_uint("header", TAG_HEADER, value)
    query = request_query(request).get("swarm-tag")
    if query:
        try:
            return parse_uint("query", "swarm-tag", query)
        except ApiError:
            raise ApiError(400, "invalid swarm-tag query parameter") from None
    return 0


class TagCount:
    """Counts a stream's stored chunks under its tag before they are answered, so an answered chunk
    is counted; the answers ready together are counted in one store-thread call (the tag's counters
    are a store write now and then)."""

    def __init__(self, st: AppState, tracker: UploadTracker) -> None:
        self.st = st
        self.tracker = tracker

    async def record(self, results: list[PutResult]) -> None:
        await self.st.run(self.tracker.stored, None, [r.address for r in results], results)

    async def close(self) -> None:
        """Mark the tag done (a stream names no root address)."""
        await self.st.run(self.tracker.finished, None, None)


async def _acknowledge(
    st: AppState,
    ws: web.WebSocketResponse,
    queue: asyncio.Queue[Pending],
    window: asyncio.Semaphore,
    count: TagCount | None = None,
) -> None:
    """Answer each chunk in order; close at the first refusal. Returns when the reader is done or a refusal was sent."""
    try:
        await _acknowledge_in_order(st, ws, queue, window, count)
    finally:
        for _ in range(WINDOW):  # a reader waiting for room in the window wakes and sees that this ended
            window.release()


async def _acknowledge_in_order(
    st: AppState,
    ws: web.WebSocketResponse,
    queue: asyncio.Queue[Pending],
    window: asyncio.Semaphore,
    count: TagCount | None,
) -> None:
    ahead: collections.deque[Pending] = collections.deque()  # taken from the queue, not yet answered
    while True:
        item = ahead.popleft() if ahead else await queue.get()
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
        results = [result]
        if count is not None:
            results += _settled(queue, ahead, window)
            await count.record(results)
        for result in results:
            st.metrics.count_put(result)
            if ws.closed:
                return
            await ws.send_bytes(b"")


def _settled(queue: asyncio.Queue[Pending], ahead: collections.deque[Pending], window: asyncio.Semaphore) -> list[PutResult]:
    """The results already stored in the queue's order, taken off it up to the first that is not (which,
    and what was taken with it, waits in ``ahead``); each frees its place in the window."""
    out: list[PutResult] = []
    while not queue.empty():
        item = queue.get_nowait()
        if not isinstance(item, asyncio.Future) or not item.done() or item.cancelled() or item.exception() is not None:
            ahead.append(item)
            break
        window.release()
        out.append(item.result())
    return out


def _decode(message: bytes) -> tuple[bytes, bytes] | Refusal:
    """``(chunk data, stamp)`` of a message with a pre-signed stamp, or why it is refused."""
    if len(message) < SPAN_SIZE:
        return Refusal(WSCloseCode.INTERNAL_ERROR, "insufficient data")
    if len(message) < STAMP_SIZE + SPAN_SIZE:
        return Refusal(WSCloseCode.INTERNAL_ERROR, "message too small for stamp + chunk")
    return message[STAMP_SIZE:], message[:STAMP_SIZE]


def _stamp_in_order(st: AppState, batch_id: bytes, datas: list[bytes]) -> list[tuple[bytes, bytes] | SwarmError]:
    """(address, stamp) of each CAC, stamped by the node in message order (blocking).

    One call to the stamper for the group (one synced commit of positions);
    if it refuses (a full bucket of an immutable batch keeps nothing of the
    call), the chunks are stamped one by one so that each gets its own
    answer and the earlier ones their positions, as sending them one at a
    time would.
    """
    addresses = [chunk_hash(d) for d in datas]
    try:
        stamps = st.stamper.stamp(batch_id, addresses)
        return [(a, s.to_bytes()) for a, s in zip(addresses, stamps, strict=True)]
    except SwarmError:
        pass
    out: list[tuple[bytes, bytes] | SwarmError] = []
    for address in addresses:
        try:
            out.append((address, st.stamper.stamp(batch_id, [address])[0].to_bytes()))
        except SwarmError as exc:
            out.append(exc)
    return out


class NodeStamping:
    """Stamps a stream's chunks with the node's batch in message order, a group per thread-pool call.

    ``submit(data)`` returns the future of the chunk's put. Chunks waiting
    while a group is being stamped form the next group, so positions are
    handed out in the order the messages came and the issuer commits once
    per group, not once per chunk.
    """

    def __init__(self, st: AppState, batch_id: bytes) -> None:
        self.st = st
        self.batch_id = batch_id
        self._waiting: list[tuple[bytes, asyncio.Future[PutResult]]] = []
        self._task: asyncio.Task[None] | None = None

    def submit(self, data: bytes) -> asyncio.Future[PutResult]:
        fut: asyncio.Future[PutResult] = asyncio.get_running_loop().create_future()
        self._waiting.append((data, fut))
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._drain())
        return fut

    async def _drain(self) -> None:
        while self._waiting:
            group, self._waiting = self._waiting, []
            try:
                stamped = await self.st.run(_stamp_in_order, self.st, self.batch_id, [d for d, _ in group])
            except BaseException as exc:  # the pool is gone (shutdown): fail this group
                stamped = [exc if isinstance(exc, SwarmError) else SwarmError(str(exc))] * len(group)
            for (data, fut), outcome in zip(group, stamped, strict=True):
                if isinstance(outcome, SwarmError):
                    fut.set_exception(outcome)
                    continue
                put = asyncio.ensure_future(self._put(data, *outcome))
                put.add_done_callback(functools.partial(_settle, fut))

    async def _put(self, data: bytes, address: bytes, stamp: bytes) -> PutResult:
        """Store a stamped CAC (the write queue may group it with others), stamped again if another
        upload of the same chunk wins its slot first (``put_restamping``)."""

        async def restamp() -> bytes:
            (again,) = await self.st.run(self.st.stamper.stamp, self.batch_id, [address])
            return again.to_bytes()

        return await put_restamping(self.st.puts, data, stamp, address, self.batch_id, restamp)


def _settle(fut: asyncio.Future[PutResult], put: asyncio.Future[PutResult]) -> None:
    """Hand the outcome of ``put`` to ``fut`` (the future the acknowledgements wait on)."""
    if fut.done():
        return
    if put.cancelled():
        fut.cancel()
        return
    error = put.exception()
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(put.result())


async def _read(
    st: AppState,
    ws: web.WebSocketResponse,
    queue: asyncio.Queue[Pending],
    window: asyncio.Semaphore,
    acker: asyncio.Task[None],
    stamping: NodeStamping | None,
) -> None:
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
        if stamping is not None:
            data = msg.data
            if len(data) < SPAN_SIZE:
                window.release()
                queue.put_nowait(Refusal(WSCloseCode.INTERNAL_ERROR, "insufficient data"))
                return
            queue.put_nowait(_unanswered(stamping.submit(data)))
            continue
        decoded = _decode(msg.data)
        if isinstance(decoded, Refusal):
            window.release()
            queue.put_nowait(decoded)
            return
        data, stamp = decoded
        queue.put_nowait(_unanswered(asyncio.ensure_future(st.puts.put(data, stamp))))


async def _tracker(st: AppState, tag: int) -> UploadTracker | None:
    """The tracker counting the stream under ``tag``, or None without one; 404 for an unknown tag."""
    if not tag:
        return None  # the reference's direct upload: no tag is made for a stream that names none
    try:
        return await st.run(functools.partial(track_upload, cache=False), st.store, UploadOptions(tag=tag))
    except UnknownTag:
        raise ApiError(404, "tag not found") from None


async def chunk_stream(request: web.Request) -> web.StreamResponse:
    st = state_of(request)
    tag = _tag(request)
    batch_hex = request.headers.get(BATCH_HEADER, "")
    batch_id = None
    if batch_hex:
        batch_id = decode_hex("header", BATCH_HEADER, batch_hex, size=BATCH_ID_SIZE)
        try:
            await st.run(st.stamper.batch, batch_id)  # unknown (404) or not the node's (400): before the upgrade
        except SwarmError as exc:
            raise upload_error(request, exc) from None
    limit = MAX_MESSAGE if batch_id is None else MAX_NODE_STAMPED_MESSAGE
    ws = web.WebSocketResponse(max_msg_size=limit + 1, autoping=True)  # aiohttp refuses sizes >= its limit
    tracker = await _tracker(st, tag)  # before the upgrade, as the reference checks the tag
    count = None if tracker is None else TagCount(st, tracker)
    if not ws.can_prepare(request).ok:
        raise ApiError(400, "upgrade failed: a WebSocket upgrade request is required")
    await ws.prepare(request)
    st.streams.add(ws)
    queue: asyncio.Queue[Pending] = asyncio.Queue()
    window = asyncio.Semaphore(WINDOW)
    acker = asyncio.ensure_future(_acknowledge(st, ws, queue, window, count))
    try:
        stamping = None if batch_id is None else NodeStamping(st, batch_id)
        await _read(st, ws, queue, window, acker, stamping)
        queue.put_nowait(None)
        await acker
    except (ConnectionResetError, asyncio.CancelledError):
        acker.cancel()
        raise
    finally:
        st.streams.discard(ws)
        if count is not None:
            # shielded: a client gone mid-stream cancels this handler, and the chunks it was answered
            # for must still count
            await asyncio.shield(count.close())
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
        app.router.add_route("*", p + "/chunks/stream", method_not_allowed("GET"))  # not /chunks/{address}
