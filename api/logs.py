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

from aiohttp.http_exceptions import HttpProcessingError

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
    """The value bare when it is plain printable ASCII without a separator, else JSON-quoted and escaped:
    a client's path must not put a carriage return, an ANSI escape or a line separator into the log."""
    s = str(v)
    if s == "" or not s.isascii() or not s.isprintable() or any(c in s for c in ' "='):
        return json.dumps(s)  # ensure_ascii: every control and non-ASCII character written as an escape
    return s


class KeyValueFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return " ".join(f"{k}={_kv_value(v)}" for k, v in _record_fields(record).items())


class MalformedRequestFilter(logging.Filter):
    """aiohttp logs every request its HTTP parser refuses (an over-long header, a control character, a bad
    method) as an error with a traceback, though the client is at fault and got its 400: any scanner on
    the port would fill the log. Such a record becomes one warning line naming the client and the fault."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError) and 400 <= (exc.code or 0) < 500:
            record.msg = "refused a malformed request from %s: %s"
            record.args = (record.args[0] if isinstance(record.args, tuple) and record.args else "?",
                           str(exc.message)[:200])
            record.exc_info = None
            record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


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
    quiet_malformed_requests()


def quiet_malformed_requests() -> None:
    """Install ``MalformedRequestFilter`` on aiohttp's server logger (once)."""
    server = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, MalformedRequestFilter) for f in server.filters):
        server.addFilter(MalformedRequestFilter())
