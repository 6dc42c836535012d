"""The daemon's middlewares: access log and timing, CORS, hostile header bytes, and errors as JSON.

In the order make_app lists them (outermost first): ``access_middleware``
times and logs every request; ``cors_middleware`` adds CORS headers for
allowed origins; ``clean_path_middleware`` redirects a path with ``.``, ``..``
or repeated slashes to its clean form, as the reference's router does;
``error_middleware`` turns every failure into the reference node's JSON error
shape (a store write that could not be committed as 507 or
500, counted by reason); ``header_middleware`` refuses hostile bytes in a
header the daemon reads before any handler runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from urllib.parse import quote

import lmdb
from aiohttp import web

from chunkstore.store.errors import StoreWriteFailed
from chunkstore.swarm.bzz.paths import go_clean
from chunkstore.swarm.errors import SwarmError

from .errors import ApiError, Handler, error_response, status_for, status_text, swarm_error_response
from .params import check_headers, header_ok
from .state import STATE

log = logging.getLogger(__name__)
access_log = logging.getLogger(f"{__name__}.access")  # one line per request, apart so it can be silenced alone

# Probes and scrapes are logged at debug level only, as the reference node suppresses them.
QUIET_PATHS = frozenset({"/health", "/readiness", "/metrics"})


def _route_name(request: web.Request) -> str:
    info = request.match_info
    route = getattr(info, "route", None)
    resource = getattr(route, "resource", None)
    if resource is None:
        return "unmatched"
    canonical = resource.canonical
    return canonical.removeprefix("/v1") or "/"


CLIENT_CLOSED = 499  # nginx's "client closed request": what the access log and metrics record for a cut-off request


@web.middleware
async def access_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Time every request into the metrics and write one structured access-log line."""
    st = request.app[STATE]
    t0 = time.perf_counter()
    status = 500
    st.request_started()
    try:
        resp = await handler(request)
        status = resp.status
        if st.draining:
            resp.force_close()  # no further requests on this connection while shutting down
        return resp
    except web.HTTPException as exc:
        status = exc.status
        raise
    except asyncio.CancelledError:
        # Cut off (the client went away, or shutdown's drain timeout ran out): no answer was sent,
        # and counting it as a 500 would show the daemon failing where it did not.
        status = CLIENT_CLOSED
        raise
    finally:
        st.request_finished()
        elapsed = time.perf_counter() - t0
        route = _route_name(request)
        st.metrics.observe_http(request.method, route, status, elapsed)
        level = logging.DEBUG if request.path in QUIET_PATHS else logging.INFO
        if access_log.isEnabledFor(level):
            access_log.log(
                level,
                "api access",
                extra={
                    "fields": {
                        "method": request.method,
                        "path": request.path,
                        "status": status,
                        "duration_ms": round(elapsed * 1000, 3),
                        "remote": request.remote,
                    }
                },
            )


CORS_ALLOWED_HEADERS = ", ".join(
    [
        "User-Agent", "Accept", "X-Requested-With", "Access-Control-Request-Headers", "Access-Control-Request-Method",
        "Accept-Ranges", "Content-Encoding", "Authorization", "Accept-Encoding", "Content-Type", "Content-Disposition",
        "Range", "Origin", "Swarm-Tag", "Swarm-Pin", "Swarm-Encrypt", "Swarm-Index-Document", "Swarm-Error-Document",
        "Swarm-Collection", "Swarm-Postage-Batch-Id", "Swarm-Postage-Stamp", "Swarm-Deferred-Upload",
        "Swarm-Redundancy-Level", "Swarm-Redundancy-Strategy", "Swarm-Redundancy-Fallback-Mode",
        "Swarm-Chunk-Retrieval-Timeout", "Swarm-Lookahead-Buffer-Size", "Swarm-Feed-Index", "Swarm-Feed-Index-Next",
        "Swarm-Soc-Signature", "Swarm-Only-Root-Chunk", "Gas-Price", "Gas-Limit", "Immutable", "Swarm-Act",
        "Swarm-Act-Timestamp", "Swarm-Act-Publisher", "Swarm-Act-History-Address",
    ]
)


def origin_allowed(request: web.Request, allowed: tuple[str, ...]) -> bool:
    """The reference node's rule: the request's own host, a listed origin, or ``*``."""
    origin = request.headers.get("Origin")
    if origin is None:
        return True
    own = f"{request.scheme}://{request.host}"
    return any(v == "*" or v.lower() == origin.lower() for v in (*allowed, own))


def bee_allow(allow: str) -> str:
    """A route's methods as the reference lists them (``jsonhttp.HandleMethods``): sorted, joined with
    ", " (aiohttp writes "GET,HEAD")."""
    return ", ".join(sorted({m.strip() for m in allow.split(",") if m.strip()}))


@web.middleware
async def cors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """``OPTIONS`` answered 204 with ``Allow`` as the reference does; the CORS headers themselves are
    added by ``cors_on_prepare``, as every answer's headers go out."""
    resp = await handler(request)
    if request.method == "OPTIONS" and resp.status == 405:
        resp = web.Response(status=204, headers={"Allow": bee_allow(resp.headers.get("Allow", ""))})
    return resp


async def cors_on_prepare(request: web.Request, resp: web.StreamResponse) -> None:
    """CORS headers for allowed origins, on every answer: also a streamed one (a download), whose headers
    are sent by the handler before any middleware sees the response again. The reference's corsHandler
    sets them before its handlers write, so every answer of its has them.

    An answer that names the route's methods (an ``OPTIONS`` preflight, a 405) names them, on a CORS
    request, in ``Access-Control-Allow-Methods`` instead of ``Allow``, as the reference's
    ``jsonhttp.HandleMethods`` does: the generic list lacks ``PATCH``, which a browser would then refuse
    to send (``PATCH /tags/{id}``, ``/stamps/topup``)."""
    origin = request.headers.get("Origin")
    # an origin with hostile bytes was answered 400 by header_middleware: never echo it back
    if origin and header_ok(origin) and origin_allowed(request, request.app[STATE].config.cors_allowed_origins):
        route_methods = resp.headers.pop("Allow", None)
        resp.headers["Access-Control-Allow-Credentials"] = "true"
        resp.headers["Access-Control-Allow-Origin"] = origin
        resp.headers["Access-Control-Allow-Headers"] = CORS_ALLOWED_HEADERS
        resp.headers["Access-Control-Allow-Methods"] = (bee_allow(route_methods) if route_methods
                                                        else "GET, HEAD, OPTIONS, POST, PUT, DELETE")
        resp.headers["Access-Control-Max-Age"] = "3600"


def clean_path(path: str) -> str:
    """gorilla/mux's ``cleanPath``: Go's ``path.Clean`` of the (decoded) path, its trailing slash kept."""
    cleaned = go_clean(path if path.startswith("/") else "/" + path)
    return cleaned + "/" if path.endswith("/") and cleaned != "/" else cleaned


def raw_query(request: web.Request) -> str:
    """"?" and the query exactly as the client sent it ("" for none), as Go's ``URL.String`` writes
    ``RawQuery`` back; yarl's ``raw_query_string`` is already normalised (``%2F`` turned into "/")."""
    _, mark, query = request.raw_path.partition("?")
    return mark + query if query else ""


# What Go's URL.EscapedPath leaves unescaped in a path besides letters, digits and "-._~".
_PATH_SAFE = "$&+,/:;=@"


@web.middleware
async def clean_path_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A 301 to the clean path (query kept) for a path with ``.``/``..`` segments or repeated slashes.

    The reference's router (gorilla/mux, not told to skip cleaning) answers so before any route is
    matched: ``/bzz/{ref}/a//b.txt`` and ``/bzz/{ref}/x/../b.txt`` lead to ``/bzz/{ref}/a/b.txt`` and
    ``/bzz/{ref}/b.txt``, ``//health`` to ``/health``. It cleans the decoded path, so ``%2F`` and
    ``%2E`` count as ``/`` and ``.``.
    """
    path = request.path
    cleaned = clean_path(path)
    if cleaned == path:
        return await handler(request)
    return web.Response(status=301, headers={"Location": quote(cleaned, safe=_PATH_SAFE) + raw_query(request)})


@web.middleware
async def header_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Hostile bytes in a header the daemon reads: a 400 naming it, before any handler runs."""
    check_headers(request.headers)
    return await handler(request)


def write_refused(request: web.Request, exc: StoreWriteFailed) -> ApiError:
    """The answer to a write the store could not commit (507 for lack of space), counted by reason."""
    state = request.app.get(STATE)
    if state is not None:
        state.metrics.writes_refused.labels(exc.reason).inc()
    status = status_for(exc)
    prefix = "no space left for the store" if status == 507 else "store write failed"
    return ApiError(status, f"{prefix}: {exc}")


# Passed through the middleware unchanged: they carry their own body.
_PASS_THROUGH_STATUSES = range(200, 400)


# LMDB's own words for a data file whose pages do not hold what its B-trees say.
_DAMAGED = (lmdb.CorruptedError, lmdb.PageNotFoundError, lmdb.BadValsizeError, lmdb.InvalidError)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn every failure into a JSON error; never let a traceback reach the client."""
    try:
        return await handler(request)
    except ApiError as exc:
        return exc.response()
    except web.HTTPException as exc:
        if exc.status in _PASS_THROUGH_STATUSES:
            raise
        headers = {k: bee_allow(v) if k.lower() == "allow" else v for k, v in exc.headers.items()
                   if k.lower() in ("allow", "retry-after", "www-authenticate")}
        message = status_text(exc.status)
        detail = (exc.text or "").strip()
        if detail and not detail.startswith(f"{exc.status}:"):
            message = f"{message}: {detail}"
        return error_response(exc.status, message, headers=headers)
    except StoreWriteFailed as exc:
        return write_refused(request, exc).response()
    except SwarmError as exc:
        return swarm_error_response(exc)
    except ConnectionResetError as exc:
        # The client went away mid-request: no one reads an answer; counted as a closed request, not a
        # timeout (an operator sweep saw hang-ups counted as 408s).
        log.info("request aborted", extra={"fields": {"path": request.path, "error": repr(exc)}})
        return error_response(CLIENT_CLOSED, "request aborted: the client closed the connection")
    except TimeoutError as exc:
        log.info("request timed out", extra={"fields": {"path": request.path, "error": repr(exc)}})
        return error_response(408, "request aborted: a read timed out")
    except _DAMAGED as exc:
        # A damaged page of a data file, met while serving: say so, and what to run (the store's own
        # integrity check), rather than a bare internal error.
        log.error("store damaged", extra={"fields": {"method": request.method, "path": request.path, "error": str(exc)}})
        return error_response(500, f"store damaged: {type(exc).__name__}: {exc}; run `chunkstore verify` on its data dir")
    except Exception:
        log.exception("unhandled error", extra={"fields": {"method": request.method, "path": request.path}})
        return error_response(500, "internal error")
