"""Shared helpers of the manifest, bzz and feed tests: in-memory node stores and test data."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from chunkstore.swarm.cac import make_cac

TESTDATA = Path(__file__).resolve().parent.parent / "testdata" / "manifest"


def read_vectors(name: str) -> Any:
    return json.loads((TESTDATA / name).read_text(encoding="utf-8"))


class ChunkNodes:
    """Nodes saved as single content-addressed chunks, as a node under 4 KiB is in Swarm."""

    def __init__(self) -> None:
        self.nodes: dict[bytes, bytes] = {}
        self.loads = 0

    def save(self, data: bytes) -> bytes:
        address, _ = make_cac(data)
        self.nodes[address] = bytes(data)
        return address

    def load(self, reference: bytes) -> bytes:
        self.loads += 1
        try:
            return self.nodes[bytes(reference)]
        except KeyError:
            raise LookupError(f"no node {bytes(reference).hex()}") from None


class HashNodes(ChunkNodes):
    """Nodes of any size under their sha256, as bee's mantaray tests store them."""

    def save(self, data: bytes) -> bytes:
        address = hashlib.sha256(data).digest()
        self.nodes[address] = bytes(data)
        return address


def padded(path: bytes) -> bytes:
    """bee's test entries: the path left-padded with zero bytes to 32 bytes."""
    return path.rjust(32, b"\0")


class WideNodes(ChunkNodes):
    """Nodes under 64-byte references, the width of encrypted references."""

    def save(self, data: bytes) -> bytes:
        address = hashlib.sha512(data).digest()
        self.nodes[address] = bytes(data)
        return address
