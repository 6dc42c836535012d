"""Admission of a ``(data, stamp)`` pair: which chunk it is, and whether the stamp covers it.

Pure CPU work with no store state beyond the batch lookup, so the writer runs
it before taking its lock. Data that could be read either way (a SOC of at
most 4104 bytes also parses as a CAC) is tried as a CAC first, then as a SOC:
the stamp, signed over one address, decides which reading the uploader meant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from chunkstore.swarm.bmt.backend import chunk_hash
from chunkstore.swarm.cac import check_address, is_valid_cac
from chunkstore.swarm.constants import (
    ADDRESS_SIZE,
    BATCH_ID_SIZE,
    MAX_CAC_SIZE,
    SIGNATURE_SIZE,
    SPAN_SIZE,
    STAMP_INDEX_SIZE,
    STAMP_TIMESTAMP_SIZE,
    ChunkType,
)
from chunkstore.swarm.errors import InvalidChunk, InvalidSignature, InvalidStamp
from chunkstore.swarm.file.hasher import batch_hasher
from chunkstore.swarm.soc import parse_soc, validate_soc
from chunkstore.swarm.stamp import Stamp, check_stamp_slot, parse_stamp, validate_stamp

from .batchstore import Batch

StampLike = bytes | bytearray | memoryview | Stamp


@dataclass(frozen=True)
class Admitted:
    """A chunk that passed every check, ready for the slot rule."""

    address: bytes
    chunk_type: ChunkType
    data: bytes
    stamp: Stamp
    batch: Batch
    batch_record: bytes  # the batch as read, to notice a change before the write


def to_stamp(stamp: StampLike) -> Stamp:
    """Accept raw 113 bytes or a ``Stamp`` whose fields have the right sizes."""
    if isinstance(stamp, Stamp):
        sizes = (
            ("batch id", stamp.batch_id, BATCH_ID_SIZE),
            ("index", stamp.index, STAMP_INDEX_SIZE),
            ("timestamp", stamp.timestamp, STAMP_TIMESTAMP_SIZE),
            ("signature", stamp.signature, SIGNATURE_SIZE),
        )
        for name, value, size in sizes:
            if not isinstance(value, bytes) or len(value) != size:
                raise InvalidStamp(f"stamp {name} must be {size} bytes")
        return stamp
    if not isinstance(stamp, bytes | bytearray | memoryview):
        raise InvalidStamp(f"stamp must be bytes or a Stamp, not {type(stamp).__name__}")
    return parse_stamp(stamp)


def admit(
    data: bytes | bytearray | memoryview,
    stamp: StampLike,
    lookup: Callable[[bytes], tuple[Batch, bytes]],
    address: bytes | None = None,
) -> Admitted:
    """Validate chunk and stamp; ``lookup`` returns ``(batch, record)`` or raises ``UnknownBatch``."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidChunk(f"chunk data must be bytes, not {type(data).__name__}")
    data = bytes(data)
    st = to_stamp(stamp)
    batch, record = lookup(st.batch_id)

    def check(addr: bytes) -> None:
        validate_stamp(st, addr, batch.owner, batch.depth, batch.bucket_depth)

    if address is not None:
        addr, kind = _classify_at(check_address(address), data)
        check(addr)
        return Admitted(addr, kind, data, st, batch, record)

    cac_error: Exception | None = None
    if 8 <= len(data) <= MAX_CAC_SIZE:
        cac = chunk_hash(data)
        try:
            check(cac)
            return Admitted(cac, ChunkType.CAC, data, st, batch, record)
        except InvalidStamp as exc:
            cac_error = exc
    try:
        soc = parse_soc(data)
    except (InvalidChunk, InvalidSignature) as exc:
        if cac_error is not None:
            raise cac_error from None
        raise InvalidChunk(f"{len(data)} bytes are neither a CAC nor a valid SOC: {exc}") from None
    try:
        check(soc.address)
    except InvalidStamp as exc:
        if cac_error is None:
            raise
        raise InvalidStamp(
            f"stamp fits neither reading of the data: as CAC {cac.hex()}: {cac_error}; "
            f"as SOC {soc.address.hex()}: {exc}"
        ) from None
    return Admitted(soc.address, ChunkType.SOC, data, st, batch, record)


def admit_signed(
    items: list[tuple[bytes, bytes, Stamp]],
    lookup: Callable[[bytes], tuple[Batch, bytes]],
) -> list[Admitted]:
    """Admission of chunks whose stamps the caller signed itself with the batch owner's key.

    Every address is checked against its data (CACs in one batched BMT call,
    SOCs by their signature) and every stamp's batch, bucket and position
    bound; the stamp signatures are not recovered, except the first of the
    call's (a spot check: a caller signing with the wrong key or digest is
    refused at once). The owner's own writer saves the recovery (~55 us a
    chunk, the larger part of admitting a chunk it just signed).
    """
    out: list[Admitted] = []
    if not items:
        return out
    cac_rows = [i for i, (_, data, _) in enumerate(items) if SPAN_SIZE <= len(data) <= MAX_CAC_SIZE]
    hashes = dict(zip(cac_rows, batch_hasher([items[i][1] for i in cac_rows]), strict=True))
    batches: dict[bytes, tuple[Batch, bytes]] = {}  # one read per batch, not per chunk
    for i, (address, data, stamp) in enumerate(items):
        if len(address) != ADDRESS_SIZE:
            raise InvalidChunk(f"address is {len(address)} bytes; must be {ADDRESS_SIZE}")
        st = to_stamp(stamp)
        found = batches.get(st.batch_id)
        if found is None:
            found = batches[st.batch_id] = lookup(st.batch_id)
        batch, record = found
        if hashes.get(i) == address:
            kind = ChunkType.CAC
        else:
            try:
                validate_soc(address, data)
            except (InvalidChunk, InvalidSignature) as exc:
                raise InvalidChunk(f"data is neither the CAC nor a SOC at address {address.hex()} ({exc})") from None
            kind = ChunkType.SOC
        if i == 0:
            validate_stamp(st, address, batch.owner, batch.depth, batch.bucket_depth)
        else:
            check_stamp_slot(st, address, batch.depth, batch.bucket_depth)
        out.append(Admitted(bytes(address), kind, bytes(data), st, batch, record))
    return out


def classify(address: bytes, data: bytes | bytearray | memoryview) -> ChunkType:
    """CAC, SOC, or UNKNOWN (rogue) for data stored at ``address``."""
    try:
        return _classify_at(address, data)[1]
    except (InvalidChunk, InvalidSignature):
        return ChunkType.UNKNOWN


def _classify_at(address: bytes, data: bytes | bytearray | memoryview) -> tuple[bytes, ChunkType]:
    address = check_address(address)
    if is_valid_cac(address, data):
        return address, ChunkType.CAC
    try:
        validate_soc(address, data)
    except (InvalidChunk, InvalidSignature) as exc:
        raise InvalidChunk(f"data is neither the CAC nor a SOC at address {address.hex()} ({exc})") from None
    return address, ChunkType.SOC
