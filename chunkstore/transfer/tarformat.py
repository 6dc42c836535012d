"""The reference node's reserve export: a tar of one entry per (chunk, stamp).

``bee db export reserve`` (bee: cmd/bee/cmd/db.go) names each entry by the
chunk's hex address and stores ``uint32 big-endian data length | data |
stamp(113)``. Two facts about the files it writes matter here:

- it never closes its tar writer, so the file ends right after the last
  entry's data: no padding to the 512-byte block and no end-of-archive
  blocks. A reader must take a clean end of file between entries as the end
  (so a file cut exactly at an entry boundary cannot be told from a whole
  one; ``TarReader.end_marker`` says whether the end was marked);
- the same address appears once per stamp the chunk is held under.

We write plain USTAR headers (mode 0600, mtime 0, as the reference's) and
do close the archive. The reader accepts what Go's and Python's tar writers
produce: USTAR, PAX extended headers (``path``, ``size``), GNU long names.
"""

from __future__ import annotations

from typing import Protocol

from chunkstore.swarm.constants import MAX_SOC_SIZE, SPAN_SIZE, STAMP_SIZE
from chunkstore.swarm.tarheader import (
    BLANK_CHECKSUM,
    BLOCK,
    CHECKSUM,
    TarHeaderError,
    checksum_matches,
    computed_checksum,
    number,
    pax_decimal,
    pax_records,
    stored_checksum,
    text,
)

from .errors import CorruptInput

LENGTH_PREFIX = 4  # uint32 big-endian data length before the data
MIN_DATA = SPAN_SIZE  # a span and nothing else
MAX_DATA = MAX_SOC_SIZE  # a SOC with a full payload: id | signature | span | payload
MIN_RECORD = LENGTH_PREFIX + MIN_DATA + STAMP_SIZE
MAX_RECORD = LENGTH_PREFIX + MAX_DATA + STAMP_SIZE
END_OF_ARCHIVE = bytes(2 * BLOCK)

class Readable(Protocol):
    """What the readers need of an input: a file, a pipe, or a stream that serves some bytes again first."""

    def read(self, n: int, /) -> bytes: ...

    def readinto(self, buf: memoryview, /) -> int: ...


_REGULAR = (ord("0"), 0, ord("7"))  # '7' is a contiguous file, read as regular by every tar
_SKIPPED = (ord("5"),)  # directories: nothing to read


def padding(size: int) -> int:
    """Zero bytes after ``size`` bytes of content up to the next 512-byte block."""
    return -size % BLOCK


def _template() -> tuple[bytearray, int]:
    """A USTAR header with every field but name, size and checksum filled; and its byte sum."""
    h = bytearray(BLOCK)
    h[100:108] = b"0000600\0"  # mode
    h[108:116] = b"0000000\0"  # uid
    h[116:124] = b"0000000\0"  # gid
    h[136:148] = b"00000000000\0"  # mtime 0, as the reference node's zero time
    h[156] = ord("0")  # regular file
    h[257:265] = b"ustar\x0000"
    h[329:337] = b"0000000\0"  # devmajor
    h[337:345] = b"0000000\0"  # devminor
    return h, sum(h) + BLANK_CHECKSUM


_TEMPLATE, _TEMPLATE_SUM = _template()


def encode_header(name: bytes, size: int) -> bytes:
    """A 512-byte USTAR header of a regular file ``name`` (ASCII, at most 100 bytes) of ``size`` bytes."""
    if len(name) > 100:
        raise ValueError(f"tar entry name of {len(name)} bytes does not fit a USTAR header")
    if not 0 <= size < 8**11:
        raise ValueError(f"tar entry size {size} does not fit a USTAR header")
    h = bytearray(_TEMPLATE)
    h[: len(name)] = name
    size_field = b"%011o\0" % size
    h[124:136] = size_field
    total = _TEMPLATE_SUM + sum(name) + sum(size_field)
    h[CHECKSUM] = b"%06o\0 " % total
    return bytes(h)


def encode_record_prefix(data_length: int) -> bytes:
    return data_length.to_bytes(LENGTH_PREFIX, "big")


class TarReader:
    """Entries of a tar stream, read sequentially into caller-supplied buffers.

    ``next_entry()`` returns ``(name, size)`` of the next regular file or None
    at the end; the caller then reads the content with ``read_padded`` into a
    buffer of ``size + padding(size)`` bytes. Meta entries (PAX headers, GNU
    long names, directories) are consumed here.
    """

    def __init__(self, stream: Readable) -> None:
        self._f = stream
        self._header = bytearray(BLOCK)
        self._header_view = memoryview(self._header)
        self._scratch = bytearray(BLOCK)
        self.offset = 0  # bytes consumed so far
        self.entries = 0  # regular file entries returned
        self.end_marker = False  # True once a zero block ended the archive
        self._size = 0

    def _where(self) -> str:
        return f"tar entry {self.entries} (at byte {self.offset})"

    def _fill(self, mv: memoryview) -> int:
        """Read until ``mv`` is full or the stream ends; the count read."""
        got = self._f.readinto(mv) or 0
        n = len(mv)
        while got < n:  # a pipe may hand out less than asked; a file only at its end
            k = self._f.readinto(mv[got:])
            if not k:
                break
            got += k
        self.offset += got
        return got

    def next_entry(self) -> tuple[str, int] | None:
        long_name: str | None = None
        pax: dict[str, str] = {}
        h = self._header
        while True:
            at = self.offset
            got = self._fill(self._header_view)
            if got < BLOCK:
                if got == 0 and long_name is None and not pax:
                    return None  # the reference node's files end like this (no end-of-archive blocks)
                raise CorruptInput(f"{self._where()}: tar truncated inside a header ({got} of {BLOCK} bytes)")
            computed = computed_checksum(h)
            if computed == BLANK_CHECKSUM and not any(h):
                self.end_marker = True
                return None
            if not checksum_matches(h, computed):
                stored = stored_checksum(h)
                raise CorruptInput(
                    f"{self._where()}: tar header checksum mismatch at byte {at} (stored "
                    f"{-1 if stored is None else stored}, computed {computed}): corrupted, or not a tar file"
                )
            try:
                size = number(h[124:136], "size")
            except TarHeaderError as exc:
                raise CorruptInput(f"{self._where()}: {exc} in tar header") from None
            kind = h[156]
            if kind in _REGULAR:
                posix = h[257:265] == b"ustar\x0000"  # GNU headers use the prefix field for other things
                if not h[64] and h[63] and not (posix and h[345]):  # the common case: 64 characters, no prefix
                    name = h[:64].decode("utf-8", "replace")
                else:
                    name = text(h[0:100], "replace")
                    if posix and h[345]:
                        name = text(h[345:500], "replace") + "/" + name
                if long_name is not None or pax:
                    name = pax.get("path", long_name or name)
                    if "size" in pax:
                        try:
                            size = pax_decimal(pax["size"], "size")
                        except TarHeaderError as exc:
                            raise CorruptInput(f"{self._where()}: {exc}") from None
                self._size = size
                return name, size
            if kind in (ord("x"), ord("g"), ord("L")):
                body = self._meta_body(size)
                if kind == ord("L"):
                    long_name = body.split(b"\0", 1)[0].decode("utf-8", "replace")
                elif kind == ord("x"):
                    try:
                        pax.update(pax_records(body))
                    except TarHeaderError as exc:
                        raise CorruptInput(f"{self._where()}: {exc}") from None
                continue
            if kind in _SKIPPED:
                self._skip(size + padding(size))
                continue
            raise CorruptInput(f"{self._where()}: unsupported tar entry type {chr(kind)!r}")

    def _meta_body(self, size: int) -> bytes:
        if size > 1 << 20:
            raise CorruptInput(f"{self._where()}: tar meta entry of {size} bytes is implausibly large")
        body = bytearray(size)
        if self._fill(memoryview(body)) != size:
            raise CorruptInput(f"{self._where()}: tar truncated inside a meta entry")
        self._skip(padding(size))
        return bytes(body)

    def _skip(self, n: int) -> None:
        while n > 0:
            k = min(n, BLOCK)
            if self._fill(memoryview(self._scratch)[:k]) != k:
                raise CorruptInput(f"{self._where()}: tar truncated")
            n -= k

    def read_padded(self, buf: memoryview) -> None:
        """Read the current entry's content and its padding in one go (``buf``: size rounded up to the block).

        The padding may be missing at the end of the file (the reference node's last entry).
        """
        got = self._fill(buf)
        if got < self._size:
            raise CorruptInput(
                f"tar entry {self.entries}: truncated: its header announces {self._size} bytes of content, "
                f"the file ends after {got}"
            )
        self.entries += 1
