"""Typed errors of the bzz manifest layouts."""

from __future__ import annotations

from chunkstore.swarm.errors import SwarmError


class BzzError(SwarmError):
    """Base class: a collection or file upload cannot be laid out as a manifest."""


class InvalidFileName(BzzError):
    """A single-file upload's name is unusable (the reference node: ``name`` must not start with "/")."""


class UnsafeArchivePath(BzzError):
    """A collection entry's path is absolute, climbs out with "..", has empty segments or is not text."""


class InvalidIndexDocument(BzzError):
    """The index document names a path (contains "/"); it must be a bare suffix."""


class EmptyCollection(BzzError):
    """A collection upload holds no regular file (the reference node: "no files in root directory")."""


class InvalidFeedManifest(BzzError):
    """A feed manifest's owner or topic is malformed."""
