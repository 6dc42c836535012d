"""The versions the daemon reports: its own (the package's) and the reference node's API it serves.

Kept apart from the app's state so that ``chunkstore --version`` answers
without importing the daemon's stack.
"""

from __future__ import annotations

from chunkstore import __version__

API_VERSION = "8.1.0"  # the reference node's OpenAPI version whose endpoints this daemon serves


def describe() -> str:
    """What ``chunkstore --version`` prints."""
    return f"chunkstore {__version__} (Bee API {API_VERSION})"
