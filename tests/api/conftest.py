"""Fixtures of the API tests: real daemons, started as subprocesses and killed at the end."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

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


