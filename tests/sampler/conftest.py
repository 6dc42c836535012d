"""Fixtures of the sampler tests: the hashing backend state a sample may change."""

from __future__ import annotations

import pytest

from chunkstore.swarm.bmt import backend as hashing


@pytest.fixture
def keep_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let the sampler demote the accelerated backend; the module's state is put back after the test."""
    if not hashing.accelerated():
        pytest.skip("the accelerated backend is not available here")
    for name in ("BACKEND", "_kn", "_reason"):
        monkeypatch.setattr(hashing, name, getattr(hashing, name))
