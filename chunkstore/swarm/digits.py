"""Decimal numbers from outside (paths, queries, headers, archive records), read without Python's pitfalls.

``int()`` takes more than Go's ``strconv`` does (``1_0``, surrounding
whitespace, non-ASCII digits), and refuses to convert more than 4,300 digits
with a ``ValueError`` the callers did not expect. Callers check the syntax
they accept (ASCII digits, their own sign rules); this bounds the value
before converting it.
"""

from __future__ import annotations


def decimal_below(digits: str, bits: int) -> int | None:
    """The value of ASCII decimal ``digits`` when it is below ``2**bits``, else None.

    Leading zeros count for nothing, as in Go. The length is checked before
    converting, so any number of digits is cheap to refuse.
    """
    significant = digits.lstrip("0")
    if len(significant) > len(str(1 << bits)):
        return None
    n = int(significant or "0")
    return n if n < 1 << bits else None
