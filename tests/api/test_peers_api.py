"""The peer, accounting and settlement routes answer as the reference node with no peers and no swap answers."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests.api.contenthelpers import content_app
from tests.api.test_content_api import expect_error

PEER = "ab" * 32


@pytest.fixture
async def client(tmp_path):
    app, _ = content_app(tmp_path)
    async with TestClient(TestServer(app)) as c:
        yield c


@pytest.mark.parametrize(("path", "body"), [
    ("/peers", {"peers": []}), ("/blocklist", {"peers": []}), ("/balances", {"balances": []}),
    ("/consumed", {"balances": []}), ("/v1/consumed", {"balances": []}),
    ("/timesettlements", {"totalReceived": "0", "totalSent": "0", "settlements": []}),
    # pkg/api/accounting.go (an empty map) and status.go statusGetPeersHandler (a nil slice: null)
    ("/accounting", {"peerData": {}}), ("/v1/accounting", {"peerData": {}}),
    ("/status/peers", {"snapshots": None}), ("/v1/status/peers", {"snapshots": None}),
])  # fmt: skip
async def test_empty_lists(client, path, body):
    r = await client.get(path)
    assert r.status == 200 and await r.json() == body


@pytest.mark.parametrize(("method", "path", "message"), [
    ("GET", f"/balances/{PEER}", "No balance for peer"), ("GET", f"/consumed/{PEER}", "No balance for peer"),
    ("DELETE", f"/peers/{PEER}", "peer not found"), ("POST", f"/pingpong/{PEER}", "peer not found"),
])  # fmt: skip
async def test_a_named_peer_is_unknown_after_its_address_is_checked(client, method, path, message):
    body = await expect_error(await client.request(method, path), 404)
    assert body["message"] == message
    await expect_error(await client.request(method, path.replace(PEER, "xyz")), 400, "invalid path params")


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
@pytest.mark.parametrize(("path", "message"), [
    ("/settlements", "Swap is disabled"), (f"/settlements/{PEER}", "Swap is disabled"),
    ("/chequebook/cheque", "Swap is disabled"), (f"/chequebook/cashout/{PEER}", "Swap is disabled"),
    ("/chequebook/balance", "Chequebook is disabled"), ("/chequebook/address", "Chequebook is disabled"),
    ("/chequebook/deposit", "Chequebook is disabled"), ("/chequebook/withdraw", "Chequebook is disabled"),
])  # fmt: skip
async def test_swap_and_chequebook_are_off_as_node_says(client, method, path, message):
    node = await (await client.get("/node")).json()
    assert node["swapEnabled"] is False and node["chequebookEnabled"] is False
    body = await expect_error(await client.request(method, path), 403)
    assert body["message"] == f"{message}. This endpoint is unavailable."


async def test_a_gated_routes_preflight_is_answered(client):
    r = await client.options("/chequebook/balance", headers={"Origin": "http://app", "Access-Control-Request-Method": "GET"})
    assert r.status == 204 and "GET" in r.headers["Allow"]


async def test_welcome_message_is_set_and_read_back(client):
    assert await (await client.get("/welcome-message")).json() == {"welcomeMessage": ""}
    r = await client.post("/welcome-message", json={"welcomeMessage": "hello swarm ✓"})
    assert r.status == 200
    assert await (await client.get("/v1/welcome-message")).json() == {"welcomeMessage": "hello swarm ✓"}
    # 140 bytes, not characters: 47 three-byte characters are 141 bytes
    await expect_error(await client.post("/welcome-message", json={"welcomeMessage": "✓" * 47}), 400, "maximum of 140")
    await expect_error(await client.post("/welcome-message", data=b"{"), 400, "not JSON")
    await expect_error(await client.post("/welcome-message", json={"welcomeMessage": 5}), 400, "welcomeMessage")
    await expect_error(await client.post("/welcome-message", data=b" " * 600), 413)
    assert await (await client.get("/welcome-message")).json() == {"welcomeMessage": "hello swarm ✓"}


async def test_welcome_message_body_is_read_as_go_decodes_it(client):
    """Bee's setWelcomeMessageHandler decodes ``{"welcomeMessage"}`` with Go's json.Decoder: the field
    name matches case-insensitively (a member spelt otherwise sets it, it does not clear it), the last
    match wins, ``null`` is no change to the empty default, and only the first JSON value is read."""

    async def message_after(raw: bytes) -> str:
        r = await client.post("/welcome-message", data=raw, headers={"Content-Type": "application/json"})
        assert r.status == 200, (raw, await r.text())
        return str((await (await client.get("/welcome-message")).json())["welcomeMessage"])

    assert await message_after(b'{"WelcomeMessage": "folded"}') == "folded"
    assert await message_after(b'{"welcomemessage": "a", "WELCOMEMESSAGE": "last"}') == "last"
    assert await message_after(b'{"welcomeMessage": "first"} {"welcomeMessage": "not read"}') == "first"
    assert await message_after(b"null") == ""
    await expect_error(await client.post("/welcome-message", data=b"[1]"), 400, "welcomeMessage")
    await expect_error(await client.post("/welcome-message", data=b'{"WELCOMEmessage": true}'), 400, "welcomeMessage")


async def test_no_transaction_is_pending_and_none_is_known(client):
    r = await client.get("/transactions")
    assert r.status == 200 and await r.json() == {"pendingTransactions": []}
    for method in ("GET", "POST", "DELETE"):
        body = await expect_error(await client.request(method, f"/transactions/0x{'ab' * 32}"), 404)
        assert body["message"] == "unknown transaction"
    await expect_error(await client.get("/transactions/0xabc"), 400, "invalid path params")
