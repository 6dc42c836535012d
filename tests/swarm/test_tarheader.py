"""Tar header fields, against Python's tarfile as the independent writer."""

from __future__ import annotations

import io
import tarfile

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chunkstore.swarm.tarheader import (
    BLOCK,
    CHECKSUM,
    TarHeaderError,
    checksum_matches,
    computed_checksum,
    header_sum,
    number,
    pax_records,
    stored_checksum,
    text,
)


def test_header_sum_is_exact():
    rng = np.random.default_rng(5)
    blocks = [bytes(512), b"\xff" * 512, b"\x01" * 512] + [rng.integers(0, 256, 512, np.uint8).tobytes() for _ in range(2000)]
    blocks += [rng.integers(200, 256, 512, np.uint8).tobytes() for _ in range(2000)]  # sums past 65521
    for block in blocks:
        assert header_sum(block) == sum(block)


def _header(fmt: int, name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    return info.tobuf(fmt, "utf-8", "surrogateescape")


@pytest.mark.parametrize("fmt", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_tarfile_headers_read_back(fmt: int) -> None:
    raw = _header(fmt, "dir/" + "n" * 120 + "/é.txt", 12345)
    last = raw[-BLOCK:]  # the entry's own header, after any GNU long-name or PAX entries
    assert checksum_matches(last) and stored_checksum(last) == computed_checksum(last)
    if fmt == tarfile.PAX_FORMAT:
        pax_size = number(raw[124:136], "size")
        records = pax_records(raw[BLOCK : BLOCK + pax_size])
        assert records["path"] == "dir/" + "n" * 120 + "/é.txt"
    assert number(last[124:136], "size") == 12345


def test_signed_checksum_of_old_tars_is_accepted() -> None:
    block = bytearray(_header(tarfile.USTAR_FORMAT, "é", 1))  # a byte above 127 makes the sums differ
    signed = sum(b - 256 if b > 127 else b for b in block[:148] + b" " * 8 + block[156:])
    assert signed != computed_checksum(block)
    block[CHECKSUM] = b"%06o\0 " % signed
    assert checksum_matches(block)
    block[CHECKSUM] = b"%06o\0 " % (signed + 1)
    assert not checksum_matches(block)
    block[CHECKSUM] = b"nonsense"
    assert stored_checksum(block) is None and not checksum_matches(block)


@given(st.integers(min_value=0, max_value=(1 << 63) - 1))
def test_numbers_in_octal_and_gnu_base256(value: int) -> None:
    if value < 8**11:
        assert number(b"%011o\0" % value, "size") == value
        assert number(b" %o \0\0" % value, "size") == value
    field = bytearray(value.to_bytes(12, "big"))
    field[0] |= 0x80
    assert number(bytes(field), "size") == value


def test_bad_numbers_and_records_are_typed_errors() -> None:
    assert number(b"\0" * 12, "size") == 0
    with pytest.raises(TarHeaderError, match="not octal"):
        number(b"12389\0", "size")
    with pytest.raises(TarHeaderError, match="negative size"):
        number(b"\xff" + bytes(11), "size")
    assert pax_records(b"12 path=a/b\n8 k=v=w\n") == {"path": "a/b", "k": "v=w"}
    for bad in (b"x path=a\n", b"99 path=a\n", b"10 path=ab", b"9 pathab\n", b"0 \n"):
        with pytest.raises(TarHeaderError):
            pax_records(bad)
    assert text(b"name\0junk") == "name" and text(b"\xff\0", "replace") == "\ufffd"


def test_tarfile_reads_what_the_fields_say() -> None:
    """A header whose fields we read is one tarfile reads the same way."""
    raw = _header(tarfile.USTAR_FORMAT, "a/b.txt", 3) + b"abc".ljust(BLOCK, b"\0") + bytes(2 * BLOCK)
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        (member,) = tar.getmembers()
    assert (member.name, member.size) == (text(raw[0:100]), number(raw[124:136], "size"))
