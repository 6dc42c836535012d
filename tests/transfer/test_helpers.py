"""The import tests' own helpers: what the tests count on them for."""

from __future__ import annotations

from tests.store.helpers import Stamper, random_cac
from tests.transfer import helpers
from tests.transfer.test_transfer import B1


def test_mixed_entries_are_distinct_chunks_even_when_a_draw_repeats(monkeypatch) -> None:
    """Short payloads start at 0 bytes, so two draws can be one chunk (two empty payloads: about one run of
    test_tar_round_trip_is_byte_for_byte in 500, which then counted one chunk fewer than its entries)."""
    empty = random_cac(0)
    draws = iter([empty, empty, empty])
    monkeypatch.setattr(helpers, "random_cac", lambda n: next(draws, None) or random_cac(n))
    out = helpers.mixed_entries(Stamper(B1), cacs=3, full=1, socs=1)
    assert len(out) == 5 and len({e.address for e in out}) == 5
