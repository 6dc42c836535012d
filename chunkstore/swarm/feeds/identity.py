"""Who and where a feed update is: topics, sequence indexes, SOC ids and addresses.

A feed is ``(owner, topic)``. Update ``i`` of a sequence feed is the
single-owner chunk whose id is ``keccak(topic | i as 8 bytes big-endian)``,
so its address is ``keccak(id | owner)``. The reference node takes the topic
as raw bytes of any length (the URL's hex); clients derive 32-byte topics
from text with ``keccak(utf-8 text)`` (bee-js ``Topic.fromString``,
swarm-cli's ``--topic-string``).
"""

from __future__ import annotations

import binascii

from chunkstore.swarm.keccak import keccak256
from chunkstore.swarm.soc import soc_address

from .errors import InvalidFeedIndex, InvalidFeedTopic

INDEX_SIZE = 8
MAX_INDEX = (1 << 64) - 1
OWNER_SIZE = 20


def topic_from_string(text: str) -> bytes:
    """The 32-byte topic clients derive from a text name: ``keccak(utf-8 text)``."""
    return keccak256(text.encode("utf-8"))


def index_bytes(index: int) -> bytes:
    """A sequence index as the 8 big-endian bytes ids and the ``Swarm-Feed-Index`` header use."""
    if not 0 <= index <= MAX_INDEX:
        raise InvalidFeedIndex(f"feed index {index} is outside 0..2^64-1")
    return index.to_bytes(INDEX_SIZE, "big")


def parse_index(value: bytes | str) -> int:
    """An index from its 8 bytes or their 16 hex digits (a ``Swarm-Feed-Index`` header value)."""
    if isinstance(value, str):
        try:
            value = binascii.unhexlify(value.encode("ascii"))
        except (UnicodeEncodeError, binascii.Error, ValueError):
            raise InvalidFeedIndex(f"feed index {value!r} is not hex") from None
    if len(value) != INDEX_SIZE:
        raise InvalidFeedIndex(f"feed index is {len(value)} bytes; must be {INDEX_SIZE}")
    return int.from_bytes(value, "big")


def next_index(index: int | None) -> int:
    """The index after ``index`` (0 after none); wraps after 2^64 - 1 like the clients' uint64."""
    if index is None:
        return 0
    return (index + 1) & MAX_INDEX


def _check(owner: bytes, topic: bytes) -> None:
    if len(owner) != OWNER_SIZE:
        raise InvalidFeedTopic(f"feed owner is {len(owner)} bytes; must be {OWNER_SIZE}")
    if not topic:
        raise InvalidFeedTopic("feed topic is empty")


def update_identifier(topic: bytes, index: int) -> bytes:
    """The SOC id of sequence update ``index``: ``keccak(topic | index, 8 bytes BE)``."""
    if not topic:
        raise InvalidFeedTopic("feed topic is empty")
    return keccak256(bytes(topic), index_bytes(index))


def update_address(owner: bytes, topic: bytes, index: int) -> bytes:
    """The chunk address of sequence update ``index`` of feed ``(owner, topic)``."""
    _check(owner, topic)
    return soc_address(update_identifier(topic, index), bytes(owner))
