"""Content sniffing against Go's own test table, and the rules it is made of."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chunkstore.swarm.bzz.sniff import SNIFF_LENGTH, detect_content_type

VECTORS = json.loads((Path(__file__).resolve().parents[1] / "testdata" / "go_sniff_vectors.json").read_text())


@pytest.mark.parametrize("case", VECTORS["cases"], ids=[f"{i}-{c['desc']}" for i, c in enumerate(VECTORS["cases"])])
def test_go_sniff_table(case):
    assert detect_content_type(bytes.fromhex(case["data_hex"])) == case["content_type"]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"%PDF-1.7", "application/pdf"),
        (b"%!PS-Adobe-3.0", "application/postscript"),
        (b"\xfe\xff\x00\x41", "text/plain; charset=utf-16be"),
        (b"\xff\xfe\x41\x00", "text/plain; charset=utf-16le"),
        (b"\xef\xbb\xbfhi", "text/plain; charset=utf-8"),
        (b"PK\x03\x04rest", "application/zip"),
        (b"\x1f\x8b\x08\x00", "application/x-gzip"),
        (b"\x1a\x45\xdf\xa3", "video/webm"),
        (bytes(34) + b"LP", "application/vnd.ms-fontobject"),
        (b"\x01" * 34 + b"LP", "application/vnd.ms-fontobject"),  # the 34 bytes before are masked out
        (b"ttcf", "font/collection"),
        (b"  <p>", "text/html; charset=utf-8"),
        (b"<pre>", "text/plain; charset=utf-8"),  # <P must be followed by a space or '>'
        (b"<a href=x>", "text/html; charset=utf-8"),
        (b"<!-- x", "text/html; charset=utf-8"),
        (b"\x00\x00\x00\x0cftypmp4", "application/octet-stream"),  # a 12-byte box holds no brand past the version
        (b"\x00\x00\x00\x10ftypisom\x00\x00\x00\x00", "application/octet-stream"),
        (b"\x00\x00\x00\x14ftypisom\x00\x00\x00\x00mp41", "video/mp4"),
        (b"text\x1b[0m", "text/plain; charset=utf-8"),  # ESC (0x1B) does not make text binary
        (b"text\x1c", "application/octet-stream"),
        (b"\t\n\x0c\r <?xml", "text/xml; charset=utf-8"),
    ],
)
def test_table_rules(data, expected):
    assert detect_content_type(data) == expected


@given(st.binary(min_size=SNIFF_LENGTH, max_size=SNIFF_LENGTH + 64), st.binary(max_size=64))
def test_only_the_first_512_bytes_count(head, tail):
    assert detect_content_type(head) == detect_content_type(head[:SNIFF_LENGTH] + tail)


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E)))
def test_printable_ascii_without_a_tag_is_text(text):
    expected = "text/plain; charset=utf-8"
    data = text.encode()
    got = detect_content_type(data)
    if got != expected:  # only a recognised signature may override the text rule
        assert got in {"text/html; charset=utf-8", "text/xml; charset=utf-8", "application/pdf",
                       "application/postscript", "image/bmp", "image/gif", "font/otf", "font/collection",
                       "font/woff", "font/woff2", "audio/mpeg", "application/ogg", "audio/midi"}, (data, got)
