"""Bee's redundancy levels, their parity tables, and the level byte in a span.

A level says how many parity chunks guard each intermediate chunk's children
(Bee: pkg/file/redundancy/level.go, table.go, span.go). The tables give, for
a number of data shards, the parity count: the first row whose shard count is
at most the given one applies. Encrypted trees have their own tables because
an encrypted reference takes two slots (address and key) of an intermediate
chunk while a parity reference takes one.

An intermediate chunk written with parities carries the level in its span:
the span's last (most significant) byte becomes ``0x80 | level``. Real spans
never reach 2^56 bytes, so a last byte above 128 means "level encoded".
"""

from __future__ import annotations

from enum import IntEnum

from ..bmt import BRANCHES, SPAN_SIZE
from ..errors import SwarmError

__all__ = [
    "DEFAULT_DOWNLOAD_LEVEL",
    "DEFAULT_UPLOAD_LEVEL",
    "ENCRYPTED_BRANCHES",
    "InvalidLevel",
    "Level",
    "decode_span",
    "encode_level",
    "is_level_encoded",
    "max_shards",
    "parities",
    "replica_count",
]

ENCRYPTED_BRANCHES = BRANCHES // 2  # 64: references of 32-byte address + 32-byte key


class InvalidLevel(SwarmError):
    """A redundancy level outside 0..4."""


class Level(IntEnum):
    NONE = 0
    MEDIUM = 1  # expected 1% chunk retrieval error rate
    STRONG = 2  # 5%
    INSANE = 3  # 10%
    PARANOID = 4  # 50%

    @classmethod
    def of(cls, value: int | Level) -> Level:
        """``Level(value)`` with a typed error for anything outside 0..4."""
        try:
            return cls(int(value))
        except ValueError:
            raise InvalidLevel(f"redundancy level {value!r} is not between 0 and 4") from None


DEFAULT_UPLOAD_LEVEL = Level.MEDIUM
DEFAULT_DOWNLOAD_LEVEL = Level.PARANOID

# (shard thresholds, parity counts), both strictly descending; from Bee's
# level.go (its appendix-F tables 5 and 6).
_PLAIN_TABLES: dict[Level, tuple[tuple[int, ...], tuple[int, ...]]] = {
    Level.MEDIUM: ((95, 69, 47, 29, 15, 6, 2, 1), (9, 8, 7, 6, 5, 4, 3, 2)),
    Level.STRONG: (
        (105, 96, 87, 78, 70, 62, 54, 47, 40, 33, 27, 21, 16, 11, 7, 4, 2, 1),
        (21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4),
    ),
    Level.INSANE: (
        (93, 88, 83, 78, 74, 69, 64, 60, 55, 51, 46, 42, 38, 34, 30, 27, 23, 20, 17, 14, 11, 9, 6, 4, 3, 2, 1),
        (31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5),
    ),
    Level.PARANOID: (
        tuple(range(37, 0, -1)),
        (
            89, 87, 86, 84, 83, 81, 80, 78, 76, 75, 73, 71, 70, 68, 66, 65, 63, 61, 59, 58,
            56, 54, 52, 50, 48, 47, 45, 43, 40, 38, 36, 34, 31, 29, 26, 23, 19,
        ),
    ),
}  # fmt: skip

_ENCRYPTED_TABLES: dict[Level, tuple[tuple[int, ...], tuple[int, ...]]] = {
    Level.MEDIUM: ((47, 34, 23, 14, 7, 3, 1), (9, 8, 7, 6, 5, 4, 3)),
    Level.STRONG: (
        (52, 48, 43, 39, 35, 31, 27, 23, 20, 16, 13, 10, 8, 5, 3, 2, 1),
        (21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5),
    ),
    Level.INSANE: (
        (46, 44, 41, 39, 37, 34, 32, 30, 27, 25, 23, 21, 19, 17, 15, 13, 11, 10, 8, 7, 5, 4, 3, 2, 1),
        (31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 6),
    ),
    Level.PARANOID: (
        tuple(range(18, 0, -1)),
        (87, 84, 81, 78, 75, 71, 68, 65, 61, 58, 54, 50, 47, 43, 38, 34, 29, 23),
    ),
}  # fmt: skip


def _check_tables() -> None:
    for tables in (_PLAIN_TABLES, _ENCRYPTED_TABLES):
        for level, (shards, counts) in tables.items():
            assert len(shards) == len(counts), level
            assert all(a > b for a, b in zip(shards, shards[1:], strict=False)), level
            assert all(a > b for a, b in zip(counts, counts[1:], strict=False)), level


_check_tables()

# Dispersed replicas of the root chunk per level (Bee approximates 0, 2, 4, 5, 19 by powers of two).
_REPLICA_COUNTS = (0, 2, 4, 8, 16)


def parities(level: Level | int, shards: int, encrypted: bool = False) -> int:
    """Parity chunks Bee adds for ``shards`` data chunks under one intermediate chunk (0 for NONE)."""
    level = Level.of(level)
    if level == Level.NONE:
        return 0
    thresholds, counts = (_ENCRYPTED_TABLES if encrypted else _PLAIN_TABLES)[level]
    for threshold, count in zip(thresholds, counts, strict=True):
        if shards >= threshold:
            return count
    return 0


def max_shards(level: Level | int, encrypted: bool = False) -> int:
    """Most data references one intermediate chunk holds at ``level`` (128 / 64 without redundancy)."""
    level = Level.of(level)
    if encrypted:
        # Parity references are 32 bytes, data references 64: the slots left
        # after a full chunk's parities hold half as many data references.
        return (BRANCHES - parities(level, ENCRYPTED_BRANCHES, True)) // 2
    return BRANCHES - parities(level, BRANCHES, False)


def replica_count(level: Level | int) -> int:
    """Dispersed replicas Bee stores of a root chunk uploaded at ``level``."""
    return _REPLICA_COUNTS[Level.of(level)]


def encode_level(span: bytes | bytearray, level: Level | int) -> bytes:
    """``span`` with the level recorded in its most significant byte."""
    if len(span) != SPAN_SIZE:
        raise ValueError(f"span is {len(span)} bytes; must be {SPAN_SIZE}")
    return bytes(span[: SPAN_SIZE - 1]) + bytes([0x80 | Level.of(level)])


def is_level_encoded(span: bytes | bytearray | memoryview) -> bool:
    return span[SPAN_SIZE - 1] > 128


def decode_span(span: bytes | bytearray | memoryview) -> tuple[Level, int]:
    """``(level, length)`` of a span: the level byte (if any) stripped from the length.

    A last byte above 128 whose low bits name no level raises :class:`InvalidLevel`.
    """
    if len(span) < SPAN_SIZE:
        raise ValueError(f"span is {len(span)} bytes; must be {SPAN_SIZE}")
    raw = bytes(span[:SPAN_SIZE])
    if not is_level_encoded(raw):
        return Level.NONE, int.from_bytes(raw, "little")
    return Level.of(raw[SPAN_SIZE - 1] & 0x7F), int.from_bytes(raw[: SPAN_SIZE - 1], "little")
