"""Progress bars for long store commands (import, export, verify): on a terminal only.

tqdm draws on stderr with rate and ETA; when stderr is not a terminal (a
pipe, a log file, a test) the bar is disabled and costs a no-op call, so
output stays clean in scripts.
"""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm


def enabled(stream: Any = None) -> bool:
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class _Bar(tqdm):  # type: ignore[misc]  # tqdm ships no types
    """tqdm without its monitor thread: the bars here are updated often, and an import forks its workers
    only from a process with no other thread (chunkstore/transfer/workers.py), so a finished bar must not
    leave one behind."""

    monitor_interval = 0


def bar(desc: str, total: int | None = None, unit: str = "chunk", *, bytes_unit: bool = False, show: bool | None = None) -> tqdm:
    """A tqdm bar on stderr, shown only if ``show`` (default: stderr is a terminal)."""
    visible = enabled() if show is None else show
    return _Bar(
        total=total,
        desc=desc,
        unit="B" if bytes_unit else unit,
        unit_scale=bytes_unit,
        unit_divisor=1024 if bytes_unit else 1000,
        disable=not visible,
        file=sys.stderr,
        dynamic_ncols=True,
        smoothing=0.1,
        mininterval=0.25,
    )
