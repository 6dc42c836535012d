"""Integrity assertions a user runs against a store: it verifies, and its sample is sound.

Both fail with an ``AssertionError`` that names what is wrong, so they read
well in a test report; ``InsufficientSample`` passes through (too few
chunks is not corruption).
"""

from __future__ import annotations

import os
import time

from chunkstore.reserve import ReserveStore
from chunkstore.store.verify import VerifyReport, verify_store
from chunkstore.swarm.errors import SwarmError
from sampler import (
    SampleIntegrityError,
    SampleResult,
    check_sample,
    make_inclusion_proofs,
    reserve_sample,
    sample_hash,
    verify_inclusion_proof,
)

MAX_LISTED = 20  # problems named in a failure message


def assert_store_verifies(path: str | os.PathLike[str]) -> VerifyReport:
    """Every chunk, stamp and index entry of the store at ``path`` checks out (read-only)."""
    report = verify_store(os.fspath(path))
    if not report.ok:
        listed = "\n".join(str(p) for p in report.problems[:MAX_LISTED])
        more = len(report.problems) - MAX_LISTED
        tail = f"\n... and {more} more" if more > 0 else ""
        raise AssertionError(f"{report.summary()}\n{listed}{tail}")
    return report


def assert_sample_intact(
    store: ReserveStore,
    anchor: bytes,
    depth: int = 0,
    *,
    consensus_time: int | None = None,
    anchor2: bytes = b"\x00",
    workers: int | None = None,
) -> SampleResult:
    """The reserve sample of ``store`` for ``anchor`` and ``depth`` is one the contract would accept.

    Takes the sample, then re-derives every item from its bytes with the
    reference primitives (chunk address, transformed address, stamp against
    the batch, order, no shared buffers), and checks the three inclusion
    proofs for ``anchor2`` the way the contract does.
    """
    ct = time.time_ns() if consensus_time is None else consensus_time
    result = reserve_sample(store, anchor, depth, ct, workers=workers)
    try:
        check_sample(result.items, anchor, store.batches, ct)
    except SampleIntegrityError as exc:
        raise AssertionError(f"sample of depth {depth}, anchor {anchor.hex()}: {exc}") from None
    root = sample_hash(result.items)
    try:
        for proof in make_inclusion_proofs(result.items, anchor, anchor2):
            verify_inclusion_proof(proof, root, anchor)
    except SwarmError as exc:
        raise AssertionError(f"inclusion proof of the sample {root.hex()}: {exc}") from None
    return result
