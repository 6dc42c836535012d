"""PSS on a node with no peers: ``POST /pss/send/{topic}/{targets}``, ``GET /pss/subscribe/{topic}`` (``pkg/api/pss.go``),
and ``GET /gsoc/subscribe/{address}`` (``pkg/api/gsoc.go``).

The reference node wraps the message in a trojan chunk (``chunkstore.swarm.pss``:
encrypted to ``?recipient=`` or, without one, to the topic's own key; the
nonce mined until the chunk's address starts with one of the comma-separated
hex targets, 1 to 3 bytes each), stamps it with the batch in
``Swarm-Postage-Batch-Id`` and pushes it to the closest peer. With no peer
the closest node is itself: it opens the chunk with its own key (or the
topic's) for the topics it has subscribers on, hands the message to each of
them, and answers 201 without storing the chunk. That is what this node does,
so a message sent here reaches the WebSocket subscribers of its topic here
(bee-js' ``pssSend`` with ``pssSubscribe``/``pssReceive``, swarm-cli's ``pss``).
A topic is the Keccak-256 of the path's topic text, on both routes. A GSOC
subscription hears each SOC stored at its address through this node's
uploads (``api.listeners`` says why, and how the reference differs).

Refusals, as the reference words them: a bad topic, target or recipient 400
(``invalid path params``, ``invalid query params``; a recipient may also be
the 64 bytes ``x | y`` bee-js sends); no batch header 400; a batch the node
cannot stamp with 400 ``batch not found``; an immutable batch's full bucket
402; a message over 4,000 bytes 413 (the reference: 500). A 3-byte target
takes about 16 million candidate hashes to mine (minutes, as on the
reference); the mining stops when the client goes away.
"""

from __future__ import annotations

import logging

import coincurve
from aiohttp import web

from chunkstore.content import NotNodeBatch
from chunkstore.store.errors import UnknownBatch
from chunkstore.swarm import pss
from chunkstore.swarm.constants import ADDRESS_SIZE
from chunkstore.swarm.errors import BucketFull

from .errors import ApiError, ParamError, status_response
from .listeners import broadcast
from .params import decode_hex, request_query
from .routes_chunks import read_body
from .state import AppState, state_of
from .uploads import in_upload_thread, required_batch_id

log = logging.getLogger(__name__)

PING_SECONDS = 60.0  # the reference's WebSocket ping period


def _targets(text: str) -> list[bytes]:
    targets = [decode_hex("path", "target", part, max_size=pss.MAX_TARGET) for part in text.split(",")]
    try:
        pss.check_targets(targets)
    except pss.PssError as exc:
        raise ParamError("path", "targets", text, str(exc)) from None
    return targets


def _recipient(request: web.Request, topic: bytes) -> coincurve.PublicKey:
    text = request_query(request).get("recipient")
    if text is None or text == "":
        return pss.topic_key(topic).public_key
    raw = decode_hex("query", "recipient", text)
    if len(raw) == 64:  # bee-js sends x | y without the 04 prefix
        raw = b"\x04" + raw
    try:
        return pss.parse_public_key(raw)
    except pss.PssError as exc:
        raise ParamError("query", "recipient", text, str(exc)) from None


async def _deliver(st: AppState, data: bytes) -> None:
    """Open the chunk as its closest node (this one) would, and give the message to its topic's subscribers."""
    if not st.pss_topics:
        return
    own = coincurve.PrivateKey(st.signer.secret)
    opened = await st.run(pss.unwrap, data, [own], list(st.pss_topics))
    if opened is None:
        return
    topic, message = opened
    broadcast(st.pss_topics.get(topic, ()), message, "pss")


async def pss_send(request: web.Request) -> web.Response:
    st = state_of(request)
    name = request.match_info["topic"]
    topic = pss.topic_of(name)
    targets = _targets(request.match_info["targets"])
    recipient = _recipient(request, topic)
    batch_id = required_batch_id(request)
    message = await read_body(request, pss.MAX_PAYLOAD, f"message payload size cannot be greater than {pss.MAX_PAYLOAD} bytes")
    transport = request.transport

    def gone() -> bool:
        return transport is None or transport.is_closing()

    def wrap_and_stamp() -> tuple[bytes, bytes]:
        st.stamper.batch(batch_id)  # a batch the node cannot stamp with is refused before any mining
        address, data = pss.wrap(topic, message, recipient, targets, give_up=gone)
        st.stamper.stamp(batch_id, [address])  # takes a position of the batch, as the reference's send does
        return address, data

    try:
        _, data = await in_upload_thread(st, wrap_and_stamp)  # mining may take long: never in the store pool
    except (UnknownBatch, NotNodeBatch):
        raise ApiError(400, "batch not found") from None
    except BucketFull:
        raise ApiError(402, "batch is overissued") from None
    except pss.PssError as exc:
        raise ApiError(400, f"pss send failed: {exc}") from None
    await _deliver(st, data)
    return status_response(201)


async def _subscription(
    request: web.Request, registry: dict[bytes, set[web.WebSocketResponse]], key: bytes
) -> web.WebSocketResponse:
    """Hold a subscriber's WebSocket open until it goes (or the daemon stops), listed under ``key`` in
    ``registry`` meanwhile; a key whose last subscriber left is dropped."""
    st = state_of(request)
    ws = web.WebSocketResponse(heartbeat=PING_SECONDS, max_msg_size=pss.MAX_PAYLOAD + 1)
    if not ws.can_prepare(request).ok:
        raise ApiError(400, "upgrade failed: a WebSocket upgrade request is required")
    await ws.prepare(request)
    st.streams.add(ws)  # closed first on shutdown, with the chunk streams
    subscribers = registry.setdefault(key, set())
    subscribers.add(ws)
    try:
        async for _ in ws:  # the reference reads nothing from a subscriber; this answers its control frames
            pass
    finally:
        subscribers.discard(ws)
        if not subscribers and registry.get(key) is subscribers:
            del registry[key]
        st.streams.discard(ws)
    return ws


async def pss_subscribe(request: web.Request) -> web.WebSocketResponse:
    topic = pss.topic_of(request.match_info["topic"])
    return await _subscription(request, state_of(request).pss_topics, topic)


async def gsoc_subscribe(request: web.Request) -> web.WebSocketResponse:
    """Hear the SOCs stored at the path's address: each one's payload, as one binary message
    (``api.listeners``)."""
    address = decode_hex("path", "address", request.match_info["address"], size=ADDRESS_SIZE)
    return await _subscription(request, state_of(request).gsoc_addresses, address)


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    for p in prefixes:
        app.router.add_post(p + "/pss/send/{topic}/{targets}", pss_send)
        app.router.add_get(p + "/pss/subscribe/{topic}", pss_subscribe, allow_head=False)
        app.router.add_get(p + "/gsoc/subscribe/{address}", gsoc_subscribe, allow_head=False)
