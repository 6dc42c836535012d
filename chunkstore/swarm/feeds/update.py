"""Feed update payloads and how the reference node resolves an update to content.

Two payload generations live side by side:

* v1 ("legacy"): the SOC wraps a CAC whose payload is ``timestamp (8, BE,
  Unix seconds) | reference`` (32 bytes, or 64 for an encrypted
  reference); the content is the referenced chunk tree. bee-js writes this
  with ``FeedWriter.upload`` and the reference node's own updater did too.
* v2: the SOC wraps the content's root chunk itself (any CAC: a small
  payload, or the root of a larger tree; bee-js ``uploadPayload``).

A v1-sized wrapped chunk (48 or 80 bytes of ``span | payload``) is
ambiguous. The reference node tries both readings concurrently and answers
v1 when the referenced chunk is retrievable; when it is not, the race may
end either way (see its disabled test "legacy payload with non existing
wrapped chunk"). ``resolve_update`` decides that case as v2, deterministically.
The answer goes to clients in the ``Swarm-Feed-Resolved-Version`` header.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from chunkstore.swarm.cac import cac_address, make_cac
from chunkstore.swarm.errors import SwarmError
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.soc import SOC, make_soc, parse_soc

from .errors import InvalidFeedUpdate
from .identity import MAX_INDEX, update_address, update_identifier

TIMESTAMP_SIZE = 8
SPAN_SIZE = 8
REFERENCE_SIZES = (32, 64)
LEGACY_DATA_SIZES = tuple(SPAN_SIZE + TIMESTAMP_SIZE + n for n in REFERENCE_SIZES)  # 48, 80
V1 = "v1"
V2 = "v2"


def legacy_payload(reference: bytes, timestamp: int) -> bytes:
    """A v1 update payload: ``timestamp (8, BE) | reference``."""
    if len(reference) not in REFERENCE_SIZES:
        raise InvalidFeedUpdate(f"reference is {len(reference)} bytes; must be 32 or 64")
    if not 0 <= timestamp <= MAX_INDEX:
        raise InvalidFeedUpdate(f"timestamp {timestamp} does not fit 8 bytes")
    return timestamp.to_bytes(TIMESTAMP_SIZE, "big") + bytes(reference)


def is_legacy_size(wrapped_data: bytes) -> bool:
    """Whether ``span | payload`` has a v1 update's size (so both readings are possible)."""
    return len(wrapped_data) in LEGACY_DATA_SIZES


def make_update(signer: Signer, topic: bytes, index: int, wrapped_data: bytes) -> SOC:
    """Sign update ``index`` wrapping the CAC ``wrapped_data`` (``span | payload``)."""
    return make_soc(signer, update_identifier(topic, index), bytes(wrapped_data))


def make_payload_update(signer: Signer, topic: bytes, index: int, payload: bytes) -> SOC:
    """Sign update ``index`` wrapping a CAC of ``payload`` (at most 4096 bytes), as the reference's putter."""
    _, data = make_cac(bytes(payload))
    return make_update(signer, topic, index, data)


@dataclass(frozen=True)
class ResolvedUpdate:
    """What a feed update points at."""

    version: str  # "v1" or "v2", the Swarm-Feed-Resolved-Version header
    address: bytes  # root reference of the content (v1: 32 or 64 bytes; v2: the wrapped chunk's address)
    root_chunk: bytes | None  # v2: the wrapped chunk (span | payload), which need not be stored on its own
    timestamp: int | None  # v1: the update's timestamp


def parse_update(soc_data: bytes, owner: bytes, topic: bytes, index: int) -> SOC:
    """Parse update ``index`` of feed ``(owner, topic)``, checking it is that update."""
    try:
        soc = parse_soc(soc_data)
    except SwarmError as exc:
        raise InvalidFeedUpdate(f"feed update {index} is not a valid single-owner chunk: {exc}") from exc
    expected = update_address(owner, topic, index)
    if soc.address != expected:
        raise InvalidFeedUpdate(f"chunk at update {index} resolves to {soc.address.hex()}, not {expected.hex()}")
    return soc


def resolve_update(wrapped_data: bytes, exists: Callable[[bytes], bool]) -> ResolvedUpdate:
    """Resolve an update from its wrapped chunk (``SOC.wrapped_data``).

    ``exists(reference)`` tells whether the chunk a v1 payload references is
    retrievable (it receives the whole 32- or 64-byte reference).
    """
    data = bytes(wrapped_data)
    if len(data) < SPAN_SIZE:
        raise InvalidFeedUpdate(f"wrapped chunk is {len(data)} bytes; shorter than its span")
    if is_legacy_size(data):
        reference = data[SPAN_SIZE + TIMESTAMP_SIZE :]
        if exists(reference):
            timestamp = int.from_bytes(data[SPAN_SIZE : SPAN_SIZE + TIMESTAMP_SIZE], "big")
            return ResolvedUpdate(V1, reference, None, timestamp)
    try:
        address = cac_address(data)
    except SwarmError as exc:
        raise InvalidFeedUpdate(f"wrapped chunk is not a content-addressed chunk: {exc}") from exc
    return ResolvedUpdate(V2, address, data, None)
