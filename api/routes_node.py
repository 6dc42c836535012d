"""Node identity and the chain-facing reads: ``/addresses``, ``/node``, ``/topology``, ``/stake``,
``/stake/withdrawable``, ``/wallet``, ``/redistributionstate``.

Field names and JSON types are the reference node's (``pkg/api/p2p.go``,
``node.go``, ``topology.go``, ``staking.go``, ``wallet.go``,
``redistribution.go``), which bee-js checks strictly. The node key
(``api.nodekey``) gives ``ethereum`` (0x-prefixed lowercase hex, as Go's
``common.Address`` writes it) and ``publicKey`` (compressed, hex);
``pssPublicKey`` is the same key (the reference keeps a second key for PSS,
which this daemon does not speak). The daemon joins no network and holds no
funds, so:

- ``underlay`` is ``[]``; ``/topology`` has no peers, its ``depth`` is the
  storage radius;
- ``/stake`` and ``/stake/withdrawable`` are ``"0"``;
- ``/wallet`` is zero, except in ``--dev`` mode, where ``bzzBalance`` is a
  large dev balance (``DEV_BALANCE``) so that clients that check funds before
  buying a batch (swarm-cli) go on to ``POST /stamps``; ``chainID`` is 0 and
  no chequebook exists (the zero address);
- ``/redistributionstate`` reports a node that plays no rounds;
- the chain writes answer as the reference node answers them with no chain
  backend, in ``--dev`` mode too (nothing is staked or sent): ``POST
  /stake/{amount}``, ``DELETE /stake/withdrawable`` and ``DELETE /stake``
  are its 500 "cannot stake" / "cannot withdraw stake" / "cannot migrate
  stake" (its staking handlers' answer when the contract call fails), with
  the reason added; ``/wallet/withdraw/{coin}`` is its 403 "Chain is
  disabled" for every method (the reference checks before the method). A
  bad amount is a 400 first, as there.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from aiohttp import web

from chunkstore.swarm.constants import MAX_PO

from .errors import ApiError, ParamError, json_response
from .params import check_gas_headers
from .routes_stamps import CHAIN_DISABLED, DEV_BALANCE
from .sampling import BLOCKS_PER_ROUND
from .state import state_of

ZERO_ETH_ADDRESS = "0x" + "00" * 20
NN_LOW_WATERMARK = 2  # the reference's kademlia default


def eth_hex(address: bytes) -> str:
    return "0x" + address.hex()


async def addresses(request: web.Request) -> web.Response:
    st = state_of(request)
    public = st.signer.public_key
    return json_response(
        {
            "overlay": st.overlay.hex(),
            "underlay": [],
            "ethereum": eth_hex(st.signer.address),
            "chain_address": eth_hex(st.signer.address),
            "publicKey": public.hex(),
            "pssPublicKey": public.hex(),
        }
    )


async def node_info(request: web.Request) -> web.Response:
    return json_response({"beeMode": "full", "chequebookEnabled": False, "swapEnabled": False})


def _empty_bin() -> dict[str, Any]:
    return {"population": 0, "connected": 0, "disconnectedPeers": None, "connectedPeers": None}


async def topology(request: web.Request) -> web.Response:
    st = state_of(request)
    radius = await st.run(lambda: st.store.reserve.status().radius)
    now = dt.datetime.now(dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    return json_response(
        {
            "baseAddr": st.overlay.hex(),
            "population": 0,
            "connected": 0,
            "timestamp": now,
            "nnLowWatermark": NN_LOW_WATERMARK,
            "depth": radius,
            "reachability": "Unknown",
            "networkAvailability": "Unknown",
            "bins": {f"bin_{i}": _empty_bin() for i in range(MAX_PO + 1)},
            "lightNodes": _empty_bin(),
        }
    )


async def stake(request: web.Request) -> web.Response:
    check_gas_headers(request.headers)  # the reference's gasConfigMiddleware wraps every stake route
    return json_response({"stakedAmount": "0"})


async def withdrawable_stake(request: web.Request) -> web.Response:
    check_gas_headers(request.headers)
    return json_response({"withdrawableAmount": "0"})


NO_CHAIN_REASON = "no chain backend: this node joins no blockchain"
# Every method but OPTIONS, so that a browser's preflight is answered as for any route (and the 403 then read).
_GATED_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


async def deposit_stake(request: web.Request) -> web.Response:
    check_gas_headers(request.headers)
    value = request.match_info["amount"]
    if value == "withdrawable":  # the reference routes /stake/withdrawable first: GET and DELETE only
        raise ApiError(405, "Method Not Allowed")
    digits = value[1:] if value[:1] in ("+", "-") else value
    if not digits.isascii() or not digits.isdigit():  # the reference reads a big.Int in base 10
        raise ParamError("path", "amount", value, "invalid syntax")
    raise ApiError(500, f"cannot stake: {NO_CHAIN_REASON}")


async def withdraw_stake(request: web.Request) -> web.Response:
    check_gas_headers(request.headers)
    raise ApiError(500, f"cannot withdraw stake: {NO_CHAIN_REASON}")


async def migrate_stake(request: web.Request) -> web.Response:
    check_gas_headers(request.headers)
    raise ApiError(500, f"cannot migrate stake: {NO_CHAIN_REASON}")


async def wallet_withdraw(request: web.Request) -> web.Response:
    raise ApiError(403, CHAIN_DISABLED)


async def wallet(request: web.Request) -> web.Response:
    st = state_of(request)
    return json_response(
        {
            "bzzBalance": str(DEV_BALANCE if st.config.dev else 0),
            "nativeTokenBalance": str(DEV_BALANCE if st.config.dev else 0),
            "chainID": 0,
            "chequebookContractAddress": ZERO_ETH_ADDRESS,
            "walletAddress": eth_hex(st.signer.address),
        }
    )


BLOCKS_PER_PHASE = BLOCKS_PER_ROUND // 4


def redistribution_phase(block: int) -> tuple[int, str]:
    """(round, phase name) of ``block`` as the reference's agent names them; clients check the name."""
    into = block % BLOCKS_PER_ROUND
    phase = "commit" if into < BLOCKS_PER_PHASE else "reveal" if into < 2 * BLOCKS_PER_PHASE else "claim"
    return block // BLOCKS_PER_ROUND, phase


async def redistribution_state(request: web.Request) -> web.Response:
    st = state_of(request)
    chain = await st.run(lambda: st.store.reserve.chainstate)
    recent = st.metrics.recent_samples.runs()
    last = recent[-1].duration if recent else 0.0
    # Without a chain state the block is 0: round 0's commit phase, also the reference's zero value.
    round_number, phase = redistribution_phase(0 if chain is None else chain.block)
    return json_response(
        {
            "minimumGasFunds": "0",
            "hasSufficientFunds": False,
            "isFrozen": False,
            "isFullySynced": True,
            "phase": phase,
            "round": round_number,
            "lastWonRound": 0,
            "lastPlayedRound": 0,
            "lastFrozenRound": 0,
            "lastSelectedRound": 0,
            "lastSampleDurationSeconds": last,
            "block": 0 if chain is None else chain.block,
            "reward": "0",
            "fees": "0",
            "isHealthy": True,
        }
    )


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    for p in prefixes:
        app.router.add_get(p + "/addresses", addresses, allow_head=False)
        app.router.add_get(p + "/node", node_info, allow_head=False)
        app.router.add_get(p + "/topology", topology, allow_head=False)
        app.router.add_get(p + "/stake", stake, allow_head=False)
        app.router.add_get(p + "/stake/withdrawable", withdrawable_stake, allow_head=False)
        app.router.add_delete(p + "/stake/withdrawable", withdraw_stake)
        app.router.add_delete(p + "/stake", migrate_stake)
        app.router.add_post(p + "/stake/{amount}", deposit_stake)
        for method in _GATED_METHODS:
            app.router.add_route(method, p + "/wallet/withdraw/{coin}", wallet_withdraw)
        app.router.add_get(p + "/wallet", wallet, allow_head=False)
        app.router.add_get(p + "/redistributionstate", redistribution_state, allow_head=False)
