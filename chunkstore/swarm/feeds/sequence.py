"""Finding the latest update of a sequence feed.

Updates of a sequence feed sit at indexes 0, 1, 2, ... with no gaps, so the
latest is the ``i`` whose update exists while ``i + 1``'s does not. The
reference node's finder probes ``base + 2^k - 1`` for k = 8..1 in rounds,
moving ``base`` forward by at most 255 per round: about 8 reads per 255
updates, linear in the feed's length. This one doubles the step until a
miss and then bisects between the last hit and the miss: for n updates
about ``2 * log2(n)`` reads (28 for 10,000 updates).

For a gap-free feed both give the same answer. A feed with a gap (an update
lost from the store) has no single right answer; this finder returns some
present ``i`` with ``i + 1`` absent, at or after ``after``.

The time argument ``at`` of the reference's lookup is not taken: its
sequence finder ignores it, and v2 payloads carry no timestamp to test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .identity import MAX_INDEX, next_index, update_address

Getter = Callable[[bytes], bytes | None]


@dataclass(frozen=True)
class SequenceLookup:
    """The latest update found: index ``None`` (and no chunk) when the feed has none at ``after``."""

    index: int | None
    next_index: int
    chunk: bytes | None  # the latest update's SOC data
    reads: int  # chunk reads the lookup made


def find_latest(get: Getter, owner: bytes, topic: bytes, *, after: int = 0) -> SequenceLookup:
    """The latest update of feed ``(owner, topic)`` through ``get(address) -> data | None``.

    ``after`` is a known index to start from (the reference's ``after``
    hint): if there is no update there, the answer is "no update" with next
    index ``after``, as the reference answers.
    """
    reads = 0

    def probe(index: int) -> bytes | None:
        nonlocal reads
        reads += 1
        return get(update_address(owner, topic, index))

    found = probe(after)
    if found is None:
        return SequenceLookup(None, after, None, reads)
    low, chunk = after, found
    high = None
    step = 1
    while high is None:
        if low == MAX_INDEX:
            return SequenceLookup(low, next_index(low), chunk, reads)
        candidate = min(low + step, MAX_INDEX)
        data = probe(candidate)
        if data is None:
            high = candidate
        else:
            low, chunk = candidate, data
            step *= 2
    while high - low > 1:
        middle = (low + high) // 2
        data = probe(middle)
        if data is None:
            high = middle
        else:
            low, chunk = middle, data
    return SequenceLookup(low, next_index(low), chunk, reads)
