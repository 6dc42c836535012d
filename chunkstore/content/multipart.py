"""A ``multipart/form-data`` body read as a stream of files, as the reference node reads a multipart collection.

The reference node accepts a collection as multipart as well as tar (bee-js
and swarm-cli send tars; other clients and browsers' forms send multipart).
Each part is one file: its path is the ``filename`` parameter of its
``Content-Disposition`` reduced to the base name (Go's ``Part.FileName``),
or else the ``name`` parameter as given; its type is the part's own
``Content-Type`` header. Parts stream: a part's data is read up to the next
delimiter without holding the whole part.

A body whose delimiters do not match the announced boundary, a part without
headers' end, or a body cut before the closing delimiter is refused with
``InvalidCollection``.
"""

from __future__ import annotations

from collections.abc import Iterator
from email.message import Message
from email.utils import collapse_rfc2231_value

from chunkstore.swarm.bzz import go_base

from .bzz import IncomingFile
from .errors import InvalidCollection
from .files import Reader

_READ = 64 << 10
_MAX_HEADER = 64 << 10


class _Buffered:
    """A reader with look-ahead: data is searched for delimiters before it is handed out."""

    def __init__(self, reader: Reader) -> None:
        self._reader = reader
        self.buf = bytearray()
        self.eof = False

    def fill(self) -> bool:
        if self.eof:
            return False
        data = self._reader.read(_READ)
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def take(self, n: int) -> bytes:
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out


class _PartReader:
    """Reads one part's data, stopping before ``\\r\\n--boundary``."""

    def __init__(self, source: _Buffered, delimiter: bytes) -> None:
        self._src = source
        self._delim = delimiter
        self.done = False

    def read(self, n: int = -1, /) -> bytes:
        if self.done:
            return b""
        want = _READ if n < 0 else n
        src = self._src
        while True:
            at = src.buf.find(self._delim)
            if at >= 0:
                if at == 0:
                    self.done = True
                    return b""
                return src.take(min(at, want))
            # Everything but a possible start of the delimiter can go out.
            safe = len(src.buf) - (len(self._delim) - 1)
            if safe >= want or (safe > 0 and src.eof):
                return src.take(min(safe, want))
            if not src.fill():
                raise InvalidCollection("multipart body ends inside a part (no closing delimiter)")


def _headers(block: bytes) -> Message:
    message = Message()
    for line in block.decode("utf-8", "surrogateescape").split("\r\n"):
        if not line:
            continue
        if ":" not in line:
            raise InvalidCollection(f"malformed multipart part header line {line[:80]!r}")
        name, value = line.split(":", 1)
        message[name.strip()] = value.strip()
    return message


def _raw(headers: Message, name: str) -> str:
    """A header's value as received, "" when absent.

    ``Message.get`` hands a value holding undecodable bytes (surrogate-escaped
    here) back as an ``email.header.Header`` object; the raw string keeps the
    bytes, which the manifest metadata writes as U+FFFD as the reference does.
    """
    wanted = name.lower()
    for key, value in headers.raw_items():
        if key.lower() == wanted:
            return value
    return ""


def _param(headers: Message, name: str) -> str:
    value = headers.get_param(name, header="content-disposition")
    if value is None:
        return ""
    return collapse_rfc2231_value(value)


def iter_parts(reader: Reader, boundary: str) -> Iterator[IncomingFile]:
    """The files of a multipart body with ``boundary``; read each one's data before asking for the next."""
    if not boundary:
        raise InvalidCollection("multipart/form-data without a boundary parameter")
    src = _Buffered(reader)
    dash = b"--" + boundary.encode("latin-1", "replace")
    # The first delimiter may follow a preamble; it must start a line.
    while True:
        at = src.buf.find(dash)
        if at >= 0 and (at == 0 or src.buf[at - 2 : at] == b"\r\n"):
            src.take(at + len(dash))
            break
        if not src.fill():
            raise InvalidCollection("multipart body holds no delimiter of the announced boundary")
    delimiter = b"\r\n" + dash
    while True:
        while len(src.buf) < 2 and src.fill():
            pass
        if src.buf[:2] == b"--":
            return
        # The rest of the delimiter line: optional blanks, then the line end.
        while b"\n" not in src.buf and src.fill():
            pass
        end = src.buf.find(b"\n")
        if end < 0 or src.buf[:end].strip(b" \t\r"):
            raise InvalidCollection("malformed multipart delimiter line")
        src.take(end + 1)
        while b"\r\n\r\n" not in src.buf and not src.buf.startswith(b"\r\n"):
            if len(src.buf) > _MAX_HEADER or not src.fill():
                raise InvalidCollection("multipart part headers do not end")
        if src.buf.startswith(b"\r\n"):
            head = b""
            src.take(2)
        else:
            cut = src.buf.find(b"\r\n\r\n")
            head = src.take(cut)
            src.take(4)
        headers = _headers(head)
        filename = _param(headers, "filename")
        form_name = _param(headers, "name")
        path = go_base(filename) if filename else ""
        if not path and headers.get_content_disposition() == "form-data" and form_name:
            path = form_name
        part = _PartReader(src, delimiter)
        yield IncomingFile(path, _raw(headers, "Content-Type"), part)
        while part.read(_READ):  # whatever the consumer left of the part
            pass
        src.take(len(delimiter))
