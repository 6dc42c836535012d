"""Bee's file joiner: a root reference and a chunk getter in, the file's bytes out.

``Joiner(reference, get)`` fetches the root chunk, reads the file size from
its span (the redundancy level byte stripped) and serves any byte range by
descending only into the subtrees that cover it: every subtree but the
rightmost of a level is full, so child offsets follow from the spans alone
(Bee: pkg/file/joiner).

* 64-byte references (``address | key``) are decrypted; padding is cut by
  the span (leaves) or by the reference count the span and level imply.
* Every chunk is checked against the address its parent names
  (:class:`ChunkCorrupt` otherwise); a span that contradicts the parent's
  layout is :class:`MalformedTree`.
* In an erasure-coded tree a data chunk that is missing or corrupt is
  rebuilt from any ``k`` of its ``k + p`` siblings (data and parity chunks
  of the same parent), then checked against its address like any other.
  Only if fewer than ``k`` siblings are available is :class:`ChunkMissing`
  raised; no partial data is ever returned for a range.
* A missing root is looked up among its dispersed replicas (SOCs by Bee's
  replica key) before giving up.

``get(address)`` returns the chunk data; it signals a missing chunk by
raising ``KeyError`` (``ChunkStore.get``'s ``ChunkNotFound`` is one) or by
returning ``None``. A ``Joiner`` keeps no per-read state, so several threads
may read from one instance if ``get`` is thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .. import encryption
from ..bmt import CHUNK_SIZE, SPAN_SIZE
from ..constants import REPLICAS_OWNER
from ..errors import InvalidChunk, InvalidSignature
from ..keccak import HASH_SIZE, keccak256
from ..redundancy import reedsolomon
from ..redundancy.level import DEFAULT_DOWNLOAD_LEVEL, InvalidLevel, Level, decode_span
from ..soc import parse_soc
from .errors import ChunkCorrupt, ChunkMissing, InvalidRange, InvalidReference, MalformedTree
from .hasher import BatchHasher, batch_hasher
from .replicas import replica_ids
from .span import chunk_payload_size, intermediate_payload_size, reference_count, split_references, subtree_sizes

__all__ = ["Getter", "Joiner", "join_bytes"]

Getter = Callable[[bytes], "bytes | bytearray | memoryview | None"]
Recovered = Callable[[bytes, bytes], None]

PADDED_SIZE = SPAN_SIZE + CHUNK_SIZE


class _Node:
    """A decoded chunk of the tree: its span, level and payload (decrypted, padding cut)."""

    __slots__ = ("level", "payload", "span")

    def __init__(self, span: int, level: Level, payload: bytes) -> None:
        self.span = span
        self.level = level
        self.payload = payload

    @property
    def is_leaf(self) -> bool:
        return self.span <= len(self.payload)


class Joiner:
    """Random access to a file stored as a Bee chunk tree.

    ``verify=False`` skips hashing fetched chunks (only for getters that
    already guarantee content addressing). ``recovered(address, data)`` is
    called with every chunk rebuilt from parities, so a caller can store it
    again. ``replica_level`` bounds which root replicas are tried.
    """

    def __init__(
        self,
        reference: bytes | bytearray | memoryview,
        get: Getter,
        *,
        verify: bool = True,
        hasher: BatchHasher = batch_hasher,
        recovered: Recovered | None = None,
        replica_level: Level | int = DEFAULT_DOWNLOAD_LEVEL,
    ) -> None:
        reference = bytes(reference)
        if len(reference) not in (HASH_SIZE, encryption.REFERENCE_SIZE):
            raise InvalidReference(
                f"reference is {len(reference)} bytes; must be {HASH_SIZE} or {encryption.REFERENCE_SIZE}"
            )
        self.reference = reference
        self.encrypted = len(reference) == encryption.REFERENCE_SIZE
        self._get = get
        self._verify = verify
        self._hasher = hasher
        self._recovered = recovered
        raw = self._fetch_root(reference[:HASH_SIZE], Level.of(replica_level))
        root = self._decode(raw, reference)
        self._root = root
        self.level = root.level
        self.size = root.span
        if not root.is_leaf and root.span <= CHUNK_SIZE:
            raise MalformedTree(f"root chunk spans {root.span} bytes but holds only {len(root.payload)}")

    # ------------------------------------------------------------ fetching

    def _raw_get(self, address: bytes) -> bytes | None:
        try:
            data = self._get(address)
        except KeyError:
            return None
        return None if data is None else bytes(data)

    def _fetch_root(self, address: bytes, replica_level: Level) -> bytes:
        data = self._raw_get(address)
        if data is not None and self._valid(address, data):
            return data
        corrupt = data
        for soc_id in replica_ids(address, replica_level):
            replica = self._raw_get(keccak256(soc_id, REPLICAS_OWNER))
            if replica is None:
                continue
            try:
                soc = parse_soc(replica)
            except (InvalidChunk, InvalidSignature):
                continue
            if soc.owner == REPLICAS_OWNER and soc.wrapped_address == address:
                return soc.wrapped_data
        if corrupt is not None:
            raise ChunkCorrupt(address, self._hasher([corrupt])[0])
        raise ChunkMissing(address, "root chunk and its replicas")

    def _valid(self, address: bytes, data: bytes) -> bool:
        if not SPAN_SIZE <= len(data) <= PADDED_SIZE:
            return False
        return not self._verify or self._hasher([data])[0] == address

    def _decode(self, data: bytes, reference: bytes) -> _Node:
        """Span, level and payload of chunk ``data``; decrypts when ``reference`` carries a key."""
        return self._decode_many([data], [reference])[0]

    def _decode_many(self, datas: list[bytes], references: list[bytes]) -> list[_Node]:
        """:meth:`_decode` for sibling chunks; encrypted ones are decrypted in one batch."""
        for data, reference in zip(datas, references, strict=True):
            if len(data) < SPAN_SIZE:
                raise MalformedTree(f"chunk {reference[:HASH_SIZE].hex()} is {len(data)} bytes, shorter than a span")
        if self.encrypted:
            try:
                plain = encryption.decrypt_chunks(datas, [r[HASH_SIZE:] for r in references])
            except encryption.EncryptionError as exc:
                raise MalformedTree(f"chunk among {references[0][:HASH_SIZE].hex()}..: {exc}") from None
        else:
            plain = [(data[:SPAN_SIZE], data[SPAN_SIZE:]) for data in datas]
        nodes = []
        for (span_raw, payload), reference in zip(plain, references, strict=True):
            try:
                level, span = decode_span(span_raw)
            except InvalidLevel as exc:
                raise MalformedTree(f"chunk {reference[:HASH_SIZE].hex()}: {exc}") from None
            if self.encrypted:
                size = span if span <= CHUNK_SIZE else intermediate_payload_size(span, level, True)
                if size > len(payload):
                    raise MalformedTree(f"encrypted chunk {reference[:HASH_SIZE].hex()} cannot hold {size} bytes")
                payload = payload[:size]
            nodes.append(_Node(span, level, payload))
        return nodes

    # ------------------------------------------------------------ children

    def _children(self, node: _Node) -> tuple[list[bytes], list[bytes], list[int]]:
        """Data references, parity addresses and child spans of an intermediate chunk."""
        data_count, parity_count = reference_count(node.span, node.level, self.encrypted)
        payload = node.payload[: chunk_payload_size(node.payload)]
        try:
            refs, parity = split_references(payload, parity_count, self.encrypted)
        except ValueError as exc:
            raise MalformedTree(f"intermediate chunk of span {node.span}: {exc}") from None
        if len(refs) != data_count:
            raise MalformedTree(
                f"intermediate chunk of span {node.span} has {len(refs)} references; {data_count} expected"
            )
        # The root's level fixes the fan-out of the whole tree.
        return refs, parity, subtree_sizes(node.span, len(refs), self.level, self.encrypted)

    def _fetch_children(self, refs: list[bytes], parity: list[bytes], wanted: list[int]) -> dict[int, bytes]:
        """Raw (still encrypted) data of the children ``wanted``, recovering from parities if needed."""
        fetched = {i: self._raw_get(refs[i][:HASH_SIZE]) for i in wanted}
        present = {i: d for i, d in fetched.items() if d is not None and SPAN_SIZE <= len(d) <= PADDED_SIZE}
        order = list(present)
        if self._verify:
            hashes = self._hasher([present[i] for i in order])
        else:
            hashes = [refs[i][:HASH_SIZE] for i in order]
        found: dict[int, bytes] = {}
        bad: dict[int, bytes] = {}
        for i, got in zip(order, hashes, strict=True):
            if got == refs[i][:HASH_SIZE]:
                found[i] = present[i]
            else:
                bad[i] = got
        lost = [i for i in wanted if i not in found]
        if not lost:
            return found
        if not parity:
            i = lost[0]
            if i in bad:
                raise ChunkCorrupt(refs[i][:HASH_SIZE], bad[i])
            raise ChunkMissing(refs[i][:HASH_SIZE], "no parity chunks to recover it from")
        found.update(self._recover(refs, parity, found, lost, bad))
        return found

    def _recover(
        self, refs: list[bytes], parity: list[bytes], known: dict[int, bytes], lost: list[int], bad: dict[int, bytes]
    ) -> dict[int, bytes]:
        """Rebuild the data chunks ``lost`` from any ``k`` of the ``k + p`` siblings."""
        k = len(refs)
        addresses = [r[:HASH_SIZE] for r in refs] + [bytes(p) for p in parity]
        shards: list[bytes | None] = [None] * len(addresses)
        for i, data in known.items():
            shards[i] = data
        have = len(known)
        # Ask for the other siblings in order (data first) until k verified shards are in.
        for i, address in enumerate(addresses):
            if have >= k:
                break
            if shards[i] is not None or i in lost:
                continue
            fetched = self._raw_get(address)
            if fetched is None or not SPAN_SIZE <= len(fetched) <= PADDED_SIZE or not self._valid(address, fetched):
                continue
            shards[i] = fetched
            have += 1
        if have < k:
            i = lost[0]
            if i in bad:
                raise ChunkCorrupt(addresses[i], bad[i])
            raise ChunkMissing(
                addresses[i], f"{have} of {len(addresses)} sibling chunks available, {k} needed to recover"
            )
        padded = [None if s is None else s + bytes(PADDED_SIZE - len(s)) for s in shards]
        try:
            rebuilt = reedsolomon.reconstruct_data(padded, k)
        except reedsolomon.ReedSolomonError as exc:
            raise MalformedTree(f"erasure decoding failed: {exc}") from None
        out: dict[int, bytes] = {}
        lost_set = set(lost)
        restored = [i for i in range(k) if shards[i] is None]
        checks = self._hasher([rebuilt[i] for i in restored]) if self._verify else [addresses[i] for i in restored]
        for i, got in zip(restored, checks, strict=True):
            if got != addresses[i]:
                # Parities inconsistent with the data they claim to protect.
                raise ChunkCorrupt(addresses[i], got)
            data = self._trim(rebuilt[i])
            if self._recovered is not None:
                self._recovered(addresses[i], data)
            if i in lost_set:
                out[i] = data
        return out

    def _trim(self, data: bytes) -> bytes:
        """A rebuilt chunk without the zero padding erasure coding added (encrypted chunks are always full)."""
        if self.encrypted:
            return data
        try:
            level, span = decode_span(data[:SPAN_SIZE])
        except InvalidLevel as exc:
            raise MalformedTree(str(exc)) from None
        size = span if span <= CHUNK_SIZE else intermediate_payload_size(span, level, False)
        return data[: SPAN_SIZE + min(size, CHUNK_SIZE)]

    # ------------------------------------------------------------ reading

    def read(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """The bytes ``[start, end)`` of the file as consecutive pieces (``end`` defaults to the size).

        Only the chunks covering the range are fetched. Raises
        :class:`InvalidRange` for a range outside ``0..size``; errors in the
        tree surface while iterating, before the piece they concern.
        """
        if end is None:
            end = self.size
        if not 0 <= start <= end <= self.size:
            raise InvalidRange(f"range {start}..{end} is outside the file of {self.size} bytes")
        if start == end:
            return iter(())
        return self._read(self._root, 0, start, end)

    def _read(self, node: _Node, base: int, start: int, end: int) -> Iterator[bytes]:
        if node.is_leaf:
            yield node.payload[start - base : end - base]
            return
        refs, parity, sizes = self._children(node)
        offsets = [base]
        for size in sizes[:-1]:
            offsets.append(offsets[-1] + size)
        wanted = [i for i, (o, s) in enumerate(zip(offsets, sizes, strict=True)) if o < end and o + s > start]
        # Leaf children are fetched (and hashed) together; deeper ones one subtree at a time.
        leaf_level = sizes[0] <= CHUNK_SIZE
        groups = [wanted] if leaf_level else [[i] for i in wanted]
        for group in groups:
            raws = self._fetch_children(refs, parity, group)
            children = self._decode_many([raws[i] for i in group], [refs[i] for i in group])
            for i, child in zip(group, children, strict=True):
                if child.span != sizes[i]:
                    raise MalformedTree(
                        f"child {i} of a {node.span}-byte subtree spans {child.span} bytes; its place holds {sizes[i]}"
                    )
                if sizes[i] <= CHUNK_SIZE and not child.is_leaf:
                    raise MalformedTree(
                        f"leaf chunk {refs[i][:HASH_SIZE].hex()} spans {child.span} bytes but holds {len(child.payload)}"
                    )
                yield from self._read(child, offsets[i], max(start, offsets[i]), min(end, offsets[i] + sizes[i]))

    def chunk_addresses(self) -> Iterator[bytes]:
        """The address of every chunk of the tree: root first, then depth first, each intermediate
        chunk's data children followed by its parity chunks (what pinning the file must keep).

        Only intermediate chunks are fetched (a missing one is rebuilt from its parities, as for a
        read); leaves and parities are named, not read. Addresses are 32 bytes, also in an encrypted
        tree. Bee's joiner ``IterateChunkAddresses`` reports the same set.
        """
        yield self.reference[:HASH_SIZE]
        stack = [self._root]
        while stack:
            node = stack.pop()
            if node.is_leaf:
                continue
            refs, parity, sizes = self._children(node)
            yield from (ref[:HASH_SIZE] for ref in refs)
            yield from (bytes(p) for p in parity)
            inner = [i for i, size in enumerate(sizes) if size > CHUNK_SIZE]
            if not inner:
                continue
            raws = self._fetch_children(refs, parity, inner)
            children = self._decode_many([raws[i] for i in inner], [refs[i] for i in inner])
            for i, child in zip(inner, children, strict=True):
                if child.span != sizes[i]:
                    raise MalformedTree(
                        f"child {i} of a {node.span}-byte subtree spans {child.span} bytes; its place holds {sizes[i]}"
                    )
            stack.extend(reversed(children))  # depth first, in order

    def read_all(self) -> bytes:
        """The whole file (for small files and tests; use :meth:`read` to stream)."""
        return b"".join(self.read())


def join_bytes(reference: bytes, get: Getter, **options: Any) -> bytes:
    """The whole file at ``reference`` in one call (``options`` as for :class:`Joiner`)."""
    return Joiner(reference, get, **options).read_all()
