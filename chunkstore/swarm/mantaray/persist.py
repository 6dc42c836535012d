"""Saving a trie bottom-up through the caller's ``save`` callable.

``save(data) -> reference`` stores one serialised node and returns its
reference (the reference node stores each node as a "bytes" upload through
the splitter, so the reference is that upload's root: 32 bytes, or 64 when
encrypted). Children are saved before their parent because the parent's
serialisation holds their references.

As in the reference node, a saved node drops its in-memory children
(``forks = None``): later operations read them back through ``load``. That
is not only memory hygiene: nodes read back start with entry width 0 until
an entry passes through them, and nodes created under them inherit that
width, which is serialised; an add after a store must see the same state
the reference node would.
"""

from __future__ import annotations

from collections.abc import Callable

from .marshal import KeySource, marshal_node
from .node import Node

Saver = Callable[[bytes], bytes]


def save_trie(root: Node, save: Saver, key_source: KeySource) -> bytes:
    """Save every unsaved node under ``root`` (post-order) and return the root's reference."""
    if root.ref is not None:
        return root.ref
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if node.ref is not None:
            continue
        if not children_done:
            stack.append((node, True))
            for fork in (node.forks or {}).values():
                if fork.node.ref is None:
                    stack.append((fork.node, False))
            continue
        data = marshal_node(node, key_source)
        node.ref = bytes(save(data))
        node.forks = None
    return _saved_ref(root)


def _saved_ref(node: Node) -> bytes:
    # A function of its own: the caller narrowed root.ref to None before the loop saved it.
    if node.ref is None:
        raise AssertionError("save_trie left the root unsaved")
    return node.ref
