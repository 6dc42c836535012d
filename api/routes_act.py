"""Access control (ACT) is not served: its grantee routes answer 501 with the reason, as ``Swarm-Act`` uploads do.

The reference node's ``/grantee`` (``POST``) and ``/grantee/{address}``
(``GET``, ``PATCH``) manage the grantee lists of ACT-protected content; a
client (swarm-cli's ``grantee``, bee-js' ``createGrantees``) gets the same
501 here as for an upload with ``Swarm-Act: true``, rather than a 404 that
reads as a wrong address.
"""

from __future__ import annotations

from aiohttp import web

from .errors import ApiError
from .uploads import ACT_UNSUPPORTED


async def not_served(request: web.Request) -> web.Response:  # noqa: ARG001
    raise ApiError(501, ACT_UNSUPPORTED)


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    for p in prefixes:
        app.router.add_post(p + "/grantee", not_served)
        app.router.add_get(p + "/grantee/{address}", not_served)
        app.router.add_patch(p + "/grantee/{address}", not_served)
