"""Binary node format, version 0.2 (written and read) and 0.1 (read).

::

    obfuscation key (32) | XOR-ed with the key, repeated:
        version hash (31) | entry size (1) | entry (entry size) | fork bitmap (32) | forks...
    fork:  type (1) | prefix length (1) | prefix (30, zero padded) | child reference
           [ | metadata size (2, BE) | metadata JSON padded with "\\n" ]   when the type has TYPE_WITH_METADATA

The version hash is the first 31 bytes of ``keccak("mantaray:0.2")``. Forks
are written in ascending order of their first byte, which is also the bit
order of the bitmap (bit ``b % 8`` of byte ``b // 8``).

Two writers are read:

* the reference node (Go), whose fork references are ``entry size`` wide;
  a node whose entry size is 0 is read as having no forks at all, so Go
  only writes 0 for leaves (a single-file upload's metadata-only ``/``);
* bee-js 12 (``MantarayNode``), which writes entry size 0 for any node whose
  path is ``/`` and has no target, *with* its forks, whose references it
  reads at the width of the reference the node was loaded by. So a node with
  entry size 0 and a non-empty bitmap is read bee-js's way here (where Go
  would silently drop the forks).
"""

from __future__ import annotations

from collections.abc import Callable

from chunkstore.swarm.keccak import keccak256

from .errors import InvalidEntry, InvalidManifest, ManifestNotSaved
from .metadata import decode_metadata, encode_metadata
from .node import (
    MAX_ENTRY_SIZE,
    OBFUSCATION_KEY_SIZE,
    PREFIX_MAX_SIZE,
    TYPE_EDGE,
    TYPE_WITH_METADATA,
    Fork,
    Node,
)

VERSION_HASH_SIZE = 31
HEADER_SIZE = OBFUSCATION_KEY_SIZE + VERSION_HASH_SIZE + 1  # 64
FORK_PRE_REFERENCE_SIZE = 32  # type, prefix length, 30-byte prefix
METADATA_SIZE_BYTES = 2
MAX_METADATA_SIZE = 0xFFFF
VERSION_01_HASH = keccak256(b"mantaray:0.1")[:VERSION_HASH_SIZE]
VERSION_02_HASH = keccak256(b"mantaray:0.2")[:VERSION_HASH_SIZE]
_BITMAP_SIZE = 32
_ZERO_BITMAP = bytes(_BITMAP_SIZE)

KeySource = Callable[[], bytes]


def xor_with_key(data: bytes, key: bytes) -> bytes:
    """XOR ``data`` with ``key`` repeated (the node body's obfuscation; its own inverse)."""
    if not data or not any(key):
        return bytes(data)
    reps = -(-len(data) // len(key))
    stream = (key * reps)[: len(data)]
    return (int.from_bytes(data, "big") ^ int.from_bytes(stream, "big")).to_bytes(len(data), "big")


def padded_metadata(metadata: dict[str, str] | None) -> bytes:
    """``size(2, BE) | JSON | "\\n" padding`` exactly as the reference pads it.

    The padding makes ``2 + len`` a multiple of 32; when it already is one
    (and is above 32), the reference still appends a full 32 newlines.
    """
    # A node flagged with metadata but holding none serialises Go's nil map.
    raw = encode_metadata(metadata) if metadata is not None else b"null"
    with_size = len(raw) + METADATA_SIZE_BYTES
    if with_size < OBFUSCATION_KEY_SIZE:
        raw += b"\n" * (OBFUSCATION_KEY_SIZE - with_size)
    elif with_size > OBFUSCATION_KEY_SIZE:
        raw += b"\n" * (OBFUSCATION_KEY_SIZE - with_size % OBFUSCATION_KEY_SIZE)
    if len(raw) > MAX_METADATA_SIZE:
        raise InvalidEntry(f"metadata is {len(raw)} bytes serialised; at most {MAX_METADATA_SIZE}")
    return len(raw).to_bytes(METADATA_SIZE_BYTES, "big") + raw


def _fork_bytes(fork: Fork) -> bytes:
    child = fork.node
    if child.ref is None:
        raise ManifestNotSaved(f"fork {fork.prefix!r} has no reference: save children before marshalling")
    out = bytes([child.node_type, len(fork.prefix)]) + fork.prefix.ljust(PREFIX_MAX_SIZE, b"\0") + child.ref
    if child.is_with_metadata:
        out += padded_metadata(child.metadata)
    return out


def _bitmap(keys: list[int]) -> bytes:
    bits = bytearray(_BITMAP_SIZE)
    for b in keys:
        bits[b >> 3] |= 1 << (b & 7)
    return bytes(bits)


def marshal_node(node: Node, key_source: KeySource) -> bytes:
    """Serialise ``node`` (whose children are saved) as the reference node writes it.

    Like the reference, this settles two fields of ``node`` in place: the
    entry width, if never set, is taken from the entry or else from the first
    fork's reference; a node without an obfuscation key gets one from
    ``key_source`` (plain manifests carry the zero key from their root).
    """
    if node.forks is None:
        raise ManifestNotSaved("cannot marshal a node that is not loaded")
    keys = sorted(node.forks)
    if node.ref_bytes_size == 0:
        if node.entry:
            node.ref_bytes_size = len(node.entry)
        else:
            for b in keys:
                ref = node.forks[b].node.ref
                if ref:
                    node.ref_bytes_size = len(ref)
                    break
    size = node.ref_bytes_size
    if size > MAX_ENTRY_SIZE:
        raise InvalidEntry(f"entry size {size} does not fit the one-byte header field")
    forks = [_fork_bytes(node.forks[b]) for b in keys]
    for b in keys:
        ref_len = len(node.forks[b].node.ref or b"")
        if size and ref_len != size:
            # Readers take fork references at the entry width; a mismatch would be unreadable.
            raise InvalidEntry(f"fork reference is {ref_len} bytes but the node's entry width is {size}")
    if not node.obfuscation_key:
        key = bytes(key_source())
        if len(key) != OBFUSCATION_KEY_SIZE:
            raise InvalidEntry(f"obfuscation key source gave {len(key)} bytes; need {OBFUSCATION_KEY_SIZE}")
        node.obfuscation_key = key
    key = node.obfuscation_key
    entry = node.entry[:size].ljust(size, b"\0")
    body = VERSION_02_HASH + bytes([size]) + entry + _bitmap(keys) + b"".join(forks)
    return key + xor_with_key(body, key)


def _need(data: bytes, end: int, what: str) -> None:
    if len(data) < end:
        raise InvalidManifest(f"node data is {len(data)} bytes; {what} needs {end}")


def _prefix(raw: bytes, offset: int) -> bytes:
    length = raw[offset + 1]
    if length == 0 or length > PREFIX_MAX_SIZE:
        raise InvalidManifest(f"invalid fork prefix length {length}")
    return raw[offset + 2 : offset + 2 + length]


def _bits(bitmap: bytes) -> list[int]:
    # Bytes of the bitmap are mostly zero: skip them whole.
    return [i << 3 | j for i, byte in enumerate(bitmap) if byte for j in range(8) if byte >> j & 1]


def unmarshal_node(node: Node, data: bytes, own_ref_size: int = 0) -> None:
    """Fill ``node`` from serialised ``data`` (keeps its type, metadata and ref).

    ``own_ref_size`` is the width of the reference ``data`` was loaded by;
    it sizes fork references for bee-js nodes written with entry size 0.
    Raises ``InvalidManifest`` on any malformation, leaving ``node`` as it was.
    """
    data = bytes(data)
    _need(data, HEADER_SIZE, "the header")
    key = data[:OBFUSCATION_KEY_SIZE]
    plain = key + xor_with_key(data[OBFUSCATION_KEY_SIZE:], key)
    version = plain[OBFUSCATION_KEY_SIZE : OBFUSCATION_KEY_SIZE + VERSION_HASH_SIZE]
    size = plain[HEADER_SIZE - 1]
    if version == VERSION_02_HASH:
        v2 = True
    elif version == VERSION_01_HASH:
        v2 = False
    else:
        raise InvalidManifest(f"unknown node version hash {version.hex()}")
    _need(plain, HEADER_SIZE + size + _BITMAP_SIZE, "the entry and fork bitmap")
    entry = plain[HEADER_SIZE : HEADER_SIZE + size]
    offset = HEADER_SIZE + size
    bitmap = plain[offset : offset + _BITMAP_SIZE]
    offset += _BITMAP_SIZE
    ref_size = size
    if v2 and size == 0:
        ref_size = own_ref_size or 32
    forks: dict[int, Fork] = {}
    for b in _bits(bitmap):
        if not v2:
            end = offset + FORK_PRE_REFERENCE_SIZE + ref_size
            _need(plain, end, f"fork {b:#04x}")
            prefix = _prefix(plain, offset)
            child = Node.from_reference(plain[offset + FORK_PRE_REFERENCE_SIZE : end])
            child.node_type = plain[offset]
            forks[b] = Fork(prefix, child)
            offset = end
            continue
        _need(plain, offset + 1, f"fork {b:#04x}")
        node_type = plain[offset]
        ref_end = offset + FORK_PRE_REFERENCE_SIZE + ref_size
        end = ref_end
        metadata = None
        if node_type & TYPE_WITH_METADATA:
            _need(plain, ref_end + METADATA_SIZE_BYTES, f"fork {b:#04x} metadata size")
            meta_size = int.from_bytes(plain[ref_end : ref_end + METADATA_SIZE_BYTES], "big")
            end = ref_end + METADATA_SIZE_BYTES + meta_size
            _need(plain, end, f"fork {b:#04x} metadata")
            prefix = _prefix(plain, offset)
            if meta_size:
                metadata = decode_metadata(plain[ref_end + METADATA_SIZE_BYTES : end])
        else:
            _need(plain, end, f"fork {b:#04x}")
            prefix = _prefix(plain, offset)
        child = Node.from_reference(plain[offset + FORK_PRE_REFERENCE_SIZE : ref_end])
        child.node_type = node_type
        child.metadata = metadata
        forks[b] = Fork(prefix, child)
        offset = end
    node.obfuscation_key = key
    node.entry = entry
    node.forks = forks
    if v2 and bitmap != _ZERO_BITMAP:
        # The root's type is not stored anywhere; a fork bitmap tells it is an edge.
        node.node_type |= TYPE_EDGE
