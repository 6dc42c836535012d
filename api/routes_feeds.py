"""Single-owner chunks and feeds: ``GET /soc/{owner}/{id}``, ``GET`` and ``POST /feeds/{owner}/{topic}``.

Shapes follow the reference node (``pkg/api/soc.go``, ``feed.go``):

``GET /soc/{owner}/{id}``
  the content the SOC wraps (its wrapped chunk taken as the root of a
  file), ``Swarm-Soc-Signature`` (130 hex); with ``Swarm-Only-Root-Chunk:
  true`` the wrapped chunk itself (``span | payload``). 404 when the SOC is
  not held.

``GET /feeds/{owner}/{topic}[?after=N&at=T]``
  the latest update of the sequence feed, resolved (v1: a timestamped
  reference to content; v2: the update wraps the content's root chunk):
  the content, or with ``Swarm-Only-Root-Chunk: true`` its root chunk, and
  ``Swarm-Feed-Index``, ``Swarm-Feed-Index-Next`` (16 hex each),
  ``Swarm-Soc-Signature`` and ``Swarm-Feed-Resolved-Version`` (``v1`` or
  ``v2``). 404 ``no update found`` when the feed has no update (at
  ``after``, when given). ``at`` is validated and otherwise unused, as the
  reference's sequence finder ignores it.

``POST /feeds/{owner}/{topic}``
  stores the feed's manifest (``chunkstore.content.feedmanifest``), stamped
  by the node with the batch in ``Swarm-Postage-Batch-Id`` like every
  upload (``api.uploads``: ``Swarm-Redundancy-Level``, ``Swarm-Pin``,
  ``Swarm-Tag``); 201 ``{"reference"}``. ``GET /bzz/{reference}/`` then
  serves the feed's latest update (``api.feedread.feed_target``).

All take the owner as 40 hex and refuse anything else with a 400 naming
the field (the reference reads any hex and pads it, so a typo silently
becomes another owner's feed); the topic is non-empty hex of any length
and the id 64 hex.
"""

from __future__ import annotations

from aiohttp import web

from chunkstore.content.feedmanifest import write_feed_manifest
from chunkstore.swarm.constants import ETH_ADDRESS_SIZE, MAX_CAC_SIZE
from chunkstore.swarm.errors import SwarmError
from chunkstore.swarm.feeds import V1, InvalidFeedUpdate, index_bytes

from .errors import ApiError
from .feedread import get_or_none, latest_update, open_tree, read_soc
from .params import decode_hex, parse_go_bool, parse_int, parse_uint, request_query
from .serve import FileBody, check_retrieval_headers, serve_file, tree_error
from .state import AppState, state_of
from .uploads import ACT_HISTORY_HEADER, created, parse_upload, run_upload

INDEX_HEADER = "Swarm-Feed-Index"
INDEX_NEXT_HEADER = "Swarm-Feed-Index-Next"
SIGNATURE_HEADER = "Swarm-Soc-Signature"
VERSION_HEADER = "Swarm-Feed-Resolved-Version"
ONLY_ROOT_HEADER = "Swarm-Only-Root-Chunk"
OCTET_STREAM = "application/octet-stream"

SOC_ID_SIZE = 32
MAX_TOPIC_SIZE = 4096  # hex in a URL path; the reference sets no bound, a path this long is already unusual


def _owner(request: web.Request) -> bytes:
    return decode_hex("path", "owner", request.match_info["owner"], size=ETH_ADDRESS_SIZE)


def _only_root(request: web.Request) -> bool:
    value = request.headers.get(ONLY_ROOT_HEADER)
    return False if not value else parse_go_bool("header", ONLY_ROOT_HEADER, value)


def _root_chunk_response(data: bytes, headers: dict[str, str]) -> web.Response:
    return web.Response(body=data, headers=headers)


async def _serve_content(
    request: web.Request, st: AppState, reference: bytes, root_chunk: bytes | None, headers: dict[str, str]
) -> web.StreamResponse:
    """The content at ``reference`` as Bee's ``downloadHandler`` serves it (Range, ETag of the root address),
    after its checks of the retrieval headers (``Swarm-Only-Root-Chunk`` answers skip them, as there)."""
    check_retrieval_headers(request)
    try:
        joiner = await st.run(open_tree, st.store, reference, root_chunk)
    except SwarmError as exc:
        raise tree_error(exc) from None
    headers["Access-Control-Expose-Headers"] += ", Content-Disposition"
    return await serve_file(
        request, FileBody(joiner), content_type=OCTET_STREAM, headers=headers, etag=f'"{bytes(reference).hex()}"'
    )


async def get_soc(request: web.Request) -> web.StreamResponse:
    st = state_of(request)
    owner = _owner(request)
    soc_id = decode_hex("path", "id", request.match_info["id"], size=SOC_ID_SIZE)
    only_root = _only_root(request)
    soc = await st.run(read_soc, st.store, owner, soc_id)
    if soc is None:
        raise ApiError(404, "requested chunk cannot be retrieved")
    headers = {
        "Content-Type": OCTET_STREAM,
        SIGNATURE_HEADER: soc.signature.hex(),
        "Access-Control-Expose-Headers": SIGNATURE_HEADER,
    }
    if only_root:
        return _root_chunk_response(soc.wrapped_data, headers)
    return await _serve_content(request, st, soc.wrapped_address, soc.wrapped_data, headers)


async def get_feed(request: web.Request) -> web.StreamResponse:
    st = state_of(request)
    owner = _owner(request)
    topic = decode_hex("path", "topic", request.match_info["topic"], max_size=MAX_TOPIC_SIZE)
    query = request_query(request)
    if query.get("at"):
        parse_int("query", "at", query["at"])
    after = parse_uint("query", "after", query["after"]) if query.get("after") else 0
    only_root = _only_root(request)
    try:
        update = await st.run(latest_update, st.store, owner, topic, after)
    except InvalidFeedUpdate as exc:
        raise ApiError(404, f"wrapped chunk cannot be retrieved: {exc}") from None
    if update is None:
        raise ApiError(404, "no update found")
    resolved = update.resolved
    headers = {
        "Content-Type": OCTET_STREAM,
        INDEX_HEADER: index_bytes(update.index).hex(),
        INDEX_NEXT_HEADER: index_bytes(update.next_index).hex(),
        SIGNATURE_HEADER: update.soc.signature.hex(),
        VERSION_HEADER: resolved.version,
        "Access-Control-Expose-Headers": f"{INDEX_HEADER}, {INDEX_NEXT_HEADER}, {SIGNATURE_HEADER}",
    }
    if only_root:
        root = resolved.root_chunk
        if resolved.version == V1:
            root = await st.run(get_or_none, st.store, resolved.address[:32])
        if root is None:  # the referenced chunk went away since the lookup saw it
            raise ApiError(404, "wrapped chunk cannot be retrieved")
        return _root_chunk_response(bytes(root), headers)
    return await _serve_content(request, st, resolved.address, resolved.root_chunk, headers)


async def post_feed(request: web.Request) -> web.Response:
    st = state_of(request)
    declared = request.content_length  # the reference's body limit for the route, though no body is read
    if declared is not None and declared > MAX_CAC_SIZE:
        raise ApiError(413, f"Request Entity Too Large: body is {declared} bytes; at most {MAX_CAC_SIZE}")
    owner = _owner(request)
    topic = decode_hex("path", "topic", request.match_info["topic"], max_size=MAX_TOPIC_SIZE)
    up = parse_upload(request, encrypt_header=False)  # Bee's feedPostHandler reads no Swarm-Encrypt
    reference = await run_upload(
        request, st, up, lambda session, _body: write_feed_manifest(session, owner, topic, level=up.level)
    )
    resp = created(reference, up)
    if up.act:  # Bee's feedPostHandler sets (not adds) the exposed header to the history's alone
        resp.headers["Access-Control-Expose-Headers"] = ACT_HISTORY_HEADER
    return resp


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    for p in prefixes:
        app.router.add_get(p + "/soc/{owner}/{id}", get_soc, allow_head=False)
        app.router.add_get(p + "/feeds/{owner}/{topic}", get_feed, allow_head=False)
        app.router.add_post(p + "/feeds/{owner}/{topic}", post_feed)
