"""Chain state: ``GET /chainstate`` and the operator's ``POST /chainstate``.

``GET`` answers the reference node's shape (``pkg/api/postage.go``,
``chainStateResponse``): ``{"chainTip", "block", "totalAmount",
"currentPrice"}``, the two amounts as decimal strings. Before any chain state
is set it answers zeros, as the reference does before it has synced.
``chainTip`` is the tip the operator gave, else ``block`` (this daemon has no
chain backend to ask).

The reference node reads the chain state from the postage contract; this
daemon follows no chain, so an operator (admin rights, see ``api.auth``)
posts it in the same JSON shape (``chainTip`` optional; amounts as decimal
strings or JSON integers), or the daemon loads it from ``--chainstate FILE``
at start. Once set, batches whose value is at most ``totalAmount`` expire:
their chunks are evicted in the background, and ``batchTTL`` in ``/batches``
counts down at ``currentPrice`` per block.
"""

from __future__ import annotations

from aiohttp import web

from chunkstore.reserve import EMPTY_CHAINSTATE, ChainState, ReserveStore, parse_chainstate
from chunkstore.swarm.errors import SwarmError
from chunkstore.swarm.jsontext import parse_json

from .auth import require_admin
from .errors import ApiError, json_response
from .state import state_of


def current(store: ReserveStore) -> ChainState | None:
    """The store's chain state, or None (never set)."""
    return store.reserve.chainstate


async def get_chainstate(request: web.Request) -> web.Response:
    st = state_of(request)
    state = await st.run(current, st.store)
    return json_response((state or EMPTY_CHAINSTATE).to_json())


async def post_chainstate(request: web.Request) -> web.Response:
    st = state_of(request)
    require_admin(request, st.config.admin_token)
    raw = await request.read()
    try:
        body = parse_json(raw)
    except ValueError as exc:
        raise ApiError(400, f"invalid request body: not JSON ({exc})") from None
    try:
        state = parse_chainstate(body)
    except SwarmError as exc:
        raise ApiError(400, f"invalid chain state: {exc}") from None
    await st.run(st.store.reserve.set_chainstate, state)
    return json_response(state.to_json())


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    for p in prefixes:
        app.router.add_get(p + "/chainstate", get_chainstate, allow_head=False)
        app.router.add_post(p + "/chainstate", post_chainstate)
