"""Pins: ``POST``/``GET``/``DELETE /pins/{reference}``, ``GET /pins``, ``GET /pins/check`` (``pkg/api/pin.go``).

Pinning a reference keeps every chunk of what it stands for (a bytes tree
with its parities, a manifest and all its files, an encrypted reference with
its key, a single SOC; ``chunkstore.swarm.traversal``) whatever the reserve
does: capacity eviction, a raised radius and batch expiry drop the chunks'
stamps, never their data. Unpinning hands them back to the reserve's rules
(a chunk without a stamp left is deleted). Pinning a large tree is crash
safe: after any crash the pin exists whole or not at all
(``chunkstore.store.pins``).

Answers, as the reference's: ``POST`` 201 ``{"code":201,"message":"Created"}``
(200 ``OK`` when it is pinned already), 404 "pin collection failed: ..."
when a chunk of the tree is not stored here (nothing is left of the
attempt), 422 when the reference leads to no valid tree (the reference node
answers 500); ``GET`` 200 ``{"reference"}`` or 404; ``DELETE`` 200 ``OK`` or
404; ``GET /pins`` ``{"references": [...]}``; ``GET /pins/check[?ref=]``
one JSON line per pin (``{"reference", "total", "missing", "invalid"}``),
streamed as each pin is checked; an unknown ``ref`` is a 404 here (the
reference node answers a line of zeros). A reference that is not 32 or 64
bytes of hex is a 400. ``Swarm-Redundancy-Level`` on ``POST`` bounds which
replicas of a lost root are tried, as on downloads.
"""

from __future__ import annotations

import logging

from aiohttp import web

from chunkstore.store.errors import ChunkNotFound, UnknownPin
from chunkstore.store.pinning import pin_reference
from chunkstore.swarm.errors import SwarmError
from chunkstore.swarm.file import ChunkMissing, FileError
from chunkstore.swarm.mantaray import ManifestError
from chunkstore.swarm.redundancy.level import DEFAULT_DOWNLOAD_LEVEL, Level

from .errors import ApiError, ParamError, json_body, json_response, method_not_allowed, status_response
from .params import decode_hex, parse_uint, request_query
from .state import state_of

log = logging.getLogger(__name__)

LEVEL_HEADER = "Swarm-Redundancy-Level"


def parse_pin_reference(value: str, where: str = "path", field: str = "reference") -> bytes:
    raw = decode_hex(where, field, value)
    if len(raw) not in (32, 64):
        raise ParamError(where, field, value, f"want 32 or 64 bytes, got {len(raw)}")
    return raw


def _level(request: web.Request) -> Level:
    raw = request.headers.get(LEVEL_HEADER, "")
    if not raw:
        return DEFAULT_DOWNLOAD_LEVEL
    value = parse_uint("header", LEVEL_HEADER, raw, bits=8)
    if value > Level.PARANOID:
        raise ParamError("header", LEVEL_HEADER, raw, f"want a redundancy level in 0..{int(Level.PARANOID)}")
    return Level(value)


async def pin(request: web.Request) -> web.Response:
    st = state_of(request)
    reference = parse_pin_reference(request.match_info["reference"])
    level = _level(request)
    try:
        created = await st.run(pin_reference, st.store, reference, level=level)
    except (ChunkMissing, ChunkNotFound) as exc:
        raise ApiError(404, f"pin collection failed: {exc}") from None
    except (FileError, ManifestError) as exc:
        raise ApiError(422, f"pin collection failed: the reference leads to no valid tree: {exc}") from None
    if created:
        return json_response({"code": 201, "message": "Created"}, status=201)
    return status_response()


async def get_pin(request: web.Request) -> web.Response:
    st = state_of(request)
    reference = parse_pin_reference(request.match_info["reference"])
    if not await st.run(st.store.pins.has, reference):
        raise ApiError(404)
    return json_response({"reference": reference.hex()})


async def unpin(request: web.Request) -> web.Response:
    st = state_of(request)
    reference = parse_pin_reference(request.match_info["reference"])
    try:
        await st.run(st.store.pins.remove, reference)
    except UnknownPin:
        raise ApiError(404) from None
    return status_response()


async def list_pins(request: web.Request) -> web.Response:
    st = state_of(request)
    references = await st.run(st.store.pins.list)
    return json_response({"references": [r.hex() for r in references]})


async def check_pins(request: web.Request) -> web.StreamResponse:
    st = state_of(request)
    raw = request_query(request).get("ref", "")
    if raw:
        reference = parse_pin_reference(raw, "query", "ref")
        if not await st.run(st.store.pins.has, reference):
            raise ApiError(404, f"no pin of reference {reference.hex()}")
        references = [reference]
    else:
        references = await st.run(st.store.pins.list)
    resp = web.StreamResponse(headers={"Content-Type": "application/json; charset=utf-8"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    for reference in references:
        try:
            check = await st.run(st.store.pins.check, reference)
        except UnknownPin:
            continue  # unpinned since the list was read
        except SwarmError as exc:  # the answer has begun: end it, and say why in the log
            log.error("pin check failed", extra={"fields": {"reference": reference.hex(), "error": str(exc)}})
            break
        line = {"reference": check.reference.hex(), "total": check.total, "missing": check.missing,
                "invalid": check.invalid}
        await resp.write(json_body(line))
    await resp.write_eof()
    return resp


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    for p in prefixes:
        app.router.add_get(p + "/pins", list_pins, allow_head=False)
        app.router.add_get(p + "/pins/check", check_pins, allow_head=False)
        app.router.add_route("*", p + "/pins/check", method_not_allowed("GET"))  # not /pins/{reference}
        app.router.add_post(p + "/pins/{reference}", pin)
        app.router.add_get(p + "/pins/{reference}", get_pin, allow_head=False)
        app.router.add_delete(p + "/pins/{reference}", unpin)
