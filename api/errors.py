"""JSON error answers in the reference node's shape, and the catch-all middleware.

Every answer that is not a success is ``{"code": N, "message": "..."}`` (plus
``"reasons": [{"field", "error"}]`` for bad path, query or header parameters,
as the reference node writes them), with ``Content-Type: application/json;
charset=utf-8``. Library errors (``SwarmError`` subclasses) become 4xx answers
through :func:`status_for`, by their classes (``STATUS_BY_ERROR``); a store
write that could not be committed is 507 (no space: full disk or LMDB map)
or 500 (an I/O error), named, and counted in
``chunkstore_writes_refused_total{reason}`` (api/middleware.py); anything
else is logged with its traceback and answered with a plain 500 JSON body,
as a last resort.

Request values echoed in a message (a bad header, path or query value) are
shown with every byte outside printable ASCII escaped, so hostile bytes
(latin-1, control characters, undecodable UTF-8 that the HTTP parser kept as
surrogates) can neither break the JSON encoding nor reach a log or client raw.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from http import HTTPStatus
from typing import Any, TypeVar

from aiohttp import web

from chunkstore.reserve import InvalidChainState, InvalidReserveOption, OutOfRadius
from chunkstore.store.errors import (
    BatchExists,
    ChunkNotFound,
    InvalidBatch,
    PinAborted,
    StampConflict,
    StoreFull,
    StoreWriteFailed,
    UnknownBatch,
    UnknownPin,
    UnknownTag,
)
from chunkstore.swarm.errors import BucketFull, InvalidChunk, InvalidProof, InvalidSignature, InvalidStamp, SwarmError
from sampler import InsufficientSample

log = logging.getLogger(__name__)

JSON_CONTENT_TYPE = "application/json; charset=utf-8"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
V = TypeVar("V")

# HTTP status of each library error class. An error takes the status of the
# nearest class in its MRO listed here (UnknownBatch is an InvalidStamp, yet
# 404), and 400 when none is: every other refusal is the request's fault.
STATUS_BY_ERROR: dict[type[BaseException], int] = {
    ChunkNotFound: 404,
    UnknownBatch: 404,
    UnknownTag: 404,
    UnknownPin: 404,
    PinAborted: 409,  # the pin being built was rolled back by another writer's open: try again
    StampConflict: 409,
    BatchExists: 409,
    InsufficientSample: 422,
    OutOfRadius: 422,
    BucketFull: 402,
    InvalidChainState: 400,
    InvalidReserveOption: 400,
    InvalidSignature: 400,
    InvalidStamp: 400,
    InvalidChunk: 400,
    InvalidProof: 400,
    InvalidBatch: 400,
    StoreFull: 507,  # no space: a full disk or LMDB map
    StoreWriteFailed: 500,  # an I/O error: the node's trouble
}


def nearest(table: Mapping[type[BaseException], V], exc: BaseException) -> V | None:
    """The value of the nearest class of ``exc`` (its own, then its bases in MRO order) in ``table``."""
    for cls in type(exc).__mro__:
        if cls in table:
            return table[cls]
    return None


def status_text(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def status_for(exc: BaseException) -> int:
    """HTTP status for a library error: the nearest listed class in its MRO, else 400."""
    status = nearest(STATUS_BY_ERROR, exc)
    return 400 if status is None else status


def json_body(payload: Any) -> bytes:
    """JSON the way the reference node writes it: compact keys, no HTML escaping, a newline."""
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate that escaped ``printable``: still answer, escaped
        log.warning("unencodable text in a JSON answer", extra={"fields": {"text": printable(text[:200])}})
        return text.encode("utf-8", "backslashreplace")


def printable(value: str) -> str:
    """``value`` with everything outside printable ASCII escaped (``\\xNN`` for bytes the parser could not decode)."""
    if value.isascii() and value.isprintable():
        return value
    out = []
    for ch in value:
        o = ord(ch)
        if 0x20 <= o < 0x7F:
            out.append(ch)
        elif 0xDC80 <= o <= 0xDCFF:  # a raw byte carried through decoding by surrogateescape
            out.append(f"\\x{o - 0xDC00:02x}")
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    return "".join(out)


def json_response(payload: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    resp = web.Response(status=status, body=json_body(payload), headers=headers)
    resp.headers["Content-Type"] = JSON_CONTENT_TYPE
    return resp


def error_payload(status: int, message: str | None = None, reasons: Iterable[Mapping[str, str]] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": status, "message": message or status_text(status)}
    reasons = list(reasons or ())
    if reasons:
        body["reasons"] = [{"field": r["field"], "error": r["error"]} for r in reasons]
    return body


def status_response(status: int = 200) -> web.Response:
    """The reference's answer without a payload (``jsonhttp.OK(w, nil)``): ``{"code", "message"}``, the status text."""
    return json_response(error_payload(status), status=status)


def error_response(
    status: int,
    message: str | None = None,
    reasons: Iterable[Mapping[str, str]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    return json_response(error_payload(status, message, reasons), status=status, headers=headers)


def method_not_allowed(*allowed: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """A handler answering 405 with ``Allow: allowed``: for the other methods of a literal route that a
    parameter route beside it would otherwise take (``/pins/check`` before ``/pins/{reference}``), as
    the reference's router matches the literal path first whatever the method."""

    async def handler(request: web.Request) -> web.StreamResponse:
        raise web.HTTPMethodNotAllowed(request.method, allowed)

    return handler


class ApiError(Exception):
    """Raised by handlers to answer with a JSON error; the middleware renders it."""

    def __init__(
        self,
        status: int,
        message: str | None = None,
        reasons: Iterable[Mapping[str, str]] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.status = status
        self.message = message or status_text(status)
        self.reasons = list(reasons or ())
        self.headers = dict(headers or {})
        super().__init__(self.message)

    def response(self) -> web.Response:
        return error_response(self.status, self.message, self.reasons, self.headers)


class SampleBusy(Exception):
    """Another reserve sample is running and the wait for it ran out (503 with ``Retry-After``)."""

    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after
        super().__init__(f"another reserve sample is running; retry in {retry_after} s")


class ParamError(ApiError):
    """A bad path, query or header parameter: 400 with the reference node's reasons list.

    A reason's ``error`` is the cause alone (``invalid syntax``, ``want len:32``), as the reference
    answers it (``pkg/api/api.go``: ``perr.Cause.Error()``); the refused value goes only to the
    debug log (its ``parseError.Error()`` form, `` `field=value`: cause ``), escaped and cut short.
    """

    def __init__(self, where: str, field: str, value: str, problem: str) -> None:
        shown = printable(value if len(value) <= 80 else value[:77]) + ("..." if len(value) > 80 else "")
        log.debug("invalid %s params: `%s=%s`: %s", where, field, shown, problem)
        super().__init__(400, f"invalid {where} params", [{"field": field, "error": problem}])


def swarm_error_response(exc: SwarmError, prefix: str | None = None) -> web.Response:
    status = status_for(exc)
    message = str(exc) or type(exc).__name__
    if prefix:
        message = f"{prefix}: {message}"
    return error_response(status, message)
