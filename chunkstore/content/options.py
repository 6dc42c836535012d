"""The upload options an upload session acts on (the upload headers, validated by the HTTP layer)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UploadOptions:
    """The upload headers the later features act on (validated by the HTTP layer, Bee's meaning).

    ``tag``: ``Swarm-Tag``, the tag to count the chunks under (0: none given);
    ``pin``: ``Swarm-Pin``; ``deferred``: ``Swarm-Deferred-Upload`` (true by
    default, as the reference: a node with no network stores either way).
    """

    tag: int = 0
    pin: bool = False
    deferred: bool = True
