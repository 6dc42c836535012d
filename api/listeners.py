"""The node's WebSocket listeners, PSS topics and GSOC addresses, and handing them what arrives.

The reference hands a GSOC subscriber (``GET /gsoc/subscribe/{address}``)
the payload of every SOC at that address that reaches the node: pushed to it
by a peer because the node is in the SOC's neighbourhood (``pkg/pushsync``),
or synced from a neighbour (``pkg/pullsync``); ``pkg/gsoc`` sends each
subscriber the wrapped chunk's data after its span. This node has no peers:
every chunk it stores lands in its own reserve, so it is the neighbourhood
of every SOC, and a SOC uploaded here (``POST /soc``, or a SOC through
``POST /chunks``) is delivered to the subscribers of its address here. The
reference alone with no peers keeps its own uploads from its GSOC listener
(only PSS chunks are opened locally); here both arrive, which is what an app
developed against one node (bee-js' ``gsocSubscribe`` with ``gsocSend``)
needs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from aiohttp import web

from chunkstore.store.store import PutResult
from chunkstore.swarm.constants import SOC_HEADER_SIZE, SPAN_SIZE, ChunkType

from .state import AppState

log = logging.getLogger(__name__)

SEND_DEADLINE = 4.0  # seconds to hand a message to one subscriber (the reference's write deadline)


_sending: set[asyncio.Task[None]] = set()  # fan-outs under way (the loop keeps only weak references to tasks)


def broadcast(subscribers: Iterable[web.WebSocketResponse], message: bytes, kind: str) -> None:
    """Start sending ``message`` to each subscriber as one binary frame, without holding up the caller (the
    upload's answer waits for no subscriber, as the reference hands messages over in goroutines); one gone
    or stuck for ``SEND_DEADLINE`` is closed and skipped."""
    targets = list(subscribers)
    if targets:
        task = asyncio.ensure_future(_send_each(targets, message, kind))
        _sending.add(task)
        task.add_done_callback(_sending.discard)


async def _send_each(subscribers: list[web.WebSocketResponse], message: bytes, kind: str) -> None:
    for ws in subscribers:
        try:
            await asyncio.wait_for(ws.send_bytes(message), SEND_DEADLINE)
        except (ConnectionError, TimeoutError, RuntimeError) as exc:
            log.debug("%s subscriber dropped", kind, extra={"fields": {"error": repr(exc)}})
            await ws.close()


def deliver_gsoc(st: AppState, stored: PutResult, chunk: bytes) -> None:
    """Hand the payload of the chunk just stored to the GSOC subscribers of its address, if it is a SOC
    (``id | signature | span | payload``); a CAC at a subscribed address is no message."""
    subscribers = st.gsoc_addresses.get(stored.address)
    if subscribers and stored.chunk_type == ChunkType.SOC:
        broadcast(subscribers, chunk[SOC_HEADER_SIZE + SPAN_SIZE :], "gsoc")
