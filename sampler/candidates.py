"""Bounded selection of the smallest sample candidates of one shard.

A candidate is one (chunk, stamp) pair that passed the index-only filters:
``(transformed address, batch id, chunk address, chunk type)``. Candidates
are ordered by ``(transformed address, batch id)``; that key is what the
parent merges on and what the duplicate rule (smallest valid batch id wins)
relies on.

Only the ``k`` smallest keys above an optional exclusive lower bound
(``after``, used when the parent asks a shard for more) are kept. Whole
batches of hashed rows are screened with a vectorised test on the first 8
bytes of the transformed address, so after the first few batches almost no
row costs any Python work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

Candidate = tuple[bytes, bytes, bytes, int]  # (taddr, batch_id, address, chunk_type)
Key = tuple[bytes, bytes]  # (taddr, batch_id)

_MAX_PREFIX = (1 << 64) - 1


def _prefix(b: bytes) -> int:
    return int.from_bytes(b[:8], "big")


class CandidateSet:
    """The ``k`` smallest candidate keys greater than ``after``."""

    def __init__(self, k: int, after: Key | None = None) -> None:
        if k < 1:
            raise ValueError("k must be positive")
        self.k = k
        self.after = after
        self._after_prefix = _prefix(after[0]) if after is not None else 0
        self._items: list[Candidate] = []
        self._threshold: Key | None = None  # k-th smallest key once k are held
        self._threshold_prefix = _MAX_PREFIX
        self.beyond = 0  # candidates offered with a key above ``after``

    def _above_after(self, key: Key) -> bool:
        return self.after is None or key > self.after

    def _screen(self, prefixes: np.ndarray, key_of: Callable[[int], Key]) -> np.ndarray:
        """Indexes of the offered entries whose 8-byte prefix may still place them; counts ``beyond``.

        ``prefixes[j]`` is entry ``j``'s transformed-address prefix. Entries whose
        prefix ties ``after``'s are decided on their full key (``key_of(j)``) for
        the count; the caller re-checks every picked entry's full key.
        """
        if self.after is None:
            self.beyond += len(prefixes)
            return np.flatnonzero(prefixes <= self._threshold_prefix)
        above = prefixes > self._after_prefix
        tie = prefixes == self._after_prefix
        self.beyond += int(np.count_nonzero(above))
        for j in np.flatnonzero(tie).tolist():
            if key_of(j) > self.after:
                self.beyond += 1
        return np.flatnonzero((above | tie) & (prefixes <= self._threshold_prefix))

    def offer_rows(
        self,
        taddrs: np.ndarray,
        entry_rows: Sequence[int],
        entry_batches: Sequence[bytes],
        addresses: Sequence[bytes],
        types: Sequence[int],
    ) -> None:
        """Offer hashed rows; entry ``j`` pairs row ``entry_rows[j]`` with batch ``entry_batches[j]``.

        ``taddrs`` is ``uint8[n, 32]``; ``addresses``/``types`` are per row.
        """
        if len(entry_rows) == 0:
            return
        n = len(addresses)
        # First 8 bytes as big-endian integers: byte order equals numeric order.
        prefixes = np.ascontiguousarray(taddrs[:n, :8]).view(">u8").ravel()
        rows = np.asarray(entry_rows, dtype=np.intp)
        picked = self._screen(prefixes[rows], lambda j: (bytes(taddrs[entry_rows[j]]), entry_batches[j]))
        if picked.size == 0:
            return
        items = self._items
        for j in picked.tolist():
            r = entry_rows[j]
            key = (taddrs[r].tobytes(), entry_batches[j])
            if not self._above_after(key):
                continue
            if self._threshold is not None and key >= self._threshold:
                continue
            items.append((key[0], key[1], addresses[r], types[r]))
        # Trim lazily: sorting 2k items now and then is cheaper than a heap push per row.
        if len(items) >= 2 * self.k:
            self._trim()

    def offer_block(
        self,
        taddrs: np.ndarray,
        ent_row: np.ndarray,
        ent_batch: np.ndarray,
        row_addr: np.ndarray,
        row_type: np.ndarray,
    ) -> None:
        """Offer a block of hashed rows as columns: entry ``j`` pairs row ``ent_row[j]`` with ``ent_batch[j]``.

        ``taddrs``/``row_addr`` are ``uint8[rows, 32]``, ``ent_batch`` is
        ``uint8[entries, 32]``; only the entries that pass the prefix screen
        become Python objects.
        """
        if len(ent_row) == 0:
            return
        prefixes = np.ascontiguousarray(taddrs[:, :8]).view(">u8").ravel()
        picked = self._screen(prefixes[ent_row], lambda j: (taddrs[int(ent_row[j])].tobytes(), ent_batch[j].tobytes()))
        if picked.size == 0:
            return
        items = self._items
        for j in picked.tolist():
            row = int(ent_row[j])
            key = (taddrs[row].tobytes(), ent_batch[j].tobytes())
            if not self._above_after(key):
                continue
            if self._threshold is not None and key >= self._threshold:
                continue
            items.append((key[0], key[1], row_addr[row].tobytes(), int(row_type[row])))
            if len(items) >= 2 * self.k:
                # Trim as it goes: a first block offers thousands of entries below the (unset) threshold.
                self._trim()

    def offer(self, taddr: bytes, batch_id: bytes, address: bytes, chunk_type: int) -> None:
        """Offer one candidate (the slow path; tests and the fallback backend use it)."""
        key = (bytes(taddr), bytes(batch_id))
        if not self._above_after(key):
            return
        self.beyond += 1
        if self._threshold is not None and key >= self._threshold:
            return
        self._items.append((key[0], key[1], bytes(address), int(chunk_type)))
        if len(self._items) >= 2 * self.k:
            self._trim()

    def _trim(self) -> None:
        self._items.sort()
        del self._items[self.k :]
        if len(self._items) == self.k:
            last = self._items[-1]
            self._threshold = (last[0], last[1])
            self._threshold_prefix = _prefix(last[0])

    def result(self) -> list[Candidate]:
        """The kept candidates in ascending key order."""
        self._trim()
        return list(self._items)

    @property
    def complete(self) -> bool:
        """True when every candidate above ``after`` was kept (the shard has no more)."""
        return self.beyond <= len(self.result())
