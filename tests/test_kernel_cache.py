"""numba's cache serves every kernel: a second process loads machine code and compiles nothing.

A kernel numba cannot find in its cache is compiled again in every process
(half a second of a core or more each, for every import and every sampler
worker) and leaves one more file in ``__pycache__`` each time. A closure is
the usual way to get there: numba keys its entry on the closure's cells.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chunkstore.swarm.bmt import backend
from chunkstore.swarm.bmt.numba_kernels import _jit

ROOT = Path(__file__).resolve().parents[1]

# Loads the kernels the import and the sampler use, then prints how many signatures missed the cache.
_LOAD_ALL = """
import gc
from numba.core.registry import CPUDispatcher
from chunkstore.transfer import importer
import sampler.columns, sampler.fileorder  # noqa: F401 (they warm up at import)
importer._load_kernels()
kernels = [d for d in gc.get_objects() if isinstance(d, CPUDispatcher)]
print(" ".join(sorted(d.py_func.__qualname__ for d in kernels if sum(d.stats.cache_hits.values()))))
print(" ".join(sorted(d.py_func.__qualname__ for d in kernels if sum(d.stats.cache_misses.values()))))
"""


def _load_in_a_new_process() -> tuple[set[str], list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    out = subprocess.run(
        [sys.executable, "-c", _LOAD_ALL], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=True
    ).stdout.split("\n")
    return set(out[0].split()), out[1].split()


@pytest.mark.skipif(not backend.accelerated(), reason="the numba backend is not live here")
@pytest.mark.skipif(not os.access(ROOT / "chunkstore", os.W_OK), reason="no writable tree for numba's cache")
def test_a_second_process_compiles_no_kernel() -> None:
    _load_in_a_new_process()  # compiles whatever this tree has not cached yet
    loaded, missed = _load_in_a_new_process()
    assert missed == [], f"compiled again, not loaded from numba's cache: {missed}"
    # the kernels were there to load: the BMT's, the import's and the sampler's
    assert {"bmt_batch", "gather", "scatter", "scan", "scan_entries", "keep_rows"} <= loaded


def test_a_closure_is_refused_as_a_kernel() -> None:
    step = 3

    def add_step(x: int) -> int:
        return x + step

    with pytest.raises(TypeError, match="closure"):
        _jit(add_step)
