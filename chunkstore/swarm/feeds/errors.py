"""Typed errors of feed identifiers, updates and lookups."""

from __future__ import annotations

from chunkstore.swarm.errors import SwarmError


class FeedError(SwarmError):
    """Base class: a feed parameter, update or lookup was refused."""


class InvalidFeedIndex(FeedError):
    """A sequence index is negative, above 2^64 - 1, or not 8 bytes / 16 hex digits."""


class InvalidFeedTopic(FeedError):
    """A feed topic is empty or an owner is not a 20-byte address."""


class InvalidFeedUpdate(FeedError):
    """Update data is not a single-owner chunk of this feed, or its payload is unusable."""
