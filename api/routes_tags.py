"""Tags: ``POST /tags``, ``GET /tags``, ``GET``/``PATCH``/``DELETE /tags/{id}`` (the reference's ``pkg/api/tag.go``).

A tag counts the chunks of the uploads made under it (``Swarm-Tag``; an
upload without one, unless ``Swarm-Deferred-Upload: false``, gets a new tag,
answered in its ``Swarm-Tag`` header). Its JSON is the reference's:
``{"split", "seen", "stored", "sent", "synced", "uid", "address",
"startedAt"}``, ``address`` the root of the last upload done under it ("" for
none), ``startedAt`` Go's RFC 3339 time with nanoseconds (in UTC here). How
the counters move on a node with no peers: ``chunkstore.content.tracking``.

Answers: ``POST`` 201 with the tag; ``GET /tags?offset=&limit=`` (limit 100
by default) ``{"tags": [...]}`` in uid order; ``GET`` a tag, 404 "tag not
present" for an unknown uid; ``PATCH`` (body ``{"address": hex}``, the
reference's field; bee-js 12's ``{"reference": ...}`` is taken too) sets the
address, 200 ``{"code":200,"message":"ok"}`` (bee-js 12 sends its reference
object serialised as ``{"bytes": {"0": .., ...}, "length": 32}``, which is
read too); ``DELETE`` 204. A uid that is not
a positive decimal integer is a 400; a body that is not that JSON a 400 (the
reference answers 500).
"""

from __future__ import annotations

import datetime
from typing import Any

from aiohttp import web

from chunkstore.store.errors import UnknownTag
from chunkstore.store.tags import Tag
from chunkstore.swarm.jsontext import parse_json

from .errors import ApiError, ParamError, json_response
from .params import decode_hex, parse_uint, request_query
from .state import state_of

DEFAULT_LIMIT = 100  # the reference's
MAX_PATCH_BODY = 1024  # the reference's body limit for POST and PATCH
NOT_PRESENT = "tag not present"
NO_CACHE = {"Cache-Control": "no-cache, private, max-age=0"}


def go_time(ns: int) -> str:
    """A Unix time in nanoseconds as Go's ``time.Time`` JSON (RFC 3339, nanoseconds, trailing zeros cut)."""
    seconds, frac = divmod(ns, 1_000_000_000)
    stamp = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return stamp + (f".{frac:09d}".rstrip("0") if frac else "") + "Z"


def render_tag(tag: Tag) -> dict[str, Any]:
    return {
        "split": tag.split,
        "seen": tag.seen,
        "stored": tag.stored,
        "sent": tag.sent,
        "synced": tag.synced,
        "uid": tag.uid,
        "address": tag.address.hex(),
        "startedAt": go_time(tag.started_ns),
    }


def parse_uid(request: web.Request) -> int:
    raw = request.match_info["id"]
    uid = parse_uint("path", "id", raw)
    if uid == 0:
        raise ParamError("path", "id", raw, "required")
    return uid


def _query_int(request: web.Request, name: str, default: int) -> int:
    raw = request_query(request).get(name)
    if raw is None or raw == "":
        return default
    return parse_uint("query", name, raw, bits=63)


async def create_tag(request: web.Request) -> web.Response:
    st = state_of(request)
    if request.content_length is not None and request.content_length > MAX_PATCH_BODY:
        raise ApiError(413, f"Request Entity Too Large: at most {MAX_PATCH_BODY} bytes")
    tag = await st.run(st.store.tags.create)
    return json_response(render_tag(tag), status=201, headers=NO_CACHE)


async def list_tags(request: web.Request) -> web.Response:
    st = state_of(request)
    offset = _query_int(request, "offset", 0)
    limit = _query_int(request, "limit", DEFAULT_LIMIT)
    tags = await st.run(st.store.tags.list, offset, limit)
    return json_response({"tags": [render_tag(t) for t in tags]})


async def get_tag(request: web.Request) -> web.Response:
    st = state_of(request)
    uid = parse_uid(request)
    tag = await st.run(st.store.tags.find, uid)
    if tag is None:
        raise ApiError(404, NOT_PRESENT)
    return json_response(render_tag(tag), headers=NO_CACHE)


async def delete_tag(request: web.Request) -> web.Response:
    st = state_of(request)
    uid = parse_uid(request)
    try:
        await st.run(st.store.tags.delete, uid)
    except UnknownTag:
        raise ApiError(404, NOT_PRESENT) from None
    return web.Response(status=204)


def _bee_js_reference(value: Any) -> Any:
    """bee-js 12's ``updateTag`` field: a hex string, or its ``Reference`` object as JSON.stringify
    renders it, ``{"bytes": {"0": b0, "1": b1, ...}, "length": n}`` (returned as hex; anything else as is)."""
    if not isinstance(value, dict) or not isinstance(value.get("bytes"), dict):
        return value
    table, length = value["bytes"], value.get("length")
    if not isinstance(length, int) or length not in (32, 64) or len(table) != length:
        raise ApiError(400, "error unmarshaling metadata: reference is not 32 or 64 bytes")
    try:
        return bytes(table[str(i)] for i in range(length)).hex()
    except (KeyError, TypeError, ValueError):
        raise ApiError(400, "error unmarshaling metadata: reference bytes are malformed") from None


def _patch_address(body: bytes) -> bytes | None:
    if not body.strip():
        return None
    try:
        doc = parse_json(body)
    except ValueError as exc:
        raise ApiError(400, f"error unmarshaling metadata: {exc}") from None
    if not isinstance(doc, dict):
        raise ApiError(400, "error unmarshaling metadata: want a JSON object {\"address\": hex}")
    value = doc.get("address")
    if value is None or value == "":
        value = _bee_js_reference(doc.get("reference"))
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ApiError(400, "error unmarshaling metadata: address must be a hex string")
    raw = decode_hex("body", "address", value)
    if len(raw) not in (32, 64):
        raise ParamError("body", "address", value, f"want 32 or 64 bytes, got {len(raw)}")
    return raw


async def patch_tag(request: web.Request) -> web.Response:
    st = state_of(request)
    uid = parse_uid(request)
    declared = request.content_length
    if declared is not None and declared > MAX_PATCH_BODY:
        raise ApiError(413, f"Request Entity Too Large: at most {MAX_PATCH_BODY} bytes")
    body = await request.content.read(MAX_PATCH_BODY + 1)
    if len(body) > MAX_PATCH_BODY:
        raise ApiError(413, f"Request Entity Too Large: at most {MAX_PATCH_BODY} bytes")
    address = _patch_address(body)
    try:
        await st.run(st.store.tags.done, uid, address)
    except UnknownTag:
        raise ApiError(404, NOT_PRESENT) from None
    return json_response({"code": 200, "message": "ok"})


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    for p in prefixes:
        app.router.add_post(p + "/tags", create_tag)
        app.router.add_get(p + "/tags", list_tags, allow_head=False)
        app.router.add_get(p + "/tags/{id}", get_tag, allow_head=False)
        app.router.add_delete(p + "/tags/{id}", delete_tag)
        app.router.add_patch(p + "/tags/{id}", patch_tag)
