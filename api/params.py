"""Parsing of path, query and header parameters into typed values or a 400 naming the field."""

from __future__ import annotations

from .errors import ParamError

_HEX = frozenset("0123456789abcdefABCDEF")

# strconv.ParseBool's spellings, which the reference node accepts for boolean parameters.
_GO_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_GO_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


def decode_hex(where: str, field: str, value: str, size: int | None = None, max_size: int | None = None) -> bytes:
    """Hex without 0x (as the reference node decodes it); ``size`` bytes exactly when given."""
    if value == "":
        raise ParamError(where, field, value, "want non-empty hex")
    if len(value) % 2:
        raise ParamError(where, field, value, "odd length hex string")
    bad = next((c for c in value if c not in _HEX), None)
    if bad is not None:
        raise ParamError(where, field, value, f"invalid hex byte: {bad!r}")
    raw = bytes.fromhex(value)
    if size is not None and len(raw) != size:
        raise ParamError(where, field, value, f"want {size} bytes ({2 * size} hex characters), got {len(raw)}")
    if max_size is not None and len(raw) > max_size:
        raise ParamError(where, field, value, f"at most {max_size} bytes ({2 * max_size} hex characters), got {len(raw)}")
    return raw


def parse_uint(where: str, field: str, value: str, bits: int = 64) -> int:
    """A decimal unsigned integer of at most ``bits`` bits (Go's ParseUint)."""
    if not value or not value.isascii() or not value.isdigit():
        raise ParamError(where, field, value, "invalid syntax")
    n = int(value)
    if n >= 1 << bits:
        raise ParamError(where, field, value, "value out of range")
    return n


def parse_go_bool(where: str, field: str, value: str) -> bool:
    if value in _GO_TRUE:
        return True
    if value in _GO_FALSE:
        return False
    raise ParamError(where, field, value, "invalid syntax")
