"""Reading single-owner chunks and sequence feeds out of the store (blocking; run in the thread pool).

``latest_update`` is the reference node's ``GET /feeds`` lookup over the
SOCs held here: the sequence finder of ``chunkstore.swarm.feeds`` (about
``2 * log2(n)`` chunk reads for n updates) followed by the v1/v2 resolution
of the update it finds. The store is the only source: this node joins no
network, so an update or a referenced chunk it does not hold is absent.

One deliberate difference: a v1 payload with a 64-byte (encrypted)
reference resolves to v1 when the reference's chunk is held. The reference
node asks its store for the whole 64 bytes as an address, never finds it,
and so always answers such an update as v2 (the 80-byte wrapped chunk).
"""

from __future__ import annotations

from dataclasses import dataclass

from chunkstore.reserve import ReserveStore
from chunkstore.store.errors import ChunkNotFound
from chunkstore.swarm.bzz import FeedPointer
from chunkstore.swarm.constants import ADDRESS_SIZE
from chunkstore.swarm.feeds import (
    InvalidFeedUpdate,
    ResolvedUpdate,
    find_latest,
    index_bytes,
    parse_update,
    resolve_update,
)
from chunkstore.swarm.file import Joiner
from chunkstore.swarm.soc import SOC, parse_soc, soc_address

from .errors import ApiError
from .state import FeedTarget


def get_or_none(store: ReserveStore, address: bytes) -> bytes | None:
    """The chunk at ``address``, or None when the store does not hold it."""
    try:
        return store.get(address)
    except ChunkNotFound:
        return None


def holds(store: ReserveStore, reference: bytes) -> bool:
    """Whether the root chunk of ``reference`` (32 bytes, or 64 with a decryption key) is held."""
    return store.has(bytes(reference[:ADDRESS_SIZE]))


def read_soc(store: ReserveStore, owner: bytes, soc_id: bytes) -> SOC | None:
    """The SOC ``(owner, id)`` as held here, or None. Its address is ``keccak(id | owner)``."""
    data = get_or_none(store, soc_address(soc_id, owner))
    return None if data is None else parse_soc(data)


@dataclass(frozen=True)
class FeedUpdate:
    """The latest update of a feed, found and resolved."""

    index: int
    next_index: int
    soc: SOC
    resolved: ResolvedUpdate
    reads: int  # chunk reads the lookup made


def latest_update(store: ReserveStore, owner: bytes, topic: bytes, after: int = 0) -> FeedUpdate | None:
    """The latest update of sequence feed ``(owner, topic)`` at or after index ``after``; None if there is none.

    Raises ``InvalidFeedUpdate`` when the chunk found is not a usable update.
    """
    found = find_latest(lambda a: get_or_none(store, a), owner, topic, after=after)
    if found.index is None or found.chunk is None:
        return None
    soc = parse_update(found.chunk, owner, topic, found.index)
    resolved = resolve_update(soc.wrapped_data, lambda ref: holds(store, ref))
    return FeedUpdate(found.index, found.next_index, soc, resolved, found.reads)


def open_tree(store: ReserveStore, reference: bytes, root_chunk: bytes | None = None) -> Joiner:
    """A joiner over the store; ``root_chunk`` (``span | payload``) stands in for a root the store need not hold.

    A v2 feed update or a SOC wraps the root chunk of its content, which was
    never stored on its own.
    """
    root_address = bytes(reference[:ADDRESS_SIZE])

    def get(address: bytes) -> bytes | None:
        if root_chunk is not None and address == root_address:
            return root_chunk
        return get_or_none(store, address)

    return Joiner(reference, get)


SEQUENCE = "Sequence"


def feed_target(store: ReserveStore, pointer: FeedPointer) -> FeedTarget | None:
    """What ``GET /bzz`` of a feed manifest serves: the latest update's content (None: no update).

    The reference node then reads that content as a manifest, so a feed
    whose updates point at a ``/bzz`` upload serves its files. Epoch feeds
    are refused with a 501: only sequence feeds are looked up here.
    """
    if pointer.feed_type != SEQUENCE:
        raise ApiError(501, f"{pointer.feed_type.lower()} feeds are not supported by this node; only sequence feeds")
    try:
        update = latest_update(store, pointer.owner, pointer.topic)
    except InvalidFeedUpdate as exc:
        raise ApiError(404, f"feed pointing to the wrapped chunk not found: {exc}") from None
    if update is None:
        return None
    headers = {"Swarm-Feed-Index": index_bytes(update.index).hex(), "Swarm-Feed-Resolved-Version": update.resolved.version}
    return FeedTarget(update.resolved.address, update.resolved.root_chunk, headers)
