"""Helpers of the pin, cache and tag tests: uploading whole trees into a store, reading its holds."""

from __future__ import annotations

import os

from chunkstore.reserve import ReserveStore
from chunkstore.store.store import ChunkStore, Holds, PutResult
from chunkstore.swarm.file import split_bytes
from chunkstore.swarm.mantaray import Manifest
from tests.store.helpers import Stamper


def tree_chunks(data: bytes, **options: object) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """(reference, [(address, chunk data)]) of ``data`` split as Bee does (``options`` as for the splitter)."""
    chunks: list[tuple[bytes, bytes]] = []
    ref = split_bytes(data, lambda a, d: chunks.append((a, d)), **options)
    return ref, chunks


def put_chunks(
    store: ChunkStore, stamper: Stamper, chunks: list[tuple[bytes, bytes]], holds: Holds | None = None
) -> list[PutResult]:
    return store.put_many([(d, stamper.stamp(a)) for a, d in chunks], holds=holds)


def upload(
    store: ChunkStore, stamper: Stamper, data: bytes, holds: Holds | None = None, **options: object
) -> tuple[bytes, set[bytes]]:
    """Split, stamp and store ``data``; returns its reference and the addresses of its chunks."""
    ref, chunks = tree_chunks(data, **options)
    put_chunks(store, stamper, chunks, holds)
    return ref, {a for a, _ in chunks}


def upload_manifest(store: ChunkStore, stamper: Stamper, files: dict[str, bytes]) -> tuple[bytes, set[bytes]]:
    """A directory manifest of ``files`` (path -> content), every chunk stored; (root, addresses)."""
    addresses: set[bytes] = set()

    def save(node: bytes) -> bytes:
        ref, chunks = tree_chunks(node)
        put_chunks(store, stamper, chunks)
        addresses.update(a for a, _ in chunks)
        return ref

    manifest = Manifest.new(save=save)
    for path, content in files.items():
        ref, chunks = tree_chunks(content)
        put_chunks(store, stamper, chunks)
        addresses.update(a for a, _ in chunks)
        manifest.add(path, ref)
    return manifest.store(), addresses


def pin_rows(store: ChunkStore) -> set[tuple[bytes, bytes]]:
    """Every (address, pin id) pin row, read from both mirror images (which must agree)."""
    refs, sets = set(), set()
    for shard in store.shards:
        with shard.env.begin() as txn:
            refs |= {(bytes(k[:32]), bytes(k[32:])) for k in txn.cursor(db=shard.pinrefs).iternext(values=False)}
            sets |= {(bytes(k[8:]), bytes(k[:8])) for k in txn.cursor(db=shard.pinsets).iternext(values=False)}
    assert refs == sets
    return refs


def cached(store: ChunkStore) -> set[bytes]:
    out = set()
    for shard in store.shards:
        with shard.env.begin() as txn:
            out |= {bytes(k) for k in txn.cursor(db=shard.cache).iternext(values=False)}
    return out


def far_address_data(overlay: bytes, radius: int, near: bool, size: int = 64) -> tuple[bytes, bytes]:
    """A CAC whose proximity to ``overlay`` is below ``radius`` (``near=False``) or at least it."""
    from chunkstore.swarm.cac import make_cac
    from chunkstore.swarm.proximity import proximity

    while True:
        addr, data = make_cac(os.urandom(size))
        if (proximity(overlay, addr) >= radius) == near:
            return addr, data


def store_with_radius(path: str, overlay: bytes, radius: int, **options: object) -> ReserveStore:
    from chunkstore.reserve import ReserveOptions

    store = ReserveStore(path, overlay=overlay, reserve=ReserveOptions(**options))  # type: ignore[arg-type]
    store.reserve.set_radius(radius)
    return store
