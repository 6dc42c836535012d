"""Erasure-coded trees against references the reference node's own pipeline computed (levels 0-4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chunkstore.swarm.file import split_bytes
from tests.swarm.filehelpers import sequential

VECTORS = json.loads((Path(__file__).resolve().parents[1] / "testdata" / "bee_redundancy_vectors.json").read_text())


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: f"{c['length']}-L{c['level']}")
def test_bee_pipeline_references_at_every_level(case):
    made: list[bytes] = []
    reference = split_bytes(sequential(case["length"]), lambda a, _d: made.append(a), level=case["level"],
                            replicas=False)
    assert reference.hex() == case["reference"]
    assert len(made) == case["chunks_put"]  # as many data, intermediate and parity chunks as Bee stores
