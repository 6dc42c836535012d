"""Node identity, the node's stamps and dev mode, through aiohttp's test client: Bee's shapes field by field."""

from __future__ import annotations

import errno
import os
import stat

import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.nodekey import NodeKeyError, load_node_key
from chunkstore.swarm.signer import Signer
from tests.api.contenthelpers import BATCH, NODE_KEY, content_app, register_batch, upload_headers
from tests.api.test_content_api import expect_error

STAMP_FIELDS = {
    "batchID": str, "utilization": int, "utilizationRatio": float, "usable": bool, "label": str, "depth": int,
    "amount": str, "bucketDepth": int, "blockNumber": int, "immutableFlag": bool, "exists": bool, "batchTTL": int,
}


def check_shape(obj: dict, fields: dict) -> None:
    assert set(obj) == set(fields), set(obj) ^ set(fields)
    for name, typ in fields.items():
        assert isinstance(obj[name], typ) and not (typ is int and isinstance(obj[name], bool)), (name, obj[name])


@pytest.fixture
async def client(tmp_path):
    app, _ = content_app(tmp_path)
    async with TestClient(TestServer(app)) as c:
        yield c


@pytest.fixture
async def dev(tmp_path):
    app, store = content_app(tmp_path, dev=True)
    from chunkstore.reserve import ChainState

    store.reserve.set_chainstate(ChainState(block=10, total_amount=1000, current_price=24000))
    async with TestClient(TestServer(app)) as c:
        yield c


async def test_addresses_node_topology_stake_wallet(client):
    signer = Signer(NODE_KEY)
    r = await client.get("/addresses")
    body = await r.json()
    assert body == {
        "overlay": bytes(range(32)).hex(), "underlay": [], "ethereum": "0x" + signer.address.hex(),
        "chain_address": "0x" + signer.address.hex(), "publicKey": signer.public_key.hex(),
        "pssPublicKey": signer.public_key.hex(),
    }
    assert len(bytes.fromhex(body["publicKey"])) == 33
    assert await (await client.get("/node")).json() == {"beeMode": "full", "chequebookEnabled": False,
                                                        "swapEnabled": False}
    topo = await (await client.get("/topology")).json()
    assert topo["baseAddr"] == bytes(range(32)).hex() and topo["depth"] == 0 and topo["population"] == 0
    assert set(topo["bins"]) == {f"bin_{i}" for i in range(32)}
    assert topo["bins"]["bin_3"] == {"population": 0, "connected": 0, "disconnectedPeers": None,
                                     "connectedPeers": None}
    assert await (await client.get("/stake")).json() == {"stakedAmount": "0"}
    assert await (await client.get("/stake/withdrawable")).json() == {"withdrawableAmount": "0"}
    wallet = await (await client.get("/wallet")).json()
    assert wallet["bzzBalance"] == "0" and wallet["walletAddress"] == "0x" + signer.address.hex()
    state = await (await client.get("/redistributionstate")).json()
    assert state["isFrozen"] is False and state["reward"] == "0"
    # bee-js 12.1 refuses an empty phase ("Expected string for phase"): a phase name, as the reference sends
    assert (state["phase"], state["round"], state["block"]) == ("commit", 0, 0)


@pytest.mark.parametrize(("block", "round_number", "phase"), [
    (0, 0, "commit"), (37, 0, "commit"), (38, 0, "reveal"), (75, 0, "reveal"), (76, 0, "claim"), (151, 0, "claim"),
    (152, 1, "commit"), (1000 * 152 + 40, 1000, "reveal"),
])
async def test_redistribution_state_names_the_round_and_phase_of_the_block(tmp_path, block, round_number, phase):
    from chunkstore.reserve import ChainState

    app, store = content_app(tmp_path)
    store.reserve.set_chainstate(ChainState(block=block, total_amount=0, current_price=24000))
    async with TestClient(TestServer(app)) as c:
        state = await (await c.get("/redistributionstate")).json()
    assert (state["block"], state["round"], state["phase"]) == (block, round_number, phase)


async def test_stamps_of_the_node(client):
    await expect_error(await client.get(f"/stamps/{BATCH.hex()}"), 404, "issuer does not exist")
    assert await (await client.get("/stamps")).json() == {"stamps": []}
    created = await register_batch(client, label="site")
    assert created["owner"] == Signer(NODE_KEY).address.hex()
    # someone else's batch is not the node's stamp
    r = await client.post("/batches", json={"batchID": "cd" * 32, "owner": "11" * 20, "depth": 20,
                                            "bucketDepth": 16, "immutable": True, "value": "5", "start": 0})
    assert r.status == 201
    stamps = (await (await client.get("/stamps")).json())["stamps"]
    assert [s["batchID"] for s in stamps] == [BATCH.hex()]
    check_shape(stamps[0], STAMP_FIELDS)
    assert stamps[0]["label"] == "site" and stamps[0]["utilization"] == 0 and stamps[0]["usable"] is True
    await expect_error(await client.get(f"/stamps/{'cd' * 32}"), 404, "issuer does not exist")
    r = await client.post("/bytes", data=os.urandom(50_000), headers=upload_headers(**{"Swarm-Redundancy-Level": "0"}))
    assert r.status == 201
    one = await (await client.get(f"/stamps/{BATCH.hex()}")).json()
    check_shape(one, STAMP_FIELDS)
    assert one["utilization"] >= 1 and one["utilizationRatio"] == one["utilization"] / 16
    buckets = await (await client.get(f"/stamps/{BATCH.hex()}/buckets")).json()
    assert (buckets["depth"], buckets["bucketDepth"], buckets["bucketUpperBound"]) == (20, 16, 16)
    assert len(buckets["buckets"]) == 65536 and buckets["buckets"][7] == {"bucketID": 7, "collisions": buckets[
        "buckets"][7]["collisions"]}
    assert sum(b["collisions"] for b in buckets["buckets"]) == 14  # 13 leaves and their parent
    assert max(b["collisions"] for b in buckets["buckets"]) == one["utilization"]
    r = await client.patch(f"/stamps/{BATCH.hex()}", json={"label": "renamed"})
    assert r.status == 200
    # Bee's jsonhttp.OK(w, nil) (postage.go, postageUpdateLabelHandler): the status text, not a JSON null
    assert await r.json() == {"code": 200, "message": "OK"}
    assert (await (await client.get(f"/stamps/{BATCH.hex()}")).json())["label"] == "renamed"


async def test_label_patch_reads_its_body_as_bee_does(client):
    """Bee's postageUpdateLabelHandler (postage.go) decodes the body with ``json.NewDecoder(r.Body).Decode``
    into ``struct{Label string `json:"label"`}`` before it looks the batch up: the first JSON value only,
    keys matched case-insensitively, a label that is no string a decode error ("invalid request body"),
    an empty one "label is required", and only then an unknown batch's 404."""
    await register_batch(client, label="site")
    url = f"/stamps/{BATCH.hex()}"
    unknown = f"/stamps/{'cd' * 32}"

    async def patch(path: str, raw: bytes) -> tuple[int, str]:
        r = await client.patch(path, data=raw, headers={"Content-Type": "application/json"})
        return r.status, (await r.json())["message"]

    # the body is read before the batch: a bad body of an unknown batch is a 400, not a 404
    assert await patch(unknown, b"not json") == (400, "invalid request body")
    assert await patch(unknown, b'{"label": ""}') == (400, "label is required")
    assert await patch(unknown, b'{"label": "x"}') == (404, "issuer does not exist")
    for raw in (b"", b'{"label": 5}', b'{"label": ["x"]}', b"[1]", b'"x"', b"7", b'{"label": "x", "LABEL": 1}'):
        assert await patch(url, raw) == (400, "invalid request body"), raw
    for raw in (b"null", b"{}", b'{"label": " \\t"}', b'{"other": "x"}', b'{"label": null}'):
        assert await patch(url, raw) == (400, "label is required"), raw

    async def label() -> str:
        return str((await (await client.get(url)).json())["label"])

    assert await patch(url, b'{"Label": "folded"}') == (200, "OK")  # Go matches field names case-insensitively
    assert await label() == "folded"
    assert await patch(url, b'{"label": "a", "LABEL": "last"}') == (200, "OK")  # the last match wins
    assert await label() == "last"
    assert await patch(url, b' {"label": "first"} {"label": "not read"}') == (200, "OK")  # one value is read
    assert await label() == "first"


async def test_buying_without_dev_mode_says_what_to_do(client):
    r = await client.post("/stamps/500000000/20")
    # Bee's answer without a chain backend (since 2.7: 403 before the path is read), then what to do here
    bee = r"^Chain is disabled\. This endpoint is unavailable\. "
    await expect_error(r, 403, bee + ".*POST /batches")
    await expect_error(await client.patch(f"/stamps/topup/{BATCH.hex()}/100"), 403, bee + ".*--dev")
    await expect_error(await client.patch(f"/stamps/dilute/{BATCH.hex()}/21"), 403, bee + "No chain backend")
    await expect_error(await client.post("/stamps/not-a-number/20"), 403, bee)


@pytest.mark.parametrize("mode", ["normal", "dev"])
async def test_chain_writes_are_refused_as_by_a_node_without_chain(tmp_path, mode):
    """Staking and wallet withdrawals (bee-js depositStake, withdrawSurplusStake, migrateStake,
    withdrawBZZToExternalWallet, withdrawDAIToExternalWallet; swarm-cli stake deposit|withdraw, wallet
    withdraw-bzz|withdraw-dai) get the reference's no-chain answers with a reason, not a bare 404/405."""
    app, _ = content_app(tmp_path, dev=mode == "dev")
    async with TestClient(TestServer(app)) as c:
        for prefix in ("", "/v1"):
            await expect_error(await c.post(f"{prefix}/stake/100000000000000000"), 500, "^cannot stake: no chain backend")
            await expect_error(await c.delete(f"{prefix}/stake/withdrawable"), 500, "^cannot withdraw stake: no chain")
            await expect_error(await c.delete(f"{prefix}/stake"), 500, "^cannot migrate stake: no chain backend")
            for coin in ("bzz", "nativetoken"):
                r = await c.post(f"{prefix}/wallet/withdraw/{coin}", params={"amount": "1", "address": "33" * 20})
                await expect_error(r, 403, "^Chain is disabled\\. This endpoint is unavailable\\. ")
            await expect_error(await c.get(f"{prefix}/wallet/withdraw/bzz"), 403, "Chain is disabled")
        await expect_error(await c.post("/stake/ten"), 400, "invalid path params.*'amount', 'error': 'invalid syntax")
        await expect_error(await c.post("/stake/withdrawable"), 405, "Method Not Allowed")
        # the reads stay as they were
        assert await (await c.get("/stake")).json() == {"stakedAmount": "0"}
        assert await (await c.get("/stake/withdrawable")).json() == {"withdrawableAmount": "0"}


async def test_dev_mode_buys_tops_up_and_dilutes(dev):
    wallet = await (await dev.get("/wallet")).json()
    assert int(wallet["bzzBalance"]) > 500_000_000 << 30
    r = await dev.post("/stamps/500000000/20", params={"label": "ci"}, headers={"Immutable": "false"})
    assert r.status == 201
    body = await r.json()
    assert set(body) == {"batchID", "txHash"} and body["txHash"].startswith("0x") and len(body["txHash"]) == 66
    batch_id = body["batchID"]
    stamp = await (await dev.get(f"/stamps/{batch_id}")).json()
    assert (stamp["label"], stamp["amount"], stamp["depth"], stamp["bucketDepth"], stamp["immutableFlag"],
            stamp["blockNumber"]) == ("ci", "500000000", 20, 16, False, 10)
    assert stamp["batchTTL"] == 500_000_000 * 5 // 24000
    batch = await (await dev.get(f"/batches/{batch_id}")).json()
    assert batch["value"] == str(1000 + 500_000_000)
    # usable at once: an upload with it works
    r = await dev.post("/bytes", data=b"dev data", headers={"Swarm-Postage-Batch-Id": batch_id})
    assert r.status == 201
    r = await dev.patch(f"/stamps/topup/{batch_id}/100000000")
    assert r.status == 202 and (await r.json())["batchID"] == batch_id
    stamp = await (await dev.get(f"/stamps/{batch_id}")).json()
    assert stamp["amount"] == "600000000"
    r = await dev.patch(f"/stamps/dilute/{batch_id}/22")
    assert r.status == 202
    batch = await (await dev.get(f"/batches/{batch_id}")).json()
    assert batch["depth"] == 22 and batch["value"] == str(1000 + 600_000_000 // 4)
    default = await (await dev.post("/stamps/500000000/17")).json()
    assert (await (await dev.get(f"/stamps/{default['batchID']}")).json())["immutableFlag"] is True


async def test_dev_mode_amounts_take_a_plus_sign_as_go_big_int_does(dev):
    """Bee reads a stamp amount as a *big.Int (postage.go, mapStructure: SetString(v, 10)), which takes a
    leading "+"; a leading "-" stays refused here."""
    r = await dev.post("/stamps/+500000000/20")
    assert r.status == 201, await r.text()
    batch_id = (await r.json())["batchID"]
    assert (await (await dev.get(f"/stamps/{batch_id}")).json())["amount"] == "500000000"
    r = await dev.patch(f"/stamps/topup/{batch_id}/+100000000")
    assert r.status == 202, await r.text()
    assert (await (await dev.get(f"/stamps/{batch_id}")).json())["amount"] == "600000000"
    for amount in ("+", "++5", "+-5", "-5"):
        await expect_error(await dev.patch(f"/stamps/topup/{batch_id}/{amount}"), 400, "invalid path params")


@pytest.mark.parametrize(("path", "status", "pattern"), [
    ("/stamps/414720000/20", 400, "24h minimum validity"),  # one day at 24000 exactly: must be more
    ("/stamps/500000000/16", 400, "at least 17"),
    ("/stamps/500000000/300", 400, "invalid path params"),
    ("/stamps/-5/20", 400, "invalid path params"),
    ("/stamps/1" + "0" * 30 + "/30", 400, "out of funds"),
])
async def test_dev_mode_refusals(dev, path, status, pattern):
    await expect_error(await dev.post(path), status, pattern)


@pytest.mark.parametrize(("name", "value"), [("Gas-Price", "cheap"), ("Gas-Price", "1.5"), ("Gas-Price", "-"),
                                           ("Gas-Limit", "-1"), ("Gas-Limit", "1" * 21)])
async def test_gas_headers_bee_cannot_read_are_400(dev, name, value):
    """Bee's gasConfigMiddleware (pkg/api/api.go) reads Gas-Price as a big.Int and Gas-Limit as a uint64 before
    the chain routes' handlers (pkg/api/router.go: stamps create/topup/dilute, every stake route) and answers
    400 "invalid header params" for what it cannot read; nothing is bought."""
    batch_id = (await (await dev.post("/stamps/500000000/20")).json())["batchID"]
    gas = {name: value}
    for method, path in (("POST", "/stamps/500000000/20"), ("PATCH", f"/stamps/topup/{batch_id}/5"),
                         ("PATCH", f"/stamps/dilute/{batch_id}/21"), ("GET", "/stake"), ("DELETE", "/stake"),
                         ("GET", "/stake/withdrawable"), ("DELETE", "/stake/withdrawable"), ("POST", "/stake/5")):
        r = await dev.request(method, path, headers=gas)
        body = await expect_error(r, 400, "invalid header params")
        assert body["reasons"][0]["field"] == name, (method, path)
    assert len((await (await dev.get("/stamps")).json())["stamps"]) == 1
    r = await dev.post("/stamps/500000000/20", headers={"Gas-Price": "+1000", "Gas-Limit": "300000"})
    assert r.status == 201, await r.text()


async def test_dev_mode_dilute_must_deepen(dev):
    batch_id = (await (await dev.post("/stamps/500000000/20")).json())["batchID"]
    await expect_error(await dev.patch(f"/stamps/dilute/{batch_id}/20"), 400, "invalid depth")
    await expect_error(await dev.patch(f"/stamps/topup/{os.urandom(32).hex()}/5"), 404, "issuer does not exist")


async def test_dev_mode_dilute_that_would_expire_the_batch_is_refused(dev):
    """A fuzzing run's ``PATCH /stamps/dilute/{id}/255`` left the batch nothing per chunk: it expired at once and
    the reserve evicted what it stamped. Refused now, and the batch and its data stay as they were."""
    batch_id = (await (await dev.post("/stamps/500000000/20")).json())["batchID"]
    r = await dev.post("/bytes", data=b"kept data", headers={"Swarm-Postage-Batch-Id": batch_id})
    reference = (await r.json())["reference"]
    before = await (await dev.get(f"/batches/{batch_id}")).json()
    await expect_error(await dev.patch(f"/stamps/dilute/{batch_id}/255"), 400, "would expire")
    await expect_error(await dev.patch(f"/stamps/dilute/{batch_id}/49"), 400, "would expire")  # 2^29 > 5e8
    assert await (await dev.get(f"/batches/{batch_id}")).json() == before
    assert await (await dev.get(f"/bytes/{reference}")).read() == b"kept data"
    r = await dev.patch(f"/stamps/dilute/{batch_id}/48")  # 500000000 >> 28 = 1: still something per chunk
    assert r.status == 202
    assert (await (await dev.get(f"/batches/{batch_id}")).json())["value"] == str(1000 + 1)


async def test_concurrent_top_ups_dilutions_and_labels_lose_no_change(dev, monkeypatch):
    """20 top-ups at once each answered 202, and the batch came out with 12 of them (a sweep with curl): each
    read the old record, then wrote it back with its own amount. Bee lets one on-chain operation run at a time
    (``postageAccessHandler``), so none is lost there; here they are run one after another."""
    import asyncio
    import time

    import api.routes_stamps as routes_stamps

    real = routes_stamps._node_batch

    def slow_read(*args):  # widen the window between reading the record and writing it back
        found = real(*args)
        time.sleep(0.02)
        return found

    monkeypatch.setattr(routes_stamps, "_node_batch", slow_read)
    batch_id = (await (await dev.post("/stamps/500000000/20")).json())["batchID"]
    answers = await asyncio.gather(
        *[dev.patch(f"/stamps/topup/{batch_id}/1000") for _ in range(8)],
        dev.patch(f"/stamps/{batch_id}", json={"label": "renamed"}),
        *[dev.patch(f"/stamps/topup/{batch_id}/1000") for _ in range(8)],
    )
    assert [r.status for r in answers] == [202] * 8 + [200] + [202] * 8
    stamp = await (await dev.get(f"/stamps/{batch_id}")).json()
    assert (stamp["amount"], stamp["label"]) == (str(500_000_000 + 16_000), "renamed")
    batch = await (await dev.get(f"/batches/{batch_id}")).json()
    assert batch["value"] == str(1000 + 500_000_000 + 16_000)
    # a dilution and top-ups at once: the top-ups land before or after the halving, none is dropped
    answers = await asyncio.gather(*[dev.patch(f"/stamps/topup/{batch_id}/1000") for _ in range(4)],
                                   dev.patch(f"/stamps/dilute/{batch_id}/21"))
    assert [r.status for r in answers] == [202] * 5
    stamp = await (await dev.get(f"/stamps/{batch_id}")).json()
    assert stamp["amount"] == str(500_000_000 + 20_000) and stamp["depth"] == 21
    value = int((await (await dev.get(f"/batches/{batch_id}")).json())["value"]) - 1000
    before = 500_000_000 + 16_000
    assert value in {(before + 1000 * k) // 2 + 1000 * (4 - k) for k in range(5)}, value


class _Killed(Exception):
    """Stands in for a crash between a batch's commit and its issuer's."""


def _fail_issuer_writes(monkeypatch):
    import chunkstore.store.issuers as issuers

    def killed(*args):
        raise _Killed

    monkeypatch.setattr(issuers, "_record", killed)
    return monkeypatch.undo


async def test_a_batch_change_and_its_issuer_commit_together(dev, monkeypatch):
    """A top-up wrote the batch's new value in one commit and the amount paid in another (a crash sweep): a
    SIGKILL between the two left ``GET /batches`` value and ``GET /stamps`` amount apart for good. Buying a
    batch, and an admin's ``POST /batches`` for a node batch, were two commits the same way. Each is one
    transaction of the meta env now: a failure of the issuer's write leaves the batch as it was."""
    batch_id = (await (await dev.post("/stamps/500000000/20", params={"label": "kept"})).json())["batchID"]
    undo = _fail_issuer_writes(monkeypatch)
    r = await dev.patch(f"/stamps/topup/{batch_id}/1000")
    assert r.status == 500
    bought = await dev.post("/stamps/600000000/20")
    assert bought.status == 500
    admin = await dev.post("/batches", json={"batchID": "ab" * 32, "depth": 20, "bucketDepth": 16, "immutable": False,
                                              "value": "700000000", "start": 0})
    assert admin.status == 500
    undo()
    stamp = await (await dev.get(f"/stamps/{batch_id}")).json()
    assert (stamp["amount"], stamp["label"]) == ("500000000", "kept")
    assert (await (await dev.get(f"/batches/{batch_id}")).json())["value"] == str(1000 + 500_000_000)
    assert [b["batchID"] for b in (await (await dev.get("/batches")).json())["batches"]] == [batch_id]
    assert [s["batchID"] for s in (await (await dev.get("/stamps")).json())["stamps"]] == [batch_id]
    # and when nothing fails, both move
    r = await dev.patch(f"/stamps/topup/{batch_id}/1000")
    assert r.status == 202
    assert (await (await dev.get(f"/stamps/{batch_id}")).json())["amount"] == "500001000"
    assert (await (await dev.get(f"/batches/{batch_id}")).json())["value"] == str(1000 + 500_001_000)
    r = await dev.post("/batches", json={"batchID": "ab" * 32, "depth": 20, "bucketDepth": 16, "immutable": False,
                                         "value": "700000000", "start": 0, "label": "admin"})
    assert r.status == 201, await r.text()
    assert (await (await dev.get(f"/stamps/{'ab' * 32}")).json())["label"] == "admin"


def test_node_key_file_rules(tmp_path):
    signer = load_node_key(tmp_path)
    key_file = tmp_path / "node.key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert load_node_key(tmp_path).address == signer.address  # kept across starts
    given = tmp_path / "given.key"
    given.write_text(NODE_KEY.hex() + "\n")
    assert load_node_key(tmp_path, given).address == Signer(NODE_KEY).address
    with pytest.raises(NodeKeyError, match="does not exist"):
        load_node_key(tmp_path, tmp_path / "typo.key")
    bad = tmp_path / "bad.key"
    for junk in (b"not hex", b"\xff\xfe" + b"ab" * 31):  # the second is no text at all (a sweep's traceback)
        bad.write_bytes(junk)
        with pytest.raises(NodeKeyError, match="64 hex"):
            load_node_key(tmp_path, bad)


@pytest.mark.parametrize("junk", [b"zz", b"\xff\xfe" + b"ab" * 31, None])
def test_a_bad_overlay_file_is_refused_with_the_message(tmp_path, junk):
    from api.server import OVERLAY_FILE, StartupError, resolve_overlay

    path = tmp_path / OVERLAY_FILE
    if junk is None:
        path.mkdir()  # not a file at all
    else:
        path.write_bytes(junk)
    with pytest.raises(StartupError, match="overlay") as caught:
        resolve_overlay(tmp_path, None)
    assert caught.value.code == 2


def _counter(text: str, name: str, labels: str) -> float:
    import re

    found = re.search(rf"^{name}\{{{labels}\}} ([0-9.e+]+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


async def test_reuploads_stamped_by_the_node_are_not_counted_as_new_chunks(dev):
    """An operator sweep: three uploads of the same 100 KB grew the reserve once but counted 78 new chunks;
    the same chunk posted three times to /chunks counted three 'stored' and no 'duplicate'."""
    batch_id = (await (await dev.post("/stamps/500000000/20")).json())["batchID"]
    headers = {"Swarm-Postage-Batch-Id": batch_id, "Swarm-Redundancy-Level": "0"}
    payload = os.urandom(100_000)
    counts = []
    for _ in range(3):
        assert (await dev.post("/bytes", data=payload, headers=headers)).status == 201
        text = await (await dev.get("/metrics")).text()
        counts.append(_counter(text, "chunkstore_upload_chunks_total", 'kept="reserve"'))
    assert counts[0] == 26 and counts == [26.0, 26.0, 26.0], counts  # 25 leaves and the root
    chunk = os.urandom(8) + b"one chunk"
    for _ in range(3):
        assert (await dev.post("/chunks", data=chunk, headers={"Swarm-Postage-Batch-Id": batch_id})).status == 201
    text = await (await dev.get("/metrics")).text()
    assert _counter(text, "chunkstore_chunk_puts_total", 'outcome="stored"') == 1
    assert _counter(text, "chunkstore_chunk_puts_total", 'outcome="duplicate"') == 2


def test_a_new_node_key_is_durable_its_directory_synced_after_the_rename(tmp_path, monkeypatch):
    # Syncing the file alone is not enough: a power loss before the directory reaches the disk loses
    # the name, and the node comes back as another identity that no longer owns its batches.
    synced: list[tuple[bool, bool]] = []  # (is a directory, node.key already in place)
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append((stat.S_ISDIR(os.fstat(fd).st_mode), (tmp_path / "node.key").exists()))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    load_node_key(tmp_path)
    assert (True, True) in synced


def test_a_node_key_write_that_fails_leaves_no_temporary_file(tmp_path, monkeypatch):
    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError):
        load_node_key(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
