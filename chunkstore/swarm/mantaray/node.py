"""The mantaray node: one trie node as the reference node keeps it in memory.

A node holds an optional entry (a file reference), its forks keyed by the
first byte of their prefix, and the obfuscation key its serialisation is
XOR-ed with. Two pieces of a node's state live in its *parent's* fork
record on the wire rather than in the node's own bytes: its type flags and
its metadata. A node loaded from a reference therefore gets those two from
the fork it was reached through, and the root has neither.

``forks is None`` means "known only by reference, not loaded yet", exactly
the reference node's nil map; ``ref`` is set once the node is saved and
cleared when anything below it changes.
"""

from __future__ import annotations

PATH_SEPARATOR = 0x2F  # "/"
OBFUSCATION_KEY_SIZE = 32
PREFIX_MAX_SIZE = 30  # 32-byte fork header minus type and prefix-length bytes
MAX_ENTRY_SIZE = 255  # the header's entry size is one byte

TYPE_VALUE = 2
TYPE_EDGE = 4
TYPE_WITH_PATH_SEPARATOR = 8
TYPE_WITH_METADATA = 16

ZERO_OBFUSCATION_KEY = bytes(OBFUSCATION_KEY_SIZE)


class Fork:
    """An edge: the non-branching path segment ``prefix`` leading to ``node``."""

    __slots__ = ("prefix", "node")

    def __init__(self, prefix: bytes, node: Node) -> None:
        self.prefix = prefix
        self.node = node

    def __repr__(self) -> str:
        return f"Fork({self.prefix!r}, {self.node!r})"


class Node:
    """One trie node; see the module docstring for which fields travel where."""

    __slots__ = ("node_type", "ref_bytes_size", "obfuscation_key", "ref", "entry", "metadata", "forks")

    def __init__(self) -> None:
        self.node_type = 0
        # Width of entries and fork references in this node's serialisation; 0 = not known yet.
        self.ref_bytes_size = 0
        self.obfuscation_key: bytes | None = None
        self.ref: bytes | None = None
        self.entry = b""
        self.metadata: dict[str, str] | None = None
        self.forks: dict[int, Fork] | None = {}

    @classmethod
    def from_reference(cls, reference: bytes) -> Node:
        """A node known only by its reference; loaded on first use."""
        node = cls()
        node.ref = bytes(reference)
        node.forks = None
        return node

    def __repr__(self) -> str:
        state = "unloaded" if self.forks is None else f"{len(self.forks)} forks"
        ref = self.ref.hex() if self.ref is not None else None
        return f"Node(type={self.node_type:#04x}, entry={self.entry.hex()!r}, ref={ref}, {state})"

    @property
    def is_value(self) -> bool:
        return self.node_type & TYPE_VALUE == TYPE_VALUE

    @property
    def is_edge(self) -> bool:
        return self.node_type & TYPE_EDGE == TYPE_EDGE

    @property
    def is_with_path_separator(self) -> bool:
        return self.node_type & TYPE_WITH_PATH_SEPARATOR == TYPE_WITH_PATH_SEPARATOR

    @property
    def is_with_metadata(self) -> bool:
        return self.node_type & TYPE_WITH_METADATA == TYPE_WITH_METADATA

    def set_obfuscation_key(self, key: bytes) -> None:
        """Copy ``key`` into a 32-byte key (shorter keys are zero-padded, as the reference does)."""
        self.obfuscation_key = bytes(key[:OBFUSCATION_KEY_SIZE]).ljust(OBFUSCATION_KEY_SIZE, b"\0")

    def update_path_separator_flag(self, path: bytes) -> None:
        # Set only when a separator occurs after the first byte: a prefix that merely starts with "/" does not count.
        self.set_path_separator_flag(path.find(PATH_SEPARATOR) > 0)

    def set_path_separator_flag(self, present: bool) -> None:
        if present:
            self.node_type |= TYPE_WITH_PATH_SEPARATOR
        else:
            self.node_type &= ~TYPE_WITH_PATH_SEPARATOR & 0xFF

    def child_like(self) -> Node:
        """A fresh node inheriting this node's key and entry width, as new trie nodes do."""
        child = Node()
        if self.obfuscation_key:
            child.set_obfuscation_key(self.obfuscation_key)
        child.ref_bytes_size = self.ref_bytes_size
        return child
