"""The reference vector (tests/testdata/inclusion-proofs.json) and the recipe that builds its chunks.

The recipe itself lives in the library (chunkstore.testing.recipe), where
``chunkstore selfcheck`` uses it too; the vector file is test data.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chunkstore.testing.recipe import (
    ANCHOR1,
    ANCHOR2,
    BATCH_ID,
    EXPECTED_SAMPLE_ADDRESS,
    INDEX,
    SIGNER,
    TIMESTAMP,
    RecipeChunk,
    recipe_chunks,
)

TESTDATA = Path(__file__).resolve().parents[1] / "testdata"

__all__ = [
    "ANCHOR1",
    "ANCHOR2",
    "BATCH_ID",
    "EXPECTED_SAMPLE_ADDRESS",
    "INDEX",
    "SIGNER",
    "TIMESTAMP",
    "RecipeChunk",
    "load_vector",
    "recipe_chunks",
]


def load_vector() -> dict[str, Any]:
    return json.loads((TESTDATA / "inclusion-proofs.json").read_text())
