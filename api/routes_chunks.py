"""Chunk endpoints: ``POST /chunks``, ``GET``/``HEAD /chunks/{address}``, ``POST /soc/{owner}/{id}``.

Answers follow the reference node (``pkg/api/chunk.go``, ``soc.go``,
``chunk_address.go``); where the reference answers 500 for a client's mistake
(a body that is no valid chunk, a stamp that fits neither reading) this daemon
answers 4xx naming the problem. A pre-signed stamp (``Swarm-Postage-Stamp``)
is checked against its batch; ``Swarm-Postage-Batch-Id`` alone names a batch
the node owns, and the node stamps the chunk itself (``state.stamper``, as
bee-js's ``streamDirectory`` and ``uploadChunk`` with a batch id expect).
A batch id of someone else's batch is a 400: the node cannot sign for it.

Tags and pins (``chunkstore.content.track_upload``): ``Swarm-Tag`` on either
counts the chunk under that tag (404 "tag not found" for an unknown one) and
names it in the answer's ``Swarm-Tag`` header; ``POST /soc`` also takes
``Swarm-Pin: true`` (pinning the SOC under its address, kept even outside
the storage radius) and, like the reference, makes a new tag for a pinned or
explicitly deferred upload that names none. A chunk outside the storage
radius is still refused here (422) unless pinned: single chunks do not go to
the cache, uploads through ``/bytes`` and ``/bzz`` do.

``Swarm-Act: true`` (with ``Swarm-Postage-Batch-Id``: the node stamps the ACT's chunks, which a pre-signed
stamp cannot cover, so that pair is a 400) answers the chunk's address encrypted by the node's ACT and
``Swarm-Act-History-Address``, as the reference's ``actEncryptionHandler`` does; ``GET``/``HEAD`` naming
``Swarm-Act-Publisher`` and ``Swarm-Act-History-Address`` decrypt the path's address first.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from aiohttp import web

from chunkstore.content import NotNodeBatch, UploadOptions, UploadTracker, track_upload
from chunkstore.reserve import OutOfRadius, ReserveStore
from chunkstore.store.errors import StampConflict, StoreWriteFailed, UnknownBatch, UnknownTag
from chunkstore.store.store import Holds, PutResult
from chunkstore.swarm.bmt import chunk_hash
from chunkstore.swarm.constants import ADDRESS_SIZE, BATCH_ID_SIZE, SPAN_SIZE, STAMP_SIZE
from chunkstore.swarm.constants import MAX_CAC_SIZE as CHUNK_WITH_SPAN  # largest CAC (and wrapped CAC of a SOC)
from chunkstore.swarm.constants import MAX_SOC_SIZE as SOC_MAX_CHUNK  # largest body of POST /chunks
from chunkstore.swarm.errors import BucketFull, InvalidChunk, InvalidSignature, InvalidStamp, SwarmError
from chunkstore.swarm.soc import SOC, parse_soc, verify_soc_signature

from .errors import ApiError, ParamError, json_response, nearest, status_for, status_response
from .listeners import deliver_gsoc
from .middleware import write_refused
from .params import decode_hex, parse_go_bool, parse_uint, request_query
from .putqueue import put_restamping
from .state import AppState, state_of
from .uploads import (
    ACT_HISTORY_HEADER,
    DEFERRED_HEADER,
    PIN_HEADER,
    act_protect,
    act_reference,
    act_upload_header,
    in_upload_thread,
)

log = logging.getLogger(__name__)

STAMP_HEADER = "Swarm-Postage-Stamp"
BATCH_HEADER = "Swarm-Postage-Batch-Id"
TAG_HEADER = "Swarm-Tag"

MSG_NO_STAMP = f"Either '{STAMP_HEADER}' or '{BATCH_HEADER}' header must be set in the request"
MSG_PRESIGNED = (
    f"pre-signed stamps are required for it: send the 113-byte stamp as 226 hex characters in '{STAMP_HEADER}'"
)


MSG_ACT_PRESIGNED = (
    f"an ACT upload ('Swarm-Act: true') needs '{BATCH_HEADER}': the node stamps the chunks of its access "
    f"control entry, which a pre-signed '{STAMP_HEADER}' cannot cover"
)


def stamp_from_headers(request: web.Request) -> bytes | None:
    """The raw 113-byte stamp of an upload, None for a node-stamped one (batch id only), or an ApiError
    (also for a bad Swarm-Tag, or Swarm-Act, read with them)."""
    tag = request.headers.get(TAG_HEADER)
    if tag:
        parse_uint("header", TAG_HEADER, tag)
    act, _ = act_upload_header(request)  # read with the other headers, as the reference reads Swarm-Act
    stamp_hex = request.headers.get(STAMP_HEADER, "")
    batch_hex = request.headers.get(BATCH_HEADER, "")
    if stamp_hex and act:
        raise ApiError(400, MSG_ACT_PRESIGNED)
    if stamp_hex:
        raw = decode_hex("header", STAMP_HEADER, stamp_hex)
        if len(raw) != STAMP_SIZE:
            raise ApiError(400, f"Stamp deserialization failure: stamp is {len(raw)} bytes; must be {STAMP_SIZE}")
        return raw
    if batch_hex:
        decode_hex("header", BATCH_HEADER, batch_hex, size=32)
        return None
    raise ApiError(400, MSG_NO_STAMP)


@dataclass(frozen=True)
class NodeStamping:
    """A chunk the node stamps with its batch named by the batch id header.

    ``identity`` is how the stamper tells the chunk from another at its address (``SOC.identity`` for
    a SOC, the address for a CAC), as the reference's stamper does."""

    st: AppState
    batch_id: bytes
    address: bytes
    identity: bytes

    def stamp(self) -> bytes:
        """A new stamp of the chunk (blocking: run it in the thread pool)."""
        try:
            return self.st.stamper.stamp(self.batch_id, [self.address], [self.identity])[0].to_bytes()
        except NotNodeBatch as exc:
            raise ApiError(400, f"{exc}; {MSG_PRESIGNED}") from None

    async def restamp(self) -> bytes:
        return await self.st.run(self.stamp)


def _node_stamping(st: AppState, request: web.Request, address: bytes, identity: bytes) -> NodeStamping:
    return NodeStamping(st, bytes.fromhex(request.headers[BATCH_HEADER]), address, identity)


def _address_of(data: bytes) -> tuple[bytes, bytes]:
    """The address a chunk body stands for and its identity: as a CAC when it can be one (as the reference
    reads it), else a SOC."""
    if SPAN_SIZE <= len(data) <= CHUNK_WITH_SPAN:
        address = chunk_hash(data)
        return address, address
    soc = parse_soc(data)
    return soc.address, soc.identity


async def read_body(request: web.Request, limit: int, too_large: str) -> bytes:
    """Read a body of at most ``limit`` bytes; 413 (before reading, when the length is declared) otherwise."""
    declared = request.content_length
    if declared is not None and declared > limit:
        raise ApiError(413, f"{too_large}: body is {declared} bytes; at most {limit}")
    data = await request.read()
    if len(data) > limit:
        raise ApiError(413, f"{too_large}: body is {len(data)} bytes; at most {limit}")
    return data


def _build_soc(
    store: ReserveStore, owner: bytes, soc_id: bytes, sig: bytes, wrapped: bytes, stamp: bytes | None
) -> SOC:
    """The SOC of ``POST /soc`` after the reference's checks: batch known (404), signature by owner (401)."""
    if stamp is not None:
        store.batches.get(stamp[:BATCH_ID_SIZE])  # UnknownBatch: 404
    try:
        return verify_soc_signature(owner, soc_id, sig, wrapped)
    except SwarmError as exc:
        what = "invalid address" if isinstance(exc, InvalidSignature) else "invalid chunk"
        raise ApiError(401, f"{what}: {exc}") from None


# The reference node's wording for each store refusal, by class (the nearest in the error's MRO); the
# store's reason follows it.
_PUT_ERROR_PREFIX: dict[type[BaseException], str] = {
    UnknownBatch: "batch with id not found",
    InvalidSignature: "stamp signature is invalid",
    InvalidStamp: "stamp is invalid",
    StampConflict: "stamp conflicts with a stored chunk",
    InvalidChunk: "create chunk error",
    BucketFull: "batch is overissued",
    OutOfRadius: "chunk is outside the storage radius",
    UnknownTag: "tag not found",
}


def _put_error(request: web.Request, exc: SwarmError) -> ApiError:
    """A store refusal as the reference words it, with the store's reason appended."""
    if isinstance(exc, StoreWriteFailed):  # no space (507) or an I/O error: the node's trouble, not the chunk's
        return write_refused(request, exc)
    prefix = nearest(_PUT_ERROR_PREFIX, exc) or "chunk write error"
    return ApiError(status_for(exc), f"{prefix}: {exc}")


async def _act_protected(request: web.Request, address: bytes) -> tuple[bytes, bytes] | None:
    """``(encrypted address, history)`` of a chunk uploaded with ``Swarm-Act: true`` (None without): its ACT
    and history stamped with the request's batch (``chunk.go``, ``soc.go``: ``actEncryptionHandler``)."""
    act, history = act_upload_header(request)
    if not act:
        return None
    st = state_of(request)
    batch_id = bytes.fromhex(request.headers[BATCH_HEADER])

    def job() -> tuple[bytes, bytes]:
        with st.upload_session(batch_id, UploadOptions(deferred=False)) as session:
            encrypted, history_ref = act_protect(st, session, address, history)
            session.finish(history_ref)
        return encrypted, history_ref

    try:
        return await in_upload_thread(st, job)
    except SwarmError as exc:
        raise _put_error(request, exc) from None


def _created(
    request: web.Request, result: PutResult, tracker: UploadTracker | None = None, act: tuple[bytes, bytes] | None = None
) -> web.Response:
    st = state_of(request)
    st.metrics.count_put(result)
    st.metrics.count_uploads([result])
    address = bytes(result.address) if act is None else act[0]
    resp = json_response({"reference": address.hex()}, status=201)
    if tracker is not None and tracker.tag:
        resp.headers[TAG_HEADER] = str(tracker.tag)
    resp.headers["Access-Control-Expose-Headers"] = TAG_HEADER
    if act is not None:
        resp.headers[ACT_HISTORY_HEADER] = act[1].hex()
        resp.headers.add("Access-Control-Expose-Headers", ACT_HISTORY_HEADER)
    return resp


def _go_bool(request: web.Request, name: str) -> bool | None:
    raw = request.headers.get(name, "")
    return None if raw == "" else parse_go_bool("header", name, raw)


def _chunk_options(request: web.Request, *, soc: bool) -> UploadOptions | None:
    """The tag and pin of a single-chunk upload, or None when it has neither (nothing to track).

    ``/chunks`` counts under a named tag only; ``/soc`` also pins and, pinned or explicitly
    deferred, gets a new tag when none is named (the reference's handlers).
    """
    raw = request.headers.get(TAG_HEADER, "")
    tag = parse_uint("header", TAG_HEADER, raw) if raw else 0
    pin = bool(_go_bool(request, PIN_HEADER)) if soc else False
    deferred = _go_bool(request, DEFERRED_HEADER) if soc else None
    deferred = tag > 0 if deferred is None else deferred
    if not (tag or pin or deferred):
        return None
    return UploadOptions(tag=tag, pin=pin, deferred=deferred)


def _begin_tracking(st: AppState, options: UploadOptions) -> UploadTracker:
    """Blocking: the tag checked (or made), the pin collection begun; single chunks are not cached."""
    return track_upload(st.store, options, cache=False)


def _finish_tracking(tracker: UploadTracker, result: PutResult, root: bytes | None) -> None:
    tracker.stored(None, [result.address], [result])
    tracker.finished(None, root)


async def _tracked_put(
    st: AppState,
    options: UploadOptions | None,
    data: bytes,
    stamp: bytes,
    address: bytes | None,
    root: bool,
    node: NodeStamping | None = None,
) -> tuple[PutResult, UploadTracker | None]:
    """Put one chunk, counted under its tag and pinned as ``options`` ask (``root``: pin it under its address).

    ``node``: the node stamped it, and stamps it again if another upload of the same chunk takes its
    slot first."""

    async def put(holds: Holds | None) -> PutResult:
        if node is None:
            return await st.puts.put(data, stamp, address=address, holds=holds)
        return await put_restamping(st.puts, data, stamp, node.address, node.batch_id, node.restamp, holds)

    if options is None:
        return await put(None), None
    tracker = await st.run(_begin_tracking, st, options)
    try:
        result = await put(tracker.holds)
        await st.run(_finish_tracking, tracker, result, result.address if root else None)
    except BaseException as exc:
        await st.run(tracker.aborted, None, exc)
        raise
    return result, tracker


async def post_chunk(request: web.Request) -> web.Response:
    st = state_of(request)
    try:
        stamp = stamp_from_headers(request)
        data = await read_body(request, SOC_MAX_CHUNK, "Request Entity Too Large")
        if len(data) < SPAN_SIZE:
            raise ApiError(400, f"insufficient data length: body is {len(data)} bytes; at least the {SPAN_SIZE}-byte span")
        options = _chunk_options(request, soc=False)
        try:
            address = node = None
            if stamp is None:
                address, identity = await st.run(_address_of, data)
                node = _node_stamping(st, request, address, identity)
                stamp = await st.run(node.stamp)
            result, tracker = await _tracked_put(st, options, data, stamp, address, root=False, node=node)
        except SwarmError as exc:
            raise _put_error(request, exc) from None
    except ApiError:
        st.metrics.puts.labels("rejected").inc()
        raise
    act = await _act_protected(request, bytes(result.address))
    deliver_gsoc(st, result, data)
    return _created(request, result, tracker, act)


async def post_soc(request: web.Request) -> web.Response:
    st = state_of(request)
    try:
        owner = decode_hex("path", "owner", request.match_info["owner"], size=20)
        soc_id = decode_hex("path", "id", request.match_info["id"], size=32)
        sig_value = request_query(request).get("sig", "")
        if not sig_value:
            raise ParamError("query", "sig", "", "required")
        sig = decode_hex("query", "sig", sig_value, size=65)
        stamp = stamp_from_headers(request)
        data = await read_body(request, CHUNK_WITH_SPAN, "payload too large")
        if len(data) < SPAN_SIZE:
            raise ApiError(400, f"short chunk data: body is {len(data)} bytes; at least the {SPAN_SIZE}-byte span")
        options = _chunk_options(request, soc=True)
        try:
            soc = await st.run(_build_soc, st.store, owner, soc_id, sig, data, stamp)
            node = None
            if stamp is None:
                node = _node_stamping(st, request, soc.address, soc.identity)
                stamp = await st.run(node.stamp)
            result, tracker = await _tracked_put(st, options, soc.data, stamp, soc.address, root=True, node=node)
        except SwarmError as exc:
            raise _put_error(request, exc) from None
    except ApiError:
        st.metrics.puts.labels("rejected").inc()
        raise
    act = await _act_protected(request, bytes(result.address))
    deliver_gsoc(st, result, soc.data)
    return _created(request, result, tracker, act)


def _get_or_none(store: ReserveStore, address: bytes) -> bytes | None:
    try:
        return store.get(address)
    except SwarmError as exc:
        if status_for(exc) == 404:
            return None
        raise


def _chunk_address(request: web.Request) -> bytes | None:
    """The path's chunk address; None for hex of another length (no chunk has it: the reference reads any
    length, so a 64-byte encrypted reference is a chunk not found, not a bad request)."""
    raw = decode_hex("path", "address", request.match_info["address"])
    return raw if len(raw) == ADDRESS_SIZE else None


async def _act_address(request: web.Request) -> bytes | None:
    """The chunk address a download asks for: decrypted first when it names an ACT publisher and history
    (the reference's ``actDecryptionHandler`` on ``/chunks/{address}``)."""
    raw = decode_hex("path", "address", request.match_info["address"])
    address = await act_reference(request, state_of(request), raw)
    return address if len(address) == ADDRESS_SIZE else None


async def get_chunk(request: web.Request) -> web.Response:
    st = state_of(request)
    # Bee reads Swarm-Cache (whether a chunk fetched from the network is cached) before the address; with no
    # network there is nothing to cache, but a value that is not a Go boolean is still the client's 400.
    _go_bool(request, "Swarm-Cache")
    address = await _act_address(request)
    data = None if address is None else await st.run(_get_or_none, st.store, address)
    if data is None:
        st.metrics.gets.labels("miss").inc()
        raise ApiError(404, "chunk not found")
    st.metrics.gets.labels("hit").inc()
    return web.Response(body=bytes(data), content_type="binary/octet-stream")  # Bee's chunkGetHandler's type


async def head_chunk(request: web.Request) -> web.Response:
    st = state_of(request)
    address = await _act_address(request)
    has = address is not None and await st.run(st.store.has, address)
    if not has:
        raise ApiError(404)
    return status_response()


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    for p in prefixes:
        app.router.add_post(p + "/chunks", post_chunk, name=None if p else "chunks")
        app.router.add_get(p + "/chunks/{address}", get_chunk, allow_head=False)
        app.router.add_route("HEAD", p + "/chunks/{address}", head_chunk)
        app.router.add_post(p + "/soc/{owner}/{id}", post_soc)
