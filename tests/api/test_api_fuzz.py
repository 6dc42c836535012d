"""Random methods, paths, queries, headers and bodies at every endpoint: never a 5xx, errors are JSON,
and a refused request leaves the stored data as it was.

Two layers: requests built from valid ``str`` values through the client,
and raw bytes written to a socket (percent-encoded invalid UTF-8 in paths and
queries, bytes 0x80-0xff and control characters in headers, over-long
values), where aiohttp's own HTTP parser may refuse a malformed request with
its plain-text 400 before the daemon sees it.
"""

from __future__ import annotations

import asyncio
import json
import os
import string
from urllib.parse import quote

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from api.app import make_app
from api.config import Config
from chunkstore.reserve import ReserveStore
from tests.api.helpers import Uploader, simple_sample
from tests.api.test_api import fake_remote

UP = Uploader(seed=b"fuzz")
METHODS = ["GET", "POST", "HEAD", "DELETE", "PUT", "PATCH", "OPTIONS"]
TEMPLATES = [
    "/", "/health", "/readiness", "/status", "/reservestate", "/metrics", "/batches", "/chunks",
    "/chunks/{a}", "/v1/chunks/{a}", "/soc/{a}/{b}", "/v1/soc/{a}/{b}", "/batches/{a}", "/rchash/{a}/{b}/{c}",
    "/v1/rchash/{a}/{b}/{c}", "/{a}", "/chunks/{a}/{b}",
]

hexchars = st.text(alphabet="0123456789abcdefABCDEF", max_size=140)
junk = st.text(alphabet=string.ascii_letters + string.digits + "-_.~%:!@$&'()*+,;= ", max_size=40)
small_ints = st.integers(min_value=-5, max_value=300).map(str)
path_param = st.one_of(
    hexchars,
    st.sampled_from([40, 64, 130, 226]).map(lambda n: "ab" * (n // 2)),
    small_ints,
    junk,
    st.just(UP.batch_id.hex()),
)
header_value = st.text(alphabet=string.printable.replace("\r", "").replace("\n", "").replace("\x0b", "")
                       .replace("\x0c", ""), max_size=300).map(str.strip)


def _mutate(data: bytes, pos: int, flip: int) -> bytes:
    if not data:
        return data
    i = pos % len(data)
    return data[:i] + bytes([data[i] ^ (flip or 1)]) + data[i + 1 :]


@st.composite
def stamped(draw):
    """A valid upload (CAC or SOC body), maybe mutated in the body or the stamp."""
    payload = draw(st.binary(max_size=300))
    if draw(st.booleans()):
        addr, body, stamp = UP.cac(payload)
    else:
        soc, stamp = UP.soc(payload)
        body = soc.data
    where = draw(st.sampled_from(["none", "body", "stamp"]))
    pos, flip = draw(st.integers(0, 10_000)), draw(st.integers(0, 255))
    if where == "body":
        body = _mutate(body, pos, flip)
    elif where == "stamp":
        stamp = _mutate(stamp, pos, flip)
    return body, {"Swarm-Postage-Stamp": stamp.hex()}


@st.composite
def soc_upload(draw):
    """POST /soc parts of a valid SOC, maybe with one part mutated."""
    soc, stamp = UP.soc(draw(st.binary(max_size=300)))
    parts = {"owner": soc.owner, "id": soc.id, "sig": soc.signature, "body": soc.wrapped_data, "stamp": stamp}
    target = draw(st.sampled_from(["none", *parts]))
    if target != "none":
        parts[target] = _mutate(parts[target], draw(st.integers(0, 10_000)), draw(st.integers(0, 255)))
    path = f"/soc/{parts['owner'].hex()}/{parts['id'].hex()}"
    return path, {"sig": parts["sig"].hex()}, {"Swarm-Postage-Stamp": parts["stamp"].hex()}, parts["body"]


@st.composite
def batch_body(draw):
    body = UP.batch_json() if draw(st.booleans()) else Uploader(seed=draw(st.binary(max_size=4))).batch_json()
    for key in draw(st.lists(st.sampled_from(list(body)), max_size=3)):
        if draw(st.booleans()):
            body.pop(key, None)
        else:
            body[key] = draw(st.one_of(st.integers(-300, 300), st.booleans(), hexchars, junk, st.none(),
                                       st.floats(allow_nan=False), st.just("1" * 80)))
    return json.dumps(body).encode()


def random_request(draw):
    method = draw(st.sampled_from(METHODS))
    template = draw(st.sampled_from(TEMPLATES))
    params = {k: quote(draw(path_param), safe="") or "x" for k in "abc"}
    return method, template.format(**params), None, None


@st.composite
def requests(draw):
    query = draw(st.dictionaries(st.sampled_from(["sig", "consensusTime", "verbose", "x"]),
                                 st.one_of(hexchars, small_ints, junk, st.sampled_from(["true", "0", "False"])),
                                 max_size=2))
    headers = draw(st.dictionaries(
        st.sampled_from(["Swarm-Postage-Stamp", "Swarm-Postage-Batch-Id", "Swarm-Tag", "Authorization",
                         "Content-Type", "X-Test"]),
        st.one_of(header_value, hexchars),
        max_size=2,
    ))
    kind = draw(st.sampled_from(["random", "chunk", "chunk", "soc", "soc", "get", "rchash", "batch", "batch-id",
                                 "state"]))
    body: bytes | None = None
    if kind == "chunk":
        method, path = "POST", draw(st.sampled_from(["/chunks", "/v1/chunks"]))
        if draw(st.integers(0, 4)):
            body, h = draw(stamped())
            headers = {**h, **headers} if draw(st.booleans()) else {**headers, **h}
        else:
            body = draw(st.binary(max_size=5000))
    elif kind == "soc":
        method = "POST"
        path, q, h, body = draw(soc_upload())
        query = {**q, **query} if draw(st.integers(0, 3)) else query
        headers = {**headers, **h}
    elif kind == "get":
        method = draw(st.sampled_from(["GET", "HEAD"]))
        path = "/chunks/" + quote(draw(st.one_of(path_param, st.binary(min_size=32, max_size=32).map(bytes.hex))),
                                  safe="")
    elif kind == "rchash":
        method = "GET"
        depth = draw(st.one_of(st.integers(0, 4).map(str), small_ints, junk))
        a1 = draw(st.one_of(st.binary(min_size=1, max_size=4).map(bytes.hex), hexchars))
        a2 = draw(st.one_of(st.binary(min_size=1, max_size=32).map(bytes.hex), hexchars))
        path = f"/rchash/{quote(depth, safe='') or '0'}/{a1 or 'aa'}/{a2 or 'bb'}"
    elif kind == "batch":
        method, path = "POST", "/batches"
        body = draw(batch_body())
    elif kind == "batch-id":
        method = draw(st.sampled_from(["GET", "DELETE"]))
        path = "/batches/" + (quote(draw(path_param), safe="") or "x")
    elif kind == "state":
        method = draw(st.sampled_from(["GET", "GET", "GET", "HEAD", "POST"]))
        path = draw(st.sampled_from(["/", "/health", "/readiness", "/status", "/reservestate", "/metrics",
                                     "/batches", "/v1/status"]))
    else:
        method, path, _, _ = random_request(draw)
        body = draw(st.one_of(st.none(), st.binary(max_size=5000)))
    if draw(st.integers(0, 9)) == 0:  # sometimes pretend to be another host (test-only middleware)
        headers["X-Test-Remote"] = "10.9.8.7"
    return method, path, query, headers, body


APP_MARK = "X-Fuzz-Answered-By-App"


@web.middleware
async def mark_app_answers(request: web.Request, handler):
    """Test-only, outermost: tags every answer the application made (aiohttp's parser refusals lack it)."""
    try:
        resp = await handler(request)
    except web.HTTPException as exc:
        exc.headers[APP_MARK] = "1"
        raise
    resp.headers[APP_MARK] = "1"
    return resp


@pytest.fixture(scope="module")
def fuzz_env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    loop = asyncio.new_event_loop()
    store = ReserveStore(tmp / "store")
    store.batches.add(UP.batch())
    for _ in range(20):
        addr, data, stamp = UP.cac(os.urandom(32))
        store.put(data, stamp)

    async def sample(anchor, depth, ct):
        return await asyncio.get_running_loop().run_in_executor(None, simple_sample, store, anchor, depth, ct)

    app = make_app(store, Config(data_dir=tmp, sample_wait=0.5, admin_token="fuzz-token"), sample_fn=sample)
    app.middlewares.insert(0, fake_remote)
    app.middlewares.insert(0, mark_app_answers)
    client = TestClient(TestServer(app, loop=loop), loop=loop)
    loop.run_until_complete(client.start_server())
    yield loop, client, store
    loop.run_until_complete(client.close())
    store.close()
    loop.close()


def _snapshot(store: ReserveStore) -> tuple:
    s = store.stats()
    return s["chunks"], s["stamps"], s["bytes"], tuple((b.id, b.value, b.depth) for b in store.batches.list())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(req=requests())
def test_fuzz_every_endpoint_no_5xx(fuzz_env, req):
    loop, client, store = fuzz_env
    method, path, query, headers, body = req

    async def go():
        before = _snapshot(store)
        async with client.request(method, path, params=query, headers=headers, data=body) as r:
            raw = await r.read()
            after = _snapshot(store)
            return r.status, r.headers.get("Content-Type", ""), raw, before, after

    status, ctype, raw, before, after = loop.run_until_complete(go())
    assert status < 500, (method, path, query, headers, status, raw[:300])
    if status >= 400:
        if method != "HEAD":
            assert ctype.startswith("application/json"), (path, ctype)
            err = json.loads(raw)
            assert err["code"] == status and isinstance(err["message"], str) and err["message"]
        assert before == after, (method, path, status, raw[:300])


# ---------------------------------------------------------------- raw bytes on the wire

READ_HEADERS = [b"Swarm-Postage-Stamp", b"Swarm-Postage-Batch-Id", b"Swarm-Tag", b"Swarm-Pin", b"Authorization",
                b"Content-Type", b"Origin", b"X-Test-Remote"]
HIGH = bytes(range(0x80, 0x100))
CONTROL = bytes([*range(0x00, 0x09), *range(0x0B, 0x0D), *range(0x0E, 0x20), 0x7F])  # no CR/LF: see below
BAD_UTF8 = [b"%ff", b"%fe", b"%c3%28", b"%c0%80", b"%ed%a0%80", b"%e2%82", b"%80", b"%c3%a9", b"%00", b"%25"]

raw_hex = st.binary(max_size=70).map(lambda b: b.hex().encode())
raw_value = st.one_of(
    raw_hex,
    st.binary(min_size=1, max_size=40),  # anything, to be percent-encoded in paths and queries
    st.lists(st.sampled_from(BAD_UTF8), min_size=1, max_size=4).map(b"".join),
    st.binary(min_size=1, max_size=6).map(lambda b: b"".join(b"%%%02x" % c for c in b)),
    st.integers(0, 40).map(lambda n: b"ab" * n + b"%ff"),
    st.integers(8000, 9000).map(lambda n: b"a" * n),  # longer than the parser's 8190-byte lines
)


def _pct(value: bytes, raw_ok: bool) -> bytes:
    """For a URL: printable ASCII kept (the caller's own escapes too), other bytes percent-encoded unless raw_ok."""
    out = bytearray()
    for c in value:
        keep = 0x21 <= c <= 0x7E and c not in b"/?# " or (raw_ok and c >= 0x80)
        out += bytes([c]) if keep else b"%%%02X" % c
    return bytes(out)


@st.composite
def header_bytes(draw):
    # weighted towards what the parser lets through (bytes 0x80-0xff): control characters, over-long
    # values and bare CR/LF mostly meet aiohttp's own 400
    kind = draw(st.sampled_from(["high", "high", "high", "stamp", "stamp", "utf8", "mixed", "control", "long", "crlf"]))
    if kind == "high":
        return draw(st.binary(min_size=1, max_size=8).map(lambda b: bytes(HIGH[x % 128] for x in b)))
    if kind == "control":
        return b"ab" + draw(st.sampled_from(list(CONTROL))).to_bytes(1, "big") + b"cd"
    if kind == "mixed":
        return draw(st.binary(max_size=300)).replace(b"\r", b"").replace(b"\n", b"")
    if kind == "long":
        return b"a" * draw(st.integers(4000, 12000))
    if kind == "stamp":  # a well-formed stamp with one byte turned hostile
        _, _, stamp = UP.cac(b"raw")
        h = bytearray(stamp.hex().encode())
        h[draw(st.integers(0, len(h) - 1))] = draw(st.sampled_from(list(HIGH + CONTROL)))
        return bytes(h)
    if kind == "crlf":  # a header smuggled into the value
        return b"x\r\nSwarm-Postage-Stamp: \xe9\xff"
    return "Bearer caf\u00e9 \u20ac".encode()


@st.composite
def raw_requests(draw):
    """(method, request target, headers, body): aimed at the handlers that read headers, paths and queries."""
    kind = draw(st.sampled_from(["upload", "upload", "soc", "admin", "admin", "rchash", "get", "random"]))
    raw_path = draw(st.integers(0, 9)) == 0  # sometimes raw 0x80-0xff bytes: the parser's to refuse

    def seg() -> str:
        return _pct(draw(raw_value), raw_path).decode("latin-1") or "x"

    query_keys: list[bytes] = draw(st.lists(st.sampled_from([b"x", b"\xe9", b"verbose"]), max_size=2))
    names = [b"X-Test-Remote", b"Origin", b"Content-Type"]
    headers = [(name, draw(header_bytes())) for name in draw(st.lists(st.sampled_from(READ_HEADERS), max_size=2))]
    body = draw(st.one_of(st.just(b""), st.binary(max_size=300)))
    if kind in ("upload", "soc"):
        method = b"POST"
        if kind == "upload":
            path = draw(st.sampled_from(["/chunks", "/v1/chunks"]))
            _, body, stamp = UP.cac(draw(st.binary(max_size=200)))
        else:
            soc, stamp = UP.soc(draw(st.binary(max_size=200)))
            path = f"/soc/{soc.owner.hex() if draw(st.booleans()) else seg()}/{soc.id.hex() if draw(st.booleans()) else seg()}"
            query_keys.append(b"sig")
            body = soc.wrapped_data
        names = [b"Swarm-Postage-Stamp", b"Swarm-Postage-Batch-Id", b"Swarm-Tag", b"Swarm-Pin"]
        if draw(st.booleans()):
            headers.append((b"Swarm-Postage-Stamp", stamp.hex().encode()))
    elif kind == "admin":  # from "elsewhere", so the bearer token is read
        method = draw(st.sampled_from([b"POST", b"DELETE"]))
        path = draw(st.sampled_from(["/batches", "/chainstate", f"/batches/{UP.batch_id.hex()}", f"/batches/{seg()}"]))
        headers.append((b"X-Test-Remote", b"10.9.8.7"))
        names = [b"Authorization"]
        if draw(st.booleans()):
            headers.append((b"Authorization", b"Bearer " + draw(header_bytes())))
    elif kind == "rchash":
        method = b"GET"
        path = f"/rchash/{seg() if draw(st.booleans()) else '0'}/{seg()}/{seg() if draw(st.booleans()) else 'bb'}"
        query_keys += [b"consensusTime", b"verbose"]
    elif kind == "get":
        method = draw(st.sampled_from([b"GET", b"HEAD", b"DELETE"]))
        path = draw(st.sampled_from(["/chunks/", "/v1/chunks/", "/batches/"])) + seg()
    else:
        method = draw(st.sampled_from([b"GET", b"POST", b"HEAD", b"DELETE", b"OPTIONS", b"PUT"]))
        path = draw(st.sampled_from(TEMPLATES)).format(a=seg(), b=seg(), c=seg())
    headers += [(name, draw(header_bytes())) for name in draw(st.lists(st.sampled_from(names), max_size=2))]
    draw(st.randoms()).shuffle(headers)  # a hostile value may come before or after a good one
    query = b"&".join(_pct(k, False) + b"=" + _pct(draw(raw_value), raw_path) for k in query_keys)
    target = path.encode("latin-1") + (b"?" + query if query else b"")
    return method, target, headers, body


async def _send_raw(host: str, port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(request)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(-1), 30)
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.decode("latin-1").strip().lower()] = value.decode("latin-1").strip()
    return status, headers, body


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(req=raw_requests())
def test_fuzz_raw_bytes_no_5xx(fuzz_env, req):
    loop, client, store = fuzz_env
    method, target, headers, body = req
    request = method + b" " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    request += b"".join(name + b": " + value + b"\r\n" for name, value in headers)
    request += b"Content-Length: %d\r\n\r\n" % len(body) + body
    before = _snapshot(store)
    status, got, raw = loop.run_until_complete(_send_raw(client.server.host, client.server.port, request))
    after = _snapshot(store)
    assert status < 500, (request[:400], status, raw[:300])
    event(f"{'app' if APP_MARK.lower() in got else 'parser'} {status}")
    if APP_MARK.lower() not in got:
        # refused by aiohttp's HTTP parser before any handler ran: its own plain-text 400
        assert status == 400, (request[:400], status, raw[:300])
        assert before == after
        return
    if status >= 400:
        if method != b"HEAD":
            assert got.get("content-type", "").startswith("application/json"), (request[:400], got)
            err = json.loads(raw)
            assert err["code"] == status and isinstance(err["message"], str) and err["message"], err
        assert before == after, (request[:400], status, raw[:300])
