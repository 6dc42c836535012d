"""Feeds: sequence-indexed single-owner chunk updates, as the reference node and bee-js use them."""

from .errors import FeedError, InvalidFeedIndex, InvalidFeedTopic, InvalidFeedUpdate
from .identity import (
    INDEX_SIZE,
    MAX_INDEX,
    index_bytes,
    next_index,
    parse_index,
    topic_from_string,
    update_address,
    update_identifier,
)
from .sequence import SequenceLookup, find_latest
from .update import (
    V1,
    V2,
    ResolvedUpdate,
    is_legacy_size,
    legacy_payload,
    make_payload_update,
    make_update,
    parse_update,
    resolve_update,
)

__all__ = [
    "INDEX_SIZE",
    "MAX_INDEX",
    "V1",
    "V2",
    "FeedError",
    "InvalidFeedIndex",
    "InvalidFeedTopic",
    "InvalidFeedUpdate",
    "ResolvedUpdate",
    "SequenceLookup",
    "find_latest",
    "index_bytes",
    "is_legacy_size",
    "legacy_payload",
    "make_payload_update",
    "make_update",
    "next_index",
    "parse_index",
    "parse_update",
    "resolve_update",
    "topic_from_string",
    "update_address",
    "update_identifier",
]
