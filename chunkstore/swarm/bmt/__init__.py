"""The Binary Merkle Tree hash of a chunk, its inclusion proofs, and batch hashing: one interface.

- :mod:`.reference`: the BMT as the protocol defines it, on safe-pysha3
  (hashes, levels, proofs). The yardstick every faster path is tested against.
- :mod:`.numba_kernels`: Keccak-f[1600] and the whole tree as numba kernels.
- :mod:`.backend`: picks the kernels (checked against the reference at
  start-up) or falls back to the reference, and offers one-chunk and batch
  functions that give the same bytes either way.

The first use of a backend name (below) selects the backend. ``chunk_hash``
and ``zero_hashes`` here run on that backend; the proof functions are the
reference's. Callers that must stay independent of the kernels (the sample's
re-derivation of a loaded chunk) import :mod:`.reference` directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..constants import BMT_DEPTH, BRANCHES, CHUNK_SIZE, SEGMENT_SIZE, SPAN_SIZE
from .reference import Proof, bmt_hash, bmt_levels, bmt_root, proof_root_hash, prove, verify_proof

if TYPE_CHECKING:
    from .backend import (
        BACKEND,
        ROW_STRIDE,
        backend_info,
        bmt_hashes,
        chunk_hash,
        keccak256_batch,
        transformed_addresses,
        zero_hashes,
    )

# Loaded on first use, not with the package: selecting the backend compiles (or loads) the
# kernels and checks them against the reference, which must be complete (and may be
# replaced, in a test) by then; and callers of the reference alone never pay for it.
_BACKEND_NAMES = frozenset(
    ("BACKEND", "ROW_STRIDE", "backend_info", "bmt_hashes", "chunk_hash", "keccak256_batch",
     "transformed_addresses", "zero_hashes")
)  # fmt: skip


def __getattr__(name: str) -> object:
    if name in _BACKEND_NAMES:
        from . import backend

        return getattr(backend, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BACKEND",
    "BMT_DEPTH",
    "BRANCHES",
    "CHUNK_SIZE",
    "SEGMENT_SIZE",
    "SPAN_SIZE",
    "ROW_STRIDE",
    "Proof",
    "backend_info",
    "bmt_hash",
    "bmt_hashes",
    "bmt_levels",
    "bmt_root",
    "chunk_hash",
    "keccak256_batch",
    "proof_root_hash",
    "prove",
    "transformed_addresses",
    "verify_proof",
    "zero_hashes",
]
