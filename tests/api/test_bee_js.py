"""The real JavaScript client, @ethersphere/bee-js 12, against the real daemon.

``tests/js/drive.mjs`` drives a daemon with bee-js: connection and version
checks, ``/health``, ``/readiness``, ``/status``, ``/reservestate``,
``/chainstate`` (when served), ``/batches``, CAC uploads stamped by bee-js's own
``Stamper`` (single chunks and a ``MerkleTree`` of 17), SOCs through the SOC
writer and through ``POST /chunks``, a feed update at an explicit index,
downloads compared byte for byte, the error answers bee-js surfaces, and
``rchash``. This test starts ``chunkstore serve`` on a free port with a fresh
data dir, registers a batch owned by the driver's key, runs the driver once per
pinned bee-js version and checks what it reports, then checks independently
(with this project's own code) that what bee-js stored is what it meant.

Two bee-js builds are pinned in ``tests/js/package.json``:

- ``@ethersphere/bee-js`` 12.3.1 (fetch + zod response schemas; targets Bee API 8.1.0);
- ``bee-js-12.1.0`` (an npm alias of 12.1.0: axios + cafe-utility ``Types``
  checks; targets Bee API 7.3.0, so its ``isSupportedApiVersion`` is false
  against an 8.x API, and its ``Stamper`` writes millisecond timestamps).

Skipped when ``node`` is not on PATH or ``npm ci --prefix tests/js`` has not
been run.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

import chunkstore
from api.version import API_VERSION
from chunkstore.swarm.cac import cac_address
from chunkstore.swarm.signer import Signer
from chunkstore.swarm.soc import parse_soc, soc_address
from chunkstore.swarm.stamp import parse_stamp, validate_stamp
from tests.api.beejs import requires_bee_js, run_driver
from tests.api.daemonproc import Daemon

# (package name in tests/js/node_modules, exact version, its Bee API major)
CLIENTS = [("@ethersphere/bee-js", "12.3.1", 8), ("bee-js-12.1.0", "12.1.0", 7)]

DEPTH = 20
BUCKET_DEPTH = 16  # bee-js's Stamper always uses the first 16 bits of the address as the bucket

STATUS_FIELDS = {
    "overlay": str, "proximity": int, "beeMode": str, "reserveSize": int, "reserveSizeWithinRadius": int,
    "pullsyncRate": (int, float), "storageRadius": int, "connectedPeers": int, "neighborhoodSize": int,
    "batchCommitment": int, "isReachable": bool, "lastSyncedBlock": int, "committedDepth": int, "isWarmingUp": bool,
}

pytestmark = requires_bee_js("@ethersphere/bee-js", "bee-js-12.1.0")


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path / "data")
    try:
        d.wait_ready(30)
        yield d
    finally:
        d.stop()


def check_status(status: dict[str, Any]) -> None:
    assert set(status) == set(STATUS_FIELDS)
    for name, typ in STATUS_FIELDS.items():
        v = status[name]
        assert isinstance(v, typ) and not (typ is int and isinstance(v, bool)), (name, v)


@pytest.mark.parametrize(("client", "version", "api_major"), CLIENTS, ids=[c[1] for c in CLIENTS])
def test_bee_js_drives_the_daemon(daemon: Daemon, client: str, version: str, api_major: int) -> None:
    key = os.urandom(32)
    owner = Signer(key).address
    batch_id = os.urandom(32)
    status, body = daemon.request("POST", "/batches", {
        "batchID": batch_id.hex(), "owner": owner.hex(), "depth": DEPTH, "bucketDepth": BUCKET_DEPTH,
        "immutable": False, "value": "100000000000", "start": 0,
    })
    assert status == 201, body
    # A chain state, where the daemon lets the operator set one (POST /chainstate), so that bee-js
    # parses non-zero chain numbers and a real batchTTL; the price is above bee-js's 24000 floor.
    chain = {"block": 1000, "chainTip": 1002, "totalAmount": "1000", "currentPrice": "30000"}
    chain_set = daemon.request("POST", "/chainstate", chain)[0]
    assert chain_set in (200, 404, 405), chain_set

    r = run_driver("drive.mjs", daemon, "--key", key.hex(), "--batch", batch_id.hex(), "--depth", str(DEPTH),
                   "--client", client, timeout=45)

    assert r["client"] == {"name": "@ethersphere/bee-js", "version": version}
    assert r["signer"] == owner.hex(), "bee-js and chunkstore derive different addresses from one key"

    # health, versions, readiness
    assert r["health"] == {"status": "ok", "version": chunkstore.__version__, "apiVersion": API_VERSION}
    assert r["readiness"] == {"status": "ready", "version": chunkstore.__version__, "apiVersion": API_VERSION}
    assert r["isSupportedApiVersion"] is (int(API_VERSION.split(".")[0]) == api_major)
    if version.startswith("12.3"):
        assert r["isSupportedApiVersion"] is True, "the pinned bee-js must accept this daemon's apiVersion"
    assert r["isSupportedExactVersion"] is False  # not a Bee build
    assert r["isConnected"] is True and r["isGateway"] is False

    # the redistribution state parses: bee-js 12.1 refused the empty phase the daemon used to send
    rs = r["redistributionState"]
    assert rs["phase"] in ("commit", "reveal", "claim") and rs["round"] == rs["block"] // 152, rs

    # status and reserve state, as bee-js parsed them
    check_status(r["statusBefore"])
    check_status(r["statusAfter"])
    assert r["statusBefore"]["overlay"] == daemon.listening["overlay"]
    assert r["statusBefore"]["beeMode"] == "full"
    assert r["statusBefore"]["reserveSize"] == 0
    for rs in (r["reserveState"], r["reserveStateAfter"]):
        assert set(rs) == {"radius", "storageRadius", "commitment", "reserveCapacityDoubling"}
        assert all(isinstance(v, int) and not isinstance(v, bool) for v in rs.values()), rs
    assert r["reserveState"]["commitment"] == r["statusBefore"]["batchCommitment"] == 1 << DEPTH

    # chain state: parsed by bee-js when the daemon serves it, else an honest 404
    chain_status, chain_body = daemon.request("GET", "/chainstate")
    if chain_status == 404:
        assert r["chainState"]["ok"] is False and r["chainState"]["error"]["status"] == 404
    else:
        assert chain_status == 200, chain_body
        assert r["chainState"]["ok"], r["chainState"]
        cs = r["chainState"]["value"]
        assert isinstance(cs["block"], int) and isinstance(cs["chainTip"], int)
        assert isinstance(cs["totalAmount"], str) and cs["totalAmount"].isdigit()
        assert isinstance(cs["currentPrice"], (int, float))
        if chain_set == 200:
            assert {k: cs[k] for k in ("block", "chainTip", "totalAmount")} == {
                "block": 1000, "chainTip": 1002, "totalAmount": "1000"}
            assert cs["currentPrice"] == 30000
            assert r["statusBefore"]["lastSyncedBlock"] == 1000

    # batches
    expected_batch = {
        "batchID": batch_id.hex(), "owner": owner.hex(), "depth": DEPTH, "bucketDepth": BUCKET_DEPTH,
        "immutable": False, "value": "100000000000", "start": 0,
    }
    listed = [b for b in r["batches"] if b["batchID"] == batch_id.hex()]
    assert len(listed) == 1
    assert {k: listed[0][k] for k in expected_batch} == expected_batch
    assert isinstance(listed[0]["batchTTL"], int)
    if chain_set == 200:  # (value - totalAmount) * blockTime / price: positive, not the "unknown" -1
        assert listed[0]["batchTTL"] > 0
    if "batch" in r:
        assert r["batch"] == listed[0]

    # uploads: every kind made it, with bee-js's own stamps, and each is what the daemon now holds
    kinds = [u["kind"] for u in r["uploaded"]]
    assert kinds.count("tree") == r["treeChunks"] == 17
    for k in ("cac-1", "cac-100", "cac-4095", "cac-4096", "cac-options", "cac-again",
              "soc-writer-300", "soc-writer-4096", "soc-chunks-500", "soc-chunks-4096", "feed-update"):
        assert kinds.count(k) == 1, (k, kinds)
    assert r["reuploadFreshStamp"] == r["reuploadSameStamp"] == next(
        u["address"] for u in r["uploaded"] if u["kind"] == "cac-again"
    )
    for u in r["uploaded"]:
        address = bytes.fromhex(u["address"])
        stamp = parse_stamp(bytes.fromhex(u["stamp"]))
        assert stamp.batch_id == batch_id
        validate_stamp(stamp, address, owner, DEPTH, BUCKET_DEPTH)  # bee-js's stamp is valid by our rules too
        status, data = daemon.request("GET", f"/chunks/{u['address']}")
        assert status == 200 and len(data) == u["size"], (u, status)
        if u["kind"].startswith(("soc", "feed")):
            soc = parse_soc(data)
            assert soc_address(soc.id, soc.owner) == address and soc.owner == owner
        else:
            assert cac_address(data) == address
    distinct = len({u["address"] for u in r["uploaded"]})
    assert distinct == len(r["uploaded"])
    # the re-upload with a fresh stamp holds a second slot of the batch for the same chunk
    assert distinct <= r["statusAfter"]["reserveSize"] <= distinct + 1

    # error answers reach bee-js as BeeResponseError with the daemon's status and JSON body
    errors = r["errors"]
    assert errors["missingChunk"]["status"] == 404
    assert errors["strangerStamp"]["status"] == 400
    assert errors["strangerStamp"]["responseBody"]["code"] == 400
    assert "owner" in errors["strangerStamp"]["responseBody"]["message"]
    assert errors["unknownBatch"]["status"] == 404
    assert errors["unknownBatch"]["responseBody"]["code"] == 404
    assert errors["batchIdOnly"]["status"] == 400
    assert "pre-signed" in errors["batchIdOnly"]["responseBody"]["message"]

    # rchash over what bee-js uploaded (depth 0: every chunk is in the neighbourhood)
    assert isinstance(r["rchashSeconds"], (int, float)) and r["rchashSeconds"] >= 0
