"""How this process loads the numba kernels: at the backend's import (the default), or in the background.

A daemon asks for the background before anything imports :mod:`.backend`:
it then listens at once and serves on the pysha3 reference while a thread
loads the kernels (compiling them, on a fresh install, takes 14-25 s on two
cores), and switches to them when they pass their self-test. Everything that
must know the final choice (a sample: which path its workers take) waits for
it with :func:`backend.wait_settled`. Command-line tools and the sampler's
workers keep the default: they need the kernels before their first hash.
This lives apart from the backend because importing the backend is what
selects it.
"""

from __future__ import annotations

import sys

_background = False


def load_in_background() -> bool:
    """Load the kernels in a background thread when the backend is first imported; False (and nothing
    changes) when something imported the backend already."""
    global _background
    if f"{__package__}.backend" in sys.modules:
        return False
    _background = True
    return True


def in_background() -> bool:
    return _background
