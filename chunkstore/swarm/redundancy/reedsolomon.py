"""Reed-Solomon erasure coding over GF(2^8), as klauspost/reedsolomon v1.11.8 computes it by default.

Bee erasure-codes the children of an intermediate chunk with
``reedsolomon.New(shards, parities)``: the field is GF(2^8) with the
polynomial x^8+x^4+x^3+x^2+1 (0x11d) and generator 2; the coding matrix is
the Vandermonde matrix ``V[r][c] = r^c`` (rows 0..n-1, the row index read as
a field element, ``0^0 = 1``) multiplied by the inverse of its top k x k
square, so the first k rows are the identity and parity row i is
``V[k+i] * inv(V[:k])``. The inverse is unique, so any exact inversion gives
the library's matrix. Every shard has the same length (Bee pads chunks to
4104 bytes); parity shard i is the GF sum over j of ``m[k+i][j] * data[j]``.

Decoding takes any k shards that arrived, inverts the rows of the coding
matrix that produced them, and multiplies: the code is MDS, so the result
does not depend on which k were chosen.

The shard arithmetic is vectorised with numpy over the shard length: one
table gather per data shard covers every parity row at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from ..errors import SwarmError

__all__ = [
    "FIELD_POLYNOMIAL",
    "MAX_SHARDS",
    "ReedSolomonError",
    "coding_matrix",
    "encode",
    "gf_mul",
    "parity_matrix",
    "reconstruct_data",
]

FIELD_POLYNOMIAL = 0x11D
# Above 256 shards the library switches to its 16-bit Leopard code; Bee never
# goes past 128 (data plus parity refs in one intermediate chunk).
MAX_SHARDS = 256


class ReedSolomonError(SwarmError):
    """Shard counts, shard sizes or the set of present shards do not allow the operation."""


def _field_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    exp = np.zeros(510, np.uint8)
    log = np.zeros(256, np.int32)
    x = 1
    for i in range(255):
        exp[i] = x
        log[x] = i
        x <<= 1
        if x & 0x100:
            x ^= FIELD_POLYNOMIAL
    exp[255:510] = exp[0:255]
    # mul[a][b] = a*b: built from the log tables once (64 KiB), then every
    # product of a coefficient with a shard is a single gather.
    la = log[:, None] + log[None, :]
    mul = exp[la].astype(np.uint8)
    mul[0, :] = 0
    mul[:, 0] = 0
    mul.setflags(write=False)
    exp.setflags(write=False)
    log.setflags(write=False)
    return exp, log, mul


_EXP, _LOG, _MUL = _field_tables()


def gf_mul(a: int, b: int) -> int:
    """Product of two field elements (0..255)."""
    return int(_MUL[a, b])


def _gf_inv(a: int) -> int:
    if a == 0:
        raise ReedSolomonError("zero has no inverse in GF(2^8)")
    return int(_EXP[(255 - int(_LOG[a])) % 255])


def _gf_pow(a: int, n: int) -> int:
    if n == 0:
        return 1
    if a == 0:
        return 0
    return int(_EXP[(int(_LOG[a]) * n) % 255])


def _invert(matrix: np.ndarray) -> np.ndarray:
    """Inverse of a square matrix over GF(2^8) by Gauss-Jordan elimination on ``[M | I]``."""
    n = matrix.shape[0]
    work = np.zeros((n, 2 * n), np.uint8)
    work[:, :n] = matrix
    work[np.arange(n), n + np.arange(n)] = 1
    for r in range(n):
        if work[r, r] == 0:
            below = np.flatnonzero(work[r + 1 :, r]) + r + 1
            if below.size == 0:
                raise ReedSolomonError("matrix is singular")
            work[[r, below[0]]] = work[[below[0], r]]
        pivot = int(work[r, r])
        if pivot != 1:
            work[r] = _MUL[_gf_inv(pivot)][work[r]]
        # Clear column r in every other row at once: row ^= factor * pivot row.
        factors = work[:, r].copy()
        factors[r] = 0
        rows = np.flatnonzero(factors)
        if rows.size:
            work[rows] ^= _MUL[factors[rows][:, None], work[r][None, :]]
    return work[:, n:].copy()


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Matrix product over GF(2^8) for the small coding matrices (not for shard data)."""
    out = np.zeros((a.shape[0], b.shape[1]), np.uint8)
    for i in range(a.shape[1]):
        out ^= _MUL[a[:, i][:, None], b[i][None, :]]
    return out


def _check_counts(data_shards: int, parity_shards: int) -> None:
    if data_shards <= 0 or parity_shards < 0:
        raise ReedSolomonError(
            f"need at least one data shard and no negative parity count ({data_shards}+{parity_shards})"
        )
    if data_shards + parity_shards > MAX_SHARDS:
        raise ReedSolomonError(f"{data_shards}+{parity_shards} shards exceed the 8-bit code's {MAX_SHARDS}")


@lru_cache(maxsize=512)
def coding_matrix(data_shards: int, parity_shards: int) -> np.ndarray:
    """The library's default (data + parity) x data coding matrix, read-only."""
    _check_counts(data_shards, parity_shards)
    total = data_shards + parity_shards
    vandermonde = np.array([[_gf_pow(r, c) for c in range(data_shards)] for r in range(total)], np.uint8)
    matrix = _matmul(vandermonde, _invert(vandermonde[:data_shards]))
    # The construction's promise: the data rows come out as the identity.
    assert np.array_equal(matrix[:data_shards], np.eye(data_shards, dtype=np.uint8))
    matrix.setflags(write=False)
    return matrix


def parity_matrix(data_shards: int, parity_shards: int) -> np.ndarray:
    """The parity rows of :func:`coding_matrix`: ``parity[i] = sum_j m[i][j] * data[j]``."""
    return coding_matrix(data_shards, parity_shards)[data_shards:]


def _combine(coefficients: np.ndarray, shards: np.ndarray, out: np.ndarray) -> None:
    """``out[i] = XOR_j coefficients[i][j] * shards[j]`` for uint8 shard rows."""
    out[...] = 0
    for j in range(coefficients.shape[1]):
        column = coefficients[:, j]
        if not column.any():
            continue
        # One gather yields this shard times every row's coefficient; take()
        # with machine-size indices is ~10x faster than fancy indexing here.
        out ^= _MUL[column].take(shards[j].astype(np.intp), axis=1)


def _as_rows(shards: Sequence[bytes | bytearray | memoryview | np.ndarray] | np.ndarray, what: str) -> np.ndarray:
    if isinstance(shards, np.ndarray):
        if shards.ndim != 2 or shards.dtype != np.uint8:
            raise ReedSolomonError(f"{what} must be a 2-D uint8 array")
        return shards
    sizes = {len(s) for s in shards}
    if len(sizes) > 1:
        raise ReedSolomonError(f"{what} differ in size: {sorted(sizes)}")
    if not shards:
        raise ReedSolomonError(f"no {what}")
    return np.stack([np.frombuffer(s, np.uint8) if not isinstance(s, np.ndarray) else s for s in shards])


def encode(data: Sequence[bytes | bytearray | memoryview] | np.ndarray, parity_shards: int) -> np.ndarray:
    """Parity shards (``uint8[parity_shards, size]``) of equally long data shards."""
    rows = _as_rows(data, "data shards")
    _check_counts(rows.shape[0], parity_shards)
    out = np.empty((parity_shards, rows.shape[1]), np.uint8)
    if parity_shards:
        _combine(parity_matrix(rows.shape[0], parity_shards), rows, out)
    return out


def reconstruct_data(shards: Sequence[bytes | bytearray | memoryview | None], data_shards: int) -> list[bytes]:
    """All data shards from ``shards`` (data then parity, ``None`` where missing).

    Needs at least ``data_shards`` present shards of equal size; raises
    :class:`ReedSolomonError` otherwise. Present data shards are returned as
    given; missing ones are decoded from the first ``data_shards`` present shards.
    """
    total = len(shards)
    parity_shards = total - data_shards
    _check_counts(data_shards, parity_shards)
    present = [i for i, s in enumerate(shards) if s is not None]
    if len(present) < data_shards:
        raise ReedSolomonError(f"{len(present)} of {total} shards present; {data_shards} needed")
    available = {i: s for i, s in enumerate(shards) if s is not None}
    missing = [i for i in range(data_shards) if i not in available]
    if not missing:
        return [bytes(available[i]) for i in range(data_shards)]
    chosen = present[:data_shards]
    rows = _as_rows([available[i] for i in chosen], "shards")
    decode = _invert(np.ascontiguousarray(coding_matrix(data_shards, parity_shards)[chosen]))
    out = np.empty((len(missing), rows.shape[1]), np.uint8)
    _combine(np.ascontiguousarray(decode[missing]), rows, out)
    result = [bytes(available[i]) if i in available else b"" for i in range(data_shards)]
    for k, i in enumerate(missing):
        result[i] = out[k].tobytes()
    return result
