"""``POST /feeds/{owner}/{topic}``: the feed manifest, stored through an upload session as the reference node stores it.

The manifest holds one entry, ``/`` with a 32-byte zero reference and the
metadata ``swarm-feed-owner``, ``swarm-feed-topic`` (hex) and
``swarm-feed-type: Sequence`` (``chunkstore.swarm.bzz.feed_manifest``).
Its node is saved as a "bytes" upload with the request's redundancy level
and never encrypted: the reference builds it with an unencrypted manifest
and pipeline whatever ``Swarm-Encrypt`` says. The reference is therefore
the same for the same feed, on this node and on the reference node, and
equal to what swarm-cli computes locally for ``feed print``.
"""

from __future__ import annotations

from chunkstore.swarm.bzz import feed_manifest
from chunkstore.swarm.redundancy.level import Level

from .files import write_bytes
from .session import UploadSession


def write_feed_manifest(session: UploadSession, owner: bytes, topic: bytes, *, level: Level | int) -> bytes:
    """Store the manifest of feed ``(owner, topic)`` through ``session``; its reference (not yet finished)."""

    def save(data: bytes) -> bytes:
        return write_bytes(data, session, level=level, encrypt=False)

    return feed_manifest(owner, topic, save=save).store()
