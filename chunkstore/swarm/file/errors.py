"""Typed errors of the splitter and joiner."""

from __future__ import annotations

from ..errors import InvalidChunk, SwarmError


class FileError(SwarmError):
    """Base of every error raised while splitting or joining a file."""


class InvalidReference(FileError):
    """A file reference is neither 32 bytes (plain) nor 64 bytes (address | key)."""


class ChunkMissing(FileError, LookupError):
    """A chunk of the tree is not available and could not be recovered from parities."""

    def __init__(self, address: bytes, detail: str = "") -> None:
        self.address = bytes(address)
        message = f"chunk {self.address.hex()} not found"
        super().__init__(f"{message}: {detail}" if detail else message)


class ChunkCorrupt(FileError, InvalidChunk):
    """A chunk's data does not hash to the address its parent names (and could not be recovered)."""

    def __init__(self, address: bytes, got: bytes) -> None:
        self.address = bytes(address)
        self.got = bytes(got)
        super().__init__(f"chunk data at {self.address.hex()} hashes to {self.got.hex()}")


class MalformedTree(FileError):
    """Spans, references or chunk sizes of the tree contradict each other."""


class InvalidRange(FileError, ValueError):
    """A byte range outside the file (the HTTP layer answers 416)."""


class SplitterClosed(FileError):
    """``write`` or ``finish`` after ``finish``."""
