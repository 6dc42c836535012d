"""Fork metadata as the reference node's JSON writes and reads it.

The reference node serialises a fork's metadata with Go's ``encoding/json``
(``json.Marshal(map[string]string)``), and the node hash covers those bytes,
so producing the same reference means producing the same JSON: keys sorted
bytewise, no spaces, ``<``, ``>`` and ``&`` escaped as ``\\u003c`` etc.,
``\\b \\f \\n \\r \\t`` as short escapes, other control bytes as ``\\u00XX``,
U+2028/U+2029 escaped, and invalid UTF-8 replaced by ``\\ufffd``. Python
strings carry invalid bytes as surrogates (``surrogateescape``), so every
surrogate is written as ``\\ufffd``, which is what Go writes for the byte.

Reading accepts what Go's ``json.Unmarshal`` into a ``map[string]string``
accepts: an object of string values (``null`` values read as ``""``), or
``null`` for no metadata, with surrounding JSON whitespace (the padding
newlines).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..jsontext import parse_json
from .errors import InvalidEntry, InvalidManifest

_ESCAPE = re.compile('[\x00-\x1f"\\\\<>&\u2028\u2029\ud800-\udfff]')
_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_char(match: re.Match[str]) -> str:
    ch = match.group()
    short = _SHORT.get(ch)
    if short is not None:
        return short
    code = ord(ch)
    if 0xD800 <= code <= 0xDFFF:
        return "\\ufffd"
    return f"\\u{code:04x}"


def go_json_string(value: str) -> str:
    """``value`` as Go's ``encoding/json`` quotes a string (HTML escaping on)."""
    return '"' + _ESCAPE.sub(_escape_char, value) + '"'


def _sort_key(key: str) -> bytes:
    # Go sorts map keys as byte strings; surrogate-escaped bytes sort as the bytes they stand for.
    try:
        return key.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return key.encode("utf-8", "surrogatepass")


def encode_metadata(metadata: Mapping[str, str]) -> bytes:
    """Go's ``json.Marshal`` of a ``map[string]string``, byte for byte."""
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidEntry(f"metadata keys and values must be strings, got {key!r}: {value!r}")
    parts = [go_json_string(key) + ":" + go_json_string(metadata[key]) for key in sorted(metadata, key=_sort_key)]
    # Only ASCII escapes and valid code points remain, so strict UTF-8 cannot fail.
    return ("{" + ",".join(parts) + "}").encode("utf-8")


def without_surrogates(text: str) -> str:
    # Go decodes an unpaired \\ud800-style escape to U+FFFD; Python keeps the lone surrogate.
    return _SURROGATE.sub("\ufffd", text)


def decode_metadata(raw: bytes) -> dict[str, str] | None:
    """Parse fork metadata; ``None`` for JSON ``null``. Raises ``InvalidManifest``."""
    try:
        value = parse_json(raw.decode("utf-8", "replace"))
    except ValueError as exc:
        raise InvalidManifest(f"fork metadata is not valid JSON: {exc}") from None
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidManifest(f"fork metadata must be a JSON object, got {type(value).__name__}")
    out: dict[str, str] = {}
    for key, item in value.items():
        if item is None:
            item = ""
        elif not isinstance(item, str):
            raise InvalidManifest(f"fork metadata value of {key!r} is not a string")
        out[without_surrogates(key)] = without_surrogates(item)
    return out
