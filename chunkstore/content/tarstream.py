"""Reading a tar from a stream, one entry at a time, as Go's ``archive/tar`` reads what clients send.

A collection upload (``POST /bzz`` with ``Swarm-Collection: true``) is a
tar that may be larger than memory, so it is read in one pass: each
regular file's data goes straight into the splitter. What is understood
(the formats bee-js, swarm-cli, GNU tar, bsdtar and Go write):

- USTAR headers (name with its 155-byte prefix), old V7 headers, GNU
  headers (``L`` long names; base-256 sizes), PAX extended headers (``x``:
  ``path`` and ``size``, a size in ASCII digits only; ``g`` global headers
  are skipped); a long name, long link or PAX header of more than 1 MiB
  (``MAX_SPECIAL_SIZE``, Go's limit) is refused before its data is read;
- what Go's ``Header.FileInfo().Mode().IsRegular()`` calls regular is
  yielded, as the reference node stores exactly those: every type but
  symlinks, devices, directories and FIFOs (``2``-``6``, or a name ending
  in "/" on an old NUL-typed entry, or those kinds in the mode field's file
  type bits). So a hard link (``1``) is an empty file (Go reads no data for
  it), as is a PAX global header (``g``: Go hands it out as an entry of its
  own, named as its header says, which ``git archive`` writes first); an
  unknown type is a file with its data. Old GNU sparse files (``S``) are
  skipped: Go expands their holes, which is not done here;
- the archive ends at two zero blocks, or at the end of the body on a block
  boundary (Go accepts both).

Anything else is refused with ``InvalidCollection`` naming the offset: a
header whose checksum does not add up (a body that is not a tar at all
fails on its first block), a zero block followed by data, a body cut inside
a header or an entry.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from chunkstore.swarm.tarheader import (
    BLOCK,
    TarHeaderError,
    checksum_matches,
    number,
    pax_decimal,
    pax_records,
    text,
)

from .errors import InvalidCollection
from .files import Reader

# Go's isHeaderOnlyType: entries whose size field is ignored (Go reads no data for them).
_HEADER_ONLY = (b"1", b"2", b"3", b"4", b"5", b"6")
# Entries Go's FileInfo().Mode() gives a type bit: symlink, char and block device, directory, FIFO.
_NOT_REGULAR = (b"2", b"3", b"4", b"5", b"6")
# The same kinds, and sockets, in the mode field's file type bits (c_ISDIR, c_ISFIFO, c_ISLNK, ...).
_NOT_REGULAR_MODES = frozenset({0o040000, 0o010000, 0o120000, 0o060000, 0o020000, 0o140000})
_GNU_SPARSE = b"S"
_SKIPPED_DATA = 1 << 20  # bytes read at a time when skipping an entry's data
_SPECIAL = {b"L": "GNU long name", b"K": "GNU long link name", b"x": "PAX extended header", b"g": "PAX global header"}
# The most a special entry (above) may declare; it is read whole into memory, so its size is checked
# before any of its data is read. 1 MiB is Go's ``maxSpecialFileSize``: archive/tar, which the
# reference node reads uploads with, refuses larger ones with ErrFieldTooLong. No smaller bound: the
# manifest's 65535-byte metadata limit applies only to the last path segment (``Filename``); the path
# itself goes into the trie in 30-byte fork prefixes, so a longer name made of short segments can be
# stored, and refusing it would refuse archives the reference node takes.
MAX_SPECIAL_SIZE = 1 << 20


@dataclass
class TarEntry:
    """A regular file of the archive; ``read`` its data before asking for the next entry."""

    name: str
    size: int
    _reader: Reader
    _left: int

    def read(self, n: int = -1, /) -> bytes:
        if self._left <= 0:
            return b""
        want = self._left if n < 0 else min(n, self._left)
        data = self._reader.read(want)
        if len(data) != want:
            raise InvalidCollection(f"tar entry {self.name!r} is cut short: {self._left - len(data)} bytes missing")
        self._left -= want
        return data


class TarStream:
    """Iterate the regular files of a tar read from ``reader`` (see the module docstring)."""

    def __init__(self, reader: Reader) -> None:
        self._reader = reader
        self._offset = 0
        self._current: TarEntry | None = None

    def _read(self, n: int) -> bytes:
        data = self._reader.read(n)
        self._offset += len(data)
        return data

    def _skip(self, n: int) -> None:
        while n > 0:
            data = self._read(min(n, _SKIPPED_DATA))
            if not data:
                raise InvalidCollection(f"tar archive cut short at offset {self._offset}")
            n -= len(data)

    def _data(self, size: int) -> bytes:
        data = self._read(size)
        if len(data) != size:
            raise InvalidCollection(f"tar archive cut short at offset {self._offset}")
        self._skip(-size % BLOCK)
        return data

    def _finish_current(self) -> None:
        entry = self._current
        if entry is None:
            return
        self._current = None
        left = entry._left
        entry._left = 0
        self._offset += entry.size - left  # what the consumer read went past us
        self._skip(left + (-entry.size % BLOCK))

    def __iter__(self) -> Iterator[TarEntry]:
        long_name: str | None = None
        pax: dict[str, str] = {}
        while True:
            self._finish_current()
            start = self._offset
            block = self._read(BLOCK)
            if not block:
                return  # the body ended on a block boundary: Go takes that as the end too
            if len(block) != BLOCK:
                raise InvalidCollection(f"tar archive cut short inside a header at offset {start}")
            if block == bytes(BLOCK):
                second = self._read(BLOCK)
                if not second or second == bytes(BLOCK):
                    return
                raise InvalidCollection(f"invalid tar header at offset {start + BLOCK}: data after a zero block")
            if not checksum_matches(block):
                what = "not a tar archive" if start == 0 else "invalid tar header"
                raise InvalidCollection(f"{what}: header checksum mismatch at offset {start}")
            typeflag = block[156:157]
            global_records: dict[str, str] | None = None
            try:
                size = number(block[124:136], "size")
                mode = number(block[100:108], "mode")
                if typeflag in _SPECIAL:
                    if size > MAX_SPECIAL_SIZE:
                        raise TarHeaderError(
                            f"{_SPECIAL[typeflag]} of {size} bytes is too long (at most {MAX_SPECIAL_SIZE})"
                        )
                    data = self._data(size)
                    if typeflag == b"L":
                        long_name = text(data)
                    elif typeflag == b"x":
                        pax = pax_records(data)  # Go keeps the last extended header before an entry, unmerged
                    if typeflag != b"g":
                        continue
                    global_records = pax_records(data)
            except TarHeaderError as exc:
                raise InvalidCollection(f"tar header at offset {start}: {exc}") from None
            name = text(block[0:100])
            if block[257:263] == b"ustar\0":  # POSIX ustar: the prefix field extends the name
                prefix = text(block[345:500])
                if prefix:
                    name = prefix + "/" + name
            if global_records is not None:
                # Go returns a global header as an entry: its own records merged, no data, mode 0 (so
                # regular); a long name or PAX header before it applies to nothing
                long_name, pax = None, {}
                entry = TarEntry(global_records.get("path") or name, 0, self._reader, 0)
                self._current = entry
                yield entry
                continue
            # Go's mergePAX keeps the header's own value for an empty record, and a GNU long name, applied
            # after it, wins over a PAX path.
            if pax.get("path"):
                name = pax["path"]
            if long_name:
                name = long_name
            if pax.get("size"):
                try:
                    size = pax_decimal(pax["size"], "size")
                except TarHeaderError as exc:
                    raise InvalidCollection(f"tar PAX header before offset {start}: {exc}") from None
            long_name = None
            pax = {}
            if typeflag in _HEADER_ONLY:
                size = 0  # Go reads no data for these, whatever the size field says
            if (
                typeflag in _NOT_REGULAR
                or typeflag == _GNU_SPARSE
                or (typeflag == b"\0" and name.endswith("/"))  # V7: a trailing / is a directory
                or mode & ~0o7777 in _NOT_REGULAR_MODES
            ):
                self._skip(size + (-size % BLOCK))
                continue
            entry = TarEntry(name, size, self._reader, size)
            self._current = entry
            yield entry
