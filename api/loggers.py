"""``GET /loggers[/{exp}]`` and ``PUT /loggers/{exp}/{verbosity}`` over Python's logging registry.

The reference node (``pkg/api/logger.go``) lists its registered loggers as
``{"tree", "loggers"}`` and changes their verbosity by an expression: the
exact id of one logger, else a regular expression searched in each id
(``exp`` travels base64url-encoded). Here the loggers are this project's
(``api``, ``chunkstore``, ``sampler``) and aiohttp's, as Python's logging
module holds them:

- ``subsystem`` (the id expressions match) is the Python logger name,
  ``api.routes_feeds``; ``id`` is its base64url; ``logger`` is the name
  with ``/`` for ``.``, the path the ``tree`` nests by, as the reference's
  names are ``node/api``;
- ``verbosity`` is the logger's effective level in the reference's words:
  ``none``, ``error``, ``warning``, ``info``, ``debug`` or ``all`` (below
  debug). Setting one sets the logger's own level, so its children that
  have none of their own follow it.

Expressions are Python regular expressions (the reference's are Go's RE2;
the syntax used for logger names is the same).
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
from typing import Any

ROOTS = ("api", "chunkstore", "sampler", "aiohttp")

NONE_LEVEL = logging.CRITICAL + 10  # above every record: the logger is silent
ALL_LEVEL = 1  # below DEBUG: everything passes
VERBOSITY_LEVELS = {
    "none": NONE_LEVEL,
    "error": logging.ERROR,
    "warning": logging.WARNING,
    "info": logging.INFO,
    "debug": logging.DEBUG,
    "all": ALL_LEVEL,
}


class LoggerExpressionError(ValueError):
    """``exp`` is not base64url, or not a valid regular expression."""


def verbosity_of(level: int) -> str:
    if level >= NONE_LEVEL:
        return "none"
    if level >= logging.ERROR:
        return "error"
    if level >= logging.WARNING:
        return "warning"
    if level >= logging.INFO:
        return "info"
    if level >= logging.DEBUG:
        return "debug"
    return "all"


def registered() -> list[logging.Logger]:
    """The loggers under ``ROOTS`` that exist now, by name."""
    names = [
        name
        for name, obj in logging.Logger.manager.loggerDict.items()
        if isinstance(obj, logging.Logger) and name.split(".", 1)[0] in ROOTS
    ]
    return [logging.getLogger(name) for name in sorted(names)]


def decode_expression(encoded: str) -> str:
    """``exp`` from its base64url form (padded, as Go's URLEncoding wants it)."""
    try:
        return base64.b64decode(encoded.encode("ascii"), altchars=b"-_", validate=True).decode("utf-8")
    except (UnicodeError, binascii.Error, ValueError) as exc:
        raise LoggerExpressionError(f"not base64url: {exc}") from None


def _matcher(exp: str) -> tuple[re.Pattern[str] | None, str | None]:
    try:
        return re.compile(exp), None
    except re.error as exc:
        return None, str(exc)
    except (OverflowError, RecursionError):  # a repeat count past C's int, nesting past the stack
        return None, "expression too large or nested too deeply"


def list_loggers(exp: str | None = None) -> dict[str, Any]:
    """The reference's answer for ``exp`` (every logger when None); an invalid expression that
    matches no id exactly raises ``LoggerExpressionError``."""
    rex, error = (None, None) if exp is None else _matcher(exp)
    tree: dict[str, Any] = {}
    flat: list[dict[str, str]] = []
    for logger in registered():
        subsystem = logger.name
        if exp is not None and exp != subsystem and (rex is None or not rex.search(subsystem)):
            continue
        verbosity = verbosity_of(logger.getEffectiveLevel())
        path = subsystem.replace(".", "/")
        node = tree
        parts = path.split("/")
        for i, part in enumerate(parts):
            entry = node.setdefault(part, {"/": {}})
            if i == len(parts) - 1:
                entry.setdefault("+", []).append(f"{verbosity}|{subsystem}")
            node = entry["/"]
        flat.append(
            {
                "logger": path,
                "verbosity": verbosity,
                "subsystem": subsystem,
                "id": base64.urlsafe_b64encode(subsystem.encode("utf-8")).decode("ascii"),
            }
        )
    if not flat and error is not None:
        raise LoggerExpressionError(error)
    _drop_empty(tree)
    return {"tree": tree, "loggers": flat}


def _drop_empty(tree: dict[str, Any]) -> None:
    # Go leaves out an empty "/" map (omitempty), as it does a missing "+".
    for entry in tree.values():
        _drop_empty(entry["/"])
        if not entry["/"]:
            del entry["/"]


def set_verbosity(exp: str, verbosity: str) -> list[str]:
    """Set the level of the logger named ``exp``, else of every logger whose name the expression
    matches; the names changed. An invalid expression raises ``LoggerExpressionError``."""
    level = VERBOSITY_LEVELS[verbosity]
    loggers = registered()
    exact = [lg for lg in loggers if lg.name == exp]
    if not exact:
        rex, error = _matcher(exp)
        if rex is None:
            raise LoggerExpressionError(error or "invalid expression")
        exact = [lg for lg in loggers if rex.search(lg.name)]
    for logger in exact:
        logger.setLevel(level)
    return [lg.name for lg in exact]
