"""Fixtures of the API tests: real daemons, started as subprocesses and killed at the end."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from chunkstore.reserve import ReserveStore
from tests.api import daemonproc
from tests.api.contenthelpers import Ctx, content_app, register_batch
from tests.api.helpers import Daemon


@pytest.fixture
def daemons() -> Iterator[Callable[..., Daemon]]:
    """``daemons(data_dir, *flags)``: a Daemon, not yet started; every one still running at the end is killed."""
    started: list[Daemon] = []

    def make(*a: Any, **kw: Any) -> Daemon:
        d = Daemon(*a, **kw)
        started.append(d)
        return d

    yield make
    for d in started:
        if d.proc is not None and d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[tuple[TestClient, ReserveStore]]:
    """An in-process content API with the node's batch registered: (client, the store behind it)."""
    app, store = content_app(tmp_path)
    async with TestClient(TestServer(app)) as client:
        await register_batch(client)
        yield client, store


@pytest.fixture
def ctx(node: tuple[TestClient, ReserveStore], tmp_path: Path) -> Ctx:
    """The same API as ``node``, as the content tests' ``Ctx`` (modules needing another app define their own)."""
    client, store = node
    return Ctx(client, store, tmp_path)


@pytest.fixture
def dev_daemon(tmp_path: Path) -> Iterator[daemonproc.Daemon]:
    """A started daemon in ``--dev`` mode on a fresh data dir, stopped at the end."""
    d = daemonproc.Daemon(tmp_path / "data", "--dev")
    try:
        d.wait_ready(60)
        yield d
    finally:
        d.stop()
