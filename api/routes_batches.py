"""Postage batches: ``GET /batches``, ``GET /batches/{id}``, ``POST /batches``, ``DELETE /batches/{id}``.

The two reads answer in the reference node's shape (``pkg/api/postage.go``):
``{"batchID", "value" (decimal string), "start", "owner", "depth",
"bucketDepth", "immutable", "batchTTL"}``. ``batchTTL`` is the reference's
estimate from the chain state (``POST /chainstate``):
``(value - totalAmount) * blockTime / currentPrice`` seconds, and -1, the
reference node's answer when it knows no price, until a chain state with a
non-zero price is set.

The reference node learns batches from the chain; this daemon has no chain, so
an operator registers them: ``POST /batches`` with the same JSON fields (no
``batchTTL``) creates a batch (201) or replaces a known one (200), and
``DELETE /batches/{id}`` forgets one. Both need admin rights (see ``api.auth``).

Without ``owner`` the batch is the node's: its owner is the node key's
address, the daemon stamps uploads that name it (``Swarm-Postage-Batch-Id``)
and ``GET /stamps`` lists it; an optional ``label`` names it there.
"""

from __future__ import annotations

from typing import Any

import lmdb
from aiohttp import web

from chunkstore.reserve import ChainState, ReserveStore, batch_ttl
from chunkstore.store.batchstore import Batch
from chunkstore.store.errors import StoreWriteFailed, UnknownBatch
from chunkstore.swarm.constants import BATCH_ID_SIZE, ETH_ADDRESS_SIZE, MAX_BATCH_DEPTH, MAX_BUCKET_DEPTH, UINT64_MAX
from chunkstore.swarm.errors import SwarmError
from chunkstore.swarm.jsontext import parse_json
from chunkstore.transfer.batchfile import render_batch

from .auth import require_admin
from .errors import ApiError, json_response, status_for, status_response
from .params import decode_hex
from .routes_chainstate import current
from .routes_stamps import issuer_terms
from .state import state_of


def _render(batch: Batch, chain: ChainState | None, block_time: int) -> dict[str, Any]:
    return render_batch(batch, batch_ttl(batch.value, chain, block_time))


def _field_error(field: str, problem: str) -> ApiError:
    return ApiError(400, f"invalid batch: {field} {problem}", [{"field": field, "error": problem}])


def _hex_field(body: dict[str, Any], field: str, size: int) -> bytes:
    v = body.get(field)
    if not isinstance(v, str):
        raise _field_error(field, f"must be a string of {2 * size} hex characters")
    if len(v) != 2 * size:
        raise _field_error(field, f"must be {2 * size} hex characters, got {len(v)}")
    try:
        return bytes.fromhex(v)
    except ValueError:
        raise _field_error(field, "is not hex") from None


def _int_field(body: dict[str, Any], field: str, lo: int, hi: int) -> int:
    v = body.get(field)
    if isinstance(v, bool) or not isinstance(v, int):
        raise _field_error(field, f"must be an integer in {lo}..{hi}")
    if not lo <= v <= hi:
        raise _field_error(field, f"must be in {lo}..{hi}, got {v}")
    return v


def parse_batch_json(raw: bytes) -> dict[str, Any]:
    """Validate a ``POST /batches`` body into the store's batch fields, or a 400 naming the field."""
    try:
        body = parse_json(raw)
    except ValueError as exc:
        raise ApiError(400, f"invalid request body: not JSON ({exc})") from None
    if not isinstance(body, dict):
        raise ApiError(400, "invalid request body: want a JSON object")
    missing = [f for f in ("batchID", "depth", "bucketDepth", "immutable", "value", "start") if f not in body]
    if missing:
        raise ApiError(
            400,
            f"invalid batch: missing field(s) {', '.join(missing)}",
            [{"field": f, "error": "required"} for f in missing],
        )
    batch_id = _hex_field(body, "batchID", BATCH_ID_SIZE)
    owner = _hex_field(body, "owner", ETH_ADDRESS_SIZE) if "owner" in body else None
    label = body.get("label", "")
    if not isinstance(label, str):
        raise _field_error("label", "must be a string")
    depth = _int_field(body, "depth", 0, MAX_BATCH_DEPTH)
    bucket_depth = _int_field(body, "bucketDepth", 0, min(depth, MAX_BUCKET_DEPTH))
    immutable = body["immutable"]
    if not isinstance(immutable, bool):
        raise _field_error("immutable", "must be true or false")
    value = body["value"]
    if not isinstance(value, str) or not value.isascii() or not value.isdigit():
        raise _field_error("value", "must be a non-negative decimal integer string, e.g. \"100000000\"")
    start = _int_field(body, "start", 0, UINT64_MAX)
    return {
        "id": batch_id,
        "owner": owner,
        "depth": depth,
        "bucket_depth": bucket_depth,
        "immutable": immutable,
        "value": int(value),
        "start": start,
        "label": label,
    }


def _get_batch(store: ReserveStore, batch_id: bytes) -> Batch | None:
    return store.batches.find(batch_id)


def _upsert(store: ReserveStore, batch: Batch, issuer_label: str | None) -> bool:
    """Add or replace; True when the batch is new. With ``issuer_label`` (a batch the node stamps for) its
    issuer record is written in the same commit: label, amount and block, keeping any positions handed out."""

    def issuer(txn: lmdb.Transaction) -> None:
        if issuer_label is None:
            return
        label, amount, _ = issuer_terms(batch, store.issuers.info_in(txn, batch.id))
        store.issuers.register_in(txn, batch.id, label=issuer_label or label, amount=amount, block_number=batch.start)

    if _get_batch(store, batch.id) is None:
        store.batches.add(batch, also=issuer)
        return True
    store.batches.update(batch, also=issuer)
    return False


def _remove(store: ReserveStore, batch_id: bytes) -> bool:
    """Remove a batch (or finish a removal a failed write left unfinished); False if unknown."""
    try:
        store.batches.remove(batch_id)
    except UnknownBatch:
        return False
    return True


def _list(store: ReserveStore) -> tuple[list[Batch], ChainState | None]:
    return store.batches.list(), current(store)


def _get_with_chain(store: ReserveStore, batch_id: bytes) -> tuple[Batch | None, ChainState | None]:
    return _get_batch(store, batch_id), current(store)


async def list_batches(request: web.Request) -> web.Response:
    st = state_of(request)
    batches, chain = await st.run(_list, st.store)
    bt = st.config.block_time
    return json_response({"batches": [_render(b, chain, bt) for b in batches]})


async def get_batch(request: web.Request) -> web.Response:
    st = state_of(request)
    batch_id = decode_hex("path", "batch_id", request.match_info["batch_id"], size=32)
    batch, chain = await st.run(_get_with_chain, st.store, batch_id)
    if batch is None:
        raise ApiError(404, "batch not found")
    return json_response(_render(batch, chain, st.config.block_time))


async def post_batch(request: web.Request) -> web.Response:
    st = state_of(request)
    require_admin(request, st.config.admin_token)
    raw = await request.read()
    fields = parse_batch_json(raw)
    label = fields.pop("label")
    node_owned = fields["owner"] is None
    if node_owned:
        fields["owner"] = st.signer.address
    try:
        batch = Batch(**fields)
        # The node stamps for a batch it owns: that one gets an issuer.
        created = await st.run(_upsert, st.store, batch, label if batch.owner == st.signer.address else None)
        chain = await st.run(current, st.store)
    except StoreWriteFailed:
        raise  # the node's trouble, not the batch's: the error middleware answers 507/500
    except SwarmError as exc:
        raise ApiError(status_for(exc), f"invalid batch: {exc}") from None
    return json_response(_render(batch, chain, st.config.block_time), status=201 if created else 200)


async def delete_batch(request: web.Request) -> web.Response:
    st = state_of(request)
    require_admin(request, st.config.admin_token)
    batch_id = decode_hex("path", "batch_id", request.match_info["batch_id"], size=32)
    removed = await st.run(_remove, st.store, batch_id)
    if not removed:
        raise ApiError(404, "batch not found")
    return status_response()


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    for p in prefixes:
        app.router.add_get(p + "/batches", list_batches, allow_head=False)
        app.router.add_post(p + "/batches", post_batch)
        app.router.add_get(p + "/batches/{batch_id}", get_batch, allow_head=False)
        app.router.add_delete(p + "/batches/{batch_id}", delete_batch)
