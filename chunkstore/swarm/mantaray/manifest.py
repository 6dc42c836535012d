"""``Manifest``: a mantaray trie with its persistence, the reference node's manifest interface.

Persistence is two caller-supplied callables:

* ``load(reference) -> bytes``: the serialised node stored under
  ``reference`` (32 bytes, or 64 for an encrypted upload); errors it raises
  propagate unchanged (a missing chunk is the caller's error type);
* ``save(data) -> reference``: store one serialised node, return its
  reference. The reference node uploads each node as "bytes" through the
  splitter with the upload's redundancy level and encryption.

A plain manifest has the zero obfuscation key on every node (so equal input
gives equal references); an encrypted one draws a key per node from
``key_source`` (default ``os.urandom``), as the reference does.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from .errors import InvalidPath, ManifestNotFound
from .marshal import KeySource
from .node import OBFUSCATION_KEY_SIZE, ZERO_OBFUSCATION_KEY, Node
from .persist import Saver, save_trie
from .trie import Loader, add, has_prefix, lookup_node, remove, walk


def _random_key() -> bytes:
    return os.urandom(OBFUSCATION_KEY_SIZE)


def path_bytes(path: str | bytes) -> bytes:
    """A manifest path as bytes: ``str`` is UTF-8 (surrogate-escaped bytes pass through)."""
    if isinstance(path, bytes | bytearray | memoryview):
        return bytes(path)
    try:
        return path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise InvalidPath(f"path {path!r} is not encodable as UTF-8: {exc}") from None


@dataclass(frozen=True)
class Entry:
    """What a path resolves to: the file reference and the fork's metadata."""

    reference: bytes
    metadata: Mapping[str, str] = field(default_factory=dict)


class Manifest:
    """A mantaray manifest; create with ``Manifest.new`` or open with ``Manifest.open``."""

    def __init__(self, root: Node, *, load: Loader | None, save: Saver | None, key_source: KeySource) -> None:
        self.root = root
        self._load = load
        self._save = save
        self._key_source = key_source
        # Nodes this instance saved, so reading them back does not go through the caller.
        self._saved: dict[bytes, bytes] = {}

    @classmethod
    def new(
        cls,
        *,
        save: Saver | None = None,
        load: Loader | None = None,
        encrypted: bool = False,
        key_source: KeySource | None = None,
    ) -> Manifest:
        root = Node()
        if not encrypted:
            # Copied into every node created below the root.
            root.set_obfuscation_key(ZERO_OBFUSCATION_KEY)
        return cls(root, load=load, save=save, key_source=key_source or _random_key)

    @classmethod
    def open(
        cls,
        reference: bytes,
        *,
        load: Loader,
        save: Saver | None = None,
        key_source: KeySource | None = None,
    ) -> Manifest:
        return cls(Node.from_reference(reference), load=load, save=save, key_source=key_source or _random_key)

    @property
    def reference(self) -> bytes | None:
        """The root reference after ``store`` (or the one opened); ``None`` while changed."""
        return self.root.ref

    def _loader(self, reference: bytes) -> bytes:
        cached = self._saved.get(reference)
        if cached is not None:
            return cached
        if self._load is None:
            raise InvalidPath("this manifest has no loader for stored nodes")
        return self._load(reference)

    def _saver(self, data: bytes) -> bytes:
        if self._save is None:
            raise InvalidPath("this manifest has no saver")
        reference = bytes(self._save(data))
        self._saved[reference] = data
        return reference

    def add(self, path: str | bytes, reference: bytes, metadata: Mapping[str, str] | None = None) -> None:
        """Add or replace the entry at ``path``; empty metadata is not stored (as the reference)."""
        add(self.root, path_bytes(path), bytes(reference), dict(metadata) if metadata else None, self._loader)

    def remove(self, path: str | bytes) -> None:
        """Remove the entry at ``path`` (other paths stay); ``ManifestNotFound`` if there is none."""
        remove(self.root, path_bytes(path), self._loader)

    def lookup_node(self, path: str | bytes) -> Node:
        return lookup_node(self.root, path_bytes(path), self._loader)

    def lookup(self, path: str | bytes) -> Entry:
        """The entry at ``path``, which must be a value node; else ``ManifestNotFound``."""
        p = path_bytes(path)
        node = lookup_node(self.root, p, self._loader)
        if not node.is_value:
            raise ManifestNotFound(p)
        return Entry(node.entry, dict(node.metadata or {}))

    def has_prefix(self, path: str | bytes) -> bool:
        return has_prefix(self.root, path_bytes(path), self._loader)

    def store(self) -> bytes:
        """Save all changed nodes; returns the root reference."""
        return save_trie(self.root, self._saver, self._key_source)

    def walk(self, start: str | bytes = b"") -> Iterator[tuple[bytes, Node]]:
        """Every node at or below ``start`` as ``(path, node)``, depth first in byte order."""
        return walk(self.root, self._loader, path_bytes(start))

    def entries(self) -> Iterator[tuple[bytes, Entry]]:
        """Every value path with its entry, in byte order of the paths."""
        for path, node in self.walk():
            if node.is_value and path:
                yield path, Entry(node.entry, dict(node.metadata or {}))

    def references(self) -> Iterator[bytes]:
        """Every stored node's reference and every non-zero entry (what pinning must keep).

        The manifest must be stored. All-zero and empty entries (metadata-only
        ``/`` nodes) are skipped, as the reference node's traversal skips them.
        """
        for _, node in self.walk():
            if node.ref is not None:
                yield node.ref
            if node.is_value and any(node.entry):
                yield node.entry
