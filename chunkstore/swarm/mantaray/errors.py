"""Typed errors of the mantaray manifest trie."""

from __future__ import annotations

from chunkstore.swarm.errors import SwarmError


class ManifestError(SwarmError):
    """Base class: a manifest operation was refused or manifest data is unusable."""


class InvalidManifest(ManifestError):
    """Serialised node data is malformed (short, unknown version, bad fork, bad metadata JSON)."""


class ManifestNotFound(ManifestError):
    """No value entry at the requested path (the reference node's ``ErrNotFound``)."""

    def __init__(self, path: bytes) -> None:
        self.path = bytes(path)
        shown = self.path.decode("utf-8", "replace")
        super().__init__(f"manifest has no entry at {shown!r}")


class InvalidEntry(ManifestError):
    """An entry or its metadata cannot be stored (size, encoding, metadata too large)."""


class InvalidPath(ManifestError):
    """A manifest path is empty where one is required, or not encodable."""


class ManifestNotSaved(ManifestError):
    """An operation needs a persisted node (a reference) but the node has not been stored."""
