"""Numbers, JSON and expressions too large for Python's own parsers: a 4xx in the usual JSON, never a 500.

Python refuses to convert more than 4,300 decimal digits (``ValueError``),
recurses once per nested JSON array or object (``RecursionError``), and
overflows on a regular expression's repeat count past C's int
(``OverflowError``). A fuzzing run found each of them answered with a 500.
"""

from __future__ import annotations

import base64

import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.params import parse_int, parse_uint
from api.serve import RangeNotSatisfiable, parse_range
from chunkstore.swarm.digits import decimal_below
from chunkstore.swarm.jsontext import parse_json
from chunkstore.swarm.mantaray.errors import InvalidManifest
from chunkstore.swarm.mantaray.metadata import decode_metadata
from tests.api.contenthelpers import BATCH, content_app, register_batch, upload_headers
from tests.api.test_content_api import expect_error

HUGE = "9" * 5000  # past Python's 4,300-digit conversion limit
DEEP = b"[" * 3000  # both fit the smallest body limit that applies (4,201 bytes)
DEEP_CLOSED = b"[" * 1500 + b"]" * 1500


@pytest.fixture
async def client(tmp_path):
    app, _ = content_app(tmp_path, dev=True)
    async with TestClient(TestServer(app)) as c:
        await register_batch(c)
        yield c


@pytest.mark.parametrize(("method", "path"), [
    ("GET", f"/rchash/{HUGE}/5a/01"),
    ("GET", f"/rchash/0/5a/01?consensusTime={HUGE}"),
    ("GET", f"/tags/{HUGE}"),
    ("DELETE", f"/tags/{HUGE}"),
    ("GET", f"/tags?offset={HUGE}"),
    ("GET", f"/tags?limit={HUGE}"),
    ("POST", f"/stamps/{HUGE}/20"),
    ("POST", f"/stamps/100000000/{HUGE}"),
    ("PATCH", f"/stamps/topup/{BATCH.hex()}/{HUGE}"),
    ("PATCH", f"/stamps/dilute/{BATCH.hex()}/{HUGE}"),
    ("GET", f"/feeds/{'11' * 20}/{'22' * 32}?at={HUGE}"),
    ("GET", f"/feeds/{'11' * 20}/{'22' * 32}?after={HUGE}"),
])
async def test_huge_numbers_in_paths_and_queries_are_400(client, method, path):
    await expect_error(await client.request(method, path), 400, "out of range")


@pytest.mark.parametrize("header", ["Swarm-Tag", "Swarm-Redundancy-Level"])
@pytest.mark.parametrize("path", ["/bytes", "/bzz"])
async def test_huge_numbers_in_upload_headers_are_400(client, header, path):
    r = await client.post(path, data=b"data", headers=upload_headers(**{header: HUGE, "Content-Type": "text/plain"}))
    await expect_error(r, 400, "out of range")


@pytest.mark.parametrize("spec", [f"bytes=0-{HUGE}", f"bytes={HUGE}-", f"bytes=-{HUGE}"])
async def test_huge_numbers_in_a_range_are_416(client, spec):
    r = await client.post("/bytes", data=b"some stored data", headers=upload_headers())
    ref = (await r.json())["reference"]
    r = await client.get(f"/bytes/{ref}", headers={"Range": spec})
    await expect_error(r, 416)
    assert await (await client.get(f"/bytes/{ref}")).read() == b"some stored data"


@pytest.mark.parametrize("body", [DEEP, DEEP_CLOSED])
@pytest.mark.parametrize(("method", "path"), [
    ("POST", "/batches"), ("POST", "/chainstate"), ("PATCH", f"/stamps/{BATCH.hex()}"),
])
async def test_deeply_nested_json_bodies_are_400(client, body, method, path):
    await expect_error(await client.request(method, path, data=body), 400)


async def test_deeply_nested_tag_patch_is_400(client):
    uid = (await (await client.post("/tags")).json())["uid"]
    await expect_error(await client.patch(f"/tags/{uid}", data=b"[" * 1020), 400)


@pytest.mark.parametrize("expression", ["a{4294967296}", "(" * 1200 + ")" * 1200])
async def test_logger_expressions_too_large_for_re_are_400(client, expression):
    encoded = base64.urlsafe_b64encode(expression.encode()).decode()
    for r in (await client.get(f"/loggers/{encoded}"), await client.put(f"/loggers/{encoded}/info")):
        assert r.status == 400, await r.text()
        assert (await r.json())["code"] == 400


def test_decimal_below_checks_the_length_before_converting():
    assert decimal_below("0" * 6000 + "42", 8) == 42  # leading zeros count for nothing, as in Go
    assert decimal_below("255", 8) == 255 and decimal_below("256", 8) is None
    assert decimal_below(HUGE, 64) is None
    assert decimal_below("", 8) == 0
    assert parse_uint("query", "n", "18446744073709551615") == (1 << 64) - 1
    assert parse_int("query", "n", "-9223372036854775808") == -(1 << 63)
    for bad in ("9223372036854775808", "-9223372036854775809", "-" + HUGE, "+" + HUGE):
        with pytest.raises(Exception, match="invalid query params"):
            parse_int("query", "n", bad)
    for spec in (f"bytes=0-{HUGE}", f"bytes={HUGE}-", f"bytes=-{HUGE}"):
        with pytest.raises(RangeNotSatisfiable):
            parse_range(spec, 10)


def test_parse_json_turns_deep_nesting_into_a_value_error():
    assert parse_json(b"[[1]]") == [[1]]
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_json(DEEP_CLOSED)


def test_deeply_nested_manifest_metadata_is_an_invalid_manifest():
    """A manifest comes from anywhere: its metadata must fail as a bad manifest, not crash the reader."""
    with pytest.raises(InvalidManifest):
        decode_metadata(b'{"a":' + b"[" * 2000 + b"]" * 2000 + b"}")
