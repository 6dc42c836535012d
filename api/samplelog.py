"""The last reserve-sample runs, kept in memory for the status page's chart."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

KEEP = 48  # runs; the chart shows a day at one sample every 30 minutes


@dataclass(frozen=True)
class SampleRun:
    finished_at: float  # Unix seconds
    duration: float  # seconds
    ok: bool
    chunks_iterated: int
    chunks_per_second: float

    def as_json(self) -> dict[str, Any]:
        return {
            "finishedAt": self.finished_at,
            "durationSeconds": self.duration,
            "ok": self.ok,
            "chunksIterated": self.chunks_iterated,
            "chunksPerSecond": self.chunks_per_second,
        }


class SampleLog:
    """A bounded, thread-safe list of runs, oldest first (the scrape and the handlers read it off the loop)."""

    def __init__(self, keep: int = KEEP) -> None:
        self._runs: deque[SampleRun] = deque(maxlen=keep)
        self._lock = threading.Lock()

    def add(self, run: SampleRun) -> None:
        with self._lock:
            self._runs.append(run)

    def runs(self) -> list[SampleRun]:
        with self._lock:
            return list(self._runs)
