"""The integrity checks ``pytest -p chunkstore.testing --chunkstore-data-dir DIR`` runs against DIR.

A test module shipped with the package: the plugin adds it to the run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chunkstore.reserve import ReserveStore
from sampler import InsufficientSample

from .integrity import assert_sample_intact, assert_store_verifies

pytestmark = pytest.mark.chunkstore


def test_store_verifies(chunkstore_data_dir: Path) -> None:
    """Every chunk hashes to its address, every stamp is valid for its batch, the index agrees both ways."""
    assert_store_verifies(chunkstore_data_dir)


def test_sample_is_sound(chunkstore_store: ReserveStore, pytestconfig: pytest.Config) -> None:
    """The reserve sample re-derives from its bytes, and its inclusion proofs check out as the contract checks them."""
    anchor = bytes.fromhex(pytestconfig.getoption("chunkstore_anchor"))
    depth = pytestconfig.getoption("chunkstore_depth")
    try:
        result = assert_sample_intact(chunkstore_store, anchor, depth)
    except InsufficientSample as exc:
        pytest.skip(f"no sample to check: {exc}")
    assert result.items
