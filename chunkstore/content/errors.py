"""Typed errors of content uploads and downloads (the HTTP layer maps each to a 4xx)."""

from __future__ import annotations

from chunkstore.swarm.errors import InvalidStamp, SwarmError


class ContentError(SwarmError):
    """Base class: an upload or download of content cannot be done as asked."""


class NotNodeBatch(InvalidStamp):
    """The batch exists but belongs to someone else, so the node cannot sign stamps for it."""

    def __init__(self, batch_id: bytes, owner: bytes, node: bytes) -> None:
        self.batch_id = bytes(batch_id)
        self.owner = bytes(owner)
        self.node = bytes(node)
        super().__init__(
            f"batch {self.batch_id.hex()} is owned by {self.owner.hex()}, not by this node ({self.node.hex()}): "
            "the node cannot sign stamps for it"
        )


class UploadFailed(ContentError):
    """An upload stopped part-way (its reference was never handed out; see ``UploadSession``)."""


class SessionClosed(ContentError):
    """A chunk was offered to an upload session after it finished or was aborted."""


class InvalidCollection(ContentError):
    """A collection upload's body is not what its Content-Type announced (not a tar, a broken multipart)."""
