"""Test aids for users of chunkstore, and a pytest plugin: ``pytest -p chunkstore.testing``.

- recipe.py: the reference node's regression recipe (also ``chunkstore selfcheck``);
- builders.py: stamped reserves (``build_reserve``) for tests;
- integrity.py: ``assert_store_verifies`` and ``assert_sample_intact``, to run
  against any data dir;
- plugin.py / checks.py: the plugin's options and fixtures, and the checks
  ``--chunkstore-data-dir DIR`` runs against DIR.

The plugin's names are re-exported here when pytest is installed (it is a
test extra): the recipe and the assertions work without it.

May import sampler, chunkstore.transfer, chunkstore.reserve, chunkstore.store
and chunkstore.swarm; api imports it (selfcheck), never the other way.
"""

from __future__ import annotations

try:
    import pytest  # noqa: F401  (only to know whether the plugin can load)
except ImportError:  # a runtime install without the test extras
    pass
else:
    from .plugin import (
        chunkstore_data_dir,
        chunkstore_store,
        pytest_addoption,
        pytest_configure,
        regression_recipe,
        stamped_reserve,
    )

    __all__ = [
        "chunkstore_data_dir",
        "chunkstore_store",
        "pytest_addoption",
        "pytest_configure",
        "regression_recipe",
        "stamped_reserve",
    ]
