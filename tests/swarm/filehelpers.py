"""Shared helpers of the file-tree tests: Bee's vector data, an in-memory chunk store, tree walking."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

from chunkstore.swarm.bmt import chunk_hash

TESTDATA = Path(__file__).resolve().parents[1] / "testdata"
FILE_VECTORS = json.loads((TESTDATA / "bee_file_vectors.json").read_text())


def sequential(n: int) -> bytes:
    """Bee's test data: byte i is i % 255."""
    return (np.arange(n, dtype=np.int64) % 255).astype(np.uint8).tobytes()


def seeded(seed: int):
    rng = random.Random(seed)
    return lambda n: rng.randbytes(n)


class MemoryStore:
    """Chunks by address, in arrival order; ``get`` raises ``KeyError`` when missing, as ChunkStore does."""

    def __init__(self) -> None:
        self.chunks: dict[bytes, bytes] = {}
        self.order: list[bytes] = []
        self.gets: list[bytes] = []

    def put(self, address: bytes, data: bytes) -> None:
        assert len(address) == 32 and isinstance(data, bytes)
        self.chunks[address] = data
        self.order.append(address)

    def get(self, address: bytes) -> bytes:
        self.gets.append(address)
        return self.chunks[address]


def assert_all_chunks_verify(store: MemoryStore) -> None:
    from chunkstore.swarm.soc import parse_soc

    for address, data in store.chunks.items():
        if len(data) > 4104:  # a replica SOC
            assert parse_soc(data).address == address
        else:
            assert chunk_hash(data) == address, address.hex()


def tree_groups(chunks: dict[bytes, bytes], reference: bytes) -> list[tuple[list[bytes], list[bytes]]]:
    """Every intermediate chunk's (data child addresses, parity addresses), root first, walking the whole tree."""
    from chunkstore.swarm.encryption import decrypt_chunk
    from chunkstore.swarm.file.span import (
        chunk_payload_size,
        intermediate_payload_size,
        reference_count,
        split_references,
    )
    from chunkstore.swarm.redundancy.level import decode_span

    encrypted = len(reference) == 64
    out = []
    stack = [reference]
    while stack:
        ref = stack.pop()
        data = chunks[ref[:32]]
        span_raw, payload = decrypt_chunk(data, ref[32:]) if encrypted else (data[:8], data[8:])
        level, span = decode_span(span_raw)
        if span <= 4096:
            continue
        if encrypted:
            payload = payload[: intermediate_payload_size(span, level, True)]
        payload = payload[: chunk_payload_size(payload)]
        refs, parity = split_references(payload, reference_count(span, level, encrypted)[1], encrypted)
        out.append(([r[:32] for r in refs], list(parity)))
        stack.extend(refs)
    return out
