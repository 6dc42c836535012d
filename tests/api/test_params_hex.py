"""Hex parameters are refused with the cause Go's hex.DecodeString gives, as the reference reports it.

The reference decodes hex path values with ``hex.DecodeString`` and reports the
cause through ``newParseError`` (``pkg/api/util.go``): the first invalid byte
(``invalid hex byte: %#U``) before an odd length, since Go checks the last odd
character for validity before it reports ``odd length hex string``.
"""

from __future__ import annotations

import pytest

from api.errors import ParamError
from api.params import decode_hex


@pytest.mark.parametrize(
    "value, cause",
    [
        ("abc", "odd length hex string"),
        ("a", "odd length hex string"),
        ("zz", "invalid hex byte: U+007A 'z'"),
        ("0g", "invalid hex byte: U+0067 'g'"),
        ("abg", "invalid hex byte: U+0067 'g'"),  # odd, but the invalid byte is what Go names
        ("zzz", "invalid hex byte: U+007A 'z'"),
        ("0x12", "invalid hex byte: U+0078 'x'"),
        ("aa\x01b", "invalid hex byte: U+0001"),  # %#U leaves out the character when it is not printable
        ("aa\u00e9", "invalid hex byte: U+00C3 'Ã'"),  # Go looks at bytes: the first of é's UTF-8
    ],
)
def test_hex_cause_as_go_reports_it(value, cause):
    with pytest.raises(ParamError) as info:
        decode_hex("path", "anchor1", value)
    (reason,) = info.value.reasons
    assert reason["field"] == "anchor1"
    assert reason["error"] == cause, reason  # the cause alone, as the reference's reasons carry it


def test_valid_hex_still_decodes():
    assert decode_hex("path", "anchor1", "0aFf") == b"\x0a\xff"
