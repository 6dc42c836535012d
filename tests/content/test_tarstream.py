"""Reading an uploaded tar: special entries (GNU long names, PAX headers) are bounded and strictly parsed."""

from __future__ import annotations

import io
import tarfile

import pytest

from chunkstore.content import InvalidCollection
from chunkstore.content.files import Reader
from chunkstore.content.tarstream import MAX_SPECIAL_SIZE, TarStream
from chunkstore.swarm.tarheader import BLOCK, TarHeaderError, pax_records

HUGE = 64 << 20  # what the fuzzer declared


def header(name: str, typeflag: bytes, size: int) -> bytes:
    """One ustar header block with a valid checksum."""
    block = bytearray(BLOCK)
    block[0:100] = name.encode().ljust(100, b"\0")
    block[100:108] = b"0000644\0"
    block[124:136] = b"%011o\0" % size
    block[148:156] = b" " * 8
    block[156:157] = typeflag
    block[257:265] = b"ustar\x0000"
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def padded(data: bytes) -> bytes:
    return data + bytes(-len(data) % BLOCK)


def pax_body(**records: str) -> bytes:
    out = b""
    for key, value in records.items():
        rest = f" {key}={value}\n".encode()
        length = len(rest) + 1
        while length != len(rest) + len(str(length)):  # the length counts its own digits
            length = len(rest) + len(str(length))
        out += str(length).encode() + rest
    return out


def regular(name: str, data: bytes) -> bytes:
    return header(name, b"0", len(data)) + padded(data)


class CountingReader:
    """``head``, then ``filler`` bytes made on demand; counts what was read."""

    def __init__(self, head: bytes, filler: int = 0) -> None:
        self._head = io.BytesIO(head)
        self._filler = filler
        self.consumed = 0

    def read(self, n: int = -1, /) -> bytes:
        data = self._head.read(n)
        if n < 0:
            more = self._filler
        else:
            more = min(n - len(data), self._filler)
        self._filler -= more
        data += b"a" * more
        self.consumed += len(data)
        return data


def entries(reader: Reader) -> list[tuple[str, bytes]]:
    return [(e.name, e.read()) for e in TarStream(reader)]


@pytest.mark.parametrize(("typeflag", "what"), [
    (b"L", "GNU long name"), (b"K", "GNU long link name"), (b"x", "PAX extended header"), (b"g", "PAX global header"),
])
def test_oversized_special_entry_is_refused_before_its_data_is_read(typeflag: bytes, what: str) -> None:
    reader = CountingReader(header("././@LongLink", typeflag, HUGE), filler=HUGE)
    with pytest.raises(InvalidCollection, match=f"at offset 0: {what} of {HUGE} bytes is too long"):
        entries(reader)
    assert reader.consumed <= BLOCK


def test_oversized_special_entry_of_a_short_body_is_refused_as_too_long() -> None:
    # A body cut right after the header: the size alone decides, not running into the end.
    tar = regular("a.txt", b"a") + header("././@LongLink", b"L", MAX_SPECIAL_SIZE + 1)
    with pytest.raises(InvalidCollection, match=f"at offset {2 * BLOCK}: GNU long name of .* too long"):
        entries(io.BytesIO(tar))


def test_special_entries_up_to_the_bound_are_read() -> None:
    name = "d/" * ((MAX_SPECIAL_SIZE - 2) // 2) + "f"  # with its NUL: exactly the bound
    long = header("././@LongLink", b"L", len(name) + 1) + padded(name.encode() + b"\0")
    assert len(name) + 1 == MAX_SPECIAL_SIZE
    body = pax_body(path="p/" + "q" * (MAX_SPECIAL_SIZE - 16))  # "1048576 path=" and "\n" take 14 bytes
    assert len(body) == MAX_SPECIAL_SIZE
    pax = header("PaxHeader", b"x", len(body)) + padded(body)
    tar = long + regular("short", b"one") + pax + regular("short", b"two") + bytes(2 * BLOCK)
    reader = CountingReader(tar)
    got = entries(reader)
    assert got == [(name, b"one"), ("p/" + "q" * (len(body) - 16), b"two")]
    assert reader.consumed == len(tar)


def test_tarfile_long_names_still_read() -> None:
    name = "deep/" * 300 + "file.txt"
    for fmt in (tarfile.GNU_FORMAT, tarfile.PAX_FORMAT):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
            info = tarfile.TarInfo(name)
            info.size = 4
            tar.addfile(info, io.BytesIO(b"long"))
        assert entries(io.BytesIO(buf.getvalue())) == [(name, b"long")]


@pytest.mark.parametrize("size", ["1_0", "-1", "+", "++10", " 10", "10 ", "0x10", "1e1", "١٠", "9" * 20])
def test_pax_size_must_be_ascii_digits(size: str) -> None:
    body = pax_body(size=size)
    tar = header("PaxHeader", b"x", len(body)) + padded(body) + regular("a.txt", b"a" * 10) + bytes(2 * BLOCK)
    with pytest.raises(InvalidCollection, match=f"tar PAX header before offset {2 * BLOCK}: PAX size .* not a decimal"):
        entries(io.BytesIO(tar))


def test_empty_pax_records_keep_the_headers_own_values() -> None:
    """Go's mergePAX skips an empty record ("keep the original USTAR value"): the file stays, named and
    sized by its own header. It was dropped (an empty path) or refused (an empty size)."""
    body = pax_body(path="", size="")
    tar = header("PaxHeader", b"x", len(body)) + padded(body) + regular("a.txt", b"a" * 10) + bytes(2 * BLOCK)
    assert entries(io.BytesIO(tar)) == [("a.txt", b"a" * 10)]


def test_only_the_last_pax_header_before_an_entry_applies() -> None:
    """Go's reader replaces its PAX records at each extended header: an earlier one's path does not survive."""
    first, second = pax_body(path="first.txt"), pax_body(mtime="1")
    tar = (header("PaxHeader", b"x", len(first)) + padded(first) + header("PaxHeader", b"x", len(second))
           + padded(second) + regular("own.txt", b"own") + bytes(2 * BLOCK))  # fmt: skip
    assert entries(io.BytesIO(tar)) == [("own.txt", b"own")]


def test_gnu_long_name_wins_over_a_pax_path() -> None:
    """Go applies the GNU long name after merging the PAX records."""
    body, long = pax_body(path="pax.txt"), b"gnu-long.txt\0"
    tar = (header("PaxHeader", b"x", len(body)) + padded(body) + header("././@LongLink", b"L", len(long))
           + padded(long) + regular("short.txt", b"x") + bytes(2 * BLOCK))  # fmt: skip
    assert entries(io.BytesIO(tar)) == [("gnu-long.txt", b"x")]


@pytest.mark.parametrize("size", ["0010", "+10"])  # Go's ParseInt takes a leading zero and a plus sign
def test_pax_size_in_digits_is_used(size: str) -> None:
    body = pax_body(size=size)
    tar = header("PaxHeader", b"x", len(body)) + padded(body) + regular("a.txt", b"a" * 10) + bytes(2 * BLOCK)
    assert entries(io.BytesIO(tar)) == [("a.txt", b"a" * 10)]


@pytest.mark.parametrize("record", [b"1_2 path=a/b\n", b"+12 path=a/b\n", b" 12 path=a/b\n", b"-1 path=a/b\n",
                                    b"\xd9\xa1\xd9\xa2 path=a\n", b"9" * 5000 + b" path=a\n"])
def test_pax_record_length_must_be_ascii_digits(record: bytes) -> None:
    with pytest.raises(TarHeaderError, match="malformed PAX record length"):
        pax_records(record)
    tar = header("PaxHeader", b"x", len(record)) + padded(record) + regular("a.txt", b"a") + bytes(2 * BLOCK)
    with pytest.raises(InvalidCollection, match="at offset 0: malformed PAX record length"):
        entries(io.BytesIO(tar))


def test_pax_record_length_with_leading_zeros_is_read() -> None:
    assert pax_records(b"0013 path=ab\n") == {"path": "ab"}
