"""Hostile bytes in the headers, paths and queries the daemon reads: a 400 in the usual JSON naming the
field, never a 500, the bytes shown escaped. Sent over a raw socket, since clients refuse to send them."""

from __future__ import annotations

import json
import logging

import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.errors import json_body, printable
from api.logs import MalformedRequestFilter, quiet_malformed_requests
from tests.api.helpers import Uploader
from tests.api.test_api import build
from tests.api.test_api_fuzz import _send_raw

UP = Uploader(seed=b"hostile")


@pytest.fixture
async def raw(tmp_path):
    app, store = build(tmp_path, admin_token="s3cret", cors_allowed_origins=("*",))
    store.batches.add(UP.batch())

    async with TestClient(TestServer(app)) as client:

        async def send(method: bytes, target: bytes, headers: list[tuple[bytes, bytes]] = (), body: bytes = b""):
            request = method + b" " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            request += b"".join(name + b": " + value + b"\r\n" for name, value in headers)
            request += b"Content-Length: %d\r\n\r\n" % len(body) + body
            status, got, data = await _send_raw(client.server.host, client.server.port, request)
            is_json = got.get("content-type", "").startswith("application/json")
            return status, got, json.loads(data) if is_json else None

        yield send, store


@pytest.fixture(autouse=True)
def _debug_log(caplog):
    """The refused values are logged at debug level (escaped); the answers name the field and the cause only."""
    caplog.set_level(logging.DEBUG, logger="api.errors")
    return caplog


def _refused(status: int, body: dict, field: str, shown: str, log: pytest.LogCaptureFixture) -> None:
    assert status == 400, body
    assert body["code"] == 400 and body["message"] == "invalid header params", body
    assert body["reasons"] == [{"field": field, "error": "must be printable ASCII"}]  # the reference's form
    assert f"`{field}={shown}`: must be printable ASCII" in log.text


async def test_latin1_stamp_header_is_a_400_not_a_500(raw, _debug_log):
    """The issue's reproduction: ``POST /chunks`` with a latin-1 stamp header used to answer aiohttp's plain 500."""
    send, store = raw
    _, data, _ = UP.cac(b"x")
    status, headers, body = await send(b"POST", b"/chunks", [(b"swarm-postage-stamp", b"\xe9" * 226)], data)
    _refused(status, body, "swarm-postage-stamp", "\\xe9" * 77 + "...", _debug_log)
    assert headers["content-type"] == "application/json; charset=utf-8"
    assert store.stats()["chunks"] == 0


@pytest.mark.parametrize("name", [b"Swarm-Postage-Stamp", b"Swarm-Postage-Batch-Id", b"Swarm-Tag", b"Swarm-Pin",
                                  b"Content-Type"])
@pytest.mark.parametrize(("value", "shown"), [(b"ab\x80cd", "ab\\x80cd"), (b"\xff", "\\xff"),
                                              ("caf\u00e9".encode(), "caf\\xe9"), (b"a\x7fb", "a\\x7fb")])
async def test_every_read_header_refuses_bytes_outside_printable_ascii(raw, name, value, shown, _debug_log):
    send, _ = raw
    _, data, stamp = UP.cac(b"y")
    headers = [(name, value)] if name == b"Swarm-Postage-Stamp" else [(b"Swarm-Postage-Stamp", stamp.hex().encode()),
                                                                       (name, value)]
    status, _, body = await send(b"POST", b"/chunks", headers, data)
    if b"\x7f" in value and status == 400 and body is None:
        return  # aiohttp's parser refuses DEL in a header value itself, with its own plain-text 400
    _refused(status, body, name.decode(), shown, _debug_log)


async def test_hostile_bearer_token_from_elsewhere_is_a_400(raw, _debug_log):
    """From a non-loopback client the token is compared: undecodable bytes used to fail its encoding (500)."""
    send, _ = raw
    status, _, body = await send(b"DELETE", b"/batches/" + UP.batch_id.hex().encode(),
                                 [(b"X-Test-Remote", b"10.1.2.3"), (b"Authorization", b"Bearer \xff\xfe")])
    _refused(status, body, "Authorization", "Bearer \\xff\\xfe", _debug_log)
    status, _, body = await send(b"DELETE", b"/batches/" + UP.batch_id.hex().encode(),
                                 [(b"X-Test-Remote", b"10.1.2.3"), (b"Authorization", b"Bearer wrong")])
    assert status == 401 and body["code"] == 401


async def test_hostile_origin_is_refused_and_never_echoed(raw, _debug_log):
    send, _ = raw
    status, headers, body = await send(b"GET", b"/health", [(b"Origin", b"http://\xe9vil")])
    _refused(status, body, "Origin", "http://\\xe9vil", _debug_log)
    assert "access-control-allow-origin" not in headers
    status, headers, _ = await send(b"GET", b"/health", [(b"Origin", b"http://ok.example")])
    assert status == 200 and headers["access-control-allow-origin"] == "http://ok.example"


@pytest.mark.parametrize(("target", "field", "shown"), [
    (b"/chunks/%ff%fe", "address", "%ff%fe"),  # undecodable: kept percent-encoded by the URL parser
    (b"/chunks/%c3%a9" + b"00" * 31, "address", "\\xe9" + "00" * 31),
    (b"/rchash/%c3%28/aa/bb", "depth", "%c3("),
    (b"/rchash/0/%ed%a0%80/bb", "anchor1", "%ed%a0%80"),
    (b"/rchash/0/aa/bb?consensusTime=%c3%28", "consensusTime", "\\ufffd("),
    (b"/rchash/0/aa/bb?verbose=%ff", "verbose", "\\ufffd"),
    (b"/soc/%ff/" + b"00" * 32 + b"?sig=00", "owner", "%ff"),
])
async def test_undecodable_path_and_query_values_are_400_with_escaped_display(raw, target, field, shown, _debug_log):
    send, _ = raw
    status, _, body = await send(b"GET" if target.startswith((b"/chunks", b"/rchash")) else b"POST", target)
    assert status == 400, body
    assert body["code"] == 400 and body["reasons"][0]["field"] == field, body
    assert f"`{field}={shown}`" not in body["reasons"][0]["error"], body  # the value is not echoed
    assert f"`{field}={shown}`" in _debug_log.text  # but logged, escaped


def test_printable_escapes_everything_outside_printable_ascii():
    assert printable("abc-123 ~") == "abc-123 ~"
    assert printable("a\udce9b") == "a\\xe9b"  # a raw byte the parser kept as a surrogate escape
    assert printable("\x00\x1f\x7f") == "\\x00\\x1f\\x7f"
    assert printable("caf\u00e9 \u20ac \U0001f600") == "caf\\xe9 \\u20ac \\U0001f600"


def test_json_body_survives_a_lone_surrogate():
    raw = json_body({"code": 400, "message": "bad \udce9"})
    assert json.loads(raw)["code"] == 400


@pytest.mark.parametrize(("name", "value"), [(b"Swarm-Pin", b"1" * 9000), (b"Content-Type", b"text/plain\x01")])
async def test_requests_the_parser_refuses_log_one_warning_without_a_traceback(raw, caplog, name, value):
    """A fuzzing run found each such request logged by aiohttp as an error with a full traceback."""
    send, _ = raw
    quiet_malformed_requests()
    try:
        with caplog.at_level(logging.DEBUG, logger="aiohttp.server"):
            status, _, _ = await send(b"GET", b"/health", [(name, value)])
    finally:
        server = logging.getLogger("aiohttp.server")
        for f in [f for f in server.filters if isinstance(f, MalformedRequestFilter)]:
            server.removeFilter(f)
    assert status == 400
    records = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert records, "aiohttp logged nothing: the case no longer reaches its parser"
    assert all(r.levelno == logging.WARNING and not r.exc_info for r in records), [
        (r.levelname, r.getMessage()) for r in records]
    assert "refused a malformed request from" in records[0].getMessage()


async def test_a_cut_off_request_is_counted_499_not_500(tmp_path):
    """A crash sweep's upload cut off by shutdown's drain timeout was logged and counted as a 500."""
    import asyncio

    from aiohttp.test_utils import make_mocked_request

    from api.middleware import access_middleware
    from api.state import STATE

    app, _ = build(tmp_path)
    async with TestClient(TestServer(app)):  # a started app: its state and metrics exist

        async def cut_off(_request):
            raise asyncio.CancelledError

        with pytest.raises(asyncio.CancelledError):
            await access_middleware(make_mocked_request("POST", "/bytes", app=app), cut_off)
        counted = {s.labels["code"]: s.value for m in app[STATE].metrics.registry.collect()
                   if m.name.endswith("http_requests") for s in m.samples
                   if s.name.endswith("_total") and s.labels["method"] == "POST"}
        assert counted == {"499": 1.0}, counted


async def test_a_client_hanging_up_mid_request_is_counted_499_not_408(tmp_path):
    """An operator sweep's client that sent 1 MiB of a promised 10 MiB and closed the socket was counted as a
    408, which reads as the server timing out."""
    from aiohttp.test_utils import make_mocked_request

    from api.middleware import access_middleware, error_middleware
    from api.state import STATE

    app, _ = build(tmp_path)
    async with TestClient(TestServer(app)):

        async def hung_up(_request):
            raise ConnectionResetError("Connection lost")

        async def timed_out(_request):
            raise TimeoutError

        for handler in (hung_up, timed_out):
            request = make_mocked_request("POST", "/bytes", app=app)
            await access_middleware(request, lambda r, h=handler: error_middleware(r, h))
        counted = {s.labels["code"]: s.value for m in app[STATE].metrics.registry.collect()
                   if m.name.endswith("http_requests") for s in m.samples
                   if s.name.endswith("_total") and s.labels["method"] == "POST"}
        assert counted == {"499": 1.0, "408": 1.0}, counted


@pytest.mark.parametrize("damage", ["CorruptedError", "PageNotFoundError", "BadValsizeError"])
async def test_a_damaged_data_file_met_while_serving_is_named(tmp_path, damage):
    """A crash sweep damaged pages of a shard: some reads answered a bare 500 "internal error"."""
    import lmdb
    from aiohttp.test_utils import make_mocked_request

    from api.middleware import error_middleware

    app, _ = build(tmp_path)
    async with TestClient(TestServer(app)):

        async def read_damaged(_request):
            raise getattr(lmdb, damage)("mdb_get: MDB_CORRUPTED: Located page was wrong type")

        r = await error_middleware(make_mocked_request("GET", "/chunks/" + "ab" * 32, app=app), read_damaged)
        body = json.loads(r.body)
        assert r.status == 500 and body["code"] == 500
        assert body["message"].startswith(f"store damaged: {damage}: ") and "chunkstore verify" in body["message"]


@pytest.mark.parametrize("path", ["/a\rFAKE level=error", "/\x1b[2J\x1b[31mred", "/x\u2028y", "/bad\x00byte", "/caf\u00e9"])
def test_key_value_logs_escape_what_a_client_puts_in_a_path(path):
    """An operator's sweep: --log-format kv wrote a client's carriage return, ANSI escapes and Unicode line
    separators into the log bare (a line overwritten on a terminal, a forged line in a file)."""
    from api.logs import KeyValueFormatter

    record = logging.LogRecord("api.middleware.access", logging.INFO, __file__, 1, "api access", None, None)
    record.fields = {"path": path, "status": 404}
    line = KeyValueFormatter().format(record)
    assert line.isascii() and line.isprintable(), line
    assert f"path={json.dumps(path)}" in line
    assert "status=404" in line
