"""``GET /rchash/{depth}/{anchor1}/{anchor2}``: the reserve sample hash with its inclusion proofs.

Parameters, as the reference node parses them (``pkg/api/rchash.go``):

- ``depth``: a decimal 0..255 (Go ``uint8``); this daemon also refuses
  depths over 31 with 400, since a proximity never exceeds 31;
- ``anchor1``, ``anchor2``: hex without 0x, even length, at least one byte
  (Go ``hex.DecodeString``); this daemon caps them at 32 bytes, the size of
  the contract's seeds;
- ``consensusTime`` (query, optional): Unix nanoseconds; chunks stamped later
  are left out. Default: the time the sample starts;
- ``verbose`` (query, optional, Go boolean spelling): adds ``items``,
  ``stats``, ``storageRadius``, ``reserveSizeWithinDepth`` (distinct chunks
  the sample covered: within the depth of anchor1 and the storage radius),
  ``hashBackend`` (the backend in use, why, and the one this sample hashed
  with) and ``fullReserveEstimate`` (see ``api.estimate``).

The answer is the reference node's ``{"hash", "proofs", "durationSeconds"}``.

Concurrency: identical requests (same depth, anchor1 and consensusTime) that
arrive while their sample is being computed share that computation (each
gets its own proofs for its anchor2). One sample runs at a time; a request
for a different sample waits up to ``--sample-wait`` seconds (default 10) for
the running one and is then answered 503 with a ``Retry-After`` header (whole
seconds: the expected remaining time of the running sample, from the last
run's duration, at least 1).

A neighbourhood with fewer than 16 eligible chunks is answered 422, naming
how many were found; a sampler failure (a worker process died, a sample
failing its own integrity check) is answered 500, as the reference does. Metrics of every run are recorded in the reference
node's names (see ``api.metrics``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from aiohttp import web

from chunkstore.reserve import ReserveStore
from chunkstore.swarm.bmt import backend as hashing
from chunkstore.swarm.constants import MAX_ANCHOR_SIZE, MAX_PO, SAMPLE_SIZE, ChunkType
from chunkstore.swarm.errors import SwarmError
from sampler import ChunkInclusionProofs, InsufficientSample, SampleItem
from sampler.pipeline import sample_scope
from sampler.proof import make_inclusion_proofs, sample_chunk
from sampler.render import render_rchash

from .errors import ApiError, ParamError, SampleBusy, json_response
from .estimate import estimate
from .params import decode_hex, parse_go_bool, parse_uint
from .state import state_of

log = logging.getLogger(__name__)
T = TypeVar("T")

def _prove(items: list[SampleItem], anchor1: bytes, anchor2: bytes) -> tuple[bytes, ChunkInclusionProofs]:
    address, _ = sample_chunk(items)
    return address, make_inclusion_proofs(items, anchor1, anchor2)


def _count_within(store: ReserveStore, anchor: bytes, depth: int) -> int:
    """Distinct chunks the sample covers (the depth of ``anchor`` within the storage radius), from the index."""
    key_range = sample_scope(store, anchor, depth).key_range()
    if key_range is None:
        return 0
    count = 0
    for i in range(int(store.shard_count)):  # a chunk lives in one shard: count each shard apart
        last = None
        for entry in store.shard(i).iter_range(*key_range):  # address order: one entry per stamp
            if entry[0] != last:
                count += 1
                last = entry[0]
    return count


def _parse(request: web.Request) -> tuple[int, bytes, bytes, int | None, bool]:
    mi = request.match_info
    reasons: list[Mapping[str, str]] = []

    # Like the reference's mapStructure (pkg/api/util.go): every bad path field is named, in the
    # handler's field order, not just the first.
    def path_param(parse: Callable[[], T]) -> T | None:
        try:
            return parse()
        except ParamError as exc:
            reasons.extend(exc.reasons)
            return None

    def parse_depth() -> int:
        d = parse_uint("path", "depth", mi["depth"], bits=8)
        if d > MAX_PO:
            raise ParamError("path", "depth", mi["depth"], f"depth must be at most {MAX_PO}")
        return d

    depth = path_param(parse_depth)
    anchor1 = path_param(lambda: decode_hex("path", "anchor1", mi["anchor1"], max_size=MAX_ANCHOR_SIZE))
    anchor2 = path_param(lambda: decode_hex("path", "anchor2", mi["anchor2"], max_size=MAX_ANCHOR_SIZE))
    if depth is None or anchor1 is None or anchor2 is None:
        raise ApiError(400, "invalid path params", reasons)
    q = request.query
    ct: int | None = None
    if "consensusTime" in q:
        ct = parse_uint("query", "consensusTime", q["consensusTime"])
    verbose = False
    if "verbose" in q:
        verbose = parse_go_bool("query", "verbose", q["verbose"])
    return depth, anchor1, anchor2, ct, verbose


async def rchash(request: web.Request) -> web.Response:
    st = state_of(request)
    depth, anchor1, anchor2, ct, verbose = _parse(request)
    try:
        run = await st.sampler.sample(depth, anchor1, ct)
    except SampleBusy as exc:
        raise ApiError(503, str(exc), headers={"Retry-After": str(exc.retry_after)}) from None
    except InsufficientSample as exc:
        raise ApiError(
            422,
            f"insufficient sample: found {exc.found} eligible chunk(s) within depth {depth} of anchor "
            f"{anchor1.hex()}; {SAMPLE_SIZE} are needed",
        ) from None
    except SwarmError as exc:
        # a worker that died or a sample that fails its own checks is the node's fault, not the request's
        log.error("reserve sample failed", extra={"fields": {"error": str(exc), "kind": type(exc).__name__}})
        raise ApiError(500, f"failed making sample with proofs: {exc}") from None
    items = list(run.result.items)
    t_proofs = time.perf_counter()
    sample_address, proofs = await st.run(_prove, items, anchor1, anchor2)
    # Like the reference: the time of the sample plus that of the proofs.
    duration = run.duration + (time.perf_counter() - t_proofs)
    body = render_rchash(sample_address, proofs, duration)
    if verbose:
        stats_d = run.result.stats.as_dict()
        # Phase 1 counted the chunks it walked; walking the index again here would take seconds
        # of Python per million entries (and the GIL, from /health) on a full reserve.
        if "distinct_chunks" in stats_d:
            within = int(stats_d["distinct_chunks"])
        else:
            within = await st.run(_count_within, st.store, anchor1, depth)
        info = hashing.backend_info()
        used = run.result.hash_backend or info.name
        body["depth"] = depth
        body["consensusTime"] = run.consensus_time
        body["items"] = [
            {
                "chunkAddress": bytes(it.chunk_address).hex(),
                "transformedAddress": bytes(it.transformed_address).hex(),
                "batchID": bytes(it.stamp.batch_id).hex(),
                "chunkType": ChunkType(it.chunk_type).name,
            }
            for it in items
        ]
        body["stats"] = stats_d
        body["storageRadius"] = run.result.storage_radius
        body["reserveSizeWithinDepth"] = within
        body["hashBackend"] = {**info.as_dict(), "usedBySample": used}
        body["fullReserveEstimate"] = await st.run(estimate, stats_d, used, run.duration, st.config.sampling_window)
    return json_response(body)


def add_routes(app: web.Application, prefixes: tuple[str, ...] = ("", "/v1")) -> None:
    for p in prefixes:
        app.router.add_get(p + "/rchash/{depth}/{anchor1}/{anchor2}", rchash, allow_head=False)
