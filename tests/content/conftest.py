"""Fixtures of the content tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.content.helpers import Node, open_node


@pytest.fixture
def node(tmp_path) -> Iterator[Node]:
    n = open_node(tmp_path / "store")
    try:
        yield n
    finally:
        n.store.close()
