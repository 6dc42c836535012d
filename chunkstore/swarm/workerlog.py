"""Helper processes (the sampler's fork server and its workers) log as the process that started them.

The fork server is a fresh interpreter: without this its root logger has no
handler, and what it or a worker logs (a shard read through py-lmdb instead
of its data file, the numba cache being unavailable while the kernels are
imported) reached stderr through ``logging.lastResort`` as a bare message,
a plain line among the daemon's JSON ones, without level, logger or time.

The starting process hands over its root handler's formatter and its root
level, pickled, in an environment variable set only while the server starts
(``describe``). This module is the server's first preload: importing it
there installs a stderr handler with that formatter (``install``), before
the other preloads import the kernels, and every worker forked from the
server inherits it. The formatter's class is the starter's own (the daemon's
``api.logs``), found by name when it is unpickled; nothing here imports it.
It lives here, beside ``lifeline``, and not in ``sampler``: importing a
module of that package runs the package's ``__init__``, which imports the
kernels before this could set anything up.
"""

from __future__ import annotations

import base64
import logging
import os
import pickle
import sys

ENV = "CHUNKSTORE_SAMPLER_LOG_SETUP"
log = logging.getLogger(__name__)


def describe() -> str | None:
    """This process's root formatter and level, as ``ENV`` carries them; None when its root has no
    stream handler (then the fork server keeps Python's default)."""
    root = logging.getLogger()
    for handler in root.handlers:
        if isinstance(handler, logging.StreamHandler) and handler.formatter is not None:
            try:
                blob = pickle.dumps((handler.formatter, root.level))
            except Exception:  # an unpicklable formatter: the server keeps the default
                return None
            return base64.b64encode(blob).decode("ascii")
    return None


def install(setup: str | None) -> bool:
    """Log to stderr with the formatter and level ``setup`` describes; False when there is none to use."""
    if not setup:
        return False
    try:
        formatter, level = pickle.loads(base64.b64decode(setup))  # noqa: S301 - set by our own parent process
    except Exception:
        return False
    if not isinstance(formatter, logging.Formatter) or not isinstance(level, int):
        return False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return True


# Imported as the fork server's first preload module: configure that process (a no-op anywhere the
# variable is not set, e.g. the daemon itself, which imports this for ``describe``).
install(os.environ.get(ENV))
