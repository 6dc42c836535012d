"""``GET /chunkstore/status``: this daemon's own state, beyond what Bee's endpoints can carry.

Not a Bee endpoint, so the JavaScript client's strict response shapes are
untouched. The body is one JSON object built by :func:`daemon_status`;
fields are added there (a status page reads it):

- ``hashBackend``: ``{"name": "numba"|"pysha3", "accelerated": bool,
  "reason": str|null}``. ``reason`` says why the ~9x slower pysha3 reference
  is in use: forced by ``CHUNKSTORE_HASH_BACKEND``, the accelerated backend
  failing at start-up, or a wrong answer caught while sampling.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from chunkstore import hashing

from .errors import json_response
from .state import AppState, state_of

log = logging.getLogger("chunkstore.api")


def daemon_status(state: AppState) -> dict[str, Any]:
    """The ``/chunkstore/status`` object (a plain dict; extend it here)."""
    return {"hashBackend": hashing.backend_info().as_dict()}


def log_hash_backend() -> None:
    """Say at start-up which hashing backend serves, loudly when it is the slow reference."""
    info = hashing.backend_info()
    fields = {"fields": {"hash_backend": info.name, "reason": info.reason}}
    if info.accelerated:
        log.info("hashing backend", extra=fields)
    else:
        log.warning("hashing backend is the pysha3 reference, about 9x slower than numba", extra=fields)


async def chunkstore_status(request: web.Request) -> web.Response:
    return json_response(daemon_status(state_of(request)))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/chunkstore/status", chunkstore_status, allow_head=False)
