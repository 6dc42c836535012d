"""Fixtures of the protocol-primitive tests: the hashing backend as a test needs it."""

from __future__ import annotations

import pytest

from chunkstore.swarm.bmt import backend as hashing


@pytest.fixture
def pysha3_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the facade's fallback loop in-process (the kernel handle switched off, put back after)."""
    monkeypatch.setattr(hashing, "_kn", None)
