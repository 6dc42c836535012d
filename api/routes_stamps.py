"""The node's own batches: ``GET /stamps``, ``/stamps/{id}``, ``/stamps/{id}/buckets``, and dev-mode buying.

A batch is the node's when its owner is the node key's address (``POST
/batches`` without ``owner`` registers one; so does ``POST /stamps`` in dev
mode). Answers follow the reference node (``pkg/api/postage.go``):

- ``GET /stamps``: ``{"stamps": [{batchID, utilization, utilizationRatio,
  usable, label, depth, amount, bucketDepth, blockNumber, immutableFlag,
  exists, batchTTL}]}`` for every live node-owned batch; ``utilization`` is
  the fullest bucket's count (the reference's ``MaxBucketCount``), ``amount``
  the per-chunk amount paid (a decimal string), ``usable`` true while the
  batch is known and not expired (there is no chain to wait for);
- ``GET /stamps/{id}``: the same object, 404 "issuer does not exist" for a
  batch the node does not own;
- ``GET /stamps/{id}/buckets``: ``{depth, bucketDepth, bucketUpperBound,
  buckets: [{bucketID, collisions}]}`` for all ``2^bucketDepth`` buckets.
- ``PATCH /stamps/{id}`` ``{"label"}``: the body is read first, as Go's JSON
  decoder reads it (400 "invalid request body", then "label is required"),
  and only then the batch looked up (404 "issuer does not exist").

**Dev mode** (``chunkstore serve --dev``) stands in for the chain the
reference node buys batches on. Nothing is bought and no chain is involved:

- ``POST /stamps/{amount}/{depth}`` (header ``Immutable``, default true;
  query ``label``) registers a node-owned batch at once: bucket depth 16,
  value = the chain state's total amount + ``amount``, start = its block;
  201 ``{"batchID", "txHash"}`` (a made-up hash). The reference's contract
  rules apply: depth above 16 (400 "invalid depth"), ``amount`` above one
  day of storage at the current price (400 "insufficient amount for 24h
  minimum validity"), the total cost within the dev balance;
- ``PATCH /stamps/topup/{id}/{amount}`` adds ``amount`` per chunk and
  ``PATCH /stamps/dilute/{id}/{depth}`` deepens the batch, halving what is
  left per chunk for each level, as the contract does; both 202;
- ``GET /wallet`` reports ``DEV_BALANCE`` (``api.routes_node``).

Without ``--dev`` the three answer 403 "Chain is disabled. This endpoint is
unavailable." (the reference node's answer with no chain backend since
2.7, ``checkChainAvailability`` in ``pkg/api/router.go``, checked before
anything else), followed by what to do here: register batches with
``POST /batches``, or start with ``--dev``. Buying and changing batches needs admin rights
(``api.auth``), like ``POST /batches``.
"""

from __future__ import annotations

import os
from typing import Any

from aiohttp import web

from chunkstore.reserve import ChainState, ReserveStore, batch_ttl
from chunkstore.store.batchstore import Batch
from chunkstore.store.issuers import IssuerInfo
from chunkstore.swarm.constants import MAX_BATCH_DEPTH, NETWORK_BUCKET_DEPTH
from chunkstore.swarm.digits import decimal_below
from chunkstore.swarm.keccak import keccak256

from .auth import require_admin
from .errors import ApiError, ParamError, json_response, status_response
from .params import check_gas_headers, decode_hex, go_json_string_field, parse_go_bool, parse_uint, request_query
from .routes_chainstate import current
from .state import AppState, state_of

# The chain state --dev sets when none is: bee-js prices a batch at no less than 24000 PLUR per chunk
# and block, so at this price its least accepted amount (one day) is 414,720,001.
DEV_CHAINSTATE = ChainState(block=1, total_amount=0, current_price=24000)
DEV_BALANCE = 10**24  # PLUR in the dev wallet: 10^8 BZZ, never spent
MINIMUM_VALIDITY_BLOCKS = 17280  # one day of 5 s blocks: the contract's least lifetime of a new batch
CHAIN_DISABLED = "Chain is disabled. This endpoint is unavailable."  # the reference's answer with no chain backend
NO_CHAIN = (
    f"{CHAIN_DISABLED} No chain backend: this node buys no batches; register one with POST /batches (without "
    "'owner' for a batch the node stamps), or start the daemon with --dev"
)


def _node_batches(store: ReserveStore, owner: bytes) -> list[tuple[Batch, IssuerInfo | None]]:
    issuers = {i.batch_id: i for i in store.issuers.list()}
    return [(b, issuers.get(b.id)) for b in store.batches.list() if b.owner == owner]


def _node_batch(store: ReserveStore, owner: bytes, batch_id: bytes) -> tuple[Batch, IssuerInfo | None] | None:
    batch = store.batches.find(batch_id)
    if batch is None or batch.owner != owner:
        return None
    return batch, store.issuers.info(batch_id)


def issuer_terms(batch: Batch, issuer: IssuerInfo | None) -> tuple[str, int, int]:
    """(label, amount paid per chunk, block bought at) of a node batch: its issuer's, or for a batch without
    an issuer record the batch's own value and start block and no label."""
    if issuer is None:
        return "", batch.value, batch.start
    return issuer.label, issuer.amount, issuer.block_number


def render_stamp(batch: Batch, issuer: IssuerInfo | None, chain: ChainState | None, block_time: int) -> dict[str, Any]:
    """One ``postageStampResponse`` of the reference node."""
    label, amount, block = issuer_terms(batch, issuer)
    utilization = 0 if issuer is None else issuer.utilization
    bound = 1 << (batch.depth - batch.bucket_depth)
    usable = chain is None or not chain.expired(batch.value)
    return {
        "batchID": batch.id.hex(),
        "utilization": utilization,
        "utilizationRatio": utilization / bound,
        "usable": usable,
        "label": label,
        "depth": batch.depth,
        "amount": str(amount),
        "bucketDepth": batch.bucket_depth,
        "blockNumber": block,
        "immutableFlag": batch.immutable,
        "exists": True,
        "batchTTL": batch_ttl(batch.value, chain, block_time),
    }


def _batch_id(request: web.Request) -> bytes:
    return decode_hex("path", "batch_id", request.match_info["batch_id"], size=32)


async def list_stamps(request: web.Request) -> web.Response:
    st = state_of(request)
    found = await st.run(_node_batches, st.store, st.signer.address)
    chain = await st.run(current, st.store)
    bt = st.config.block_time
    return json_response({"stamps": [render_stamp(b, i, chain, bt) for b, i in found]})


async def _owned(st: AppState, batch_id: bytes) -> tuple[Batch, IssuerInfo | None]:
    found = await st.run(_node_batch, st.store, st.signer.address, batch_id)
    if found is None:
        raise ApiError(404, "issuer does not exist")
    return found


async def get_stamp(request: web.Request) -> web.Response:
    st = state_of(request)
    batch, issuer = await _owned(st, _batch_id(request))
    chain = await st.run(current, st.store)
    return json_response(render_stamp(batch, issuer, chain, st.config.block_time))


async def get_buckets(request: web.Request) -> web.Response:
    st = state_of(request)
    batch, _ = await _owned(st, _batch_id(request))
    counts = await st.run(st.store.issuers.bucket_counts, batch.id, batch.bucket_depth)
    return json_response(
        {
            "depth": batch.depth,
            "bucketDepth": batch.bucket_depth,
            "bucketUpperBound": 1 << (batch.depth - batch.bucket_depth),
            "buckets": [{"bucketID": i, "collisions": c} for i, c in enumerate(counts)],
        }
    )


async def patch_label(request: web.Request) -> web.Response:
    st = state_of(request)
    require_admin(request, st.config.admin_token)
    batch_id = _batch_id(request)
    try:
        label = go_json_string_field(await request.read(), "label")
    except ValueError:
        raise ApiError(400, "invalid request body") from None
    if not label.strip():
        raise ApiError(400, "label is required")
    await _owned(st, batch_id)
    await st.run(_relabel, st, batch_id, label)
    return status_response()  # Bee's jsonhttp.OK(w, nil): {"code": 200, "message": "OK"}


def _relabel(st: AppState, batch_id: bytes, label: str) -> None:
    with st.batch_changes:  # the amount kept is the one of now, not of before the body arrived
        found = _node_batch(st.store, st.signer.address, batch_id)
        if found is None:
            raise ApiError(404, "issuer does not exist")
        batch, issuer = found
        _, amount, block = issuer_terms(batch, issuer)
        st.store.issuers.register(batch.id, label=label, amount=amount, block_number=block)


# ---------------------------------------------------------------- dev mode


def _require_dev(st: AppState) -> None:
    if not st.config.dev:
        raise ApiError(403, NO_CHAIN)


def _amount(request: web.Request, field: str = "amount") -> int:
    value = request.match_info[field]
    digits = value.removeprefix("+")  # a big.Int in base 10, as the reference reads it, takes a "+"
    if not digits or not digits.isascii() or not digits.isdigit():
        raise ParamError("path", field, value, "invalid syntax")
    amount = decimal_below(digits, 256)  # the postage contract's amounts are uint256
    if amount is None:
        raise ParamError("path", field, value, "value out of range")
    return amount


def _depth(request: web.Request) -> int:
    value = request.match_info["depth"]
    depth = parse_uint("path", "depth", value, bits=8)
    return depth


def _tx_hash(*parts: bytes) -> str:
    return "0x" + keccak256(b"chunkstore dev transaction", *parts).hex()


def _create(st: AppState, amount: int, depth: int, immutable: bool, label: str) -> Batch:
    store = st.store
    chain = store.reserve.chainstate or DEV_CHAINSTATE
    minimum = chain.current_price * MINIMUM_VALIDITY_BLOCKS
    if amount <= minimum:
        raise ApiError(
            400,
            f"insufficient amount for 24h minimum validity: amount {amount} per chunk, "
            f"more than {minimum} needed ({MINIMUM_VALIDITY_BLOCKS} blocks at price {chain.current_price})",
        )
    cost = amount << depth
    if cost > DEV_BALANCE:
        raise ApiError(400, f"out of funds: the batch costs {cost} PLUR, the dev wallet holds {DEV_BALANCE}")
    batch_id = keccak256(st.signer.address, os.urandom(32))
    batch = Batch(batch_id, st.signer.address, depth, NETWORK_BUCKET_DEPTH, immutable, chain.total_amount + amount, chain.block)
    store.batches.add(batch, also=lambda txn: store.issuers.register_in(txn, batch_id, label=label, amount=amount,
                                                                         block_number=chain.block))
    return batch


async def create_stamp(request: web.Request) -> web.Response:
    st = state_of(request)
    _require_dev(st)
    require_admin(request, st.config.admin_token)
    check_gas_headers(request.headers)  # the reference's gasConfigMiddleware, after its chain check
    amount = _amount(request)
    depth = _depth(request)
    if depth < 17:
        raise ParamError("path", "depth", str(depth), "must be at least 17")
    if depth > MAX_BATCH_DEPTH:
        raise ApiError(400, "invalid depth")
    raw = request.headers.get("Immutable")
    immutable = True if raw is None or raw == "" else parse_go_bool("header", "Immutable", raw)
    label = request_query(request).get("label", "")
    batch = await st.run(_create, st, amount, depth, immutable, label)
    return json_response({"batchID": batch.id.hex(), "txHash": _tx_hash(batch.id)}, status=201)


def _topup(st: AppState, batch_id: bytes, amount: int) -> None:
    with st.batch_changes:
        _topup_locked(st, batch_id, amount)


def _topup_locked(st: AppState, batch_id: bytes, amount: int) -> None:
    store = st.store
    found = _node_batch(store, st.signer.address, batch_id)
    if found is None:
        raise ApiError(404, "issuer does not exist")
    batch, issuer = found
    if amount << batch.depth > DEV_BALANCE:
        raise ApiError(402, "out of funds")
    label, paid, block = issuer_terms(batch, issuer)
    # One commit for both: the batch's value and the amount paid move together or not at all.
    store.batches.update(Batch(batch.id, batch.owner, batch.depth, batch.bucket_depth, batch.immutable,
                               batch.value + amount, batch.start),
                         also=lambda txn: store.issuers.register_in(txn, batch.id, label=label, amount=paid + amount,
                                                                    block_number=block))


def _dilute(st: AppState, batch_id: bytes, depth: int) -> None:
    with st.batch_changes:
        _dilute_locked(st, batch_id, depth)


def _dilute_locked(st: AppState, batch_id: bytes, depth: int) -> None:
    store = st.store
    found = _node_batch(store, st.signer.address, batch_id)
    if found is None:
        raise ApiError(404, "issuer does not exist")
    batch, _ = found
    if depth <= batch.depth or depth > MAX_BATCH_DEPTH:
        raise ApiError(400, "invalid depth")
    # The contract spreads what is left of the batch over 2^(new - old) times the chunks.
    total = (store.reserve.chainstate or DEV_CHAINSTATE).total_amount
    left = max(0, batch.value - total) >> (depth - batch.depth)
    if left == 0:
        # Nothing left per chunk: the batch would expire on the spot and the reserve evict
        # everything stamped with it. Refused, as an insufficient balance, rather than done.
        raise ApiError(400, f"diluting to depth {depth} leaves the batch no balance per chunk: it would expire; "
                            "top it up first or dilute less")
    store.batches.update(Batch(batch.id, batch.owner, depth, batch.bucket_depth, batch.immutable,
                               total + left, batch.start))


async def topup_stamp(request: web.Request) -> web.Response:
    st = state_of(request)
    _require_dev(st)
    require_admin(request, st.config.admin_token)
    check_gas_headers(request.headers)  # the reference's gasConfigMiddleware, after its chain check
    batch_id = _batch_id(request)
    amount = _amount(request)
    if amount == 0:
        raise ParamError("path", "amount", "0", "must be positive")
    await st.run(_topup, st, batch_id, amount)
    return json_response({"batchID": batch_id.hex(), "txHash": _tx_hash(batch_id, b"topup", str(amount).encode())},
                         status=202)


async def dilute_stamp(request: web.Request) -> web.Response:
    st = state_of(request)
    _require_dev(st)
    require_admin(request, st.config.admin_token)
    check_gas_headers(request.headers)  # the reference's gasConfigMiddleware, after its chain check
    batch_id = _batch_id(request)
    depth = _depth(request)
    await st.run(_dilute, st, batch_id, depth)
    return json_response({"batchID": batch_id.hex(), "txHash": _tx_hash(batch_id, b"dilute", bytes([depth]))},
                         status=202)


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    for p in prefixes:
        app.router.add_get(p + "/stamps", list_stamps, allow_head=False)
        app.router.add_patch(p + "/stamps/topup/{batch_id}/{amount}", topup_stamp)
        app.router.add_patch(p + "/stamps/dilute/{batch_id}/{depth}", dilute_stamp)
        app.router.add_get(p + "/stamps/{batch_id}", get_stamp, allow_head=False)
        app.router.add_patch(p + "/stamps/{batch_id}", patch_label)
        app.router.add_get(p + "/stamps/{batch_id}/buckets", get_buckets, allow_head=False)
        app.router.add_post(p + "/stamps/{amount}/{depth}", create_stamp)
