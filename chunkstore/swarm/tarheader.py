"""The fields of a tar header block, as both tars Bee speaks use them.

Bee reads folder uploads (``POST /bzz`` with ``Swarm-Collection``) and writes
its reserve export as tar archives; ``chunkstore.content.tarstream`` and
``chunkstore.transfer.tarformat`` read those, each with its own framing and
errors. What a header block means is the same for both and lives here: numeric
fields (octal or GNU base-256), text fields, the checksum (unsigned, or signed
as some old tars wrote it) and PAX extended-header records.

Errors are ``TarHeaderError`` (a ``ValueError``) without a position; callers
add where in their stream it happened and raise their own type.
"""

from __future__ import annotations

import zlib

from .digits import decimal_below

BLOCK = 512
CHECKSUM = slice(148, 156)
BLANK_CHECKSUM = 8 * ord(" ")  # the checksum field counts as spaces in its own sum (and is all of an empty block's)


class TarHeaderError(ValueError):
    """A header field that cannot be read."""


def number(field: bytes | bytearray, what: str) -> int:
    """A numeric field: octal digits (NUL or space padded; empty is 0), or GNU base-256."""
    if field[:1] and field[0] & 0x80:  # base-256: the top bit marks it, 0x40 is the sign
        if field[0] & 0x40:
            raise TarHeaderError(f"negative {what}")
        return int.from_bytes(bytes([field[0] & 0x7F]) + bytes(field[1:]), "big")
    digits = bytes(field).split(b"\0", 1)[0].strip(b" ")
    if not digits:
        return 0
    try:
        return int(digits, 8)
    except ValueError:
        raise TarHeaderError(f"{what} {digits!r} is not octal") from None


def text(field: bytes | bytearray, errors: str = "surrogateescape") -> str:
    """A NUL-terminated text field (a name, a prefix, a GNU long name's body)."""
    return bytes(field).split(b"\0", 1)[0].decode("utf-8", errors)


def header_sum(block: bytes | bytearray) -> int:
    """Sum of a 512-byte block's bytes, exactly, in two C calls rather than a 512-step loop.

    The sum S is below 2 * 65521, so adler-32's low half, (1 + S) mod 65521,
    leaves two candidates, which differ mod 255; and the block read as one
    base-256 number is S mod 255 (256 = 1 mod 255). A tar reader's hottest
    line: one call per entry.
    """
    low = ((zlib.adler32(block) & 0xFFFF) - 1) % 65521
    return low if low % 255 == int.from_bytes(block, "little") % 255 else low + 65521


def computed_checksum(block: bytes | bytearray) -> int:
    """The header's unsigned checksum as POSIX defines it (its own field read as spaces)."""
    return header_sum(block) - sum(block[CHECKSUM]) + BLANK_CHECKSUM


def stored_checksum(block: bytes | bytearray) -> int | None:
    """The checksum the header records, or None when the field is not a number."""
    try:
        return number(block[CHECKSUM], "checksum")
    except TarHeaderError:
        return None


def _signed_checksum(block: bytes | bytearray) -> int:
    # Some old tars summed the header as signed chars; POSIX readers accept either.
    def signed(b: int) -> int:
        return b - 256 if b > 127 else b

    return sum(map(signed, block)) - sum(map(signed, block[CHECKSUM])) + BLANK_CHECKSUM


def checksum_matches(block: bytes | bytearray, computed: int | None = None) -> bool:
    """True when the recorded checksum is the block's unsigned or signed sum (``computed``: the
    unsigned one, when the caller has it already)."""
    stored = stored_checksum(block)
    if stored is None:
        return False
    if stored == (computed_checksum(block) if computed is None else computed):
        return True
    return stored == _signed_checksum(block)


def pax_decimal(value: str, what: str) -> int:
    """A PAX record's decimal value (``size``): ASCII digits after an optional ``+``, below 2**63, as Go's
    ``ParseInt`` takes it and its reader then accepts it (no negative size).

    Python's ``int()`` would also take ``1_0``, surrounding whitespace and
    non-ASCII digits; Go's reader refuses them, and ``-1``.
    """
    digits = value[1:] if value[:1] == "+" else value
    n = decimal_below(digits, 63) if digits.isascii() and digits.isdigit() else None
    if n is None:
        raise TarHeaderError(f"PAX {what} {value[:40]!r} is not a decimal number below 2**63")
    return n


def pax_records(body: bytes) -> dict[str, str]:
    """The records of a PAX extended header: ``"<length> <key>=<value>\\n"``, each length counting itself."""
    records: dict[str, str] = {}
    pos = 0
    while pos < len(body):
        space = body.find(b" ", pos)
        if space < 0:
            break
        digits = body[pos:space]
        # ASCII digits only (bytes.isdigit): int() would also take "1_0", "+5", " 5" and other digits.
        length = decimal_below(digits.decode("ascii"), 63) if digits.isdigit() else None
        if length is None:
            raise TarHeaderError(f"malformed PAX record length {digits[:20]!r}")
        record = body[space + 1 : pos + length]
        if length <= 0 or pos + length > len(body) or not record.endswith(b"\n") or b"=" not in record:
            raise TarHeaderError(f"malformed PAX record (length {length})")
        key, value = record[:-1].split(b"=", 1)
        records[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        pos += length
    return records
