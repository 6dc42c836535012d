"""Bee's file splitter: bytes in, a tree of chunks out, the root reference returned.

The layout is Bee's upload pipeline (pkg/file/pipeline: feeder, encryption,
bmt, store, hashtrie; pkg/file/redundancy), reproduced step for step because
the reference depends on the exact order of level wraps and parity writes:

* the data is cut into 4096-byte leaves, each ``span | payload`` with the
  span its length (8 bytes, little-endian); no data at all still makes one
  chunk, the bare zero span;
* level 1 collects the leaves' references; when a level is full its
  references become the payload of an intermediate chunk whose span is the
  sum of the children's spans, and that chunk's reference goes one level up;
* with encryption every leaf and intermediate chunk is encrypted first
  (:mod:`chunkstore.swarm.encryption`) and references are ``address | key``;
* with a redundancy level, each group of up to ``max_shards`` sibling chunks
  (padded to 4104 bytes) gets Reed-Solomon parity chunks, whose 32-byte
  addresses follow the data references in the parent, whose span then
  carries the level; parity chunks are never encrypted;
* at the end, a level with a single reference hands it up unchanged (the
  "carrier chunk"), every other partial level is wrapped, and what remains
  at level 8 is the root.

Memory: one pending leaf, at most 8 levels of references (one chunk each),
the leaves of the current hash batch, and with redundancy up to
``max_shards`` padded chunks per level; independent of the input size.

Chunks reach ``sink(address, data)`` as they are made, children before their
parents, so a caller storing them in order never has a parent without its
children. Leaves are hashed ``batch`` at a time through a ``BatchHasher``.
A ``Splitter`` is not thread-safe: one writer feeds it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import encryption
from ..bmt import CHUNK_SIZE, SPAN_SIZE
from ..keccak import HASH_SIZE
from ..redundancy import reedsolomon
from ..redundancy.level import Level, encode_level, max_shards, parities
from .errors import FileError, SplitterClosed
from .hasher import BatchHasher, batch_hasher
from .replicas import replica_chunks
from .span import span_bytes

__all__ = ["Sink", "Splitter", "split_bytes"]

Sink = Callable[[bytes, bytes], None]

MAX_LEVEL = 8
ENCRYPTED_CHUNK_SIZE = SPAN_SIZE + CHUNK_SIZE
_U64 = (1 << 64) - 1

# A parity callback: (level the reference goes to, span bytes, address).
_ParityCallback = Callable[[int, bytes, bytes], None]


class _ErasureCoder:
    """Per-level buffers of sibling chunks and their parity chunks (Bee's redundancy.Params)."""

    def __init__(self, level: Level, encrypted: bool, store_parities: Callable[[list[bytes]], list[bytes]]) -> None:
        self.level = level
        self.encrypted = encrypted
        self.max_shards = max_shards(level, encrypted)
        self._store_parities = store_parities
        self.buffers: list[list[bytes]] = [[] for _ in range(MAX_LEVEL)] if level != Level.NONE else []

    def parities(self, shards: int) -> int:
        return parities(self.level, shards, self.encrypted)

    def chunk_write(self, chunk_level: int, data: bytes, callback: _ParityCallback) -> None:
        if self.level == Level.NONE:
            return
        if len(data) != ENCRYPTED_CHUNK_SIZE:
            data = data + bytes(ENCRYPTED_CHUNK_SIZE - len(data))
        self._append(chunk_level, data, callback)

    def _append(self, chunk_level: int, data: bytes, callback: _ParityCallback) -> None:
        buffer = self.buffers[chunk_level]
        buffer.append(data)
        if len(buffer) == self.max_shards:
            self._encode(chunk_level, callback)

    def encode(self, chunk_level: int, callback: _ParityCallback) -> None:
        """Parities of a partial group (the rightmost siblings of a level)."""
        if self.level == Level.NONE or not self.buffers[chunk_level]:
            return
        self._encode(chunk_level, callback)

    def _encode(self, chunk_level: int, callback: _ParityCallback) -> None:
        shards = self.buffers[chunk_level]
        rows = np.frombuffer(b"".join(shards), np.uint8).reshape(len(shards), ENCRYPTED_CHUNK_SIZE)
        parity = reedsolomon.encode(rows, self.parities(len(shards)))
        datas = [row.tobytes() for row in parity]
        addresses = self._store_parities(datas)
        for data, address in zip(datas, addresses, strict=True):
            # A parity chunk's "span" is just its first 8 bytes; the parent skips it.
            callback(chunk_level + 1, data[:SPAN_SIZE], address)
        self.buffers[chunk_level] = []

    def elevate(self, chunk_level: int, callback: _ParityCallback) -> None:
        """Move the lone chunk of ``chunk_level`` to the next level's group, as its reference moves up."""
        if self.level == Level.NONE:
            return
        buffer = self.buffers[chunk_level]
        if len(buffer) != 1:
            raise FileError(f"internal: carrier chunk at level {chunk_level} has {len(buffer)} siblings buffered")
        self._append(chunk_level + 1, buffer[0], callback)


class _HashTrie:
    """References per tree level and the level wraps (Bee's hashtrie writer)."""

    def __init__(
        self,
        ref_size: int,
        coder: _ErasureCoder,
        make_intermediate: Callable[[bytes], tuple[bytes, bytes]],
    ) -> None:
        self.ref_size = ref_size
        self.coder = coder
        self.make_intermediate = make_intermediate
        # entries[level]: (span, reference) pairs; data references first, parity addresses after.
        self.entries: list[list[tuple[bytes, bytes]]] = [[] for _ in range(MAX_LEVEL + 1)]
        self.counts = [0] * (MAX_LEVEL + 1)
        self.data_counts = [0] * (MAX_LEVEL + 1)
        self.max_children = coder.max_shards + coder.parities(coder.max_shards)
        self.full = False
        self.root_data: bytes | None = None

    def _parity(self, level: int, span: bytes, address: bytes) -> None:
        self._write(level, True, span, address)

    def add_leaf(self, span: bytes, reference: bytes, stored: bytes) -> None:
        if self.full:
            raise FileError(f"file too large: the tree is full at level {MAX_LEVEL}")
        self._write(1, False, span, reference)
        self.coder.chunk_write(0, stored, self._parity)

    def _write(self, level: int, is_parity: bool, span: bytes, reference: bytes) -> None:
        self.entries[level].append((span, reference))
        if not is_parity:
            self.data_counts[level] += 1
        self.counts[level] += 1
        if self.counts[level] == self.max_children:
            self._wrap(level)

    def _wrap(self, level: int) -> None:
        entries = self.entries[level]
        data_count = self.data_counts[level]
        total = 0
        refs = []
        for span, reference in entries[:data_count]:
            # Children's spans may carry their level byte; the sum's top byte
            # is overwritten below whenever that can happen (Bee sums the same way).
            total += int.from_bytes(span, "little")
            refs.append(reference)
        parity_count = len(entries) - data_count
        refs.extend(reference[:HASH_SIZE] for _, reference in entries[data_count:])
        span = span_bytes(total & _U64)
        if parity_count:
            span = encode_level(span, self.coder.level)
        reference, stored = self.make_intermediate(span + b"".join(refs))
        self._write(level + 1, False, span, reference)
        self.coder.chunk_write(level, stored, self._parity)
        self.entries[level] = []
        self.counts[level] = self.data_counts[level] = 0
        if level + 1 == MAX_LEVEL:
            self.full = True

    def finish(self) -> bytes:
        for level in range(1, MAX_LEVEL):
            count = self.counts[level]
            if count == 0:
                continue
            if count == self.max_children:
                self._wrap(level)
            elif count == 1:
                # Carrier: the lone reference goes up as it is, no chunk made.
                self.entries[level + 1].append(self.entries[level][0])
                self.coder.elevate(level - 1, self._parity)
                self.data_counts[level + 1] += 1
                self.counts[level + 1] += 1
            else:
                self.coder.encode(level - 1, self._parity)
                self._wrap(level)
        if self.counts[MAX_LEVEL] != 1:
            raise FileError(f"internal: {self.counts[MAX_LEVEL]} references at the top level")
        if self.coder.level != Level.NONE:
            self.root_data = self.coder.buffers[MAX_LEVEL - 1][0]
        return self.entries[MAX_LEVEL][0][1]


class Splitter:
    """Streaming splitter: ``write(bytes)`` any number of times, then ``finish()`` for the reference.

    ``level`` (a :class:`~chunkstore.swarm.redundancy.level.Level` or 0..4)
    selects erasure coding; ``encrypt`` makes 64-byte references.
    ``random_bytes(n)`` supplies encryption keys and padding (``os.urandom``
    by default; inject a deterministic source for reproducible output).
    ``replicas`` adds Bee's dispersed replicas of the root (signed SOCs)
    when a level is set, as Bee's upload does.
    """

    def __init__(
        self,
        sink: Sink,
        *,
        level: Level | int = Level.NONE,
        encrypt: bool = False,
        random_bytes: encryption.RandomSource = os.urandom,
        hasher: BatchHasher = batch_hasher,
        batch: int = 128,
        replicas: bool = True,
    ) -> None:
        if batch < 1:
            raise ValueError("batch must be at least 1")
        self.level = Level.of(level)
        self.encrypt = bool(encrypt)
        self._sink = sink
        self._random = random_bytes
        self._hasher = hasher
        self._batch = batch
        self._replicas = replicas
        self._pending = bytearray()
        self._leaves: list[bytes] = []
        self._written = 0
        self._chunks = 0
        self._closed = False
        coder = _ErasureCoder(self.level, self.encrypt, self._store_plain)
        ref_size = encryption.REFERENCE_SIZE if self.encrypt else HASH_SIZE
        make = self._store_encrypted_one if self.encrypt else self._store_plain_one
        self._trie = _HashTrie(ref_size, coder, make)

    @property
    def size(self) -> int:
        """Bytes written so far."""
        return self._written

    @property
    def chunks(self) -> int:
        """Chunks handed to the sink so far."""
        return self._chunks

    # ------------------------------------------------------------ chunk output

    def _emit(self, addresses: list[bytes], datas: list[bytes]) -> None:
        for address, data in zip(addresses, datas, strict=True):
            self._sink(address, data)
        self._chunks += len(datas)

    def _store_plain(self, datas: list[bytes]) -> list[bytes]:
        addresses = self._hasher(datas)
        self._emit(addresses, datas)
        return addresses

    def _store_plain_one(self, data: bytes) -> tuple[bytes, bytes]:
        return self._store_plain([data])[0], data

    def _store_encrypted(self, datas: list[bytes]) -> tuple[list[bytes], list[bytes]]:
        keys, encrypted = encryption.encrypt_chunks(datas, self._random)
        addresses = self._hasher(encrypted)
        self._emit(addresses, encrypted)
        return [a + k for a, k in zip(addresses, keys, strict=True)], encrypted

    def _store_encrypted_one(self, data: bytes) -> tuple[bytes, bytes]:
        refs, encrypted = self._store_encrypted([data])
        return refs[0], encrypted[0]

    # ------------------------------------------------------------ input

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Append ``data`` to the file."""
        if self._closed:
            raise SplitterClosed("write after finish")
        mv = memoryview(data).cast("B")
        self._written += len(mv)
        pos = 0
        if self._pending:
            take = min(CHUNK_SIZE - len(self._pending), len(mv))
            self._pending += mv[:take]
            pos = take
            if len(self._pending) == CHUNK_SIZE:
                self._leaf(bytes(self._pending))
                self._pending.clear()
        while len(mv) - pos >= CHUNK_SIZE:
            self._leaf(mv[pos : pos + CHUNK_SIZE].tobytes())
            pos += CHUNK_SIZE
        if pos < len(mv):
            self._pending += mv[pos:]

    def _leaf(self, payload: bytes) -> None:
        self._leaves.append(span_bytes(len(payload)) + payload)
        if len(self._leaves) >= self._batch:
            self._flush_leaves()

    def _flush_leaves(self) -> None:
        leaves, self._leaves = self._leaves, []
        if not leaves:
            return
        if self.encrypt:
            refs, stored = self._store_encrypted(leaves)
        else:
            refs, stored = self._store_plain(leaves), leaves
        for leaf, reference, data in zip(leaves, refs, stored, strict=True):
            self._trie.add_leaf(leaf[:SPAN_SIZE], reference, data)

    def finish(self) -> bytes:
        """Flush the last leaf, wrap the tree and return the root reference (32 or 64 bytes)."""
        if self._closed:
            raise SplitterClosed("finish called twice")
        self._closed = True
        if self._pending or self._written == 0:
            # An empty file is still one chunk: the bare zero span.
            self._leaf(bytes(self._pending))
            self._pending.clear()
        self._flush_leaves()
        reference = self._trie.finish()
        if self._replicas and self._trie.root_data is not None:
            for address, data in replica_chunks(reference[:HASH_SIZE], self._trie.root_data, self.level):
                self._sink(address, data)
                self._chunks += 1
        return reference


def split_bytes(
    data: bytes | bytearray | memoryview,
    sink: Sink | None = None,
    **options: Any,
) -> bytes:
    """Reference of ``data`` as one call; chunks go to ``sink`` (dropped if ``None``); ``options`` as for :class:`Splitter`."""
    splitter = Splitter(sink if sink is not None else (lambda _a, _d: None), **options)
    splitter.write(data)
    return splitter.finish()
