"""Errors of reserve import and export (importer.py, exporter.py).

Each message names what is wrong and where (tar entry, snapshot frame and
record, chunk address), so the operator can find it without a debugger.
"""

from __future__ import annotations

from chunkstore.swarm.errors import SwarmError


class TransferError(SwarmError):
    """An import or export could not be done; for an import, the store was left unchanged."""


class CorruptInput(TransferError):
    """The input file is truncated, damaged or not in a format this build reads."""


class ImportRefused(TransferError):
    """The input is well formed but holds a chunk or stamp the store refuses (named in the message)."""


class BudgetTooSmall(TransferError):
    """``--memory-budget`` leaves too little room for the buffers the import needs."""


class InsufficientSpace(TransferError):
    """The file system has too little free space for the import (its staging area, or what it would add
    to the store); found before anything was written to the store."""
