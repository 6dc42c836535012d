"""Content sniffing as Go's ``http.DetectContentType`` does it (the WHATWG MIME sniffing rules).

The reference node sniffs the first 512 bytes of a single-file ``POST /bzz``
sent without a ``Content-Type`` and writes the answer into the manifest, so
the manifest reference depends on it byte for byte; ``http.ServeContent``
sniffs the same way when an entry has no type. The rules, in Go's order
(first match wins, ``application/octet-stream`` when none does):

1. HTML: after leading whitespace, one of the HTML tags below compared
   ASCII-case-insensitively, followed by a space or ``>``;
2. ``<?xml`` after whitespace; PDF, PostScript; UTF-16/UTF-8 byte order marks;
3. images, audio and video, fonts, archives, wasm by their magic bytes
   (some under a mask: RIFF containers, the EOT font's 34 ignored bytes);
4. MP4 by its ``ftyp`` box naming an ``mp4`` brand;
5. text: no byte in 0x00-0x08, 0x0B, 0x0E-0x1A, 0x1C-0x1F after the
   leading whitespace (the empty input counts as text).

The table is Go 1.19's ``net/http/sniff.go`` (Debian's golang-1.19-src),
unchanged in the later releases checked (the copy tinygo vendors); facts
only, the code is this project's.
"""

from __future__ import annotations

SNIFF_LENGTH = 512
OCTET_STREAM = "application/octet-stream"
_HTML = "text/html; charset=utf-8"
_WHITESPACE = b"\t\n\x0c\r "
_TAG_END = b" >"
_BINARY = frozenset([*range(0x00, 0x09), 0x0B, *range(0x0E, 0x1B), *range(0x1C, 0x20)])

_HTML_TAGS = (
    b"<!DOCTYPE HTML", b"<HTML", b"<HEAD", b"<SCRIPT", b"<IFRAME", b"<H1", b"<DIV", b"<FONT", b"<TABLE", b"<A",
    b"<STYLE", b"<TITLE", b"<B", b"<BODY", b"<BR", b"<P", b"<!--",
)

# (pattern, mask or None for an exact prefix, skip leading whitespace, type), in Go's order after HTML.
_SIGNATURES: tuple[tuple[bytes, bytes | None, bool, str], ...] = (
    (b"<?xml", b"\xff\xff\xff\xff\xff", True, "text/xml; charset=utf-8"),
    (b"%PDF-", None, False, "application/pdf"),
    (b"%!PS-Adobe-", None, False, "application/postscript"),
    (b"\xfe\xff\x00\x00", b"\xff\xff\x00\x00", False, "text/plain; charset=utf-16be"),
    (b"\xff\xfe\x00\x00", b"\xff\xff\x00\x00", False, "text/plain; charset=utf-16le"),
    (b"\xef\xbb\xbf\x00", b"\xff\xff\xff\x00", False, "text/plain; charset=utf-8"),
    (b"\x00\x00\x01\x00", None, False, "image/x-icon"),
    (b"\x00\x00\x02\x00", None, False, "image/x-icon"),
    (b"BM", None, False, "image/bmp"),
    (b"GIF87a", None, False, "image/gif"),
    (b"GIF89a", None, False, "image/gif"),
    (b"RIFF\x00\x00\x00\x00WEBPVP", b"\xff\xff\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff", False, "image/webp"),
    (b"\x89PNG\r\n\x1a\n", None, False, "image/png"),
    (b"\xff\xd8\xff", None, False, "image/jpeg"),
    (b"FORM\x00\x00\x00\x00AIFF", b"\xff\xff\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff", False, "audio/aiff"),
    (b"ID3", b"\xff\xff\xff", False, "audio/mpeg"),
    (b"OggS\x00", b"\xff\xff\xff\xff\xff", False, "application/ogg"),
    (b"MThd\x00\x00\x00\x06", b"\xff" * 8, False, "audio/midi"),
    (b"RIFF\x00\x00\x00\x00AVI ", b"\xff\xff\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff", False, "video/avi"),
    (b"RIFF\x00\x00\x00\x00WAVE", b"\xff\xff\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff", False, "audio/wave"),
)
_SIGNATURES_AFTER_MP4: tuple[tuple[bytes, bytes | None, bool, str], ...] = (
    (b"\x1a\x45\xdf\xa3", None, False, "video/webm"),
    (bytes(34) + b"LP", bytes(34) + b"\xff\xff", False, "application/vnd.ms-fontobject"),
    (b"\x00\x01\x00\x00", None, False, "font/ttf"),
    (b"OTTO", None, False, "font/otf"),
    (b"ttcf", None, False, "font/collection"),
    (b"wOFF", None, False, "font/woff"),
    (b"wOF2", None, False, "font/woff2"),
    (b"\x1f\x8b\x08", None, False, "application/x-gzip"),
    (b"PK\x03\x04", None, False, "application/zip"),
    (b"Rar!\x1a\x07\x00", None, False, "application/x-rar-compressed"),
    (b"Rar!\x1a\x07\x01\x00", None, False, "application/x-rar-compressed"),
    (b"\x00asm", None, False, "application/wasm"),
)


def _first_non_whitespace(data: bytes) -> int:
    i = 0
    while i < len(data) and data[i] in _WHITESPACE:
        i += 1
    return i


def _html(data: bytes, start: int) -> bool:
    rest = data[start:]
    for tag in _HTML_TAGS:
        if len(rest) < len(tag) + 1:
            continue
        # Letters of the tag match either case (Go clears bit 0x20 of the data byte for them).
        if all(rest[i] & 0xDF == t if 0x41 <= t <= 0x5A else rest[i] == t for i, t in enumerate(tag)):
            if rest[len(tag)] in _TAG_END:
                return True
    return False


def _matches(data: bytes, start: int, pattern: bytes, mask: bytes | None, skip_ws: bool) -> bool:
    if mask is None:
        return data.startswith(pattern)
    if skip_ws:
        data = data[start:]
    if len(data) < len(pattern):
        return False
    return all(data[i] & m == p for i, (p, m) in enumerate(zip(pattern, mask, strict=True)))


def _mp4(data: bytes) -> bool:
    if len(data) < 12:
        return False
    box = int.from_bytes(data[:4], "big")
    if len(data) < box or box % 4:
        return False
    if data[4:8] != b"ftyp":
        return False
    # Brands follow in 4-byte steps; bytes 12..15 are the major brand's version, not a brand.
    return any(data[st : st + 3] == b"mp4" for st in range(8, box, 4) if st != 12)


def _text(data: bytes, start: int) -> bool:
    return not any(b in _BINARY for b in data[start:])


def detect_content_type(data: bytes | bytearray | memoryview) -> str:
    """The MIME type Go's ``http.DetectContentType`` gives the first 512 bytes of ``data``."""
    head = bytes(data[:SNIFF_LENGTH])
    start = _first_non_whitespace(head)
    if _html(head, start):
        return _HTML
    for pattern, mask, skip_ws, ctype in _SIGNATURES:
        if _matches(head, start, pattern, mask, skip_ws):
            return ctype
    if _mp4(head):
        return "video/mp4"
    for pattern, mask, skip_ws, ctype in _SIGNATURES_AFTER_MP4:
        if _matches(head, start, pattern, mask, skip_ws):
            return ctype
    if _text(head, start):
        return "text/plain; charset=utf-8"
    return OCTET_STREAM
