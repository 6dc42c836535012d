"""Structured logs on stderr: one JSON object per line, or ``key=value`` pairs.

A record's structured fields travel in ``extra={"fields": {...}}``; every line
carries ``ts`` (RFC 3339, UTC), ``level``, ``logger`` and ``msg``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

_BASE = ("ts", "level", "logger", "msg")


def _record_fields(record: logging.LogRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
        "level": record.levelname.lower(),
        "logger": record.name,
        "msg": record.getMessage(),
    }
    fields = getattr(record, "fields", None)
    if isinstance(fields, dict):
        for k, v in fields.items():
            out[k if k not in _BASE else f"field_{k}"] = v
    if record.exc_info:
        out["error"] = logging.Formatter().formatException(record.exc_info)
    return out


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(_record_fields(record), default=str, separators=(",", ":"))


def _kv_value(v: Any) -> str:
    s = str(v)
    if s == "" or any(c in s for c in ' "=\n\t'):
        return json.dumps(s)
    return s


class KeyValueFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return " ".join(f"{k}={_kv_value(v)}" for k, v in _record_fields(record).items())


def setup_logging(fmt: str = "json", level: str = "info", stream: Any = None) -> None:
    """Route the daemon's and aiohttp's loggers to one structured handler on stderr."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else KeyValueFormatter())
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    # aiohttp's own access log duplicates ours
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
