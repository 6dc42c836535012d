"""The reference node's technical-debug endpoints that make sense without peers:
``GET /debugstore`` (``api.debugstore``), ``GET /loggers[/{exp}]`` and ``PUT /loggers/{exp}/{verbosity}``
(``api.loggers``). Mounted at the root only, as the reference mounts them.

Changing a logger's verbosity changes the daemon, so ``PUT`` is allowed
where batch changes are (loopback, or the admin token: ``api.auth``).
"""

from __future__ import annotations

from aiohttp import web

from .auth import require_admin
from .debugstore import debug_info
from .errors import ApiError, json_response, status_response
from .loggers import VERBOSITY_LEVELS, LoggerExpressionError, decode_expression, list_loggers, set_verbosity
from .state import state_of


async def debugstore(request: web.Request) -> web.Response:
    st = state_of(request)
    return json_response(await st.run(debug_info, st.store))


def _exp_error(message: str) -> ApiError:
    return ApiError(400, "invalid path params", [{"field": "exp", "error": message}])


def _expression(request: web.Request) -> str:
    try:
        return decode_expression(request.match_info["exp"])
    except LoggerExpressionError as exc:
        raise _exp_error(str(exc)) from None


async def get_loggers(request: web.Request) -> web.Response:
    exp = _expression(request) if "exp" in request.match_info else None
    try:
        return json_response(list_loggers(exp))
    except LoggerExpressionError as exc:
        raise _exp_error(str(exc)) from None


async def put_logger_verbosity(request: web.Request) -> web.Response:
    st = state_of(request)
    require_admin(request, st.config.admin_token)
    exp = _expression(request)
    verbosity = request.match_info["verbosity"]
    if not exp:
        raise _exp_error("required")
    if verbosity not in VERBOSITY_LEVELS:
        raise ApiError(
            400,
            "invalid path params",
            [{"field": "verbosity", "error": f"want oneof:{' '.join(VERBOSITY_LEVELS)}"}],
        )
    try:
        set_verbosity(exp, verbosity)
    except LoggerExpressionError as exc:
        raise _exp_error(str(exc)) from None
    return status_response()


def add_routes(app: web.Application) -> None:
    app.router.add_get("/debugstore", debugstore, allow_head=False)
    app.router.add_get("/loggers", get_loggers, allow_head=False)
    app.router.add_get("/loggers/{exp}", get_loggers, allow_head=False)
    app.router.add_put("/loggers/{exp}/{verbosity}", put_logger_verbosity)
