"""The peer, accounting, settlement and transaction routes of a node with no peers, no swap and no chain.

The daemon joins no network (``/topology`` has no peers), so these answer as
the reference node's handlers answer with nothing to report
(``pkg/api/peer.go``, ``balances.go``, ``settlements.go``, ``pingpong.go``,
``welcome_message.go``, and ``router.go`` for what is gated): clients that
read them (bee-js' ``getPeers``, ``getBlocklist``, ``getAllBalances``,
``getPastDueConsumptionBalances``, ``getSettlements``, swarm-cli's status
views) get Bee's empty shapes, not a 404 that reads as a missing feature.

- ``GET /peers`` and ``GET /blocklist``: ``{"peers": []}``; a peer named by
  address (``DELETE /peers/{address}``, ``POST /pingpong/{address}``) is 404
  ``peer not found``, and ``/balances/{peer}``, ``/consumed/{peer}`` 404 ``No
  balance for peer``, after the address is checked as hex (400 otherwise);
- ``GET /balances``, ``GET /consumed``: ``{"balances": []}``;
  ``GET /timesettlements``: zero totals, no settlements; ``GET /accounting``:
  ``{"peerData": {}}``; ``GET /status/peers``: ``{"snapshots": null}`` (no
  peer to ask for its status snapshot);
- ``/settlements``, ``/chequebook/cheque``, ``/chequebook/cashout``: 403 ``Swap
  is disabled``; ``/chequebook/balance``, ``address``, ``deposit``,
  ``withdraw``: 403 ``Chequebook is disabled`` (``/node`` says both are off),
  whatever the method, as the reference checks before the method (but a
  browser's CORS preflight is answered as for any other route);
- ``GET /transactions``: ``{"pendingTransactions": []}`` (the node sends none:
  its batches are bought in ``--dev`` mode or registered); a transaction
  named by hash is 404 ``unknown transaction``;
- ``/welcome-message``: GET answers the message, POST ``{"welcomeMessage"}``
  sets it (at most 140 bytes, the reference's handshake limit; a longer one
  is a 400 here, where the reference answers 500), the body read as Go's
  JSON decoder reads it (``api.params.go_json_string_field``). It is kept in memory, as
  the reference keeps a message set through the API.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .errors import ApiError, json_response, status_response
from .params import decode_hex, go_json_string_field
from .routes_chunks import read_body
from .state import state_of

WELCOME_BODY_LIMIT = 512  # the reference's request size limit for POST /welcome-message
WELCOME_MESSAGE_LIMIT = 140  # bytes, the reference's handshake limit
_SWAP_OFF = "Swap is disabled. This endpoint is unavailable."
_CHEQUEBOOK_OFF = "Chequebook is disabled. This endpoint is unavailable."
# Every method but OPTIONS, so that a browser's preflight is answered as for any route (and the 403 then read).
_GATED_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
_NO_SETTLEMENTS = {"totalReceived": "0", "totalSent": "0", "settlements": []}


def _fixed(body: dict[str, Any]) -> Any:
    async def handler(request: web.Request) -> web.Response:  # noqa: ARG001
        return json_response(body)

    return handler


def _refused(status: int, message: str) -> Any:
    async def handler(request: web.Request) -> web.Response:  # noqa: ARG001
        raise ApiError(status, message)

    return handler


def _unknown_peer(field: str, message: str) -> Any:
    async def handler(request: web.Request) -> web.Response:
        decode_hex("path", field, request.match_info[field])
        raise ApiError(404, message)

    return handler


async def _unknown_transaction(request: web.Request) -> web.Response:
    decode_hex("path", "hash", request.match_info["hash"].removeprefix("0x"), size=32)
    raise ApiError(404, "unknown transaction")


async def get_welcome_message(request: web.Request) -> web.Response:
    return json_response({"welcomeMessage": state_of(request).welcome_message})


async def set_welcome_message(request: web.Request) -> web.Response:
    raw = await read_body(request, WELCOME_BODY_LIMIT, "welcome message request too large")
    try:
        message = go_json_string_field(raw, "welcomeMessage")
    except ValueError as exc:
        raise ApiError(400, f"invalid request body: {exc}") from None
    if len(message.encode()) > WELCOME_MESSAGE_LIMIT:
        raise ApiError(400, f"handshake welcome message longer than maximum of {WELCOME_MESSAGE_LIMIT} characters")
    state_of(request).welcome_message = message
    return status_response()


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    no_peers = _fixed({"peers": []})
    no_balances = _fixed({"balances": []})
    for p in prefixes:
        r = app.router
        r.add_get(p + "/peers", no_peers)
        r.add_get(p + "/blocklist", no_peers)
        r.add_delete(p + "/peers/{address}", _unknown_peer("address", "peer not found"))
        r.add_post(p + "/pingpong/{address}", _unknown_peer("address", "peer not found"))
        r.add_get(p + "/balances", no_balances)
        r.add_get(p + "/consumed", no_balances)
        r.add_get(p + "/balances/{peer}", _unknown_peer("peer", "No balance for peer"))
        r.add_get(p + "/consumed/{peer}", _unknown_peer("peer", "No balance for peer"))
        r.add_get(p + "/timesettlements", _fixed(_NO_SETTLEMENTS))
        r.add_get(p + "/accounting", _fixed({"peerData": {}}))
        r.add_get(p + "/status/peers", _fixed({"snapshots": None}))  # Bee's nil slice of snapshots
        r.add_get(p + "/transactions", _fixed({"pendingTransactions": []}))
        for method in ("GET", "POST", "DELETE"):  # detail, resend, cancel
            r.add_route(method, p + "/transactions/{hash}", _unknown_transaction)
        r.add_get(p + "/welcome-message", get_welcome_message)
        r.add_post(p + "/welcome-message", set_welcome_message)
        gated = [(path, _SWAP_OFF) for path in ("/settlements", "/settlements/{peer}", "/chequebook/cheque",
                                                 "/chequebook/cheque/{peer}", "/chequebook/cashout/{peer}")]
        gated += [(path, _CHEQUEBOOK_OFF) for path in ("/chequebook/balance", "/chequebook/address",
                                                       "/chequebook/deposit", "/chequebook/withdraw")]
        for path, message in gated:
            for method in _GATED_METHODS:
                r.add_route(method, p + path, _refused(403, message))
