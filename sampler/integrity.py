"""Integrity assertions over a produced sample.

Tests run them on every sample, and operators can run them before submitting
a claim (``check_sample``): a sample item whose data does not reproduce its
addresses, or whose stamp the contract would refuse, gets the node frozen, so
it is worth a few milliseconds to re-derive everything from the bytes.
"""

from __future__ import annotations

from chunkstore.swarm.constants import SAMPLE_SIZE, ChunkType
from chunkstore.swarm.errors import SwarmError
from chunkstore.swarm.stamp import Stamp, validate_stamp

from .errors import SampleIntegrityError
from .items import SampleItem, check_chunk, transformed_address
from .source import BatchRegistry


def _check_chunk(i: int, item: SampleItem, anchor: bytes) -> None:
    data = item.chunk_data
    if not isinstance(data, bytes):
        # bytes is immutable and owns its memory; anything else may alias a reused buffer.
        raise SampleIntegrityError(i, f"chunk data is a {type(data).__name__}, not an own bytes object")
    if item.chunk_type not in (ChunkType.CAC, ChunkType.SOC):
        raise SampleIntegrityError(i, f"chunk type {item.chunk_type} is neither CAC nor SOC")
    try:
        check_chunk(item.chunk_address, data, item.chunk_type)
    except SwarmError as exc:
        kind = "CAC" if item.chunk_type == ChunkType.CAC else "SOC"
        raise SampleIntegrityError(i, f"{kind} data is not the chunk {item.chunk_address.hex()}: {exc}") from None
    got = transformed_address(item.chunk_address, data, item.chunk_type, anchor)
    if got != item.transformed_address:
        raise SampleIntegrityError(
            i, f"data gives transformed address {got.hex()}, the item says {item.transformed_address.hex()}"
        )


def _check_stamp(i: int, item: SampleItem, batches: BatchRegistry, consensus_time: int | None) -> None:
    stamp: Stamp = item.stamp
    batch = batches.find(stamp.batch_id)
    if batch is None:
        raise SampleIntegrityError(i, f"stamp batch {stamp.batch_id.hex()} is unknown to the store")
    try:
        validate_stamp(stamp, item.chunk_address, batch.owner, batch.depth, batch.bucket_depth)
    except SwarmError as exc:
        raise SampleIntegrityError(i, f"stamp is invalid: {exc}") from None
    if consensus_time is not None and stamp.timestamp_ns > consensus_time:
        raise SampleIntegrityError(i, f"stamp timestamp {stamp.timestamp_ns} is after consensus time {consensus_time}")


def check_sample(
    items: list[SampleItem],
    anchor: bytes,
    batches: BatchRegistry | None = None,
    consensus_time: int | None = None,
    size: int = SAMPLE_SIZE,
) -> None:
    """Raise ``SampleIntegrityError`` naming the first item that breaks an invariant.

    Checks: ``size`` items; each item's data reproduces its chunk address (CAC
    or SOC) and its transformed address; each stamp is valid for the batch as
    ``batches`` (the store's batch registry) knows it; no two items share a data
    object; transformed addresses strictly ascending.
    """
    if len(items) != size:
        raise SampleIntegrityError(None, f"has {len(items)} items, not {size}")
    seen: dict[int, int] = {}
    for i, item in enumerate(items):
        owner = seen.setdefault(id(item.chunk_data), i)
        if owner != i:
            raise SampleIntegrityError(i, f"chunk data is the same object as item {owner}'s")
        _check_chunk(i, item, anchor)
        if batches is not None:
            _check_stamp(i, item, batches, consensus_time)
        if i and not items[i - 1].transformed_address < item.transformed_address:
            raise SampleIntegrityError(
                i, "transformed address is not strictly greater than the previous item's"
            )
