"""Fixtures of the store tests: a batch, and an open store that knows it (modules may override both)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chunkstore.reserve import ReserveStore
from chunkstore.store.batchstore import Batch
from tests.store.helpers import make_batch, open_store


@pytest.fixture
def batch() -> Batch:
    return make_batch(1)


@pytest.fixture
def store(tmp_path: Path, batch: Batch) -> Iterator[ReserveStore]:
    s = open_store(str(tmp_path / "store"), batches=[batch])
    yield s
    s.close()
