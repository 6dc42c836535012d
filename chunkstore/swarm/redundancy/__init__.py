"""Erasure coding of Bee's file trees: redundancy levels and Reed-Solomon as klauspost/reedsolomon computes it."""

from .level import DEFAULT_DOWNLOAD_LEVEL, DEFAULT_UPLOAD_LEVEL, InvalidLevel, Level, max_shards, parities
from .reedsolomon import ReedSolomonError, encode, reconstruct_data

__all__ = [
    "DEFAULT_DOWNLOAD_LEVEL",
    "DEFAULT_UPLOAD_LEVEL",
    "InvalidLevel",
    "Level",
    "ReedSolomonError",
    "encode",
    "max_shards",
    "parities",
    "reconstruct_data",
]
