"""The pytest plugin: options, fixtures, and the integrity checks run against a data dir.

``pytest -p chunkstore.testing --chunkstore-data-dir ./data`` runs the checks
in checks.py against the store in ``./data`` (read-only; a daemon may be
serving it meanwhile): every chunk, stamp and index entry verifies, and the
reserve sample of the given depth and anchor is sound, proofs included.
Given test paths of its own, the run collects those as well.

Fixtures for a user's tests: ``chunkstore_data_dir`` and ``chunkstore_store``
(the store named on the command line; tests using them are skipped
without it), ``stamped_reserve`` (a factory: a new store in a temporary
directory filled with stamped chunks) and ``regression_recipe`` (the
reference node's 16 recipe chunks).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chunkstore.reserve import ReserveStore

from .builders import BuiltReserve, build_reserve
from .recipe import RecipeChunk, recipe_chunks

CHECKS = Path(__file__).with_name("checks.py")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chunkstore", "integrity checks of a chunk store")
    group.addoption("--chunkstore-data-dir", metavar="DIR", default=None,
                    help="check the store in DIR: it verifies, and its reserve sample is sound")  # fmt: skip
    group.addoption("--chunkstore-depth", type=int, default=0, metavar="D",
                    help="neighbourhood depth of the sample check (default 0: the whole store)")  # fmt: skip
    group.addoption("--chunkstore-anchor", default="00", metavar="HEX",
                    help="anchor (hex) of the sample check (default 00)")  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chunkstore: integrity checks of the store given by --chunkstore-data-dir")
    if config.getoption("chunkstore_data_dir") and config.args_source != pytest.Config.ArgsSource.ARGS:
        # No test paths on the command line: the checks are the run (not the project's own suite).
        config.args[:] = [str(CHECKS)]
    elif config.getoption("chunkstore_data_dir"):
        config.args.append(str(CHECKS))


@pytest.fixture(scope="session")
def chunkstore_data_dir(pytestconfig: pytest.Config) -> Path:
    """The store directory given by ``--chunkstore-data-dir``; tests that use it are skipped without one."""
    value = pytestconfig.getoption("chunkstore_data_dir")
    if not value:
        pytest.skip("no --chunkstore-data-dir given")
    path = Path(os.fspath(value))
    if not path.is_dir():
        raise pytest.UsageError(f"--chunkstore-data-dir {path}: no such directory")
    return path


@pytest.fixture(scope="session")
def chunkstore_store(chunkstore_data_dir: Path) -> Iterator[ReserveStore]:
    """That store, opened read-only for the session."""
    with ReserveStore(chunkstore_data_dir, readonly=True) as store:
        yield store


@pytest.fixture
def stamped_reserve(tmp_path: Path) -> Iterator[Callable[..., BuiltReserve]]:
    """``stamped_reserve(chunks=200, soc_fraction=0.1, shards=4, seed=0, overlay=None)``: a filled store."""
    made: list[BuiltReserve] = []

    def make(chunks: int = 200, **kw: object) -> BuiltReserve:
        built = build_reserve(tmp_path / f"reserve-{len(made)}", chunks, **kw)  # type: ignore[arg-type]
        made.append(built)
        return built

    yield make
    for built in made:
        built.store.close()


@pytest.fixture(scope="session")
def regression_recipe() -> list[RecipeChunk]:
    """The reference node's regression recipe: 16 chunks (every other one a SOC) and their stamps."""
    return recipe_chunks()
