"""Grantee lists of ACT-protected content: ``POST /grantee``, ``GET``/``PATCH /grantee/{address}``.

As the reference node serves them (``pkg/api/accesscontrol.go``: the create,
list and grant/revoke handlers), with the node's key as the publisher:

- ``POST /grantee`` ``{"grantees": [hex public keys]}``: a new grantee list
  and an ACT granting them the access key of a new history (or of the one
  ``Swarm-Act-History-Address`` names); 201 ``{"ref", "historyref"}``, ``ref``
  being the list's (encrypted, 64-byte) reference encrypted for the
  publisher;
- ``GET /grantee/{ref}``: the list, compressed keys in hex; 404 "granteelist
  not found" for anything that does not decrypt and load to one;
- ``PATCH /grantee/{ref}`` ``{"add": [...], "revoke": [...]}`` with
  ``Swarm-Act-History-Address`` (required): 200 ``{"ref", "historyref"}``,
  a new history entry; a revoke gives everyone left a new access key, so
  content uploaded to the history after it is closed to the revoked keys.

The chunks are stamped with the node's batch (``Swarm-Postage-Batch-Id``)
through one upload session, pinned and tagged as ``Swarm-Pin`` and
``Swarm-Tag`` ask (the session is finished with the history reference).
"""

from __future__ import annotations

import json
from typing import Any

import coincurve
from aiohttp import web

from chunkstore.content import UploadOptions
from chunkstore.content.act import ActNotFound, ActStorage, NoGranteeFound
from chunkstore.swarm import act as actfmt
from chunkstore.swarm.errors import SwarmError
from chunkstore.swarm.redundancy.level import DEFAULT_DOWNLOAD_LEVEL, DEFAULT_UPLOAD_LEVEL

from .errors import ApiError, json_response
from .params import decode_hex, parse_uint
from .state import AppState, state_of
from .uploads import (
    ACT_HISTORY_HEADER,
    CACHE_HEADER,
    DEFERRED_HEADER,
    PIN_HEADER,
    TAG_HEADER,
    act_controller,
    bool_header,
    in_upload_thread,
    redundancy_level,
    required_batch_id,
    upload_error,
)

GRANTEE_LIST_FAILED = "failed to create or update grantee list"


class _BadKeys(Exception):
    pass


def _parse_keys(values: Any) -> list[coincurve.PublicKey]:
    """Hex public keys as ``parseKeys`` reads them (``hex.DecodeString``, ``btcec.ParsePubKey``)."""
    out = []
    for value in values or []:
        try:
            out.append(actfmt.parse_act_public_key(bytes.fromhex(value)))
        except (ValueError, TypeError, SwarmError):
            raise _BadKeys from None
    return out


def _field_list(doc: Any, name: str) -> list[Any]:
    """A JSON field that must be a list of strings (or null/absent), as Go unmarshals ``[]string``."""
    value = None
    if isinstance(doc, dict):
        # Go's json matches field names case-insensitively, an exact match first
        value = doc[name] if name in doc else next((v for k, v in doc.items() if k.lower() == name), None)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ApiError(500, "error unmarshaling request body")
    return value


async def _body(request: web.Request) -> Any:
    body = await request.read()
    if not body:
        return {}
    try:
        doc = json.loads(body)
    except ValueError:
        raise ApiError(500, "error unmarshaling request body") from None
    if doc is not None and not isinstance(doc, dict):
        raise ApiError(500, "error unmarshaling request body")
    return doc or {}


def _upload_options(request: web.Request) -> UploadOptions:
    tag_raw = request.headers.get(TAG_HEADER, "")
    deferred = bool_header(request, DEFERRED_HEADER)
    return UploadOptions(
        tag=parse_uint("header", TAG_HEADER, tag_raw) if tag_raw else 0,
        pin=bool(bool_header(request, PIN_HEADER)),
        deferred=True if deferred is None else deferred,
    )


def _no_body(request: web.Request) -> bool:
    """Go's ``r.Body == http.NoBody``: no length declared or zero, and not chunked."""
    return not request.body_exists


async def _update(
    request: web.Request,
    st: AppState,
    batch_id: bytes,
    options: UploadOptions,
    encrypted_gl: bytes | None,
    history: bytes | None,
    add: list[coincurve.PublicKey],
    revoke: list[coincurve.PublicKey],
) -> tuple[bytes, bytes]:
    level = redundancy_level(request, DEFAULT_UPLOAD_LEVEL)  # only for reading: the ACT is written at NONE

    def job() -> tuple[bytes, bytes]:
        with st.upload_session(batch_id, options) as session:
            storage = ActStorage(get=st.store.get, put=session.put, level=level)
            try:
                gl_ref, history_ref = act_controller(st).update(storage, encrypted_gl, history, add, revoke)
            except ActNotFound:
                raise ApiError(404, "act or history entry not found") from None
            except NoGranteeFound:
                raise ApiError(400, "remove from empty grantee list") from None
            except SwarmError:
                raise ApiError(500, GRANTEE_LIST_FAILED) from None
            session.finish(history_ref)
        return gl_ref, history_ref

    try:
        return await in_upload_thread(st, job)
    except SwarmError as exc:
        raise upload_error(request, exc) from None


def _history(request: web.Request) -> bytes | None:
    raw = request.headers.get(ACT_HISTORY_HEADER, "")
    return decode_hex("header", ACT_HISTORY_HEADER, raw) if raw else None


async def post_grantee(request: web.Request) -> web.Response:
    st = state_of(request)
    if _no_body(request):
        raise ApiError(400, "could not validate request")
    batch_id = required_batch_id(request)
    options = _upload_options(request)
    history = _history(request)
    doc = await _body(request)
    try:
        grantees = _parse_keys(_field_list(doc, "grantees"))
    except _BadKeys:
        raise ApiError(400, "invalid grantee list") from None
    gl_ref, history_ref = await _update(request, st, batch_id, options, None, history, grantees, [])
    return json_response({"ref": gl_ref.hex(), "historyref": history_ref.hex()}, status=201)


async def get_grantee(request: web.Request) -> web.Response:
    st = state_of(request)
    address = decode_hex("path", "address", request.match_info["address"])
    bool_header(request, CACHE_HEADER)
    storage = ActStorage(get=st.store.get, level=redundancy_level(request, DEFAULT_DOWNLOAD_LEVEL))
    try:
        keys = await st.run(act_controller(st).grantees, storage, address)
    except SwarmError:
        raise ApiError(404, "granteelist not found") from None
    return json_response([bytes(k.format(compressed=True)).hex() for k in keys])


async def patch_grantee(request: web.Request) -> web.Response:
    st = state_of(request)
    if _no_body(request):
        raise ApiError(400, "could not validate request")
    address = decode_hex("path", "address", request.match_info["address"])
    batch_id = required_batch_id(request)
    options = _upload_options(request)
    history = _history(request)
    if history is None:
        raise ApiError(400, "invalid header params", [{"field": ACT_HISTORY_HEADER.lower(), "error": "want required:"}])
    doc = await _body(request)
    add_raw, revoke_raw = _field_list(doc, "add"), _field_list(doc, "revoke")
    try:
        add = _parse_keys(add_raw)
    except _BadKeys:
        raise ApiError(400, "invalid add list") from None
    try:
        revoke = _parse_keys(revoke_raw)
    except _BadKeys:
        raise ApiError(400, "invalid revoke list") from None
    gl_ref, history_ref = await _update(request, st, batch_id, options, address, history, add, revoke)
    return json_response({"ref": gl_ref.hex(), "historyref": history_ref.hex()})


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    for p in prefixes:
        app.router.add_post(p + "/grantee", post_grantee)
        app.router.add_get(p + "/grantee/{address}", get_grantee, allow_head=False)
        app.router.add_patch(p + "/grantee/{address}", patch_grantee)
