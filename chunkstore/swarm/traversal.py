"""Every chunk a reference stands for: what pinning it must keep (the reference node's pkg/traversal).

``tree_addresses(reference, get)`` yields the address of each chunk of:

- a single-owner chunk: that chunk alone (a plain reference whose chunk is a
  valid SOC, as the reference checks first);
- a manifest: every node of the mantaray trie and every entry's file, each
  as the whole bytes tree it is stored as (``Manifest.references()``); a
  root whose file is at most one chunk long and reads as a manifest node is
  taken for a manifest, as the reference's heuristic does;
- anything else: the bytes tree, every intermediate, leaf and parity chunk
  (``Joiner.chunk_addresses``).

Encrypted (64-byte) references are followed with their keys; the addresses
yielded are always the 32-byte chunk addresses. Only intermediate chunks and
manifest nodes are read; a missing one raises the joiner's ``ChunkMissing``
(a missing leaf is the caller's to find). An address may come more than
once (the same file under two paths); callers that count chunks dedupe.
Root replicas (dispersed SOCs of an erasure-coded upload) are not part of
the tree, as in the reference.
"""

from __future__ import annotations

from collections.abc import Iterator

from .cac import is_valid_cac
from .constants import ADDRESS_SIZE
from .errors import InvalidChunk, InvalidSignature
from .file import Joiner
from .file.joiner import Getter
from .mantaray import InvalidManifest, Manifest
from .redundancy.level import DEFAULT_DOWNLOAD_LEVEL, Level
from .soc import validate_soc

# What a manifest node's bytes tree is at most: the reference treats a longer root as a plain file.
MANIFEST_ROOT_MAX = 4096


def tree_addresses(reference: bytes, get: Getter, *, level: Level | int = DEFAULT_DOWNLOAD_LEVEL) -> Iterator[bytes]:
    """Every chunk address of the content at ``reference`` (see the module docstring)."""
    reference = bytes(reference)
    if len(reference) == ADDRESS_SIZE and _is_soc(reference, get):
        yield reference
        return
    joiner = Joiner(reference, get, replica_level=level)
    if joiner.size <= MANIFEST_ROOT_MAX:
        manifest = _open_manifest(reference, joiner, get, level)
        if manifest is not None:
            for ref in manifest.references():
                yield from Joiner(ref, get, replica_level=level).chunk_addresses()
            return
    yield from joiner.chunk_addresses()


def _is_soc(address: bytes, get: Getter) -> bool:
    try:
        data = get(address)
    except KeyError:
        return False
    if data is None or is_valid_cac(address, data):
        return False
    try:
        validate_soc(address, data)
    except (InvalidChunk, InvalidSignature):
        return False
    return True


def _open_manifest(reference: bytes, joiner: Joiner, get: Getter, level: Level | int) -> Manifest | None:
    """The manifest at ``reference`` if its root node reads as one, else None (a plain file)."""
    root = joiner.read_all()

    def load(ref: bytes) -> bytes:
        if ref == reference:
            return root
        return Joiner(ref, get, replica_level=level).read_all()

    manifest = Manifest.open(reference, load=load)
    try:
        manifest.lookup_node(b"")  # loads (unmarshals) the root node only
    except InvalidManifest:
        return None
    return manifest

