"""``tree_addresses``: every chunk a reference stands for, as the reference node's traversal reports it.

Bee's own expectations (tests/testdata/bee_traversal_vectors.json) for bytes
trees, single-file and directory manifests; property tests that the walk
names exactly the chunks the splitter wrote (any size, redundancy level,
encryption), SOC roots, and what a missing chunk does.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkstore.swarm.bzz import collection_manifest, file_manifest
from chunkstore.swarm.bzz.layout import CollectionFile
from chunkstore.swarm.file import ChunkMissing, split_bytes
from chunkstore.swarm.mantaray import Manifest
from chunkstore.swarm.redundancy.level import Level
from chunkstore.swarm.soc import parse_soc
from chunkstore.swarm.traversal import tree_addresses
from tests.swarm.filehelpers import MemoryStore, seeded, tree_groups

VECTORS = json.loads((Path(__file__).resolve().parents[1] / "testdata" / "bee_traversal_vectors.json").read_text())


def corpus(size: int) -> bytes:
    text = VECTORS["corpus"].encode()
    return (text * (size // len(text) + 1))[:size]


def upload(store: MemoryStore, data: bytes, **options: object) -> bytes:
    return split_bytes(data, store.put, **options)


def saver(store: MemoryStore):
    return lambda node: upload(store, node)


def hex_counts(addresses) -> Counter[str]:
    return Counter(a.hex() for a in addresses)


@pytest.mark.parametrize("case", VECTORS["bytes"], ids=lambda c: f"{c['size']}B")
def test_bee_bytes_vectors(case: dict) -> None:
    store = MemoryStore()
    ref = upload(store, corpus(case["size"]))
    seen = hex_counts(tree_addresses(ref, store.get))
    assert sum(seen.values()) == case["count"]
    if case["distinct"]:
        assert set(seen) == set(case["hashes"])
    assert set(case["hashes"]) <= set(seen)


@pytest.mark.parametrize("case", VECTORS["files"], ids=lambda c: f"{c['size']}B")
def test_bee_single_file_manifest_vectors(case: dict) -> None:
    store = MemoryStore()
    file_ref = upload(store, corpus(case["size"]))
    manifest = file_manifest(file_ref, case["content_type"], case["filename"], save=saver(store))
    root = manifest.store()
    seen = hex_counts(tree_addresses(root, store.get))
    assert sum(seen.values()) == case["count"] == len(seen)
    assert set(seen) == set(case["hashes"])
    assert root.hex() == case["hashes"][0]


@pytest.mark.parametrize("case", VECTORS["manifests"], ids=lambda c: f"{len(c['files'])}files")
def test_bee_directory_manifest_vectors(case: dict) -> None:
    store = MemoryStore()
    manifest = Manifest.new(save=saver(store))
    for path, size in case["files"]:
        manifest.add(path, upload(store, corpus(size)))
    root = manifest.store()
    seen = hex_counts(tree_addresses(root, store.get))
    assert sum(seen.values()) == case["count"]
    assert set(seen) == set(case["hashes"])


def _tree_chunks(store: MemoryStore) -> set[bytes]:
    """What the splitter wrote, without the root's dispersed replicas (SOCs, not part of the tree)."""
    out = set()
    for address, data in store.chunks.items():
        if len(data) > 4104:
            assert parse_soc(data).address == address
            continue
        out.add(address)
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    size=st.one_of(st.integers(0, 3 * 4096), st.integers(127 * 4096, 131 * 4096 + 5)),
    level=st.sampled_from([Level.NONE, Level.MEDIUM, Level.PARANOID]),
    encrypt=st.booleans(),
    seed=st.integers(0, 2**32),
)
def test_walk_names_every_chunk_the_splitter_wrote_once(size: int, level: Level, encrypt: bool, seed: int) -> None:
    store = MemoryStore()
    ref = upload(store, seeded(seed)(size), level=level, encrypt=encrypt, random_bytes=seeded(seed + 1))
    walked = list(tree_addresses(ref, store.get))
    assert len(walked) == len(set(walked)), "a plain file names each chunk once"
    assert set(walked) == _tree_chunks(store)
    assert all(len(a) == 32 for a in walked)
    assert walked[0] == ref[:32]


def test_walk_reads_intermediates_only() -> None:
    store = MemoryStore()
    ref = upload(store, seeded(1)(130 * 4096))
    walked = list(tree_addresses(ref, store.get))
    root_children = tree_groups(store.chunks, ref)[0][0]
    assert len(root_children) == 2  # 128 leaves under one, 2 under the other: both intermediate
    assert set(store.gets) == {ref, *root_children}  # no leaf is read
    assert len(walked) == 1 + 2 + 130


def test_collection_with_shared_files_names_repeats() -> None:
    store = MemoryStore()
    same = upload(store, b"same content")
    files = [CollectionFile(f"dir/{i}.txt", same, "text/plain", f"{i}.txt") for i in range(3)]
    manifest = collection_manifest(files, index_document="0.txt", save=saver(store))
    root = manifest.store()
    walked = list(tree_addresses(root, store.get))
    assert walked.count(same) == 3
    assert set(walked) == set(store.chunks)


def test_encrypted_manifest_is_followed_with_its_keys() -> None:
    store = MemoryStore()
    rnd = seeded(7)

    def save(node: bytes) -> bytes:
        return upload(store, node, encrypt=True, random_bytes=rnd)

    manifest = Manifest.new(save=save, encrypted=True, key_source=lambda: rnd(32))
    for i in range(3):
        manifest.add(f"f{i}", upload(store, seeded(i)(5000 + i), encrypt=True, random_bytes=rnd))
    root = manifest.store()
    assert len(root) == 64
    walked = list(tree_addresses(root, store.get))
    assert set(walked) == set(store.chunks)
    assert all(len(a) == 32 for a in walked)


def test_soc_root_is_the_chunk_alone() -> None:
    from tests.store.helpers import random_soc

    store = MemoryStore()
    address, data = random_soc(4096)
    store.put(address, data)
    assert list(tree_addresses(address, store.get)) == [address]


def test_missing_leaf_is_named_not_read() -> None:
    store = MemoryStore()
    ref = upload(store, seeded(3)(3 * 4096))
    leaf = tree_groups(store.chunks, ref)[0][0][1]
    del store.chunks[leaf]
    assert leaf in list(tree_addresses(ref, store.get))


def test_missing_intermediate_without_parities_raises() -> None:
    store = MemoryStore()
    ref = upload(store, seeded(4)(130 * 4096))
    inner = tree_groups(store.chunks, ref)[0][0][0]
    del store.chunks[inner]
    with pytest.raises(ChunkMissing):
        list(tree_addresses(ref, store.get))


def test_missing_intermediate_is_rebuilt_from_parities() -> None:
    store = MemoryStore()
    ref = upload(store, seeded(5)(130 * 4096), level=Level.MEDIUM)
    expected = _tree_chunks(store)
    inner = tree_groups(store.chunks, ref)[0][0][0]
    del store.chunks[inner]
    assert set(tree_addresses(ref, store.get)) == expected


def test_missing_root_raises() -> None:
    store = MemoryStore()
    with pytest.raises(ChunkMissing):
        list(tree_addresses(bytes(32), store.get))
