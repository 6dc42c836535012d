"""Path operations on a mantaray trie: lookup, add, remove, prefix test, walk.

Nodes known only by reference are loaded through the caller's ``load``
callable the first time a path goes through them. ``add`` follows the
reference node's algorithm step for step (which node is split where, which
type flags each node gets, which entry width it inherits), because those
choices are serialised and so decide the manifest's reference.

Where the reference node loses data this code does not: ``remove`` deletes
only the entry at the path (the reference drops the whole subtree below a
matching fork), and a node loaded by an earlier lookup is re-saved after a
change (the reference keeps its stale reference).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .errors import InvalidEntry, InvalidPath, ManifestNotFound
from .marshal import unmarshal_node
from .node import (
    MAX_ENTRY_SIZE,
    PATH_SEPARATOR,
    PREFIX_MAX_SIZE,
    TYPE_EDGE,
    TYPE_VALUE,
    TYPE_WITH_METADATA,
    Fork,
    Node,
)

Loader = Callable[[bytes], bytes]


def ensure_loaded(node: Node, load: Loader | None) -> dict[int, Fork]:
    """The node's forks, loading its serialisation first if it is known only by reference."""
    if node.forks is None:
        if node.ref is None:
            node.forks = {}
        else:
            if load is None:
                raise InvalidPath("the manifest needs a loader to read stored nodes")
            unmarshal_node(node, load(node.ref), len(node.ref))
    assert node.forks is not None
    return node.forks


def _common_length(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


# The walks below keep an offset into the path rather than slicing off what they have walked: a
# path can be a megabyte (a tar's PAX name), and slicing at every 30-byte edge copied it edge by
# edge, quadratic in its length (1.3 s for one 1 MiB name).


def lookup_node(root: Node, path: bytes, load: Loader | None) -> Node:
    """The node at exactly ``path`` (raises ``ManifestNotFound``); every node on the way is loaded."""
    node, at = root, 0
    while True:
        forks = ensure_loaded(node, load)
        if at == len(path):
            return node
        fork = forks.get(path[at])
        if fork is None or not path.startswith(fork.prefix, at):
            raise ManifestNotFound(path)
        node, at = fork.node, at + len(fork.prefix)


def lookup(root: Node, path: bytes, load: Loader | None) -> bytes:
    """The entry at ``path``; a non-empty path must end on a value node."""
    node = lookup_node(root, path, load)
    if path and not node.is_value:
        raise ManifestNotFound(path)
    return node.entry


def has_prefix(root: Node, path: bytes, load: Loader | None) -> bool:
    """Whether some stored path starts with ``path`` (the reference node's ``HasPrefix``)."""
    node, at = root, 0
    while True:
        forks = ensure_loaded(node, load)
        if at == len(path):
            return True
        fork = forks.get(path[at])
        if fork is None:
            return False
        if path.startswith(fork.prefix, at):
            node, at = fork.node, at + len(fork.prefix)
            continue
        return fork.prefix.startswith(path[at:])


def _check_entry_width(root: Node, path: bytes, width: int, load: Loader | None) -> None:
    """Refuse an entry whose width differs from a node's on the path, before anything changes.

    The reference node checks each existing node the add passes through and
    fails midway, leaving a half-applied change; checking first keeps the
    trie untouched on refusal. Nodes the add creates inherit a checked width.
    """
    if width > MAX_ENTRY_SIZE:
        raise InvalidEntry(f"entry is {width} bytes; at most {MAX_ENTRY_SIZE}")
    node, at = root, 0
    while True:
        if width and node.ref_bytes_size and node.ref_bytes_size != width:
            raise InvalidEntry(f"entry is {width} bytes; this manifest's entries are {node.ref_bytes_size}")
        if at == len(path):
            return
        forks = ensure_loaded(node, load)
        fork = forks.get(path[at])
        if fork is None or not path.startswith(fork.prefix, at):
            return
        node, at = fork.node, at + len(fork.prefix)


def add(root: Node, path: bytes, entry: bytes, metadata: dict[str, str] | None, load: Loader | None) -> None:
    """Add or replace the entry at ``path`` (the reference node's ``Add``, iteratively)."""
    if metadata and not path:
        raise InvalidPath("the root node cannot carry metadata: it has no fork to store it in")
    _check_entry_width(root, path, len(entry), load)
    last_separator = path.rfind(PATH_SEPARATOR)
    node, at = root, 0
    while True:
        if node.ref_bytes_size == 0 and entry:
            node.ref_bytes_size = len(entry)
        forks = ensure_loaded(node, load)
        node.ref = None
        if at == len(path):
            node.entry = entry
            node.node_type |= TYPE_VALUE
            if metadata:
                node.metadata = dict(metadata)
                node.node_type |= TYPE_WITH_METADATA
            return
        first = path[at]
        fork = forks.get(first)
        if fork is None:
            child = node.child_like()
            if len(path) - at > PREFIX_MAX_SIZE:
                prefix = path[at : at + PREFIX_MAX_SIZE]
                child.update_path_separator_flag(prefix)
                forks[first] = Fork(prefix, child)
                node.node_type |= TYPE_EDGE
                node, at = child, at + PREFIX_MAX_SIZE
                continue
            rest = path[at:]  # at most PREFIX_MAX_SIZE bytes
            child.entry = entry
            if metadata:
                child.metadata = dict(metadata)
                child.node_type |= TYPE_WITH_METADATA
            child.node_type |= TYPE_VALUE
            child.update_path_separator_flag(rest)
            forks[first] = Fork(rest, child)
            node.node_type |= TYPE_EDGE
            return
        common = _common_length(fork.prefix, path[at : at + len(fork.prefix)])
        tail = fork.prefix[common:]
        child = fork.node
        if tail:
            # Split the edge: a new node takes the common part and the old child moves under it.
            child = node.child_like()
            fork.node.update_path_separator_flag(tail)
            assert child.forks is not None
            child.forks[tail[0]] = Fork(tail, fork.node)
            child.node_type |= TYPE_EDGE
            if len(path) - at == common:
                child.node_type |= TYPE_VALUE
        # The reference flags the node on the whole remaining path here, not on its prefix: the flag says
        # the remaining path's first separator comes after its first byte (update_path_separator_flag).
        child.set_path_separator_flag(first != PATH_SEPARATOR and last_separator > at)
        forks[first] = Fork(path[at : at + common], child)
        node.node_type |= TYPE_EDGE
        node, at = child, at + common


def _path_to(root: Node, path: bytes, load: Loader | None) -> list[tuple[Node, Fork]]:
    """(parent, fork) pairs from the root down to the node at exactly ``path``."""
    chain: list[tuple[Node, Fork]] = []
    node, at = root, 0
    while at < len(path):
        forks = ensure_loaded(node, load)
        fork = forks.get(path[at])
        if fork is None or not path.startswith(fork.prefix, at):
            raise ManifestNotFound(path)
        chain.append((node, fork))
        node, at = fork.node, at + len(fork.prefix)
    return chain


def remove(root: Node, path: bytes, load: Loader | None) -> None:
    """Remove the entry at ``path``; paths below it stay. Raises ``ManifestNotFound``."""
    if not path:
        raise InvalidPath("cannot remove the empty path")
    chain = _path_to(root, path, load)
    target = chain[-1][1].node
    if not target.is_value:
        raise ManifestNotFound(path)
    forks = ensure_loaded(target, load)
    for parent, _ in chain:
        parent.ref = None
    if forks:
        # Still a directory of other paths: keep the node, drop only its value.
        target.ref = None
        target.entry = b""
        target.metadata = None
        target.node_type &= ~(TYPE_VALUE | TYPE_WITH_METADATA) & 0xFF
        return
    _prune(chain, load)


def _prune(chain: list[tuple[Node, Fork]], load: Loader | None) -> None:
    """Drop the emptied leaf, then tidy ancestors left without a value."""
    parent, fork = chain.pop()
    forks = ensure_loaded(parent, load)
    del forks[fork.prefix[0]]
    while chain and not parent.is_value:
        grand, via = chain.pop()
        if not forks:
            del ensure_loaded(grand, load)[via.prefix[0]]
        elif len(forks) == 1:
            (only,) = forks.values()
            merged = via.prefix + only.prefix
            if len(merged) > PREFIX_MAX_SIZE:
                return
            # A pass-through node adds nothing: fold its single edge into the edge above.
            only.node.update_path_separator_flag(merged)
            ensure_loaded(grand, load)[via.prefix[0]] = Fork(merged, only.node)
            return
        else:
            return
        parent, forks = grand, ensure_loaded(grand, load)
    if not forks:
        parent.node_type &= ~TYPE_EDGE & 0xFF


def walk(root: Node, load: Loader | None, start: bytes = b"") -> Iterator[tuple[bytes, Node]]:
    """Every node at or below the node at ``start``, depth first, forks in byte order.

    Yields ``(path, node)``; the paths of intermediate nodes are the
    concatenated prefixes, as the reference node's ``WalkNode`` reports them.
    """
    first = lookup_node(root, start, load)
    stack = [(start, first)]
    while stack:
        path, node = stack.pop()
        forks = ensure_loaded(node, load)
        yield path, node
        for b in sorted(forks, reverse=True):
            fork = forks[b]
            stack.append((path + fork.prefix, fork.node))
