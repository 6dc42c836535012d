"""Parsing of path, query and header parameters into typed values or a 400 naming the field.

Header values the daemon reads (``Swarm-*``, ``Authorization``,
``Content-Type``, ``Origin``) must be printable ASCII; ``check_headers``
refuses anything else with a 400 before a handler sees it. The HTTP parser
hands on bytes 0x80-0xff (as latin-1 or as surrogate escapes), and nothing
valid in these headers needs them: hex, decimal, tokens, media types and
origins are ASCII. Paths and query strings arrive percent-decoded, possibly
to non-ASCII text; every parser below accepts only its ASCII alphabet and
shows a refused value escaped (``api.errors.printable``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote_to_bytes

from aiohttp import web

from chunkstore.swarm.digits import decimal_below

from .errors import ParamError, printable

_HEX = frozenset("0123456789abcdefABCDEF")

# strconv.ParseBool's spellings, which the reference node accepts for boolean parameters.
_GO_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_GO_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


def _go_hex_problem(value: str) -> str | None:
    """What Go's ``hex.DecodeString`` reports for ``value``, as the reference words it, or None when it decodes.

    Go walks the bytes (not characters) in pairs and names the first invalid one,
    checking a last odd byte too before it reports the odd length; the reference
    shows the byte with ``%#U`` (pkg/api/util.go, hexInvalidByteError).
    """
    try:
        raw = value.encode("utf-8", "surrogateescape")  # the bytes Go would see; escapes stand for undecodable ones
    except UnicodeEncodeError:
        raw = value.encode("utf-8", "surrogatepass")
    bad = next((b for b in raw if b >= 0x80 or chr(b) not in _HEX), None)
    if bad is not None:
        shown = chr(bad)
        return f"invalid hex byte: U+{bad:04X}" + (f" '{shown}'" if shown.isprintable() else "")
    if len(raw) % 2:
        return "odd length hex string"
    return None


def decode_hex(where: str, field: str, value: str, size: int | None = None, max_size: int | None = None) -> bytes:
    """Hex without 0x (as the reference node decodes it); ``size`` bytes exactly when given."""
    if value == "":
        raise ParamError(where, field, value, "want non-empty hex")
    problem = _go_hex_problem(value)
    if problem is not None:
        raise ParamError(where, field, value, problem)
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
    n = decimal_below(value, bits)
    if n is None:
        raise ParamError(where, field, value, "value out of range")
    return n


def parse_int(where: str, field: str, value: str, bits: int = 64) -> int:
    """A decimal signed integer of ``bits`` bits, an optional sign first (Go's ParseInt)."""
    negative = value[:1] == "-"
    digits = value[1:] if value[:1] in ("+", "-") else value
    if not digits or not digits.isascii() or not digits.isdigit():
        raise ParamError(where, field, value, "invalid syntax")
    magnitude = decimal_below(digits, bits)  # -2**(bits-1) is the one value whose magnitude needs all the bits
    if magnitude is None or magnitude > (1 << (bits - 1)) - (0 if negative else 1):
        raise ParamError(where, field, value, "value out of range")
    return -magnitude if negative else magnitude


def check_gas_headers(headers: Mapping[str, str]) -> None:
    """``Gas-Price`` (a ``big.Int`` in base 10) and ``Gas-Limit`` (a uint64), read as the reference's
    ``gasConfigMiddleware`` reads them before a chain call's handler runs: a 400 otherwise."""
    price = headers.get("Gas-Price", "")
    if price:
        digits = price[1:] if price[0] in "+-" else price
        if not digits or not digits.isascii() or not digits.isdigit():
            raise ParamError("header", "Gas-Price", price, "invalid value")
    limit = headers.get("Gas-Limit", "")
    if limit:
        parse_uint("header", "Gas-Limit", limit)


# Go's time.ParseDuration: "0", or a sign then one or more decimal numbers each with a unit.
_GO_DURATION = re.compile(r"[+-]?(0|((\d+(\.\d*)?|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h))+)")


def is_go_duration(value: str) -> bool:
    """Whether Go's ``time.ParseDuration`` reads ``value`` (its syntax; not its int64 range)."""
    return _GO_DURATION.fullmatch(value) is not None


def parse_go_bool(where: str, field: str, value: str) -> bool:
    if value in _GO_TRUE:
        return True
    if value in _GO_FALSE:
        return False
    raise ParamError(where, field, value, "invalid syntax")


_BAD_ESCAPE = re.compile(rb"%(?![0-9a-fA-F]{2})")  # a "%" without two hex digits: Go refuses the whole text


def _go_unescape(text: str, plus_is_space: bool) -> str | None:
    """Go's ``url.QueryUnescape`` (``plus_is_space``) or ``url.PathUnescape``: ``%XX`` is a byte;
    ``None`` for a bad escape, which ``urllib.parse`` would leave as it is.

    The bytes become text with ``surrogateescape``, so bytes that are no UTF-8
    reach the manifest as the bytes they are, as Go's string keeps them.
    """
    raw = text.encode("utf-8", "surrogateescape")
    if _BAD_ESCAPE.search(raw):
        return None
    if plus_is_space:
        raw = raw.replace(b"+", b" ")  # before unescaping: "%2B" stays a "+"
    return unquote_to_bytes(raw).decode("utf-8", "surrogateescape")


def go_path_unescape(raw_path: str) -> str | None:
    """Go's ``url.PathUnescape`` of a path as sent (``None`` for a malformed escape)."""
    return _go_unescape(raw_path, plus_is_space=False)


def go_query(raw_query: str) -> dict[str, list[str]]:
    """The query as Go's ``url.ParseQuery`` reads it (what ``r.URL.Query()`` gives a Bee handler).

    ``raw_query`` is the query as sent, without the "?". Pairs split on "&"
    only; since Go 1.17 a pair containing ";" is left out, and so is a pair
    whose key or value has a malformed escape (``%zz``, a lone ``%``). yarl
    keeps both, and turns escaped bytes that are no UTF-8 into U+FFFD.
    """
    values: dict[str, list[str]] = {}
    for pair in raw_query.split("&"):
        if ";" in pair or not pair:
            continue
        raw_key, _, raw_value = pair.partition("=")
        key = _go_unescape(raw_key, plus_is_space=True)
        value = _go_unescape(raw_value, plus_is_space=True)
        if key is None or value is None:
            continue
        values.setdefault(key, []).append(value)
    return values


def request_query(request: web.Request) -> dict[str, str]:
    """The first value of each query parameter as a Bee handler reads it (``r.URL.Query()``, Go's
    ``url.ParseQuery``: ``go_query``) from the query as sent: a pair with ";" or a malformed escape is
    left out, where aiohttp's ``request.query`` keeps it (and turns ``offset=1;limit=2`` into one bad
    offset)."""
    _, _, raw = request.raw_path.partition("?")
    return {key: values[0] for key, values in go_query(raw).items()}


# Headers read by some handler or middleware, besides every ``Swarm-*`` one.
READ_HEADERS = frozenset({"authorization", "content-type", "origin"})


def header_ok(value: str) -> bool:
    """Printable ASCII (and tabs): what every header value the daemon reads must be."""
    return value.isascii() and all(" " <= c <= "~" or c == "\t" for c in value)


def check_headers(headers: Mapping[str, str]) -> None:
    """Refuse (400, naming the header) a read header whose value is not printable ASCII."""
    for name, value in headers.items():
        lower = name.lower()
        if (lower.startswith("swarm-") or lower in READ_HEADERS) and not header_ok(value):
            raise ParamError("header", printable(name), value, "must be printable ASCII")


class _Members(list[tuple[str, Any]]):
    """A JSON object's members in the order they came, duplicates kept (what Go's decoder walks)."""


_GO_JSON_SPACE = " \t\n\r"


def go_json_string_field(raw: bytes, field: str) -> str:
    """``field`` of a JSON body as Bee reads it: ``json.NewDecoder(r.Body).Decode`` into a struct whose one
    string field has the JSON name ``field``. Only the first JSON value is read (what follows is left
    unread); members match the field by name case-insensitively, each match overwriting the last; ``null``
    leaves it empty. Raises ``ValueError`` saying why where Go's decoder returns an error: a body that is
    no JSON value, a value that is not an object, a matching member that is neither a string nor null."""
    text = raw.decode("utf-8", "replace").lstrip(_GO_JSON_SPACE)  # Go puts U+FFFD for bad UTF-8 in strings
    try:
        value, _ = json.JSONDecoder(object_pairs_hook=_Members).raw_decode(text)
    except RecursionError:
        raise ValueError("not JSON (nested too deeply)") from None
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if value is None:
        return ""
    want = f'want {{"{field}": string}}'
    if not isinstance(value, _Members):
        raise ValueError(want)
    found = ""
    folded = field.lower()
    for name, member in value:
        if name.lower() != folded or member is None:
            continue
        if not isinstance(member, str):
            raise ValueError(want)
        found = member
    return found
