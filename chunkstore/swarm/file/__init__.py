"""Files as Bee stores them: the splitter, the joiner and the tree's span arithmetic.

``Splitter(sink, level=..., encrypt=...)`` turns a byte stream into chunks
and returns the root reference; ``Joiner(reference, get)`` reads any byte
range back. Both follow Bee's pkg/file byte for byte.
"""

from .errors import (
    ChunkCorrupt,
    ChunkMissing,
    FileError,
    InvalidRange,
    InvalidReference,
    MalformedTree,
    SplitterClosed,
)
from .joiner import Joiner, join_bytes
from .splitter import Splitter, split_bytes

__all__ = [
    "ChunkCorrupt",
    "ChunkMissing",
    "FileError",
    "InvalidRange",
    "InvalidReference",
    "Joiner",
    "MalformedTree",
    "Splitter",
    "SplitterClosed",
    "join_bytes",
    "split_bytes",
]
