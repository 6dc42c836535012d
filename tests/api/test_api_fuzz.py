"""Random methods, paths, queries, headers and bodies at every endpoint: never a 5xx, errors are JSON,
and a refused request leaves the stored data as it was."""

from __future__ import annotations

import asyncio
import json
import os
import string
from urllib.parse import quote

import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
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

    app = make_app(store, Config(data_dir=tmp, sample_wait=0.5), sample_fn=sample)
    app.middlewares.insert(0, fake_remote)
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
