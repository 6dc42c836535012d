"""Bee's chunk encryption (pkg/encryption): a Keccak-based counter mode.

Segment i (32 bytes) of a plaintext is XORed with
``keccak(keccak(key | uint32_le(i + initial_counter)))``; a last short
segment uses the first bytes of its key stream. Encrypting a chunk
``span | payload`` with a fresh 32-byte key:

* the payload is encrypted with counters 0.. and padded to 4096 bytes; the
  padding is random bytes, not encrypted zeros (Bee fills it from
  ``crypto/rand``), so it tells nothing about the payload length;
* the 8-byte span is encrypted on its own with counter 128 (4096 / 32), so
  no key stream is used twice;
* the encrypted chunk is 4104 bytes; its reference is ``address | key``
  (64 bytes), the address being the BMT hash of the encrypted chunk.

Decryption needs the plaintext length to cut the padding: a leaf's span
gives it; an intermediate chunk's length follows from its span and level
(see :func:`chunkstore.swarm.file.span.intermediate_payload_size`).

Keys and padding come from ``os.urandom`` unless a caller injects a
``random_bytes(n)`` source (tests do, to make vectors reproducible).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence

import numpy as np

from . import bmt
from .bmt import CHUNK_SIZE, SPAN_SIZE
from .errors import SwarmError
from .keccak import HASH_SIZE, keccak256

__all__ = [
    "ENCRYPTED_CHUNK_SIZE",
    "KEY_SIZE",
    "REFERENCE_SIZE",
    "SPAN_COUNTER",
    "EncryptionError",
    "RandomSource",
    "chunk_keystreams",
    "decrypt_chunk",
    "encrypt_chunk",
    "decrypt_chunks",
    "encrypt_chunks",
    "keystream",
    "transcrypt",
]

KEY_SIZE = 32
REFERENCE_SIZE = HASH_SIZE + KEY_SIZE  # 64
SPAN_COUNTER = CHUNK_SIZE // KEY_SIZE  # 128: the span's counter follows the payload's 128 segments
ENCRYPTED_CHUNK_SIZE = SPAN_SIZE + CHUNK_SIZE  # 4104

RandomSource = Callable[[int], bytes]

log = logging.getLogger(__name__)


class EncryptionError(SwarmError):
    """Encryption input of the wrong size (key, data longer than the padding, chunk length)."""


def _check_key(key: bytes) -> None:
    if len(key) != KEY_SIZE:
        raise EncryptionError(f"encryption key is {len(key)} bytes; must be {KEY_SIZE}")


def keystream(key: bytes, length: int, initial_counter: int = 0) -> bytes:
    """The first ``length`` key-stream bytes for ``key`` starting at ``initial_counter``."""
    _check_key(key)
    segments = -(-length // KEY_SIZE)
    out = b"".join(
        keccak256(keccak256(key, ((initial_counter + i) & 0xFFFFFFFF).to_bytes(4, "little"))) for i in range(segments)
    )
    return out[:length]


def _xor(data: bytes | bytearray | memoryview, stream: bytes) -> bytes:
    n = len(data)
    if n == 0:
        return b""
    # One big-integer XOR over the whole buffer instead of a per-byte loop.
    x = int.from_bytes(data, "little") ^ int.from_bytes(stream[:n], "little")
    return x.to_bytes(n, "little")


def transcrypt(key: bytes, data: bytes | bytearray | memoryview, initial_counter: int = 0) -> bytes:
    """XOR ``data`` with the key stream: encryption and decryption are the same map."""
    return _xor(data, keystream(key, len(data), initial_counter))


def encrypt_chunk(
    data: bytes | bytearray | memoryview,
    key: bytes | None = None,
    random_bytes: RandomSource = os.urandom,
) -> tuple[bytes, bytes]:
    """Encrypt chunk ``data = span | payload``: returns ``(key, encrypted 4104-byte chunk)``.

    Without ``key`` a fresh one is drawn from ``random_bytes``, which also
    supplies the padding after the payload.
    """
    if not SPAN_SIZE <= len(data) <= ENCRYPTED_CHUNK_SIZE:
        raise EncryptionError(f"chunk data is {len(data)} bytes; must be {SPAN_SIZE}..{ENCRYPTED_CHUNK_SIZE}")
    if key is None:
        key = random_bytes(KEY_SIZE)
    key = bytes(key)
    _check_key(key)
    mv = memoryview(data)
    span = transcrypt(key, mv[:SPAN_SIZE], SPAN_COUNTER)
    payload = transcrypt(key, mv[SPAN_SIZE:], 0)
    padding = random_bytes(CHUNK_SIZE - len(payload)) if len(payload) < CHUNK_SIZE else b""
    if len(padding) != CHUNK_SIZE - len(payload):
        raise EncryptionError(f"random source gave {len(padding)} padding bytes; {CHUNK_SIZE - len(payload)} needed")
    return key, span + payload + padding


def decrypt_chunk(encrypted: bytes | bytearray | memoryview, key: bytes) -> tuple[bytes, bytes]:
    """Decrypt a 4104-byte encrypted chunk: ``(span, payload)`` with the payload still padded to 4096.

    The caller cuts the padding: the plaintext length depends on whether the
    chunk is a leaf or an intermediate chunk.
    """
    key = bytes(key)
    _check_key(key)
    if len(encrypted) != ENCRYPTED_CHUNK_SIZE:
        raise EncryptionError(f"encrypted chunk is {len(encrypted)} bytes; must be {ENCRYPTED_CHUNK_SIZE}")
    mv = memoryview(encrypted)
    return transcrypt(key, mv[:SPAN_SIZE], SPAN_COUNTER), transcrypt(key, mv[SPAN_SIZE:], 0)


_SEGMENTS = SPAN_COUNTER + 1  # 128 payload segments and the span's
_SegmentKeys = Callable[[np.ndarray, np.ndarray], np.ndarray]
_KERNEL: list[_SegmentKeys | None] = []  # [kernel or None], decided on first use


def _fast_segment_keys() -> _SegmentKeys | None:
    """The 8-way numba key-stream kernel if the accelerated backend is on and it matches the reference."""
    if _KERNEL:
        return _KERNEL[0]
    kernel: _SegmentKeys | None = None
    if bmt.BACKEND == "numba":
        try:
            from .keystream_numba import segment_keys

            probe_keys = np.frombuffer(bytes(range(32)) * 9, np.uint8).reshape(9, KEY_SIZE)
            probe_counters = np.arange(9, dtype=np.uint32) * 1000 + 7
            got = segment_keys(probe_keys, probe_counters)
            for i in range(9):
                if got[i].tobytes() != keystream(probe_keys[i].tobytes(), HASH_SIZE, int(probe_counters[i])):
                    raise RuntimeError("numba key stream differs from the reference")
            kernel = segment_keys
        except Exception as exc:  # any JIT or self-check failure: keep the batch Keccak path
            log.warning("numba key-stream kernel unavailable (%s: %s); using batch keccak", type(exc).__name__, exc)
    _KERNEL.append(kernel)
    return kernel


def chunk_keystreams(keys: Sequence[bytes]) -> np.ndarray:
    """Key streams of whole chunks, ``uint8[n, 4104]``: payload stream (4096) then span stream (8).

    All ``129 * n`` segment keys at once: with the accelerated backend an
    8-way vectorised kernel (checked against :func:`keystream` before first
    use), else two batch Keccak calls instead of ``258 * n`` separate ones.
    """
    n = len(keys)
    for key in keys:
        _check_key(key)
    rows = n * _SEGMENTS
    key_rows = np.repeat(np.frombuffer(b"".join(keys), np.uint8).reshape(n, KEY_SIZE), _SEGMENTS, axis=0)
    counters = np.tile(np.arange(_SEGMENTS, dtype="<u4"), n)
    kernel = _fast_segment_keys()
    if kernel is not None:
        second = kernel(key_rows, counters)
    else:
        seeds = np.empty((rows, KEY_SIZE + 4), np.uint8)
        seeds[:, :KEY_SIZE] = key_rows
        seeds[:, KEY_SIZE:] = counters.view(np.uint8).reshape(rows, 4)
        first = np.empty((rows, HASH_SIZE), np.uint8)
        bmt.keccak256_batch(seeds, np.full(rows, KEY_SIZE + 4, np.int64), first)
        second = np.empty((rows, HASH_SIZE), np.uint8)
        bmt.keccak256_batch(first, np.full(rows, HASH_SIZE, np.int64), second)
    per_chunk = second.reshape(n, _SEGMENTS * HASH_SIZE)
    return per_chunk[:, : CHUNK_SIZE + SPAN_SIZE]


def encrypt_chunks(
    datas: Sequence[bytes | bytearray | memoryview], random_bytes: RandomSource = os.urandom
) -> tuple[list[bytes], list[bytes]]:
    """Encrypt many chunks with fresh keys: ``(keys, encrypted chunks)``, same result as :func:`encrypt_chunk`.

    Keys and padding are drawn from ``random_bytes`` in chunk order (key, then padding).
    """
    keys: list[bytes] = []
    paddings: list[bytes] = []
    for data in datas:
        if not SPAN_SIZE <= len(data) <= ENCRYPTED_CHUNK_SIZE:
            raise EncryptionError(f"chunk data is {len(data)} bytes; must be {SPAN_SIZE}..{ENCRYPTED_CHUNK_SIZE}")
        key = bytes(random_bytes(KEY_SIZE))
        _check_key(key)
        pad = ENCRYPTED_CHUNK_SIZE - len(data)
        padding = bytes(random_bytes(pad)) if pad else b""
        if len(padding) != pad:
            raise EncryptionError(f"random source gave {len(padding)} padding bytes; {pad} needed")
        keys.append(key)
        paddings.append(padding)
    if not keys:
        return [], []
    streams = chunk_keystreams(keys)
    out = np.empty((len(keys), ENCRYPTED_CHUNK_SIZE), np.uint8)
    for i, data in enumerate(datas):
        raw = np.frombuffer(data, np.uint8)
        size = len(raw) - SPAN_SIZE
        np.bitwise_xor(raw[:SPAN_SIZE], streams[i, CHUNK_SIZE:], out=out[i, :SPAN_SIZE])
        np.bitwise_xor(raw[SPAN_SIZE:], streams[i, :size], out=out[i, SPAN_SIZE : SPAN_SIZE + size])
        if size < CHUNK_SIZE:
            out[i, SPAN_SIZE + size :] = np.frombuffer(paddings[i], np.uint8)
    flat = out.tobytes()
    return keys, [flat[i * ENCRYPTED_CHUNK_SIZE : (i + 1) * ENCRYPTED_CHUNK_SIZE] for i in range(len(keys))]


def decrypt_chunks(
    encrypted: Sequence[bytes | bytearray | memoryview], keys: Sequence[bytes]
) -> list[tuple[bytes, bytes]]:
    """:func:`decrypt_chunk` for many chunks at once: ``(span, padded payload)`` each."""
    if len(encrypted) != len(keys):
        raise EncryptionError(f"{len(encrypted)} chunks but {len(keys)} keys")
    for data in encrypted:
        if len(data) != ENCRYPTED_CHUNK_SIZE:
            raise EncryptionError(f"encrypted chunk is {len(data)} bytes; must be {ENCRYPTED_CHUNK_SIZE}")
    if not keys:
        return []
    streams = chunk_keystreams([bytes(k) for k in keys])
    raw = np.frombuffer(b"".join(bytes(d) for d in encrypted), np.uint8).reshape(len(keys), ENCRYPTED_CHUNK_SIZE)
    plain = np.empty_like(raw)
    np.bitwise_xor(raw[:, :SPAN_SIZE], streams[:, CHUNK_SIZE:], out=plain[:, :SPAN_SIZE])
    np.bitwise_xor(raw[:, SPAN_SIZE:], streams[:, :CHUNK_SIZE], out=plain[:, SPAN_SIZE:])
    flat = plain.tobytes()
    out = []
    for i in range(len(keys)):
        row = flat[i * ENCRYPTED_CHUNK_SIZE : (i + 1) * ENCRYPTED_CHUNK_SIZE]
        out.append((row[:SPAN_SIZE], row[SPAN_SIZE:]))
    return out
