"""Mantaray manifests: the path trie the reference node stores collections and feeds in."""

from .errors import (
    InvalidEntry,
    InvalidManifest,
    InvalidPath,
    ManifestError,
    ManifestNotFound,
    ManifestNotSaved,
)
from .manifest import Entry, Manifest, path_bytes
from .marshal import VERSION_01_HASH, VERSION_02_HASH, marshal_node, unmarshal_node
from .metadata import decode_metadata, encode_metadata
from .node import (
    PATH_SEPARATOR,
    TYPE_EDGE,
    TYPE_VALUE,
    TYPE_WITH_METADATA,
    TYPE_WITH_PATH_SEPARATOR,
    ZERO_OBFUSCATION_KEY,
    Fork,
    Node,
)
from .persist import save_trie
from .trie import add, has_prefix, lookup, lookup_node, remove, walk

__all__ = [
    "Entry",
    "Fork",
    "InvalidEntry",
    "InvalidManifest",
    "InvalidPath",
    "Manifest",
    "ManifestError",
    "ManifestNotFound",
    "ManifestNotSaved",
    "Node",
    "PATH_SEPARATOR",
    "TYPE_EDGE",
    "TYPE_VALUE",
    "TYPE_WITH_METADATA",
    "TYPE_WITH_PATH_SEPARATOR",
    "VERSION_01_HASH",
    "VERSION_02_HASH",
    "ZERO_OBFUSCATION_KEY",
    "add",
    "decode_metadata",
    "encode_metadata",
    "has_prefix",
    "lookup",
    "lookup_node",
    "marshal_node",
    "path_bytes",
    "remove",
    "save_trie",
    "unmarshal_node",
    "walk",
]
