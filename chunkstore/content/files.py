"""Files in and out of the store as Bee keeps them: chunk trees written through a session, read by a joiner.

``write_file`` feeds a byte stream through Bee's splitter into an
``UploadSession`` piece by piece (memory stays flat in the size);
``write_bytes`` does the same for bytes in hand (a manifest node: the
reference node stores each one as a "bytes" upload with the upload's
redundancy level and encryption). ``open_file`` gives a ``Joiner`` over
the store; ``load_manifest`` opens a mantaray manifest stored that way.
"""

from __future__ import annotations

from typing import Protocol

from chunkstore.store.store import ChunkStore
from chunkstore.swarm.file import Joiner, Splitter, join_bytes
from chunkstore.swarm.mantaray import Manifest
from chunkstore.swarm.redundancy.level import DEFAULT_DOWNLOAD_LEVEL, Level

from .session import UploadSession

PIECE = 1 << 20  # bytes read from a stream at a time


class Reader(Protocol):
    """What ``write_file`` reads from: ``read(n)`` gives up to ``n`` bytes, ``b""`` at the end."""

    def read(self, n: int = -1, /) -> bytes: ...


def write_file(
    reader: Reader,
    session: UploadSession,
    *,
    level: Level | int,
    encrypt: bool = False,
    prefix: bytes = b"",
    piece: int = PIECE,
) -> bytes:
    """Split everything ``reader`` gives (after ``prefix``, bytes already read from it) into ``session``.

    Returns the file's reference (32 bytes, 64 encrypted). The session is not
    finished: the caller finishes it with the reference it answers.
    """
    splitter = Splitter(session.put, level=level, encrypt=encrypt)
    if prefix:
        splitter.write(prefix)
    while True:
        data = reader.read(piece)
        if not data:
            break
        splitter.write(data)
    return splitter.finish()


def write_bytes(data: bytes, session: UploadSession, *, level: Level | int, encrypt: bool = False) -> bytes:
    """The reference of ``data`` stored as a file through ``session`` (a manifest node's ``save``)."""
    splitter = Splitter(session.put, level=level, encrypt=encrypt)
    splitter.write(data)
    return splitter.finish()


def open_file(store: ChunkStore, reference: bytes, *, level: Level | int = DEFAULT_DOWNLOAD_LEVEL) -> Joiner:
    """A joiner over the file at ``reference`` (``ChunkMissing`` if its root is nowhere to be found)."""
    return Joiner(reference, store.get, replica_level=level)


def load_manifest(store: ChunkStore, reference: bytes) -> Manifest:
    """The mantaray manifest at ``reference``; its nodes are read (and joined) as they are needed."""

    def load(ref: bytes) -> bytes:
        return join_bytes(ref, store.get)

    return Manifest.open(bytes(reference), load=load)
