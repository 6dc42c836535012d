"""The columns of one block of phase 1's index walk (plain numpy: no kernel is needed to hold them)."""

from __future__ import annotations

import numpy as np

from chunkstore.swarm.constants import ADDRESS_SIZE

TAIL_ROOM = 256  # bytes of a row's tail kept with the block (a full chunk's tail is 24, a SOC's up to 121)


class BlockColumns:
    """What one block of the walk fills: rows (chunk, type), entries (row, batch id), where each row's data is.

    ``where[i]`` is (head kind, position, size, tail kind, position, size) in
    the data file (``sampler.columns.locate_rows``); a tail stored inline in
    the index is copied into ``tails[i]``.
    """

    def __init__(self, cap: int) -> None:
        self.row_addr = np.zeros((cap, ADDRESS_SIZE), np.uint8)
        self.row_type = np.zeros(cap, np.uint8)
        self.ent_row = np.zeros(cap, np.int64)
        self.ent_batch = np.zeros((cap, ADDRESS_SIZE), np.uint8)
        self.where = np.zeros((cap, 6), np.int64)
        self.tails = np.zeros((cap, TAIL_ROOM), np.uint8)
        self.rows = 0
        self.entries = 0
        self.walked = 0  # index entries walked for this block (progress)
